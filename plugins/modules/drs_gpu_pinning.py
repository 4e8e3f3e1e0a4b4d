#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: drs_gpu_pinning
short_description: Per-VM DRS overrides that keep vGPU VMs from being moved automatically
version_added: 0.1.0
description:
  - Sets a per-VM DRS automation override (V(partiallyAutomated) or V(manual)) on every VM
    of a cluster that holds a vGPU device, or on the VMs named in O(vms). NVIDIA asks for
    vGPU VMs to run at one of these two levels; the Supervisor needs the cluster itself fully
    automated, so the cluster's own automation level is never changed.
  - With O(purge_stale), removes the overrides this module set on VMs that no longer hold a
    vGPU (and on VMs that left the cluster), except those named in O(vms) or O(exclude).
    An override set by anyone else is never removed.
  - What the module sets is recorded on vCenter itself, in the custom attribute
    C(gpupool.vcf.drs-pinned) of the cluster (the managed object ids of the VMs, sorted and
    comma-separated), so a later run from another machine or from AWX knows which overrides
    are the collection's. The attribute is defined (for clusters) the first time a record is
    written. An override that already existed on a vGPU VM and already matches O(behavior)
    is not recorded; one the module adds or changes is. A VM whose override is gone is dropped
    from the record.
  - Reads the cluster once (its overrides, the record and every VM with its devices, in one
    PropertyCollector retrieval) and changes it with at most one
    C(ReconfigureComputeResource_Task), whatever the number of VMs. The record is written with
    one C(SetField) when it changes - before the reconfigure when overrides are added or
    changed (a record that cannot be written changes nothing), after it when overrides are
    removed (a failed write leaves an entry the next run drops).
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  cluster:
    description: Name of the DRS cluster.
    type: str
    required: true
  behavior:
    description: DRS automation level set on each pinned VM.
    type: str
    choices: [manual, partiallyAutomated]
    default: partiallyAutomated
  vms:
    description:
      - Pin exactly these VMs (names or managed object ids) instead of every VM holding a vGPU.
      - A name that is not a VM of the cluster fails the task before anything changes.
    type: list
    elements: str
  exclude:
    description: VMs (names or managed object ids) whose override is never added, changed or removed.
    type: list
    elements: str
    default: []
  purge_stale:
    description:
      - Remove the overrides of VMs that hold no vGPU (unless named in O(vms)) and of VMs that
        are no longer in the cluster, when the record says this module set them.
      - Overrides an administrator set (on any VM), and overrides left by releases that kept no
        record, are never removed; they are listed in RV(kept_foreign).
    type: bool
    default: false
  adopt:
    description:
      - Record as the collection's the override of every VM this run pins, one that already
        matched (set by hand or by a release that kept no record) included, so that a later
        O(purge_stale) may remove it.
      - Without it, an override that already matches stays foreign; only those the run adds or
        changes are recorded.
    type: bool
    default: false
  vm_host_rule:
    description:
      - Also keep the pinned VMs on the hosts that have an NVIDIA GPU, with a VM group, a host
        group and a VM-host affinity rule, set in the same cluster reconfigure.
      - The two groups belong to the rule; their members are made exactly the pinned VMs and
        the GPU hosts.
    type: dict
    suboptions:
      name:
        description: Name of the VM-host rule.
        type: str
        required: true
      vm_group:
        description: Name of the VM group; default the rule name with C(-vms).
        type: str
      host_group:
        description: Name of the host group; default the rule name with C(-hosts).
        type: str
      mandatory:
        description: A mandatory rule (VMs must run on the group's hosts) instead of a preferential one.
        type: bool
        default: false
notes:
  - VMs created and managed by the Supervisor (VM Service, VKS nodes) are owned by the VM
    Operator; use O(exclude) for them unless overriding them is known to be supported.
  - An override on a vGPU VM that differs from O(behavior) is changed, and from then on counts
    as the collection's; name the VM in O(exclude) to keep an administrator's own setting.
  - Writing the record needs the privileges C(Global.SetCustomField) and, once, C(Global.ManageCustomFields).
"""

EXAMPLES = r"""
- name: Pin every vGPU VM of the cluster (partially automated) and drop stale overrides
  gpupool.vcf.drs_gpu_pinning:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    cluster: gpu-h100
    purge_stale: true

- name: Two VMs on manual, connection from module_defaults
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.drs_gpu_pinning:
    cluster: gpu-h100
    behavior: manual
    vms: [train-01, train-02]

- name: Pin every vGPU VM and keep them on the GPU hosts (preferential rule)
  gpupool.vcf.drs_gpu_pinning:
    cluster: gpu-mixed
    vm_host_rule:
      name: gpu-vms-on-gpu-hosts
"""

RETURN = r"""
pinned:
  description: Names of the VMs this run wants pinned (sorted).
  returned: always
  type: list
  elements: str
added:
  description: VMs that got a new override.
  returned: always
  type: list
  elements: str
updated:
  description: VMs whose override changed behavior or was re-enabled.
  returned: always
  type: list
  elements: str
removed:
  description: VMs (or managed object ids of VMs gone from the cluster) whose stale override was removed.
  returned: always
  type: list
  elements: str
owned:
  description: VMs (or managed object ids of VMs gone from the cluster) whose override the record holds as the collection's after the run.
  returned: always
  type: list
  elements: str
kept_foreign:
  description: Stale overrides (VMs without vGPU, or gone) that O(purge_stale) left because the collection did not set them.
  returned: always
  type: list
  elements: str
vm_host_rule:
  description: The VM-host rule and its groups after the run (VM and host names).
  returned: when O(vm_host_rule) is given
  type: dict
  sample: {name: gpu-vms-on-gpu-hosts, vm_group: [llm-01], host_group: [esx-01], mandatory: false, enabled: true}
diff:
  description:
    - C(overrides) is the override per VM before and after (behavior, V(disabled) or null), only
      VMs the run touched or checked; C(owned) the VMs the record holds as the collection's;
      C(vm_host_rule) the rule and its groups.
  returned: with --diff
  type: dict
  sample: {before: {overrides: {llm-01: null}, owned: []}, after: {overrides: {llm-01: partiallyAutomated}, owned: [llm-01]}}
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import BEHAVIORS, DEFAULT_BEHAVIOR, DrsPlanError, plan_pinning, plan_vm_host_rule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._drs_api import ClusterPinning
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import drs_gpu_pinning_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, DELETE, UPDATE, Change, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    cluster=dict(type="str", required=True),
    behavior=dict(type="str", choices=list(BEHAVIORS), default=DEFAULT_BEHAVIOR),
    vms=dict(type="list", elements="str"),
    exclude=dict(type="list", elements="str", default=[]),
    purge_stale=dict(type="bool", default=False),
    adopt=dict(type="bool", default=False),
    vm_host_rule=dict(type="dict", options=dict(
        name=dict(type="str", required=True),
        vm_group=dict(type="str"),
        host_group=dict(type="str"),
        mandatory=dict(type="bool", default=False),
    )),
)


