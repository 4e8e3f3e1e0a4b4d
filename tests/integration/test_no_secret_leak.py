"""No password or token in what a failing run prints, even with -vvv.

Each link of site.yml is made to fail on purpose (the run lease, before link 1: a vCenter that does not
resolve, a wrong password; licensing: the DLS appliance refusing the credential, and down; VKS: a Supervisor API that
refuses connections; guest: a chart that does not exist, after the licensing link made its Secret).
Every run goes through ansible-playbook -vvv with the default output, as an operator sees it, and
neither the vCenter password, the DLS credential, a DLS bearer token, the Kubernetes token, the
client configuration token nor the licensing Secret's content may appear in stdout or stderr;
the failure message must.

The rescue blocks of site.yml are also run on failures made to measure: a no_log task that fails
without msg while its result holds the token, a task that fails without msg, a rescue with no
failed result.
"""
import base64
import copy
import os
import pathlib
import subprocess

import pytest
import yaml

import dls_double
from tests.lib import chain
from tests.lib.ansible_run import VENV_BIN, ansible_env

ROOT = pathlib.Path(__file__).resolve().parents[2]

SITE = ROOT / "playbooks" / "site.yml"
FLEET = ROOT / "examples" / "fleet.yml"
WRONG_VC_PASSWORD = "Wrong-vCenter-Pass-7c1e"
WRONG_DLS_PASSWORD = "Wrong-Dls-Pass-93ab"


def run_vvv(playbook, env, extra_vars=None, limit=None, timeout=900):
    """ansible-playbook -vvv with the default output; returns (rc, stdout + stderr)."""
    cmd = [str(VENV_BIN / "ansible-playbook"), "-vvv", "-i", "localhost,", "-c", "local", str(playbook)]
    if limit:
        cmd += ["--limit", limit]
    if extra_vars:
        cmd += ["-e", yaml.safe_dump(extra_vars, default_flow_style=True, width=10000).strip()]
    run_env = ansible_env(env)
    run_env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    run_env.pop("ANSIBLE_CALLBACK_RESULT_FORMAT", None)
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    return proc.returncode, proc.stdout + "\n" + proc.stderr


