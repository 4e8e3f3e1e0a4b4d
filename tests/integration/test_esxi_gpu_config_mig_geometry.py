"""esxi_gpu_config's MIG geometry (which GPUs of each host run MIG) on the vSphere simulator, with 8-GPU H200
hosts: the current mode is read from vCenter (config.graphicsInfo[].vgpuMode) without a shell; only a host
whose GPUs need a change gets nvidia-smi over SSH, its TSM-SSH service started for the step and stopped again
(also when nvidia-smi fails), a running service left running; a host in lockdown mode whose exception users
lack the SSH user is refused before any change; bad geometries fail naming what is wrong."""
import ssl
import subprocess

import pytest
import vsphere_sim
from pyVim import connect
from pyVmomi import vim

from tests.lib import chain
from tests.lib.ansible_run import run_module

MODULE = "gpupool.vcf.esxi_gpu_config"
H200 = {"model": "H200-141GB", "count": 8}
DRIVER = vsphere_sim.DEFAULT_DRIVER
FLEET = {
    "clusters": [
        {"name": "h200", "hosts": [{"prefix": "h200-", "count": 2, "gpu": H200, "driver_version": DRIVER}]},
        {"name": "locked", "hosts": [{"name": "lock-01", "gpu": H200, "driver_version": DRIVER,
                                      "lockdown": "normal", "lockdown_exceptions": ["svc-gpupool"]}]},
        {"name": "open", "hosts": [{"name": "open-01", "gpu": H200, "driver_version": DRIVER, "ssh": "running"}]},
    ],
    "vms": [],
}
HOSTS = ["h200-01", "h200-02"]
GEOMETRY = [[0, 1, 2, 3], [6, 7]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with chain.vsphere_with_ssh(FLEET, tmp_path_factory.mktemp("ssh")) as running:
        yield running


class Api:
    """The simulator through the vSphere API, as an administrator would act behind the collection's back."""

    def __init__(self, sim):
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                                       sslContext=ssl.create_default_context(cafile=sim.ca_file))
        content = self.si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        self.hosts = dict((h.name, h) for h in view.view)
        view.DestroyView()

    def ssh_running(self, host):
        return [s.running for s in self.hosts[host].config.service.service if s.key == "TSM-SSH"][0]

    def ssh(self, host, on):
        system = self.hosts[host].configManager.serviceSystem
        (system.StartService if on else system.StopService)(id="TSM-SSH")

    def vgpu_modes(self, host):
        return [g.vgpuMode for g in sorted(self.hosts[host].config.graphicsInfo, key=lambda g: g.pciId)]

    def close(self):
        connect.Disconnect(self.si)


@pytest.fixture(scope="module")
def api(sim):
    a = Api(sim)
    yield a
    a.close()


def args(sim, **extra):
    out = dict(cluster="h200", mig_geometry=GEOMETRY,
               ssh=dict(private_key_file=sim.key, host_key_checking=False, addresses=sim.ssh_addresses()))
    if extra.get("host"):
        del out["cluster"]
    out.update(extra)
    return out


def by_pci(sim, host):
    """The simulator's MIG state of the host's GPUs in PCI address order (the geometry's numbering)."""
    return sorted(sim.mig(host), key=lambda g: g["pci_bus_id"])


def current(sim, host):
    """The GPU indexes (PCI address order) of the host whose current MIG mode is on (the simulator's own state)."""
    return [i for i, g in enumerate(by_pci(sim, host)) if g["current"]]


def converge(sim, host, geometry, **extra):
    """One host to the geometry: maintenance mode (idle Hopper GPUs change at once), no reboot."""
    return run_module(MODULE, args(sim, mig_geometry=geometry, host=host, reboot=True, evacuate_timeout=60,
                                   reboot_timeout=60, **extra), env=dict(sim.env))[0]


def behind_the_back(sim, api, host, index, on):
    """nvidia-smi run by hand on the host (the SSH service started and stopped around it)."""
    api.ssh(host, True)
    try:
        address, port = sim.ssh_addresses()[host].rsplit(":", 1)
        subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                        "-o", "LogLevel=ERROR", "-i", sim.key, "-p", port, "root@%s" % address,
                        "nvidia-smi -i %d -mig %d" % (by_pci(sim, host)[index]["index"], int(on))],
                       check=True, capture_output=True, timeout=30)
    finally:
        api.ssh(host, False)


def test_check_mode_reads_the_geometry_without_a_shell_and_predicts_it(sim, api):
    res = run_module(MODULE, args(sim), env=dict(sim.env), check=True)[0]
    assert res["changed"] and not res.get("failed"), res
    first, second = res["hosts"]["h200-01"], res["hosts"]["h200-02"]
    assert first["mig"]["enabled"] == [0, 1, 2, 3] and first["mig"]["disabled"] == [] and first["mig"]["changed"], first
    assert second["mig"]["enabled"] == [6, 7], second
    assert first["mig"]["before"] == dict((str(i), "disabled") for i in range(8))
    assert first["mig"]["after"] == dict((str(i), "enabled" if i < 4 else "disabled") for i in range(8))
    assert first["ssh_service"] == "started and stopped", first  # predicted: the service is stopped now
    # nothing changed and no shell opened: the services are still stopped
    assert all(current(sim, h) == [] for h in HOSTS) and not any(api.ssh_running(h) for h in HOSTS)


def test_outside_maintenance_mode_a_cluster_run_is_refused_before_any_change(sim, api):
    res = run_module(MODULE, args(sim), env=dict(sim.env))[0]
    assert res.get("failed") and "MIG mode changes only in maintenance mode" in res["msg"], res
    assert "Nothing was changed" in res["msg"]
    assert all(current(sim, h) == [] for h in HOSTS) and not any(api.ssh_running(h) for h in HOSTS)


