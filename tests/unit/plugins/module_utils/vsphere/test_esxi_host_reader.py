"""EsxiHosts, the reader and writer of esxi_host_driver and esxi_maintenance_mode: one retrieval for the hosts' records
and the custom attribute definitions together, one for the vGPU VMs of all the hosts given, one for the VMs left off
of all of them; the driver from the managers read with the host (no property fetched host by host); the records in
the collection's words; the writes keep the record current."""
import json
from types import SimpleNamespace

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host_reader import READ_PROPERTIES, EsxiHosts
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    ObjectProps,
    VsphereClient,
    VsphereError,
    VsphereNotFound,
    vim,
)

FULL = "550.90.05-1OEM.800.1.0.20613240"
KEY = 101


class Stub:
    """The session's stub: records the methods called on managed objects (DestroyView here)."""

    def __init__(self, calls):
        self.calls = calls

    def InvokeMethod(self, mo, info, args):  # noqa: N802 (pyVmomi's name)
        self.calls.append(info.wsdlName)


class ImageConfig:
    def __init__(self, calls, host, version):
        self.calls, self.host, self.version = calls, host, version

    def FetchSoftwarePackages(self):  # noqa: N802 (the vSphere method name)
        self.calls.append("FetchSoftwarePackages %s" % self.host)
        if self.version == "fail":
            raise VsphereError("NoPermission")
        if not self.version:
            return []
        return [SimpleNamespace(name="NVD-AIE_ESXi_8.0.0_Driver", version=self.version, vendor="NVIDIA")]


class KernelModules:
    def __init__(self, calls, host, version):
        self.calls, self.host, self.version = calls, host, version

    def QueryModules(self):  # noqa: N802 (the vSphere method name)
        self.calls.append("QueryModules %s" % self.host)
        return [SimpleNamespace(name="vmkusb", version="1", loaded=True),
                SimpleNamespace(name="nvidia", version=self.version, loaded=True)]


def vgpu(profile):
    return SimpleNamespace(backing=SimpleNamespace(vgpu=profile))


class Client:
    """Three hosts (esx-01 with two vGPU VMs, esx-02 with a plain VM, esx-03 disconnected), the custom attribute
    definitions, VMs; every retrieval recorded with what it asked. The custom attributes as VsphereClient keeps them."""

    def __init__(self, record=None, powered=None):
        self.calls = []
        self._fields = None
        stub = Stub(self.calls)
        self.fields_manager = vim.CustomFieldsManager("CustomFieldsManager")
        self.view = vim.view.ContainerView("session[1]view-1", stub=stub)
        self.content = SimpleNamespace(
            rootFolder=vim.Folder("group-d1"), customFieldsManager=self.fields_manager,
            viewManager=SimpleNamespace(CreateContainerView=self.create_view),
            setting=SimpleNamespace(QueryOptions=self.query_options))
        record = record or {}
        self.vms = {}
        for moid, name, host, power, devices in (
                ("vm-1", "infer-01", "host-1", "poweredOn", [vgpu("nvidia_h100-20c")]),
                ("vm-2", "train-01", "host-1", "poweredOff", [vgpu("nvidia_h100-40c")]),
                ("vm-3", "plain-01", "host-2", "poweredOn", []),
                ("vm-4", "notebook-01", "host-2", "poweredOff", [vgpu("nvidia_h100-10c")])):
            state = (powered or {}).get(moid, power)
            self.vms[moid] = ObjectProps(vim.VirtualMachine(moid), {"name": name, "runtime.powerState": state,
                                                                    "config.hardware.device": devices})
        self.hosts = []
        for i, (name, state, version) in enumerate((("esx-01", "connected", FULL), ("esx-02", "connected", None),
                                                    ("esx-03", "notResponding", FULL)), 1):
            values = [vim.CustomFieldsManager.StringValue(key=KEY, value=json.dumps(record[name]))] if name in record else []
            self.hosts.append(ObjectProps(vim.HostSystem("host-%d" % i), {
                "name": name, "runtime.connectionState": state, "runtime.inMaintenanceMode": i == 2,
                "runtime.bootTime": "boot-%d" % i, "summary.rebootRequired": i == 1, "customValue": values,
                "configManager.imageConfigManager": ImageConfig(self.calls, name, version),
                "configManager.kernelModuleSystem": KernelModules(self.calls, name, version)}))
        self.vm_of = {"host-1": ["vm-1", "vm-2"], "host-2": ["vm-3", "vm-4"], "host-3": []}

    def create_view(self, root, types, recursive):
        self.calls.append("CreateContainerView %s" % ",".join(t.__name__.split(".")[-1] for t in types))
        return self.view

    def query_options(self, name):
        self.calls.append("QueryOptions %s" % name)
        return [SimpleNamespace(key=name, value="false")]

    def collect(self, obj_spec_list, specs):
        kinds = sorted(t.__name__.split(".")[-1] for t in specs)
        self.calls.append("collect %s" % ",".join(kinds))
        out = []
        for spec in obj_spec_list:
            if spec.obj is self.view:
                assert sorted(specs[vim.HostSystem]) == sorted(READ_PROPERTIES)
                out.extend(self.hosts)
            elif spec.obj is self.fields_manager:
                out.append(ObjectProps(spec.obj, {"field": [vim.CustomFieldsManager.FieldDef(
                    key=KEY, name=_esxi.HOST_STATE_FIELD, managedObjectType=vim.HostSystem)]}))
            elif isinstance(spec.obj, vim.HostSystem):
                assert [s.path for s in spec.selectSet] == ["vm"] and vim.VirtualMachine in specs
                refs = [vim.VirtualMachine(moid) for moid in self.vm_of[spec.obj._moId]]
                out.append(ObjectProps(spec.obj, {"vm": refs}))
                out.extend(self.vms[ref._moId] for ref in refs)
        return out

    def retrieve_objects(self, objs, properties):
        self.calls.append("retrieve_objects %s" % ",".join(o._moId for o in objs))
        return [self.vms[o._moId] for o in objs if o._moId in self.vms]

    know_custom_fields = VsphereClient.know_custom_fields
    custom_field_key = VsphereClient.custom_field_key
    custom_value = staticmethod(VsphereClient.custom_value)


