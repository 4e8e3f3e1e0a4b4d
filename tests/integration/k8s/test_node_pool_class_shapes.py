"""vks_node_pool and the audit's VKS link on clusters of each ClusterClass generation the rig serves
(tests/sim/k8s/supervisor.yml, sources in its README): v3.1-era nodePoolLabels/nodePoolTaints,
the v3.4 `node` variable, the later `node` variable listed only in status.variables; and a custom
class with no taint variable, which the module refuses before any change and the audit reports.

The pools are the ones the vks_gpu_node_pools role passes for a design (the audit's expectation),
so the converge and the audit are held to the same objects."""
from __future__ import annotations

from kubernetes import dynamic

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vks
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import read_vks
from tests.lib.ansible_run import run_module, run_playbook

CAPI = "cluster.x-k8s.io"
PUBLIC = "vmware-system-vks-public"
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# class -> (the override that carries labels, its value for the inference pool, the taints' override)
SHAPES = {
    "builtin-generic-v3.1.0": ("nodePoolLabels", [{"key": "gpupool.vcf/workload", "value": "inference"}], "nodePoolTaints"),
    "builtin-generic-v3.4.0": ("node", {"labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}, "node"),
    "builtin-generic-v3.7.0": ("node", {"labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}, "node"),
}


def _derived(namespace, names):
    """The part of derive()'s result the audit's VKS link reads: the role's inputs per cluster."""
    pools = [{"name": "inference", "replicas": 2, "vm_class": "vmclass-h100-80c",
              "labels": {"gpupool.vcf/workload": "inference"}},
             {"name": "cpu", "replicas": 1, "gpu": False}]
    return {"vks": {"clusters": dict((n, {"namespace": namespace}) for n in names)},
            "roles": {"vks_gpu_node_pools": [
                {"vks_gpu_node_pools_cluster_name": n, "vks_gpu_node_pools_namespace": namespace,
                 "vks_gpu_node_pools_node_pools": pools} for n in names]}}


def _clusters(api):
    return dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")


def _create(api, namespace, name, cls, cls_namespace=PUBLIC):
    topo = {"classRef": {"name": cls, "namespace": cls_namespace}, "version": "v1.35.5+vmware.1-vkr.1",
            "controlPlane": {"replicas": 1}, "workers": {"machineDeployments": []},
            "variables": [{"name": "vmClass", "value": "best-effort-large"},
                          {"name": "storageClass", "value": "gold"}]}
    _clusters(api).create(namespace=namespace, body={"apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster",
                                                     "metadata": {"name": name}, "spec": {"topology": topo}})


def _overrides(api, namespace, name):
    obj = _clusters(api).get(namespace=namespace, name=name).to_dict()
    mds = obj["spec"]["topology"]["workers"].get("machineDeployments") or []
    return dict((md["name"], dict((o["name"], o["value"]) for o in (md.get("variables") or {}).get("overrides") or []))
                for md in mds), obj["metadata"]["resourceVersion"]


def _params(rig):
    return {"kubeconfig": str(rig.kubeconfig), "request_timeout": 30}


def _converge(rig, namespace, expected):
    """One playbook: vks_node_pool on every cluster of ``expected`` ({cluster: pools})."""
    tasks = [{"name": "converge %s" % c, "gpupool.vcf.vks_node_pool": {
        "namespace": namespace, "cluster_name": c, "node_pools": pools}, "ignore_errors": True}
        for c, pools in sorted(expected.items())]
    res = run_playbook([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], env=rig.env)
    return dict((c, res.result("converge %s" % c)) for c in expected)


def test_each_class_shape_converges_and_audits_clean(k8s_rig, k8s_api, k8s_namespace):
    names = dict((cls, "c-" + cls.split("-")[-1].replace(".", "")) for cls in SHAPES)  # c-v310, c-v340, c-v370
    derived = _derived(k8s_namespace, list(names.values()))
    expected = dict((c, pools) for c, _ns, pools in _audit_vks._vks_expected(derived))
    for cls, cluster in names.items():
        _create(k8s_api, k8s_namespace, cluster, cls)
    first = _converge(k8s_rig, k8s_namespace, expected)
    versions = {}
    for cls, cluster in names.items():
        res = first[cluster]
        assert res.get("changed") is True, (cls, res)
        labels_var, value, taints_var = SHAPES[cls]
        assert res["variable_plan"]["class"] == f"{PUBLIC}/{cls}"
        assert res["variable_plan"]["labels"]["variable"] == labels_var
        assert res["variable_plan"]["taints"]["variable"] == taints_var
        ovs, versions[cluster] = _overrides(k8s_api, k8s_namespace, cluster)
        if labels_var == taints_var:
            assert ovs["inference"][labels_var] == value, (cls, ovs)
        else:
            assert ovs["inference"][labels_var] == value and ovs["inference"][taints_var] == [TAINT], (cls, ovs)
        assert ovs["inference"]["vmClass"] == "vmclass-h100-80c" and ovs["cpu"] == {}
    # rerun: nothing to change, nothing written
    again = _converge(k8s_rig, k8s_namespace, expected)
    for cls, cluster in names.items():
        assert again[cluster].get("changed") is False, (cls, again[cluster])
        assert _overrides(k8s_api, k8s_namespace, cluster)[1] == versions[cluster]
    # the audit reads the same Clusters through their classes and finds nothing
    live = read_vks(_params(k8s_rig), derived)
    assert set(live) == set(names.values())
    for cluster in names.values():
        assert live[cluster]["machine_deployments"]["inference"]["taints"] == [TAINT]
        assert live[cluster]["machine_deployments"]["inference"]["lacks"] == {}
    assert _audit_vks.audit_vks(derived, live) == []
    # a taint dropped by hand on the v3.1-era cluster: the audit sees it in that shape
    obj = _clusters(k8s_api).get(namespace=k8s_namespace, name=names["builtin-generic-v3.1.0"]).to_dict()
    inference = [md for md in obj["spec"]["topology"]["workers"]["machineDeployments"] if md["name"] == "inference"][0]
    inference["variables"]["overrides"] = [o for o in inference["variables"]["overrides"] if o["name"] != "nodePoolTaints"]
    _clusters(k8s_api).replace(namespace=k8s_namespace, body=obj)
    out = _audit_vks.audit_vks(derived, read_vks(_params(k8s_rig), derived))
    assert [(f["rule"], f["object"]) for f in out] == [("node_pool_taints_changed", "node_pool c-v310/inference")]
    # the Clusters' records hold the pools vks_node_pool made; where the design adopts, a pool the record
    # lacks (the annotation emptied by hand on c-v370) is named object_not_owned, and only there
    assert all(live[c]["owned"] == ["cpu", "inference"] for c in names.values()), live
    obj = _clusters(k8s_api).get(namespace=k8s_namespace, name=names["builtin-generic-v3.7.0"]).to_dict()
    obj["metadata"]["annotations"]["gpupool.vcf/node-pools"] = "cpu"
    _clusters(k8s_api).replace(namespace=k8s_namespace, body=obj)
    live = read_vks(_params(k8s_rig), derived)
    assert live[names["builtin-generic-v3.7.0"]]["owned"] == ["cpu"]
    assert not [f for f in _audit_vks.audit_vks(derived, live) if f["rule"] == "object_not_owned"]
    for entry in derived["roles"]["vks_gpu_node_pools"]:
        entry["vks_gpu_node_pools_adopt"] = True
    out = _audit_vks.audit_vks(derived, live)
    assert [(f["rule"], f["object"], f["severity"]) for f in out if f["rule"] == "object_not_owned"] == [
        ("object_not_owned", "node_pool c-v370/inference", "info")]


def test_a_class_without_a_taint_variable_fails_before_any_change(k8s_rig, k8s_api, k8s_namespace):
    """A custom class (in the vSphere Namespace) with labels but no taints: refused, named, nothing written."""
    ccs = dynamic.DynamicClient(k8s_api).resources.get(api_version=f"{CAPI}/v1beta2", kind="ClusterClass")
    ccs.create(namespace=k8s_namespace, body={
        "apiVersion": f"{CAPI}/v1beta2", "kind": "ClusterClass", "metadata": {"name": "custom-labels-only"},
        "spec": {"workers": {"machineDeployments": [{"class": "node-pool"}]}, "variables": [
            {"name": "vmClass", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}},
            {"name": "storageClass", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}},
            {"name": "nodeLabels", "required": False, "schema": {"openAPIV3Schema": {
                "type": "object", "additionalProperties": {"type": "string"}}}}]}})
    _create(k8s_api, k8s_namespace, "custom", "custom-labels-only", k8s_namespace)
    derived = _derived(k8s_namespace, ["custom"])
    pools = _audit_vks._vks_expected(derived)[0][2]
    before = _overrides(k8s_api, k8s_namespace, "custom")
    args = {"namespace": k8s_namespace, "cluster_name": "custom", "node_pools": pools}
    for check in (True, False):
        res = run_module("gpupool.vcf.vks_node_pool", args, env=k8s_rig.env, check=check)[0]
        assert res.get("failed") and not res.get("changed"), res
        assert f"ClusterClass {k8s_namespace}/custom-labels-only has no variable for node taints" in res["msg"], res["msg"]
        assert "node pool inference cannot set node taints" in res["msg"] and "nodeLabels" in res["msg"]
        assert _overrides(k8s_api, k8s_namespace, "custom") == before
    # the pools without their taints fit the class: labels go to its map variable
    res = run_module("gpupool.vcf.vks_node_pool", dict(args, node_pools=[dict(p, taints=None) for p in pools]),
                     env=k8s_rig.env)[0]
    assert res.get("changed") is True, res
    assert _overrides(k8s_api, k8s_namespace, "custom")[0]["inference"]["nodeLabels"] == {"gpupool.vcf/workload": "inference"}
    # the audit says the same: the design's taints have no place in this class
    out = _audit_vks.audit_vks(derived, read_vks(_params(k8s_rig), derived))
    assert [(f["rule"], f["object"]) for f in out] == [("node_pool_class_lacks", "node_pool custom/inference")]
    assert f"ClusterClass {k8s_namespace}/custom-labels-only has no variable for node taints" in out[0]["message"]
