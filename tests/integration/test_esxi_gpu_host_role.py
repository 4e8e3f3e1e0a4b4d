"""Role esxi_gpu_host against the vSphere simulator: version gate, rolling convergence, check mode,
rerun unchanged, a failed install stopping the roll, a vGPU mode change of a GPU under a powered-on VM
taken through the host's maintenance window, a node VM left off by that window's exit stopping the turn at once."""
from tests.lib.ansible_run import run_playbook

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW

FLEET = {
    "clusters": [
        {"name": "roll", "hosts": [
            {"prefix": "esx-r", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD},
            {"name": "esx-r03", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": NEW,
             "nvidia_options": "NVreg_EnableMSI=1"},
        ]},
        {"name": "fail", "hosts": [
            {"prefix": "esx-f", "count": 3, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD},
        ]},
        {"name": "image", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-i", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD},
        ]},
        {"name": "small", "hosts": [
            {"prefix": "esx-s", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
        ]},
        # at the design but for the vGPU mode; a powered-on vGPU VM on one GPU of esx-b01
        {"name": "busy", "hosts": [
            {"prefix": "esx-b", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW,
             "graphics": {"default": "sharedDirect", "policy": "performance"}},
        ]},
        # the same, for a node VM that vSphere will not power on again after the window
        {"name": "stays-off", "hosts": [
            {"prefix": "esx-k", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW,
             "graphics": {"default": "sharedDirect", "policy": "performance"}},
        ]},
    ],
    "vms": [{"name": "plain", "host": "esx-r01"},
            {"name": "busy-node-0", "host": "esx-b01", "vgpu": ["nvidia_l40s-8c"]},
            {"name": "stays-off-node-0", "host": "esx-k01", "vgpu": ["nvidia_l40s-8c"]}],
}


