# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The named ESXi hosts of one esxi_host_driver or esxi_maintenance_mode run, read and written (client layer:
knows nothing of Ansible).

:meth:`EsxiHosts.read` turns one retrieval (every host's few state properties and, in the same retrieval, the
custom attribute definitions) into one record per named host in the collection's words: connection, maintenance
mode, boot, the reboot the host owes, the collection's record on it. The host name is no index vCenter offers
(hosts added by IP or short name), hence every host's state properties, never more. The other reads take the
records of all the hosts they are given and make one retrieval for all of them: the vGPU VMs on the hosts
(:meth:`EsxiHosts.read_vgpu_vms`) and the VMs an earlier run powered off and left off (``left_off``). The NVIDIA
driver (installed and running) exists in the vSphere API only as per-host methods (``FetchSoftwarePackages``,
``QueryModules``): one call of each per host, on the managers read with the host (no property fetched host by
host). The writes go through :class:`HostOps` and keep the record current (``in_maintenance``), so the caller
reads no vSphere property itself. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import VM_PROPERTIES, HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import driver_from_packages, vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereNotFound, vim, vmodl

# what a record of a host is made of: no GPU, VM or graphics property (those are the other reads')
READ_PROPERTIES = [
    "name",
    "runtime.connectionState",
    "runtime.inMaintenanceMode",
    "runtime.bootTime",
    "summary.rebootRequired",
    "customValue",
    "configManager.imageConfigManager",
    "configManager.kernelModuleSystem",
]
NVIDIA_MODULE = "nvidia"


