"""esxi_gpu_config's vGPU mode on a vCenter of API 9.1 (direct-path-devices) and before it (UpdateGraphicsConfig):
the path is chosen from the API version, check mode predicts the impacts the real run reports, a rerun is
unchanged, and a mode the device cannot take or a change that needs maintenance mode is refused before any
change."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _gpu_config_reader
from ansible_collections.gpupool.vcf.plugins.modules import esxi_gpu_config
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module

PCIS = ["0000:3b:00.0", "0000:5e:00.0"]


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Host(dict):
    @property
    def props(self):
        return self

    obj = Obj(_moId="host-18")


class Ops:
    def state(self, host):
        return {}

    def recorded_powered_off(self, host):
        return []

    def refresh(self, host, properties=None):
        return host


class World:
    """One host with two GPUs: their vGPU mode (one record for both APIs) and the VMs on each."""
    api = "9.1.0.0"
    modes = {}
    vms = {}
    rest_vms = {}
    configurable = ["VGPU_SAME_SIZE", "VGPU_MIXED_SIZE"]
    in_mm = False
    calls = []
    answer = ["NONE"]
    refuse = ()


class FakeGpuApi:
    def __init__(self, client):
        self.ops = Ops()

    def api_version(self):
        return World.api

    def hosts(self, host=None, cluster=None):
        infos = [Obj(pciId=p, vgpuMode=World.modes[p], vm=[]) for p in PCIS]
        return [Host({"name": "esx-01", "runtime.connectionState": "connected", "hardware.pciDevice": list(PCIS),
                      "config.graphicsInfo": infos, "configManager.graphicsManager": Obj(_moId="gm-1"),
                      "runtime.inMaintenanceMode": World.in_mm, "runtime.bootTime": 1})]

    def graphics_configs(self, hosts):
        types = [Obj(deviceId=p, graphicsType="sharedDirect") for p in PCIS]
        return {"gm-1": Obj(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance", deviceType=types)}

    def vms_by_gpu_of(self, hosts):
        return dict((h["name"], dict((p, v) for p, v in World.vms.items() if v)) for h in hosts)

    def update_graphics(self, host, desired, vgpu_modes=True):
        World.calls.append(("UpdateGraphicsConfig", vgpu_modes))
        if vgpu_modes:
            World.modes.update(dict((p, {"same_size": "sameSize", "mixed_size": "mixedSize"}[m])
                                    for p, m in desired["vgpu_modes"].items()))


class FakeDirect:
    def __init__(self, rest):
        assert rest == "rest session"

    def devices(self, moid):
        World.calls.append(("GET", moid))
        return dict((p, {"current_mode": {"sameSize": "VGPU_SAME_SIZE", "mixedSize": "VGPU_MIXED_SIZE"}[World.modes[p]],
                         "configurable_modes": World.configurable, "vms": World.rest_vms.get(p, [])}) for p in PCIS)

    def configure(self, moid, pci, word, what=None):
        World.calls.append(("configure", moid, pci, word))
        if pci in World.refuse:
            raise VsphereTaskError("%s failed: a VM was powered on on the GPU" % what)
        World.modes[pci] = {"same_size": "sameSize", "mixed_size": "mixedSize"}[word]
        return list(World.answer)


@pytest.fixture
def world(monkeypatch):
    World.api, World.modes, World.vms, World.rest_vms = "9.1.0.0", dict((p, "sameSize") for p in PCIS), {}, {}
    World.configurable, World.in_mm, World.calls, World.answer = ["VGPU_SAME_SIZE", "VGPU_MIXED_SIZE"], False, [], ["NONE"]
    World.refuse = ()
    monkeypatch.setattr(esxi_gpu_config, "GpuConfigApi", FakeGpuApi)
    monkeypatch.setattr(esxi_gpu_config, "DirectPathApi", FakeDirect)
    monkeypatch.setattr(_gpu_config_reader, "gpu_pci_ids", lambda devices: list(devices or []))
    return World


def configure(check_mode=False, **params):
    spec = esxi_gpu_config.ARGUMENT_SPEC
    module = Module(dict(dict((k, v.get("default")) for k, v in spec.items()), host="esx-01", **params),
                    partial={}, check_mode=check_mode)
    with pytest.raises(Exited) as exc:
        Runner(module, esxi_gpu_config.GpuConfig(module)).run()
    return exc.value.result


def test_api_9_1_check_mode_predicts_the_impacts_the_real_run_reports_then_unchanged(world):
    check = configure(vgpu_mode="mixed_size", check_mode=True)
    assert check["changed"] and check["hosts"]["esx-01"]["impacts"] == {p: ["NONE"] for p in PCIS}
    assert world.calls == [("GET", "host-18")]
    world.calls = []
    real = configure(vgpu_mode="mixed_size")
    assert real["hosts"] == check["hosts"] and real["changed"]
    # the modes go through direct-path-devices only: no UpdateGraphicsConfig when nothing else changes
    assert world.calls == [("GET", "host-18"), ("configure", "host-18", PCIS[0], "mixed_size"),
                           ("configure", "host-18", PCIS[1], "mixed_size")]
    world.calls = []
    again = configure(vgpu_mode="mixed_size")
    assert again["changed"] is False and again["hosts"]["esx-01"]["impacts"] == {} and world.calls == [("GET", "host-18")]


def test_api_9_1_other_graphics_go_through_soap_without_the_modes_and_a_reboot_answer_is_owed(world):
    world.answer = ["HOST_REBOOT_REQUIRED"]
    res = configure(vgpu_mode="mixed_size", assignment_policy="consolidation")
    assert ("UpdateGraphicsConfig", False) in world.calls
    assert res["hosts"]["esx-01"]["impacts"] == {p: ["HOST_REBOOT_REQUIRED"] for p in PCIS}
    assert res["hosts"]["esx-01"]["reboot_required"] is True


def test_before_9_1_the_mode_goes_through_update_graphics_config(world):
    world.api = "8.0.3.0"
    res = configure(vgpu_mode="mixed_size")
    assert world.calls == [("UpdateGraphicsConfig", True)]
    assert res["changed"] and res["hosts"]["esx-01"]["impacts"] is None
    assert res["hosts"]["esx-01"]["graphics"]["vgpu_modes"] == {p: "mixed_size" for p in PCIS}


def test_maintenance_mode_impact_refused_before_any_change_unless_in_maintenance_mode(world):
    world.rest_vms = {PCIS[1]: ["vm-22"]}
    for check_mode in (True, False):
        res = configure(vgpu_mode="mixed_size", check_mode=check_mode)
        assert res["failed"] and "host esx-01 is not in maintenance mode and the vGPU mode change of GPU 0000:5e:00.0 " \
            "needs it (HOST_MAINTENANCE_MODE_REQUIRED): put the host in maintenance mode" in res["msg"]
        assert res["msg"].endswith("Nothing was changed.")
    assert [c for c in world.calls if c[0] != "GET"] == []
    world.in_mm = True
    check = configure(vgpu_mode="mixed_size", check_mode=True)
    assert check["hosts"]["esx-01"]["impacts"] == {PCIS[0]: ["NONE"], PCIS[1]: ["HOST_MAINTENANCE_MODE_REQUIRED"]}


def test_a_mode_outside_configurable_modes_refused_before_any_change(world):
    world.configurable = ["VGPU_SAME_SIZE"]
    res = configure(vgpu_mode="mixed_size")
    assert res["failed"] and "GPU 0000:3b:00.0: the device cannot be configured to VGPU_MIXED_SIZE" in res["msg"]
    assert [c for c in world.calls if c[0] != "GET"] == []


def test_a_configure_the_server_refuses_says_which_gpus_were_already_set(world):
    world.refuse = (PCIS[1],)
    res = configure(vgpu_mode="mixed_size")
    assert res["failed"] and res["hosts_changed"] == []
    assert "Unable to set the vGPU mode of the GPUs of host esx-01: configure the vGPU mode of GPU 0000:5e:00.0 of host " \
        "esx-01 failed: a VM was powered on on the GPU (GPUs of the host already set through direct-path-devices: " \
        "0000:3b:00.0)" in res["msg"], res["msg"]
