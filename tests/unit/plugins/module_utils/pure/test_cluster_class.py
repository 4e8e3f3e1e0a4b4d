"""_cluster_class: where a node pool's VM class, labels and taints go, read from a ClusterClass's
variable schema - against the classes the Kubernetes rig serves (tests/sim/k8s/supervisor.yml),
one per VKS generation, and against made-up schemas for the edges."""
import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _cluster_class as cc

ROOT = Path(__file__).resolve().parents[5]
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOL = {"name": "gpu", "replicas": 2, "vm_class": "vmclass-h100-80c",
        "labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}


def _rig_classes():
    out = {}
    for doc in yaml.safe_load_all((ROOT / "tests" / "sim" / "k8s" / "supervisor.yml").read_text()):
        for obj in (doc or {}).get("items") or [doc or {}]:
            if obj.get("kind") == "ClusterClass":
                out[obj["metadata"]["name"]] = obj
    return out


CLASSES = _rig_classes()
# the shape each class of the rig declares: (labels place, labels form, taints place)
SHAPES = {
    "tanzukubernetescluster": ("nodePoolLabels", "kv_list", "nodePoolTaints"),
    "builtin-generic-v3.1.0": ("nodePoolLabels", "kv_list", "nodePoolTaints"),
    "builtin-generic-v3.4.0": ("node.labels", "map", "node.taints"),
    "builtin-generic-v3.7.0": ("node.labels", "map", "node.taints"),
}


def test_the_rig_serves_every_shape():
    assert set(SHAPES) <= set(CLASSES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_is_read_from_the_schema(name):
    plan = cc.variable_plan(CLASSES[name])
    labels, form, taints = SHAPES[name]
    assert plan["class"] == "vmware-system-vks-public/" + name
    assert plan["vm_class"] == "vmClass"
    assert cc.place(plan["labels"]) == labels and plan["labels"]["form"] == form
    assert cc.place(plan["taints"]) == taints
    assert plan["ambiguous"] == {}
    assert cc.public_plan(plan) == {"class": plan["class"], "vm_class": "vmClass", "labels": plan["labels"],
                                    "taints": plan["taints"]}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_apply_then_read_is_the_pool_and_idempotent(name):
    plan = cc.variable_plan(CLASSES[name])
    mds = cc.plan_machine_deployments([], [POOL], plan, "node-pool")
    again = cc.plan_machine_deployments(mds, [POOL], plan, "node-pool")
    assert again == mds
    got = cc.read_pool(mds[0], {}, plan)
    assert got["replicas"] == 2 and got["vm_class"] == "vmclass-h100-80c"
    assert got["labels"] == POOL["labels"] and got["taints"] == [TAINT] and got["lacks"] == {}
    assert got["class"] == "vmware-system-vks-public/" + name


def test_written_forms_per_generation():
    v31 = cc.apply_pool(None, POOL, cc.variable_plan(CLASSES["builtin-generic-v3.1.0"]), "node-pool")
    ovs = dict((o["name"], o["value"]) for o in v31["variables"]["overrides"])
    assert ovs["nodePoolLabels"] == [{"key": "gpupool.vcf/workload", "value": "inference"}]
    assert ovs["nodePoolTaints"] == [TAINT] and "node" not in ovs
    v37 = cc.apply_pool(None, POOL, cc.variable_plan(CLASSES["builtin-generic-v3.7.0"]), "node-pool")
    ovs = dict((o["name"], o["value"]) for o in v37["variables"]["overrides"])
    assert ovs["node"] == {"labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}


def test_status_variables_are_read_when_the_spec_has_none():
    later = CLASSES["builtin-generic-v3.7.0"]
    assert not (later["spec"].get("variables"))
    names = [v["name"] for v in cc.class_variables(later)]
    assert "node" in names and "vmClass" in names
    # spec wins over status for the same name; status adds what spec lacks; inline first
    obj = {"metadata": {"name": "x"},
           "spec": {"variables": [{"name": "vmClass", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}}]},
           "status": {"variables": [
               {"name": "vmClass", "definitions": [{"from": "inline", "schema": {"openAPIV3Schema": {"type": "integer"}}}]},
               {"name": "extra", "definitions": [{"from": "ext", "required": True, "schema": {"openAPIV3Schema": {"type": "object"}}},
                                                 {"from": "inline", "schema": {"openAPIV3Schema": {"type": "string"}}}]},
               {"name": "empty", "definitions": []}]}}
    got = cc.class_variables(obj)
    assert got == [{"name": "vmClass", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}},
                   {"name": "extra", "required": False, "schema": {"openAPIV3Schema": {"type": "string"}}}]
    assert cc.class_name(obj) == "x"


def _without(name, drop):
    obj = copy.deepcopy(CLASSES[name])
    obj["spec"]["variables"] = [v for v in obj["spec"]["variables"] if v["name"] not in drop]
    return obj


def test_a_class_without_a_taint_variable_refuses_taints_naming_itself():
    plan = cc.variable_plan(_without("builtin-generic-v3.1.0", {"nodePoolTaints"}))
    assert plan["taints"] is None and cc.place(plan["labels"]) == "nodePoolLabels"
    with pytest.raises(cc.PlanError) as err:
        cc.plan_machine_deployments([], [POOL], plan, "node-pool")
    msg = str(err.value)
    assert "ClusterClass vmware-system-vks-public/builtin-generic-v3.1.0 has no variable for node taints" in msg
    assert "node pool gpu cannot set node taints" in msg and "nodePoolLabels" in msg
    # labels alone, or an empty taint list, ask nothing the class cannot hold
    ok = cc.plan_machine_deployments([], [dict(POOL, taints=[])], plan, "node-pool")
    assert [o["name"] for o in ok[0]["variables"]["overrides"]] == ["vmClass", "nodePoolLabels"]
    got = cc.read_pool(ok[0], {}, plan)
    assert got["taints"] is None and "no variable for node taints" in got["lacks"]["taints"]


def test_a_class_without_a_labels_variable_refuses_labels():
    plan = cc.variable_plan(_without("builtin-generic-v3.4.0", {"node"}))
    with pytest.raises(cc.PlanError, match="ClusterClass vmware-system-vks-public/builtin-generic-v3.4.0 has no variable "
                                           "for node labels"):
        cc.check_pool(dict(POOL, taints=None), plan)
    with pytest.raises(cc.PlanError, match="has no vmClass variable"):
        cc.check_pool({"name": "gpu", "vm_class": "x"}, cc.variable_plan(_without("builtin-generic-v3.4.0", {"vmClass"})))


def test_the_schema_rules_of_a_taint():
    plan = cc.variable_plan(CLASSES["builtin-generic-v3.4.0"])
    assert plan["taint_rules"] == {"required": ["effect", "key", "value"],
                                   "effects": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}
    with pytest.raises(cc.PlanError, match="taint nvidia.com/gpu lacks value, which ClusterClass "
                                           "vmware-system-vks-public/builtin-generic-v3.4.0 requires of each taint in node.taints"):
        cc.check_pool({"name": "gpu", "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}, plan)
    odd = copy.deepcopy(CLASSES["builtin-generic-v3.4.0"])
    node = [v for v in odd["spec"]["variables"] if v["name"] == "node"][0]
    node["schema"]["openAPIV3Schema"]["properties"]["taints"]["items"]["properties"]["effect"]["enum"] = ["NoSchedule"]
    with pytest.raises(cc.PlanError, match="has effect NoExecute; ClusterClass .* allows NoSchedule"):
        cc.check_pool({"name": "gpu", "taints": [dict(TAINT, effect="NoExecute")]}, cc.variable_plan(odd))
    # the v3.1-era schema asks for no value: a taint without one is written without one
    v31 = cc.variable_plan(CLASSES["builtin-generic-v3.1.0"])
    md = cc.apply_pool(None, {"name": "gpu", "taints": [{"key": "k", "value": None, "effect": "NoExecute"}]}, v31, "node-pool")
    assert md["variables"]["overrides"] == [{"name": "nodePoolTaints", "value": [{"key": "k", "effect": "NoExecute"}]}]


def test_two_places_for_labels_are_ambiguous_and_refused():
    both = copy.deepcopy(CLASSES["builtin-generic-v3.4.0"])
    both["spec"]["variables"] += [v for v in CLASSES["tanzukubernetescluster"]["spec"]["variables"]
                                  if v["name"] == "nodePoolLabels"]
    plan = cc.variable_plan(both)
    assert plan["labels"] is None and plan["ambiguous"] == {"labels": ["node.labels", "nodePoolLabels"]}
    assert cc.place(plan["taints"]) == "node.taints"
    with pytest.raises(cc.PlanError, match=r"several variables that look like node labels \(node.labels, nodePoolLabels\)"):
        cc.check_pool(POOL, plan)
    cc.check_pool(dict(POOL, labels=None), plan)  # taints alone have one place


def test_control_plane_variables_are_not_a_pools():
    variables = [{"name": "controlPlaneLabels", "schema": {"openAPIV3Schema": {
        "type": "object", "additionalProperties": {"type": "string"}}}},
        {"name": "nodeLabels", "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]
    plan = cc.variable_plan(variables, name="custom")
    assert plan["labels"] == {"variable": "nodeLabels", "property": None, "form": "map"} and plan["class"] == "custom"
    assert plan["taints"] is None and plan["vm_class"] is None


def test_a_new_object_override_starts_from_the_clusters_value():
    """An override replaces the Cluster's value whole: taints alone keep the Cluster-wide labels."""
    plan = cc.variable_plan(CLASSES["builtin-generic-v3.4.0"])
    top = {"node": {"labels": {"env": "prod"}}}
    md = cc.apply_pool(None, {"name": "gpu", "taints": [TAINT]}, plan, "node-pool", top)
    assert md["variables"]["overrides"] == [{"name": "node", "value": {"labels": {"env": "prod"}, "taints": [TAINT]}}]
    assert top == {"node": {"labels": {"env": "prod"}}}
    got = cc.read_pool(md, top, plan)
    assert got["labels"] == {"env": "prod"} and got["taints"] == [TAINT]
    # without an override the Cluster's own value applies
    assert cc.read_pool({"name": "gpu"}, top, plan)["labels"] == {"env": "prod"}


def test_top_variables_and_class_ref():
    cluster = {"spec": {"topology": {"classRef": {"name": "builtin-generic-v3.7.0"},
                                     "variables": [{"name": "vmClass", "value": "best-effort-large"}]}}}
    assert cc.top_variables(cluster) == {"vmClass": "best-effort-large"}
    assert cc.class_ref(cluster, "v1beta2", "ns") == {"name": "builtin-generic-v3.7.0", "namespace": "ns"}
