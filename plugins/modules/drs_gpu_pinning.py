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
attributes:
  check_mode:
    description: Predicts the change without making it.
    support: full
  diff_mode:
    description: Returns the state before and after.
    support: full
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

from ansible_collections.gpupool.vcf.plugins.module_utils._drs import (
    BEHAVIORS,
    DEFAULT_BEHAVIOR,
    RECORD_FIELD,
    DrsPlanError,
    format_record,
    parse_record,
    plan_pinning,
    plan_vm_host_rule,
)
from ansible_collections.gpupool.vcf.plugins.module_utils._gpu_inventory import is_nvidia_gpu, vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import (
    VsphereError,
    vim,
    vmodl,
)
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce


class ClusterPinning:
    """Reads one cluster and applies a pinning plan to it."""

    def __init__(self, client, cluster_name):
        self.client = client
        self.name = cluster_name
        self.cluster = None
        self.refs = {}
        self.names = {}
        self.gpu_hosts = []
        self.groups = {}
        self.rules = {}
        self.warnings = []
        self.record_key = None   # key of the record's custom attribute; None until it is defined
        self.record_value = None  # the record as read (None: never written on this cluster)

    def read(self, gpu_hosts=False):
        """(vms, overrides, owned) of the cluster: one lookup of the cluster, one retrieval of the rest.

        ``owned`` is the set of VM moids the record holds. The custom attribute definitions
        (CustomFieldsManager ``field``) and the cluster's ``customValue`` come in the same retrieval.
        """
        self.cluster = self.client.cluster_named(self.name, self.client.clusters_by_name()).obj
        fields = self.client.content.customFieldsManager
        pc = vmodl.query.PropertyCollector
        # cluster -> host -> vm: the cluster's own configuration and every VM on its hosts together
        to_vm = pc.TraversalSpec(name="hostToVm", type=vim.HostSystem, path="vm", skip=False)
        to_host = pc.TraversalSpec(name="clusterToHost", type=vim.ClusterComputeResource, path="host",
                                   skip=False, selectSet=[to_vm])
        obj_specs = [pc.ObjectSpec(obj=self.cluster, skip=False, selectSet=[to_host])]
        specs = {vim.ClusterComputeResource: ["configurationEx", "customValue"],
                 # the PCI devices only for vm_host_rule: they weigh more than every VM's devices
                 vim.HostSystem: ["name", "hardware.pciDevice"] if gpu_hosts else ["name"],
                 vim.VirtualMachine: ["name", "config.hardware.device", "config.template"]}
        if fields is not None:
            obj_specs.append(pc.ObjectSpec(obj=fields, skip=False))
            specs[vim.CustomFieldsManager] = ["field"]
        objects = self.client._collect(obj_spec_list=obj_specs, specs=specs)
        vms = []
        overrides = []
        values = []
        for item in objects:
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
                self.record_key = self.client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
                continue
            if isinstance(item.obj, vim.ClusterComputeResource):
                values = item.get("customValue") or []
            self.names[item.moid] = item.get("name")
            if isinstance(item.obj, vim.HostSystem):
                self.refs[item.moid] = item.obj
                if any(is_nvidia_gpu(pci) for pci in item.get("hardware.pciDevice") or []):
                    self.gpu_hosts.append(item.moid)
            elif isinstance(item.obj, vim.VirtualMachine):
                if item.get("config.template"):
                    continue
                self.refs[item.moid] = item.obj
                vms.append(dict(moid=item.moid, name=item.get("name"),
                                vgpu_profiles=vgpu_profiles_of(item.get("config.hardware.device"))))
            elif isinstance(item.obj, vim.ClusterComputeResource):
                config = item.get("configurationEx")
                drs = getattr(config, "drsConfig", None)
                if drs is not None and (drs.enabled is False or drs.enableVmBehaviorOverrides is False):
                    self.warnings.append(
                        "DRS or its per-VM overrides are disabled on cluster %s (drsConfig.enabled=%s, "
                        "enableVmBehaviorOverrides=%s): the overrides are recorded but take effect only once "
                        "both are enabled; this module does not change cluster settings"
                        % (self.name, drs.enabled, drs.enableVmBehaviorOverrides))
                self._groups_and_rules(config)
                for o in getattr(config, "drsVmConfig", None) or []:
                    self.refs.setdefault(o.key._moId, o.key)
                    overrides.append(dict(moid=o.key._moId, behavior=o.behavior, enabled=o.enabled))
        if self.record_key is not None:
            for value in values:
                if value.key == self.record_key:
                    self.record_value = getattr(value, "value", None)
        return vms, overrides, parse_record(self.record_value)

    def write_record(self, moids):
        """Record ``moids`` as the VMs whose override the collection set: one SetField (the
        attribute is defined first, once per vCenter, when it does not exist yet)."""
        value = format_record(moids)
        try:
            self.client.set_custom_field(self.cluster, RECORD_FIELD, value)
        except VsphereError as exc:
            raise VsphereError("custom attribute %s of cluster %s: %s" % (RECORD_FIELD, self.name, exc))
        self.record_key = self.client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
        self.record_value = value

    def _groups_and_rules(self, config):
        for g in getattr(config, "group", None) or []:
            if isinstance(g, vim.cluster.VmGroup):
                self.groups[g.name] = dict(kind="vm", members=[v._moId for v in g.vm or []])
            elif isinstance(g, vim.cluster.HostGroup):
                self.groups[g.name] = dict(kind="host", members=[h._moId for h in g.host or []])
            else:
                self.groups[g.name] = dict(kind="other", members=[])
        for r in getattr(config, "rule", None) or []:
            entry = dict(key=r.key, kind="other", mandatory=r.mandatory, enabled=r.enabled)
            if isinstance(r, vim.cluster.VmHostRuleInfo):
                entry.update(kind="vmhost", vm_group=r.vmGroupName, host_group=r.affineHostGroupName)
            self.rules[r.name] = entry

    def named(self, moids):
        return sorted(self.names.get(m) or m for m in moids)

    def apply(self, plan, rule_plan=None, rule=None):
        """One reconfigure for the whole plan; the cluster's own DRS settings are not in the spec."""
        specs = []
        for op, entries in (("add", plan.add), ("edit", plan.edit)):
            for e in entries:
                info = vim.cluster.DrsVmConfigInfo(key=self.refs[e["moid"]],
                                                   behavior=e["behavior"], enabled=e["enabled"])
                specs.append(vim.cluster.DrsVmConfigSpec(operation=op, info=info))
        for e in plan.remove:
            specs.append(vim.cluster.DrsVmConfigSpec(
                operation="remove", removeKey=self.refs[e["moid"]]))
        spec = vim.cluster.ConfigSpecEx(drsVmConfigSpec=specs)
        if rule_plan is not None and rule_plan["changed"]:
            group_specs = []
            for op, kind, name, members in rule_plan["groups"]:
                refs = [self.refs[m] for m in members]
                info = (vim.cluster.VmGroup(name=name, vm=refs) if kind == "vm"
                        else vim.cluster.HostGroup(name=name, host=refs))
                group_specs.append(vim.cluster.GroupSpec(operation=op, info=info))
            spec.groupSpec = group_specs
            if rule_plan["rule"] is not None:
                op, key = rule_plan["rule"]
                info = vim.cluster.VmHostRuleInfo(name=rule["name"], enabled=True, mandatory=bool(rule["mandatory"]),
                                                  vmGroupName=rule["vm_group"], affineHostGroupName=rule["host_group"])
                if key is not None:
                    info.key = key
                spec.rulesSpec = [vim.cluster.RuleSpec(operation=op, info=info)]
        task = self.cluster.ReconfigureComputeResource_Task(spec=spec, modify=True)
        self.client.wait_for_task(task, what="reconfigure of cluster %s" % self.name)


