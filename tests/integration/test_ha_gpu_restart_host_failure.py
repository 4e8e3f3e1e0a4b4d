"""vSphere HA as the spare, in the simulator: the ha_gpu_restart role applied to a fleet of this test's own,
one host killed (POST /_sim/hosts/<name>/fail), every inference node VM running again on the other hosts
before the lower priorities, what found no card named by the simulator and by gpu_capacity read after the
failure (and predicted by its spare rule before it); then admission control refusing a power-on that would
eat the failover capacity. The expected figures are worked out by hand in the comments."""
import json
import pathlib
import ssl
import time

import pytest
import yaml
from pyVim import connect
from pyVim.task import WaitForTask
from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIVER = "550.90.05-1OEM.800.1.0.20613240"
H100 = {"model": "H100-80GB", "count": 4}
MIG = "nvidia_h100-3-40c"  # the example design's inference pool (restart priority highest)
FULL = "nvidia_h100-80c"  # its training pool (medium)


def _host(name):
    # GPUs 0 and 1 in MIG mode (two 3g.40gb each), GPUs 2 and 3 whole cards
    return {"name": name, "gpu": H100, "driver_version": DRIVER, "mig": [0, 1]}


FLEET = {
    "clusters": [{"name": "gpu-h100", "supervisor": True,
                  "hosts": [_host("esx-ha-01"), _host("esx-ha-02"), _host("esx-ha-03")]}],
    "vms": [
        # esx-ha-01, the host that fails: three inference node VMs on its MIG cards, a training node VM on
        # its two whole cards, a tools VM without vGPU (the cluster's default priority, medium) and a
        # scratch VM an administrator set to restart priority disabled
        {"name": "inference-0", "host": "esx-ha-01", "vgpu": [MIG]},
        {"name": "inference-1", "host": "esx-ha-01", "vgpu": [MIG]},
        {"name": "inference-2", "host": "esx-ha-01", "vgpu": [MIG]},
        {"name": "training-0", "host": "esx-ha-01", "vgpu": [FULL, FULL]},
        {"name": "tools-01", "host": "esx-ha-01"},
        {"name": "scratch-01", "host": "esx-ha-01"},
        # esx-ha-02: one inference VM (3 MIG slots free), both whole cards taken by training-1
        {"name": "inference-3", "host": "esx-ha-02", "vgpu": [MIG]},
        {"name": "training-1", "host": "esx-ha-02", "vgpu": [FULL, FULL]},
        # esx-ha-03: one inference VM (3 MIG slots free), one whole card taken, one free
        {"name": "inference-4", "host": "esx-ha-03", "vgpu": [MIG]},
        {"name": "training-2", "host": "esx-ha-03", "vgpu": [FULL]},
    ],
}


@pytest.fixture(scope="module")
def design_file(tmp_path_factory):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    [c for c in design["clusters"] if c["name"] == "gpu-h100"][0]["ha"] = {"manage": True}
    path = tmp_path_factory.mktemp("design") / "design.yml"
    path.write_text(yaml.safe_dump(design))
    return path


def connect_to(sim):
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                              sslContext=ssl.create_default_context(cafile=sim.ca_file))
    return si, si.RetrieveContent()


def cluster(content, name):
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
    try:
        return [c for c in view.view if c.name == name][0]
    finally:
        view.DestroyView()


def vms_of(cl):
    return dict((vm.name, vm) for h in cl.host for vm in h.vm)


def capacity(env, design_file):
    res = run_module("gpupool.vcf.gpu_capacity", {"design_file": str(design_file)}, env=env)[0]
    assert not res.get("failed"), res.get("msg")
    return res


