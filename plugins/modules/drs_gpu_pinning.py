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
  - With O(purge_stale), removes the overrides of VMs that no longer hold a vGPU (and of VMs
    that left the cluster), except those named in O(vms) or O(exclude).
  - Reads the cluster once (its overrides and every VM with its devices, in one
    PropertyCollector retrieval) and changes it with at most one
    C(ReconfigureComputeResource_Task), whatever the number of VMs.
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
        are no longer in the cluster.
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
diff:
  description: Override per VM before and after (behavior, V(disabled) or null), only VMs the run touched or checked.
  returned: with --diff
  type: dict
  sample: {before: {llm-01: null}, after: {llm-01: partiallyAutomated}}
"""

from ansible_collections.gpupool.vcf.plugins.module_utils._drs import (
    BEHAVIORS,
    DEFAULT_BEHAVIOR,
    DrsPlanError,
    plan_pinning,
)
from ansible_collections.gpupool.vcf.plugins.module_utils._gpu_inventory import vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import (
    VsphereError,
    VsphereNotFound,
    vim,
    vmodl,
)
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule


class ClusterPinning:
    """Reads one cluster and applies a pinning plan to it."""

    def __init__(self, client, cluster_name):
        self.client = client
        self.name = cluster_name
        self.cluster = None
        self.refs = {}

    def read(self):
        """(vms, overrides) of the cluster: one lookup of the cluster, one retrieval of the rest."""
        clusters = self.client.clusters_by_name()
        if self.name not in clusters:
            raise VsphereNotFound("cluster %s not found; clusters: %s"
                                  % (self.name, ", ".join(sorted(clusters)) or "none"))
        self.cluster = clusters[self.name].obj
        pc = vmodl.query.PropertyCollector
        # cluster -> host -> vm: the cluster's own configuration and every VM on its hosts together
        to_vm = pc.TraversalSpec(name="hostToVm", type=vim.HostSystem, path="vm", skip=False)
        to_host = pc.TraversalSpec(name="clusterToHost", type=vim.ClusterComputeResource, path="host",
                                   skip=False, selectSet=[to_vm])
        obj_spec = pc.ObjectSpec(obj=self.cluster, skip=False, selectSet=[to_host])
        objects = self.client._collect(
            obj_spec_list=[obj_spec],
            specs={vim.ClusterComputeResource: ["configurationEx"],
                   vim.HostSystem: ["name"],
                   vim.VirtualMachine: ["name", "config.hardware.device", "config.template"]})
        vms = []
        overrides = []
        self.warnings = []
        for item in objects:
            if isinstance(item.obj, vim.VirtualMachine):
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
                for o in getattr(config, "drsVmConfig", None) or []:
                    self.refs.setdefault(o.key._moId, o.key)
                    overrides.append(dict(moid=o.key._moId, behavior=o.behavior, enabled=o.enabled))
        return vms, overrides

    def apply(self, plan):
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
        try:
            task = self.cluster.ReconfigureComputeResource_Task(spec=spec, modify=True)
        except vmodl.MethodFault as exc:
            raise VsphereError(getattr(exc, "msg", None) or str(exc))
        self.client.wait_for_task(task, what="reconfigure of cluster %s" % self.name)


def main():
    module = VsphereModule(
        argument_spec=dict(
            cluster=dict(type="str", required=True),
            behavior=dict(type="str", choices=list(BEHAVIORS), default=DEFAULT_BEHAVIOR),
            vms=dict(type="list", elements="str"),
            exclude=dict(type="list", elements="str", default=[]),
            purge_stale=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    pinning = ClusterPinning(module.client(), p["cluster"])
    try:
        vms, overrides = pinning.read()
    except VsphereError as exc:
        module.fail_vsphere("read DRS overrides of cluster", p["cluster"], exc)
    try:
        plan = plan_pinning(vms, overrides, behavior=p["behavior"], names=p["vms"], exclude=p["exclude"],
                            purge_stale=p["purge_stale"])
    except DrsPlanError as exc:
        module.fail_json(msg="Unable to pin GPU VMs of cluster %s: %s" % (p["cluster"], exc))
    for warning in pinning.warnings:
        module.warn(warning)
    result = dict(changed=plan.changed, **plan.summary())
    if module._diff:
        result["diff"] = dict(before=plan.before, after=plan.after)
    if plan.changed and not module.check_mode:
        try:
            pinning.apply(plan)
        except VsphereError as exc:
            module.fail_vsphere("set DRS overrides on cluster", p["cluster"], exc, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
