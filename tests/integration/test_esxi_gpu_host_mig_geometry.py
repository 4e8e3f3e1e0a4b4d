"""Role esxi_gpu_host with a MIG geometry (esxi_gpu_host_mig_geometry, as site.yml passes the design's), against
the vSphere simulator with two hosts of 8 A100 GPUs (Ampere: a new MIG mode runs only after a host reboot):
the MIG mode is read without a shell (no SSH key needed); without a key the hosts that differ are named and
left alone; with the key each host takes its turn (maintenance mode, its TSM-SSH service started for nvidia-smi
and stopped again, a reboot, the mode read back) and a rerun changes nothing; a cluster host in lockdown mode
that would refuse the SSH user stops the roll before any change; so does a geometry that turns MIG mode off
under a MIG-backed VM with no other GPU in MIG mode to run on again."""

import pytest
import vsphere_sim

from tests.lib import chain
from tests.lib.ansible_run import run_playbook

DRIVER = vsphere_sim.DEFAULT_DRIVER
A100 = {"model": "A100-80GB", "count": 8}
SHARED_DIRECT = {"default": "sharedDirect", "policy": "performance"}
FLEET = {
    "clusters": [
        {"name": "a100", "hosts": [{"prefix": "amp-", "count": 2, "gpu": A100, "driver_version": DRIVER,
                                    "graphics": SHARED_DIRECT}]},
        {"name": "locked", "hosts": [
            {"name": "lck-01", "gpu": A100, "driver_version": DRIVER, "graphics": SHARED_DIRECT},
            {"name": "lck-02", "gpu": A100, "driver_version": DRIVER, "graphics": SHARED_DIRECT,
             "lockdown": "strict", "lockdown_exceptions": ["svc-gpupool"]}]},
        # GPU 0 of str-01 in MIG mode under a MIG-backed node VM, the other GPU of each host out of it
        {"name": "stranding", "hosts": [{"prefix": "str-", "count": 2, "gpu": {"model": "A100-80GB", "count": 2},
                                         "driver_version": DRIVER, "graphics": SHARED_DIRECT, "mig": [0]}]},
    ],
    "vms": [{"name": "mig-node-0", "host": "str-01", "vgpu": ["grid_a100d-3-40c"]}],
}
HOSTS = ["amp-01", "amp-02"]
GEOMETRY = [[0, 1, 2, 3, 4, 5, 6, 7], [4, 5]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with chain.vsphere_with_ssh(FLEET, tmp_path_factory.mktemp("ssh")) as running:
        yield running


def play(sim, cluster="a100", key=True, **extra):
    role_vars = {"esxi_gpu_host_cluster": cluster, "esxi_gpu_host_driver_version": "550.90.05",
                 "esxi_gpu_host_mig_geometry": GEOMETRY, "esxi_gpu_host_reboot_timeout": 60,
                 "esxi_gpu_host_evacuate_timeout": 60}
    if key:
        role_vars.update(esxi_gpu_host_ssh_private_key_file=sim.key, esxi_gpu_host_ssh_host_key_checking=False,
                         esxi_gpu_host_ssh_addresses=sim.ssh_addresses())
    role_vars.update(extra)
    return [{"name": "esxi_gpu_host", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": role_vars}]}]


def mig(sim, host):
    """GPU indexes (PCI address order) whose current MIG mode is on."""
    return [i for i, g in enumerate(sorted(sim.mig(host), key=lambda g: g["pci_bus_id"])) if g["current"]]


def changed_tasks(res):
    return [name.split(" : ", 1)[-1] for name, r in res.tasks if r.get("changed")]


def failed(res):
    return [(name, r.get("msg")) for name, r in res.tasks if r.get("failed") and not r.get("ignore_errors")]


def messages(res, part):
    return [r.get("msg") for name, r in res.tasks if part in name and r.get("msg")]


def test_without_a_key_the_hosts_that_differ_are_named_and_left_alone(sim):
    boots = [sim.host_state(h)["reboot_count"] for h in HOSTS]
    for check in (True, False):
        res = run_playbook(play(sim, key=False), env=dict(sim.env), check=check)
        assert res.rc == 0, failed(res)
        said = messages(res, "MIG mode not changed (no SSH key)")
        assert said and "amp-01 (MIG mode disabled -> enabled on GPU 0, 1, 2, 3, 4, 5, 6, 7)" in said[0], said
        assert "amp-02 (MIG mode disabled -> enabled on GPU 4, 5)" in said[0] and "esxi_gpu_host_ssh_private_key_file" in said[0]
        assert changed_tasks(res) == [], changed_tasks(res)
    assert all(mig(sim, h) == [] for h in HOSTS)
    assert [sim.host_state(h)["reboot_count"] for h in HOSTS] == boots
    assert all(sim.ssh_service(h) == "stopped" for h in HOSTS)


def test_check_mode_plans_each_turn_without_a_shell_then_the_roll_sets_the_geometry(sim):
    boots = [sim.host_state(h)["reboot_count"] for h in HOSTS]
    check = run_playbook(play(sim), env=dict(sim.env), check=True)
    assert check.rc == 0, failed(check)
    plans = messages(check, "Steps of the turn, in order")
    assert len(plans) == 2, plans
    assert any(s.startswith("MIG mode disabled -> enabled on GPU 4, 5:") for s in plans[1]), plans[1]
    assert all(mig(sim, h) == [] and sim.ssh_service(h) == "stopped" for h in HOSTS)

    res = run_playbook(play(sim), env=dict(sim.env))
    assert res.rc == 0, failed(res)
    for host, wanted, boot in zip(HOSTS, GEOMETRY, boots):
        state = sim.host_state(host)
        assert mig(sim, host) == wanted, host
        assert state["reboot_count"] == boot + 1 and state["maintenance"] is False, state  # Ampere: one reboot
        assert state["ssh_service"] == "stopped", state  # started for nvidia-smi, stopped again
    # each host's shell was opened once, by the esxi_gpu_config step of its turn that set MIG mode
    used = [(h, r["hosts"][h]["ssh_service"]) for _name, r in res.tasks if isinstance(r.get("hosts"), dict)
            for h in HOSTS if r["hosts"].get(h, {}).get("ssh_service", "not used") != "not used" and r.get("changed")]
    assert used == [(h, "started and stopped") for h in HOSTS], used

    again = run_playbook(play(sim), env=dict(sim.env))
    assert again.rc == 0 and changed_tasks(again) == [], (failed(again), changed_tasks(again))
    assert [sim.host_state(h)["reboot_count"] for h in HOSTS] == [b + 1 for b in boots]


def test_a_host_in_lockdown_stops_the_roll_before_any_change(sim):
    hosts = ["lck-01", "lck-02"]
    boots = [sim.host_state(h)["reboot_count"] for h in hosts]
    res = run_playbook(play(sim, cluster="locked", esxi_gpu_host_mig_geometry={"lck-01": [0], "lck-02": [1]}),
                       env=dict(sim.env))
    assert res.rc != 0
    msg = " | ".join(m for _name, m in failed(res) if m)
    assert "lck-02" in msg and "lockdownStrict" in msg and "svc-gpupool" in msg and "not root" in msg, msg
    assert "exception users" in msg and "Nothing was changed" in msg, msg
    # lck-01 would have been fine, but nothing rolled: the check is before the first host's turn
    assert all(mig(sim, h) == [] and sim.ssh_service(h) == "stopped" for h in hosts)
    assert [sim.host_state(h)["reboot_count"] for h in hosts] == boots
    assert not any(sim.host_state(h)["maintenance"] for h in hosts)


def test_a_geometry_that_would_strand_a_mig_backed_vm_is_refused_before_any_change(sim):
    # the geometry by host position moved MIG mode off GPU 0 of str-01, which carries mig-node-0 (3g.40gb):
    # powered off for the turn, vSphere could not power it on again on a GPU out of MIG mode
    hosts = ["str-01", "str-02"]
    boots = [sim.host_state(h)["reboot_count"] for h in hosts]
    moved = {"str-01": [], "str-02": [0]}
    for check in (True, False):
        res = run_playbook(play(sim, cluster="stranding", esxi_gpu_host_mig_geometry=moved), env=dict(sim.env),
                           check=check)
        assert res.rc != 0, check
        (name, msg), = failed(res)
        assert name.endswith("A MIG mode change that would strand VMs stops the roll before any change"), name
        for text in ("host str-01: GPU 0 MIG mode enabled -> disabled", "mig-node-0 (grid_a100d-3-40c on GPU 0)",
                     "vSphere would refuse their power-on", "Move them", "power them off",
                     "keep the MIG mode of GPU 0 of host str-01", "esxi_gpu_host_mig_geometry", "Nothing was changed"):
            assert text in msg, (text, msg)
        assert "host str-02:" not in msg, msg  # its GPU 0 stays in MIG mode, it carries nothing
        assert not [n for n, _r in res.tasks if "Drain the guest nodes" in n or "Maintenance mode" in n]
    # nothing rolled: the VM still runs on its MIG GPU, no host was entered into maintenance mode or rebooted
    assert mig(sim, "str-01") == [0] and mig(sim, "str-02") == [0]
    assert [sim.host_state(h)["reboot_count"] for h in hosts] == boots
    assert not any(sim.host_state(h)["maintenance"] for h in hosts)
    assert [v["name"] for g in sim.gpus("str-01") for v in g["vms"]] == ["mig-node-0"]
    # MIG mode moved to GPU 1 of the host instead: the VM runs again there (a 3g.40gb fits an empty MIG GPU)
    other = run_playbook(play(sim, cluster="stranding", esxi_gpu_host_mig_geometry={"str-01": [1], "str-02": [0]},
                              esxi_gpu_host_power_off_vgpu_vms=True), env=dict(sim.env), check=True)
    assert other.rc == 0, failed(other)
    # the way out the message names: the geometry pinned by host name keeps GPU 0 of str-01 in MIG mode
    pinned = {"str-01": [0, 1], "str-02": [0]}
    check = run_playbook(play(sim, cluster="stranding", esxi_gpu_host_mig_geometry=pinned,
                              esxi_gpu_host_power_off_vgpu_vms=True), env=dict(sim.env), check=True)
    assert check.rc == 0, failed(check)
    plans = messages(check, "Steps of the turn, in order")
    assert len(plans) == 1 and any(s.startswith("MIG mode disabled -> enabled on GPU 1") for s in plans[0]), plans
