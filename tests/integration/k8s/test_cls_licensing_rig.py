"""The cloud license service (CLS) path on the rig: site.yml's licensing link, run as site.yml has it (its play
loaded from playbooks/site.yml, after a play that derives the design as site.yml's first play does), makes the
GPU Operator's licensing Secret from a client configuration token file of the NVIDIA Licensing Portal with no
appliance; it refuses a token file others may read, an empty one, and a DLS appliance given as well. A new token
in the same file is a new Secret (rotation by name); gpu_pool_audit's licensing link with ``cls_token_file``
checks the file and reads each GPU node's license state after, from nvidia-smi -q in its driver pod (the rig
started with ``pod_exec``; nvidia-smi is tests/sim/nvidia_smi_double.py)."""
import base64
import json
import os
from pathlib import Path

import pytest
import yaml
from k8s_fixtures import wait_for
from kubernetes import client

from tests.lib.ansible_run import run_module, run_playbook
from tests.sim.k8s_rig import start

ROOT = Path(__file__).resolve().parents[3]
DESIGN_FILE = ROOT / "examples" / "design.yml"
SITE = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
LICENSING_PLAY = next(p for p in SITE if p["name"].startswith("Link 3 of 5: NVIDIA licensing"))
NS = "gpu-operator"  # the operator namespace the example design derives
PREFIX = "licensing-config"


@pytest.fixture(scope="module")
def exec_rig():
    rig = start(kueue=False, pod_exec=True)
    try:
        yield rig
    finally:
        rig.stop()


def licensing_link(rig, tmp_path, **extra):
    """site.yml's licensing play after the derive play, from a folder where its tasks/ resolve."""
    folder = tmp_path / "playbooks"
    folder.mkdir(exist_ok=True)
    if not (folder / "tasks").exists():
        os.symlink(ROOT / "playbooks" / "tasks", folder / "tasks")
    derive = {"name": "derive", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "design", "gpupool.vcf.gpu_pool_design": {"design_file": str(DESIGN_FILE)}, "register": "d"},
        {"name": "keep", "ansible.builtin.set_fact": {"gpupool_derived": "{{ d.derived }}", "gpupool_run_id": "t"}}]}
    (folder / "site-licensing.yml").write_text(yaml.safe_dump([derive, LICENSING_PLAY], sort_keys=False))
    extra_vars = {"gpupool_guest_kubeconfig": str(rig.kubeconfig), "gpupool_token_dir": str(tmp_path / "tokens")}
    extra_vars.update(extra)
    return run_playbook(folder / "site-licensing.yml", env=rig.env, extra_vars=extra_vars)


def licensing_secrets(core):
    return {s.metadata.name: s for s in core.list_namespaced_secret(NS, label_selector="gpupool.vcf/licensing=true").items}


def token_file(path, text, mode=0o600):
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_a_cls_token_file_becomes_the_licensing_secret_and_rotates_by_name(exec_rig, tmp_path):
    rig = exec_rig
    core = client.CoreV1Api(rig.api_client())
    token = token_file(tmp_path / "client_configuration_token_cls.tok", "cls-token-one." + "a" * 40)

    # refused before any change: a token file others may read, an empty one, and a DLS appliance as well
    token.chmod(0o644)
    bad = licensing_link(rig, tmp_path, gpupool_cls_token_file=str(token))
    assert bad.rc != 0 and "chmod 600" in bad.stdout and "mode 0644" in bad.stdout, bad.stdout[-2000:]
    token.chmod(0o600)
    empty = token_file(tmp_path / "empty.tok", "")
    empty.write_text("")
    bad = licensing_link(rig, tmp_path, gpupool_cls_token_file=str(empty))
    assert bad.rc != 0 and "the file is empty" in bad.stdout
    bad = licensing_link(rig, tmp_path, gpupool_cls_token_file=str(token), gpupool_dls_host="dls.example.com")
    assert bad.rc != 0 and "two license services" in bad.stdout
    if NS in [n.metadata.name for n in core.list_namespace().items]:
        assert licensing_secrets(core) == {}

    # the token file becomes the Secret the driver pods mount: its content, hashed into the name
    run = licensing_link(rig, tmp_path, gpupool_cls_token_file=str(token))
    assert run.rc == 0, run.stdout[-3000:]
    assert "cls-token-one" not in run.stdout + run.stderr  # the token is never shown
    [first] = licensing_secrets(core).values()
    data = {k: base64.b64decode(v).decode() for k, v in first.data.items()}
    assert data["client_configuration_token.tok"] == token.read_text().strip()
    assert "FeatureType=1" in data["gridd.conf"].replace(" ", "")
    assert first.metadata.name.startswith(PREFIX + "-") and first.type == "Opaque"
    assert not (tmp_path / "tokens").exists()  # no appliance token folder on the CLS path

    # a new token downloaded to the same path: a new Secret name, the old one kept for pods not yet redeployed
    token_file(token, "cls-token-two." + "b" * 40)
    run = licensing_link(rig, tmp_path, gpupool_cls_token_file=str(token))
    assert run.rc == 0, run.stdout[-3000:]
    names = sorted(licensing_secrets(core))
    assert len(names) == 2 and first.metadata.name in names
    [second] = [n for n in names if n != first.metadata.name]
    got = base64.b64decode(licensing_secrets(core)[second].data["client_configuration_token.tok"]).decode()
    assert got == token.read_text().strip() != data["client_configuration_token.tok"]

    # after the rotation each GPU node's license state is read from its driver pod; the token file is checked
    gpu_nodes = sorted(n.metadata.name for n in core.list_node().items
                       if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true")
    for i, node in enumerate(gpu_nodes):
        state = tmp_path / ("smi-%d.json" % i)
        status = "Licensed (Expiry: 2027-11-29 23:59:59 GMT)" if i else "Unlicensed (Restricted)"
        state.write_text(json.dumps({"gpus": [{"pci_bus_id": "00000000:02:00.0", "license_status": status}]}))
        name = "nvidia-driver-daemonset-%d" % i
        core.create_namespaced_pod(NS, {
            "metadata": {"name": name, "labels": {"app": "nvidia-driver-daemonset",
                                                  "app.kubernetes.io/component": "nvidia-driver"}},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "nvidia-driver-ctr", "image": "registry.example.com/driver:550"}]}})
        rig.exec_env(name, NS, {"GPUPOOL_SIM_NVIDIA_SMI_STATE": str(state)})
        wait_for("%s Running" % name, lambda n=name: core.read_namespaced_pod(n, NS).status.phase == "Running")
    res = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(DESIGN_FILE), "links": ["licensing"], "kubeconfig": str(rig.kubeconfig),
        "cls_token_file": str(token)}, env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert not res.get("failed"), res.get("msg")
    assert [(f["rule"], f["object"]) for f in res["findings"]] == [("gpu_node_unlicensed_guest", "node %s" % gpu_nodes[0])]
    # the same audit of a token file others may read says so
    token.chmod(0o640)
    res = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(DESIGN_FILE), "links": ["licensing"], "kubeconfig": str(rig.kubeconfig),
        "cls_token_file": str(token)}, env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert ("cls_token_open", "cls_token %s" % token) in [(f["rule"], f["object"]) for f in res["findings"]]
    token.chmod(0o600)