def main():
    module = VsphereModule(
        argument_spec=dict(
            cluster=dict(type="str", required=True),
            behavior=dict(type="str", choices=list(BEHAVIORS), default=DEFAULT_BEHAVIOR),
            vms=dict(type="list", elements="str"),
            exclude=dict(type="list", elements="str", default=[]),
            purge_stale=dict(type="bool", default=False),
            vm_host_rule=dict(type="dict", options=dict(
                name=dict(type="str", required=True),
                vm_group=dict(type="str"),
                host_group=dict(type="str"),
                mandatory=dict(type="bool", default=False),
            )),
        ),
        supports_check_mode=True,
    )
    enforce(module, "drs_gpu_pinning")
    p = module.params
    pinning = ClusterPinning(module.client(), p["cluster"])
    try:
        vms, overrides, owned = pinning.read(gpu_hosts=bool(p["vm_host_rule"]))
    except VsphereError as exc:
        module.fail_vsphere("read DRS overrides of cluster", p["cluster"], exc)
    try:
        plan = plan_pinning(vms, overrides, behavior=p["behavior"], names=p["vms"], exclude=p["exclude"],
                            purge_stale=p["purge_stale"], owned=owned)
        rule = rule_plan = None
        if p["vm_host_rule"]:
            rule = dict(p["vm_host_rule"])
            rule["vm_group"] = rule["vm_group"] or rule["name"] + "-vms"
            rule["host_group"] = rule["host_group"] or rule["name"] + "-hosts"
            rule_plan = plan_vm_host_rule(rule, pinning.groups, pinning.rules, plan.pinned_moids,
                                          pinning.gpu_hosts)
    except DrsPlanError as exc:
        module.fail_json(msg="Unable to pin GPU VMs of cluster %s: %s" % (p["cluster"], exc))
    for warning in pinning.warnings:
        module.warn(warning)
    changed = plan.changed or bool(rule_plan and rule_plan["changed"])
    result = dict(changed=changed, **plan.summary())
    before = dict(overrides=plan.before, owned=plan.owned_names(plan.owned_before))
    after = dict(overrides=plan.after, owned=plan.owned_names(plan.owned_after))
    if rule_plan is not None:
        views = []
        for v in (rule_plan["before"], rule_plan["after"]):
            if v is not None:
                v = dict(v)
                for key in ("vm_group", "host_group"):
                    if v.get(key) is not None:
                        v[key] = pinning.named(v[key])
            views.append(v)
        before["vm_host_rule"], after["vm_host_rule"] = views
        result["vm_host_rule"] = views[1]
    if module._diff:
        result["diff"] = dict(before=before, after=after)
    if changed and not module.check_mode:
        apply(module, pinning, plan, rule_plan, rule, result)
    module.exit_json(**result)


def apply(module, pinning, plan, rule_plan, rule, result):
    """Claim in the record what the reconfigure adds or changes, reconfigure, then drop what it removed."""
    cluster = module.params["cluster"]
    reconfigure = plan.overrides_changed or bool(rule_plan and rule_plan["changed"])
    if plan.owned_claim != plan.owned_before:
        try:
            pinning.write_record(plan.owned_claim)
        except VsphereError as exc:
            module.fail_vsphere("record the DRS overrides of cluster", cluster, exc, **result)
    if reconfigure:
        try:
            pinning.apply(plan, rule_plan, rule)
        except VsphereError as exc:
            module.fail_vsphere("set DRS overrides on cluster", cluster, exc, **result)
    if plan.owned_after != plan.owned_claim:
        try:
            pinning.write_record(plan.owned_after)
        except VsphereError as exc:
            module.fail_vsphere("record the DRS overrides of cluster", cluster, exc, **result)


if __name__ == "__main__":
    main()
