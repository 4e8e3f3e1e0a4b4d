"""vks_node_pool: purge removes only the node pools the module created (pure part)."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import NODE_POOLS_ANNOTATION, owned_node_pools
from ansible_collections.gpupool.vcf.plugins.modules.vks_node_pool import plan_ownership


def md(name):
    return {"class": "node-pool", "name": name, "replicas": 1}


def test_annotation_parsed_leniently():
    assert owned_node_pools({NODE_POOLS_ANNOTATION: " a, b ,,c"}) == {"a", "b", "c"}
    assert owned_node_pools({}) == set() and owned_node_pools(None) == set()
    assert owned_node_pools({NODE_POOLS_ANNOTATION: ""}) == set()


def test_created_pools_are_recorded_existing_ones_are_not():
    current = [md("cpu"), md("inference")]
    kept = current + [md("training")]
    out, owned, foreign = plan_ownership(current, kept, ["inference", "training"], set(), purge=False)
    assert [m["name"] for m in out] == ["cpu", "inference", "training"]
    assert owned == {"training"} and foreign == []


def test_purge_removes_only_recorded_pools():
    current = [md("cpu"), md("by-hand"), md("old-gpu"), md("inference")]
    out, owned, foreign = plan_ownership(current, list(current), ["inference"], {"old-gpu", "inference"}, purge=True)
    assert [m["name"] for m in out] == ["cpu", "by-hand", "inference"]
    assert owned == {"inference"} and foreign == ["by-hand", "cpu"]


def test_without_purge_unnamed_pools_stay_and_stay_recorded():
    current = [md("old-gpu"), md("inference")]
    out, owned, foreign = plan_ownership(current, list(current), ["inference"], {"old-gpu"}, purge=False)
    assert [m["name"] for m in out] == ["old-gpu", "inference"]
    assert owned == {"old-gpu"} and foreign == []


def test_record_drops_pools_no_longer_in_the_cluster():
    current = [md("inference")]
    out, owned, foreign = plan_ownership(current, list(current), ["inference"], {"inference", "deleted-by-hand"},
                                         purge=True)
    assert [m["name"] for m in out] == ["inference"] and owned == {"inference"} and foreign == []