def test_bad_geometries_fail_naming_the_cause_and_change_nothing(sim, api):
    for geometry, words in (([[0, 8]], ["h200-01", "no GPU with index 8", "0, 1, 2, 3, 4, 5, 6, 7"]),
                            ({"h200-01": [0], "esx-elsewhere": [1]}, ["esx-elsewhere", "h200-01, h200-02"]),
                            ([[0], "all"], ["h200-02", "'all'"]),
                            ("0,1", ["mig_geometry", "list per host position"])):
        for check in (True, False):
            res = run_module(MODULE, args(sim, mig_geometry=geometry), env=dict(sim.env), check=check)[0]
            assert res.get("failed"), (geometry, res)
            assert all(w in res["msg"] for w in words), (geometry, res["msg"])
    both = run_module(MODULE, args(sim, mig_mode="enabled"), env=dict(sim.env), check=True)[0]
    assert both.get("failed") and "mutually exclusive" in both["msg"], both
    assert all(current(sim, h) == [] for h in HOSTS) and not any(api.ssh_running(h) for h in HOSTS)


def test_geometry_converges_host_by_host_and_the_ssh_service_is_stopped_after(sim, api):
    sim.reset_stats()
    for host, wanted in zip(HOSTS, GEOMETRY):
        res = converge(sim, host, GEOMETRY)
        assert res["changed"] and not res.get("failed"), res
        report = res["hosts"][host]
        assert report["ssh_service"] == "started and stopped", report
        assert report["mig"]["set"] == wanted and report["rebooted"] is False, report  # Hopper, idle: at once
        assert current(sim, host) == wanted and not api.ssh_running(host)
        assert sim.host_state(host)["maintenance"] is False
    # vCenter reads it now: MIG-mode GPUs are multiInstanceGpu
    assert [m == "multiInstanceGpu" for m in api.vgpu_modes("h200-02")] == [False] * 6 + [True] * 2
    again = run_module(MODULE, args(sim), env=dict(sim.env))[0]
    assert not again["changed"] and not again.get("failed"), again
    assert all(h["ssh_service"] == "not used" and not h["mig"]["changed"] for h in again["hosts"].values()), again
    check = run_module(MODULE, args(sim), env=dict(sim.env), check=True)[0]
    assert not check["changed"] and check["hosts"] == again["hosts"], check


def test_a_gpu_flipped_behind_the_back_is_predicted_exactly_and_repaired(sim, api):
    behind_the_back(sim, api, "h200-02", 0, True)   # on, the geometry says off
    behind_the_back(sim, api, "h200-02", 7, False)  # off, the geometry says on
    assert current(sim, "h200-02") == [0, 6]
    check = run_module(MODULE, args(sim), env=dict(sim.env), check=True)[0]
    assert check["changed"] and not check["hosts"]["h200-01"]["mig"]["changed"], check
    mig = check["hosts"]["h200-02"]["mig"]
    assert (mig["enabled"], mig["disabled"], mig["set"]) == ([7], [0], [0, 7]), mig
    assert "disabled -> enabled on GPU 7 and enabled -> disabled on GPU 0" in mig["reason"], mig
    res = converge(sim, "h200-02", GEOMETRY)
    assert res["changed"] and res["hosts"]["h200-02"]["mig"]["set"] == [0, 7], res
    assert current(sim, "h200-02") == [6, 7] and not api.ssh_running("h200-02")


def test_nvidia_smi_failing_leaves_the_ssh_service_stopped_and_a_rerun_resumes(sim, api):
    sim.inject_fault("h200-01", "nvidia_smi", "Unable to enable MIG Mode for GPU 00000000:3B:00.0: Unknown Error")
    res = converge(sim, "h200-01", [[4, 5]])
    assert res.get("failed"), res
    msg = res["msg"]
    assert "h200-01" in msg and "set MIG mode with nvidia-smi" in msg and "Unknown Error" in msg, msg
    assert "SSH service TSM-SSH: started and stopped" in msg and "a plain rerun resumes" in msg, msg
    assert res["ssh_service"] == "started and stopped", res
    assert not api.ssh_running("h200-01")  # stopped again although the step failed
    again = converge(sim, "h200-01", [[4, 5]])
    assert again["changed"] and not again.get("failed"), again
    assert current(sim, "h200-01") == [4, 5] and not api.ssh_running("h200-01")


def test_a_running_ssh_service_is_left_running(sim, api):
    assert api.ssh_running("open-01")
    res = converge(sim, "open-01", {"open-01": [2]})
    assert res["changed"] and res["hosts"]["open-01"]["ssh_service"] == "already running", res
    assert current(sim, "open-01") == [2] and api.ssh_running("open-01")


def test_lockdown_without_the_ssh_user_among_the_exceptions_is_refused_before_any_change(sim, api):
    for check in (True, False):
        res = run_module(MODULE, args(sim, mig_geometry=[[0]], host="lock-01", reboot=True, evacuate_timeout=60),
                         env=dict(sim.env), check=check)[0]
        assert res.get("failed"), res
        msg = res["msg"]
        assert "lock-01" in msg and "lockdownNormal" in msg and "svc-gpupool" in msg and "not root" in msg, msg
        assert "exception users" in msg and "ssh.user" in msg and "Nothing was changed" in msg, msg
    assert current(sim, "lock-01") == [] and not api.ssh_running("lock-01")
    assert sim.host_state("lock-01")["maintenance"] is False
    # a host already at the geometry needs no shell: lockdown does not matter
    fine = run_module(MODULE, args(sim, mig_geometry=[[]], cluster="locked"), env=dict(sim.env))[0]
    assert not fine["changed"] and not fine.get("failed"), fine
