"""Regenerate the shipped capture of the example platform after site.yml converged it
(tests/fixtures/captures/example.json) and what the original platform answered beside it
(tests/fixtures/captures/example.expected.json: gpu_host_info's inventory and gpu_pool_discover's design,
vSphere and guest).

The vSphere simulator started with examples/fleet.yml (the GPU hosts' SSH served, for MIG mode), the chain of
tests/lib/chain.py around it (the Kubernetes rig as Supervisor and guest, the DLS double), site.yml run with the
example design, then gpu_pool_capture with both kubeconfigs, gpu_host_info and gpu_pool_discover. Run it when the
readers or the example grow (`.venv/bin/python tests/tools/capture_example.py`, a few minutes: the converge);
tests/integration/test_gpu_pool_capture.py plays the capture back and expects the recorded answers."""
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim"), str(ROOT / ".build" / "collections")]
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".build" / "collections"))

from tests.lib import chain  # noqa: E402 pylint: disable=wrong-import-position
from tests.lib.ansible_run import run_module, run_playbook  # noqa: E402 pylint: disable=wrong-import-position

FOLDER = ROOT / "tests" / "fixtures" / "captures"
EXAMPLE = FOLDER / "example.json"
EXPECTED = FOLDER / "example.expected.json"
SITE = ROOT / "playbooks" / "site.yml"


def ok(res, what):
    if res.get("failed"):
        raise SystemExit("%s failed: %s" % (what, res.get("msg")))
    return res


def answers(env, kubeconfig, folder):
    """What the platform answers the readers: {inventory: gpu_host_info's hosts and clusters, design:
    gpu_pool_discover's design with the Supervisor and the guest read} (the same calls on a played-back one)."""
    info = ok(run_module("gpupool.vcf.gpu_host_info", {}, env=env)[0], "gpu_host_info")
    found = ok(run_module("gpupool.vcf.gpu_pool_discover", dict(
        dest=str(pathlib.Path(folder) / "discovered.yml"), force=True, supervisor_kubeconfig=str(kubeconfig),
        kubeconfig=str(kubeconfig)), env=env)[0], "gpu_pool_discover")
    return dict(inventory=dict(hosts=info["hosts"], clusters=info["clusters"]), design=found["design"],
                links_not_read=found["links_not_read"])


def capture(env, kubeconfig, dest, **args):
    """gpu_pool_capture of every link into ``dest`` (replaced); the module's result."""
    return ok(run_module("gpupool.vcf.gpu_pool_capture", dict(
        dest=str(dest), force=True, supervisor_kubeconfig=str(kubeconfig), kubeconfig=str(kubeconfig), **args),
        env=env)[0], "gpu_pool_capture")


def capture_example(dest=EXAMPLE, expected=EXPECTED):
    """Converge the example platform, capture it into ``dest`` and its answers into ``expected``."""
    with tempfile.TemporaryDirectory(prefix="capture-example-") as tmp:
        sim = chain.vsphere_with_ssh(ROOT / "examples" / "fleet.yml", pathlib.Path(tmp) / "ssh")
        try:
            with chain.platform(sim.env, tmp, ssh=sim) as (rig, _dls, env, extra):
                start = time.monotonic()
                run = run_playbook(SITE, env=env, extra_vars=extra)
                if run.rc != 0:
                    raise SystemExit("site.yml failed:\n" + run.stdout[-4000:] + run.stderr[-2000:])
                print("site.yml converged the example in %.0f s" % (time.monotonic() - start))
                res = capture(env, rig.kubeconfig, dest)
                got = answers(env, rig.kubeconfig, tmp)
        finally:
            sim.stop()
    pathlib.Path(expected).write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    return res


def main():
    res = capture_example()
    print("%s: %s; links not read: %s" % (EXAMPLE.relative_to(ROOT), json.dumps(res["counts"], sort_keys=True),
                                          res["links_not_read"] or "none"))


if __name__ == "__main__":
    main()
