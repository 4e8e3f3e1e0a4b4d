"""Role esxi_gpu_host on hosts that carry powered-on vGPU VMs (node VMs), against the vSphere simulator.

Every path that reboots a host (a driver change, a scheduler change alone) powers the VMs off
when esxi_gpu_host_power_off_vgpu_vms is set, records them on the host, and powers them on again;
without the option the roll stops before any change and says why. A power-on that fails is
finished by a plain rerun, whichever path rebooted the host.
"""
from tests.integration.test_fault_suite import NEW, OLD, vm_power
from tests.integration.test_fault_suite import role_play as play
from tests.lib.ansible_run import failures, run_module, run_playbook

FLEET = {
    "clusters": [
        # right driver everywhere: only the scheduler changes (the path that used to refuse)
        {"name": "sched", "hosts": [
            {"prefix": "sched-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW}]},
        # old driver: the driver path
        {"name": "drv", "hosts": [
            {"prefix": "drv-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]},
        # a power-on that fails after the scheduler reboot: the rerun powers the VM on
        {"name": "resume", "hosts": [
            {"prefix": "resume-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW}]},
    ],
    "vms": [
        {"name": "node-s1", "host": "sched-01", "vgpu": ["nvidia_l40s-24q"]},
        {"name": "node-s2", "host": "sched-02", "vgpu": ["nvidia_l40s-24q"]},
        {"name": "node-d1", "host": "drv-01", "vgpu": ["nvidia_l40s-24q"]},
        {"name": "node-r1", "host": "resume-01", "vgpu": ["nvidia_l40s-24q"]},
    ],
}


def changed(res):
    return [name.split(" : ", 1)[-1] for name, r in res.tasks if r.get("changed")]


def boots(sim, prefix):
    return [sim.host_state("%s%02d" % (prefix, n))["reboot_count"] for n in (1, 2)]


def assert_rolled(sim, prefix):
    for n in (1, 2):
        state = sim.host_state("%s%02d" % (prefix, n))
        assert state["maintenance"] is False, state
        assert state["driver_installed"] == NEW and state["driver_running"] == NEW, state
        assert "RmPVMRL=0x00020001" in state["nvidia_options"], state
        assert state["nvidia_options"] == state["nvidia_options_loaded"], state


def test_scheduler_change_without_power_off_stops_before_any_change(vsphere, vsphere_env):
    before = boots(vsphere, "sched-")
    res = run_playbook(play("sched"), env=vsphere_env)
    assert res.rc != 0
    msg = failures(res)
    assert "sched-01" in msg and "node-s1" in msg and "esxi_gpu_host_power_off_vgpu_vms" in msg, msg
    assert "Nothing was changed" in msg, msg
    assert boots(vsphere, "sched-") == before
    assert vm_power(vsphere)["node-s1"] == "poweredOn"
    assert "RmPVMRL" not in vsphere.host_state("sched-01")["nvidia_options"]


def test_scheduler_change_powers_vgpu_vms_off_and_on(vsphere, vsphere_env):
    design = dict(esxi_gpu_host_power_off_vgpu_vms=True)
    before = boots(vsphere, "sched-")
    check = run_playbook(play("sched", **design), env=vsphere_env, check=True)
    assert check.rc == 0, failures(check)
    assert boots(vsphere, "sched-") == before
    predicted = changed(check)
    real = run_playbook(play("sched", **design), env=vsphere_env)
    assert real.rc == 0, failures(real)
    assert changed(real) == predicted
    assert [b - a for a, b in zip(before, boots(vsphere, "sched-"))] == [1, 1]
    assert_rolled(vsphere, "sched-")
    power = vm_power(vsphere)
    assert power["node-s1"] == "poweredOn" and power["node-s2"] == "poweredOn"
    reports = [r for name, r in real.tasks if "Graphics and scheduler before the driver" in name and r.get("changed")]
    assert [r["hosts"][h]["powered_off_vms"] for r in reports for h in r["hosts"]] == [["node-s1"], ["node-s2"]]
    again = run_playbook(play("sched", **design), env=vsphere_env)
    assert again.rc == 0 and changed(again) == [], changed(again)


def test_driver_change_powers_vgpu_vms_off_and_on(vsphere, vsphere_env):
    res = run_playbook(play("drv", esxi_gpu_host_power_off_vgpu_vms=True), env=vsphere_env)
    assert res.rc == 0, failures(res)
    assert_rolled(vsphere, "drv-")
    assert boots(vsphere, "drv-") == [1, 1]    # the options ride on the driver's reboot
    assert vm_power(vsphere)["node-d1"] == "poweredOn"


def test_failed_power_on_after_a_scheduler_reboot_is_finished_by_a_rerun(vsphere, vsphere_env):
    design = dict(esxi_gpu_host_power_off_vgpu_vms=True)
    vsphere.inject_fault(None, "power_on", "no licence", vm="node-r1")
    try:
        res = run_playbook(play("resume", **design), env=vsphere_env)
    finally:
        vsphere.clear_faults()
    # the host is rolled; the VM left off is recorded on the host and named in a warning
    assert res.rc == 0, failures(res)
    assert vm_power(vsphere)["node-r1"] == "poweredOff"
    info, _run = run_module("gpupool.vcf.gpu_host_info", {"hosts": ["resume-01"], "gather": ["vms"]},
                            env=vsphere_env)
    assert info["hosts"][0]["vms_powered_off_by_collection"], info["hosts"][0]
    assert "node-r1" in res.stdout and "rerun powers it on" in res.stdout
    check = run_playbook(play("resume", **design), env=vsphere_env, check=True)
    assert check.rc == 0, failures(check)
    assert vm_power(vsphere)["node-r1"] == "poweredOff"
    rerun = run_playbook(play("resume", **design), env=vsphere_env)
    assert rerun.rc == 0, failures(rerun)
    assert changed(rerun) == changed(check) and changed(rerun), changed(rerun)
    assert vm_power(vsphere)["node-r1"] == "poweredOn"
    assert_rolled(vsphere, "resume-")
    final = run_playbook(play("resume", **design), env=vsphere_env)
    assert final.rc == 0 and changed(final) == [], changed(final)
