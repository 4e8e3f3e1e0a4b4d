"""site.yml and audit.yml as AWX / Automation Controller runs them: through ansible-runner, on a
private data folder laid out as the controller lays it out (tests/lib/awx_injection.py), with the
credentials of examples/awx/credential_types.yml injected as the controller injects them
(environment variables, extra vars files, files of `file` injectors) and the survey answers of
examples/awx/job_templates.yml, against the simulators (vSphere, the Kubernetes rig as Supervisor
and guest cluster, the DLS double).

What the controller keeps of a job is checked: status and rc, the job events (the tasks run, the
no_log results censored), the stdout it stores (the events' stdout), the fact cache, the job's
environment as stored (secrets masked); no secret appears in any of them.
"""
import json
import os
import pathlib
import shutil
import stat
import subprocess

import pytest

import dls_double
import vsphere_sim
from tests.lib import awx_injection, chain
from tests.lib.ansible_run import COLLECTIONS, VENV_BIN, ensure_collection_tree
from tests.integration.test_no_secret_leak import licensing_secret_values, secrets_of

ROOT = pathlib.Path(__file__).resolve().parents[2]


def project_copy(dest):
    """The project as the controller checks it out into the job's folder: playbooks and the design."""
    for part in ("playbooks", "examples"):
        shutil.copytree(ROOT / part, dest / "project" / part)


@pytest.fixture(scope="module")
def vsphere(tmp_path_factory):
    """The example fleet whose GPU hosts answer nvidia-smi over SSH (MIG mode of the H100 pool)."""
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True)
    with vsphere_sim.start(ROOT / "examples" / "fleet.yml", ssh_authorized_keys=keys / "id.pub") as running:
        running.key = (keys / "id").read_text()
        yield running


def credentials(vsphere, rig, dls):
    """One credential of each type the templates take, its inputs as entered in the controller."""
    kubeconfig = pathlib.Path(rig.kubeconfig).read_text()
    return {
        "gpupool ESXi SSH": {"username": "root", "ssh_key_data": vsphere.key.rstrip("\n")},
        "gpupool vCenter": {"host": vsphere.host, "username": vsphere.user, "password": vsphere.password,
                            "port": str(vsphere.port), "ca": pathlib.Path(vsphere.ca_file).read_text()},
        "gpupool Supervisor kubeconfig": {"kubeconfig": kubeconfig},
        "gpupool guest kubeconfig": {"kubeconfig": kubeconfig},
        "gpupool DLS": {"host": dls.host, "port": str(dls.port), "username": dls_double.USERNAME,
                        "password": dls_double.PASSWORD, "ca": pathlib.Path(dls.ca_file).read_text()},
    }


def launch(folder, template, creds, answers, operator_vars, env, job_id, **options):
    ensure_collection_tree()
    project_copy(folder)
    base_env = {"PATH": "%s:%s:%s" % (VENV_BIN, ROOT / ".sim" / "bin", env["PATH"]),
                "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_LOCALHOST_WARNING": "False"}
    template = awx_injection.job_templates()[template]
    job = awx_injection.Job(folder, template, dict((t, creds[t]) for t in template["credential_types"]), answers,
                            extra_vars=operator_vars, base_env=base_env, job_id=job_id, **options)
    return job, job.run(timeout=900)


