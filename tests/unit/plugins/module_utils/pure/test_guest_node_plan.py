# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Node plan (``_guest_node_plan``): one change per label or taint to add or correct on each node of a pool,
others' labels and taints left alone, a taint known by its key and effect, the patch carrying the whole taint
list; bad pools refused with every reason. Property-based: the patch of a plan, applied as the API server applies
it, leaves nothing to plan, and a node has a change exactly when it lacks what its pool wants."""
import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_node_plan as gnp
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import UPDATE, Change

GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOLS = [{"pool": "gpu-h100", "labels": {"gpupool.vcf/workload": "inference"}, "taints": [GPU]},
         {"pool": "gpu-a100-mig", "labels": {"gpupool.vcf/workload": "training"}}]

settings.register_profile("gpupool-node-plan", max_examples=200, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("gpupool-node-plan")


def node(name, labels=None, taints=None, pool=None):
    labels = dict(labels or {})
    if pool:
        labels["gpupool.vcf/pool"] = pool
    out = {"kind": "Node", "metadata": {"name": name, "labels": labels, "resourceVersion": "7"}, "spec": {}}
    if taints is not None:
        out["spec"]["taints"] = [dict(t) for t in taints]
    return out


def apply(live, body):
    """The patch as the API server applies it to a Node: labels merged, the taint list replaced."""
    out = copy.deepcopy(live)
    out["metadata"]["labels"].update((body.get("metadata") or {}).get("labels") or {})
    if "spec" in body:
        out["spec"]["taints"] = copy.deepcopy(body["spec"]["taints"])
    return out


def test_a_bare_node_gets_each_label_and_taint_of_its_pool():
    live = node("gpu-h100-0", pool="gpu-h100")
    assert gnp.plan_pools([live], POOLS) == [
        Change("node gpu-h100-0", "metadata.labels.gpupool.vcf/workload", None, "inference", UPDATE, pool="gpu-h100"),
        Change("node gpu-h100-0", "spec.taints.nvidia.com/gpu:NoSchedule", None, GPU, UPDATE, pool="gpu-h100")]


def test_a_node_as_wanted_plans_nothing_and_others_labels_and_taints_stay():
    other = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
    live = node("gpu-h100-0", {"gpupool.vcf/workload": "inference", "team": "x"}, [other, GPU], pool="gpu-h100")
    assert gnp.plan_pools([live], POOLS) == []


def test_a_wrong_label_value_is_corrected():
    live = node("n1", {"gpupool.vcf/workload": "notebook"}, [GPU], pool="gpu-h100")
    assert gnp.plan_pools([live], POOLS) == [
        Change("node n1", "metadata.labels.gpupool.vcf/workload", "notebook", "inference", UPDATE, pool="gpu-h100")]


def test_a_taint_of_another_value_is_corrected_in_place_and_the_patch_keeps_every_other_taint():
    first = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    last = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}
    live = node("n1", {"gpupool.vcf/workload": "inference"},
                [first, {"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}, last], pool="gpu-h100")
    changes = gnp.plan_pools([live], POOLS)
    assert changes == [Change("node n1", "spec.taints.nvidia.com/gpu:NoSchedule",
                              {"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}, GPU, UPDATE,
                              pool="gpu-h100")]
    assert gnp.patch_body(live, changes) == {"spec": {"taints": [first, GPU, last]}}


def test_a_taint_is_known_by_key_and_effect_and_its_value_is_compared_only_where_given():
    wanted = [{"pool": "p", "taints": [{"key": "gpu", "effect": "NoSchedule"}]}]
    assert gnp.plan_pools([node("n", taints=[{"key": "gpu", "value": "any", "effect": "NoSchedule"}], pool="p")],
                          wanted) == []
    changes = gnp.plan_pools([node("n", taints=[{"key": "gpu", "effect": "NoExecute"}], pool="p")], wanted)
    assert [(c.field, c.before, c.after) for c in changes] == [
        ("spec.taints.gpu:NoSchedule", None, {"key": "gpu", "effect": "NoSchedule"})]
    live = node("n", taints=[{"key": "gpu", "effect": "NoExecute"}], pool="p")
    assert gnp.patch_body(live, changes) == {"spec": {"taints": [
        {"key": "gpu", "effect": "NoExecute"}, {"key": "gpu", "effect": "NoSchedule"}]}}


def test_only_the_nodes_of_a_pool_are_planned_and_a_pool_without_nodes_plans_nothing():
    live = [node("cpu-0"), node("other-0", pool="gpu-l4"), node("b", pool="gpu-a100-mig"),
            node("a", pool="gpu-a100-mig")]
    changes = gnp.plan_pools(live, POOLS)
    assert [(c.object, c.detail("pool")) for c in changes] == [("node a", "gpu-a100-mig"), ("node b", "gpu-a100-mig")]
    assert gnp.plan_pools([node("cpu-0")], POOLS) == []


def test_labels_only_patch_leaves_the_taints_out_and_the_selector_names_every_pool():
    live = node("n1", pool="gpu-a100-mig", taints=[GPU])
    assert gnp.patch_body(live, gnp.plan_pools([live], POOLS)) == {
        "metadata": {"labels": {"gpupool.vcf/workload": "training"}}}
    assert gnp.selector(POOLS) == "gpupool.vcf/pool in (gpu-a100-mig,gpu-h100)"
    assert gnp.selector(POOLS, "example.com/pool") == "example.com/pool in (gpu-a100-mig,gpu-h100)"
    assert gnp.selector([]) is None


def test_the_diff_shows_labels_and_taints_before_and_after():
    live = node("n1", {"team": "x"}, [{"key": "dedicated", "effect": "NoSchedule"}], pool="gpu-h100")
    before, after = gnp.diff_of(live, gnp.plan_pools([live], POOLS))
    assert before == {"labels": {"team": "x", "gpupool.vcf/pool": "gpu-h100"},
                      "taints": [{"key": "dedicated", "effect": "NoSchedule"}]}
    assert after == {"labels": {"team": "x", "gpupool.vcf/pool": "gpu-h100", "gpupool.vcf/workload": "inference"},
                     "taints": [{"key": "dedicated", "effect": "NoSchedule"}, GPU]}
    assert live["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule"}]  # the live node is not touched


def test_an_audit_record_reads_as_the_api_form():
    record = {"name": "n1", "labels": {"a": "b"}, "capacity": {"nvidia.com/gpu": "1"},
              "taints": [{"key": "k", "value": None, "effect": "NoSchedule"}, {"key": "j", "value": "v", "effect": "NoExecute"}]}
    assert gnp.api_node(record) == {"kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}, "spec": {"taints": [
        {"key": "k", "effect": "NoSchedule"}, {"key": "j", "value": "v", "effect": "NoExecute"}]}}
    assert [gnp.taint_text(t) for t in gnp.api_node(record)["spec"]["taints"]] == ["k:NoSchedule", "j=v:NoExecute"]


@pytest.mark.parametrize("pools,label,words", [
    ("gpu-h100", gnp.POOL_LABEL, ["node_pools must be a list"]),
    ([{"labels": {}}], gnp.POOL_LABEL, ["node_pools[0] must be a mapping with a pool"]),
    ([{"pool": "a"}, {"pool": "a"}], gnp.POOL_LABEL, ["node_pools[1]: pool a is given twice"]),
    ([{"pool": "a", "label": {}}], gnp.POOL_LABEL, ["node_pools[0] takes pool, labels and taints, not label"]),
    ([{"pool": "a", "labels": {"bad key": "v"}}], gnp.POOL_LABEL, ["node_pools[0].labels key 'bad key'"]),
    ([{"pool": "a", "labels": {"k": "-x"}}], gnp.POOL_LABEL, ["node_pools[0].labels[k] '-x'"]),
    ([{"pool": "a", "labels": {"k": 3}}], gnp.POOL_LABEL, ["node_pools[0].labels[k] 3", "text"]),
    ([{"pool": "a", "labels": {"gpupool.vcf/pool": "b"}}], gnp.POOL_LABEL, ["take the nodes out of pool a"]),
    ([{"pool": "a", "taints": {"key": "k"}}], gnp.POOL_LABEL, ["node_pools[0].taints must be a list"]),
    ([{"pool": "a", "taints": [{"key": "k", "effect": "NoRun"}]}], gnp.POOL_LABEL,
     ["node_pools[0].taints[0].effect must be one of NoSchedule, PreferNoSchedule, NoExecute, not 'NoRun'"]),
    ([{"pool": "a", "taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}]}],
     gnp.POOL_LABEL, ["node_pools[0].taints[1]: taint k:NoSchedule is given twice"]),
    ([{"pool": "a", "taints": [{"effect": "NoSchedule"}]}], gnp.POOL_LABEL, ["taints[0] must be a mapping with a key"]),
    ([{"pool": "a", "taints": [{"key": "k", "effect": "NoSchedule", "operator": "Exists"}]}], gnp.POOL_LABEL,
     ["takes key, value and effect, not operator"]),
    ([{"pool": "a"}], "bad label/", ["pool_label 'bad label/'"]),
])
def test_bad_pools_are_refused_with_the_reason(pools, label, words):
    with pytest.raises(ValueError) as err:
        gnp.check_pools(pools, label)
    for word in words:
        assert word in str(err.value)


def test_good_pools_pass():
    gnp.check_pools(POOLS)
    gnp.check_pools([{"pool": "p", "labels": {"example.com/x": ""}, "taints": [{"key": "k", "effect": "NoExecute"}]}])


# --- properties -------------------------------------------------------------------------------------

KEYS = st.sampled_from(["gpupool.vcf/workload", "nvidia.com/vgpu.profile", "team", "example.com/tier"])
VALUES = st.sampled_from(["a", "b", "inference"])
TAINT_KEYS = st.sampled_from(["nvidia.com/gpu", "dedicated", "gpupool.vcf/pool"])
EFFECTS = st.sampled_from(list(gnp.TAINT_EFFECTS))


def _taints(with_value):
    value = st.one_of(st.none(), VALUES) if with_value else VALUES
    return st.lists(st.builds(lambda k, v, e: gnp.taint({"key": k, "value": v, "effect": e}), TAINT_KEYS, value, EFFECTS),
                    max_size=4, unique_by=gnp.taint_id)


POOL_NAMES = st.sampled_from(["p1", "p2", "p3"])
WANTED = st.lists(st.builds(lambda p, l, t: {"pool": p, "labels": l, "taints": t}, POOL_NAMES,
                            st.dictionaries(KEYS, VALUES, max_size=3), _taints(True)), max_size=3, unique_by=lambda p: p["pool"])
LIVE = st.lists(st.builds(lambda n, p, l, t: node("n%d" % n, l, t, pool=p), st.integers(0, 5),
                          st.one_of(st.none(), POOL_NAMES), st.dictionaries(KEYS, VALUES, max_size=3),
                          st.one_of(st.none(), _taints(True))), max_size=5, unique_by=lambda n: n["metadata"]["name"])


def _satisfies(live, pool):
    """Whether a node carries its pool's labels and taints, said independently of the plan."""
    labels = live["metadata"]["labels"]
    taints = live["spec"].get("taints") or []
    return all(labels.get(k) == v for k, v in pool["labels"].items()) and all(
        any(t["key"] == w["key"] and t["effect"] == w["effect"] and ("value" not in w or t.get("value", "") == w["value"])
            for t in taints) for w in pool["taints"])


