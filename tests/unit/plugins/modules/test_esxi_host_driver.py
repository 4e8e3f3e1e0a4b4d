"""esxi_host_driver through main(): the arguments parsed by AnsibleModule, the host reader and writer (EsxiHosts)
replaced by a fake host that keeps its driver as installed and as running, its maintenance mode and its VMs. Check
mode predicts the real run, a rerun is idempotent, bad input is refused before any call, a failed step names the
step and what the host is left with."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.modules import esxi_host_driver
from tests.lib.module_main import VSPHERE, run_main

OLD, NEW = "550.54.10", "550.90.05"
BUILD = "-1OEM.800.1.0.20613240"
BUNDLE = "[datastore1] drivers/NVD-AIE-800_%s%s.zip" % (NEW, BUILD)
CHANGES = ("enter", "install", "reboot", "exit", "power_off", "power_on", "record")


class FakeDriverHost:
    """EsxiHosts of one host, esx-01: what is installed and what runs, maintenance mode, powered-on vGPU VMs.
    ``reads`` counts the reads the module asks for, by kind."""

    installed = OLD
    running = OLD
    in_mm = False
    vms = []            # names of powered-on vGPU VMs (vCenter cannot migrate them)
    record = {}         # the collection's record on the host
    fail = None         # a method name that raises
    calls = []
    reads = []

    def __init__(self, client):
        assert client == "soap session"

    def _call(self, *call):
        FakeDriverHost.calls.append(call)
        if call[0] == FakeDriverHost.fail:
            raise VsphereTaskError("%s failed: the host answered busy" % call[0])

    def read(self, names, driver=False, left_off=False):
        FakeDriverHost.reads.append(("read", tuple(names), driver, left_off))
        if names != ["esx-01"]:
            raise VsphereError("host %s not found (hosts: esx-01)" % ", ".join(names))
        item = dict(host="handle of esx-01", name="esx-01", connection_state="connected", connected=True,
                    in_maintenance=FakeDriverHost.in_mm, reboot_required=False, boot_time="boot-1",
                    state=dict(FakeDriverHost.record))
        if driver:
            self.read_driver(item)
        if left_off:
            item["left_off"] = [dict(name=n, moid="vm-" + n) for n in FakeDriverHost.record.get("powered_off") or []]
        return [item]

    def read_driver(self, item):
        cls = FakeDriverHost
        cls.reads.append(("driver", item["name"]))
        item.update(installed=cls.installed, installed_full=cls.installed + BUILD if cls.installed else None,
                    running=cls.running + BUILD if cls.installed and cls.running else None)
        return item

    def vms_to_power_off(self, items, power_off):
        FakeDriverHost.reads.append(("vms", tuple(item["name"] for item in items)))
        for item in items:
            item["stuck"] = _esxi.vms_to_power_off([dict(name=n, moid="vm-" + n) for n in FakeDriverHost.vms], False,
                                                   power_off)
        return items

    def power_off_recorded(self, item, vms, off, step):
        for vm in vms:
            FakeDriverHost.record["powered_off"] = [v["name"] for v in off + [vm]]
            step("power_off %s" % vm["name"], "power off VM %s on" % vm["name"], self._call, "power_off", vm["name"])
            FakeDriverHost.vms = [n for n in FakeDriverHost.vms if n != vm["name"]]
            off.append(vm)

    def power_on_recorded(self, item, off, step):
        for vm in list(off):
            step("power_on %s" % vm["name"], "power on VM %s on" % vm["name"], self._call, "power_on", vm["name"])
            FakeDriverHost.vms.append(vm["name"])
            off.remove(vm)
        FakeDriverHost.record.pop("powered_off", None)
        return []

    def enter_maintenance(self, item, timeout, by="gpupool.vcf"):
        if item["in_maintenance"]:  # as HostOps: already there, nothing to do
            return False
        self._call("enter", timeout)
        FakeDriverHost.in_mm = True
        FakeDriverHost.record["maintenance"] = by
        item["in_maintenance"] = True
        return True

    def exit_maintenance(self, item):
        self._call("exit")
        FakeDriverHost.in_mm = False
        FakeDriverHost.record.pop("maintenance", None)
        item["in_maintenance"] = False

    def install(self, item, kind, location, timeout):
        self._call("install", kind, location)
        FakeDriverHost.installed = NEW

    def reboot_and_wait(self, item, timeout):
        self._call("reboot")
        FakeDriverHost.running = FakeDriverHost.installed
        item["boot_time"] = "boot-2"
        return item


@pytest.fixture
def host(monkeypatch):
    FakeDriverHost.installed, FakeDriverHost.running, FakeDriverHost.in_mm = OLD, OLD, False
    FakeDriverHost.vms, FakeDriverHost.record, FakeDriverHost.fail, FakeDriverHost.calls = [], {}, None, []
    FakeDriverHost.reads = []
    monkeypatch.setattr(esxi_host_driver, "EsxiHosts", FakeDriverHost)
    monkeypatch.setattr(esxi_host_driver, "ImageClusters", FakeImageClusters)
    FakeImageClusters.refusal, FakeImageClusters.asked = None, []
    return FakeDriverHost


class FakeImageClusters:
    """The image-cluster check: ``refusal`` is what it answers; ``asked`` the installs it was asked about."""
    refusal = None
    asked = []

    def __init__(self, client, rest):
        pass

    def install_refusal(self, host, host_name, version):
        FakeImageClusters.asked.append((host_name, version))
        return FakeImageClusters.refusal


def test_an_install_on_an_image_cluster_of_vsphere_9_is_refused_before_any_change(host):
    FakeImageClusters.refusal = "host esx-01 is in cluster gpu-a, which is managed by a vLCM image; use vlcm_component"
    for check_mode in (True, False):
        res = run(check_mode=check_mode)
        assert res["failed"] and "use vlcm_component" in res["msg"], res
        assert changes(host) == []
    assert FakeImageClusters.asked == [("esx-01", NEW)] * 2


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, host="esx-01", version=NEW, bundle=BUNDLE)
    args.update(params)
    return run_main(esxi_host_driver, args, check_mode=check_mode, diff=diff)


def changes(host):
    return [c for c in host.calls if c[0] in CHANGES]


def without_timings(result):
    """The result without what only the real run knows: step timings and the versions as the host spells them."""
    return dict((k, v) for k, v in result.items() if k not in ("steps", "full_version", "running_version"))


def test_check_mode_predicts_the_upgrade_and_the_rerun_changes_nothing(host):
    check = run(check_mode=True, diff=True)
    assert changes(host) == [] and host.installed == OLD
    # one read of the host (its driver and the VMs left off with it), the VMs that must move only for a reboot
    assert host.reads == [("read", ("esx-01",), True, True), ("driver", "esx-01"), ("vms", ("esx-01",))]
    assert check["changed"] is True and check["plan"] == "upgrade" and check["version"] == NEW
    assert check["diff"]["before"]["version"] == OLD and check["diff"]["after"]["version"] == NEW
    assert check["running_version"] == NEW and check["full_version"] is None
    real = run(diff=True)
    assert without_timings(real) == without_timings(check)
    assert [c[0] for c in changes(host)] == ["enter", "install", "reboot", "exit"]
    location = "/vmfs/volumes/datastore1/drivers/NVD-AIE-800_%s%s.zip" % (NEW, BUILD)
    assert host.calls[1] == ("install", "bundle", location)
    assert [s["step"] for s in real["steps"]] == ["enter_maintenance_mode", "install", "reboot", "verify",
                                                  "exit_maintenance_mode"]
    assert real["running_version"] == NEW + BUILD and real["maintenance_mode"] is False and not host.in_mm
    host.calls, host.reads = [], []
    again = run(diff=True)
    assert again["changed"] is False and again["plan"] == "none" and changes(host) == []
    assert host.reads == [("read", ("esx-01",), True, True), ("driver", "esx-01")]
    assert again["diff"]["before"] == again["diff"]["after"]


def test_vms_that_cannot_move_are_refused_before_any_change_or_powered_off_and_on(host):
    host.vms = ["infer-01"]
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"].startswith("Unable to bring the NVIDIA driver of host esx-01 to %s: 1 powered-on VMs hold "
                                 "vGPUs and cannot be migrated (infer-01)" % NEW)
    assert res["msg"].endswith("Nothing was changed.") and res["previous_version"] == OLD
    assert changes(host) == [] and host.installed == OLD
    check = run(check_mode=True, power_off_vgpu_vms=True)
    assert check["powered_off_vms"] == ["infer-01"] and changes(host) == []
    real = run(power_off_vgpu_vms=True)
    assert real["powered_off_vms"] == ["infer-01"] and real["changed"] is True
    assert [c[0] for c in changes(host)] == ["power_off", "enter", "install", "reboot", "exit", "power_on"]
    assert host.vms == ["infer-01"] and host.record == {}


def test_bad_input_is_refused_before_any_call(host):
    res = run(version="latest")
    assert res["failed"] is True and "Invalid NVIDIA driver version 'latest'" in res["msg"]
    res = run(bundle="[datastore1] drivers/NVD-AIE-800_%s%s.zip" % (OLD, BUILD))
    assert res["failed"] is True
    assert res["msg"].endswith("holds NVIDIA driver %s%s, not the target %s" % (OLD, BUILD, NEW))
    res = run(version="535.183.04")
    assert res["failed"] is True and "allow_downgrade" in res["msg"]
    res = run(evacuate_timeout="soon")
    assert res["failed"] is True and "evacuate_timeout" in res["msg"]
    assert host.calls == [] and host.installed == OLD


def test_a_failed_reboot_names_the_step_and_leaves_the_host_in_maintenance_with_the_driver_staged(host):
    host.fail = "reboot"
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"].startswith("Unable to reboot host esx-01: reboot failed: the host answered busy")
    assert res["host_left_in_maintenance"] is True and res["hosts_in_maintenance"] == ["esx-01"]
    assert res["staged_not_running"] == NEW and "rerun" in res["next_step"]
    assert [s["step"] for s in res["steps"]] == ["enter_maintenance_mode", "install"]
    # the rerun finds the driver installed but not running: it reboots, verifies and exits maintenance mode
    host.fail, host.calls = None, []
    again = run()
    assert again["changed"] is True and again["plan"] == "reboot"
    assert [c[0] for c in changes(host)] == ["reboot", "exit"] and host.running == NEW and not host.in_mm


def test_an_unknown_host_is_a_read_failure(host):
    res = run(host="ghost")
    assert res["failed"] is True and "host ghost not found" in res["msg"] and changes(host) == []
