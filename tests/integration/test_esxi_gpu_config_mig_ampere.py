"""esxi_gpu_config's host MIG mode on the simulator's SSH shell: an Ampere GPU (A100) keeps the new mode
pending until the host reboots, so the module reboots it in maintenance mode, reads the mode back before the
host leaves, and powers the vGPU VM on again; outside maintenance mode it refuses before any change. The
current mode is read from vCenter (no shell); the host's SSH service starts stopped, so the module starts it
for nvidia-smi and stops it again before the reboot."""
import subprocess

import pytest
import vsphere_sim

from tests.lib.ansible_run import run_module

HOST = "amp-01"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True)
    # a time-sliced vGPU VM per host (on a GPU without MIG mode); MIG mode is set on the host's other GPU
    fleet = vsphere_sim.fleet_of(2, model="A100-80GB", gpus=2, vms_per_host=1, vgpu="grid_a100d-40c", prefix="amp-",
                                 cluster="amp")
    with vsphere_sim.start(fleet, ssh_authorized_keys=keys / "id.pub") as running:
        running.key = str(keys / "id")
        gpus = sorted(running.host_state(HOST)["gpus"], key=lambda g: g["pci_id"])
        running.free = [i for i, g in enumerate(gpus) if not g["vms"]]
        assert len(running.free) == 1, gpus
        yield running


def args(sim, **extra):
    out = dict(host=HOST, mig_mode="enabled", mig_gpu_indexes=sim.free, evacuate_timeout=60, reboot_timeout=60,
               ssh=dict(private_key_file=sim.key, host_key_checking=False, addresses=sim.ssh_addresses()))
    out.update(extra)
    return out


def ssh_service(sim):
    return sim.host_state(HOST)["ssh_service"]


def test_outside_maintenance_mode_the_change_is_refused_before_any_change(sim):
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim), env=dict(sim.env))[0]
    assert res.get("failed"), res
    assert "MIG mode changes only in maintenance mode" in res["msg"] and "Nothing was changed" in res["msg"], res
    assert [g["pending"] for g in sim.mig(HOST)] == [False, False] and ssh_service(sim) == "stopped"


def test_check_mode_reads_the_mode_from_vcenter_and_predicts_the_change(sim):
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True),
                     env=dict(sim.env), check=True)[0]
    assert res["changed"] and not res.get("failed"), res
    mig = res["hosts"][HOST]["mig"]
    free = str(sim.free[0])
    assert mig["before"] == {free: "disabled"} and mig["set"] == sim.free, mig
    assert mig["after"] == {free: "enabled"} and res["hosts"][HOST]["ssh_service"] == "started and stopped"
    assert sim.host_state(HOST)["reboot_count"] == 0 and [g["pending"] for g in sim.mig(HOST)] == [False, False]
    assert ssh_service(sim) == "stopped"  # check mode opened no shell


def test_ampere_reboots_in_maintenance_mode_and_the_vm_comes_back(sim):
    vms_before = sim.host_state(HOST)["reboot_count"]
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True), env=dict(sim.env))[0]
    assert res["changed"] and not res.get("failed"), res
    report = res["hosts"][HOST]
    assert report["rebooted"] is True and report["powered_off_vms"], report
    assert report["ssh_service"] == "started and stopped" and report["mig"]["set"] == sim.free, report
    state = sim.host_state(HOST)
    assert state["reboot_count"] == vms_before + 1 and state["maintenance"] is False, state
    modes = [(g["current"], g["pending"]) for g in sorted(sim.mig(HOST), key=lambda g: g["pci_bus_id"])]
    assert modes == [(True, True) if i in sim.free else (False, False) for i in range(2)], modes
    assert ssh_service(sim) == "stopped"
    again = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True), env=dict(sim.env))[0]
    assert not again["changed"] and not again.get("failed"), again
    assert sim.host_state(HOST)["reboot_count"] == vms_before + 1
