# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU configuration of ESXi hosts in the vSphere API (client layer: knows nothing of Ansible).

What esxi_gpu_config reads and writes: the hosts of a cluster (or one host) in one retrieval,
their graphics configuration (one retrieval of the graphics managers; the vGPU mode of each GPU
sent as ``deviceType[].vgpuMode``), the nvidia module
options, the vGPU profiles placed on each GPU, ``UpdateGraphicsConfig`` and
``UpdateModuleOptionString`` (the vGPU mode through direct-path-devices instead on vSphere 9.1+,
``_direct_path_api``); the MIG mode of each GPU as vCenter reads it
(``config.graphicsInfo[].vgpuMode``, API 8.0.3), the host's SSH service (``TSM-SSH`` in
``config.service``, started and stopped through ``configManager.serviceSystem``) and its lockdown
mode and exception users. Maintenance mode, the reboot and the host's record are
``_esxi_host.HostOps``, reached as ``ops``. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _nvidia
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_config import LOCKDOWN_ON
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import HOST_STATE_PROPERTIES, is_nvidia_gpu
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import vim

HOST_PROPERTIES = HOST_STATE_PROPERTIES + [
    "hardware.pciDevice",
    "config.graphicsInfo",
    "configManager.graphicsManager",
    "configManager.kernelModuleSystem",
    "configManager.serviceSystem",
    "configManager.hostAccessManager",
    "config.service",
    "config.lockdownMode",
    "vm",
]

# HostGraphicsInfo.vgpuMode of a GPU whose current MIG mode is on (vSphere API 8.0.3)
MIG_VGPU_MODE = "multiInstanceGpu"
# the ESXi shell's SSH service (HostServiceInfo key)
SSH_SERVICE = "TSM-SSH"


def _mig_capable(pci):
    """Whether the GPU model offers MIG (an unknown model is left to nvidia-smi to say)."""
    try:
        return _nvidia.gpu_model(int(pci.deviceId) & 0xFFFF).mig_capable
    except (_nvidia.NvidiaError, TypeError, ValueError):
        return True


def mig_rows(host):
    """The MIG mode of each NVIDIA GPU of ``host`` as vCenter reads it, in the rows of
    :func:`_esxi.parse_mig_query`: indexes in PCI address order (as nvidia-smi numbers the GPUs),
    ``current`` from ``config.graphicsInfo[].vgpuMode`` and ``pending`` the same (the API shows no
    pending mode: only nvidia-smi does)."""
    infos = dict((i.pciId, i) for i in host.get("config.graphicsInfo") or [])
    gpus = sorted((p for p in host.get("hardware.pciDevice") or [] if is_nvidia_gpu(p)), key=lambda p: p.id)
    rows = []
    for index, pci in enumerate(gpus):
        on = getattr(infos.get(pci.id), "vgpuMode", None) == MIG_VGPU_MODE
        rows.append(dict(index=index, pci_id=pci.id, current=on, pending=on, supported=_mig_capable(pci)))
    return rows


def ssh_running(host):
    """True or False: whether the host's SSH service runs; None when the host lists no such service."""
    info = host.get("config.service")
    for service in getattr(info, "service", None) or []:
        if service.key == SSH_SERVICE:
            return bool(service.running)
    return None