@PROFILE
@given(LIVE, WANTED)
def test_a_node_has_a_change_exactly_when_it_lacks_what_its_pool_wants(live, wanted):
    gnp.check_pools(wanted)
    changed = set(c.object for c in gnp.plan_pools(live, wanted))
    pools = dict((p["pool"], p) for p in wanted)
    lacking = set("node %s" % n["metadata"]["name"] for n in live
                  if n["metadata"]["labels"].get("gpupool.vcf/pool") in pools
                  and not _satisfies(n, pools[n["metadata"]["labels"]["gpupool.vcf/pool"]]))
    assert changed == lacking


@PROFILE
@given(LIVE, WANTED)
def test_the_patch_applied_leaves_nothing_to_plan_and_keeps_every_other_label_and_taint(live, wanted):
    changes = gnp.plan_pools(live, wanted)
    for n in live:
        mine = [c for c in changes if c.object == gnp.node_name(n)]
        after = apply(n, gnp.patch_body(n, mine))
        assert gnp.plan_pools([after], wanted) == []
        assert after == gnp.patched(n, mine) or not mine
        assert set(n["metadata"]["labels"].items()) - set(after["metadata"]["labels"].items()) <= set(
            (c.field[len("metadata.labels."):], c.before) for c in mine if c.field.startswith("metadata.labels."))
        kept = set(gnp.taint_id(t) for t in after["spec"].get("taints") or [])
        assert set(gnp.taint_id(t) for t in n["spec"].get("taints") or []) <= kept
        assert len(kept) == len(after["spec"].get("taints") or [])  # a taint once by key and effect


def test_a_read_gives_its_nodes_and_the_patches_and_diffs_go_node_by_node():
    a = node("a", pool="gpu-h100", taints=[GPU])
    b = node("b", pool="gpu-h100")
    live = {("Node", "", "b"): b, ("Node", "", "a"): a, ("Namespace", "", "a"): {"kind": "Namespace"}}
    assert gnp.live_nodes(live) == [a, b]
    changes = gnp.plan_pools(gnp.live_nodes(live), POOLS)
    assert gnp.patches(gnp.live_nodes(live), changes) == [
        ("node a", "a", "7", {"metadata": {"labels": {"gpupool.vcf/workload": "inference"}}}),
        ("node b", "b", "7", {"metadata": {"labels": {"gpupool.vcf/workload": "inference"}},
                              "spec": {"taints": [GPU]}})]
    before, after = gnp.diffs(gnp.live_nodes(live), changes)
    assert sorted(before) == sorted(after) == ["node a", "node b"]
    assert after["node b"]["taints"] == [GPU] and before["node b"]["taints"] == []
    assert gnp.patches(gnp.live_nodes(live), []) == [] and gnp.diffs([a], []) == ({}, {})