def test_a_host_fails_and_ha_restarts_inference_first_where_a_card_has_room(vsphere, vsphere_env, design_file):
    si, content = connect_to(vsphere)
    try:
        cl = cluster(content, "gpu-h100")
        vms = vms_of(cl)
        # the role, as the design derives it (ha.manage on gpu-h100): inference highest, training medium
        roles = derive(yaml.safe_load(design_file.read_text()))["roles"]["ha_gpu_restart"]
        play = [{"hosts": "localhost", "gather_facts": False,
                 "roles": [{"role": "gpupool.vcf.ha_gpu_restart"}]}]
        run = run_playbook(play, env=vsphere_env, extra_vars={
            "ha_gpu_restart_clusters": [c for c in roles["ha_gpu_restart_clusters"] if c["name"] == "gpu-h100"]})
        assert run.rc == 0, (run.stdout[-3000:], run.stderr[-2000:])
        # an administrator's own override: no restart for the scratch VM (the role leaves VMs without vGPU alone)
        info = vim.cluster.DasVmConfigInfo(key=vms["scratch-01"], dasSettings=vim.cluster.DasVmSettings(restartPriority="disabled"))
        WaitForTask(cl.ReconfigureComputeResource_Task(
            spec=vim.cluster.ConfigSpecEx(dasVmConfigSpec=[vim.cluster.DasVmConfigSpec(operation="add", info=info)]),
            modify=True))
        overrides = dict((e.key.name, e.dasSettings.restartPriority) for e in cl.configurationEx.dasVmConfig)
        assert overrides == {"inference-0": "highest", "inference-1": "highest", "inference-2": "highest",
                             "inference-3": "highest", "inference-4": "highest", "training-0": "medium",
                             "training-1": "medium", "training-2": "medium", "scratch-01": "disabled"}
        assert cl.configurationEx.dasConfig.enabled is True

        # gpu_capacity's spare rule before the failure: esx-ha-01 is the host whose loss moves most VMs
        # (4 vGPU VMs against 2 on either other host, each loss leaving one training VM short); its
        # inference VMs find 6 free 3g.40gb slots (3 per other host), training-0's two whole cards only one
        before = capacity(vsphere_env, design_file)["spare"]["gpu-h100"]
        assert before["host_down"] == "esx-ha-01"
        assert [vm for g in before["short"] for vm in g["vms"]] == ["training-0"]

        vsphere.reset_stats()
        t0 = time.monotonic()
        rec = vsphere.fail_host("esx-ha-01")
        wall = time.monotonic() - t0
        assert rec["ha_enabled"] is True and rec["cluster"] == "gpu-h100"
        assert sorted(rec["powered_off"]) == ["inference-0", "inference-1", "inference-2", "scratch-01",
                                              "tools-01", "training-0"]
        # by hand: highest first, by name; each on the fitting host with the fewest powered-on VMs (name on
        # ties): inference-0 -> 02 (2 VMs each, 02 by name), inference-1 -> 03 (02 has 3 now), inference-2 ->
        # 02 (3 each); medium next: training-0 finds no two whole cards (02 none, 03 one), tools-01 -> 03
        # (02 has 4, 03 has 3); scratch-01 is disabled
        assert [(r["vm"], r["priority"], r["host"]) for r in rec["restarted"]] == [
            ("inference-0", "highest", "esx-ha-02"), ("inference-1", "highest", "esx-ha-03"),
            ("inference-2", "highest", "esx-ha-02"), ("tools-01", "medium", "esx-ha-03")]
        assert [(r["vm"], r["priority"]) for r in rec["stayed_off"]] == [("training-0", "medium"), ("scratch-01", "disabled")]
        assert "no GPU of host esx-ha-03 can hold vGPU nvidia_h100-80c" in rec["stayed_off"][0]["reason"]
        assert "disabled" in rec["stayed_off"][1]["reason"]
        highest = [r["at"] for r in rec["restarted"] if r["priority"] == "highest"]
        lower = [r["at"] for r in rec["restarted"] if r["priority"] != "highest"]
        assert max(highest) < min(lower)  # ISO times of one clock: every protected VM before the lower ones
        assert vsphere.ha_failures() == [rec]

        # vCenter's view: the host not responding, the restarted VMs on their new hosts, the rest off
        cl = cluster(content, "gpu-h100")
        state = dict((vm.name, (vm.runtime.powerState, vm.runtime.host.name)) for h in cl.host for vm in h.vm)
        assert [h.runtime.connectionState for h in cl.host if h.name == "esx-ha-01"] == ["notResponding"]
        for r in rec["restarted"]:
            assert state[r["vm"]] == ("poweredOn", r["host"]), (r, state[r["vm"]])
        assert state["training-0"] == ("poweredOff", "esx-ha-01") and state["scratch-01"][0] == "poweredOff"
        placed = dict((v["name"], g["index"]) for g in vsphere.gpus("esx-ha-02") for v in g["vms"])
        assert placed["inference-0"] in (0, 1) and placed["inference-2"] in (0, 1)  # on the MIG cards

        # gpu_capacity read after the failure names what HA did not restart
        after = capacity(vsphere_env, design_file)["clusters"]["gpu-h100"]
        assert after["unavailable_hosts"] == ["esx-ha-01"]
        assert after["off_on_unavailable_hosts"] == [dict(host="esx-ha-01", vm="training-0", vgpu_profiles=[FULL, FULL])]
        # the five inference VMs run (2 + 3 restarted), the whole cards of training-1 and -2 (3), training-0's off
        assert (after["profiles"][MIG]["used"], after["profiles"][FULL]["used"], after["profiles"][FULL]["powered_off"]) == (5, 3, 2)

        print("\nHA host failure (esx-ha-01, %d powered-on VMs, fail call %.3f s wall):" % (len(rec["powered_off"]), wall))
        for prio in ("highest", "medium"):
            done = [r for r in rec["restarted"] if r["priority"] == prio]
            print("  %-8s restarted %d: %s" % (prio, len(done), ", ".join(
                "%s on %s after %.4f s" % (r["vm"], r["host"], r["seconds_after_failure"]) for r in done)))
        print("  stayed off: %s" % ", ".join("%s (%s)" % (r["vm"], r["priority"]) for r in rec["stayed_off"]))
        print("  gpu_capacity after: %s" % json.dumps(after["off_on_unavailable_hosts"]))
    finally:
        connect.Disconnect(si)