def test_one_retrieval_reads_the_records_and_the_custom_attributes_in_the_collection_words():
    client = Client(record={"esx-02": {"maintenance": "esxi_host_driver 2026-12-01T02:00:00Z"}})
    items = EsxiHosts(client).read(["esx-02", "esx-01"])
    assert client.calls == ["CreateContainerView HostSystem", "collect CustomFieldsManager,HostSystem", "DestroyView"]
    assert [item["name"] for item in items] == ["esx-02", "esx-01"]
    two, one = items
    assert two["state"] == {"maintenance": "esxi_host_driver 2026-12-01T02:00:00Z"} and one["state"] == {}
    assert (two["in_maintenance"], two["connected"], two["connection_state"]) == (True, True, "connected")
    assert (one["reboot_required"], one["boot_time"], one["host"].moid) == (True, "boot-1", "host-1")
    assert "installed" not in one and "left_off" not in one and "vgpu_vms" not in one


def test_an_unknown_host_is_named_with_a_few_known_ones_before_anything_else_is_read():
    client = Client()
    with pytest.raises(VsphereNotFound) as err:
        EsxiHosts(client).read(["esx-01", "ghost"], driver=True, left_off=True)
    assert str(err.value) == "host ghost not found (3 hosts, e.g. esx-01, esx-02, esx-03)"
    assert [c for c in client.calls if not c.startswith(("CreateContainerView", "collect", "DestroyView"))] == []


def test_the_driver_of_each_connected_host_from_the_managers_read_with_it():
    client = Client()
    items = EsxiHosts(client).read(["esx-01", "esx-02", "esx-03"], driver=True)
    one, two, three = items
    assert (one["installed"], one["installed_full"], one["running"]) == ("550.90.05", FULL, FULL)
    # no driver installed: its kernel modules are not asked
    assert (two["installed"], two["installed_full"], two["running"]) == (None, None, None)
    assert "installed" not in three and three["connected"] is False
    assert client.calls[3:] == ["FetchSoftwarePackages esx-01", "QueryModules esx-01", "FetchSoftwarePackages esx-02"]


def test_a_driver_that_cannot_be_listed_says_so():
    client = Client()
    hosts = EsxiHosts(client)
    item = hosts.read(["esx-01"])[0]
    item["host"].props["configManager.imageConfigManager"].version = "fail"
    with pytest.raises(VsphereError, match="cannot list the software packages of the host: NoPermission"):
        hosts.read_driver(item)


def test_the_vms_left_off_of_every_host_in_one_retrieval():
    client = Client(record={"esx-01": {"powered_off": ["vm-1", "vm-2"]}, "esx-02": {"powered_off": ["vm-4", "vm-9"]}})
    one, two = EsxiHosts(client).read(["esx-01", "esx-02"], left_off=True)
    assert client.calls[3:] == ["retrieve_objects vm-1,vm-2,vm-4,vm-9"]
    # vm-1 was powered on meanwhile, vm-9 is gone: neither is owed anything
    assert [(v["name"], v["moid"]) for v in one["left_off"]] == [("train-01", "vm-2")]
    assert [(v["name"], v["moid"]) for v in two["left_off"]] == [("notebook-01", "vm-4")]
    client = Client()
    assert EsxiHosts(client).read(["esx-01"], left_off=True)[0]["left_off"] == [] and len(client.calls) == 3


