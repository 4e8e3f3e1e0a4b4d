# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ESXi host operations through the vSphere API (I/O part of the host link).

Knows nothing of Ansible: raises :class:`VsphereError` and its subclasses. Used through the readers
``_esxi_host_reader.EsxiHosts`` (esxi_host_driver, esxi_maintenance_mode) and ``_gpu_config_reader.GpuHosts``
(esxi_gpu_config), which make the reads of every host they are given in one retrieval; the decisions live in
``_esxi.py``.

Requests made by :meth:`HostOps.find_host`: one ContainerView + one retrieval of a few
properties of every host (the name is not an index vCenter offers for hosts added by IP or
short name). Everything else is per host, only on the host being changed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import (
    HOST_STATE_PROPERTIES,
    is_nvidia_gpu,
    vgpu_profiles_of,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereError,
    VsphereFault,
    VsphereNotFound,
    VsphereConnectionError,
    VsphereSessionLost,
    VsphereTaskError,
    vim,
    wait,
)

HOST_PROPERTIES = HOST_STATE_PROPERTIES + ["vm"]
VM_PROPERTIES = ["name", "runtime.powerState", "config.hardware.device"]
VGPU_HOTMIGRATE = "vgpu.hotmigrate.enabled"

RUN_ID_ENV = "GPUPOOL_RUN_ID"


def run_id():
    """The run a host record names: the run lease's holder as the playbooks pass it (None outside them)."""
    value = (os.environ.get(RUN_ID_ENV) or "").strip()
    return value[:200] or None


