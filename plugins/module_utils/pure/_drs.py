# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-VM DRS overrides for GPU VMs: pure planning, no I/O.

``drs_gpu_pinning`` reads a cluster once (its DRS VM overrides and every VM with its
devices), then :func:`plan_pinning` decides which overrides to add, edit and remove.
The module turns the plan into at most one ``ReconfigureComputeResource_Task``.

Values are plain data so the planner is unit-tested without pyvmomi:

* a VM is ``{"moid": "vm-42", "name": "llm-01", "vgpu_profiles": ["nvidia_h100-1-10c"]}``;
* an override is ``{"moid": "vm-42", "behavior": "manual", "enabled": True}``.

Ownership: the collection removes only the overrides it set. What it set is recorded on the
cluster itself, in the custom attribute :data:`RECORD_FIELD` (the managed object ids of the VMs,
see :func:`format_record`), so a run from another machine knows it too. An override that
already existed and already matches is not recorded; one the run adds or changes is. Purge
removes only recorded overrides of VMs that no longer hold a vGPU (or are gone), and the
record drops every VM whose override is no longer there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import record_after

BEHAVIORS = ("manual", "partiallyAutomated")
DEFAULT_BEHAVIOR = "partiallyAutomated"
# custom attribute of the cluster that records the VMs whose override the collection set
RECORD_FIELD = "gpupool.vcf.drs-pinned"


class DrsPlanError(ValueError):
    """The request cannot be planned (unknown VM, bad behavior); nothing is changed."""


class PinningPlan:
    """What to change: lists of overrides to add, edit and remove, plus before/after views."""

    def __init__(self):
        self.add = []      # [{"moid", "name", "behavior", "enabled"}]
        self.edit = []     # [{"moid", "name", "behavior", "enabled", "was"}]
        self.remove = []   # [{"moid", "name", "behavior"}]
        self.pinned = []   # every VM this run wants pinned, sorted by name
        self.pinned_moids = []
        self.before = {}   # {vm name: behavior or None} over every VM the plan touched or checked
        self.after = {}
        # the record of the overrides the collection set (sets of VM moids): as read, as it must
        # be before the reconfigure (adds and edits claimed), and after it (removals dropped)
        self.owned_before = set()
        self.owned_claim = set()
        self.owned_after = set()
        self.kept_foreign = []  # names of VMs without vGPU whose override purge left: not ours
        self.names = {}     # {moid: name} for every VM and override the plan saw

    @property
    def overrides_changed(self):
        return bool(self.add or self.edit or self.remove)

    @property
    def record_changed(self):
        return self.owned_after != self.owned_before

    @property
    def changed(self):
        return self.overrides_changed or self.record_changed

    def owned_names(self, moids):
        return sorted(self.names.get(m, m) for m in moids)

    def summary(self):
        return dict(
            added=sorted(x["name"] for x in self.add),
            updated=sorted(x["name"] for x in self.edit),
            removed=sorted(x["name"] for x in self.remove),
            pinned=list(self.pinned),
            owned=self.owned_names(self.owned_after),
            kept_foreign=sorted(self.kept_foreign),
        )


def _index_vms(vms):
    by_moid = {}
    by_name = {}
    for vm in vms:
        by_moid[vm["moid"]] = vm
        by_name.setdefault(vm["name"], []).append(vm)
    return by_moid, by_name


def resolve_vms(names, vms, what="vms"):
    """VMs of the cluster named by name or managed object id; unknown or ambiguous names fail."""
    by_moid, by_name = _index_vms(vms)
    out = []
    missing = []
    for name in names or []:
        if name in by_moid:
            out.append(by_moid[name])
            continue
        found = by_name.get(name, [])
        if not found:
            missing.append(name)
        elif len(found) > 1:
            raise DrsPlanError("%s: VM name %s is not unique in the cluster (%s); give its managed object id"
                               % (what, name, ", ".join(sorted(v["moid"] for v in found))))
        else:
            out.append(found[0])
    if missing:
        raise DrsPlanError("%s: VM(s) not in the cluster: %s" % (what, ", ".join(missing)))
    return out


