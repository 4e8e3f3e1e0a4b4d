"""object_not_owned for VKS node pools: a pool that exists as designed but that its Cluster's record
(gpupool.vcf/node-pools) does not hold is, where the design adopts the VKS cluster, an info finding on the vks
link saying site.yml records it; a cluster not adopted, a recorded pool, a pool that drifted (its own finding)
and a Cluster whose record was not read give none."""
import copy

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_vks, _audit_vsphere
from tests.unit.plugins.module_utils.pure.test_audit_node_pool_classes import CLASSES, DERIVED, live, written


def state(derived, owned):
    plan, mds = written(derived, CLASSES["builtin-generic-v3.1.0"])
    clusters = live(derived, plan, mds)
    for name in clusters:
        if owned is not None:
            clusters[name]["owned"] = list(owned(name, mds[name]))
    return clusters, mds


def not_owned(findings):
    return sorted(f["object"] for f in findings if f["rule"] == "object_not_owned")


def test_a_pool_as_designed_that_the_record_lacks_is_named_with_the_way_to_adopt_it():
    derived = copy.deepcopy(DERIVED)
    clusters, mds = state(derived, lambda name, pools: [p["name"] for p in pools][1:])
    assert _audit_vks.audit_vks(derived, clusters) == []  # not adopted
    for entry in derived["roles"]["vks_gpu_node_pools"]:
        entry["vks_gpu_node_pools_adopt"] = True
    out = _audit_vks.audit_vks(derived, clusters)
    cluster = sorted(mds)[0]
    first = mds[cluster][0]["name"]
    assert not_owned(out) == ["node_pool %s/%s" % (cluster, first)]
    [f] = out
    assert f["severity"] == "info" and f["link"] == "vks" and _audit.is_clean(out)
    assert f["fix"].startswith("run site.yml: the design sets adopt: true (vks_clusters[].adopt)")
    # the rule's table fix (its row is the vsphere link's) with this link's design key
    assert f["fix"] == _audit_vsphere.RULES["object_not_owned"][3].format(key="vks_clusters[].adopt")


def test_recorded_pools_drifted_pools_and_an_unread_record_give_none():
    derived = copy.deepcopy(DERIVED)
    for entry in derived["roles"]["vks_gpu_node_pools"]:
        entry["vks_gpu_node_pools_adopt"] = True
    clusters, mds = state(derived, lambda name, pools: [p["name"] for p in pools])
    assert _audit_vks.audit_vks(derived, clusters) == []
    clusters, mds = state(derived, None)
    assert _audit_vks.audit_vks(derived, clusters) == []
    clusters, mds = state(derived, lambda name, pools: [])
    cluster = sorted(mds)[0]
    first = mds[cluster][0]["name"]
    clusters[cluster]["machine_deployments"][first]["replicas"] = 99
    out = _audit_vks.audit_vks(derived, clusters)
    assert ("node_pool_changed", "node_pool %s/%s" % (cluster, first)) in [(f["rule"], f["object"]) for f in out]
    assert "node_pool %s/%s" % (cluster, first) not in not_owned(out)
    assert len(not_owned(out)) == len(mds[cluster]) - 1


def test_the_not_owned_helper_sorts_and_judges_nothing_without_the_record():
    assert _audit_vks.not_owned_findings("c", ["b", "a"], None, True) == []
    assert _audit_vks.not_owned_findings("c", ["b", "a"], ["b"], False) == []
    out = _audit_vks.not_owned_findings("c", ["b", "a"], ["b"], True)
    assert [f["object"] for f in out] == ["node_pool c/a"]