class EsxiHosts:
    """Reads and writes of named ESXi hosts over one ``VsphereClient`` (``client``); the writes through
    ``ops`` (a :class:`HostOps` of the client when not given)."""

    def __init__(self, client, ops=None):
        self.client = client
        self.ops = ops if ops is not None else HostOps(client)

    # -- reading -------------------------------------------------------------------------
    def read(self, names, driver=False, left_off=False):
        """One record per name, in the order given; :class:`VsphereNotFound` names the hosts not found.

        One retrieval (CreateContainerView, RetrievePropertiesEx, DestroyView) of every host's
        READ_PROPERTIES and the custom attribute definitions. ``driver``: the NVIDIA driver installed and
        running of each connected host (two per-host methods each); ``left_off``: the VMs the record of each
        host says the collection powered off that are still off (one retrieval for all the hosts)."""
        found = dict((h["name"], h) for h in self.retrieve_hosts())
        missing = [name for name in names if name not in found]
        if missing:
            known = sorted(found)
            raise VsphereNotFound("host %s not found (%d hosts, e.g. %s)"
                                  % (", ".join(missing), len(known), ", ".join(known[:5]) or "none"))
        items = [self.record(found[name]) for name in names]
        if driver:
            for item in items:
                if item["connected"]:
                    self.read_driver(item)
        if left_off:
            self.read_left_off(items)
        return items

    def retrieve_hosts(self):
        """ObjectProps of READ_PROPERTIES of every host, the custom attribute definitions in the same retrieval
        (handed to the client, which then reads the collection's record without a retrieval of its own)."""
        content = self.client.content
        pc = vmodl.query.PropertyCollector
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        try:
            traversal = pc.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView)
            obj_specs = [pc.ObjectSpec(obj=view, skip=True, selectSet=[traversal])]
            specs = {vim.HostSystem: list(READ_PROPERTIES)}
            fields = content.customFieldsManager
            if fields is not None:
                obj_specs.append(pc.ObjectSpec(obj=fields, skip=False))
                specs[vim.CustomFieldsManager] = ["field"]
            objects = self.client.collect(obj_spec_list=obj_specs, specs=specs)
        finally:
            try:
                view.DestroyView()
            except VsphereError:  # the view dies with the session anyway
                pass
        hosts = []
        for item in objects:
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
            else:
                hosts.append(item)
        return hosts

    def record(self, host):
        """The record of one host as read: its handle (``host``, for the writes) and its state in words."""
        state = str(host.get("runtime.connectionState"))
        return dict(host=host, name=host["name"], connection_state=state, connected=state == "connected",
                    in_maintenance=bool(host.get("runtime.inMaintenanceMode")),
                    reboot_required=host.get("summary.rebootRequired"), boot_time=host.get("runtime.bootTime"),
                    state=self.ops.state(host))

    def read_driver(self, item):
        """The host's NVIDIA driver into its record: ``installed`` and ``installed_full`` (short and full
        version installed, or None), ``running`` (the version of the nvidia kernel module loaded now, read only
        when a driver is installed, or None). Returns the record."""
        host = item["host"]
        try:
            packages = host["configManager.imageConfigManager"].FetchSoftwarePackages()
        except VsphereError as exc:
            raise VsphereError("cannot list the software packages of the host: %s" % exc)
        short, full, _listing = driver_from_packages(packages)
        item.update(installed=short, installed_full=full, running=None)
        if short is None:
            return item
        try:
            modules = host["configManager.kernelModuleSystem"].QueryModules()
        except VsphereError as exc:
            raise VsphereError("cannot list the kernel modules of the host: %s" % exc)
        for mod in modules or []:
            if mod.name == NVIDIA_MODULE and getattr(mod, "loaded", True):
                item["running"] = mod.version or None
                break
        return item

    def read_left_off(self, items):
        """``left_off`` of each record: [{name, moid, obj}] of the VMs its record says the collection powered
        off and that are still off, sorted by name; one retrieval for the VMs of all the hosts."""
        off = self.ops.recorded_powered_off_of([item["host"] for item in items])
        for item in items:
            item["left_off"] = off[item["host"].moid]
        return items

    def read_vgpu_vms(self, items):
        """``vgpu_vms`` of each record: [{name, moid, power_state, vgpu_profiles, obj}] of the host's VMs holding
        vGPUs, sorted by name; one retrieval (from the hosts to their VMs) for all the hosts."""
        pc = vmodl.query.PropertyCollector
        to_vm = pc.TraversalSpec(name="hostToVm", type=vim.HostSystem, path="vm", skip=False)
        obj_specs = [pc.ObjectSpec(obj=item["host"].obj, skip=False, selectSet=[to_vm]) for item in items]
        objects = self.client.collect(obj_spec_list=obj_specs, specs={vim.HostSystem: ["vm"],
                                                                      vim.VirtualMachine: list(VM_PROPERTIES)}) \
            if obj_specs else []
        vms = dict((o.moid, o) for o in objects if isinstance(o.obj, vim.VirtualMachine))
        on_host = dict((o.moid, [ref._moId for ref in o.get("vm") or []])  # pylint: disable=protected-access
                       for o in objects if isinstance(o.obj, vim.HostSystem))
        for item in items:
            out = []
            for moid in on_host.get(item["host"].moid, []):
                vm = vms.get(moid)
                profiles = vgpu_profiles_of(vm.get("config.hardware.device")) if vm is not None else []
                if profiles:
                    out.append(dict(name=vm["name"], moid=moid, power_state=str(vm.get("runtime.powerState")),
                                    vgpu_profiles=profiles, obj=vm.obj))
            item["vgpu_vms"] = sorted(out, key=lambda v: v["name"])
        return items

    def powered_on_vgpu_vms(self, item):
        """The powered-on VMs holding vGPUs of a record read by :meth:`read_vgpu_vms`."""
        return [v for v in item["vgpu_vms"] if v["power_state"] == "poweredOn"]

    def vgpu_hotmigrate_enabled(self):
        """Whether vCenter migrates powered-on vGPU VMs (advanced setting vgpu.hotmigrate.enabled): one query."""
        return self.ops.vgpu_hotmigrate_enabled()

    def vms_to_power_off(self, items, power_off):
        """``stuck`` of each record: the powered-on vGPU VMs its reboot must power off, read now (one retrieval
        for all the hosts, and the hot-migration setting once when some run); refused by
        ``_esxi.vms_to_power_off`` when some cannot move and ``power_off`` is false."""
        self.read_vgpu_vms(items)
        running = dict((item["name"], self.powered_on_vgpu_vms(item)) for item in items)
        hotmigrate = any(running.values()) and self.vgpu_hotmigrate_enabled()
        for item in items:
            item["stuck"] = _esxi.vms_to_power_off(running[item["name"]], hotmigrate, power_off)
        return items

    # -- writing (through HostOps; the record kept current) -------------------------------
    def enter_maintenance(self, item, timeout, by="gpupool.vcf"):
        """Maintenance mode, recorded on the host as the collection's; False when the host was there already."""
        entered = self.ops.enter_maintenance(item["host"], timeout, by)
        item["in_maintenance"] = True
        return entered

    def exit_maintenance(self, item):
        self.ops.exit_maintenance(item["host"])
        item["in_maintenance"] = False

    def install(self, item, kind, location, timeout):
        return self.ops.install(item["host"], kind, location, timeout)

    def reboot_and_wait(self, item, timeout):
        """The host rebooted and back; its record then holds what was read of it after the boot."""
        back = self.ops.reboot_and_wait(self.ops.refresh(item["host"]), timeout)
        item["host"].props.update(back.props)
        item.update(connection_state=str(back.get("runtime.connectionState")), boot_time=back.get("runtime.bootTime"),
                    in_maintenance=bool(back.get("runtime.inMaintenanceMode")),
                    reboot_required=back.get("summary.rebootRequired"))
        item["connected"] = item["connection_state"] == "connected"
        return item

    def power_off_recorded(self, item, vms, off, step):
        """Power off ``vms``, each recorded on the host first (:meth:`HostOps.power_off_recorded`)."""
        self.ops.power_off_recorded(item["host"], vms, off, step)

    def power_on_recorded(self, item, off, step):
        """The VMs ``off`` powered on again; the warnings of those that would not start."""
        return self.ops.power_on_recorded(item["host"], off, step)


__all__ = ["EsxiHosts", "READ_PROPERTIES"]
