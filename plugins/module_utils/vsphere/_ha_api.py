# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's HA admission control and per-VM HA restart priorities in the vSphere API (client layer:
knows nothing of Ansible).

What ha_gpu_restart reads and writes: one PropertyCollector retrieval of the cluster (its
configuration with ``dasConfig`` and ``dasVmConfig``, the record of what the collection set, every host
and VM with its devices, the custom attribute definitions), the record (one ``SetField``) and one
``ReconfigureComputeResource_Task`` for a whole plan of ``_ha``. :func:`read_ha_states` is the audit's
read of every cluster in one retrieval. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ha import CLUSTER_DEFAULT, RECORD_FIELD, format_record, parse_record
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, vim, vmodl


def das_state(config):
    """(das, overrides) of a cluster's ``configurationEx``: ``das`` {enabled, admission_control_enabled,
    policy}, ``overrides`` {vm moid: restart priority}."""
    ha = getattr(config, "dasConfig", None)
    policy = getattr(ha, "admissionControlPolicy", None)
    view = None
    if isinstance(policy, vim.cluster.FailoverResourcesAdmissionControlPolicy):
        view = dict(kind="resources", failover_level=getattr(policy, "failoverLevel", None),
                    cpu_percent=policy.cpuFailoverResourcesPercent, memory_percent=policy.memoryFailoverResourcesPercent,
                    auto=bool(getattr(policy, "autoComputePercentages", False)))
    elif isinstance(policy, vim.cluster.FailoverLevelAdmissionControlPolicy):
        view = dict(kind="slots", failover_level=policy.failoverLevel)
    elif isinstance(policy, vim.cluster.FailoverHostAdmissionControlPolicy):
        view = dict(kind="hosts", failover_level=getattr(policy, "failoverLevel", None))
    elif policy is not None:
        view = dict(kind=type(policy).__name__.split(".")[-1])
    das = dict(enabled=getattr(ha, "enabled", None), admission_control_enabled=getattr(ha, "admissionControlEnabled", None),
               policy=view)
    overrides = {}
    for entry in getattr(config, "dasVmConfig", None) or []:
        settings = getattr(entry, "dasSettings", None)
        overrides[entry.key._moId] = getattr(settings, "restartPriority", None) or entry.restartPriority or CLUSTER_DEFAULT
    return das, overrides


class ClusterHa:
    """Reads one cluster's HA state and applies an ``_ha`` plan to it."""

    def __init__(self, client, cluster_name):
        self.client = client
        self.name = cluster_name
        self.cluster = None
        self.refs = {}

    def read(self):
        """{vms, overrides, das, owned} of the cluster: one lookup of the cluster, one retrieval of the rest."""
        self.cluster = self.client.cluster_named(self.name, self.client.clusters_by_name()).obj
        fields = self.client.content.customFieldsManager
        pc = vmodl.query.PropertyCollector
        to_vm = pc.TraversalSpec(name="hostToVm", type=vim.HostSystem, path="vm", skip=False)
        to_host = pc.TraversalSpec(name="clusterToHost", type=vim.ClusterComputeResource, path="host",
                                   skip=False, selectSet=[to_vm])
        obj_specs = [pc.ObjectSpec(obj=self.cluster, skip=False, selectSet=[to_host])]
        specs = {vim.ClusterComputeResource: ["configurationEx", "customValue"], vim.HostSystem: ["name"],
                 vim.VirtualMachine: ["name", "config.hardware.device", "config.template"]}
        if fields is not None:
            obj_specs.append(pc.ObjectSpec(obj=fields, skip=False))
            specs[vim.CustomFieldsManager] = ["field"]
        vms, values, das, overrides = [], [], {}, {}
        for item in self.client.collect(obj_spec_list=obj_specs, specs=specs):
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
            elif isinstance(item.obj, vim.VirtualMachine):
                if not item.get("config.template"):
                    self.refs[item.moid] = item.obj
                    vms.append(dict(moid=item.moid, name=item.get("name"),
                                    vgpu_profiles=vgpu_profiles_of(item.get("config.hardware.device"))))
            elif isinstance(item.obj, vim.ClusterComputeResource):
                values = item.get("customValue") or []
                config = item.get("configurationEx")
                das, overrides = das_state(config)
                for entry in getattr(config, "dasVmConfig", None) or []:
                    self.refs.setdefault(entry.key._moId, entry.key)
        key = self.client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
        owned = parse_record(self.client.custom_value(values, key)) if key is not None else set()
        return dict(vms=vms, overrides=overrides, das=das, owned=owned)

    def write_record(self, owned):
        """Record ``owned`` (VM moids and the cluster token): one SetField (the attribute defined once per vCenter)."""
        try:
            self.client.set_custom_field(self.cluster, RECORD_FIELD, format_record(owned))
        except VsphereError as exc:
            raise VsphereError("custom attribute %s of cluster %s: %s" % (RECORD_FIELD, self.name, exc))

    def apply(self, plan):
        """One reconfigure for the whole plan: the HA settings (when planned) and every override."""
        specs = []
        for op, entries in (("add", plan.add), ("edit", plan.edit)):
            for e in entries:
                info = vim.cluster.DasVmConfigInfo(key=self.refs[e["moid"]],
                                                   dasSettings=vim.cluster.DasVmSettings(restartPriority=e["priority"]))
                specs.append(vim.cluster.DasVmConfigSpec(operation=op, info=info))
        for e in plan.remove:
            specs.append(vim.cluster.DasVmConfigSpec(operation="remove", removeKey=self.refs[e["moid"]]))
        spec = vim.cluster.ConfigSpecEx(dasVmConfigSpec=specs)
        if plan.admission is not None:
            want = plan.admission
            policy = vim.cluster.FailoverResourcesAdmissionControlPolicy(
                cpuFailoverResourcesPercent=want["cpu_percent"], memoryFailoverResourcesPercent=want["memory_percent"],
                failoverLevel=want["failover_level"], autoComputePercentages=False)
            spec.dasConfig = vim.cluster.DasConfigInfo(enabled=True, admissionControlEnabled=True,
                                                       admissionControlPolicy=policy)
        task = self.cluster.ReconfigureComputeResource_Task(spec=spec, modify=True)
        self.client.wait_for_task(task, what="reconfigure of cluster %s" % self.name)


def read_ha_states(client):
    """{cluster name: {das, overrides, owned}} of every cluster, in one retrieval (the audit's read)."""
    clusters = client.retrieve({vim.ClusterComputeResource: ["name", "configurationEx", "customValue"]})
    key = client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
    out = {}
    for c in clusters:
        das, overrides = das_state(c.get("configurationEx"))
        owned = parse_record(client.custom_value(c.get("customValue"), key)) if key is not None else set()
        out[c.get("name")] = dict(das=das, overrides=overrides, owned=owned)
    return out


__all__ = ["ClusterHa", "das_state", "read_ha_states"]
