"""vks_node_pool adopts a node pool made by hand (the rig's Supervisor-like Cluster API).

The Cluster and its pool ``cpu`` are made with the Kubernetes client. Without adopt ``cpu`` stays
out of the Cluster's ``gpupool.vcf/node-pools`` annotation and purge keeps it; with adopt it goes
in (check mode predicts it, --diff shows it), a rerun is unchanged, and a later purge removes it.
"""
from __future__ import annotations

from tests.integration.k8s.test_vks_node_pool import _create, _mds
from tests.lib.ansible_run import run_module

M = "gpupool.vcf.vks_node_pool"
OWNED = "gpupool.vcf/node-pools"


def _owned(obj):
    return ((obj["metadata"].get("annotations") or {}).get(OWNED) or "").split(",")


def test_hand_made_pool_foreign_without_adopt_own_with_it(k8s_rig, k8s_api, k8s_namespace):
    _create(k8s_api, k8s_namespace, "hand-cluster")  # its pool cpu (2 replicas) is made by hand
    env = k8s_rig.env
    inference = {"name": "inference", "replicas": 1, "vm_class": "vmclass-h100-80c"}
    both = {"namespace": k8s_namespace, "cluster_name": "hand-cluster",
            "node_pools": [{"name": "cpu", "replicas": 2}, inference]}
    only_inference = {**both, "node_pools": [inference], "purge": True}

    res = run_module(M, both, env=env)[0]
    assert not res.get("failed"), res.get("msg")
    assert res["owned"] == ["inference"]
    res = run_module(M, only_inference, env=env)[0]
    assert res["kept_foreign"] == ["cpu"] and res["changed"] is False
    assert set(_mds(k8s_api, k8s_namespace, "hand-cluster")[0]) == {"cpu", "inference"}

    res = run_module(M, {**both, "adopt": True}, env=env, check=True, diff=True)[0]
    assert res["changed"] is True and res["diff"]["after"]["owned"] == ["cpu", "inference"]
    assert res["diff"]["before"]["owned"] == ["inference"]
    assert _owned(_mds(k8s_api, k8s_namespace, "hand-cluster")[1]) == ["inference"]  # check mode stores nothing

    res = run_module(M, {**both, "adopt": True}, env=env)[0]
    assert res["changed"] is True and res["owned"] == ["cpu", "inference"]
    mds, obj = _mds(k8s_api, k8s_namespace, "hand-cluster")
    assert _owned(obj) == ["cpu", "inference"] and mds["cpu"]["replicas"] == 2
    res = run_module(M, {**both, "adopt": True}, env=env)[0]
    assert res["changed"] is False

    # the design drops cpu: purge removes it now that it is the collection's
    res = run_module(M, only_inference, env=env)[0]
    assert res["changed"] is True and res["kept_foreign"] == []
    mds, obj = _mds(k8s_api, k8s_namespace, "hand-cluster")
    assert set(mds) == {"inference"} and _owned(obj) == ["inference"]