def rule_options(option):
    """The vm_host_rule option with the group names defaulted from the rule's name (None without a rule)."""
    if not option:
        return None
    rule = dict(option)
    rule["vm_group"] = rule["vm_group"] or rule["name"] + "-vms"
    rule["host_group"] = rule["host_group"] or rule["name"] + "-hosts"
    return rule


def changes_of(name, pinning, rule_plan):
    """The plan's changes, one per override, the record and the VM-host rule."""
    out = [Change("VM %s" % e["name"], "drs_behavior", e.get("was"), e["behavior"], action)
           for action, entries in ((CREATE, pinning.add), (UPDATE, pinning.edit)) for e in entries]
    out.extend(Change("VM %s" % e["name"], "drs_behavior", e["behavior"], None, DELETE) for e in pinning.remove)
    if pinning.record_changed:
        out.append(Change(name, "owned", pinning.owned_names(pinning.owned_before), pinning.owned_names(pinning.owned_after)))
    if rule_plan is not None and rule_plan["changed"]:
        out.append(Change("VM-host rule %s" % rule_plan["after"]["name"], "rule", rule_plan["before"], rule_plan["after"]))
    return out


class DrsPinning(Resource):
    """The DRS overrides of one cluster's vGPU VMs, with the record of those the collection set."""

    verb = "pin GPU VMs of"
    refusals = (DrsPlanError,)

    def __init__(self, module):
        Resource.__init__(self, "cluster %s" % module.params["cluster"])
        self.module = module
        self.p = module.params
        self.api = None

    def read(self):
        """The cluster's VMs, overrides, record, groups and rules, in one retrieval."""
        self.api = ClusterPinning(self.module.client(), self.p["cluster"])
        with self.doing("read DRS overrides of"):
            vms, overrides, owned = self.api.read(gpu_hosts=bool(self.p["vm_host_rule"]))
        self.warnings.extend(self.api.warnings)
        return dict(vms=vms, overrides=overrides, owned=owned)

    def plan(self, live):
        p = self.p
        pinning = plan_pinning(live["vms"], live["overrides"], behavior=p["behavior"], names=p["vms"], exclude=p["exclude"],
                               purge_stale=p["purge_stale"], owned=live["owned"], adopt=p["adopt"])
        rule = rule_options(p["vm_host_rule"])
        rule_plan = None
        before = dict(overrides=pinning.before, owned=pinning.owned_names(pinning.owned_before))
        after = dict(overrides=pinning.after, owned=pinning.owned_names(pinning.owned_after))
        if rule is not None:
            rule_plan = plan_vm_host_rule(rule, self.api.groups, self.api.rules, pinning.pinned_moids, self.api.gpu_hosts)
            before["vm_host_rule"], after["vm_host_rule"] = [self.rule_view(v) for v in (rule_plan["before"], rule_plan["after"])]
        return Plan(changes_of(self.name, pinning, rule_plan), before=before, after=after,
                    pinning=pinning, rule=rule, rule_plan=rule_plan)

    def rule_view(self, view):
        """A rule view with the members' names instead of their moids."""
        if view is None:
            return None
        view = dict(view)
        for key in ("vm_group", "host_group"):
            if view.get(key) is not None:
                view[key] = self.api.named(view[key])
        return view

    def result(self, live, plan):
        out = plan.facts["pinning"].summary()
        if plan.facts["rule"] is not None:
            out["vm_host_rule"] = plan.after["vm_host_rule"]
        return out

    def apply(self, plan):
        """Claim in the record what the reconfigure adds or changes, reconfigure, then drop what it removed."""
        pinning, rule_plan = plan.facts["pinning"], plan.facts["rule_plan"]
        if pinning.owned_claim != pinning.owned_before:
            with self.doing("record the DRS overrides of"):
                self.api.write_record(pinning.owned_claim)
            self.partial["changed"] = True
        if pinning.overrides_changed or bool(rule_plan and rule_plan["changed"]):
            with self.doing("set DRS overrides on"):
                self.api.apply(pinning, rule_plan, plan.facts["rule"])
            self.partial["changed"] = True
        if pinning.owned_after != pinning.owned_claim:
            with self.doing("record the DRS overrides of"):
                self.api.write_record(pinning.owned_after)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "drs_gpu_pinning", drs_gpu_pinning_errors)
    Runner(module, DrsPinning(module)).run()


if __name__ == "__main__":
    main()
