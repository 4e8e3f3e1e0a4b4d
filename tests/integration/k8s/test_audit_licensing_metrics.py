"""gpu_pool_audit's licensing link with a guest cluster and its metrics: the Kubernetes rig with
Prometheus and the DCGM exporter double (DCGM_FI_DEV_VGPU_LICENSE_STATUS per vGPU), and the DLS
contract double's leases counted against the guest's GPU nodes.

The double serves series only for GPUs a Running pod holds, so each GPU node that should be judged
runs a pod; a node without one has no series (gpu_node_license_unknown)."""
import tempfile
from pathlib import Path

import pytest
import yaml
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import
from kubernetes import client

import dls_double
from tests.lib.ansible_run import run_module
from tests.lib.helpers import prom, wait

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
DESIGN_FILE = ROOT / "examples" / "design.yml"
DESIGN = yaml.safe_load(DESIGN_FILE.read_text())
RIG_NODES = HERE / "chargeback_nodes.yml"  # inference-0, inference-1, training-0, notebooks-0
RIG_DCGM_WORKLOAD = Path(tempfile.mkdtemp(prefix="licensing-dcgm.")) / "workload.yml"
RIG_DCGM_WORKLOAD.write_text(yaml.safe_dump({"default": {"license_status": 1},
                                             "pods": [{"pod": "unlicensed-*", "license_status": 0}]}))
GPU_NODES = ["inference-0", "inference-1", "notebooks-0", "training-0"]
NS = "licensing-audit"


def pod(name, node, resource):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                     "resources": {"requests": {resource: "1"}, "limits": {resource: "1"}}}]}}


@pytest.fixture(scope="module")
def appliance():
    with dls_double.start() as dls:
        yield dls


@pytest.fixture(scope="module")
def token_dir(appliance, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokens")
    res = run_module("gpupool.vcf.dls_client_token", {
        "dls_host": appliance.host, "port": appliance.port, "username": dls_double.USERNAME,
        "password": dls_double.PASSWORD, "ca_file": appliance.ca_file, "expiry_days": 200,
        "dest": str(folder / ("%s.tok" % DESIGN["name"]))})[0]
    assert not res.get("failed"), res.get("msg")
    return folder


def audit(rig, dls, token_dir, **kw):
    args = {"design_file": str(DESIGN_FILE), "links": ["licensing"], "kubeconfig": str(rig.kubeconfig),
            "prometheus_url": rig.prometheus_url, "dls_host": dls.host, "dls_port": dls.port,
            "dls_username": dls_double.USERNAME, "dls_password": dls_double.PASSWORD, "dls_ca_file": dls.ca_file,
            "token_dir": str(token_dir)}
    args.update(kw)
    res = run_module("gpupool.vcf.gpu_pool_audit", args, env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert not res.get("failed"), res.get("msg")
    return res


def rules(res):
    return [(f["rule"], f["object"]) for f in res["findings"]]


def test_node_licenses_and_leases(k8s_metrics_rig, appliance, token_dir):
    rig = k8s_metrics_rig
    core = client.CoreV1Api(rig.api_client())
    core.create_namespace({"metadata": {"name": NS}})
    core.create_namespaced_pod(NS, pod("serve", "inference-0", "nvidia.com/mig-3g.40gb"))
    core.create_namespaced_pod(NS, pod("unlicensed-serve", "inference-1", "nvidia.com/mig-3g.40gb"))
    core.create_namespaced_pod(NS, pod("train", "training-0", "nvidia.com/gpu"))
    wait("3 license series", lambda: len(prom(rig, "DCGM_FI_DEV_VGPU_LICENSE_STATUS")) == 3, timeout=90, interval=0.3)
    appliance.set_leases(3)
    res = audit(rig, appliance, token_dir)
    where = "dls %s:%d" % (appliance.host, appliance.port)
    assert rules(res) == [("leases_short", where), ("gpu_node_unlicensed", "node inference-1"),
                          ("gpu_node_license_unknown", "node notebooks-0")], res["findings"]
    by_rule = dict((f["rule"], f) for f in res["findings"])
    assert "3 lease(s) for 4 GPU node(s)" in by_rule["leases_short"]["message"]
    assert "1 of 1 vGPU(s) not licensed (DCGM_FI_DEV_VGPU_LICENSE_STATUS 0)" in by_rule["gpu_node_unlicensed"]["message"]
    assert by_rule["gpu_node_license_unknown"]["severity"] == "warning"
    assert res["summary"]["link"]["licensing"] == {"error": 2, "warning": 1, "info": 0}

    # the license comes back, the notebook node runs a pod, one lease per node: clean
    Path(rig.dcgm_workload).write_text(yaml.safe_dump({"default": {"license_status": 1}}))  # the rig's copy
    core.create_namespaced_pod(NS, pod("notebook", "notebooks-0", "nvidia.com/gpu"))
    seen = []

    def licensed():
        seen[:] = sorted((r["metric"]["Hostname"], r["value"][1]) for r in prom(rig, "DCGM_FI_DEV_VGPU_LICENSE_STATUS"))
        return seen == [(n, "1") for n in GPU_NODES]
    try:
        wait("4 licensed series", licensed, timeout=90, interval=0.3)
    except pytest.fail.Exception:
        pods = [(p.metadata.name, p.spec.node_name, p.status.phase) for p in core.list_namespaced_pod(NS).items]
        pytest.fail("license series: %s; pods: %s" % (seen, pods))
    appliance.set_leases(4)
    res = audit(rig, appliance, token_dir)
    assert res["findings"] == [] and res["clean"] is True

    # without Prometheus: the nodes are not judged, and the finding says so; leases still are
    appliance.set_leases(2)
    res = audit(rig, appliance, token_dir, prometheus_url=None)
    assert rules(res) == [("leases_short", where), ("license_check_not_made", "gpu_nodes")]
    assert "2 lease(s) for 4 GPU node(s)" in res["findings"][0]["message"]
    assert "no prometheus_url given" in res["findings"][1]["message"]


def test_prometheus_that_does_not_answer_fails_naming_it(k8s_metrics_rig, appliance, token_dir):
    res = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(DESIGN_FILE), "links": ["licensing"], "dls_host": appliance.host,
        "dls_port": appliance.port, "dls_username": dls_double.USERNAME, "dls_password": dls_double.PASSWORD,
        "dls_ca_file": appliance.ca_file, "prometheus_url": "http://127.0.0.1:9", "request_timeout": 2},
        env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert res["failed"] and "Unable to audit link licensing" in res["msg"]
    assert "could not read the license status from Prometheus http://127.0.0.1:9" in res["msg"]
