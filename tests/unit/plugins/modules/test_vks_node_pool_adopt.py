"""vks_node_pool's record with adopt: named pools made by hand become the collection's only with it."""
from ansible_collections.gpupool.vcf.plugins.modules.vks_node_pool import plan_ownership


def test_hand_made_pool_stays_foreign_without_adopt():
    current = [{"name": "inference"}, {"name": "hand"}]
    out, owned, foreign = plan_ownership(current, list(current), ["inference"], set(), purge=True)
    assert owned == set() and foreign == ["hand"] and [m["name"] for m in out] == ["inference", "hand"]


def test_adopt_records_the_named_pools_and_purge_removes_only_those():
    current = [{"name": "inference"}, {"name": "hand"}]
    out, owned, foreign = plan_ownership(current, list(current), ["inference"], set(), purge=False, adopt=True)
    assert owned == {"inference"} and foreign == []
    # the next design drops inference: purge removes it (adopted), keeps the unnamed hand-made pool
    out, owned, foreign = plan_ownership(current, list(current), [], owned, purge=True)
    assert [m["name"] for m in out] == ["hand"] and owned == set() and foreign == ["hand"]


def test_adopt_with_a_created_pool():
    current = [{"name": "hand"}]
    kept = current + [{"name": "new"}]
    out, owned, foreign = plan_ownership(current, kept, ["hand", "new"], set(), purge=False, adopt=True)
    assert owned == {"hand", "new"}
