# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's per-VM DRS overrides in the vSphere API (client layer: knows nothing of Ansible).

What drs_gpu_pinning reads and writes: one PropertyCollector retrieval of the cluster (its
configuration, the record of the overrides the collection set, every host and VM with its
devices, the custom attribute definitions), the record (one ``SetField``) and one
``ReconfigureComputeResource_Task`` for a whole plan of ``_drs``. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import RECORD_FIELD, format_record, parse_record
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import is_nvidia_gpu, vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, vim, vmodl


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

    def _specs(self, gpu_hosts):
        """(object specs, property specs) of the one retrieval: cluster -> host -> vm, and the attribute definitions."""
        fields = self.client.content.customFieldsManager
        pc = vmodl.query.PropertyCollector
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
        return obj_specs, specs

    def read(self, gpu_hosts=False):
        """(vms, overrides, owned) of the cluster: one lookup of the cluster, one retrieval of the rest.

        ``owned`` is the set of VM moids the record holds. The custom attribute definitions
        (CustomFieldsManager ``field``) and the cluster's ``customValue`` come in the same retrieval.
        """
        self.cluster = self.client.cluster_named(self.name, self.client.clusters_by_name()).obj
        obj_specs, specs = self._specs(gpu_hosts)
        objects = self.client.collect(obj_spec_list=obj_specs, specs=specs)
        vms, overrides, values = [], [], []
        for item in objects:
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
                self.record_key = self.client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
                continue
            self.names[item.moid] = item.get("name")
            if isinstance(item.obj, vim.HostSystem):
                self.refs[item.moid] = item.obj
                if any(is_nvidia_gpu(pci) for pci in item.get("hardware.pciDevice") or []):
                    self.gpu_hosts.append(item.moid)
            elif isinstance(item.obj, vim.VirtualMachine):
                if not item.get("config.template"):
                    self.refs[item.moid] = item.obj
                    vms.append(dict(moid=item.moid, name=item.get("name"),
                                    vgpu_profiles=vgpu_profiles_of(item.get("config.hardware.device"))))
            elif isinstance(item.obj, vim.ClusterComputeResource):
                values = item.get("customValue") or []
                overrides.extend(self._cluster_config(item.get("configurationEx")))
        if self.record_key is not None:
            for value in values:
                if value.key == self.record_key:
                    self.record_value = getattr(value, "value", None)
        return vms, overrides, parse_record(self.record_value)

    def _cluster_config(self, config):
        """The cluster's overrides (its groups and rules kept on self); a warning when DRS would ignore them."""
        drs = getattr(config, "drsConfig", None)
        if drs is not None and (drs.enabled is False or drs.enableVmBehaviorOverrides is False):
            self.warnings.append(
                "DRS or its per-VM overrides are disabled on cluster %s (drsConfig.enabled=%s, "
                "enableVmBehaviorOverrides=%s): the overrides are recorded but take effect only once "
                "both are enabled; this module does not change cluster settings"
                % (self.name, drs.enabled, drs.enableVmBehaviorOverrides))
        self._groups_and_rules(config)
        overrides = []
        for o in getattr(config, "drsVmConfig", None) or []:
            self.refs.setdefault(o.key._moId, o.key)
            overrides.append(dict(moid=o.key._moId, behavior=o.behavior, enabled=o.enabled))
        return overrides

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
            self._rule_specs(spec, rule_plan, rule)
        task = self.cluster.ReconfigureComputeResource_Task(spec=spec, modify=True)
        self.client.wait_for_task(task, what="reconfigure of cluster %s" % self.name)

    def _rule_specs(self, spec, rule_plan, rule):
        """The group and rule specs of a VM-host rule plan, into ``spec``."""
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


__all__ = ["RECORD_FIELD", "ClusterPinning"]
