"""The ownership decision (pure/_ownership) and its use by the DRS planner: adopt or not."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _ownership as own
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import plan_pinning


def test_record_keeps_what_is_there_and_claims_what_the_run_makes():
    assert own.record_after({"a", "gone"}, {"a", "b", "c"}, claimed={"b"}, wanted={"b", "c"}) == {"a", "b"}


def test_adopt_records_what_is_wanted_and_there():
    assert own.record_after({"a"}, {"a", "b", "c"}, claimed=(), wanted={"b", "c", "absent"}, adopt=True) == {"a", "b", "c"}


def test_without_adopt_nothing_changes_owner():
    assert own.record_after(set(), {"hand"}, claimed=(), wanted={"hand"}, adopt=False) == set()
    assert own.adopted(set(), {"hand"}, {"hand"}, adopt=False) == []


def test_adopted_lists_only_new_owners():
    assert own.adopted({"a"}, {"a", "b"}, {"a", "b", "x"}, adopt=True) == ["b"]


def test_not_owned():
    assert own.not_owned(["z", "a", "b"], {"b"}) == ["a", "z"]
    assert own.not_owned([], None) == []


def test_mark():
    assert own.marked("gpupool tenant a")
    assert not own.marked("gpupoolx") and not own.marked(None) and not own.marked("")
    assert own.with_mark("team a") == "gpupool team a"
    assert own.with_mark("gpupool x") == "gpupool x"
    assert own.marked(own.with_mark(""))


def test_description_of_a_new_or_owned_object_is_what_is_asked():
    assert own.description_after(None, "gpupool tenant a", exists=False) == "gpupool tenant a"
    assert own.description_after("gpupool old", "gpupool tenant a", exists=True) == "gpupool tenant a"
    assert own.description_after("gpupool old", None, exists=True) is None


def test_hand_made_object_keeps_its_description_without_adopt():
    assert own.description_after("made by hand", "gpupool tenant a", exists=True, adopt=False) is None
    # a description without the mark does not change the owner: it is written as asked
    assert own.description_after("made by hand", "team a", exists=True, adopt=False) == "team a"


def test_adopt_marks_a_hand_made_object():
    assert own.description_after("made by hand", "gpupool tenant a", exists=True, adopt=True) == "gpupool tenant a"
    assert own.description_after("made by hand", "team a", exists=True, adopt=True) == "gpupool team a"
    assert own.description_after("made by hand", None, exists=True, adopt=True) == "gpupool made by hand"


def test_finding_rows():
    rows = own.finding_rows("node pool", ["b", "a"], "Cluster ns/c", "set adopt: true")
    assert [r["object"] for r in rows] == ["a", "b"] and rows[0]["kind"] == "node pool"


VMS = [dict(moid="vm-1", name="llm-01", vgpu_profiles=["nvidia_h100-1-10c"]),
       dict(moid="vm-2", name="llm-02", vgpu_profiles=["nvidia_h100-1-10c"]),
       dict(moid="vm-3", name="web", vgpu_profiles=[])]


def test_drs_matching_override_stays_foreign_without_adopt():
    overrides = [dict(moid="vm-1", behavior="partiallyAutomated", enabled=True)]
    plan = plan_pinning(VMS, overrides)
    assert plan.owned_after == {"vm-2"} and [e["moid"] for e in plan.add] == ["vm-2"]


def test_drs_adopt_records_the_matching_override_and_a_rerun_is_unchanged():
    overrides = [dict(moid="vm-1", behavior="partiallyAutomated", enabled=True),
                 dict(moid="vm-2", behavior="partiallyAutomated", enabled=True)]
    plan = plan_pinning(VMS, overrides, adopt=True)
    assert not plan.overrides_changed and plan.record_changed
    assert plan.owned_claim == plan.owned_after == {"vm-1", "vm-2"}
    again = plan_pinning(VMS, overrides, owned=plan.owned_after, adopt=True)
    assert not again.changed


def test_drs_adopt_leaves_other_overrides_foreign():
    overrides = [dict(moid="vm-1", behavior="manual", enabled=True), dict(moid="vm-3", behavior="manual", enabled=True)]
    plan = plan_pinning(VMS, overrides, adopt=True, purge_stale=True)
    assert plan.owned_after == {"vm-1", "vm-2"}
    assert plan.kept_foreign == ["web"] and not plan.remove


def test_adopted_description_keeps_its_mark_on_a_rerun():
    first = own.description_after("team a", "team a", exists=True, adopt=True)
    assert first == "gpupool team a"
    assert own.description_after(first, "team a", exists=True, adopt=True) == first


def _vsphere(adopt):
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vsphere
    want_class = dict(name="gpu-a", cpu_count=8, memory_mb=8192, memory_reservation=100, vgpu_profiles=["nvidia_h100-1-10c"],
                      description="gpupool a: inference, 1 x nvidia_h100-1-10c")
    want_ns = dict(name="team-a", description="gpupool tenant a", vm_classes=["gpu-a"])
    if adopt:
        want_class["adopt"] = want_ns["adopt"] = True
    derived = dict(roles=dict(supervisor_gpu_tenancy=dict(supervisor_gpu_tenancy_vm_classes=[want_class],
                                                          supervisor_gpu_tenancy_namespaces=[want_ns])),
                   vsphere=dict(vm_classes=[dict(want_class, pool="a")], namespaces=[dict(want_ns, kind="tenant")]))
    classes = {"gpu-a": dict(cpu_count=8, memory_mb=8192, cpu_reservation=0, memory_reservation=100,
                             description="made by hand", vgpu_profiles=["nvidia_h100-1-10c"])}
    namespaces = {"team-a": dict(cluster="domain-c1", description="made by hand", vm_classes=["gpu-a"], content_libraries=[],
                                 storage_policies={}, limits={}, access=[])}
    return _audit_vsphere.audit_vsphere(derived, classes, namespaces)


def test_audit_of_hand_made_objects_without_adopt_is_clean_and_leaves_their_description():
    assert _vsphere(adopt=False) == []


def test_audit_names_the_hand_made_objects_a_design_adopts():
    out = _vsphere(adopt=True)
    rules = sorted((f["rule"], f["object"], f["severity"]) for f in out)
    assert ("object_not_owned", "vm_class gpu-a", "info") in rules
    assert ("object_not_owned", "namespace team-a", "info") in rules
    # and the description the adoption writes, as the modules plan it
    assert ("vm_class_description_changed", "vm_class gpu-a", "warning") in rules
    assert all("adopt" in f["fix"] for f in out if f["rule"] == "object_not_owned")
