"""Pure logic of _k8s: ClusterClass variable schemas -> where node labels and taints go."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils._k8s import (
    PlanError, apply_pool, plan_machine_deployments, variable_plan)

NODE_VAR = {"name": "node", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "taints": {"type": "array", "items": {"type": "object", "properties": {
        "key": {"type": "string"}, "value": {"type": "string"}, "effect": {"type": "string"}}}}}}}}
GENERIC = [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
           {"name": "storageClass", "schema": {"openAPIV3Schema": {"type": "string"}}}, NODE_VAR]
LEGACY = [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
          {"name": "nodePoolLabels", "schema": {"openAPIV3Schema": {"type": "array", "items": {
              "type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}}}},
          {"name": "nodePoolVolumes", "schema": {"openAPIV3Schema": {"type": "array", "items": {
              "type": "object", "properties": {"name": {"type": "string"}}}}}}]
TAINTS_TOP = [{"name": "nodePoolTaints", "schema": {"openAPIV3Schema": {"type": "array", "items": {
    "type": "object", "properties": {"key": {}, "value": {}, "effect": {}}}}}}]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_generic_class_node_object_variable():
    plan = variable_plan(GENERIC)
    assert plan["vm_class"] == "vmClass"
    assert plan["labels"] == {"variable": "node", "property": "labels", "form": "map"}
    assert plan["taints"] == {"variable": "node", "property": "taints"}


def test_legacy_class_labels_list_and_no_taints():
    plan = variable_plan(LEGACY)
    assert plan["labels"] == {"variable": "nodePoolLabels", "property": None, "form": "kv_list"}
    assert plan["taints"] is None
    with pytest.raises(PlanError, match="no variable for node taints"):
        apply_pool(None, {"name": "gpu", "taints": TAINT}, plan, "node-pool")


def test_top_level_taints_variable():
    assert variable_plan(TAINTS_TOP)["taints"] == {"variable": "nodePoolTaints", "property": None}


def test_apply_pool_keeps_other_overrides_and_fields():
    md = {"class": "node-pool", "name": "gpu", "replicas": 1, "failureDomain": "zone-a",
          "variables": {"overrides": [{"name": "storageClass", "value": "gold"},
                                      {"name": "node", "value": {"labels": {"a": "b"}, "other": 1}}]}}
    new = apply_pool(md, {"name": "gpu", "replicas": 3, "vm_class": "h100", "labels": None,
                          "taints": TAINT}, variable_plan(GENERIC), "node-pool")
    assert new["replicas"] == 3 and new["failureDomain"] == "zone-a"
    ovs = {o["name"]: o["value"] for o in new["variables"]["overrides"]}
    assert ovs["storageClass"] == "gold" and ovs["vmClass"] == "h100"
    assert ovs["node"] == {"labels": {"a": "b"}, "other": 1, "taints": TAINT}
    assert md["replicas"] == 1  # input untouched


def test_legacy_labels_as_key_value_list():
    new = apply_pool(None, {"name": "gpu", "labels": {"b": "2", "a": "1"}}, variable_plan(LEGACY), "node-pool")
    assert new["variables"]["overrides"] == [{"name": "nodePoolLabels", "value": [
        {"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}]


def test_plan_keeps_unnamed_pools_unless_purge():
    current = [{"class": "node-pool", "name": "cpu", "replicas": 2},
               {"class": "node-pool", "name": "gpu", "replicas": 1}]
    plan = variable_plan(GENERIC)
    kept = plan_machine_deployments(current, [{"name": "gpu", "replicas": 2}], plan, "node-pool")
    assert [m["name"] for m in kept] == ["cpu", "gpu"] and kept[1]["replicas"] == 2
    purged = plan_machine_deployments(current, [{"name": "new", "replicas": 1}], plan, "node-pool", purge=True)
    assert purged == [{"class": "node-pool", "name": "new", "replicas": 1}]


def test_unchanged_pool_is_equal():
    plan = variable_plan(GENERIC)
    first = plan_machine_deployments([], [{"name": "gpu", "replicas": 1, "vm_class": "x", "taints": TAINT,
                                           "labels": {"a": "b"}}], plan, "node-pool")
    again = plan_machine_deployments(first, [{"name": "gpu", "replicas": 1, "vm_class": "x", "taints": TAINT,
                                              "labels": {"a": "b"}}], plan, "node-pool")
    assert first == again


def test_new_pool_needs_class_when_ambiguous():
    with pytest.raises(PlanError, match="set its class"):
        apply_pool(None, {"name": "gpu"}, variable_plan(GENERIC), None)