class GpuConfigApi:
    """The hosts of one run, through one vSphere session."""

    def __init__(self, client):
        self.client = client
        self.ops = HostOps(client)

    def hosts(self, host=None, cluster=None):
        """The hosts (ObjectProps of HOST_PROPERTIES) of the cluster, or the one host, sorted by name."""
        if cluster:
            root = self.client.cluster_named(cluster, self.client.clusters_by_name())
            # the custom attribute definitions (for the collection's record on each host) in the same retrieval
            hosts = self.client.retrieve({vim.HostSystem: HOST_PROPERTIES}, root=root.obj, fields=True)
        else:
            hosts = [self.ops.find_host(host, HOST_PROPERTIES)]
        return sorted(hosts, key=lambda h: h["name"])

    def graphics_configs(self, hosts):
        """{graphics manager moid: its graphicsConfig} of the hosts, in one retrieval."""
        refs = [h["configManager.graphicsManager"] for h in hosts if h.get("configManager.graphicsManager") is not None]
        return dict((g.moid, g.get("graphicsConfig")) for g in self.client.retrieve_objects(refs, ["graphicsConfig"]))

    def nvidia_module_options(self, host):
        """The configured nvidia module option string; None when the module is absent."""
        return self.ops.nvidia_module_options(host.obj, host.get("configManager.kernelModuleSystem"))

    def _placed(self, hosts, properties):
        """({host name: {pci: [refs of the powered-on VMs placed on that GPU]}} from ``config.graphicsInfo[].vm``,
        {VM moid: ObjectProps of ``properties``}) of the hosts: one retrieval of every such VM of them all."""
        placed = dict((h["name"], dict((info.pciId, list(info.vm or [])) for info in h.get("config.graphicsInfo") or []))
                      for h in hosts)
        refs = [ref for gpus in placed.values() for vms in gpus.values() for ref in vms]
        props = dict((vm.moid, vm) for vm in self.client.retrieve_objects(refs, properties)) if refs else {}
        return placed, props

    def profiles_by_gpu_of(self, hosts):
        """{host name: {pci: [vGPU profiles of the powered-on VMs placed on that GPU]}} of the hosts, in one
        retrieval of the VMs' devices; a host without such a VM maps to {}."""
        placed, vms = self._placed(hosts, ["config.hardware.device"])
        profiles = dict((moid, [d.backing.vgpu for d in vm.get("config.hardware.device") or []
                                if getattr(getattr(d, "backing", None), "vgpu", None)]) for moid, vm in vms.items())
        return dict((name, dict((pci, [p for ref in refs for p in profiles.get(ref._moId, [])])
                                for pci, refs in gpus.items()) if any(gpus.values()) else {})
                    for name, gpus in placed.items())

    def vms_by_gpu_of(self, hosts):
        """{host name: {pci: [names of the powered-on VMs vSphere placed on that GPU]}} of the hosts
        (``config.graphicsInfo[].vm``), in one retrieval of the VMs' names; GPUs without such a VM are left out."""
        placed, vms = self._placed(hosts, ["name"])
        return dict((name, dict((pci, sorted((vms[ref._moId].get("name") if ref._moId in vms else None) or ref._moId
                                             for ref in refs)) for pci, refs in gpus.items() if refs))
                    for name, gpus in placed.items())

    def mig_rows(self, host):
        """:func:`mig_rows` of the host (read in the hosts' one retrieval)."""
        return mig_rows(host)

    def gpu_host_names(self, host):
        """Names of the GPU hosts of ``host``'s cluster (the positions of a MIG geometry), sorted;
        just the host when it is in no cluster."""
        parent = host.get("parent")
        if not isinstance(parent, vim.ClusterComputeResource):
            return [host["name"]]
        peers = self.client.retrieve({vim.HostSystem: ["name", "hardware.pciDevice"]}, root=parent)
        return sorted(h["name"] for h in peers if any(is_nvidia_gpu(p) for p in h.get("hardware.pciDevice") or []))

    def ssh_running(self, host):
        """:func:`ssh_running` of the host as read now (one property)."""
        return ssh_running(self.ops.refresh(host, ["name", "config.service"]))

    def start_ssh(self, host):
        host["configManager.serviceSystem"].StartService(id=SSH_SERVICE)

    def stop_ssh(self, host):
        host["configManager.serviceSystem"].StopService(id=SSH_SERVICE)

    def lockdown_exceptions(self, host):
        """The users SSH still admits while the host is in lockdown mode."""
        return sorted(host["configManager.hostAccessManager"].QueryLockdownExceptions() or [])

    def api_version(self):
        """The vCenter's API version (About.apiVersion, '9.1.0.0'), read at login."""
        return self.client.content.about.apiVersion

    def update_graphics(self, host, desired, vgpu_modes=True):
        """UpdateGraphicsConfig to ``desired`` ({default_type, assignment_policy, device_types}, and
        ``vgpu_modes`` {pci: same_size | mixed_size | multi_instance_gpu} when the vGPU mode is managed): each
        device's ``vgpuMode`` is sent where it is same_size or mixed_size, left unset (the mode stays) on a GPU
        in MIG mode or one not in ``vgpu_modes``; with ``vgpu_modes`` false on none (the modes go through
        direct-path-devices)."""
        modes = (desired.get("vgpu_modes") or {}) if vgpu_modes else {}
        devices = []
        for pci, kind in sorted(desired["device_types"].items()):
            device = vim.host.GraphicsConfig.DeviceType(deviceId=pci, graphicsType=_esxi.vim_graphics_type(kind))
            mode = _esxi.vim_vgpu_mode(modes.get(pci))
            if mode is not None:
                device.vgpuMode = mode
            devices.append(device)
        cfg = vim.host.GraphicsConfig(
            hostDefaultGraphicsType=_esxi.vim_graphics_type(desired["default_type"]),
            sharedPassthruAssignmentPolicy=desired["assignment_policy"],
            deviceType=devices)
        host["configManager.graphicsManager"].UpdateGraphicsConfig(cfg)

    def update_module_options(self, host, options):
        """The nvidia module options; the boot they were changed in is recorded on the host first
        (they load at the next boot, whatever happens next)."""
        self.ops.update_state(host, options_boot=_esxi.boot_stamp(host.get("runtime.bootTime")))
        host["configManager.kernelModuleSystem"].UpdateModuleOptionString(name="nvidia", options=options)


__all__ = ["HOST_PROPERTIES", "GpuConfigApi", "LOCKDOWN_ON", "MIG_VGPU_MODE", "SSH_SERVICE", "mig_rows", "ssh_running"]
