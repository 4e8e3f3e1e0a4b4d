"""The guest-side license truth on the rig: ``nvidia-smi -q`` run through the pod exec API in each GPU node's
GPU Operator driver pod, as gpu_pool_audit's licensing link and pool_ready's ``licensed`` step read it.

The rig starts with ``pod_exec``: kwok serves the kubelet's exec API and runs an exec into a pod as a local
command with the environment of the pod's Exec (kwok.x-k8s.io/v1alpha1); ``nvidia-smi`` there is the rig's
double (tests/sim/nvidia_smi_double.py), which prints the license section of the state file this test writes
for each driver pod. Driver pods are made here as the operator's driver DaemonSet labels them; no controller
runs them. The DLS contract double stands in for the appliance (the licensing link needs one)."""
import json
import time
from pathlib import Path

import pytest
from k8s_fixtures import wait_for
from kubernetes import client

import dls_double
from tests.lib.ansible_run import run_module
from tests.sim.k8s_rig import start

ROOT = Path(__file__).resolve().parents[3]
DESIGN_FILE = ROOT / "examples" / "design.yml"
NS = "gpu-operator"  # the GPU Operator namespace the example design derives (guest default)
LICENSED = "Licensed (Expiry: 2027-11-29 23:59:59 GMT)"
UNLICENSED = "Unlicensed (Restricted)"


@pytest.fixture(scope="module")
def exec_rig():
    rig = start(kueue=False, pod_exec=True)
    try:
        yield rig
    finally:
        rig.stop()


@pytest.fixture(scope="module")
def appliance():
    with dls_double.start() as dls:
        yield dls


def write_state(path, *statuses):
    path.write_text(json.dumps({"driver_version": "550.127.05", "gpus": [
        {"pci_bus_id": "00000000:%02X:00.0" % (2 + i), "license_status": s} for i, s in enumerate(statuses)]}))


def driver_pod(rig, core, node, state):
    """A driver pod on ``node`` as the operator's DaemonSet labels it, with its Exec naming ``state``."""
    name = "nvidia-driver-daemonset-%s" % node
    core.create_namespaced_pod(NS, {
        "metadata": {"name": name, "labels": {"app": "nvidia-driver-daemonset",
                                              "app.kubernetes.io/component": "nvidia-driver"},
                     "annotations": {"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "nvidia-driver-ctr", "image": "registry.example.com/driver:550"},
                                {"name": "nvidia-peermem-ctr", "image": "registry.example.com/driver:550"}]}})
    rig.exec_env(name, NS, {"GPUPOOL_SIM_NVIDIA_SMI_STATE": str(state)})
    wait_for("%s Running" % name, lambda: core.read_namespaced_pod(name, NS).status.phase == "Running")
    return name


def audit(rig, dls, **kw):
    args = {"design_file": str(DESIGN_FILE), "links": ["licensing"], "kubeconfig": str(rig.kubeconfig),
            "dls_host": dls.host, "dls_port": dls.port, "dls_username": dls_double.USERNAME,
            "dls_password": dls_double.PASSWORD, "dls_ca_file": dls.ca_file}
    args.update(kw)
    res = run_module("gpupool.vcf.gpu_pool_audit", args, env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert not res.get("failed"), res.get("msg")
    return [(f["rule"], f["object"], f["message"]) for f in res["findings"] if f["rule"].startswith(("gpu_node", "license"))]


def test_audit_and_pool_ready_read_the_driver_pods_nvidia_smi(exec_rig, appliance, tmp_path):
    rig = exec_rig
    core = client.CoreV1Api(rig.api_client())
    core.create_namespace({"metadata": {"name": NS}})
    gpu_nodes = sorted(n.metadata.name for n in core.list_node().items
                       if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true")
    assert len(gpu_nodes) >= 3, gpu_nodes
    good, bad, none = gpu_nodes[:3]
    write_state(tmp_path / "good.json", LICENSED)
    write_state(tmp_path / "bad.json", LICENSED, UNLICENSED)
    driver_pod(rig, core, good, tmp_path / "good.json")
    bad_pod = driver_pod(rig, core, bad, tmp_path / "bad.json")

    # auto: the namespace runs driver pods, so they are the source; a GPU node without one is unknown
    t0 = time.monotonic()
    got = audit(rig, appliance)
    audit_s = time.monotonic() - t0
    expect = [("gpu_node_unlicensed_guest", "node %s" % bad,
               "GPU node %s: nvidia-smi -q in driver pod %s: 1 of 2 vGPU(s) not licensed (00000000:03:00.0 %s); "
               "unlicensed vGPUs run degraded" % (bad, bad_pod, UNLICENSED))]
    expect += [("gpu_node_license_unknown_guest", "node %s" % n,
                "GPU node %s: its license state is unknown: no GPU Operator driver pod "
                "(app.kubernetes.io/component=nvidia-driver) runs on the node" % n) for n in gpu_nodes[2:]]
    assert sorted(got) == sorted(expect), got
    # the DCGM source alone, without Prometheus, makes no check: the driver pods were what judged above
    assert [f[0] for f in audit(rig, appliance, license_source="dcgm")] == ["license_check_not_made"]

    # pool_ready on the unlicensed node: the licensed step is not reached and names the vGPU ...
    args = dict(kubeconfig=str(rig.kubeconfig), nodes=[bad], skip=["validated", "probe_pod"], poll_interval=0.3,
                timeout=30, step_timeouts={"licensed": 2})
    res = run_module("gpupool.vcf.pool_ready", args, env=rig.env)[0]
    assert res.get("failed") and "licensed" in res["msg"] and "00000000:03:00.0 %s" % UNLICENSED in res["msg"], res["msg"]
    # ... and once the driver says licensed (a new token picked up), it is, and so is the audit's reading
    write_state(tmp_path / "bad.json", LICENSED, LICENSED)
    res = run_module("gpupool.vcf.pool_ready", dict(args, step_timeouts={"licensed": 20}), env=rig.env)[0]
    assert not res.get("failed"), res.get("msg")
    step = [s for s in res["steps"] if s["name"] == "licensed"][0]
    assert step["state"] == "reached" and "%s (2 vGPUs)" % bad in step["detail"], step
    got = audit(rig, appliance)
    assert [f[:2] for f in got] == [("gpu_node_license_unknown_guest", "node %s" % n) for n in gpu_nodes[2:]]
    print("audit with %d driver pods: %.2f s" % (2, audit_s))
