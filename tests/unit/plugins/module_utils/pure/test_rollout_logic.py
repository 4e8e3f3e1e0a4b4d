"""A node pool's rollout to a VM class, judged from the guest's nodes (pure)."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _rollout as ro


def node(name, vm_class, ready=True, cordoned=False, pool="inf"):
    return {"metadata": {"name": name, "labels": {"gpupool.vcf/pool": pool, ro.INSTANCE_TYPE: vm_class}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


LABELS = {"gpupool.vcf/pool": "inf"}


def test_pool_nodes_by_all_labels():
    nodes = [node("b", "x"), node("a", "x"), node("c", "x", pool="other")]
    assert [n["metadata"]["name"] for n in ro.pool_nodes(nodes, LABELS)] == ["a", "b"]
    assert ro.pool_nodes(nodes, {}) == []


def test_done_only_when_all_on_class_ready_and_schedulable():
    assert ro.pool_rollout("inf", "new", 2, [node("a", "new"), node("b", "new")])["done"]
    mid = ro.pool_rollout("inf", "new", 2, [node("a", "new"), node("b", "old")])
    assert not mid["done"] and mid["ready"] == 1 and mid["left"] == [
        {"node": "b", "vm_class": "old", "ready": True, "cordoned": False}]
    assert not ro.pool_rollout("inf", "new", 2, [node("a", "new"), node("b", "new", ready=False)])["done"]
    assert not ro.pool_rollout("inf", "new", 2, [node("a", "new"), node("b", "new", cordoned=True)])["done"]
    # fewer nodes than replicas (a surge node still to come)
    assert not ro.pool_rollout("inf", "new", 2, [node("a", "new")])["done"]
    assert ro.pool_rollout("inf", "new", None, [node("a", "new")])["done"]
    assert ro.pool_rollout("inf", "new", 0, [])["done"]


def test_classes_in_use_from_pools_and_nodes():
    pools = [{"vm_class": "new"}, {"vm_class": None}, {"vm_class": "cpu"}]
    assert ro.classes_in_use(pools, [node("a", "old"), {"metadata": {"name": "x"}}]) == ["cpu", "new", "old"]


def test_timeout_message_names_what_is_left_and_how_to_resume():
    rep = ro.pool_rollout("inf", "new", 2, [node("a", "new"), node("b", "old", cordoned=True)])
    msg = ro.timeout_message([rep, ro.pool_rollout("ok", "c", 0, [])], 30)
    assert "did not finish in 30 s" in msg and "node pool inf: 1 of 2 nodes on VM class new" in msg
    assert "b (class old, Ready, cordoned)" in msg and "node pool ok" not in msg and "A rerun waits again" in msg
