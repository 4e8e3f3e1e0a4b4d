"""Planning of per-VM DRS overrides for GPU VMs (pure)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import (
    DrsPlanError,
    format_record,
    parse_record,
    plan_pinning,
    plan_vm_host_rule,
    resolve_vms,
)


def vm(moid, name, *profiles):
    return dict(moid=moid, name=name, vgpu_profiles=list(profiles))


def ov(moid, behavior="partiallyAutomated", enabled=True):
    return dict(moid=moid, behavior=behavior, enabled=enabled)


VMS = [
    vm("vm-1", "gpu-a", "nvidia_h100-1-10c"),
    vm("vm-2", "gpu-b", "nvidia_h100-80c", "nvidia_h100-80c"),
    vm("vm-3", "plain"),
    vm("vm-4", "was-gpu"),
]


def test_discovers_every_vgpu_vm_and_adds_overrides():
    plan = plan_pinning(VMS, [])
    assert [e["name"] for e in plan.add] == ["gpu-a", "gpu-b"]
    assert all(e["behavior"] == "partiallyAutomated" and e["enabled"] for e in plan.add)
    assert plan.edit == [] and plan.remove == []
    assert plan.changed
    assert plan.before == {"gpu-a": None, "gpu-b": None}
    assert plan.after == {"gpu-a": "partiallyAutomated", "gpu-b": "partiallyAutomated"}


def test_nothing_to_do_when_already_pinned():
    plan = plan_pinning(VMS, [ov("vm-1"), ov("vm-2")])
    assert not plan.changed
    assert plan.pinned == ["gpu-a", "gpu-b"]


def test_edit_on_other_behavior_or_disabled():
    plan = plan_pinning(VMS, [ov("vm-1", "manual"), ov("vm-2", enabled=False)])
    assert [(e["name"], e["was"]) for e in plan.edit] == [("gpu-a", "manual"), ("gpu-b", "disabled")]
    assert plan.add == []


def test_manual_behavior():
    plan = plan_pinning(VMS, [ov("vm-1")], behavior="manual")
    assert [e["name"] for e in plan.edit] == ["gpu-a"]
    assert [e["name"] for e in plan.add] == ["gpu-b"]


def test_bad_behavior_fails():
    with pytest.raises(DrsPlanError, match="behavior"):
        plan_pinning(VMS, [], behavior="fullyAutomated")


def test_stale_kept_without_purge_and_removed_with_it():
    current = [ov("vm-1"), ov("vm-4"), ov("vm-99")]
    owned = {"vm-1", "vm-4", "vm-99"}
    assert plan_pinning(VMS, current, owned=owned).remove == []
    plan = plan_pinning(VMS, current, purge_stale=True, owned=owned)
    assert [e["name"] for e in plan.remove] == ["was-gpu", "vm-99"]
    assert plan.after["was-gpu"] is None and plan.before["was-gpu"] == "partiallyAutomated"
    assert [e["name"] for e in plan.add] == ["gpu-b"]
    assert plan.owned_claim == owned | {"vm-2"} and plan.owned_after == {"vm-1", "vm-2"}
    assert plan.summary()["owned"] == ["gpu-a", "gpu-b"] and plan.summary()["kept_foreign"] == []


def test_purge_never_removes_vgpu_vms_or_named_or_excluded():
    current = [ov("vm-2", "manual"), ov("vm-3"), ov("vm-4")]
    plan = plan_pinning(VMS, current, names=["gpu-a", "plain"], exclude=["was-gpu"], purge_stale=True,
                        owned={"vm-2", "vm-3", "vm-4"})
    assert [e["name"] for e in plan.add] == ["gpu-a"]
    assert plan.remove == []  # vm-2 holds a vGPU, vm-3 is named, vm-4 excluded
    assert plan.pinned == ["gpu-a", "plain"]


def test_exclude_by_name_or_moid():
    plan = plan_pinning(VMS, [], exclude=["gpu-a", "vm-2"])
    assert not plan.changed and plan.pinned == []


def test_exclude_of_absent_vm_is_ignored():
    assert plan_pinning(VMS, [], exclude=["gone"]).pinned == ["gpu-a", "gpu-b"]


def test_named_vms_resolve_by_name_or_moid():
    assert [v["moid"] for v in resolve_vms(["gpu-b", "vm-3"], VMS)] == ["vm-2", "vm-3"]


def test_unknown_named_vm_fails():
    with pytest.raises(DrsPlanError, match="not in the cluster: nope"):
        plan_pinning(VMS, [], names=["gpu-a", "nope"])


def test_ambiguous_name_fails():
    with pytest.raises(DrsPlanError, match="not unique"):
        resolve_vms(["dup"], VMS + [vm("vm-7", "dup"), vm("vm-8", "dup")])


RULE = {"name": "r", "vm_group": "r-vms", "host_group": "r-hosts", "mandatory": False}


def test_vm_host_rule_created():
    out = plan_vm_host_rule(RULE, {}, {}, ["vm-1"], ["host-1", "host-2"])
    assert out["groups"] == [("add", "vm", "r-vms", ["vm-1"]), ("add", "host", "r-hosts", ["host-1", "host-2"])]
    assert out["rule"] == ("add", None) and out["changed"] and out["before"] is None


def test_vm_host_rule_unchanged_and_edits():
    groups = {"r-vms": {"kind": "vm", "members": ["vm-1"]}, "r-hosts": {"kind": "host", "members": ["host-1"]}}
    rules = {"r": {"key": 7, "kind": "vmhost", "vm_group": "r-vms", "host_group": "r-hosts", "mandatory": False,
                   "enabled": True}}
    assert not plan_vm_host_rule(RULE, groups, rules, ["vm-1"], ["host-1"])["changed"]
    out = plan_vm_host_rule(dict(RULE, mandatory=True), groups, rules, ["vm-1", "vm-2"], ["host-1"])
    assert out["groups"] == [("edit", "vm", "r-vms", ["vm-1", "vm-2"])] and out["rule"] == ("edit", 7)
    assert out["before"]["mandatory"] is False and out["after"]["mandatory"] is True


def test_vm_host_rule_conflicts():
    with pytest.raises(DrsPlanError, match="no host of the cluster has an NVIDIA GPU"):
        plan_vm_host_rule(RULE, {}, {}, ["vm-1"], [])
    with pytest.raises(DrsPlanError, match="is a host group, not a vm group"):
        plan_vm_host_rule(RULE, {"r-vms": {"kind": "host", "members": []}}, {}, ["vm-1"], ["h"])
    with pytest.raises(DrsPlanError, match="not a VM-host rule"):
        plan_vm_host_rule(RULE, {}, {"r": {"key": 1, "kind": "other"}}, ["vm-1"], ["h"])


# --- ownership: the record of the overrides the collection set ---------------------------------

def test_record_format_is_sorted_compact_and_parse_is_lenient():
    assert format_record(["vm-10", "vm-9", "vm-100", "vm-9"]) == "vm-9,vm-10,vm-100"
    assert format_record([]) == ""
    assert parse_record(" vm-9, vm-10 ,,vm-100 ") == {"vm-9", "vm-10", "vm-100"}
    assert parse_record(None) == set() and parse_record("") == set()
    assert parse_record(format_record(["vm-3", "vm-1"])) == {"vm-1", "vm-3"}


def test_added_and_changed_overrides_are_recorded_matching_ones_are_not():
    # vm-1 matches already (set by hand): not ours; vm-2 differs: changed, so ours; vm-5 is new
    vms = VMS + [vm("vm-5", "gpu-c", "nvidia_h100-80c")]
    plan = plan_pinning(vms, [ov("vm-1"), ov("vm-2", "manual")])
    assert [e["name"] for e in plan.add] == ["gpu-c"] and [e["name"] for e in plan.edit] == ["gpu-b"]
    assert plan.owned_before == set() and plan.owned_after == {"vm-2", "vm-5"}
    assert plan.owned_claim == plan.owned_after
    assert plan.record_changed and plan.summary()["owned"] == ["gpu-b", "gpu-c"]


def test_purge_removes_only_recorded_overrides():
    # vm-3 (no vGPU) pinned by hand, vm-4 (lost its vGPU) pinned by the collection, vm-98 (gone) by hand
    current = [ov("vm-1"), ov("vm-3", "manual"), ov("vm-4"), ov("vm-98"), ov("vm-99")]
    plan = plan_pinning(VMS, current, purge_stale=True, owned={"vm-1", "vm-4", "vm-99"})
    assert [e["name"] for e in plan.remove] == ["was-gpu", "vm-99"]
    assert plan.kept_foreign == ["plain", "vm-98"]
    assert plan.owned_claim == {"vm-1", "vm-2", "vm-4", "vm-99"} and plan.owned_after == {"vm-1", "vm-2"}
    assert plan.summary()["kept_foreign"] == ["plain", "vm-98"]
    assert "plain" not in plan.before and "vm-98" not in plan.before


def test_override_on_vgpu_vm_set_by_hand_survives_when_the_vm_loses_its_vgpu():
    # pinned by hand while it held a vGPU (matching, so not recorded); later the vGPU is removed
    first = plan_pinning(VMS, [ov("vm-1"), ov("vm-2")], purge_stale=True)
    assert not first.changed and first.owned_after == set()
    vms = [vm("vm-1", "gpu-a"), VMS[1], VMS[2], VMS[3]]
    later = plan_pinning(vms, [ov("vm-1"), ov("vm-2")], purge_stale=True, owned=first.owned_after)
    assert later.remove == [] and later.kept_foreign == ["gpu-a"] and not later.changed


def test_no_change_no_record_write_and_rerun_is_stable():
    plan = plan_pinning(VMS, [ov("vm-1"), ov("vm-2")], owned={"vm-1", "vm-2"}, purge_stale=True)
    assert not plan.changed and not plan.record_changed
    first = plan_pinning(VMS, [ov("vm-4")], owned={"vm-4"}, purge_stale=True)
    assert first.owned_after == {"vm-1", "vm-2"}
    again = plan_pinning(VMS, [ov("vm-1"), ov("vm-2")], owned=first.owned_after, purge_stale=True)
    assert not again.changed


def test_record_drops_vms_whose_override_is_gone():
    # the override of vm-4 was removed by hand, vm-77 was deleted with its override: pruned, no reconfigure
    plan = plan_pinning(VMS, [ov("vm-1"), ov("vm-2")], owned={"vm-1", "vm-4", "vm-77"})
    assert not plan.overrides_changed and plan.record_changed and plan.changed
    assert plan.owned_claim == plan.owned_after == {"vm-1"}


def test_excluded_override_stays_recorded_and_is_never_removed():
    plan = plan_pinning(VMS, [ov("vm-1"), ov("vm-2"), ov("vm-4")], owned={"vm-4"}, exclude=["was-gpu"],
                        purge_stale=True)
    assert plan.remove == [] and plan.owned_after == {"vm-4"} and not plan.changed


def test_override_left_by_an_earlier_release_counts_as_someone_elses():
    # no record at all (field never written): nothing is removed, nothing matching is claimed
    plan = plan_pinning(VMS, [ov("vm-1"), ov("vm-2"), ov("vm-4")], purge_stale=True, owned=None)
    assert plan.remove == [] and plan.kept_foreign == ["was-gpu"] and not plan.changed