@pytest.fixture(scope="module")
def pool(vsphere, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leak")
    with chain.platform(vsphere.env, tmp) as (rig, dls, env, extra):
        yield rig, dls, env, extra, tmp


def rig_token(rig):
    return yaml.safe_load(pathlib.Path(rig.kubeconfig).read_text())["users"][0]["user"]["token"]


def secrets_of(vsphere, rig, dls, extra=()):
    """Every secret value that must never be printed."""
    out = {"vCenter password": vsphere.password, "DLS password": dls_double.PASSWORD,
           "Kubernetes token": rig_token(rig)}
    for i, bearer in enumerate(dls.state.bearers):
        out["DLS bearer %d" % i] = bearer
    for label, value in extra:
        out[label] = value
    return out


def assert_no_secret(output, secrets):
    leaked = [label for label, value in secrets.items() if value and value in output]
    assert not leaked, "printed: %s" % ", ".join(leaked)


def licensing_secret_values(rig, namespace, name):
    """The Secret's data as stored (base64) and decoded, and the token alone."""
    from kubernetes import client
    secret = client.CoreV1Api(rig.api_client()).read_namespaced_secret(name, namespace)
    out = []
    for key, value in secret.data.items():
        out.append(("Secret %s (base64)" % key, value))
        decoded = base64.b64decode(value).decode().strip()
        if key.endswith(".tok"):
            out.append(("client configuration token", decoded))
    return out


def test_guest_link_failure_after_licensing_prints_no_token(vsphere, pool):
    """Licensing succeeds (token minted, Secret made), then the guest link fails on a chart that
    does not exist: nothing of the token, the Secret or any credential is printed."""
    rig, dls, env, extra, tmp = pool
    extra = dict(extra, gpupool_gpu_operator_chart=str(tmp / "no-such-chart.tgz"))
    rc, out = run_vvv(SITE, env, extra, limit="localhost")
    assert rc != 0
    assert "Link 'guest' failed: " in out and "Later links were not run." in out
    tokens = sorted((tmp / "tokens").glob("*.tok"))
    assert tokens, "the licensing link made no token"
    token = tokens[0].read_text().strip()
    ns = chain.derived()["roles"]["nls_licensing"]["nls_licensing_operator_namespace"]
    from kubernetes import client
    names = [s.metadata.name for s in client.CoreV1Api(rig.api_client()).list_namespaced_secret(
        ns, label_selector="gpupool.vcf/licensing=true").items]
    assert names
    values = [("client configuration token", token), ("token (base64)", base64.b64encode(token.encode()).decode())]
    values += licensing_secret_values(rig, ns, names[0])
    assert dls.state.bearers, "the DLS appliance issued no bearer token"
    assert "module_args" in out  # -vvv: every task's arguments are printed
    assert_no_secret(out, secrets_of(vsphere, rig, dls, values))


def test_licensing_link_dls_refusing_the_credential(vsphere, pool, tmp_path):
    rig, dls, env, extra, _tmp = pool
    extra = dict(extra, gpupool_dls_password=WRONG_DLS_PASSWORD, gpupool_token_dir=str(tmp_path / "tokens"))
    rc, out = run_vvv(SITE, env, extra, limit="localhost")
    assert rc != 0
    # the token task has no task-level no_log (the module hides the password): the cause reaches the user,
    # naming the appliance and the user whose login was refused
    where = "%s:%s" % (extra["gpupool_dls_host"], extra.get("gpupool_dls_port", 443))
    assert ("Link 'licensing' failed: Unable to get a client configuration token from DLS %s: login refused for user %s "
            "at DLS appliance %s" % (where, extra["gpupool_dls_username"], where)) in out, out[-3000:]
    assert "its output is hidden" not in out
    assert_no_secret(out, secrets_of(vsphere, rig, dls, [("wrong DLS password", WRONG_DLS_PASSWORD)]))


def test_licensing_link_dls_unreachable(vsphere, pool, tmp_path):
    rig, dls, env, extra, _tmp = pool
    extra = dict(extra, gpupool_dls_port=9, gpupool_token_dir=str(tmp_path / "tokens"))  # nothing listens there
    rc, out = run_vvv(SITE, env, extra, limit="localhost")
    assert rc != 0
    where = "%s:9" % extra["gpupool_dls_host"]
    assert "Link 'licensing' failed: Unable to get a client configuration token from DLS %s: DLS appliance unreachable at %s (" \
        % (where, where) in out, out[-3000:]
    assert_no_secret(out, secrets_of(vsphere, rig, dls))


def test_vks_link_unreachable_api(vsphere, pool, tmp_path):
    rig, dls, env, extra, _tmp = pool
    kubeconfig = yaml.safe_load(pathlib.Path(rig.kubeconfig).read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens there
    bad = tmp_path / "supervisor.kubeconfig"
    bad.write_text(yaml.safe_dump(kubeconfig))
    bad.chmod(0o600)
    extra = dict(extra, gpupool_supervisor_kubeconfig=str(bad))
    for key in [k for k in extra if k.startswith("gpupool_dls_")]:
        del extra[key]  # the licensing link is skipped
    rc, out = run_vvv(SITE, env, extra, limit="localhost")
    assert rc != 0
    assert "Link 'VKS' failed: " in out and "127.0.0.1:9" in out
    assert_no_secret(out, secrets_of(vsphere, rig, dls))


# a vCenter that refuses the password or does not resolve stops the run at its first vCenter call: the run lease,
# taken before link 1 (the links' own rescues on such failures: test_rescue_prints_only_the_message below and
# test_site_cluster_failure.py)
def test_run_lease_wrong_vcenter_password(vsphere, pool):
    rig, dls, env, _extra, _tmp = pool
    rc, out = run_vvv(SITE, dict(env, VMWARE_PASSWORD=WRONG_VC_PASSWORD), limit="localhost,gpupool_vcenters")
    assert rc != 0
    assert "Run lease: Unable to connect to vCenter: " in out and "invalid user name or password" in out
    assert "No link was run." in out
    assert_no_secret(out, secrets_of(vsphere, rig, dls, [("wrong vCenter password", WRONG_VC_PASSWORD)]))


def test_run_lease_bad_vcenter_host(vsphere, pool):
    rig, dls, env, _extra, _tmp = pool
    rc, out = run_vvv(SITE, dict(env, VMWARE_HOST="vcenter.invalid"))
    assert rc != 0
    assert "Run lease: Unable to connect to vCenter: " in out and "vcenter.invalid" in out and "No link was run." in out
    assert_no_secret(out, secrets_of(vsphere, rig, dls))


# --- the rescue blocks themselves, on failures made to measure -------------------------------

TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWNsaWVudC1jb25maWd1cmF0aW9uLXRva2Vu.c2ln"
TOKEN_B64 = base64.b64encode(TOKEN.encode()).decode()


def rescues():
    """{link: the rescue task of site.yml} for every link."""
    out = {}
    for play in yaml.safe_load(SITE.read_text()):
        for task in play.get("tasks", []):
            for rescue in task.get("rescue", []):
                if rescue.get("name", "").startswith("Stop at the "):
                    out[rescue["name"][len("Stop at the "):]] = rescue
    return out


def test_every_link_has_a_rescue():
    assert sorted(rescues()) == ["ESXi host link", "VKS link", "guest link", "licensing link", "vSphere link"]


FAILING = {
    # a no_log task failing without msg while its result holds the token (base64)
    "no_log": {"name": "Licensing Secret content", "ansible.builtin.set_fact": {"content": TOKEN_B64},
               "failed_when": True, "no_log": True},
    # a task failing without msg, its result holding a value
    "no_msg": {"name": "Something without a message", "ansible.builtin.set_fact": {"content": TOKEN_B64},
               "failed_when": True},
    # a task failing with a message
    "msg": {"name": "Something with a message", "ansible.builtin.fail": {"msg": "the API server said no"}},
}
EXPECTED = {
    "no_log": ["task 'Licensing Secret content' failed; its output is hidden (no_log) because it handles credentials "
               "or licensing data"],
    # ansible-core 2.19 gives every failed result a msg of its own
    "no_msg": ["task 'Something without a message' failed without a message", "Task failed: Action failed: Unknown error."],
    "msg": ["the API server said no"],
}


@pytest.mark.parametrize("case", sorted(FAILING))
def test_rescue_prints_only_the_message(case, tmp_path):
    plays = []
    for link, rescue in sorted(rescues().items()):
        plays.append({"name": link, "hosts": "localhost", "gather_facts": False,
                      "vars": {"gpupool_esxi": {"esxi_gpu_host_cluster": "gpu-h100"}},
                      "tasks": [{"name": "block", "block": [copy.deepcopy(FAILING[case])],
                                 "rescue": [dict(copy.deepcopy(rescue), ignore_errors=True)]}]})
    playbook = tmp_path / "rescue.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    rc, out = run_vvv(playbook, dict(os.environ))
    assert rc == 0, out[-3000:]
    for link in ("ESXi host' failed on cluster gpu-h100: ", "vSphere' failed: ", "licensing' failed: ",
                 "VKS' failed: ", "guest' failed: "):
        assert any("Link '%s%s. Later links were not run." % (link, text) in out for text in EXPECTED[case]), \
            (link, out[-3000:])
    messages = [line for line in out.splitlines() if "Later links were not run" in line]
    assert len(messages) >= 5 and not [line for line in messages if TOKEN_B64 in line]
    if case == "no_log":
        assert TOKEN_B64 not in out


def test_rescue_without_a_failed_result_names_the_task(tmp_path):
    rescue = copy.deepcopy(rescues()["licensing link"])
    plays = [{"hosts": "localhost", "gather_facts": False, "tasks": [dict(rescue, ignore_errors=True)]}]
    playbook = tmp_path / "bare.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    rc, out = run_vvv(playbook, dict(os.environ))
    assert rc == 0, out[-3000:]
    assert "Link 'licensing' failed: a task failed and left no result. Later links were not run." in out
