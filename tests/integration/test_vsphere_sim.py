"""The vSphere simulator itself: GPU hosts, the GPU managers, TLS, admin endpoints.

One simulator for the module (small fleet, fast reboots); pyvmomi talks to it
over TLS trusting only the rig's CA.
"""
import pathlib
import ssl
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

pyVim = pytest.importorskip("pyVim.connect")
from pyVmomi import vim, vmodl  # noqa: E402

from tests.lib.vim_objects import find_object as obj, wait_task as wait  # noqa: E402

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"

FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True, "hosts": [
            # infer's MIG-backed vGPU needs a GPU in MIG mode: the first card of h100-a
            {"name": "h100-a", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW, "mig": [0]},
            {"name": "h100-b", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": OLD},
            {"name": "h100-c", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW},
        ]},
        {"name": "gpu-mixed", "hosts": [
            {"name": "l40s-a", "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
            {"name": "a100-a", "gpu": {"model": "A100-80GB", "count": 8}, "driver_version": NEW},
            {"name": "h200-a", "gpu": {"model": "H200-141GB", "count": 2}},  # no driver yet
        ]},
        {"name": "mgmt", "hosts": [{"prefix": "mgmt-", "count": 2}]},
    ],
    "vms": [
        {"name": "infer", "host": "h100-a", "vgpu": ["nvidia_h100-1-10c"]},
        {"name": "plain", "host": "h100-c"},
        {"name": "nb", "cluster": "gpu-mixed", "count": 1, "vgpu": ["nvidia_l40s-8c"]},
        {"name": "tools", "cluster": "mgmt", "count": 2},
    ],
}


@pytest.fixture(scope="module")
def sim():
    with vsphere_sim.start(FLEET, reboot_seconds=0.5) as s:
        yield s


@pytest.fixture(scope="module")
def si(sim):
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    conn = pyVim.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    yield conn
    pyVim.Disconnect(conn)


def test_api_version(si):
    assert si.content.about.apiVersion == "8.0.3.0"


@pytest.mark.parametrize("host,device_id,count", [
    ("h100-a", 0x2331, 4), ("l40s-a", 0x26B9, 2), ("a100-a", 0x20B5, 8), ("h200-a", 0x2335, 2), ("mgmt-01", None, 0),
])
def test_gpus_in_pci_devices(si, host, device_id, count):
    devs = obj(si, vim.HostSystem, host).hardware.pciDevice
    gpus = [d for d in devs if d.vendorId & 0xFFFF == 0x10DE]
    assert len(gpus) == count
    assert len(devs) > count  # vcsim's own devices are kept
    assert len({d.id for d in gpus}) == count
    for d in gpus:
        assert d.deviceId & 0xFFFF == device_id
        assert d.vendorName == "NVIDIA Corporation"


def test_shared_gpu_capabilities_per_model(si):
    def caps(host):
        return {c.vgpu for c in obj(si, vim.HostSystem, host).config.sharedGpuCapabilities}

    h100 = caps("h100-a")
    assert {"nvidia_h100-80c", "nvidia_h100-4c", "nvidia_h100-3-40c", "nvidia_h100-7-80c", "nvidia_h100-1-10cme"} <= h100
    assert not any(p.endswith("q") for p in h100)
    a100 = caps("a100-a")
    assert {"grid_a100d-3-40c", "grid_a100d-80c"} <= a100
    l40s = caps("l40s-a")
    assert {"nvidia_l40s-48c", "nvidia_l40s-8c", "nvidia_l40s-1q", "nvidia_l40s-48q"} <= l40s
    assert not any(p.count("-") > 1 for p in l40s)  # no MIG
    assert caps("h200-a") == set()  # no driver, no profiles
    assert caps("mgmt-01") == set()
    info = obj(si, vim.HostSystem, "h100-a").config.graphicsInfo
    assert len(info) == 4 and info[0].memorySizeInKB == 80 * 1024 * 1024


def test_config_target_vgpu_profiles(si):
    host = obj(si, vim.HostSystem, "h100-a")
    target = host.parent.environmentBrowser.QueryConfigTarget(host)
    by_name = {p.profileName: p for p in target.vgpuProfileInfo}
    assert by_name["nvidia_h100-3-40c"].profileSharing == "mig"
    assert by_name["nvidia_h100-40c"].profileSharing == "timeSliced"
    assert by_name["nvidia_h100-3-40c"].fbSizeInGib == 40
    assert by_name["nvidia_h100-80c"].deviceVendorId == 0x10DE


