"""Regenerate the shipped capture of the example platform (tests/fixtures/captures/example.json):
the vSphere simulator started with examples/fleet.yml, gpu_pool_capture run against it. Run it when the
readers grow (`.venv/bin/python tests/tools/capture_example.py`); tests/integration/test_gpu_pool_capture.py fails while the shipped
capture differs from a fresh one."""
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim"), str(ROOT / ".build" / "collections")]
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(ROOT / ".build" / "collections"))

import vsphere_sim  # noqa: E402 pylint: disable=wrong-import-position
from tests.lib.ansible_run import run_module  # noqa: E402 pylint: disable=wrong-import-position

EXAMPLE = ROOT / "tests" / "fixtures" / "captures" / "example.json"


def capture_example(dest):
    """Capture the example fleet into ``dest`` (replaced); the module's result."""
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml")
    try:
        res = run_module("gpupool.vcf.gpu_pool_capture", dict(dest=str(dest), force=True), env=dict(sim.env))[0]
    finally:
        sim.stop()
    if res.get("failed"):
        raise SystemExit("capture failed: %s" % res.get("msg"))
    return res


def main():
    res = capture_example(EXAMPLE)
    print("%s: %s" % (EXAMPLE.relative_to(ROOT), json.dumps(res["counts"], sort_keys=True)))


if __name__ == "__main__":
    main()
