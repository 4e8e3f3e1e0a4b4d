#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vm_class
short_description: vSphere VM class with vGPU profiles for the Supervisor (VM Service, VKS)
version_added: 0.1.0
description:
  - Creates, updates or deletes a VM class of the Supervisor through the vSphere Automation
    API (C(/api/vcenter/namespace-management/virtual-machine-classes)).
  - A class with vGPU profiles reserves all its memory; O(memory_reservation) is set to 100
    when left unset, and a lower value fails.
  - Each profile must be a valid NVIDIA vGPU profile name; with O(cluster) it must also be
    offered by a host of that cluster (read in one retrieval).
  - On vSphere API 8.0.2 and later the vGPU devices are written in the C(config_spec) form (a
    vim C(VirtualMachineConfigSpec)); before, in the legacy C(devices.vgpu_devices) form.
    Both forms are read, as are both spellings of the memory field (C(memory_MB), C(memory_mb)).
  - Only the options that are set are compared; an option left out keeps its value.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
options:
  name:
    description: Id of the VM class (a DNS label, at most 63 characters).
    type: str
    required: true
  state:
    description: Whether the class exists.
    type: str
    choices: [present, absent]
    default: present
  cpu_count:
    description: Number of vCPUs. Required to create a class.
    type: int
  memory_mb:
    description: Memory in MiB. Required to create a class.
    type: int
  cpu_reservation:
    description: CPU reservation in percent (0-100).
    type: int
  memory_reservation:
    description:
      - Memory reservation in percent (0-100).
      - With vGPU profiles it must be 100; unset means 100.
    type: int
  vgpu_profiles:
    description:
      - vGPU profiles, one per vGPU device (for example V(nvidia_h100-1-10c) or V(grid_a100-4c)).
      - An empty list removes the vGPU devices.
    type: list
    elements: str
  description:
    description: Free text shown in vCenter.
    type: str
  cluster:
    description:
      - Cluster whose hosts must offer each profile in O(vgpu_profiles).
    type: str
  api_form:
    description:
      - How the vGPU devices are written. V(auto) decides from the vCenter API version
        (C(config_spec) on 8.0.2 and later, C(devices) before).
    type: str
    choices: [auto, config_spec, devices]
    default: auto
attributes:
  check_mode:
    description: Predicts the change without making it.
    support: full
  diff_mode:
    description: Returns the state before and after.
    support: full
"""

EXAMPLES = r"""
- name: A VM class with one MIG-backed H100 vGPU
  gpupool.vcf.vm_class:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    vgpu_profiles: [nvidia_h100-1-10c]
    cluster: gpu-h100
    description: Inference, one 1g.10gb MIG slice

- name: Change only the description (connection from module_defaults)
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    description: Inference pool

- name: Remove the class
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    state: absent
"""

RETURN = r"""
vm_class:
  description: The class after the run, in normal form (null when absent).
  returned: always
  type: dict
  sample:
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    cpu_reservation: 0
    memory_reservation: 100
    description: Inference
    vgpu_profiles: [nvidia_h100-1-10c]
changed_fields:
  description: Fields that differ (all of them on create).
  returned: always
  type: list
  elements: str
api_form:
  description: The form the vGPU devices were (or would be) written in.
  returned: when state is present
  type: str
diff:
  description: The class before and after.
  returned: with --diff
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import (
    VsphereError,
    VsphereNotFound,
    vim,
)
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce

PATH = "/api/vcenter/namespace-management/virtual-machine-classes"


def offered_profiles(client, cluster):
    """vGPU profiles offered by any host of the cluster (host.config.sharedGpuCapabilities)."""
    root = client.cluster_named(cluster, client.clusters_by_name()).obj
    hosts = client.retrieve({vim.HostSystem: ["config.sharedGpuCapabilities"]}, root=root)
    offered = set()
    for h in hosts:
        for cap in h.get("config.sharedGpuCapabilities") or []:
            offered.add(cap.vgpu.lower())
    return offered


def view(name, cls):
    if cls is None:
        return None
    out = dict(name=name)
    out.update(cls)
    return out


def main():
    module = VsphereModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            cpu_count=dict(type="int"),
            memory_mb=dict(type="int"),
            cpu_reservation=dict(type="int"),
            memory_reservation=dict(type="int"),
            vgpu_profiles=dict(type="list", elements="str"),
            description=dict(type="str"),
            cluster=dict(type="str"),
            api_form=dict(type="str", choices=list(vmc.API_FORMS), default="auto"),
        ),
        supports_check_mode=True,
    )
    enforce(module, "vm_class")
    p = module.params
    name = p["name"]
    try:
        want = vmc.desired(p) if p["state"] == "present" else None
        if p["state"] == "absent":
            vmc.check_dns_label(name, "VM class name")
    except vmc.VmClassError as exc:
        module.fail_json(msg="Unable to manage VM class %s: %s" % (name, exc))

    if want is not None and want["vgpu_profiles"] and p["cluster"]:
        try:
            offered = offered_profiles(module.client(), p["cluster"])
        except VsphereError as exc:
            module.fail_vsphere("read the vGPU profiles of cluster", p["cluster"], exc)
        try:
            vmc.check_profiles(want["vgpu_profiles"], offered, p["cluster"])
        except vmc.VmClassError as exc:
            module.fail_json(msg="Unable to manage VM class %s: %s" % (name, exc))

    rest = module.rest_client()
    try:
        info = rest.get("%s/%s" % (PATH, name))
    except VsphereNotFound:
        info = None
    except VsphereError as exc:
        module.fail_vsphere("read VM class", name, exc)
    current = vmc.normalize(info)
    result = dict(changed=False, changed_fields=[])

    if p["state"] == "absent":
        result["vm_class"] = None
        if current is not None:
            result.update(changed=True, changed_fields=list(vmc.FIELDS))
            if not module.check_mode:
                try:
                    rest.delete("%s/%s" % (PATH, name))
                except VsphereError as exc:
                    module.fail_vsphere("delete VM class", name, exc)
        if module._diff:
            result["diff"] = dict(before=view(name, current), after=None)
        module.exit_json(**result)

    try:
        after = vmc.merge(current, want)
    except vmc.VmClassError as exc:
        module.fail_json(msg="Unable to manage VM class %s: %s" % (name, exc))
    fields = vmc.differs(current, after)
    api_version = None
    if p["api_form"] == "auto":
        api_version = module.client().content.about.apiVersion
    form = vmc.choose_form(p["api_form"], api_version)
    result.update(changed=bool(fields), changed_fields=fields, api_form=form, vm_class=view(name, after))
    if module._diff:
        result["diff"] = dict(before=view(name, current), after=view(name, after))
    if fields and not module.check_mode:
        legacy = bool(((info or {}).get("devices") or {}).get("vgpu_devices"))
        body = vmc.request_body(name, after, form, create=current is None, clear_devices=legacy)
        try:
            if current is None:
                rest.post(PATH, body)
            else:
                rest.patch("%s/%s" % (PATH, name), body)
        except VsphereError as exc:
            module.fail_vsphere("create VM class" if current is None else "update VM class", name, exc, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
