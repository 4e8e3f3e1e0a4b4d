"""vks_node_pool and the vks_gpu_node_pools role against the rig's Supervisor-like Cluster API."""
from __future__ import annotations

import threading

from kubernetes import dynamic

from tests.lib.ansible_run import run_module, run_playbook

CAPI = "cluster.x-k8s.io"
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _clusters(api, version="v1beta2"):
    return dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/{version}", kind="Cluster")


def _create(api, ns, name, legacy=False):
    cpu = {"class": "node-pool", "name": "cpu", "replicas": 2, "failureDomain": "zone-a",
           "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}}
    topo = {"version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 3},
            "workers": {"machineDeployments": [cpu]},
            "variables": [{"name": "vmClass", "value": "best-effort-large"},
                          {"name": "storageClass", "value": "gold"}]}
    # the legacy class is referenced from a v1beta2 Cluster: the rig stores v1beta2 without
    # conversion, so a v1beta1 Cluster's topology.class does not survive storage there
    cls = "tanzukubernetescluster" if legacy else "builtin-generic-v3.4.0"
    topo["classRef"] = {"name": cls, "namespace": "vmware-system-vks-public"}
    version = "v1beta2"
    _clusters(api, version).create(namespace=ns, body={
        "apiVersion": f"{CAPI}/{version}", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"topology": topo}})


def _mds(api, ns, name, version="v1beta2"):
    obj = _clusters(api, version).get(namespace=ns, name=name).to_dict()
    return {m["name"]: m for m in obj["spec"]["topology"]["workers"]["machineDeployments"]}, obj


