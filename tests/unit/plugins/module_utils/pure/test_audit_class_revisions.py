"""The audit with supervisor.vm_class_revisions: each class, namespace and node pool judged under the
name vm_class resolves (the same _vm_class.resolve), against hand-made live states (no I/O)."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_vks, _audit_vsphere, _namespace
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def design(revisions=True, **pool_changes):
    d = copy.deepcopy(DESIGN)
    d["supervisor"]["vm_class_revisions"] = revisions
    for pool in d["pools"]:
        pool.update(pool_changes.get(pool["name"]) or {})
    return derive(d)


def live_class(c, **over):
    info = dict(cpu_count=c["cpu_count"], memory_MB=c["memory_mb"], memory_reservation=100, cpu_reservation=0,
                description=c["description"], devices={"vgpu_devices": [{"profile_name": p} for p in c["vgpu_profiles"]]})
    info.update(over)
    out = vmc.normalize(info)
    out["profiling"] = bool(over.get("profiling", c.get("profiling")))  # as the role sets it (config_spec extraConfig)
    return out


def namespace(n, classes):
    ids = {"vSAN Default Storage Policy": "pol-vsan"}
    return _namespace.normalize({
        "cluster": "domain-c9", "description": n["description"],
        "vm_service_spec": {"vm_classes": list(classes), "content_libraries": []},
        "storage_specs": [dict(policy=ids[s["policy"]], limit=s["limit_mib"]) if s["limit_mib"] else
                          dict(policy=ids[s["policy"]]) for s in n["storage_policies"]],
        "resource_spec": dict((api, n["limits"][k]) for k, api in _namespace.LIMITS if n["limits"][k] is not None),
        "access_list": [{"subject_type": e["type"], "domain": e["domain"], "subject": e["subject"], "role": e["role"]}
                        for e in n["access"]]})


def vsphere(derived, names=None, extra=None):
    """(classes, namespaces, policies) with each design class live under ``names`` ({design: live name})."""
    names = names or {}
    classes = dict((names.get(c["name"], c["name"]), live_class(c)) for c in derived["vsphere"]["vm_classes"])
    classes.update(extra or {})
    namespaces = dict((n["name"], namespace(n, [names.get(c, c) for c in n["vm_classes"]]))
                      for n in derived["vsphere"]["namespaces"])
    return classes, namespaces, {"pol-vsan": "vSAN Default Storage Policy"}


def node_pools(derived, names=None):
    names = names or {}
    return dict((c["name"], dict(namespace=c["namespace"], machine_deployments=dict(
        (p["name"], dict(replicas=p["replicas"], vm_class=names.get(p["vm_class"], p["vm_class"]), labels=None,
                         taints=None)) for p in c["node_pools"])))
        for c in derived["vks"]["clusters"].values())


def rules(findings):
    return sorted((f["rule"], f["object"]) for f in findings)


def inference_class(derived):
    return [c for c in derived["vsphere"]["vm_classes"] if c["pool"] == "inference"][0]


def test_derive_turns_revisions_on_for_the_roles():
    derived = design()
    assert derived["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_class_revisions"] is True
    assert all(e["vks_gpu_node_pools_wait_rollout"] for e in derived["roles"]["vks_gpu_node_pools"])
    off = design(revisions=False)
    assert off["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_class_revisions"] is False
    assert not any(e["vks_gpu_node_pools_wait_rollout"] for e in off["roles"]["vks_gpu_node_pools"])


def test_the_pool_on_its_base_class_is_clean():
    derived = design()
    classes, namespaces, policies = vsphere(derived)
    assert _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) == []
    assert _audit_vks.audit_vks(derived, node_pools(derived), vm_classes=classes) == []


def test_a_changed_profile_is_judged_under_its_revision():
    """The design moved inference to 4g.40gb: clean once the revision exists, is offered and the pool runs on it,
    with the old class kept in the namespaces while nodes use it."""
    derived = design(inference={"vgpu_profile": "nvidia_h100-4-40c", "per_card": 1})
    cls = inference_class(derived)
    new = vmc.revision_name(cls["name"], cls)
    old = live_class(dict(cls, vgpu_profiles=["nvidia_h100-3-40c"]))
    classes, namespaces, policies = vsphere(derived, {cls["name"]: new}, extra={cls["name"]: old})
    assert _audit_vsphere.class_names(_audit.role_inputs(derived, "supervisor_gpu_tenancy"), classes)[0][cls["name"]] == new
    # the old class still offered beside the new one (nodes use it): not a class the design lacks
    for name, ns in namespaces.items():
        if new in ns["vm_classes"]:
            ns["vm_classes"].append(cls["name"])
    assert _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) == []
    assert _audit_vks.audit_vks(derived, node_pools(derived, {cls["name"]: new}), vm_classes=classes) == []
    # the pool still on the old class: the VKS link reports it
    out = _audit_vks.audit_vks(derived, node_pools(derived), vm_classes=classes)
    assert rules(out) == [("node_pool_changed", "node_pool gpu-workloads/inference")]
    assert new in out[0]["message"]


def test_a_family_without_the_design_shape_says_the_rollout_is_due():
    derived = design(inference={"vgpu_profile": "nvidia_h100-4-40c", "per_card": 1})
    cls = inference_class(derived)
    old = live_class(dict(cls, vgpu_profiles=["nvidia_h100-3-40c"]))
    classes, namespaces, policies = vsphere(derived)
    classes[cls["name"]] = old
    out = [f for f in _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) if f["object"].startswith("vm_class")]
    assert rules(out) == [("vm_class_profile_changed", "vm_class %s" % cls["name"])]
    new = vmc.revision_name(cls["name"], cls)
    assert new in out[0]["message"] and "nvidia_h100-3-40c" in out[0]["message"] and "site.yml" in out[0]["fix"]
    # a shape change without a profile change is a size finding
    derived = design(inference={"vm_class": {"cpu": 12, "memory_gb": 64}})
    cls = inference_class(derived)
    classes, namespaces, policies = vsphere(derived)
    classes[cls["name"]] = live_class(dict(cls, cpu_count=8))
    out = [f for f in _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) if f["object"].startswith("vm_class")]
    assert rules(out) == [("vm_class_size_changed", "vm_class %s" % cls["name"])]


def test_without_revisions_a_changed_class_is_edited_in_place():
    derived = design(revisions=False)
    cls = inference_class(derived)
    classes, namespaces, policies = vsphere(derived)
    classes[cls["name"]]["vgpu_profiles"] = ["nvidia_h100-2-20c"]
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == [("vm_class_profile_changed", "vm_class %s" % cls["name"])]
    assert "site.yml" not in out[0]["fix"]
    # and a pool on a revision name is drift there
    new = vmc.revision_name(cls["name"], cls)
    assert rules(_audit_vks.audit_vks(derived, node_pools(derived, {cls["name"]: new}))) == [
        ("node_pool_changed", "node_pool gpu-workloads/inference")]


@pytest.mark.parametrize("on_revision", [False, True])
def test_vks_without_the_classes_read_accepts_the_base_or_the_designs_revision(on_revision):
    derived = design()
    cls = inference_class(derived)
    names = {cls["name"]: vmc.revision_name(cls["name"], cls)} if on_revision else {}
    assert _audit_vks.audit_vks(derived, node_pools(derived, names)) == []
    other = {cls["name"]: vmc.revision_name(cls["name"], dict(cls, cpu_count=99))}
    assert rules(_audit_vks.audit_vks(derived, node_pools(derived, other))) == [
        ("node_pool_changed", "node_pool gpu-workloads/inference")]


def test_the_audit_and_the_module_resolve_alike():
    """class_names is _vm_class.resolve over every class of the design: what vm_class would write."""
    derived = design(inference={"vgpu_profile": "nvidia_h100-4-40c", "per_card": 1})
    tenancy = _audit.role_inputs(derived, "supervisor_gpu_tenancy")
    cls = inference_class(derived)
    classes = {cls["name"]: live_class(dict(cls, vgpu_profiles=["nvidia_h100-3-40c"]))}
    names, superseded = _audit_vsphere.class_names(tenancy, classes)
    want = vmc.desired(dict(dict((k, v) for k, v in cls.items() if k in vmc.FIELDS), name=cls["name"]))
    assert (names[cls["name"]], superseded[cls["name"]]) == vmc.resolve(cls["name"], want, classes)
    assert superseded[cls["name"]] == [cls["name"]]
