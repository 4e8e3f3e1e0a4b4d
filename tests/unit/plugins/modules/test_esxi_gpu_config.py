"""esxi_gpu_config through main(): the arguments parsed by AnsibleModule, the GPU configuration API
(GpuConfigApi) replaced by a fake cluster of two GPU hosts and a host without GPUs that keeps each host's
graphics configuration, its nvidia module options and the collection's record. Check mode predicts the real run,
a rerun is idempotent (the options still owe their reboot), bad input is refused before any call, a failed
update names the host, what was already changed and what to do. The vGPU mode, MIG and reboot paths have their
own files (test_esxi_gpu_config_direct_path.py, test_esxi_gpu_config_shell.py)."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _gpu_config_reader
from ansible_collections.gpupool.vcf.plugins.modules import esxi_gpu_config
from tests.lib.module_main import VSPHERE, run_main

PCIS = ["0000:3b:00.0", "0000:5e:00.0"]
EQUAL3 = "NVreg_RegistryDwords=RmPVMRL=0x00030001"
WRITES = ("UpdateGraphicsConfig", "UpdateModuleOptionString", "SetField")


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Host(dict):
    @property
    def props(self):
        return self

    @property
    def obj(self):
        return Obj(_moId=self["moid"])


def gpu_host(name):
    return dict(graphics=dict(default="shared", policy="performance", types=dict.fromkeys(PCIS, "shared")),
                options="", state={}, pcis=list(PCIS))


class Vcenter:
    """The hosts of cluster gpu-h100 as vCenter keeps them between runs."""

    hosts = {}
    calls = []
    fail = None


class FakeOps:
    def state(self, host):
        return dict(Vcenter.hosts[host["name"]]["state"])

    def update_state(self, host, **changes):
        Vcenter.calls.append(("SetField", host["name"], changes))
        Vcenter.hosts[host["name"]]["state"].update(changes)

    def recorded_powered_off(self, host):
        return []

    def refresh(self, host, properties=None):
        return host


class FakeGpuConfigApi:
    def __init__(self, client):
        assert client == "soap session"
        self.ops = FakeOps()

    def api_version(self):
        return "8.0.3.0"

    def hosts(self, host=None, cluster=None):
        Vcenter.calls.append(("hosts", host, cluster))
        names = sorted(Vcenter.hosts) if cluster == "gpu-h100" else [host]
        if cluster not in (None, "gpu-h100") or any(n not in Vcenter.hosts for n in names):
            raise VsphereError("%s not found" % (("cluster %s" % cluster) if cluster else ("host %s" % host)))
        return [Host({"name": n, "moid": "host-%d" % i, "runtime.connectionState": "connected",
                      "hardware.pciDevice": list(Vcenter.hosts[n]["pcis"]), "config.graphicsInfo": [],
                      "configManager.graphicsManager": Obj(_moId="gm-" + n), "runtime.inMaintenanceMode": False,
                      "runtime.bootTime": "boot-1", "summary.rebootRequired": False})
                for i, n in enumerate(names)]

    def graphics_configs(self, hosts):
        out = {}
        for h in hosts:
            g = Vcenter.hosts[h["name"]]["graphics"]
            api = dict((w, a) for a, w in _esxi.GRAPHICS_WORD_BY_API.items())
            types = [Obj(deviceId=p, graphicsType=api[t]) for p, t in sorted(g["types"].items())]
            out["gm-" + h["name"]] = Obj(hostDefaultGraphicsType=api[g["default"]],
                                         sharedPassthruAssignmentPolicy=g["policy"], deviceType=types)
        return out

    def nvidia_module_options(self, host):
        return Vcenter.hosts[host["name"]]["options"]

    def update_graphics(self, host, desired, vgpu_modes=True):
        Vcenter.calls.append(("UpdateGraphicsConfig", host["name"]))
        if Vcenter.fail == ("UpdateGraphicsConfig", host["name"]):
            raise VsphereTaskError("UpdateGraphicsConfig failed: the host answered busy")
        Vcenter.hosts[host["name"]]["graphics"] = dict(default=desired["default_type"],
                                                       policy=desired["assignment_policy"],
                                                       types=dict(desired["device_types"]))

    def update_module_options(self, host, options):
        self.ops.update_state(host, options_boot=_esxi.boot_stamp(host.get("runtime.bootTime")))
        Vcenter.calls.append(("UpdateModuleOptionString", host["name"], options))
        Vcenter.hosts[host["name"]]["options"] = options


@pytest.fixture
def vcenter(monkeypatch):
    Vcenter.hosts = dict(("esx-%02d" % i, gpu_host("esx-%02d" % i)) for i in (1, 2))
    Vcenter.hosts["mgmt-01"] = dict(gpu_host("mgmt-01"), pcis=[])
    Vcenter.calls, Vcenter.fail = [], None
    monkeypatch.setattr(esxi_gpu_config, "GpuConfigApi", FakeGpuConfigApi)
    monkeypatch.setattr(_gpu_config_reader, "gpu_pci_ids", lambda devices: list(devices or []))
    return Vcenter


def run(check_mode=False, diff=False, **params):
    return run_main(esxi_gpu_config, dict(VSPHERE, **params), check_mode=check_mode, diff=diff)


def writes(vcenter):
    return [c for c in vcenter.calls if c[0] in WRITES]


DESIGN = dict(cluster="gpu-h100", graphics_type="shared_direct", assignment_policy="consolidation",
              scheduler=dict(policy="equal_share", time_slice_ms=3))


def test_check_mode_predicts_the_cluster_change_and_the_rerun_changes_nothing(vcenter):
    before = copy.deepcopy(vcenter.hosts)
    check = run(check_mode=True, diff=True, **DESIGN)
    assert writes(vcenter) == [] and vcenter.hosts == before
    assert check["changed"] is True and check["skipped_hosts"] == ["mgmt-01"] and check["reboot_required"] is True
    assert sorted(check["hosts"]) == ["esx-01", "esx-02"]
    one = check["hosts"]["esx-01"]
    assert one["nvidia_module_options"] == EQUAL3 and one["reboot_required"] is True and one["rebooted"] is False
    assert one["graphics"] == dict(default_type="shared_direct", assignment_policy="consolidation",
                                   device_types=dict.fromkeys(PCIS, "shared_direct"))
    assert one["changes"][0] == "host default graphics type shared -> shared_direct"
    assert check["diff"]["before"]["esx-01"]["nvidia_module_options"] == ""
    assert check["diff"]["after"]["esx-01"]["nvidia_module_options"] == EQUAL3
    real = run(diff=True, **DESIGN)
    assert real == check
    assert writes(vcenter) == [
        ("UpdateGraphicsConfig", "esx-01"), ("SetField", "esx-01", dict(options_boot="boot-1")),
        ("UpdateModuleOptionString", "esx-01", EQUAL3),
        ("UpdateGraphicsConfig", "esx-02"), ("SetField", "esx-02", dict(options_boot="boot-1")),
        ("UpdateModuleOptionString", "esx-02", EQUAL3)]
    assert vcenter.hosts["esx-02"]["graphics"]["types"] == dict.fromkeys(PCIS, "shared_direct")
    vcenter.calls = []
    again = run(diff=True, **DESIGN)
    assert again["changed"] is False and writes(vcenter) == []
    # the options load at the next boot: the rerun still says so
    assert again["reboot_required"] is True
    assert again["hosts"]["esx-01"]["pending"] == [
        "nvidia module options changed since the last boot (not loaded until a reboot)"]
    assert again["diff"]["before"] == again["diff"]["after"]


def test_only_what_is_asked_is_compared(vcenter):
    check = run(check_mode=True, host="esx-01", assignment_policy="consolidation")
    real = run(host="esx-01", assignment_policy="consolidation")
    assert real == check and real["hosts"]["esx-01"]["changes"] == ["assignment policy performance -> consolidation"]
    assert writes(vcenter) == [("UpdateGraphicsConfig", "esx-01")] and real["reboot_required"] is False
    assert vcenter.hosts["esx-01"]["graphics"]["default"] == "shared"


def test_bad_input_is_refused_before_any_call(vcenter):
    res = run(host="esx-01", scheduler=dict(time_slice_ms=3))
    assert res["failed"] is True and "scheduler.time_slice_ms needs scheduler.policy" in res["msg"]
    res = run(cluster="gpu-h100", reboot=True, graphics_type="shared_direct")
    assert res["failed"] is True and "reboot is only allowed with host" in res["msg"]
    res = run(host="esx-01", graphics_type="vsga")
    assert res["failed"] is True
    assert "value of graphics_type must be one of: shared_direct, shared, got: vsga" in res["msg"]
    res = run(host="esx-01", mig_gpu_indexes=[0])
    assert res["failed"] is True and "mig_gpu_indexes needs mig_mode" in res["msg"]
    res = run(host="esx-01", cluster="gpu-h100")
    assert res["failed"] is True and "mutually exclusive" in res["msg"]
    assert vcenter.calls == []


def test_a_host_without_a_gpu_is_refused_before_any_change(vcenter):
    res = run(host="mgmt-01", graphics_type="shared_direct")
    assert res["failed"] is True
    assert res["msg"] == ("Unable to configure the GPUs of host mgmt-01: host mgmt-01 has no NVIDIA GPU. "
                          "Nothing was changed.")
    assert writes(vcenter) == []


def test_a_failed_update_names_the_host_and_what_was_already_changed(vcenter):
    vcenter.fail = ("UpdateGraphicsConfig", "esx-02")
    res = run(**DESIGN)
    assert res["failed"] is True
    assert res["msg"].startswith("Unable to configure the GPUs of host esx-02: UpdateGraphicsConfig failed: the host "
                                 "answered busy (hosts already changed: esx-01); fix the cause and rerun")
    assert res["hosts_changed"] == ["esx-01"] and res["next_step"] == "fix the cause and rerun"
    assert vcenter.hosts["esx-01"]["options"] == EQUAL3 and vcenter.hosts["esx-02"]["options"] == ""
    # the rerun skips the host already configured
    vcenter.fail, vcenter.calls = None, []
    again = run(**DESIGN)
    assert again["changed"] is True and [c[1] for c in writes(vcenter)] == ["esx-02"] * 3
    res = run(cluster="gpu-a100", graphics_type="shared_direct")
    assert res["failed"] is True and "cluster gpu-a100 not found" in res["msg"]