@pytest.fixture(scope="module")
def jobs(vsphere, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("awx")
    with pytest.MonkeyPatch.context() as patch, chain.platform(vsphere.env, tmp) as (rig, dls, env, extra):
        for var in [v for v in os.environ if v.startswith(("VMWARE_", "K8S_AUTH_"))]:
            patch.delenv(var)  # the credentials alone connect the jobs
        creds = credentials(vsphere, rig, dls)
        # what the operator adds to the templates' extra vars on this controller
        operator_vars = {"gpupool_token_dir": str(tmp / "tokens"),
                         "gpupool_gpu_operator_chart": extra["gpupool_gpu_operator_chart"],
                         "gpupool_gpu_operator_upgrade_crd": False,
                         # the simulated hosts listen on ports of their own, with keys made per run
                         "esxi_gpu_host_ssh_addresses": vsphere.ssh_addresses(),
                         "esxi_gpu_host_ssh_host_key_checking": False,
                         "esxi_gpu_host_power_off_vgpu_vms": True}
        # site as a Check job with Show changes: the whole chain's prediction, every credential used
        site = launch(tmp / "job-1", "gpupool site", creds, {}, operator_vars, env, 1, job_type="check", diff_mode=True)
        audit = launch(tmp / "job-2", "gpupool audit", creds, {"audit_report_format": "json", "audit_fail_on": "none"},
                       operator_vars, env, 2)
        yield {"site": site, "audit": audit, "rig": rig, "dls": dls, "tmp": tmp}


def events(job):
    folder = job.dir / "artifacts" / str(job.job_id) / "job_events"
    return sorted((json.loads(p.read_text()) for p in folder.glob("*.json")), key=lambda e: e["counter"])


def task_results(job, name):
    return [e["event_data"] for e in events(job)
            if e["event"] == "runner_on_ok" and e["event_data"].get("task") == name]


def all_secrets(vsphere, jobs):
    rig, dls, tmp = jobs["rig"], jobs["dls"], jobs["tmp"]
    values = []
    for token in sorted((tmp / "tokens").glob("*.tok")):
        values.append(("client configuration token", token.read_text().strip()))
    ns = chain.derived()["roles"]["nls_licensing"]["nls_licensing_operator_namespace"]
    from kubernetes import client
    names = [s.metadata.name for s in client.CoreV1Api(rig.api_client()).list_namespaced_secret(
        ns, label_selector="gpupool.vcf/licensing=true").items]
    for name in names:
        values += licensing_secret_values(rig, ns, name)
    values.append(("ESXi SSH private key", vsphere.key.strip().splitlines()[1]))
    return secrets_of(vsphere, rig, dls, values)


@pytest.mark.parametrize("which, tasks", [
    ("site", ["Check the design against every rule, before any change", "Roll the cluster's GPU hosts to the design",
              "VM classes of the pools and namespaces of the tenants", "Client configuration token from the DLS appliance",
              "Node pools of each VKS cluster of the design", "PriorityClasses, tenant quotas and Kueue queues of the design"]),
    ("audit", ["Audit every link against the design", "Show the summary"]),
])
def test_job_successful_with_its_tasks(jobs, which, tasks):
    job, run = jobs[which]
    assert (run.status, run.rc) == ("successful", 0), (job.dir / "artifacts" / str(job.job_id) / "stdout").read_text()[-4000:]
    started = [e["event_data"].get("task") for e in events(job) if e["event"] == "playbook_on_task_start"]
    for task in tasks:
        assert task in started, "%s: no task %r" % (which, task)
    stats = [e["event_data"] for e in events(job) if e["event"] == "playbook_on_stats"]
    assert len(stats) == 1 and not stats[0]["failures"] and not stats[0]["dark"]


def test_jobs_used_every_credential(jobs):
    """The Check job of site predicted changes through every link without making any (no token in
    the token folder), the token task's result without a secret; the audit (its survey's report
    format) audited every link on the injected connections and wrote its report into the project
    folder of the job, as docs/awx.md says."""
    job, _run = jobs["site"]
    [stats] = [e["event_data"] for e in events(job) if e["event"] == "playbook_on_stats"]
    assert sum(stats["changed"].values()) > 0
    assert not list((jobs["tmp"] / "tokens").glob("*.tok"))
    # the token task is not no_log (a DLS failure must say its cause); its result holds no secret: the
    # password is a no_log option, the token is only written to the token folder (none in check mode),
    # and test_no_secret_in_what_the_controller_keeps looks for every secret in every event
    [token] = task_results(job, "Client configuration token from the DLS appliance")
    assert "censored" not in token["res"] and token["res"].get("changed") is True, token["res"]
    args = token["res"].get("invocation", {}).get("module_args", {})
    assert args.get("password") in (None, "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"), args
    audit, _run = jobs["audit"]
    [result] = task_results(audit, "Audit every link against the design")
    # vCenter (esxi, vsphere), Supervisor (vks), guest cluster (guest), DLS (licensing)
    assert {"esxi", "vsphere", "vks", "guest", "licensing"} <= set(result["res"]["audited"])
    report = json.loads((audit.dir / "project" / "gpu-pool-audit.md").read_text())
    assert report["summary"] == result["res"]["summary"] and report["audited"] == result["res"]["audited"]


def test_no_secret_in_what_the_controller_keeps(vsphere, jobs):
    secrets = all_secrets(vsphere, jobs)
    # the Check job logged in to the DLS appliance (a bearer token) but minted no client token
    assert any(label.startswith("DLS bearer") for label in secrets) and dls_double.PASSWORD in secrets.values()
    for which in ("site", "audit"):
        job, run = jobs[which]
        artifacts = job.dir / "artifacts" / str(job.job_id)
        kept = {"stdout": (artifacts / "stdout").read_text(), "rc": (artifacts / "rc").read_text(),
                "status": (artifacts / "status").read_text(), "job environment": json.dumps(job.safe_env)}
        for i, event in enumerate(events(job)):
            kept["event %d" % i] = json.dumps(event)
        # the fact cache the controller saves per host of the job (ansible-runner's jsonfile cache)
        [stats] = [e["event_data"] for e in events(job) if e["event"] == "playbook_on_stats"]
        cached = sorted((artifacts / "fact_cache").glob("*"))
        assert set(p.name for p in cached) <= set(stats["ok"]), [p.name for p in cached]
        for path in cached:
            kept["fact cache %s" % path.name] = path.read_text()
        # the controller stores the events' stdout, in order, as the job's output: the same lines
        stored = "\n".join(e["stdout"] for e in events(job) if e.get("stdout"))
        kept["stored output"] = stored
        assert [line for line in stored.splitlines() if line.strip()] == \
            [line for line in run.stdout.read().splitlines() if line.strip()]
        leaked = ["%s in %s" % (label, where) for where, text in kept.items()
                  for label, value in secrets.items() if value and value in text]
        assert not leaked, "%s: %s" % (which, ", ".join(leaked))
        assert job.safe_env["VMWARE_PASSWORD"] == awx_injection.MASK and job.env["VMWARE_PASSWORD"] == vsphere.password
        # the one artifact holding the environment (and so the vCenter password) is ansible-runner's
        # record of the command, readable by its owner only; the controller keeps the masked one
        holding = sorted(str(p.relative_to(artifacts)) for p in artifacts.rglob("*")
                         if p.is_file() and vsphere.password in p.read_text(errors="replace"))
        assert holding == ["command"]
        assert stat.S_IMODE((artifacts / "command").stat().st_mode) == 0o600


def test_credential_files_as_the_controller_writes_them(jobs):
    job, _run = jobs["site"]
    guest = job.injections["gpupool guest kubeconfig"]
    assert set(guest.extra_vars) == {"gpupool_guest_kubeconfig", "audit_kubeconfig"}
    path = pathlib.Path(guest.files["template"])
    assert guest.extra_vars["gpupool_guest_kubeconfig"] == str(path) and path.parent == job.dir / "env"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(pathlib.Path(guest.extra_vars_file).stat().st_mode) == 0o400
    assert "!unsafe" in pathlib.Path(guest.extra_vars_file).read_text()
    # the credential's extra vars reach the job as `-e @file`, never in the arguments themselves
    command = json.loads((job.dir / "artifacts" / "1" / "command").read_text())["command"]
    assert "@%s" % guest.extra_vars_file in command
    assert not any(dls_double.PASSWORD in arg for arg in command)
