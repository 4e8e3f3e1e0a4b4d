"""esxi_maintenance_mode through main(): the arguments parsed by AnsibleModule, the host reader and writer
(EsxiHosts) replaced by a fake host that keeps its maintenance mode, its vGPU VMs and the collection's record of the
VMs it powered off. Check mode predicts the real run, a rerun is idempotent, bad input and VMs that cannot move are
refused before any call, a failed task names what was attempted."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereTaskError
from ansible_collections.gpupool.vcf.plugins.modules import esxi_maintenance_mode
from tests.lib.module_main import VSPHERE, run_main

CHANGES = ("enter", "exit", "off", "on")


class FakeMaintenanceHost:
    """EsxiHosts of esx-01: maintenance mode, powered-on vGPU VMs vCenter cannot migrate, the record of VMs off."""

    in_mm = False
    running = []     # powered-on vGPU VMs
    recorded = []    # VMs the collection powered off (still off)
    fail = None
    refuse_on = {}   # VM name -> why vSphere refuses to power it on
    calls = []

    def __init__(self, client):
        assert client == "soap session"

    def _call(self, *call):
        FakeMaintenanceHost.calls.append(call)
        if call[0] == "on" and call[1] in FakeMaintenanceHost.refuse_on:
            raise VsphereTaskError("power on VM %s failed: %s" % (call[1], FakeMaintenanceHost.refuse_on[call[1]]))
        if call[0] == FakeMaintenanceHost.fail:
            raise VsphereTaskError("%s maintenance mode did not finish within 1860s (last state: running, 40%% done)"
                                   % call[0])

    def read(self, names, driver=False, left_off=False):
        FakeMaintenanceHost.calls.append(("find",) + tuple(names) + (("left_off",) if left_off else ()))
        if names != ["esx-01"]:
            raise VsphereError("host %s not found (hosts: esx-01)" % ", ".join(names))
        item = dict(host="handle of esx-01", name="esx-01", in_maintenance=FakeMaintenanceHost.in_mm)
        if left_off:
            item["left_off"] = [dict(name=n, moid="vm-" + n) for n in FakeMaintenanceHost.recorded]
        return [item]

    def read_vgpu_vms(self, items):
        for item in items:
            item["vgpu_vms"] = [dict(name=n, moid="vm-" + n, power_state="poweredOn") for n in FakeMaintenanceHost.running]
        return items

    def powered_on_vgpu_vms(self, item):
        return [v for v in item["vgpu_vms"] if v["power_state"] == "poweredOn"]

    def vgpu_hotmigrate_enabled(self):
        return False

    def power_off_recorded(self, item, vms, off, step):
        for vm in vms:
            FakeMaintenanceHost.recorded = [v["name"] for v in off + [vm]]
            step("power_off %s" % vm["name"], "power off VM %s on" % vm["name"], self._call, "off", vm["name"])
            FakeMaintenanceHost.running = [n for n in FakeMaintenanceHost.running if n != vm["name"]]
            off.append(vm)

    def power_on_recorded(self, item, off, step):
        warnings = []
        for vm in list(off):
            try:
                step("power_on %s" % vm["name"], "power on VM %s on" % vm["name"], self._call, "on", vm["name"])
            except VsphereError as exc:  # as the real one: the VM stays recorded, a warning says why
                warnings.append("VM %s could not be powered on again: %s" % (vm["name"], exc))
                continue
            FakeMaintenanceHost.running.append(vm["name"])
            off.remove(vm)
        FakeMaintenanceHost.recorded = [v["name"] for v in off]
        return warnings

    def enter_maintenance(self, item, timeout):
        self._call("enter", timeout)
        FakeMaintenanceHost.in_mm = item["in_maintenance"] = True

    def exit_maintenance(self, item):
        self._call("exit")
        FakeMaintenanceHost.in_mm = item["in_maintenance"] = False


@pytest.fixture
def host(monkeypatch):
    cls = FakeMaintenanceHost
    cls.in_mm, cls.running, cls.recorded, cls.fail, cls.calls, cls.refuse_on = False, [], [], None, [], {}
    monkeypatch.setattr(esxi_maintenance_mode, "EsxiHosts", cls)
    return cls


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, host="esx-01")
    args.update(params)
    return run_main(esxi_maintenance_mode, args, check_mode=check_mode, diff=diff)


def changes(host):
    return [c for c in host.calls if c[0] in CHANGES]


def test_check_mode_predicts_entering_and_the_rerun_changes_nothing(host):
    check = run(check_mode=True, diff=True)
    assert changes(host) == [] and host.in_mm is False
    real = run(diff=True)
    assert real == check == dict(changed=True, maintenance_mode=True, powered_off_vms=[], powered_on_vms=[],
                                 diff=dict(before=dict(maintenance_mode=False), after=dict(maintenance_mode=True)))
    assert changes(host) == [("enter", 1800)] and host.in_mm is True
    host.calls = []
    again = run(diff=True)
    assert again["changed"] is False and changes(host) == []
    assert again["diff"] == dict(before=dict(maintenance_mode=True), after=dict(maintenance_mode=True))


def test_vms_that_cannot_move_are_refused_or_powered_off_then_on_again_at_exit(host):
    host.running = ["infer-01", "infer-02"]
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == ("Unable to put host esx-01 in maintenance mode: powered-on VMs hold vGPUs and cannot be "
                          "migrated (infer-01, infer-02); power them off or move them first, or set "
                          "power_off_vgpu_vms. Nothing was changed.")
    assert changes(host) == []
    check = run(check_mode=True, power_off_vgpu_vms=True)
    real = run(power_off_vgpu_vms=True)
    assert real == check and real["powered_off_vms"] == ["infer-01", "infer-02"]
    assert changes(host) == [("off", "infer-01"), ("off", "infer-02"), ("enter", 1800)]
    assert host.recorded == ["infer-01", "infer-02"] and host.running == []
    host.calls = []
    check = run(check_mode=True, state="absent", power_off_vgpu_vms=True)
    assert check["powered_on_vms"] == ["infer-01", "infer-02"] and changes(host) == []
    real = run(state="absent", power_off_vgpu_vms=True)
    assert real == check and changes(host) == [("exit",), ("on", "infer-01"), ("on", "infer-02")]
    assert host.recorded == [] and host.in_mm is False
    host.calls = []
    assert run(state="absent", power_off_vgpu_vms=True)["changed"] is False and changes(host) == []


def test_a_vm_that_stays_off_at_exit_is_named_with_the_error_of_its_power_on(host):
    host.in_mm, host.recorded = True, ["infer-01", "infer-02"]
    host.refuse_on = {"infer-02": "no GPU of the host can place MIG-backed vGPU nvidia_h100xm-1-10c"}
    res = run(state="absent", power_off_vgpu_vms=True)
    assert not res.get("failed") and res["changed"] is True and res["maintenance_mode"] is False
    assert res["vms_powered_off"] == ["infer-02"]
    assert res["power_on_errors"] == {
        "infer-02": "power on VM infer-02 failed: no GPU of the host can place MIG-backed vGPU nvidia_h100xm-1-10c"}
    assert changes(host) == [("exit",), ("on", "infer-01"), ("on", "infer-02")]
    assert host.recorded == ["infer-02"] and host.running == ["infer-01"] and host.in_mm is False
    assert res["powered_on_vms"] == ["infer-01"]  # what was powered on, not what was planned
    # the rerun powers it on once vSphere accepts it, and nothing is left to report
    host.refuse_on, host.calls = {}, []
    again = run(state="absent", power_off_vgpu_vms=True)
    assert again["powered_on_vms"] == ["infer-02"] and "vms_powered_off" not in again and "power_on_errors" not in again
    assert changes(host) == [("on", "infer-02")] and host.recorded == []


def test_bad_input_is_refused_before_any_call(host):
    res = run(state="half")
    assert res["failed"] is True and "value of state must be one of: present, absent, got: half" in res["msg"]
    res = run(host="")
    assert res["failed"] is True and "host" in res["msg"]
    res = run(evacuate_timeout="soon")
    assert res["failed"] is True and "evacuate_timeout" in res["msg"]
    assert host.calls == []


def test_a_failed_task_names_what_was_attempted(host):
    host.fail = "enter"
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"].startswith("Unable to enter maintenance mode on host esx-01: enter maintenance mode did not "
                                 "finish within 1860s")
    res = run(host="ghost")
    assert res["failed"] is True and "host ghost not found" in res["msg"]
    assert changes(host) == [("enter", 1800)]


def test_the_host_is_read_once_and_the_vms_left_off_only_to_power_them_on(host):
    run(check_mode=True)
    run(check_mode=True, state="absent")
    assert host.calls == [("find", "esx-01"), ("find", "esx-01")]
    host.calls = []
    run(check_mode=True, state="absent", power_off_vgpu_vms=True)
    assert host.calls == [("find", "esx-01", "left_off")]
