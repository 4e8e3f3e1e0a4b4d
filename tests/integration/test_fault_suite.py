"""Fault suite (vSphere side): each fault injected at a defined moment of a real run of the
esxi_gpu_host role or a vSphere-link module, against the simulator.

For every fault the run either survives and converges, or fails naming the object and what
it left (hosts in maintenance mode, staged driver, ...); then a plain rerun converges, and a
check-mode run after it predicts no change. Afterwards no host is in maintenance mode, every
GPU host runs the designed driver with nothing staged, and no VM is left powered off.

The faults on one host or VM of their own cluster are injected together and rolled by one run of the
role, one play host per cluster (as site.yml rolls its GPU clusters); the faults that reach the whole
vCenter (sessions ended, an outage, SOAP faults) each get a run of their own, alone on the simulator.
Then one plain rerun takes every cluster, and one check-mode run after it: each case's test reads its
cluster's part of these runs.
"""
import json
import threading
import time

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient, vim
from tests.lib.ansible_run import run_module, run_playbook

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
SCHEDULER = {"policy": "equal_share", "time_slice_ms": 2}

# one cluster per fault, so each case starts from its own untouched hosts
FAULTS = ["install", "reboot", "reboot_hang", "exit_mm", "enter_mm", "install_hangs", "sessions_killed",
          "sessions_terminated", "outage", "read_503", "read_reset", "options", "power_on"]
FLEET = {
    "clusters": [{"name": "c-%s" % f.replace("_", "-"), "hosts": [
        {"prefix": "%s-" % f.replace("_", "-"), "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": OLD}]}
        for f in FAULTS],
    "vms": [{"name": "vgpu-power-on", "host": "power-on-01", "vgpu": ["nvidia_l40s-24q"]},
            {"name": "plain-sessions", "host": "sessions-killed-01"}],
}


# faults on one host or VM of the case's own cluster: injected together, rolled by one run
HOST_FAULTS = ["install", "reboot", "reboot_hang", "exit_mm", "enter_mm", "install_hangs", "options", "power_on"]
# faults that reach every client of the vCenter: one run each, nothing else running
VCENTER_FAULTS = [f for f in FAULTS if f not in HOST_FAULTS]


def role_vars(cluster, **extra):
    out = {"esxi_gpu_host_cluster": cluster, "esxi_gpu_host_driver_version": "550.90.05",
           "esxi_gpu_host_driver_bundle": BUNDLE, "esxi_gpu_host_scheduler": SCHEDULER,
           "esxi_gpu_host_reboot_timeout": 60, "esxi_gpu_host_install_timeout": 60}
    out.update(extra)
    return out


def cluster_of(case):
    return "c-%s" % case.replace("_", "-")


