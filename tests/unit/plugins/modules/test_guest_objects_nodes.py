# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guest_objects' Nodes through main() with a fake client layer: the pools' nodes are read in one list by label
selector, check mode predicts the run's changes exactly (and writes nothing), the run patches each node once with
its labels and its whole taint list at the resourceVersion it planned from, a rerun changes nothing, others'
labels and taints stay, a pool without nodes writes nothing, and bad pools are refused before anything is read."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.modules import guest_objects
from tests.lib.module_main import run_main

GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOLS = [{"pool": "gpu-h100", "labels": {"gpupool.vcf/workload": "inference"}, "taints": [GPU]},
         {"pool": "gpu-a100-mig", "labels": {"gpupool.vcf/workload": "training"}},
         {"pool": "gpu-l4", "labels": {"gpupool.vcf/workload": "notebook"}}]


def node(name, pool=None, labels=None, taints=None):
    labels = dict(labels or {})
    if pool:
        labels["gpupool.vcf/pool"] = pool
    out = {"kind": "Node", "metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {}}
    if taints is not None:
        out["spec"]["taints"] = taints
    return out


class FakeNodes:
    """GuestObjectsApi over a dict of live Nodes: a label selector ``<label> in (a,b)`` is answered as the API
    server answers it, a patch is applied as a strategic merge of a Node (labels merged, the taint list
    replaced) and refused on a stale resourceVersion."""

    store = {}
    calls = []

    def __init__(self, params, versions=None):
        assert params["kubeconfig"] == "/k"

    def read(self, kinds, namespaces=None, names=None, node_selector=None):
        FakeNodes.calls.append(("read", tuple(kinds), node_selector))
        out = {}
        if "Node" in kinds and node_selector:
            label, values = node_selector.split(" in ")
            values = values.strip("()").split(",")
            out = dict((("Node", "", n), copy.deepcopy(obj)) for n, obj in FakeNodes.store.items()
                       if obj["metadata"]["labels"].get(label) in values)
        return out

    def patch(self, kind, name, ns, version, body):
        FakeNodes.calls.append(("patch", kind, name, version, copy.deepcopy(body)))
        live = FakeNodes.store[name]
        if live["metadata"]["resourceVersion"] != version:
            raise K8sError("409 Conflict", status=409)
        live["metadata"]["labels"].update((body.get("metadata") or {}).get("labels") or {})
        if "spec" in body:
            live["spec"]["taints"] = copy.deepcopy(body["spec"]["taints"])
        live["metadata"]["resourceVersion"] = str(int(version) + 1)

    def create(self, obj):
        raise AssertionError("a node is never created: %r" % obj)

    def delete(self, *args):
        raise AssertionError("a node is never deleted: %r" % (args,))


@pytest.fixture
def api(monkeypatch):
    other = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
    FakeNodes.store = dict((n["metadata"]["name"], n) for n in (
        node("h100-0", "gpu-h100", {"team": "x"}, [other]), node("h100-1", "gpu-h100", taints=[GPU]),
        node("a100-0", "gpu-a100-mig", {"gpupool.vcf/workload": "training"}), node("cpu-0", labels={"role": "cpu"})))
    FakeNodes.calls = []
    monkeypatch.setattr(guest_objects, "GuestObjectsApi", FakeNodes)
    return FakeNodes


def run(check=False, **params):
    args = dict(kubeconfig="/k", kinds=["Node"], node_pools=POOLS)
    args.update(params)
    return run_main(guest_objects, args, check_mode=check, diff=True, sessions=False)


def test_check_predicts_the_run_the_run_patches_each_node_once_and_a_rerun_changes_nothing(api):
    predicted = run(check=True)
    assert api.calls == [("read", ("Node",), "gpupool.vcf/pool in (gpu-a100-mig,gpu-h100,gpu-l4)")]
    assert predicted["changed"]
    assert [(c["object"], c["field"], c["before"], c["after"], c["action"]) for c in predicted["changes"]] == [
        ("node h100-0", "metadata.labels.gpupool.vcf/workload", None, "inference", "update"),
        ("node h100-0", "spec.taints.nvidia.com/gpu:NoSchedule", None, GPU, "update"),
        ("node h100-1", "metadata.labels.gpupool.vcf/workload", None, "inference", "update")]
    assert predicted["objects"] == ["node h100-0", "node h100-1"] and predicted["names"] == ["h100-0", "h100-1"]
    assert predicted["diff"]["after"]["node h100-0"]["taints"] == [
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"}, GPU]
    api.calls = []
    first = run()
    assert first["changes"] == predicted["changes"] and first["changed"]
    assert [c for c in api.calls if c[0] == "patch"] == [
        ("patch", "Node", "h100-0", "1", {"metadata": {"labels": {"gpupool.vcf/workload": "inference"}}, "spec": {
            "taints": [{"key": "dedicated", "value": "ml", "effect": "NoExecute"}, GPU]}}),
        ("patch", "Node", "h100-1", "1", {"metadata": {"labels": {"gpupool.vcf/workload": "inference"}}})]
    assert api.store["h100-0"]["metadata"]["labels"]["team"] == "x"  # not ours, kept
    assert api.store["cpu-0"]["metadata"]["labels"] == {"role": "cpu"}  # not a pool's node
    again = run()
    assert not again["changed"] and again["changes"] == []


def test_a_drifted_taint_value_is_corrected_and_the_diff_shows_it(api):
    run()
    api.store["h100-1"]["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}]
    out = run()
    assert [(c["field"], c["before"], c["after"]) for c in out["changes"]] == [
        ("spec.taints.nvidia.com/gpu:NoSchedule", {"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"},
         GPU)]
    assert out["diff"]["before"]["node h100-1"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}]
    assert out["diff"]["after"]["node h100-1"]["taints"] == [GPU]
    assert api.store["h100-1"]["spec"]["taints"] == [GPU]


def test_no_pools_reads_no_nodes_and_a_pool_without_nodes_writes_nothing(api):
    out = run(node_pools=[])
    assert not out["changed"] and api.calls == [("read", (), None)]
    api.calls = []
    out = run(node_pools=[POOLS[2]])
    assert not out["changed"] and out["changes"] == [] and [c[0] for c in api.calls] == ["read"]


def test_without_the_node_kind_the_pools_are_left_alone(api):
    out = run(kinds=["PriorityClass"])
    assert not out["changed"] and all("Node" not in c[1] for c in api.calls)


@pytest.mark.parametrize("pools,words", [
    ([{"pool": "gpu-h100", "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"},
                                      {"key": "k", "effect": "NoSchedule"}]}], "taint k:NoSchedule is given twice"),
    ([{"pool": "gpu-h100", "labels": {"bad key": "x"}}], "node_pools[0].labels key 'bad key'"),
    ([{"pool": "a"}, {"pool": "a"}], "pool a is given twice"),
])
def test_bad_pools_are_refused_before_anything_is_read(api, pools, words):
    out = run(node_pools=pools)
    assert out["failed"] and out["msg"].startswith("Unable to manage the guest objects: ") and words in out["msg"], out["msg"]
    assert api.calls == []


def test_a_node_changed_since_the_read_is_refused_by_the_server(api, monkeypatch):
    read = FakeNodes.read

    def stale(self, kinds, **given):
        out = read(self, kinds, **given)
        for live in out.values():
            live["metadata"]["resourceVersion"] = "0"
        return out

    monkeypatch.setattr(FakeNodes, "read", stale)
    out = run()
    assert out["failed"] and "node h100-0" in out["msg"] and "409" in out["msg"], out["msg"]
    assert api.store["h100-0"]["metadata"]["labels"].get("gpupool.vcf/workload") is None