def test_vks_node_pool_lifecycle(k8s_rig, k8s_api, k8s_namespace):
    _create(k8s_api, k8s_namespace, "gpu-cluster")
    env = k8s_rig.env
    args = {"namespace": k8s_namespace, "cluster_name": "gpu-cluster", "node_pools": [
        {"name": "inference", "replicas": 2, "vm_class": "vmclass-h100-80c",
         "labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}]}
    # check mode predicts, nothing stored
    res = run_module("gpupool.vcf.vks_node_pool", args, env=env, check=True, diff=True)[0]
    assert res.get("changed") is True, res
    assert "inference" not in _mds(k8s_api, k8s_namespace, "gpu-cluster")[0]
    predicted = res["machine_deployments"]
    assert res["diff"]["before"]["machineDeployments"][0]["name"] == "cpu"
    # converge
    res = run_module("gpupool.vcf.vks_node_pool", args, env=env, diff=True)[0]
    assert res.get("changed") is True, res
    assert res["machine_deployments"] == predicted
    mds, obj = _mds(k8s_api, k8s_namespace, "gpu-cluster")
    assert mds["cpu"]["replicas"] == 2 and mds["cpu"]["failureDomain"] == "zone-a"  # other pool untouched
    assert obj["spec"]["topology"]["controlPlane"]["replicas"] == 3
    ovs = {o["name"]: o["value"] for o in mds["inference"]["variables"]["overrides"]}
    assert ovs["vmClass"] == "vmclass-h100-80c"
    assert ovs["node"] == {"labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}
    assert res["variable_plan"]["taints"] == {"variable": "node", "property": "taints"}
    # second run: nothing to change
    res = run_module("gpupool.vcf.vks_node_pool", args, env=env)[0]
    assert res.get("changed") is False, res
    # scale only: labels and taints left alone
    scale_only = {**args, "node_pools": [{"name": "inference", "replicas": 3}]}
    res = run_module("gpupool.vcf.vks_node_pool", scale_only, env=env)[0]
    assert res["changed"] is True
    mds = _mds(k8s_api, k8s_namespace, "gpu-cluster")[0]
    assert mds["inference"]["replicas"] == 3 and mds["cpu"]["replicas"] == 2
    assert {o["name"] for o in mds["inference"]["variables"]["overrides"]} == {"vmClass", "node"}
    # bad input fails with no change
    bad_name = {**args, "node_pools": [{"name": "Bad_Name", "replicas": 1}]}
    res = run_module("gpupool.vcf.vks_node_pool", bad_name, env=env)[0]
    assert res.get("failed") and "node_pools[0].name 'Bad_Name' is not a DNS label" in res["msg"], res["msg"]
    assert set(_mds(k8s_api, k8s_namespace, "gpu-cluster")[0]) == {"cpu", "inference"}
    # purge removes what is not listed and the module created: cpu was there before, it stays
    res = run_module("gpupool.vcf.vks_node_pool", {**args, "purge": True}, env=env)[0]
    assert res["kept_foreign"] == ["cpu"] and res["owned"] == ["inference"], res
    assert set(_mds(k8s_api, k8s_namespace, "gpu-cluster")[0]) == {"cpu", "inference"}


def test_vks_node_pool_retries_on_conflict(k8s_rig, k8s_api, k8s_namespace):
    """Another writer bumps the Cluster while the module runs: no lost update."""
    _create(k8s_api, k8s_namespace, "busy")
    stop = threading.Event()

    def other_writer():
        clusters = _clusters(k8s_api)
        i = 0
        while not stop.is_set():
            i += 1
            clusters.patch(namespace=k8s_namespace, name="busy", content_type="application/merge-patch+json",
                           body={"metadata": {"annotations": {"other-writer": str(i)}}})
            stop.wait(0.02)

    t = threading.Thread(target=other_writer, daemon=True)
    t.start()
    try:
        res = run_module("gpupool.vcf.vks_node_pool", {
            "namespace": k8s_namespace, "cluster_name": "busy", "retries": 50,
            "node_pools": [{"name": "train", "replicas": 1, "vm_class": "vmclass-a100-7-10c"}]}, env=k8s_rig.env)[0]
    finally:
        stop.set()
        t.join()
    assert res.get("changed") is True, res
    mds, obj = _mds(k8s_api, k8s_namespace, "busy")
    assert "train" in mds and int(obj["metadata"]["annotations"]["other-writer"]) > 0


def test_legacy_class_labels_and_taints_as_lists(k8s_rig, k8s_api, k8s_namespace):
    _create(k8s_api, k8s_namespace, "legacy", legacy=True)
    args = {"namespace": k8s_namespace, "cluster_name": "legacy",
            "node_pools": [{"name": "gpu", "replicas": 1, "vm_class": "vmclass-h100-80c",
                            "labels": {"gpupool.vcf/workload": "training"}}]}
    res = run_module("gpupool.vcf.vks_node_pool", args, env=k8s_rig.env)[0]
    assert res.get("changed") is True, res
    assert res["variable_plan"]["labels"] == {"variable": "nodePoolLabels", "property": None, "form": "kv_list"}
    mds = _mds(k8s_api, k8s_namespace, "legacy")[0]
    ovs = {o["name"]: o["value"] for o in mds["gpu"]["variables"]["overrides"]}
    assert ovs["nodePoolLabels"] == [{"key": "gpupool.vcf/workload", "value": "training"}]
    # the v3.1-era classes carry taints in nodePoolTaints (a class without one: test_node_pool_class_shapes.py)
    args["node_pools"][0]["taints"] = [TAINT]
    res = run_module("gpupool.vcf.vks_node_pool", args, env=k8s_rig.env)[0]
    assert res.get("changed") is True and res["variable_plan"]["taints"]["variable"] == "nodePoolTaints", res
    ovs = {o["name"]: o["value"] for o in _mds(k8s_api, k8s_namespace, "legacy")[0]["gpu"]["variables"]["overrides"]}
    assert ovs["nodePoolTaints"] == [TAINT] and ovs["nodePoolLabels"] == [{"key": "gpupool.vcf/workload", "value": "training"}]


def test_role_vks_gpu_node_pools(k8s_rig, k8s_api, k8s_namespace):
    _create(k8s_api, k8s_namespace, "roles")
    play = [{"hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/gpupool.vcf.k8s": {"kubeconfig": str(k8s_rig.kubeconfig)}},
             "roles": [{"role": "gpupool.vcf.vks_gpu_node_pools",
                        "vks_gpu_node_pools_cluster_name": "roles",
                        "vks_gpu_node_pools_namespace": k8s_namespace,
                        "vks_gpu_node_pools_node_pools": [
                            {"name": "inference", "replicas": 2, "vm_class": "vmclass-h100-80c",
                             "labels": {"gpupool.vcf/workload": "inference"}},
                            {"name": "cpu", "replicas": 2, "gpu": False}]}]}]
    runs = {}
    for mode in ("check", "converge", "again"):
        r = run_playbook(play, check=mode == "check", diff=True)
        assert r.rc == 0, r.stdout[-3000:]
        runs[mode] = r.result("gpupool.vcf.vks_gpu_node_pools : Node pools of VKS cluster %s/roles" % k8s_namespace)
    assert runs["check"]["changed"] and runs["converge"]["changed"] and not runs["again"]["changed"]
    assert runs["check"]["machine_deployments"] == runs["converge"]["machine_deployments"]
    mds = _mds(k8s_api, k8s_namespace, "roles")[0]
    node = {o["name"]: o["value"] for o in mds["inference"]["variables"]["overrides"]}["node"]
    assert node["taints"] == [TAINT]
    assert "node" not in {o["name"] for o in mds["cpu"]["variables"]["overrides"]}
