"""The guest audit's device_plugin_capacity: a GPU node's advertised count (status.allocatable) against GPUs x
replicas of the design's time-slicing, judged only where the nodes were read with their allocatable."""
import copy

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from tests.unit.plugins.module_utils.pure.test_audit import DERIVED, full_guest

REPLICAS = 4  # examples/design.yml: the notebooks pool time-slices each card 4 ways


def counted(live, cards, advertised):
    for n in live["nodes"]:
        if n["name"] == "notebooks-0":
            n["labels"]["nvidia.com/gpu.count"] = str(cards)
            n["allocatable"] = {"nvidia.com/gpu": str(advertised)}
    return live


def capacity(out):
    return [(f["object"], f["message"]) for f in out if f["rule"] == "device_plugin_capacity"]


def test_a_node_advertising_cards_times_replicas_is_clean_and_any_other_count_is_named():
    derived = copy.deepcopy(DERIVED)
    assert derived["roles"]["gpu_operator"]["gpu_operator_time_slicing"]["notebooks"]["replicas"] == REPLICAS
    assert capacity(_audit_guest.audit_guest(derived, **counted(full_guest(derived), 2, 2 * REPLICAS))) == []
    out = _audit_guest.audit_guest(derived, **counted(full_guest(derived), 2, 2))
    assert capacity(out) == [("node notebooks-0", "notebooks-0 advertises nvidia.com/gpu=2, the design's sharing "
                              "(notebooks) gives 8: restart its device plugin")]
    [f] = [f for f in out if f["rule"] == "device_plugin_capacity"]
    assert f["severity"] == "error" and f["link"] == "guest" and f["fix"] == _audit_guest.RULES["device_plugin_capacity"][3]


def test_nodes_read_without_allocatable_or_a_design_without_time_slicing_are_not_judged():
    derived = copy.deepcopy(DERIVED)
    live = counted(full_guest(derived), 1, 1)
    del [n for n in live["nodes"] if n["name"] == "notebooks-0"][0]["allocatable"]
    assert capacity(_audit_guest.audit_guest(derived, **live)) == []
    derived["roles"]["gpu_operator"]["gpu_operator_time_slicing"] = {}
    assert capacity(_audit_guest.audit_guest(derived, **counted(full_guest(derived), 1, 1))) == []
