"""_gpu_inventory: the driver read from the software packages or the image compliance, the graphics words."""
from datetime import datetime, timezone
from types import SimpleNamespace

from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import (
    GpuInventory,
    driver_from_packages,
    host_record,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import ObjectProps, VsphereError

FULL = "550.90.05-1OEM.800.1.0.20613240"


def pkg(name, version, vendor="NVIDIA"):
    return SimpleNamespace(name=name, version=version, vendor=vendor)


def test_driver_version_is_read_as_a_driver_version():
    short, full, listing = driver_from_packages([pkg("esx-base", "8.0.3-0.0.24022510", "VMware"),
                                                 pkg("NVD-AIE_ESXi_8.0.0_Driver", FULL),
                                                 pkg("nvdgpumgmtdaemon", FULL)])
    assert (short, full) == ("550.90.05", FULL)
    assert [p["name"] for p in listing] == ["NVD-AIE_ESXi_8.0.0_Driver", "nvdgpumgmtdaemon"]
    # the short form is the one _esxi gives, whatever the build suffix
    assert short == _esxi.parse_driver_version(full).short


def test_short_and_suffixed_versions():
    assert driver_from_packages([pkg("NVD-AIE-800", "550.90.05")])[:2] == ("550.90.05", "550.90.05")
    assert driver_from_packages([pkg("NVD-AIE-800", " 550.90.05-1OEM.800 ")])[:2] == ("550.90.05", "550.90.05-1OEM.800")


def test_a_package_whose_version_is_no_driver_version_is_not_the_driver():
    # the old split("-") made "8.0.0" of a vendor tool the driver version
    packages = [pkg("nvd-gpu-tools-driver", "8.0.0-1.0"), pkg("NVD-AIE_ESXi_8.0.0_Driver", FULL)]
    assert driver_from_packages(packages)[:2] == ("550.90.05", FULL)
    assert driver_from_packages([pkg("nvd-gpu-tools-driver", "latest")])[:2] == (None, None)
    assert driver_from_packages([])[:2] == (None, None)


class FakeHost(dict):
    moid = "host-1"


def test_host_record_speaks_the_collection_graphics_words():
    config = SimpleNamespace(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance",
                             deviceType=[SimpleNamespace(deviceId="0000:3b:00.0", graphicsType="shared")])
    pci = SimpleNamespace(id="0000:3b:00.0", vendorId=0x10DE, classId=0x0302, deviceId=0x2330, deviceName="H100")
    host = FakeHost({"name": "esx-01", "runtime.connectionState": "connected", "hardware.pciDevice": [pci],
                     "config.graphicsInfo": [SimpleNamespace(pciId="0000:3b:00.0", graphicsType="sharedDirect",
                                                             memorySizeInKB=80 * 1024 * 1024)]})
    rec = host_record(host, "gpu-h100", config, [])
    assert rec["graphics"] == dict(default_type="shared_direct", assignment_policy="performance",
                                   device_types={"0000:3b:00.0": "shared"})
    assert rec["gpus"][0]["graphics_type"] == "shared" and rec["gpus"][0]["active_graphics_type"] == "shared_direct"


# --- drivers of image-managed clusters: one compliance read per cluster -----------------------

class Calls(list):
    pass


class FakeImageConfig:
    def __init__(self, calls, version):
        self.calls, self.version = calls, version

    def FetchSoftwarePackages(self):  # noqa: N802 (the vSphere method name)
        self.calls.append("FetchSoftwarePackages")
        return [pkg("NVD-AIE_ESXi_8.0.0_Driver", self.version)]


class FakeClient:
    """The three retrievals of GpuInventory.read over hosts host-1..host-n of cluster c (domain-c1)."""

    def __init__(self, calls, installed, managed=True, reboot=()):
        self.calls = calls
        self.hosts = []
        for i, version in enumerate(installed, 1):
            pci = SimpleNamespace(id="0000:3b:00.0", vendorId=0x10DE, classId=0x0302, deviceId=0x2330,
                                  deviceName="H100")
            self.hosts.append(ObjectProps(vim.HostSystem("host-%d" % i), {
                "name": "esx-%02d" % i, "runtime.connectionState": "connected", "hardware.pciDevice": [pci],
                "runtime.bootTime": datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
                "summary.rebootRequired": i in reboot,
                "configManager.imageConfigManager": FakeImageConfig(calls, version)}))
        self.cluster = ObjectProps(vim.ClusterComputeResource("domain-c1"), {
            "name": "c", "host": [h.obj for h in self.hosts], "lifecycleManaged": managed})

    def clusters_by_name(self):
        self.calls.append("clusters")
        return {"c": ObjectProps(self.cluster.obj, {"name": "c", "host": self.cluster["host"]})}

    def retrieve(self, specs, root=None, fields=False):
        self.with_fields = getattr(self, "with_fields", []) + [fields]
        self.calls.append("retrieve %s" % ",".join(sorted(t.__name__ for t in specs)))
        if vim.ClusterComputeResource in specs:
            assert "lifecycleManaged" in specs[vim.ClusterComputeResource]
            return [self.cluster]
        return list(self.hosts)

    def retrieve_objects(self, objs, properties):
        return []

    def custom_field_key(self, name, mo_type):
        return None

    custom_value = staticmethod(lambda values, key: "")


class FakeRest:
    def __init__(self, calls, answer):
        self.calls, self.answer, self.closed = calls, answer, False

    def get(self, path, params=None):
        self.calls.append("GET " + path)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def close(self):
        self.closed = True


OLD = "550.54.10-1OEM.800.1.0.20613240"


def compliance(statuses):
    hosts = {}
    for i, (status, current) in enumerate(statuses, 1):
        hosts["host-%d" % i] = {"status": status, "scan_time": "2026-11-30T13:00:00.000Z", "components": {
            "NVD-AIE-800": {"status": "COMPLIANT" if current == FULL else "NON_COMPLIANT",
                            "current": {"version": current} if current else None, "target": {"version": FULL}}}}
    return {"hosts": hosts}


def read(installed, answer, managed=True, reboot=(), gather=("driver",)):
    calls = Calls()
    rest = FakeRest(calls, answer)
    client = FakeClient(calls, installed, managed=managed, reboot=reboot)
    records = GpuInventory(client, rest=lambda: rest).read(gather=gather)
    return dict((r["name"], r) for r in records), calls, rest


def test_a_compliant_cluster_is_read_with_one_compliance_call():
    hosts, calls, rest = read([FULL] * 3, compliance([("COMPLIANT", FULL)] * 3))
    assert calls.count("GET /api/esx/settings/clusters/domain-c1/software/compliance") == 1
    assert "FetchSoftwarePackages" not in calls and rest.closed
    for rec in hosts.values():
        assert rec["driver"]["source"] == "image"
        assert (rec["driver"]["version"], rec["driver"]["full_version"]) == ("550.90.05", FULL)
        assert rec["driver"]["packages"] == [dict(name="NVD-AIE-800", version=FULL, vendor="NVIDIA")]


def test_hosts_that_do_not_run_the_image_are_read_one_by_one():
    # esx-02 has drifted, esx-03 is compliant but owes a reboot (staged, not running)
    hosts, calls, _rest = read([FULL, OLD, FULL], compliance([("COMPLIANT", FULL), ("NON_COMPLIANT", OLD),
                                                              ("COMPLIANT", FULL)]), reboot=(3,))
    assert calls.count("FetchSoftwarePackages") == 2
    assert hosts["esx-01"]["driver"]["source"] == "image"
    assert hosts["esx-02"]["driver"] == dict(version="550.54.10", full_version=OLD, source="host", packages=[
        dict(name="NVD-AIE_ESXi_8.0.0_Driver", version=OLD, vendor="NVIDIA")])
    assert hosts["esx-03"]["driver"]["source"] == "host"


def test_baseline_clusters_and_unreadable_compliance_read_every_host():
    hosts, calls, _rest = read([FULL] * 2, compliance([("COMPLIANT", FULL)] * 2), managed=False)
    assert calls.count("FetchSoftwarePackages") == 2 and not any(c.startswith("GET") for c in calls)
    assert {r["driver"]["source"] for r in hosts.values()} == {"host"}
    hosts, calls, rest = read([FULL] * 2, VsphereError("HTTP 503"))
    assert calls.count("FetchSoftwarePackages") == 2 and rest.closed
    assert {r["driver"]["source"] for r in hosts.values()} == {"host"}


def test_without_the_driver_or_a_rest_session_nothing_changes():
    hosts, calls, _rest = read([FULL] * 2, compliance([("COMPLIANT", FULL)] * 2), gather=())
    assert calls == ["clusters", "retrieve vim.HostSystem"] and all("driver" not in r for r in hosts.values())
    calls = Calls()
    records = GpuInventory(FakeClient(calls, [FULL])).read(gather=("driver",))
    assert records[0]["driver"]["source"] == "host"
    assert calls == ["clusters", "retrieve vim.HostSystem", "FetchSoftwarePackages"]


# --- the per-GPU view: index, vGPU and MIG mode, the VMs on each GPU; SSH and lockdown -------------

def gpu_pci(bus, device_id=0x2331, name="NVIDIA H100 PCIe"):
    return SimpleNamespace(id="0000:%02x:00.0" % bus, vendorId=0x10DE, classId=0x0302, deviceId=device_id,
                           deviceName=name)


def ginfo(bus, mode, vms=(), graphics="sharedDirect"):
    return SimpleNamespace(pciId="0000:%02x:00.0" % bus, graphicsType=graphics, vgpuMode=mode,
                           memorySizeInKB=80 * 1024 * 1024, vm=[vim.VirtualMachine(m) for m in vms])


def per_gpu_host(modes, placed, service=None, lockdown=None):
    """A host whose GPUs sit on buses 0xb1, 0x3b, 0x5e (listed out of PCI order), with a non-GPU NVIDIA
    function between them; ``modes``/``placed`` by bus."""
    buses = [0xB1, 0x3B, 0x5E]
    audio = SimpleNamespace(id="0000:3b:00.1", vendorId=0x10DE, classId=0x0403, deviceId=0x22BA, deviceName="audio")
    return FakeHost({"name": "esx-01", "runtime.connectionState": "connected",
                     "hardware.pciDevice": [gpu_pci(buses[0]), audio, gpu_pci(buses[1]), gpu_pci(buses[2])],
                     "config.graphicsInfo": [ginfo(b, modes.get(b), placed.get(b, ())) for b in buses],
                     "config.service": service, "config.lockdownMode": lockdown})


VMS = [dict(name="infer-01", moid="vm-1", power_state="poweredOn", vgpu_profiles=["nvidia_h100-3-40c"]),
       dict(name="train-01", moid="vm-2", power_state="poweredOn", vgpu_profiles=["nvidia_h100-80c", "nvidia_h100-80c"]),
       dict(name="infer-02", moid="vm-3", power_state="poweredOn", vgpu_profiles=["nvidia_h100-3-40c"])]


def test_gpus_are_numbered_in_pci_order_as_nvidia_smi_numbers_them():
    config = SimpleNamespace(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance",
                             deviceType=[SimpleNamespace(deviceId="0000:5e:00.0", graphicsType="sharedDirect",
                                                         vgpuMode="mixedSize")])
    rec = host_record(per_gpu_host({0x3B: "multiInstanceGpu", 0x5E: "mixedSize", 0xB1: "sameSize"}, {}),
                      "gpu-h100", config, [])
    assert [(g["index"], g["pci_id"]) for g in rec["gpus"]] == [
        (0, "0000:3b:00.0"), (1, "0000:5e:00.0"), (2, "0000:b1:00.0")]
    assert [(g["vgpu_mode"], g["mig"]) for g in rec["gpus"]] == [
        ("multiInstanceGpu", "enabled"), ("mixedSize", "disabled"), ("sameSize", "disabled")]
    assert [g["configured_vgpu_mode"] for g in rec["gpus"]] == [None, "mixedSize", None]
    assert rec["gpu_count"] == 3 and all(g["vms"] == [] for g in rec["gpus"])


def test_mig_is_unknown_where_the_api_reports_no_vgpu_mode():
    rec = host_record(per_gpu_host({0x3B: None, 0x5E: "none"}, {}), "c", None, [])
    assert [(g["vgpu_mode"], g["mig"]) for g in rec["gpus"]] == [(None, None), ("none", "disabled"), (None, None)]


def test_each_gpu_lists_the_vms_placed_on_it_with_their_profiles():
    # train-01 has two vGPUs on two GPUs: one each; infer-01 and infer-02 share the MIG GPU
    placed = {0x3B: ["vm-3", "vm-1"], 0x5E: ["vm-2"], 0xB1: ["vm-2"]}
    rec = host_record(per_gpu_host({0x3B: "multiInstanceGpu", 0x5E: "sameSize", 0xB1: "sameSize"}, placed),
                      "c", None, VMS)
    assert rec["gpus"][0]["vms"] == [dict(name="infer-01", moid="vm-1", profiles=["nvidia_h100-3-40c"]),
                                     dict(name="infer-02", moid="vm-3", profiles=["nvidia_h100-3-40c"])]
    assert rec["gpus"][1]["vms"] == [dict(name="train-01", moid="vm-2", profiles=["nvidia_h100-80c"])]
    assert rec["gpus"][2]["vms"] == [dict(name="train-01", moid="vm-2", profiles=["nvidia_h100-80c"])]
    # a VM on one GPU has all its vGPUs there; a VM the host's VM list lacks is named by its id
    rec = host_record(per_gpu_host({}, {0x5E: ["vm-2", "vm-9"]}), "c", None, VMS)
    assert rec["gpus"][1]["vms"] == [dict(name="train-01", moid="vm-2", profiles=["nvidia_h100-80c", "nvidia_h100-80c"]),
                                     dict(name="vm-9", moid="vm-9", profiles=[])]
    # without the VMs gathered the placement is not known
    assert all(g["vms"] is None for g in host_record(per_gpu_host({}, placed), "c", None, None)["gpus"])


def test_ssh_service_and_lockdown_mode():
    services = SimpleNamespace(service=[SimpleNamespace(key="TSM", running=True),
                                        SimpleNamespace(key="TSM-SSH", running=True)])
    rec = host_record(per_gpu_host({}, {}, service=services, lockdown="lockdownNormal"), "c", None, [])
    assert (rec["ssh_service"], rec["lockdown_mode"]) == ("running", "lockdownNormal")
    services.service[1].running = False
    assert host_record(per_gpu_host({}, {}, service=services), "c", None, [])["ssh_service"] == "stopped"
    rec = host_record(per_gpu_host({}, {}, service=SimpleNamespace(service=[])), "c", None, [])
    assert (rec["ssh_service"], rec["lockdown_mode"]) == ("unknown", None)
    assert host_record(per_gpu_host({}, {}), "c", None, [])["ssh_service"] == "unknown"


def test_the_per_gpu_view_and_ssh_come_in_the_one_host_retrieval():
    """No request is added: graphicsInfo, the services and lockdown mode are properties of the host read."""
    seen = []

    class Client(FakeClient):
        def retrieve(self, specs, root=None, fields=False):
            seen.append(dict(specs))
            return FakeClient.retrieve(self, specs, root, fields)

    calls = Calls()
    GpuInventory(Client(calls, [FULL, FULL])).read(gather=("vms",))
    assert calls == ["clusters", "retrieve vim.HostSystem,vim.VirtualMachine"]
    host_props = seen[0][vim.HostSystem]
    assert {"config.graphicsInfo", "config.service", "config.lockdownMode"} <= set(host_props)


def test_namespaces_come_in_the_same_retrieval_as_the_vms():
    """With namespaces, the VM read takes each VM's resource pool and the pools' names and parents: a vGPU VM
    under <root>/Namespaces/<ns> carries ns, one outside any namespace None; no retrieval is added."""
    seen = []
    pools = [ObjectProps(vim.ResourcePool("resgroup-1"), {"name": "Resources", "parent": vim.ClusterComputeResource("domain-c1")}),
             ObjectProps(vim.ResourcePool("resgroup-2"), {"name": "Namespaces", "parent": vim.ResourcePool("resgroup-1")}),
             ObjectProps(vim.ResourcePool("resgroup-3"), {"name": "team-a", "parent": vim.ResourcePool("resgroup-2")})]

    def vm(moid, name, pool):
        device = SimpleNamespace(backing=SimpleNamespace(vgpu="nvidia_h100-3-40c"))
        return ObjectProps(vim.VirtualMachine(moid), {
            "name": name, "runtime.host": vim.HostSystem("host-1"), "runtime.powerState": "poweredOn",
            "config.hardware.device": [device], "config.uuid": moid, "resourcePool": vim.ResourcePool(pool)})

    class Client(FakeClient):
        def retrieve(self, specs, root=None, fields=False):
            seen.append(dict(specs))
            out = FakeClient.retrieve(self, specs, root, fields)
            if vim.ClusterComputeResource in specs:
                return out
            out += [vm("vm-1", "tenant-vm", "resgroup-3"), vm("vm-2", "node-vm", "resgroup-1")]
            return out + (pools if vim.ResourcePool in specs else [])

    calls = Calls()
    [record] = GpuInventory(Client(calls, [FULL])).read(gather=("vms",), namespaces=True)
    assert calls == ["clusters", "retrieve vim.HostSystem,vim.ResourcePool,vim.VirtualMachine"]
    assert "resourcePool" in seen[0][vim.VirtualMachine] and seen[0][vim.ResourcePool] == ["name", "parent"]
    assert [(v["name"], v["namespace"]) for v in record["vgpu_vms"]] == [("node-vm", None), ("tenant-vm", "team-a")]
    # without namespaces the read is as before
    seen.clear()
    [record] = GpuInventory(Client(Calls(), [FULL])).read(gather=("vms",))
    assert vim.ResourcePool not in seen[0] and "resourcePool" not in seen[0][vim.VirtualMachine]
    assert all("namespace" not in v for v in record["vgpu_vms"])