def play(cluster, **extra):
    role_vars = {"esxi_gpu_host_cluster": cluster, "esxi_gpu_host_driver_bundle": BUNDLE,
                 "esxi_gpu_host_reboot_timeout": 120}
    role_vars.update(extra)
    return [{"name": "esxi_gpu_host", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": role_vars}]}]


def changed_tasks(res):
    return [name.split(" : ", 1)[-1] for name, r in res.tasks if r.get("changed")]


def failed(res):
    return [(name, r.get("msg")) for name, r in res.tasks if r.get("failed") and not r.get("ignore_errors")]


def test_version_gate_lists_hosts_per_version(vsphere_env):
    res = run_playbook(play("roll"), env=vsphere_env)
    assert res.rc != 0
    msg = " ".join(str(m) for _task, m in failed(res))
    assert "550.54.10 on esx-r01, esx-r02" in msg and "550.90.05 on esx-r03" in msg, msg


def test_roll_refused_when_too_few_gpus_left(vsphere, vsphere_env):
    res = run_playbook(play("small", esxi_gpu_host_min_gpus=4), env=vsphere_env)
    assert res.rc != 0
    assert "fewer than the 4" in " ".join(str(m) for _task, m in failed(res))
    forced = run_playbook(play("small", esxi_gpu_host_min_gpus=4, esxi_gpu_host_force=True,
                               esxi_gpu_host_graphics_type=""), env=vsphere_env)
    assert forced.rc == 0, failed(forced)


def test_check_mode_predicts_then_converges_host_by_host_then_unchanged(vsphere, vsphere_env):
    design = dict(esxi_gpu_host_driver_version="550.90.05", esxi_gpu_host_assignment_policy="consolidation",
                  esxi_gpu_host_scheduler={"policy": "equal_share", "time_slice_ms": 3})
    before = {h: vsphere.host_state(h) for h in ("esx-r01", "esx-r02", "esx-r03")}
    check = run_playbook(play("roll", **design), env=vsphere_env, check=True, diff=True)
    assert check.rc == 0, failed(check)
    assert {h: vsphere.host_state(h)["driver_installed"] for h in before} == \
        {h: s["driver_installed"] for h, s in before.items()}
    predicted = changed_tasks(check)

    real = run_playbook(play("roll", **design), env=vsphere_env, diff=True)
    assert real.rc == 0, failed(real)
    assert changed_tasks(real) == predicted
    assert "NVIDIA driver on esx-r01" in predicted and "NVIDIA driver on esx-r02" in predicted
    assert "NVIDIA driver on esx-r03" not in predicted

    after = {h: vsphere.host_state(h) for h in before}
    for name, state in after.items():
        assert state["driver_installed"] == NEW and state["driver_running"] == NEW
        assert state["maintenance"] is False and state["graphics"]["default"] == "sharedDirect"
        assert state["graphics"]["policy"] == "consolidation"
        assert "RmPVMRL=0x00030001" in state["nvidia_options"]
    # one reboot per host at most; esx-r03 (right driver) rebooted only for its new options
    assert [after[h]["reboot_count"] - before[h]["reboot_count"] for h in sorted(after)] == [1, 1, 1]
    assert "NVreg_EnableMSI=1" in after["esx-r03"]["nvidia_options"]
    # one host at a time, in name order
    assert after["esx-r01"]["boot_time"] < after["esx-r02"]["boot_time"] < after["esx-r03"]["boot_time"]

    again = run_playbook(play("roll", **design), env=vsphere_env)
    assert again.rc == 0, failed(again)
    assert changed_tasks(again) == []


def test_failed_install_stops_the_roll_in_maintenance_mode(vsphere, vsphere_env):
    vsphere.inject_fault("esx-f02", "install", "injected: depot unreachable")
    try:
        res = run_playbook(play("fail", esxi_gpu_host_driver_version="550.90.05", esxi_gpu_host_graphics_type=""),
                           env=vsphere_env)
    finally:
        vsphere.clear_faults()
    assert res.rc != 0
    msgs = " ".join(str(m) for _task, m in failed(res))
    assert "esx-f02" in msgs and "left in maintenance mode" in msgs and "depot unreachable" in msgs
    f1, f2, f3 = (vsphere.host_state(h) for h in ("esx-f01", "esx-f02", "esx-f03"))
    assert f1["driver_installed"] == NEW and f1["maintenance"] is False
    assert f2["maintenance"] is True and f2["driver_installed"] == OLD
    assert f3["driver_installed"] == OLD and f3["maintenance"] is False and f3["reboot_count"] == 0


DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW


def test_vlcm_lifecycle_sets_the_image_remediates_then_configures(vsphere, vsphere_env):
    design = dict(esxi_gpu_host_lifecycle="vlcm", esxi_gpu_host_driver_version="550.90.05",
                  esxi_gpu_host_driver_bundle="", esxi_gpu_host_vlcm_depot_url=DEPOT)
    hosts = ("esx-i01", "esx-i02")
    before = {h: vsphere.host_state(h) for h in hosts}
    check = run_playbook(play("image", **design), env=vsphere_env, check=True)
    assert check.rc == 0, failed(check)
    assert {h: vsphere.host_state(h) for h in hosts} == before
    predicted = changed_tasks(check)
    assert any(t.startswith("NVIDIA driver in the vLCM desired image") for t in predicted), predicted

    real = run_playbook(play("image", **design), env=vsphere_env)
    assert real.rc == 0, failed(real)
    assert changed_tasks(real) == predicted
    for name in hosts:
        state = vsphere.host_state(name)
        assert state["driver_installed"] == NEW and state["driver_running"] == NEW
        assert state["maintenance"] is False and state["graphics"]["default"] == "sharedDirect"
        assert state["reboot_count"] - before[name]["reboot_count"] == 1

    again = run_playbook(play("image", **design), env=vsphere_env)
    assert again.rc == 0, failed(again)
    assert changed_tasks(again) == []


def vgpu_modes(vsphere, host):
    return [g["vgpu_mode"] for g in sorted(vsphere.gpus(host), key=lambda g: g["index"])]


def result(res, task):
    return [r for name, r in res.tasks if name.split(" : ", 1)[-1] == task][0]


def test_a_vgpu_mode_change_under_a_powered_on_vm_goes_through_maintenance_mode(vsphere, vsphere_env):
    # the host refuses a vGPU mode change on a GPU that carries a powered-on VM: the turn of esx-b01 takes its
    # node VM down first (powered off, maintenance mode), changes, reads back, powers it on; esx-b02 has no VM
    # on its GPUs, which change in place
    design = dict(esxi_gpu_host_driver_version="550.90.05", esxi_gpu_host_vgpu_mode="mixed_size",
                  esxi_gpu_host_power_off_vgpu_vms=True)
    busy = [g["pci_id"] for g in vsphere.gpus("esx-b01") if g["vms"]]
    assert len(busy) == 1
    boots = {h: vsphere.host_state(h)["reboot_count"] for h in ("esx-b01", "esx-b02")}
    enter = "Maintenance mode before the vGPU mode of a GPU in use changes: esx-b01"
    leave = "Out of the maintenance mode of the vGPU mode change, node VMs powered on again: esx-b01"

    check = run_playbook(play("busy", **design), env=vsphere_env, check=True)
    assert check.rc == 0, failed(check)
    predicted = changed_tasks(check)
    assert vgpu_modes(vsphere, "esx-b01") == vgpu_modes(vsphere, "esx-b02") == ["sameSize"] * 2
    assert [g["vms"] for g in vsphere.gpus("esx-b01") if g["pci_id"] == busy[0]] == [[
        {"name": "busy-node-0", "profile": "nvidia_l40s-8c"}]]
    assert enter in predicted and leave in predicted, predicted
    assert "Graphics and scheduler before the driver (its reboot loads the options) on esx-b02" in predicted, predicted
    assert not [t for t in predicted if t.startswith("Maintenance mode") and t.endswith("esx-b02")], predicted
    assert result(check, enter)["powered_off_vms"] == ["busy-node-0"]
    said = result(check, "The vGPU mode predicted, GPUs in use emptied first: esx-b01")["msg"]
    assert said == ["GPU %s vGPU mode same_size -> mixed_size (carries VMs busy-node-0)" % busy[0]], said

    real = run_playbook(play("busy", **design), env=vsphere_env)
    assert real.rc == 0, failed(real)
    assert changed_tasks(real) == [t for t in predicted if not t.startswith("The vGPU mode predicted")]
    assert result(real, enter)["powered_off_vms"] == ["busy-node-0"]
    assert result(real, leave)["powered_on_vms"] == ["busy-node-0"]
    steps = result(real, "Steps of the turn, in order: esx-b01")["msg"]
    assert steps[0] == "power off node VMs busy-node-0", steps
    # read back before the next host
    assert not result(real, "Check esx-b01").get("skipped")
    for host in ("esx-b01", "esx-b02"):
        state = vsphere.host_state(host)
        assert vgpu_modes(vsphere, host) == ["mixedSize"] * 2, host
        assert state["maintenance"] is False and state["reboot_count"] == boots[host], state
    # the node VM is powered on again, on a GPU of its host
    assert [v["name"] for g in vsphere.gpus("esx-b01") for v in g["vms"]] == ["busy-node-0"]

    again = run_playbook(play("busy", **design), env=vsphere_env)
    assert again.rc == 0, failed(again)
    assert changed_tasks(again) == []


def test_a_node_vm_that_stays_off_after_the_window_stops_the_turn_at_once_and_a_rerun_resumes(vsphere, vsphere_env):
    # vSphere refuses the power-on of the node VM after the host left maintenance mode: the turn fails there,
    # naming the VM and the refusal and what it left, without verifying the host or waiting for its nodes
    design = dict(esxi_gpu_host_driver_version="550.90.05", esxi_gpu_host_vgpu_mode="mixed_size",
                  esxi_gpu_host_power_off_vgpu_vms=True)
    vsphere.inject_fault(None, "power_on", "injected: no GPU can place the vGPU", vm="stays-off-node-0")
    res = run_playbook(play("stays-off", **design), env=vsphere_env)
    vsphere.clear_faults()
    assert res.rc != 0
    stop = "VMs the turn powered off stay off, the turn stops here: esx-k01"
    assert [name.split(" : ", 1)[-1] for name, _msg in failed(res)] == [stop], failed(res)
    msg = result(res, stop)["msg"]
    for text in ("host esx-k01", "stays-off-node-0 (", "injected: no GPU can place the vGPU", "out of maintenance mode",
                 "cordoned by host-roll/esx-k01", "a rerun powers on"):
        assert text in msg, (text, msg)
    ran = [name.split(" : ", 1)[-1] for name, _r in res.tasks]
    assert "Check esx-k01" not in ran and not [t for t in ran if t.endswith("esx-k02")], ran
    state = vsphere.host_state("esx-k01")
    assert state["maintenance"] is False and vgpu_modes(vsphere, "esx-k01") == ["mixedSize"] * 2
    assert [v["name"] for g in vsphere.gpus("esx-k01") for v in g["vms"]] == []

    rerun = run_playbook(play("stays-off", **design), env=vsphere_env)
    assert rerun.rc == 0, failed(rerun)
    assert [v["name"] for g in vsphere.gpus("esx-k01") for v in g["vms"]] == ["stays-off-node-0"]
    for host in ("esx-k01", "esx-k02"):
        assert vgpu_modes(vsphere, host) == ["mixedSize"] * 2, host
        assert vsphere.host_state(host)["maintenance"] is False
    again = run_playbook(play("stays-off", **design), env=vsphere_env)
    assert again.rc == 0, failed(again)
    assert changed_tasks(again) == []
