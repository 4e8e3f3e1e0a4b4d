"""esxi_gpu_config's host MIG mode on the simulator's SSH shell: an Ampere GPU (A100) keeps the new mode
pending until the host reboots, so the module reboots it in maintenance mode, reads the mode back before the
host leaves, and powers the vGPU VM on again; outside maintenance mode it refuses before any change."""
import subprocess

import pytest
import vsphere_sim

from tests.lib.ansible_run import run_module

HOST = "amp-01"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True)
    fleet = vsphere_sim.fleet_of(2, model="A100-80GB", gpus=2, vms_per_host=1, prefix="amp-", cluster="amp")
    with vsphere_sim.start(fleet, ssh_authorized_keys=keys / "id.pub") as running:
        running.key = str(keys / "id")
        yield running


def args(sim, **extra):
    out = dict(host=HOST, mig_mode="enabled", evacuate_timeout=60, reboot_timeout=60,
               ssh=dict(private_key_file=sim.key, host_key_checking=False, addresses=sim.ssh_addresses()))
    out.update(extra)
    return out


def test_outside_maintenance_mode_the_change_is_refused_before_any_change(sim):
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim), env=dict(sim.env))[0]
    assert res.get("failed"), res
    assert "MIG mode changes only in maintenance mode" in res["msg"] and "Nothing was changed" in res["msg"], res
    assert [g["pending"] for g in sim.mig(HOST)] == [False, False]


def test_check_mode_reads_the_mode_over_ssh_and_predicts_the_change(sim):
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True),
                     env=dict(sim.env), check=True)[0]
    assert res["changed"] and not res.get("failed"), res
    mig = res["hosts"][HOST]["mig"]
    assert mig["before"] == {"0": "disabled", "1": "disabled"} and mig["set"] == [0, 1], mig
    assert sim.host_state(HOST)["reboot_count"] == 0 and [g["pending"] for g in sim.mig(HOST)] == [False, False]


def test_ampere_reboots_in_maintenance_mode_and_the_vm_comes_back(sim):
    vms_before = sim.host_state(HOST)["reboot_count"]
    res = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True), env=dict(sim.env))[0]
    assert res["changed"] and not res.get("failed"), res
    report = res["hosts"][HOST]
    assert report["rebooted"] is True and report["powered_off_vms"], report
    state = sim.host_state(HOST)
    assert state["reboot_count"] == vms_before + 1 and state["maintenance"] is False, state
    assert [(g["current"], g["pending"]) for g in sim.mig(HOST)] == [(True, True), (True, True)]
    again = run_module("gpupool.vcf.esxi_gpu_config", args(sim, reboot=True, power_off_vgpu_vms=True), env=dict(sim.env))[0]
    assert not again["changed"] and not again.get("failed"), again
    assert sim.host_state(HOST)["reboot_count"] == vms_before + 1
