"""pure._drain: the refs a drain evicts carry their node, and the words for the pods a drain left behind
group them by node in the plan's order."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import drain_plan, drain_refs, in_the_way


def pod(name, node, phase="Running", deleting=False):
    meta = {"name": name, "namespace": "apps", "uid": "u-" + name,
            "ownerReferences": [{"controller": True, "kind": "ReplicaSet", "name": "rs", "uid": "rs"}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_drain_refs_carry_their_node_in_the_plans_order():
    plan = drain_plan(["n2", "n1"], [pod("a", "n1"), pod("b", "n2"), pod("c", "n1", deleting=True)], [], [])
    assert [(r["node"], r["name"]) for r in drain_refs(plan)] == [("n2", "b"), ("n1", "a")]
    assert [(r["node"], r["name"]) for r in drain_refs(plan, ("terminating",))] == [("n1", "c")]
    assert drain_refs({}) == []


def test_in_the_way_groups_by_node_in_the_order_given():
    items = [({"namespace": "apps", "name": "a", "node": "n1"}, "PodDisruptionBudget llm allows no disruption"),
             ({"namespace": "apps", "name": "b", "node": "n2"}, "evicted, not gone yet"),
             ({"namespace": "apps", "name": "c", "node": "n1"}, "not gone yet")]
    assert in_the_way(items) == ("on node n1: apps/a (PodDisruptionBudget llm allows no disruption), apps/c (not gone "
                                 "yet); on node n2: apps/b (evicted, not gone yet)")
    assert in_the_way([({"namespace": "apps", "name": "x"}, "why")]) == "apps/x (why)"
    assert in_the_way([]) == "none"
