#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_host_info
short_description: GPU inventory of ESXi hosts, their NVIDIA driver, graphics and vGPU scheduler
version_added: 0.1.0
description:
  - Reads, for every host of a cluster or a list of hosts, its NVIDIA GPUs (model, PCI id,
    memory), graphics configuration (host default, assignment policy, per-device type), the
    vGPU profiles it offers, the NVIDIA host driver version, the vGPU scheduler policy
    decoded from the C(nvidia) kernel module options, maintenance mode, and the VMs that
    hold vGPUs with their profiles.
  - Per GPU (numbered as C(nvidia-smi) numbers them - the host's NVIDIA GPUs in PCI order) its
    current vGPU mode (C(graphicsInfo.vgpuMode), vSphere API 8.0.3 and later), its MIG mode read from
    it (a GPU whose MIG mode is on reads V(multiInstanceGpu)), and the VMs vSphere placed on it
    (C(graphicsInfo.vm)) with their vGPU profiles. Per host whether its SSH service (C(TSM-SSH)) runs
    and its lockdown mode. All of it comes with the host properties, in the same retrieval.
  - Summarizes per cluster every driver version seen with the hosts on it, and the hosts per
    GPU model, so a mismatched fleet is visible before a VM refuses to start.
  - Host and VM properties are read with a fixed number of PropertyCollector retrievals,
    whatever the number of hosts. The driver version and the module options exist in the
    vSphere API only as per-host methods; they are called concurrently, and only for
    connected hosts that have an NVIDIA GPU. Leave them out of O(gather) for a constant
    number of requests.
  - On a cluster that vSphere Lifecycle Manager manages with a single image, the driver is
    read from the cluster's image compliance (C(GET /api/esx/settings/clusters/{cluster}/software/compliance)),
    one request per cluster whatever its number of hosts. A host that runs the image is
    reported with the version of the NVIDIA host driver component of the image, that is what
    the cluster's image says, with C(driver.source) V(image). A host runs the image when its
    compliance is C(COMPLIANT) without impact, the NVIDIA component is compliant at the image's
    version, the host owes no reboot (C(summary.rebootRequired)) and the compliance was
    computed after the host last booted. Every other GPU host (non-compliant, needing a reboot
    or maintenance mode, unavailable, unknown to the compliance) is read on its own, as on a
    cluster managed with baselines, with C(driver.source) V(host); so is every host when the
    compliance or the vSphere Automation API cannot be read.
  - With O(gather=[driver, vms]) the requests on a compliant image-managed cluster do not grow
    with its hosts; V(scheduler) still costs one request per GPU host.
  - This module does not change anything; it supports check mode.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes.info_module
options:
  cluster:
    description:
      - Name of the cluster whose hosts are read.
      - Mutually exclusive with O(hosts). With neither, every host of the vCenter is read.
    type: str
  hosts:
    description:
      - Names of the hosts to read, as vCenter knows them.
    type: list
    elements: str
  gather:
    description:
      - What to read beyond the GPU, graphics and profile inventory, which is always read.
      - V(driver) is the NVIDIA host driver (one request per GPU host; on an image-managed
        cluster one compliance request for the cluster, and one per host that does not run the image).
      - V(scheduler) is the nvidia module option string and its decoded scheduler policy
        (one request per GPU host).
      - V(vms) is the VMs holding vGPU devices.
    type: list
    elements: str
    choices: [driver, scheduler, vms]
    default: [driver, scheduler, vms]
attributes:
  check_mode:
    description: The module only reads; check mode returns the same inventory.
  diff_mode:
    description: Nothing changes, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: Read the GPU inventory of a cluster
  gpupool.vcf.gpu_host_info:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    cluster: gpu-h100
  register: gpu

- name: Fail when the hosts of the cluster run different NVIDIA drivers
  ansible.builtin.assert:
    that: gpu.clusters['gpu-h100'].driver_consistent
    fail_msg: "Driver versions differ: {{ gpu.clusters['gpu-h100'].driver_versions }}"

- name: Two hosts only, without the VM list (connection from module_defaults)
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.gpu_host_info:
    hosts: [esx-h100-01.example.com, esx-h100-02.example.com]
    gather: [driver, scheduler]
"""

RETURN = r"""
hosts:
  description: One entry per host, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Host name in vCenter., type: str}
    moid: {description: Managed object id., type: str}
    cluster: {description: Cluster of the host (null for a standalone host)., type: str}
    connection_state: {description: "V(connected), V(disconnected) or V(notResponding).", type: str}
    maintenance_mode: {description: Whether the host is in maintenance mode., type: bool}
    maintenance_by_collection:
      description:
        - When the host is in maintenance mode because a run of this collection put it there
          (and did not take it out, for example after a failure), which module and when; null otherwise.
        - A rerun of the C(esxi_gpu_host) role finishes such a host and takes it out.
      type: str
    vms_powered_off_by_collection:
      description: Managed object ids of VMs a run of this collection powered off on the host and could not power on again.
      type: list
      elements: str
    reboot_required: {description: "The host's C(summary.rebootRequired): software staged that runs after the next boot.", type: bool}
    reboot_pending:
      description:
        - Why the host still owes a reboot (staged driver, nvidia module options changed since the
          last boot as recorded by this collection); empty when nothing is pending.
      type: list
      elements: str
    gpu_count: {description: Number of NVIDIA GPUs., type: int}
    gpu_model: {description: GPU model (comma-separated when the host mixes models)., type: str}
    gpus:
      description: One entry per NVIDIA GPU.
      type: list
      elements: dict
      sample:
        - pci_id: "0000:3b:00.0"
          device_id: "0x2331"
          device_name: NVIDIA H100 PCIe
          model: H100-80GB
          memory_mb: 81920
          graphics_type: shared_direct
          active_graphics_type: shared_direct
          index: 0
          vgpu_mode: multiInstanceGpu
          configured_vgpu_mode: null
          mig: enabled
          vms: [{name: llm-01, moid: vm-42, profiles: [nvidia_h100-3-40c]}]
      contains:
        index:
          description: The GPU's position among the host's NVIDIA GPUs in PCI order (the index C(nvidia-smi -i) takes).
          type: int
        pci_id: {description: PCI address of the GPU., type: str}
        device_id: {description: PCI device id., type: str}
        device_name: {description: PCI device name., type: str}
        model: {description: "Catalog model (V(H100-80GB)), or the device name for a model the catalog lacks.", type: str}
        memory_mb: {description: Framebuffer in MB (null when vSphere does not report it)., type: int}
        graphics_type: {description: Configured graphics type of the device (null when not configured per device)., type: str}
        active_graphics_type: {description: Graphics type the device runs with., type: str}
        vgpu_mode:
          description:
            - The GPU's current vGPU mode (C(graphicsInfo.vgpuMode)) - V(sameSize) (time-sliced vGPUs of one
              size), V(mixedSize) (time-sliced vGPUs of several sizes), V(multiInstanceGpu) (MIG mode on,
              MIG-backed vGPUs only) or V(none).
            - Null where the vSphere API does not report it (before API 8.0.3).
          type: str
        configured_vgpu_mode:
          description: The vGPU mode configured for the device (C(graphicsConfig.deviceType[].vgpuMode), V(sameSize) or V(mixedSize)); null when none is set.
          type: str
        mig:
          description:
            - The GPU's current MIG mode, V(enabled) when its vGPU mode is V(multiInstanceGpu), else V(disabled).
            - Null when the vGPU mode is not reported.
          type: str
        vms:
          description:
            - The VMs vSphere placed on this GPU (C(graphicsInfo.vm), the powered-on vGPU VMs), each with
              C(name), C(moid) and C(profiles), the vGPU profiles it holds on this GPU. vSphere does not say
              which vGPU device of a VM sits on which GPU - a VM listed on several GPUs has its profiles given
              to them in turn, one each.
            - Null when V(vms) is not in O(gather).
          type: list
          elements: dict
    graphics:
      description: Host graphics configuration (default type, assignment policy, configured type per device).
      type: dict
      sample: {default_type: shared_direct, assignment_policy: performance, device_types: {"0000:3b:00.0": shared_direct}}
    vgpu_profiles: {description: vGPU profiles the host offers., type: list, elements: str}
    driver:
      description:
        - NVIDIA host driver (only with V(driver) in O(gather)); version null when none is installed.
        - C(source) says where it was read. V(host) is the host's installed software packages
          (C(packages) lists its NVIDIA packages). V(image) is what the desired image of the host's
          vLCM-managed cluster says, for a host whose compliance shows that it runs the image
          (C(packages) then lists the image's NVIDIA host driver component).
      type: dict
      returned: when gathered and the host is connected with an NVIDIA GPU
      sample: {version: 550.90.05, full_version: 550.90.05-1OEM.800.1.0.20613240, packages: [], source: host}
    nvidia_module_options: {description: The nvidia kernel module option string., type: str, returned: when gathered}
    scheduler:
      description: vGPU scheduler decoded from RmPVMRL in the module options.
      type: dict
      returned: when gathered
      sample: {policy: equal_share, time_slice_ms: 3, strict_round_robin: false, rmpvmrl: "0x00030001", configured: true, per_device: {}}
    vgpu_vms:
      description: VMs on the host holding vGPU devices.
      type: list
      elements: dict
      sample: [{name: llm-01, moid: vm-42, power_state: poweredOn, uuid: 4216a0c5-9b7e-4d6e-a1c2-0d3f5e6a7b8c,
                vgpu_profiles: [nvidia_h100-3-40c]}]
    errors: {description: Per-host read errors (the rest of the inventory is still returned)., type: list, elements: str}
    ssh_service:
      description: Whether the host's SSH service (C(TSM-SSH)) runs - V(running), V(stopped), or V(unknown) when the host does not list it.
      type: str
    lockdown_mode:
      description: "The host's lockdown mode: V(lockdownDisabled), V(lockdownNormal) or V(lockdownStrict); null when not reported."
      type: str
vgpu_hotmigrate:
  description:
    - Whether vCenter migrates powered-on vGPU VMs (its advanced setting C(vgpu.hotmigrate.enabled)); when
      false, a host entering maintenance mode needs its powered-on vGPU VMs powered off first.
  returned: when V(vms) is in O(gather)
  type: bool
clusters:
  description: Summary per cluster of the hosts read.
  returned: always
  type: dict
  sample:
    gpu-h100:
      hosts: [esx-01, esx-02]
      gpu_hosts: 2
      gpus: 8
      models: {H100-80GB: [esx-01, esx-02]}
      driver_versions: {550.90.05: [esx-01], 550.54.10: [esx-02]}
      driver_consistent: false
      vgpu_vms: 3
      hosts_in_maintenance: []
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import (
    GATHER_CHOICES,
    GpuInventory,
    cluster_summary,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import gpu_host_info_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    cluster=dict(type="str"),
    hosts=dict(type="list", elements="str"),
    gather=dict(type="list", elements="str", choices=list(GATHER_CHOICES), default=list(GATHER_CHOICES)),
)


class GpuHosts(Info):
    """The GPU inventory of a cluster, of named hosts or of every host, in one retrieval."""

    def __init__(self, module):
        p = module.params
        scope = "cluster %s" % p["cluster"] if p["cluster"] else ("hosts %s" % ", ".join(p["hosts"]) if p["hosts"] else "all hosts")
        Info.__init__(self, "the GPU inventory of %s" % scope)
        self.module = module

    def read(self):
        p = self.module.params
        client = self.module.client()
        # image compliance of vLCM-managed clusters is read on a session of its own (the inventory closes it)
        hosts = GpuInventory(client, rest=self.module.open_rest_session).read(
            cluster=p["cluster"], hosts=p["hosts"], gather=p["gather"])
        live = dict(hosts=hosts)
        if "vms" in p["gather"]:
            live["vgpu_hotmigrate"] = HostOps(client).vgpu_hotmigrate_enabled()
        return live

    def result(self, live, plan):
        out = dict(live, clusters=cluster_summary(live["hosts"]))
        return out


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("cluster", "hosts")], supports_check_mode=True)
    enforce(module, "gpu_host_info", gpu_host_info_errors)
    Runner(module, GpuHosts(module)).run()


if __name__ == "__main__":
    main()
