"""GpuHosts, esxi_gpu_config's reader and writer: one record per host from the hosts' one retrieval, in the
collection's words; only the parts asked are read; a part that cannot be read is kept for the plan's message; the
writes reach the host's handle."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _gpu_config_reader
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_api import GpuConfigApi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_reader import GpuHosts
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError

PCIS = ["0000:3b:00.0", "0000:5e:00.0"]


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Host(dict):
    @property
    def props(self):
        return self

    @property
    def obj(self):
        return Obj(_moId="host-" + self["name"])

    @property
    def moid(self):
        return "host-" + self["name"]


class Ops:
    def __init__(self, calls):
        self.calls = calls
        self.fail = None

    def state(self, host):
        self.calls.append(("state", host["name"]))
        return {"powered_off": ["vm-1"]} if host["name"] == "esx-01" else {}

    def recorded_powered_off_of(self, hosts):
        self.calls.append(("recorded", [h["name"] for h in hosts]))
        if self.fail:
            raise VsphereError("RetrievePropertiesEx: NoPermission")
        return dict((h.moid, [dict(name="vm-1")]) for h in hosts)


class Api:
    def __init__(self):
        self.calls = []
        self.ops = Ops(self.calls)
        self.fail = None

    def hosts(self, host=None, cluster=None):
        self.calls.append(("hosts", host, cluster))
        infos = [Obj(pciId=p, vgpuMode="mixedSize", vm=[]) for p in PCIS]
        return [Host({"name": "esx-01", "runtime.connectionState": "connected", "hardware.pciDevice": list(PCIS),
                      "config.graphicsInfo": infos, "configManager.graphicsManager": Obj(_moId="gm-1"),
                      "runtime.inMaintenanceMode": True, "runtime.bootTime": "boot-1",
                      "summary.rebootRequired": False, "config.lockdownMode": "lockdownNormal"}),
                Host({"name": "esx-02", "runtime.connectionState": "notResponding",
                      "hardware.pciDevice": list(PCIS), "configManager.graphicsManager": Obj(_moId="gm-2")}),
                Host({"name": "mgmt-01", "runtime.connectionState": "connected", "hardware.pciDevice": [],
                      "configManager.graphicsManager": Obj(_moId="gm-3")})]

    def graphics_configs(self, hosts):
        self.calls.append(("graphics", len(hosts)))
        types = [Obj(deviceId=p, graphicsType="sharedDirect") for p in PCIS]
        return {"gm-1": Obj(hostDefaultGraphicsType="shared", sharedPassthruAssignmentPolicy="performance",
                            deviceType=types)}

    def vms_by_gpu_of(self, hosts):
        self.calls.append(("vms", [h["name"] for h in hosts]))
        return dict((h["name"], {PCIS[0]: ["vm-1"]}) for h in hosts)

    def nvidia_module_options(self, host):
        self.calls.append(("options", host["name"]))
        if self.fail == "options":
            raise VsphereError("QueryConfiguredModuleOptionString: NoPermission")
        return "NVreg_RegistryDwords=RmPVMRL=0x00030001"

    def profiles_by_gpu_of(self, hosts):
        self.calls.append(("profiles", [h["name"] for h in hosts]))
        return dict((h["name"], {PCIS[0]: ["nvidia_h100-10c"]}) for h in hosts)

    def mig_rows(self, host):
        return [dict(index=i, pci_id=p, current=False, pending=False, supported=True) for i, p in enumerate(PCIS)]

    def lockdown_exceptions(self, host):
        self.calls.append(("lockdown", host["name"]))
        if self.fail == "lockdown":
            raise VsphereError("QueryLockdownExceptions: NoPermission")
        return ["svc-gpupool"]

    def gpu_host_names(self, host):
        self.calls.append(("peers", host["name"]))
        return ["esx-01", "esx-09"]

    def update_graphics(self, host, desired, vgpu_modes=True):
        self.calls.append(("UpdateGraphicsConfig", host["name"], vgpu_modes))


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setattr(_gpu_config_reader, "gpu_pci_ids", lambda devices: list(devices or []))
    monkeypatch.setattr(_gpu_config_reader, "ssh_running", lambda host: host["name"] == "esx-01")
    return Api()


def test_one_record_per_host_in_words_and_only_the_parts_asked(api):
    one, down, plain = GpuHosts(api).read(cluster="c1")
    assert api.calls == [("hosts", None, "c1"), ("graphics", 3), ("state", "esx-01")]
    assert one["in_maintenance"] is True and one["boot_time"] == "boot-1" and one["reboot_required"] is False
    assert one["current"] == dict(default_type="shared", assignment_policy="performance",
                                  device_types=dict.fromkeys(PCIS, "shared_direct"))
    assert "options" not in one and "mig_rows" not in one and one["left_off"] == []
    assert down["connected"] is False and down["connection_state"] == "notResponding" and "current" not in down
    assert plain["pcis"] == [] and "state" not in plain


def test_every_part_read_when_asked(api):
    one = GpuHosts(api).read(host="esx-01", vgpu_mode=True, scheduler=True, profiles=True, left_off=True,
                             mig=True)[0]
    assert one["current"]["vgpu_modes"] == dict.fromkeys(PCIS, "mixed_size")
    assert one["vms_on_gpu"] == {PCIS[0]: ["vm-1"]} and one["profiles"] == {PCIS[0]: ["nvidia_h100-10c"]}
    assert one["options"] == "NVreg_RegistryDwords=RmPVMRL=0x00030001" and one["left_off"] == [dict(name="vm-1")]
    assert [r["index"] for r in one["mig_rows"]] == [0, 1] and one["ssh_running"] is True
    assert one["lockdown"] == "lockdownNormal" and one["lockdown_exceptions"] == ["svc-gpupool"]


def test_the_vms_left_off_are_read_in_one_retrieval_for_the_hosts_whose_record_holds_some(api):
    one, down, plain = GpuHosts(api).read(cluster="c1", left_off=True)
    assert [c for c in api.calls if c[0] == "recorded"] == [("recorded", ["esx-01"])]
    assert one["left_off"] == [dict(name="vm-1")] and "left_off" not in down and "left_off" not in plain
    api.calls[:] = []
    api.ops.fail = True
    one = GpuHosts(api).read(cluster="c1", left_off=True)[0]
    assert "NoPermission" in str(one["state_error"]) and "left_off" not in one


def test_a_part_that_cannot_be_read_is_kept_for_the_plan(api):
    api.fail = "options"
    one = GpuHosts(api).read(host="esx-01", scheduler=True, profiles=True)[0]
    assert "NoPermission" in str(one["error"]) and not [c for c in api.calls if c[0] == "profiles"]
    api.fail = "lockdown"
    one = GpuHosts(api).read(host="esx-01", mig=True)[0]
    assert "QueryLockdownExceptions" in str(one["lockdown_error"]) and "lockdown_exceptions" not in one


def test_geometry_positions_and_writes(api):
    hosts = GpuHosts(api)
    items = hosts.read(cluster="c1")
    assert hosts.geometry_names(items, one_host=False) == ["esx-01", "esx-02"]
    assert hosts.geometry_names(items[:1], one_host=True) == ["esx-01", "esx-09"] and ("peers", "esx-01") in api.calls
    assert hosts.geometry_names([], one_host=True) == []
    hosts.update_graphics(items[0], {}, vgpu_modes=False)
    assert api.calls[-1] == ("UpdateGraphicsConfig", "esx-01", False)


def test_the_vms_on_the_gpus_of_every_host_in_one_retrieval_each(api):
    GpuHosts(api).read(cluster="c1", vgpu_mode=True, scheduler=True, profiles=True)
    # esx-02 is not connected, mgmt-01 has no GPU: neither is asked about
    assert [c for c in api.calls if c[0] in ("vms", "profiles")] == [("vms", ["esx-01"]), ("profiles", ["esx-01"])]


class Ref:
    def __init__(self, moid):
        self._moId = moid  # pylint: disable=invalid-name


class Props(dict):
    def __init__(self, moid, **props):
        dict.__init__(self, props)
        self.moid = moid


class Client:
    """retrieve_objects over the VMs placed on the GPUs: each call recorded."""

    def __init__(self):
        self.calls = []

    def retrieve_objects(self, refs, properties):
        self.calls.append(([r._moId for r in refs], properties))
        vgpu = dict(vm1="nvidia_h100-10c", vm2="nvidia_h100-20c")
        return [Props(r._moId, **{"name": "name-" + r._moId,
                                  "config.hardware.device": [Obj(backing=Obj(vgpu=vgpu[r._moId]))]}) for r in refs]


def test_the_api_reads_the_vms_of_all_hosts_in_one_retrieval():
    client = Client()
    gpu_api = GpuConfigApi(client)
    hosts = [Host({"name": "esx-01", "config.graphicsInfo": [Obj(pciId=PCIS[0], vm=[Ref("vm1")]),
                                                             Obj(pciId=PCIS[1], vm=[])]}),
             Host({"name": "esx-02", "config.graphicsInfo": [Obj(pciId=PCIS[0], vm=[Ref("vm2")])]}),
             Host({"name": "esx-03", "config.graphicsInfo": [Obj(pciId=PCIS[0], vm=[])]})]
    assert gpu_api.vms_by_gpu_of(hosts) == {"esx-01": {PCIS[0]: ["name-vm1"]}, "esx-02": {PCIS[0]: ["name-vm2"]},
                                            "esx-03": {}}
    assert gpu_api.profiles_by_gpu_of(hosts) == {"esx-01": {PCIS[0]: ["nvidia_h100-10c"], PCIS[1]: []},
                                                 "esx-02": {PCIS[0]: ["nvidia_h100-20c"]}, "esx-03": {}}
    assert client.calls == [(["vm1", "vm2"], ["name"]), (["vm1", "vm2"], ["config.hardware.device"])]
    assert gpu_api.vms_by_gpu_of(hosts[2:]) == {"esx-03": {}} and len(client.calls) == 2