def test_admission_control_refuses_a_power_on_that_would_eat_the_failover_capacity():
    """Two hosts of 1 TiB each (the simulator's GPU servers), 50 % kept for failover (the spare rule's
    one host of two): the powered-on VMs may reserve 1 TiB; every vGPU VM reserves all its 64 GiB, so the
    16th power-on is admitted and the 17th refused, while the MIG cards still have room (56 1g.10gb slots)."""
    import vsphere_sim
    fleet = vsphere_sim.fleet_of(2, vms_per_host=0, cluster="gpu-ac")
    fleet["clusters"][0]["hosts"][0]["mig"] = "all"
    fleet["vms"] = [{"name": "node", "cluster": "gpu-ac", "count": 15, "vgpu": ["nvidia_h100-1-10c"]},
                    {"name": "extra", "cluster": "gpu-ac", "count": 2, "vgpu": ["nvidia_h100-1-10c"], "power": "off"}]
    sim = vsphere_sim.start(fleet)
    si, content = connect_to(sim)
    try:
        res = run_module("gpupool.vcf.ha_gpu_restart", {
            "cluster": "gpu-ac", "pools": [{"name": "node", "vgpu_profile": "nvidia_h100-1-10c", "restart_priority": "highest"}],
            "admission_control": {"failover_level": 1, "cpu_percent": 50, "memory_percent": 50}}, env=dict(sim.env))[0]
        assert res.get("changed") is True, res
        cl = cluster(content, "gpu-ac")
        hw = cl.host[0].summary.hardware
        total_mb = sum(h.summary.hardware.memorySize for h in cl.host) // 2 ** 20
        assert total_mb == 2 * 1024 * 1024 and hw.numCpuCores == 64
        vms = vms_of(cl)
        assert all(vm.config.memoryReservationLockedToMax for vm in vms.values())
        reserved = sum(vm.config.hardware.memoryMB for vm in vms.values() if vm.runtime.powerState == "poweredOn")
        assert reserved == 15 * 65536  # 960 GiB of the 1 TiB (50 % of 2 TiB) the policy leaves to VMs

        WaitForTask(vms["extra-01"].PowerOnVM_Task())  # 16 x 64 GiB = 1 TiB: at the limit, admitted
        with pytest.raises(vim.fault.InsufficientFailoverResourcesFault) as refused:
            WaitForTask(vms["extra-02"].PowerOnVM_Task())
        assert "1048576 MB" in refused.value.msg and "50%" in refused.value.msg, refused.value.msg
        assert vms["extra-02"].runtime.powerState == "poweredOff"
        free = sum(7 * 4 for _h in cl.host) - sum(len(g["vms"]) for h in ("esx-01", "esx-02") for g in sim.gpus(h))
        assert free == 56 - 16  # the cards had room: it is the failover capacity that refused it

        # a VM powered off gives its reservation back: the same power-on is admitted now
        WaitForTask(vms["node-01"].PowerOffVM_Task())
        WaitForTask(vms["extra-02"].PowerOnVM_Task())
        assert vms["extra-02"].runtime.powerState == "poweredOn"
        print("\nHA admission control: 2 hosts x 1024 GiB, 50 %% kept: 16 VMs x 64 GiB admitted, the 17th refused "
              "(%s)" % refused.value.msg)
    finally:
        connect.Disconnect(si)
        sim.stop()