def _moid_key(moid):
    """Sort key of a managed object id: ``vm-9`` before ``vm-10``."""
    match = re.match(r"^(.*?)(\d+)$", moid)
    return (match.group(1), int(match.group(2)), moid) if match else (moid, -1, moid)


def format_record(moids):
    """The record's value: the VM moids, sorted, comma-separated, no spaces (``vm-9,vm-10``)."""
    return ",".join(sorted(set(moids), key=_moid_key))


def parse_record(value):
    """The set of VM moids a record holds; None or an empty value is an empty record.

    The value may have been edited by hand: blanks are ignored, and an entry that is no VM
    with an override is simply dropped from the record by the next run.
    """
    return set(x.strip() for x in (value or "").split(",") if x.strip())


def plan_pinning(vms, overrides, behavior=DEFAULT_BEHAVIOR, names=None, exclude=None, purge_stale=False,
                 owned=None, adopt=False):
    """Plan the overrides for one cluster.

    ``vms``: every VM of the cluster (see module docstring). ``overrides``: the cluster's
    current DRS VM overrides. ``names``: pin exactly these VMs (names or moids) instead of
    every VM holding a vGPU. ``exclude``: VMs (names or moids) never touched. ``owned``: the
    moids of the VMs whose override the collection set (the record; None or empty when there
    is none). With ``purge_stale``, the owned overrides of VMs that hold no vGPU (and are not
    named in ``names``), and of VMs no longer in the cluster, are removed; an override the
    collection did not set is never removed. With ``adopt``, the override of every VM pinned
    (one that already matched included) is recorded as the collection's.
    """
    if behavior not in BEHAVIORS:
        raise DrsPlanError("behavior %r is not one of %s" % (behavior, ", ".join(BEHAVIORS)))
    by_moid = _index_vms(vms)[0]
    # exclude may name VMs that are gone: ignore those rather than fail a cleanup run
    excluded = set()
    for name in exclude or []:
        excluded.update(v["moid"] for v in vms if v["moid"] == name or v["name"] == name)
        excluded.add(name)
    if names is not None:
        wanted = resolve_vms(names, vms)
    else:
        wanted = [v for v in vms if v.get("vgpu_profiles")]
    wanted = [v for v in wanted if v["moid"] not in excluded]
    wanted_ids = set(v["moid"] for v in wanted)
    current = dict((o["moid"], o) for o in overrides)

    owned = set(owned or ())

    plan = PinningPlan()
    plan.names = dict((v["moid"], v["name"]) for v in vms)
    for vm in sorted(wanted, key=lambda v: (v["name"], v["moid"])):
        have = current.get(vm["moid"])
        plan.pinned.append(vm["name"])
        plan.pinned_moids.append(vm["moid"])
        plan.before[vm["name"]] = _view(have)
        plan.after[vm["name"]] = behavior
        entry = dict(moid=vm["moid"], name=vm["name"], behavior=behavior, enabled=True)
        if have is None:
            plan.add.append(entry)
        elif have.get("behavior") != behavior or have.get("enabled") is False:
            entry["was"] = _view(have)
            plan.edit.append(entry)
    if purge_stale:
        for moid, have in sorted(current.items()):
            if moid in wanted_ids or moid in excluded:
                continue
            vm = by_moid.get(moid)
            if vm is not None and vm.get("vgpu_profiles"):
                continue  # still holds a vGPU: not stale, whatever this run pins
            name = vm["name"] if vm is not None else moid
            if moid not in owned:
                plan.kept_foreign.append(name)  # set by someone else: never ours to remove
                continue
            plan.remove.append(dict(moid=moid, name=name, behavior=have.get("behavior")))
            plan.before[name] = _view(have)
            plan.after[name] = None
    _plan_record(plan, owned, current, adopt)
    return plan


