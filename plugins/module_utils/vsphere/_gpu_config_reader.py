# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU hosts of one esxi_gpu_config run, read and written (client layer: knows nothing of Ansible).

:meth:`GpuHosts.read` turns the hosts' one retrieval (``GpuConfigApi.hosts``) and the graphics managers'
one retrieval into one record per host in the collection's words: its GPUs, connection, maintenance mode,
boot, graphics view, vGPU modes (from ``config.graphicsInfo``, or from direct-path-devices on vSphere 9.1+),
the VMs on each GPU, the nvidia module options and the profiles placed, the collection's record on the host,
its MIG rows, SSH service and lockdown mode. A part that cannot be read is kept in the record (``error``,
``state_error``, ``lockdown_error``) for the plan's message. The record keeps the host's handle
(``host``) for the writes, which go through the methods below; the caller reads no vSphere property
itself. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_config import (
    LOCKDOWN_ON,
    direct_path_modes_view,
    graphics_view,
    vgpu_modes_view,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import gpu_pci_ids
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_api import ssh_running
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError


class GpuHosts:
    """Reads and writes of the GPU hosts of one run over a ``GpuConfigApi`` (``api``) and, where the vGPU
    mode goes through direct-path-devices, a ``DirectPathApi`` (``direct``)."""

    def __init__(self, api, direct=None):
        self.api = api
        self.direct = direct

    # -- reading -------------------------------------------------------------------------
    def read(self, host=None, cluster=None, vgpu_mode=False, scheduler=False, profiles=False, left_off=False,
             mig=False):
        """One record per host of the cluster (or the one host), sorted by name. ``vgpu_mode``: the vGPU
        modes and the VMs on each GPU are read; ``scheduler``: the nvidia module options (``profiles``: and
        the vGPU profiles placed on each GPU); ``left_off``: the VMs an earlier reboot left powered off;
        ``mig``: the MIG rows, the SSH service and the lockdown mode. The VMs on the GPUs of every host are
        read in one retrieval for all hosts (one for their names, one for their profiles), and so are the VMs
        left off."""
        hosts = self.api.hosts(host=host, cluster=cluster)
        graphics = self.api.graphics_configs(hosts)
        out = [self.read_host(h, graphics, scheduler, mig) for h in hosts]
        if left_off:
            self.read_left_off([item for item in out if item.get("state", {}).get("powered_off")])
        gpu_hosts = [item for item in out if item["pcis"] and item["connected"]]
        if vgpu_mode:
            self.read_vgpu_modes([item for item in gpu_hosts if item["current"] is not None])
        if profiles:
            self.read_profiles([item for item in gpu_hosts if item.get("options") is not None])
        return out

    def read_host(self, host, graphics, scheduler, mig):
        pcis = gpu_pci_ids(host.get("hardware.pciDevice"))
        state = str(host.get("runtime.connectionState"))
        out = dict(host=host, name=host["name"], pcis=pcis, connected=state == "connected", connection_state=state,
                   in_maintenance=bool(host.get("runtime.inMaintenanceMode")),
                   reboot_required=host.get("summary.rebootRequired"), boot_time=host.get("runtime.bootTime"))
        if not pcis or not out["connected"]:
            return out
        out["current"] = graphics_view(graphics.get(host["configManager.graphicsManager"]._moId))
        try:
            if scheduler:
                out["options"] = self.api.nvidia_module_options(host)
        except VsphereError as exc:
            out["error"] = exc
        try:
            out["state"] = self.api.ops.state(host)
            out["left_off"] = []
        except VsphereError as exc:
            out["state_error"] = exc
        if mig:
            self.read_mig(out)
        return out

    def read_left_off(self, items):
        """The VMs an earlier reboot powered off and left off (the reboot path powers them on) of the hosts whose
        record holds some: one retrieval for all; an error is kept in the hosts' records."""
        if not items:
            return
        try:
            off = self.api.ops.recorded_powered_off_of([item["host"] for item in items])
        except VsphereError as exc:
            for item in items:
                item["state_error"] = exc
                item.pop("left_off")
            return
        for item in items:
            item["left_off"] = off[item["host"].moid]

    def read_vgpu_modes(self, items):
        """The mode each GPU runs now, as vCenter reads it (multiInstanceGpu on a GPU in MIG mode), and the VMs
        on each GPU (one retrieval for all hosts); on vSphere 9.1+ the modes of direct-path-devices (one GET per
        host). An error is kept in the hosts' records."""
        for item in items:
            item["current"]["vgpu_modes"] = vgpu_modes_view(item["host"], item["pcis"])
        try:
            vms = self.api.vms_by_gpu_of([item["host"] for item in items]) if items else {}
        except VsphereError as exc:
            for item in items:
                item["error"] = exc
            return
        for item in items:
            item["vms_on_gpu"] = vms.get(item["name"]) or {}
            if self.direct is None:
                continue
            try:
                item["devices"] = self.direct.devices(item["host"].obj._moId)
                item["current"]["vgpu_modes"] = direct_path_modes_view(item["current"]["vgpu_modes"], item["devices"],
                                                                       item["pcis"])
            except VsphereError as exc:
                item["error"] = exc

    def read_profiles(self, items):
        """The vGPU profiles placed on each GPU of the hosts (one retrieval for all); an error is kept in the
        hosts' records."""
        try:
            profiles = self.api.profiles_by_gpu_of([item["host"] for item in items]) if items else {}
        except VsphereError as exc:
            for item in items:
                item["error"] = exc
            return
        for item in items:
            item["profiles"] = profiles.get(item["name"]) or {}

    def read_mig(self, out):
        """The current MIG mode of each GPU as vCenter reads it (no shell), the SSH service, the lockdown mode
        and, in lockdown, its exception users."""
        host = out["host"]
        out["mig_rows"] = self.api.mig_rows(host)
        out["ssh_running"] = ssh_running(host)
        out["lockdown"] = str(host.get("config.lockdownMode") or "lockdownDisabled")
        if out["lockdown"] in LOCKDOWN_ON:
            try:
                out["lockdown_exceptions"] = self.api.lockdown_exceptions(host)
            except VsphereError as exc:
                out["lockdown_error"] = exc

    def geometry_names(self, items, one_host):
        """The positions of a MIG geometry: the GPU hosts of the cluster in name order (with ``one_host``, the
        GPU hosts of the one host's cluster, one retrieval)."""
        if one_host:
            return self.api.gpu_host_names(items[0]["host"]) if items else []
        return sorted(item["name"] for item in items if item["pcis"])

    def vms_to_power_off(self, item, power_off):
        """The powered-on vGPU VMs of the host that its reboot must power off, read now (one retrieval)."""
        ops = self.api.ops
        return ops.vms_to_power_off(ops.refresh(item["host"], ["name", "vm"]), power_off)

    def mig_rows_now(self, item):
        """The MIG rows of the host as vCenter reads them now (one retrieval of its GPUs)."""
        return self.api.mig_rows(self.api.ops.refresh(item["host"], ["name", "hardware.pciDevice", "config.graphicsInfo"]))

    def ssh_running(self, item):
        return self.api.ssh_running(item["host"])

    def in_maintenance_by_others(self, item):
        """Whether the host is in maintenance mode and not by the collection (it stays there after a reboot)."""
        host = item["host"]
        return bool(host.get("runtime.inMaintenanceMode")) and not self.api.ops.state(host).get("maintenance")

    # -- writing -------------------------------------------------------------------------
    def update_graphics(self, item, desired, vgpu_modes=True):
        """UpdateGraphicsConfig to ``desired``; ``vgpu_modes`` false: the vGPU modes go through
        direct-path-devices instead (not sent)."""
        if vgpu_modes:
            self.api.update_graphics(item["host"], desired)
        else:
            self.api.update_graphics(item["host"], desired, vgpu_modes=False)

    def update_module_options(self, item, options):
        self.api.update_module_options(item["host"], options)

    def configure_vgpu_mode(self, item, pci, word):
        """The GPU's vGPU mode through direct-path-devices (one configure task); the impacts answered."""
        return self.direct.configure(item["host"].obj._moId, pci, word,
                                     what="configure the vGPU mode of GPU %s of host %s" % (pci, item["name"]))

    def start_ssh(self, item):
        self.api.start_ssh(item["host"])

    def stop_ssh(self, item):
        self.api.stop_ssh(item["host"])

    def power_off_recorded(self, item, off, step):
        self.api.ops.power_off_recorded(item["host"], item["stuck"], off, step)

    def power_on_recorded(self, item, off, step):
        """The VMs ``off`` powered on again; the warnings of those that would not start."""
        return self.api.ops.power_on_recorded(item["host"], off, step)

    def enter_maintenance(self, item, timeout, by):
        return self.api.ops.enter_maintenance(item["host"], timeout, by)

    def exit_maintenance(self, item):
        self.api.ops.exit_maintenance(item["host"])

    def reboot_and_wait(self, item, timeout):
        """The host rebooted and back; its record's handle then holds what was read of it after the boot."""
        ops = self.api.ops
        back = ops.reboot_and_wait(ops.refresh(item["host"]), timeout)
        item["host"].props.update(back.props)


__all__ = ["GpuHosts"]