def test_update_graphics_config_round_trip(si, sim):
    host = obj(si, vim.HostSystem, "h100-a")
    gm = host.configManager.graphicsManager
    ids = [i.pciId for i in gm.graphicsInfo]
    cfg = vim.host.GraphicsConfig(
        hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="consolidation",
        deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId=i, graphicsType="sharedDirect") for i in ids])
    gm.UpdateGraphicsConfig(cfg)
    got = gm.graphicsConfig
    assert got.hostDefaultGraphicsType == "sharedDirect"
    assert got.sharedPassthruAssignmentPolicy == "consolidation"
    assert {d.graphicsType for d in got.deviceType} == {"sharedDirect"}
    assert host.config.graphicsConfig.hostDefaultGraphicsType == "sharedDirect"
    assert sim.host_state("h100-a")["graphics"]["policy"] == "consolidation"

    bad = vim.host.GraphicsConfig(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance",
                                  deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId="0000:99:00.0", graphicsType="sharedDirect")])
    with pytest.raises(vmodl.fault.InvalidArgument):
        gm.UpdateGraphicsConfig(bad)
    with pytest.raises(vmodl.fault.InvalidArgument):
        gm.UpdateGraphicsConfig(vim.host.GraphicsConfig(hostDefaultGraphicsType="basic", sharedPassthruAssignmentPolicy="performance"))


def test_module_option_string_round_trip(si):
    kms = obj(si, vim.HostSystem, "h100-a").configManager.kernelModuleSystem
    assert kms.QueryConfiguredModuleOptionString("nvidia") == ""
    kms.UpdateModuleOptionString("nvidia", "NVreg_RegistryDwords=RmPVMRL=0x11")
    assert kms.QueryConfiguredModuleOptionString("nvidia") == "NVreg_RegistryDwords=RmPVMRL=0x11"
    kms.UpdateModuleOptionString("nvidia", "NVreg_RegistryDwords=RmPVMRL=0x01")  # replaced wholesale
    assert kms.QueryConfiguredModuleOptionString("nvidia") == "NVreg_RegistryDwords=RmPVMRL=0x01"
    assert "nvidia" in {m.name for m in kms.QueryModules()}
    no_driver = obj(si, vim.HostSystem, "h200-a").configManager.kernelModuleSystem
    assert "nvidia" not in {m.name for m in no_driver.QueryModules()}
    with pytest.raises(vim.fault.NotFound):
        no_driver.QueryConfiguredModuleOptionString("nvidia")


def nvidia_version(host):
    for p in host.configManager.imageConfigManager.FetchSoftwarePackages():
        if p.name == "NVD-AIE_ESXi_8.0.0_Driver":
            assert p.vendor == "NVIDIA"
            return p.version
    return None


def test_fetch_software_packages_mismatched(si):
    versions = {h: nvidia_version(obj(si, vim.HostSystem, h)) for h in ("h100-a", "h100-b", "h100-c", "h200-a")}
    assert versions == {"h100-a": NEW, "h100-b": OLD, "h100-c": NEW, "h200-a": None}
    names = {p.name for p in obj(si, vim.HostSystem, "h100-a").configManager.imageConfigManager.FetchSoftwarePackages()}
    assert {"nvdgpumgmtdaemon", "esx-base"} <= names


def test_vgpu_vm_blocks_maintenance_mode(si):
    host = obj(si, vim.HostSystem, "h100-a")
    with pytest.raises(vim.fault.InvalidState) as err:
        wait(host.EnterMaintenanceMode_Task(timeout=0))
    assert "1 powered-on VMs with vGPU devices cannot be evacuated: infer" in str(err.value)
    assert not host.runtime.inMaintenanceMode