def clusters_play(extras):
    """The role on several clusters in one run: a play host per case ({case: its extra role variables}),
    each rolling its own cluster at its own pace (strategy free)."""
    hosts = [{"name": "play host of %s" % case,
              "ansible.builtin.add_host": dict({"name": case, "groups": "fault_cases", "ansible_connection": "local"},
                                               **role_vars(cluster_of(case), **extra)),
              "changed_when": False}
             for case, extra in extras.items()]
    return [{"name": "clusters", "hosts": "localhost", "gather_facts": False, "tasks": hosts},
            {"name": "roll", "hosts": "fault_cases", "gather_facts": False, "strategy": "free",
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"}}]}]


def run_clusters(env, extras, check=False):
    res = run_playbook(clusters_play(extras), env=dict(env, ANSIBLE_FORKS=str(len(extras))), check=check)
    # 0, or 2 where a play host failed: anything else is an error of the run itself
    assert res.data is not None and res.rc in (0, 2), (res.rc, res.stdout[-3000:], res.stderr[-3000:])
    return res


class HostRun:
    """One play host's part of a playbook run: its task results, whether it failed, what changed."""

    def __init__(self, res, host):
        assert res.data is not None, "ansible-playbook gave no JSON (rc %s): %s" % (res.rc, res.stderr[-3000:])
        self.res = res
        self.host = host
        self.tasks = [(task["task"]["name"], task["hosts"][host]) for play in res.data.get("plays", [])
                      for task in play.get("tasks", []) if host in task.get("hosts", {})]
        stats = res.data.get("stats", {})
        assert host in stats, "no play host %s in the run: %s" % (host, sorted(stats))
        self.stats = stats[host]
        self.alone = set(stats) == {host}

    @property
    def failed(self):
        """The run's exit status where the host ran alone; else whether a task of this host failed."""
        if self.alone:
            return self.res.rc != 0
        return bool(self.stats.get("failures") or self.stats.get("unreachable"))

    @property
    def failures(self):
        return " | ".join(str(r.get("msg")) for _name, r in self.tasks if r.get("failed"))

    @property
    def changed(self):
        return [name for name, r in self.tasks if r.get("changed")]

    @property
    def output(self):
        """Everything the run said of this host (task results as JSON)."""
        return json.dumps(self.tasks, default=str)


def role_play(cluster, **extra):
    return [{"name": "roll", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": role_vars(cluster, **extra)}]}]


def vm_power(sim):
    client = VsphereClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)
    try:
        return dict((vm["name"], str(vm["runtime.powerState"]))
                    for vm in client.retrieve({vim.VirtualMachine: ["name", "runtime.powerState"]}))
    finally:
        client.close()


def host_states(sim, case):
    prefix = "%s-" % case.replace("_", "-")
    return [sim.host_state("%s%02d" % (prefix, n)) for n in (1, 2)]


def assert_converged(states, power):
    for state in states:
        assert state["maintenance"] is False, state
        assert state["connection_state"] == "connected", state
        assert state["driver_installed"] == NEW and state["driver_running"] == NEW, state
        assert state["nvidia_options"] == state["nvidia_options_loaded"], state
        assert not state["reboot_required"], state
    off = [name for name, state in power.items() if state != "poweredOn"]
    assert off == [], "VMs left powered off: %s" % off


def in_background(func):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("res", func()))
    thread.start()
    return thread, out


def wait_until(cond, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s" % what)


def install_started(sim):
    return sim.stats()["soap"]["methods"].get("InstallHostPatchV2_Task", 0) > 0


def reboot_started(sim):
    return sim.stats()["soap"]["methods"].get("RebootHost_Task", 0) > 0


def terminate_client_sessions(sim):
    """What an administrator does in vCenter: SessionManager.TerminateSession of every other session
    (the simulator's own internal clients aside); returns how many were ended."""
    admin = VsphereClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)
    try:
        manager = admin.content.sessionManager
        own = manager.currentSession.key
        keys = [s.key for s in manager.sessionList if s.key != own and "govmomi" not in (s.userAgent or "")]
        if keys:
            manager.TerminateSession(sessionId=keys)
        return len(keys)
    finally:
        admin.close()


def run_with(sim, env, case, **extra):
    """Run the role on the case's cluster with the case's fault; returns the result."""
    first = "%s-01" % case.replace("_", "-")
    play = role_play(cluster_of(case), **extra)
    if case in ("sessions_killed", "outage"):
        # while the install task of the first host runs, every session dies / vCenter goes away
        sim.inject_fault(first, "install", hang=True)
        sim.reset_stats()
        thread, out = in_background(lambda: run_playbook(play, env=env))
        wait_until(lambda: install_started(sim), what="the install to start")
        if case == "sessions_killed":
            sim.kill_sessions()
            time.sleep(1)
        else:
            sim.outage(4)  # returns once connections are refused
            sim.wait_serving()
        sim.clear_faults()
        thread.join(600)
        return out["res"]
    if case == "sessions_terminated":
        # while the first host reboots (in maintenance mode), an administrator ends the run's sessions
        sim.reset_stats()
        thread, out = in_background(lambda: run_playbook(play, env=env))
        wait_until(lambda: reboot_started(sim), what="the first reboot")
        assert terminate_client_sessions(sim) >= 1
        thread.join(600)
        return out["res"]
    return run_playbook(play, env=env)


# case -> (injection, survives?, texts the failure must name)
CASES = {
    "install": (lambda sim: sim.inject_fault("install-01", "install", "depot unreachable"), False,
                ["install-01", "depot unreachable", "left in maintenance mode", "rerun"]),
    "reboot": (lambda sim: sim.inject_fault("reboot-01", "reboot", "host busy"), False,
               ["reboot-01", "host busy", "left in maintenance mode", "installed but not running"]),
    "reboot_hang": (lambda sim: sim.inject_fault("reboot-hang-01", "reboot_hang"), False,
                    ["reboot-hang-01", "did not come back", "left in maintenance mode", "installed but not running"]),
    "exit_mm": (lambda sim: sim.inject_fault("exit-mm-01", "exit_maintenance", "exit refused"), False,
                ["exit-mm-01", "exit refused", "left in maintenance mode"]),
    "enter_mm": (lambda sim: sim.inject_fault("enter-mm-01", "enter_maintenance", "evacuation failed"), False,
                 ["enter-mm-01", "evacuation failed"]),
    "install_hangs": (lambda sim: sim.inject_fault("install-hangs-01", "install", hang=True), False,
                      ["install-hangs-01", "did not finish within", "left in maintenance mode"]),
    "sessions_killed": (None, True, []),
    "sessions_terminated": (None, True, []),
    "outage": (None, True, []),
    "read_503": (lambda sim: sim.add_soap_fault("RetrievePropertiesEx", status=503, times=2), True, []),
    "read_reset": (lambda sim: sim.add_soap_fault("FetchSoftwarePackages", reset=True, times=2), True, []),
    "options": (lambda sim: sim.inject_fault("options-01", "update_module_options", "options locked"), False,
                ["options-01", "options locked", "rerun"]),
    "power_on": (lambda sim: sim.inject_fault(None, "power_on", "no licence", vm="vgpu-power-on"), True, []),
}
EXTRA = {"install_hangs": {"esxi_gpu_host_install_timeout": 3}, "reboot_hang": {"esxi_gpu_host_reboot_timeout": 5},
         "power_on": {"esxi_gpu_host_power_off_vgpu_vms": True}}


def settle(sim):
    sim.clear_faults()
    sim.clear_soap_faults()
    sim.wait_serving()


def rerun_extra(case):
    extra = dict(EXTRA.get(case, {}))
    extra.pop("esxi_gpu_host_install_timeout", None)
    extra.pop("esxi_gpu_host_reboot_timeout", None)
    return extra


@pytest.fixture(scope="module")
def fault_runs(vsphere):
    """Each case's fault run, then one plain rerun of every cluster, the hosts and VMs as it left them,
    and one check-mode run: {case: {"fault", "rerun", "check": HostRun, "states": [host state]}, "power": {VM: state}}."""
    env = dict(vsphere.env)
    out = {}
    for case in HOST_FAULTS:
        CASES[case][0](vsphere)
    res = run_clusters(env, dict((case, EXTRA.get(case, {})) for case in HOST_FAULTS))
    settle(vsphere)
    for case in HOST_FAULTS:
        out[case] = {"fault": HostRun(res, case)}
    for case in VCENTER_FAULTS:
        inject = CASES[case][0]
        if inject is not None:
            inject(vsphere)
        res = run_with(vsphere, env, case, **EXTRA.get(case, {}))
        settle(vsphere)
        out[case] = {"fault": HostRun(res, "localhost")}
    extras = dict((case, rerun_extra(case)) for case in FAULTS)
    rerun = run_clusters(env, extras)
    for case in FAULTS:
        out[case].update(rerun=HostRun(rerun, case), states=host_states(vsphere, case))
    out["power"] = vm_power(vsphere)
    check = run_clusters(env, extras, check=True)
    for case in FAULTS:
        out[case]["check"] = HostRun(check, case)
    return out


@pytest.mark.parametrize("case", FAULTS)
def test_fault_then_plain_rerun_converges(fault_runs, case):
    _inject, survives, names = CASES[case]
    res = fault_runs[case]["fault"]
    if survives:
        assert not res.failed, res.failures
    else:
        assert res.failed, "the fault did not fail the run"
        msg = res.failures
        for text in names:
            assert text in msg, (text, msg)
        assert "Traceback" not in res.output and "MODULE FAILURE" not in msg, msg
    rerun = fault_runs[case]["rerun"]
    assert not rerun.failed, rerun.failures
    if case == "power_on":
        # the VM the failed power-on left off is powered on by the rerun
        assert fault_runs["power"]["vgpu-power-on"] == "poweredOn"
    assert_converged(fault_runs[case]["states"], fault_runs["power"])
    check = fault_runs[case]["check"]
    assert not check.failed and check.changed == [], (check.changed, check.failures)


def test_a_change_cut_off_mid_request_is_not_repeated_and_a_rerun_finishes(vsphere, vsphere_env):
    """A connection reset on a change (module options) cannot be told from success: the module fails
    saying so, without repeating it blindly; the rerun reads the host and finishes."""
    host = "options-02"
    vsphere.add_soap_fault("UpdateModuleOptionString", reset=True, times=1)
    res, _run = run_module("gpupool.vcf.esxi_gpu_config", {"host": host, "scheduler": {"policy": "equal_share"}},
                           env=vsphere_env)
    vsphere.clear_soap_faults()
    assert res.get("failed") and "may or may not have been carried out" in res["msg"] and host in res["msg"], res
    again, _run = run_module("gpupool.vcf.esxi_gpu_config", {"host": host, "scheduler": {"policy": "equal_share"}},
                             env=vsphere_env)
    assert not again.get("failed"), again.get("msg")
    assert "RmPVMRL" in vsphere.host_state(host)["nvidia_options"]
    third, _run = run_module("gpupool.vcf.esxi_gpu_config", {"host": host, "scheduler": {"policy": "equal_share"}},
                             env=vsphere_env)
    assert third["changed"] is False and third["reboot_required"] is True, third