def test_the_vgpu_vms_of_every_host_in_one_retrieval_and_the_rule_of_what_must_be_powered_off():
    client = Client()
    hosts = EsxiHosts(client)
    items = hosts.read(["esx-01", "esx-02"])
    del client.calls[:]
    hosts.read_vgpu_vms(items)
    assert client.calls == ["collect HostSystem,VirtualMachine"]
    assert [(v["name"], v["power_state"], v["vgpu_profiles"]) for v in items[0]["vgpu_vms"]] == [
        ("infer-01", "poweredOn", ["nvidia_h100-20c"]), ("train-01", "poweredOff", ["nvidia_h100-40c"])]
    assert [v["name"] for v in items[1]["vgpu_vms"]] == ["notebook-01"]
    assert [v["name"] for v in hosts.powered_on_vgpu_vms(items[0])] == ["infer-01"]
    assert hosts.powered_on_vgpu_vms(items[1]) == []
    del client.calls[:]
    with pytest.raises(_esxi.EsxiError, match=r"1 powered-on VMs hold vGPUs and cannot be migrated \(infer-01\)"):
        hosts.vms_to_power_off(items, False)
    assert client.calls == ["collect HostSystem,VirtualMachine", "QueryOptions vgpu.hotmigrate.enabled"]
    hosts.vms_to_power_off(items, True)
    assert [v["name"] for v in items[0]["stuck"]] == ["infer-01"] and items[1]["stuck"] == []


def test_no_vm_running_asks_no_hot_migration_setting():
    client = Client(powered={"vm-1": "poweredOff"})
    hosts = EsxiHosts(client)
    items = hosts.vms_to_power_off(hosts.read(["esx-01"]), False)
    assert items[0]["stuck"] == [] and not [c for c in client.calls if c.startswith("QueryOptions")]


class Ops:
    """HostOps' writes, recorded."""

    def __init__(self):
        self.calls = []

    def enter_maintenance(self, host, timeout, by):
        self.calls.append(("enter", host["name"], timeout, by))
        return True

    def exit_maintenance(self, host):
        self.calls.append(("exit", host["name"]))

    def install(self, host, kind, location, timeout):
        self.calls.append(("install", host["name"], kind, location))
        return "done"

    def refresh(self, host):
        self.calls.append(("refresh", host["name"]))
        return host

    def reboot_and_wait(self, host, timeout):
        self.calls.append(("reboot", host["name"], timeout))
        return ObjectProps(host.obj, {"runtime.connectionState": "connected", "runtime.bootTime": "boot-9",
                                      "runtime.inMaintenanceMode": True, "summary.rebootRequired": False})

    def power_off_recorded(self, host, vms, off, step):
        self.calls.append(("off", host["name"], [v["name"] for v in vms]))

    def power_on_recorded(self, host, off, step):
        self.calls.append(("on", host["name"], [v["name"] for v in off]))
        return ["a warning"]

    def state(self, host):
        return {}


def test_the_writes_reach_the_host_and_keep_its_record_current():
    client, ops = Client(), Ops()
    hosts = EsxiHosts(client, ops)
    item = hosts.read(["esx-01"])[0]
    assert hosts.enter_maintenance(item, 600, "esxi_host_driver") is True and item["in_maintenance"] is True
    assert hosts.install(item, "bundle", "/vmfs/volumes/ds1/b.zip", 60) == "done"
    hosts.reboot_and_wait(item, 120)
    assert (item["boot_time"], item["reboot_required"], item["connected"]) == ("boot-9", False, True)
    assert item["host"]["runtime.bootTime"] == "boot-9"
    hosts.power_off_recorded(item, [dict(name="infer-01")], [], None)
    assert hosts.power_on_recorded(item, [dict(name="infer-01")], None) == ["a warning"]
    hosts.exit_maintenance(item)
    assert item["in_maintenance"] is False
    assert ops.calls == [("enter", "esx-01", 600, "esxi_host_driver"), ("install", "esx-01", "bundle", "/vmfs/volumes/ds1/b.zip"),
                         ("refresh", "esx-01"), ("reboot", "esx-01", 120), ("off", "esx-01", ["infer-01"]),
                         ("on", "esx-01", ["infer-01"]), ("exit", "esx-01")]