def _plan_record(plan, owned, current, adopt=False):
    """The record before and after the reconfigure.

    Kept: recorded VMs whose override is still there; added: every VM whose override the run
    adds or changes (the claim, written before the reconfigure so a failed write changes
    nothing); dropped after the reconfigure: the overrides it removed. With ``adopt`` the claim
    also holds every pinned VM (its override is there after the reconfigure).
    """
    plan.owned_before = set(owned)
    claimed = set(e["moid"] for e in plan.add) | set(e["moid"] for e in plan.edit)
    plan.owned_claim = record_after(plan.owned_before, set(current) | claimed, claimed, plan.pinned_moids, adopt)
    plan.owned_after = plan.owned_claim - set(e["moid"] for e in plan.remove)


def _view(override):
    """An override as the diff shows it: its behavior, 'disabled', or None for none."""
    if override is None:
        return None
    if override.get("enabled") is False:
        return "disabled"
    return override.get("behavior")


def plan_vm_host_rule(rule, groups, rules, vm_moids, host_moids):
    """Keep the pinned VMs on the GPU hosts: a VM group, a host group and a VM-host rule.

    ``rule``: {"name", "vm_group", "host_group", "mandatory"}. ``groups``: the cluster's groups
    {name: {"kind": "vm"|"host", "members": [moid]}}. ``rules``: its rules {name: {"key", "kind",
    "vm_group", "host_group", "mandatory", "enabled"}}; kind "vmhost" for VM-host rules.
    The two groups belong to the rule: their members are made exactly ``vm_moids`` and
    ``host_moids``. Returns {"groups": [(operation, kind, name, members)], "rule": (operation,
    key) or None, "before": view, "after": view}.
    """
    if not host_moids:
        raise DrsPlanError("vm_host_rule %s: no host of the cluster has an NVIDIA GPU" % rule["name"])
    out = dict(groups=[], rule=None)
    existed = False
    before = dict(name=rule["name"], vm_group=None, host_group=None, mandatory=None, enabled=None)
    for kind, name, members in (("vm", rule["vm_group"], vm_moids), ("host", rule["host_group"], host_moids)):
        have = groups.get(name)
        want = sorted(set(members))
        if have is None:
            out["groups"].append(("add", kind, name, want))
            continue
        if have["kind"] != kind:
            raise DrsPlanError("vm_host_rule %s: group %s exists but is a %s group, not a %s group"
                               % (rule["name"], name, have["kind"], kind))
        existed = True
        before["%s_group" % kind] = sorted(have["members"])
        if sorted(set(have["members"])) != want:
            out["groups"].append(("edit", kind, name, want))
    have = rules.get(rule["name"])
    wanted = dict(vm_group=rule["vm_group"], host_group=rule["host_group"], mandatory=bool(rule.get("mandatory")),
                  enabled=True)
    if have is None:
        out["rule"] = ("add", None)
    else:
        if have.get("kind") != "vmhost":
            raise DrsPlanError("rule %s exists but is not a VM-host rule" % rule["name"])
        existed = True
        before.update(mandatory=have.get("mandatory"), enabled=have.get("enabled"))
        current = dict(vm_group=have.get("vm_group"), host_group=have.get("host_group"),
                       mandatory=bool(have.get("mandatory")), enabled=have.get("enabled") is not False)
        if current != wanted:
            out["rule"] = ("edit", have.get("key"))
    after = dict(name=rule["name"], vm_group=sorted(set(vm_moids)), host_group=sorted(set(host_moids)),
                 mandatory=wanted["mandatory"], enabled=True)
    out["before"] = before if existed else None
    out["after"] = after
    out["changed"] = bool(out["groups"] or out["rule"])
    return out


__all__ = ["BEHAVIORS", "DEFAULT_BEHAVIOR", "RECORD_FIELD", "DrsPlanError", "PinningPlan", "format_record", "parse_record",
           "plan_pinning", "plan_vm_host_rule", "resolve_vms"]