def test_install_and_reboot(si, sim):
    host = obj(si, vim.HostSystem, "h100-b")
    pm = host.configManager.patchManager
    bundle = f"https://depot.lab.local/nvidia/NVD-AIE-800_{NEW}_23591372.zip"
    with pytest.raises(vim.fault.InvalidState) as err:
        wait(pm.InstallHostPatchV2_Task(bundleUrls=[bundle], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    assert "maintenance mode" in err.value.msg

    wait(host.EnterMaintenanceMode_Task(timeout=0))
    assert host.runtime.inMaintenanceMode

    with pytest.raises(vim.fault.PlatformConfigFault) as err:
        wait(pm.InstallHostPatchV2_Task(bundleUrls=["https://depot.lab.local/other.zip"], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    assert "no NVIDIA component in bundle" in err.value.msg

    wait(pm.InstallHostPatchV2_Task(bundleUrls=[bundle], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    assert nvidia_version(host) == NEW  # listed at once, like ESXi
    state = sim.host_state("h100-b")
    assert state["reboot_required"] and state["driver_running"] == OLD
    assert host.summary.rebootRequired

    boot = host.runtime.bootTime
    wait(host.RebootHost_Task(force=False))
    assert host.runtime.connectionState == "notResponding"
    deadline = time.time() + 10
    while host.runtime.connectionState != "connected":
        assert time.time() < deadline
        time.sleep(0.1)
    assert host.runtime.bootTime > boot
    state = sim.host_state("h100-b")
    assert state["driver_running"] == NEW and state["reboot_count"] == 1 and not state["reboot_required"]
    wait(host.ExitMaintenanceMode_Task(timeout=0))


def test_reboot_needs_maintenance_mode(si):
    host = obj(si, vim.HostSystem, "h100-c")
    with pytest.raises(vim.fault.InvalidState):
        wait(host.RebootHost_Task(force=False))


def test_maintenance_mode_moves_plain_vms(si):
    host = obj(si, vim.HostSystem, "h100-c")
    vm = obj(si, vim.VirtualMachine, "plain")
    assert vm.runtime.host == host
    wait(host.EnterMaintenanceMode_Task(timeout=0))
    assert vm.runtime.host != host and vm.runtime.host.name in ("h100-a", "h100-b")
    wait(host.ExitMaintenanceMode_Task(timeout=0))


def test_fault_injection_fails_next_install(si, sim):
    host = obj(si, vim.HostSystem, "a100-a")
    wait(host.EnterMaintenanceMode_Task(timeout=0))
    pm = host.configManager.patchManager
    vib = f"https://depot.lab.local/NVD-AIE_ESXi_8.0.0_Driver_{OLD}.vib"
    sim.inject_fault("a100-a", "install", "depot unreachable")
    with pytest.raises(vim.fault.PlatformConfigFault) as err:
        wait(pm.InstallHostPatchV2_Task(vibUrls=[vib], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    assert "depot unreachable" in err.value.msg
    wait(pm.InstallHostPatchV2_Task(vibUrls=[vib], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    assert nvidia_version(host) == OLD
    sim.inject_fault("a100-a", "update_module_options", "busy", times=2)
    sim.clear_faults()
    host.configManager.kernelModuleSystem.UpdateModuleOptionString("nvidia", "")
    wait(host.ExitMaintenanceMode_Task(timeout=0))


def test_drift_injection(si, sim):
    sim.set_driver("h100-c", OLD)
    assert nvidia_version(obj(si, vim.HostSystem, "h100-c")) == OLD
    sim.set_driver("h100-c", NEW)


def test_unoffered_profile_fails_power_on(si):
    host = obj(si, vim.HostSystem, "h200-a")
    vm = obj(si, vim.VirtualMachine, "tools-01")
    dev = vim.vm.device.VirtualPCIPassthrough(
        key=-1, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu="nvidia_h200x-1-18c"))
    spec = vim.vm.ConfigSpec(name="h200-job", guestId="ubuntu64Guest", memoryMB=1024, numCPUs=1,
                             files=vim.vm.FileInfo(vmPathName="[LocalDS_0]"),
                             deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="add", device=dev)])
    dc = host.parent.parent.parent
    new_vm = wait(dc.vmFolder.CreateVM_Task(config=spec, pool=host.parent.resourcePool, host=host))
    with pytest.raises(vim.fault.InvalidDeviceSpec) as err:
        wait(new_vm.PowerOnVM_Task())
    assert "nvidia_h200x-1-18c" in err.value.msg
    assert vm.runtime.powerState == "poweredOn"


def test_drs_override_remove(si):
    cluster = obj(si, vim.ClusterComputeResource, "mgmt")
    vm = obj(si, vim.VirtualMachine, "tools-01")
    add = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[vim.cluster.DrsVmConfigSpec(
        operation="add", info=vim.cluster.DrsVmConfigInfo(key=vm, enabled=True, behavior="manual"))])
    wait(cluster.ReconfigureComputeResource_Task(add, True))
    assert [c.key for c in cluster.configurationEx.drsVmConfig] == [vm]
    remove = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[vim.cluster.DrsVmConfigSpec(operation="remove", removeKey=vm)])
    wait(cluster.ReconfigureComputeResource_Task(remove, True))
    assert not cluster.configurationEx.drsVmConfig


def test_stats_count_requests(si, sim):
    sim.reset_stats()
    host = obj(si, vim.HostSystem, "mgmt-01")
    host_name = host.name
    stats = sim.stats()
    assert stats["soap"]["total"] >= 2
    methods = stats["soap"]["methods"]
    assert methods.get("RetrievePropertiesEx", 0) + methods.get("Fetch", 0) >= 1
    assert "CreateContainerView" in stats["soap"]["methods"]
    sim.reset_stats()
    assert sim.stats()["soap"]["total"] == 0


def test_supervisor_listing_and_rest_stats(sim):
    import json
    import urllib.request

    ctx = ssl.create_default_context(cafile=sim.ca_file)
    base = f"https://{sim.host}:{sim.port}"
    import base64
    auth = base64.b64encode(f"{sim.user}:{sim.password}".encode()).decode()
    req = urllib.request.Request(base + "/api/session", method="POST", headers={"Authorization": "Basic " + auth})
    token = json.loads(urllib.request.urlopen(req, context=ctx).read())
    req = urllib.request.Request(base + "/api/vcenter/namespace-management/clusters",
                                 headers={"vmware-api-session-id": token})
    clusters = json.loads(urllib.request.urlopen(req, context=ctx).read())
    assert [c["cluster_name"] for c in clusters] == ["gpu-h100"]
    assert sim.stats()["rest"]["paths"]["GET /api/vcenter/namespace-management/clusters"] == 1


def test_untrusted_client_fails(sim):
    with pytest.raises(ssl.SSLError):
        pyVim.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                           sslContext=ssl.create_default_context(cafile=None, capath="/nonexistent"))
