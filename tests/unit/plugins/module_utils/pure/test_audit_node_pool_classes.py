"""The audit's VKS link on clusters of each ClusterClass generation the rig serves: the node pools
vks_node_pool writes (apply_pool) are read back through the same plan (read_pool) and judged; a
class with no place for the design's taints is a finding that names the class (no I/O)."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_report, _audit_vks
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _cluster_class as cc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
CLASSES = dict((o["metadata"]["name"], o)
               for doc in yaml.safe_load_all((ROOT / "tests" / "sim" / "k8s" / "supervisor.yml").read_text())
               for o in ((doc or {}).get("items") or [doc or {}]) if o.get("kind") == "ClusterClass")
NAMES = ["tanzukubernetescluster", "builtin-generic-v3.1.0", "builtin-generic-v3.4.0", "builtin-generic-v3.7.0"]


def rules(findings):
    return sorted((f["rule"], f["object"]) for f in findings)


def written(derived, cls, drop_taints=False):
    """{cluster: machineDeployments} as vks_node_pool writes the design's pools on class ``cls``."""
    plan = cc.variable_plan(cls)
    out = {}
    for name, _namespace, pools in _audit_vks._vks_expected(derived):
        if drop_taints:
            pools = [dict(p, taints=None) for p in pools]
        out[name] = cc.plan_machine_deployments([], pools, plan, "node-pool")
    return plan, out


def live(derived, plan, mds_by_cluster):
    return dict((name, dict(namespace=derived["vks"]["clusters"][name]["namespace"],
                            machine_deployments=dict((md["name"], cc.read_pool(md, {}, plan)) for md in mds)))
                for name, mds in mds_by_cluster.items())


@pytest.mark.parametrize("name", NAMES)
def test_the_pools_vks_node_pool_writes_audit_clean(name):
    derived = copy.deepcopy(DERIVED)
    plan, mds = written(derived, CLASSES[name])
    assert _audit_vks.audit_vks(derived, live(derived, plan, mds)) == []


@pytest.mark.parametrize("name", NAMES)
def test_a_dropped_taint_is_found_in_each_shape(name):
    derived = copy.deepcopy(DERIVED)
    plan, mds = written(derived, CLASSES[name])
    cluster = sorted(mds)[0]
    tainted = [p["name"] for c, _ns, pools in _audit_vks._vks_expected(derived) if c == cluster for p in pools if p.get("taints")]
    gpu = [md for md in mds[cluster] if md["name"] == tainted[0]][0]
    for ov in gpu["variables"]["overrides"]:
        if ov["name"] == plan["taints"]["variable"]:
            if plan["taints"]["property"]:
                ov["value"][plan["taints"]["property"]] = []
            else:
                ov["value"] = []
    out = _audit_vks.audit_vks(derived, live(derived, plan, mds))
    assert rules(out) == [("node_pool_taints_changed", "node_pool %s/%s" % (cluster, gpu["name"]))]


def test_a_class_without_taints_is_a_finding_naming_it():
    derived = copy.deepcopy(DERIVED)
    bare = copy.deepcopy(CLASSES["builtin-generic-v3.1.0"])
    bare["metadata"]["name"] = "custom-labels-only"
    bare["spec"]["variables"] = [v for v in bare["spec"]["variables"] if v["name"] != "nodePoolTaints"]
    plan, mds = written(derived, bare, drop_taints=True)
    out = _audit_vks.audit_vks(derived, live(derived, plan, mds))
    gpu_pools = sorted((c, p["name"]) for c, _ns, pools in _audit_vks._vks_expected(derived) for p in pools if p.get("taints"))
    assert gpu_pools and rules(out) == [("node_pool_class_lacks", "node_pool %s/%s" % x) for x in gpu_pools]
    assert "ClusterClass vmware-system-vks-public/custom-labels-only has no variable for node taints" in out[0]["message"]
    assert _audit_report.RULES["node_pool_class_lacks"][:2] == ("error", "vks") and out[0]["fix"]
