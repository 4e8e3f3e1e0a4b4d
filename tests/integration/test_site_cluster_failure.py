"""site.yml's ESXi link rolls the GPU clusters as play hosts of their own (one per cluster): when one
cluster's roll fails, the run says so once, naming that cluster; the other clusters stop without
a second error, and no later link runs (vSphere simulator; the links after the ESXi link are not
reached, so no Kubernetes rig is needed). A cluster stopped that way says what it left: the hosts this run
changed and those still to roll, read after the stop."""
import json
import pathlib
import re
import ssl

from pyVim import connect
from pyVmomi import vim

from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = ROOT / "playbooks" / "site.yml"
DESIGN = ROOT / "examples" / "design.yml"
OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"

# the example design's two GPU clusters, every host on the old driver: both clusters roll
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "hosts": [
            {"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": OLD}]},
        {"name": "gpu-l40s", "hosts": [
            {"prefix": "esx-l40s-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]},
    ],
}


def host_record(sim, name):
    """The collection's record on a host (custom attribute gpupool.vcf.host-state), read with pyvmomi."""
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    try:
        content = si.RetrieveContent()
        key = next(f.key for f in content.customFieldsManager.field if f.name == "gpupool.vcf.host-state")
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
        host = next(h for h in view.view if h.name == name)
        text = next((v.value for v in host.customValue if v.key == key), "")
        return json.loads(text) if text else {}
    finally:
        connect.Disconnect(si)


def failed(run):
    """(task, play host, message) of every failed task result of the run."""
    out = []
    for play in (run.data or {}).get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                if res.get("failed") and not res.get("ignore_errors"):
                    out.append((task["task"]["name"].split(" : ", 1)[-1], host, str(res.get("msg"))))
    return out


def test_one_cluster_failing_gives_one_message_naming_it(vsphere, vsphere_env):
    vsphere.inject_fault("esx-h100-01", "install", "injected: depot unreachable")
    try:
        run = run_playbook(SITE, env=vsphere_env, extra_vars={"gpupool_design_file": str(DESIGN),
                                                              "gpupool_lease_holder": "run-of-the-failure-test"})
    finally:
        vsphere.clear_faults()
    assert run.rc != 0
    stops = [f for f in failed(run) if f[0] == "Stop at the ESXi host link"]
    assert [(host, msg.split(":", 1)[0]) for _task, host, msg in stops] == \
        [("gpu-cluster-gpu-h100", "Link 'ESXi host' failed on cluster gpu-h100")], failed(run)
    msg = stops[0][2]
    assert "esx-h100-01" in msg and "depot unreachable" in msg and "left in maintenance mode" in msg, msg
    assert "Later links were not run" in msg
    # the only failures: the install that failed and the link's message; nothing undefined anywhere
    assert [(task, host) for task, host, _msg in failed(run)] == \
        [("NVIDIA driver on esx-h100-01", "gpu-cluster-gpu-h100"),
         ("Stop at the ESXi host link", "gpu-cluster-gpu-h100")], failed(run)
    assert "is undefined" not in run.stdout and "gpu-cluster-gpu-l40s" not in msg
    # the other cluster was stopped (it says so), not failed, and no later link ran
    stopped = [r for name, r in run.tasks if name == "Stopped because another cluster failed" and not r.get("skipped")]
    assert len(stopped) == 1, stopped
    said = stopped[0].get("msg")
    assert said.startswith("Cluster gpu-l40s: the ESXi link stopped here because cluster gpu-h100 failed; a rerun resumes. "), said
    # its own partial state, read after the stop: which hosts this run changed, which are still to roll
    state = dict(part.split(": ", 1) for part in re.sub(r" \[[^]]*\]", "", said.split("a rerun resumes. ", 1)[1]).rstrip(".").split("; "))
    assert set(state) == {"Hosts changed by this run", "hosts still to roll (untouched, or stopped in their turn)",
                          "already at the design before the run", "in maintenance mode now"}, state
    changed_hosts = [h for h in state["Hosts changed by this run"].split(", ") if h != "none"]
    left = [h for h in state["hosts still to roll (untouched, or stopped in their turn)"].split(", ") if h != "none"]
    assert sorted(changed_hosts + left) == ["esx-l40s-01", "esx-l40s-02"], state
    # the two clusters' turns interleave in no fixed order: what the message says is held to the hosts
    assert_state_matches_hosts(vsphere, changed_hosts, left)
    assert state["already at the design before the run"] == "none"
    names = [name for name, _res in run.tasks]
    assert not any(n.startswith("VM classes of the pools") for n in names), names
    assert vsphere.host_state("esx-h100-01")["maintenance"] is True
    # the record the run left on that host names the run that wrote it (the lease's holder)
    record = host_record(vsphere, "esx-h100-01")
    assert record.get("maintenance") and record.get("run") == "run-of-the-failure-test", record
    # the failure path released the run lease of both clusters: a check-mode read finds none
    lease, _run = run_module("gpupool.vcf.gpu_pool_lease", {"clusters": ["gpu-h100", "gpu-l40s"]}, env=vsphere_env, check=True)
    assert [(x["cluster"], x["before"]) for x in lease["leases"]] == [("gpu-h100", None), ("gpu-l40s", None)], lease


def assert_state_matches_hosts(sim, changed_hosts, left):
    """The stopped cluster's message against the hosts as the simulator has them: a host it names as changed by
    this run runs the new driver; a host still on the old driver, installed and running, is named as still to roll."""
    for name in changed_hosts:
        assert sim.host_state(name)["driver_running"] == NEW, (name, sim.host_state(name))
    for name in changed_hosts + left:
        host = sim.host_state(name)
        if host["driver_installed"] == OLD and host["driver_running"] == OLD:
            assert name in left, (name, changed_hosts, left)


def stopped_state(run):
    """{category: [hosts]} of the stopped cluster's own partial state, as its message says it."""
    said = [r.get("msg") for name, r in run.tasks if name == "Stopped because another cluster failed" and not r.get("skipped")]
    assert len(said) == 1, said
    # each host still to roll comes with what it lacks, in brackets
    parts = dict(p.split(": ", 1) for p in re.sub(r" \[[^]]*\]", "", said[0].split("a rerun resumes. ", 1)[1]).rstrip(".").split("; "))
    return dict((k, [h for h in v.split(", ") if h != "none"]) for k, v in parts.items())


def said_raw(run):
    return [r.get("msg") for name, r in run.tasks if name == "Stopped because another cluster failed" and not r.get("skipped")]


def test_stopped_cluster_names_the_hosts_it_changed(vsphere, vsphere_env):
    """The failure comes in gpu-l40s's first host's turn; gpu-h100 is stopped and names, of its two hosts, those
    it rolled before the stop as changed and the others as still to roll (the clusters' host turns interleave in
    no fixed order: the includes of the play hosts are run in the order their results came back)."""
    for name in ("esx-h100-01", "esx-h100-02", "esx-l40s-01", "esx-l40s-02"):
        vsphere.set_driver(name, OLD)
    vsphere.inject_fault("esx-l40s-01", "install", "injected: depot unreachable")
    try:
        run = run_playbook(SITE, env=vsphere_env, extra_vars={"gpupool_design_file": str(DESIGN)})
    finally:
        vsphere.clear_faults()
    assert run.rc != 0
    said = said_raw(run)
    assert len(said) == 1 and said[0].startswith("Cluster gpu-h100: the ESXi link stopped here because cluster gpu-l40s failed"), said
    state = stopped_state(run)
    changed_hosts = state["Hosts changed by this run"]
    left = state["hosts still to roll (untouched, or stopped in their turn)"]
    assert sorted(changed_hosts + left) == ["esx-h100-01", "esx-h100-02"], said
    assert_state_matches_hosts(vsphere, changed_hosts, left)