class HostOps:
    """Operations on ESXi hosts through one :class:`VsphereClient`."""

    def __init__(self, client, sleep=time.sleep, clock=time.monotonic):
        self.client = client
        self.sleep = sleep
        self.clock = clock

    # -- reading -------------------------------------------------------------------------
    def find_host(self, name, properties=None):
        """ObjectProps of the named host; VsphereNotFound lists a few names when absent.

        ``properties``: the host properties to read (None: HOST_PROPERTIES).
        """
        hosts = self.client.retrieve({vim.HostSystem: list(HOST_PROPERTIES if properties is None else properties)},
                                     fields=True)
        for h in hosts:
            if h["name"] == name:
                return h
        names = sorted(h["name"] for h in hosts)
        raise VsphereNotFound("host %s not found (%d hosts, e.g. %s)" % (name, len(names), ", ".join(names[:5]) or "none"))

    def refresh(self, host, properties=None):
        got = self.client.retrieve_objects([host.obj], list(HOST_PROPERTIES if properties is None else properties))
        if not got:
            raise VsphereNotFound("host %s disappeared from the inventory" % host.get("name", host.moid))
        got[0].props.setdefault("name", host.get("name"))
        return got[0]

    def state(self, host):
        """The collection's record on the host (``_esxi.HOST_STATE_FIELD``), parsed."""
        key = self.client.custom_field_key(_esxi.HOST_STATE_FIELD, vim.HostSystem)
        return _esxi.parse_host_state(self.client.custom_value(host.get("customValue"), key))

    def update_state(self, host, **changes):
        """Set (or, with None, drop) keys of the host's record; one SetField when it changes.

        A record that changes names the run that wrote it (``run``: the run lease's holder, which
        the playbooks pass as E(GPUPOOL_RUN_ID); the run of the last write is kept when unset); the
        run alone keeps no record alive and is no change of its own."""
        state = self.state(host)
        new = dict(state)
        new.update(changes)
        new.pop("run", None)
        if _esxi.format_host_state(new) == _esxi.format_host_state(dict((k, v) for k, v in state.items() if k != "run")):
            return
        if _esxi.format_host_state(new):
            new["run"] = run_id() or state.get("run")
        text = _esxi.format_host_state(new)
        if text != _esxi.format_host_state(state):
            self.client.set_custom_field(host.obj, _esxi.HOST_STATE_FIELD, text)
            key = self.client.custom_field_key(_esxi.HOST_STATE_FIELD, vim.HostSystem)
            values = [v for v in host.get("customValue") or [] if v.key != key]
            values.append(vim.CustomFieldsManager.StringValue(key=key, value=text))
            host.props["customValue"] = values

    def record_powered_off(self, host, vms):
        """Record on the host the VMs this collection powered off and has not powered on yet."""
        self.update_state(host, powered_off=sorted(v["moid"] for v in vms) or None)

    def recorded_powered_off(self, host):
        """[{name, moid, obj}] of the VMs recorded by :meth:`record_powered_off` that are still off."""
        return self.recorded_powered_off_of([host])[host.moid]

    def recorded_powered_off_of(self, hosts):
        """{host moid: [{name, moid, obj}] sorted by name} of the VMs the record of each host holds
        (:meth:`record_powered_off`) that are still off: one retrieval for the VMs of all the hosts, none when
        no record holds any."""
        owed = dict((h.moid, self.state(h).get("powered_off") or []) for h in hosts)
        refs = [vim.VirtualMachine(moid, stub=h.obj._stub)  # pylint: disable=protected-access
                for h in hosts for moid in owed[h.moid]]
        vms = dict((vm.moid, vm) for vm in self.client.retrieve_objects(refs, ["name", "runtime.powerState"])) if refs else {}
        out = {}
        for h in hosts:
            off = [vms[moid] for moid in owed[h.moid] if moid in vms and str(vms[moid].get("runtime.powerState")) != "poweredOn"]
            out[h.moid] = sorted((dict(name=vm["name"], moid=vm.moid, obj=vm.obj) for vm in off), key=lambda v: v["name"])
        return out

    def vgpu_vms(self, host):
        """[{name, moid, power_state, vgpu_profiles, obj}] of the host's VMs holding vGPUs."""
        vms = host.get("vm") or []
        out = []
        for vm in self.client.retrieve_objects(vms, VM_PROPERTIES):
            profiles = vgpu_profiles_of(vm.get("config.hardware.device"))
            if profiles:
                out.append(dict(name=vm["name"], moid=vm.moid, power_state=str(vm.get("runtime.powerState")),
                                vgpu_profiles=profiles, obj=vm.obj))
        return sorted(out, key=lambda v: v["name"])

    def vms_to_power_off(self, host, power_off):
        """The powered-on vGPU VMs a reboot of ``host`` must power off (read now); refused by
        ``_esxi.vms_to_power_off`` when some cannot move and ``power_off`` is false."""
        running = [v for v in self.vgpu_vms(host) if v["power_state"] == "poweredOn"]
        return _esxi.vms_to_power_off(running, bool(running) and self.vgpu_hotmigrate_enabled(), power_off)

    def power_off_recorded(self, host, vms, off, step):
        """Power off ``vms`` one by one, each recorded on the host before it goes off (a rerun
        powers on what a failure left off); ``off``, the VMs off so far, grows as they go.
        ``step(name, doing, func, *args)`` runs each power-off (the caller's timing and errors)."""
        for vm in vms:
            self.record_powered_off(host, off + [vm])
            step("power_off %s" % vm["name"], "power off VM %s on" % vm["name"], self.power_off, vm["obj"], vm["name"])
            off.append(vm)

    def power_on_recorded(self, host, off, step):
        """Power on the VMs in ``off`` (each removed once on) and record the ones left; returns a
        warning per VM that stays off (the record keeps it, so a rerun powers it on)."""
        warnings = []
        for vm in list(off):
            try:
                step("power_on %s" % vm["name"], "power on VM %s on" % vm["name"], self.power_on, vm["obj"], vm["name"])
                off.remove(vm)
            except VsphereError as exc:
                warnings.append("VM %s was powered off for the reboot of host %s and could not be powered on again: "
                                "%s; it is recorded on the host and a rerun powers it on" % (vm["name"], host["name"], exc))
        try:
            self.record_powered_off(host, off)
        except VsphereError as exc:
            warnings.append("could not update the record of powered-off VMs on host %s: %s" % (host["name"], exc))
        return warnings

    def vgpu_hotmigrate_enabled(self):
        """Whether vCenter migrates powered-on vGPU VMs (advanced setting vgpu.hotmigrate.enabled)."""
        try:
            opts = self.client.content.setting.QueryOptions(name=VGPU_HOTMIGRATE)
        except VsphereFault:  # InvalidName: the setting is not there, so it is off
            return False
        for opt in opts or []:
            if opt.key == VGPU_HOTMIGRATE:
                return str(opt.value).lower() == "true"
        return False

    # -- changing ------------------------------------------------------------------------
    def power_off(self, vm_obj, name, timeout=300):
        self.client.wait_for_task(vm_obj.PowerOffVM_Task(), timeout=timeout, what="power off VM %s" % name)

    def power_on(self, vm_obj, name, timeout=300):
        self.client.wait_for_task(vm_obj.PowerOnVM_Task(), timeout=timeout, what="power on VM %s" % name)

    def enter_maintenance(self, host, timeout, by="gpupool.vcf"):
        """Maintenance mode, recorded on the host as the collection's (so a rerun may end it)."""
        if host.get("runtime.inMaintenanceMode"):
            return False
        self.update_state(host, maintenance="%s %s" % (by, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
        task = host.obj.EnterMaintenanceMode_Task(timeout=int(timeout), evacuatePoweredOffVms=False)
        self.client.wait_for_task(task, timeout=timeout + 60, what="enter maintenance mode")
        host.props["runtime.inMaintenanceMode"] = True
        return True

    def exit_maintenance(self, host, timeout=600):
        task = host.obj.ExitMaintenanceMode_Task(timeout=int(timeout))
        self.client.wait_for_task(task, timeout=timeout + 60, what="exit maintenance mode")
        host.props["runtime.inMaintenanceMode"] = False
        self.update_state(host, maintenance=None)

    def install(self, host, kind, location, timeout):
        """InstallHostPatchV2 of an offline bundle (.zip) or a VIB; returns the task result."""
        manager = host.obj.configManager.patchManager
        spec = vim.HostPatchManager.PatchManagerOperationSpec()
        kwargs = dict(metaUrls=None, bundleUrls=None, vibUrls=None, spec=spec)
        kwargs["bundleUrls" if kind == "bundle" else "vibUrls"] = [location]
        task = manager.InstallHostPatchV2_Task(**kwargs)
        return self.client.wait_for_task(task, timeout=timeout, what="install %s" % location)

    def reboot_and_wait(self, host, timeout):
        """Reboot a host in maintenance mode and wait until it is connected with a new boot time.

        vCenter unreachable meanwhile (restarting) does not end the wait before ``timeout``. The
        host's state is read through the client's boundary: a session ended meanwhile
        (``TerminateSession``) is logged in again once and the wait goes on within the same
        deadline; lost twice in a row, the wait ends at once, naming the host left in maintenance
        mode (never "did not come back": the host may well be back).
        """
        before = host.get("runtime.bootTime")
        started = self.clock()
        name = host.get("name", host.moid)
        seen = dict(down=False)

        def back():
            now = self.refresh(host)
            state = str(now.get("runtime.connectionState"))
            boot = now.get("runtime.bootTime")
            if state != "connected":
                seen["down"] = True
                return False, "host %s" % state
            if (before is None and seen["down"]) or (before is not None and boot is not None and boot > before):
                return True, now
            return False, "host connected, not rebooted yet"

        try:
            self._reboot(host, timeout)
            left = max(1.0, timeout - (self.clock() - started))
        except VsphereSessionLost as exc:
            raise VsphereSessionLost("host %s: %s; the host is left in maintenance mode, its reboot may be under way"
                                     % (name, exc))
        try:
            return wait(back, left, "the host's return after the reboot", transient=(VsphereConnectionError,),
                        initial_delay=0.25, max_delay=5.0, sleep=self.sleep, clock=self.clock)
        except VsphereSessionLost as exc:
            raise VsphereSessionLost("host %s: %s; the host is left in maintenance mode, rebooting or rebooted"
                                     % (name, exc))
        except VsphereTaskError as exc:
            raise VsphereTaskError("the host did not come back within %ss of the reboot (%s)" % (timeout, exc))

    def _reboot(self, host, timeout):
        """RebootHost_Task, waited for (the task ends when the host goes down)."""
        self.client.wait_for_task(host.obj.RebootHost_Task(force=False), timeout=timeout, what="reboot")

    # -- graphics and module options -----------------------------------------------------
    def nvidia_module_options(self, host_obj, kernel_modules=None):
        """The configured nvidia module option string; None when the module is absent.

        ``kernel_modules``: the host's ``configManager.kernelModuleSystem`` where the caller's retrieval
        read it (else it is read from the host first: one request more per host)."""
        if kernel_modules is None:
            kernel_modules = host_obj.configManager.kernelModuleSystem
        try:
            return kernel_modules.QueryConfiguredModuleOptionString("nvidia")
        except VsphereFault as exc:
            if exc.is_a(vim.fault.NotFound):
                return None
            raise VsphereError("cannot read the nvidia module options: %s" % exc)


def gpu_pci_ids(pci_devices):
    return sorted(p.id for p in pci_devices or [] if is_nvidia_gpu(p))


__all__ = ["HostOps", "gpu_pci_ids"]
