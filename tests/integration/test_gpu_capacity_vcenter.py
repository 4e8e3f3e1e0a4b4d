"""gpu_capacity beside vCenter's own figures (DirectPathProfileManagerQueryCapacity) against the vSphere
simulator: on a 9.1 presentation node VMs with vGPUs on a fleet of mixed MIG and time-sliced cards, where
vCenter's figures equal ours (both counted by hand); a reservation set behind the collection's back takes
from vCenter's remaining and is a finding that names it; per host one more call each, only when asked. The
same module on 8.0.3 makes no QueryCapacity call and says why. With the design's reserved VM classes, the
reserved-but-idle slots from the tenants' VMs in their vSphere Namespaces, in the same retrieval."""
import copy
import pathlib
import ssl
import sys
import time

import pytest
import yaml

from tests.lib.ansible_run import run_module, run_playbook

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIVER = "550.90.05-1OEM.800.1.0.20613240"
METHOD = "DirectPathProfileManagerQueryCapacity"
FLEET = {
    "clusters": [
        {"name": "vcap", "hosts": [
            # GPU 0 time-sliced, GPU 1 in MIG mode
            {"name": "vcap-h100-01", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": DRIVER, "mig": [1]},
            {"name": "vcap-l40s-01", "gpu": {"model": "L40S", "count": 2}, "driver_version": DRIVER},
        ]},
        {"name": "vcap-mgmt", "hosts": [{"name": "vcap-mgmt-01"}]},
    ],
    "vms": [
        {"name": "vcap-train-0", "host": "vcap-h100-01", "vgpu": ["nvidia_h100-40c"]},
        {"name": "vcap-infer-0", "host": "vcap-h100-01", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "vcap-nb-0", "host": "vcap-l40s-01", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "vcap-nb-1", "host": "vcap-l40s-01", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "vcap-nb-off", "host": "vcap-l40s-01", "vgpu": ["nvidia_l40s-8c"], "power": "off"},
    ],
}
# by hand: 40c only on the H100's time-sliced GPU 0, 80 // 40 = 2, one held; 3g.40gb two on the MIG GPU 1,
# one held; L40S 8c 48 // 8 = 6 per card on 2 cards, two powered-on VMs hold two (the third is off)
HAND = {
    "nvidia_h100-40c": dict(total=2, used=1, free=1),
    "nvidia_h100-3-40c": dict(total=2, used=1, free=1),
    "nvidia_l40s-8c": dict(total=12, used=2, free=10),
}


def capacity(sim, **args):
    before = sim.stats()["soap"]["methods"].get(METHOD, 0)
    res = run_module("gpupool.vcf.gpu_capacity", args, env=dict(sim.env))[0]
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    return res, sim.stats()["soap"]["methods"].get(METHOD, 0) - before


@pytest.fixture(scope="module")
def sim91():
    sim = vsphere_sim.start(FLEET, api_version="9.1")
    try:
        yield sim
    finally:
        sim.stop()


def test_vcenter_figures_equal_ours_then_a_reservation_is_a_finding(sim91, tmp_path):
    res, calls = capacity(sim91)
    assert calls == 1  # one QueryCapacity for the one GPU cluster, every profile in it
    vc = res["vcenter_capacity"]
    assert vc["read"] is True and vc["reason"] is None and vc["api_version"] == "9.1.0.0" and vc["calls"] == 1
    assert vc["hosts"] is None and list(vc["clusters"]) == ["vcap"]
    rows = vc["clusters"]["vcap"]
    assert sorted(rows) == sorted(HAND)
    for profile, mine in HAND.items():
        assert rows[profile]["ours"] == mine, profile
        assert rows[profile]["vcenter"] == dict(max=mine["total"], consumed=mine["used"], remaining=mine["free"],
                                                unused_reservation=0), profile
    assert res["findings"] == []
    assert "vCenter's figures agree with ours." in res["markdown"]
    assert "| nvidia_l40s-8c | 12 / 12 | 2 / 2 | 10 / 10 | 0 |" in res["markdown"]

    # 3 units of 8c reserved on vCenter: its remaining drops to 10 - 3, unusedReservation 3; ours stays
    sim91._call("POST", "/_sim/capacity/reservations", {"cluster": "vcap", "profile": "nvidia_l40s-8c", "count": 3})
    try:
        res, calls = capacity(sim91)
        # the playbook prints the finding too
        out = tmp_path / "out"
        ran = run_playbook(ROOT / "playbooks" / "capacity.yml", env=dict(sim91.env),
                           extra_vars={"capacity_design_file": "", "capacity_output_dir": str(out)})
    finally:
        sim91._call("POST", "/_sim/capacity/reservations", {"cluster": "vcap", "profile": "nvidia_l40s-8c", "count": 0})
    assert calls == 1
    row = res["vcenter_capacity"]["clusters"]["vcap"]["nvidia_l40s-8c"]
    assert row["ours"] == HAND["nvidia_l40s-8c"]
    assert row["vcenter"] == dict(max=12, consumed=2, remaining=7, unused_reservation=3)
    assert [(f["cluster"], f["profile"], f["field"], f["ours"], f["vcenter"]) for f in res["findings"]] == [
        ("vcap", "nvidia_l40s-8c", "free/remaining", 10, 7)]
    message = "vcap nvidia_l40s-8c: our free is 10, vCenter's remaining is 7"
    assert "- " + message in res["markdown"].splitlines()
    assert ran.rc == 0, ran.stdout[-3000:]
    assert message in ran.stdout and ("- " + message) in (out / "gpu-capacity.md").read_text().splitlines()
    # ours is never overridden
    assert res["clusters"]["vcap"]["profiles"]["nvidia_l40s-8c"]["free"] == 10


def test_vcenter_per_host_one_call_more_per_gpu_host(sim91):
    res, calls = capacity(sim91, vcenter_per_host=True, profiles=["nvidia_h100-1-10c"])
    assert calls == 3  # the cluster, then each of its two GPU hosts
    vc = res["vcenter_capacity"]
    assert vc["calls"] == 3 and sorted(vc["hosts"]) == ["vcap-h100-01", "vcap-l40s-01"]
    # 1g.10gb, asked: seven on an empty MIG GPU; beside the 3g.40gb the other four memory slices hold four
    h100 = vc["hosts"]["vcap-h100-01"]
    assert h100["nvidia_h100-1-10c"]["ours"] == dict(total=7, used=0, free=4)
    assert h100["nvidia_h100-1-10c"]["vcenter"] == dict(max=7, consumed=0, remaining=4, unused_reservation=0)
    # the L40S profile on the H100 host: vCenter has no capacity (not offered) and ours has no slot
    assert h100["nvidia_l40s-8c"]["vcenter"] is None and "not offered" in h100["nvidia_l40s-8c"]["unknown"]
    assert vc["hosts"]["vcap-l40s-01"]["nvidia_l40s-8c"]["vcenter"] == dict(
        max=12, consumed=2, remaining=10, unused_reservation=0)
    assert res["findings"] == []


def test_8_0_3_makes_no_query_capacity_call():
    sim = vsphere_sim.start(FLEET, api_version="8.0.3")
    try:
        res, calls = capacity(sim, vcenter_per_host=True)
        assert sim.stats()["soap"]["methods"].get(METHOD, 0) == 0
    finally:
        sim.stop()
    assert calls == 0
    vc = res["vcenter_capacity"]
    assert vc["read"] is False and vc["calls"] == 0 and vc["clusters"] == {} and vc["hosts"] is None
    assert "8.0.3.0" in vc["reason"] and "API 9.0" in vc["reason"]
    assert res["findings"] == []
    # our own figures are the same as on 9.1
    assert dict((p, dict((k, r[k]) for k in ("total", "used", "free")))
                for p, r in res["clusters"]["vcap"]["profiles"].items()) == HAND
    assert "Not read: vCenter's vGPU capacity figures" in res["markdown"]


def _namespaces(sim, layout):
    """The Supervisor's layout (<cluster root pool>/Namespaces/<namespace>), the VMs of ``layout``
    {namespace: (cluster, [VM])} moved in, as a Supervisor keeps them."""
    from pyVim import connect
    from pyVmomi import vim
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                              sslContext=ssl.create_default_context(cafile=sim.ca_file))
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder,
                                                       [vim.VirtualMachine, vim.ClusterComputeResource], True)
        objs = dict((o.name, o) for o in view.view)
        view.DestroyView()
        alloc = vim.ResourceAllocationInfo(limit=-1, reservation=0, expandableReservation=True,
                                           shares=vim.SharesInfo(level="normal", shares=0))
        spec = vim.ResourceConfigSpec(cpuAllocation=alloc, memoryAllocation=alloc)
        tops = {}
        for ns, (cluster, vms) in layout.items():
            if cluster not in tops:
                tops[cluster] = objs[cluster].resourcePool.CreateResourcePool("Namespaces", spec)
            pool = tops[cluster].CreateResourcePool(ns, spec)
            for name in vms:
                task = objs[name].RelocateVM_Task(vim.vm.RelocateSpec(pool=pool))
                while task.info.state not in ("success", "error"):
                    time.sleep(0.02)
                assert task.info.state == "success", task.info.error
    finally:
        connect.Disconnect(si)


def test_reserved_idle_from_the_tenants_namespaces(tmp_path):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    plain = tmp_path / "plain.yml"
    plain.write_text(yaml.safe_dump(design))
    reserving = copy.deepcopy(design)
    tenants = dict((t["name"], t) for t in reserving["tenants"])
    tenants["team-search"]["vm_reservations"] = [{"pool": "inference", "zone": "zone-a", "count": 3}]
    tenants["research"]["vm_reservations"] = [{"pool": "notebooks", "zone": "zone-a", "count": 1},
                                              {"pool": "notebooks", "zone": "zone-b", "count": 2}]
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(reserving))
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml", api_version="9.1")
    try:
        # team-search: llm-inference-01 and -02 run (3g.40gb, the inference pool's profile), -03 is off;
        # research: notebook-01 and -02 run (8c, the notebooks pool's); inference-0..3, the node VMs, stay
        # outside any namespace
        _namespaces(sim, {"team-search": ("gpu-h100", ["llm-inference-01", "llm-inference-02", "llm-inference-03"]),
                          "research": ("gpu-l40s", ["notebook-01", "notebook-02"])})
        sim.reset_stats()
        without = capacity(sim, design_file=str(plain))[0]
        before = sim.stats()["soap"]["methods"]
        sim.reset_stats()
        res = capacity(sim, design_file=str(path))[0]
        after = sim.stats()["soap"]["methods"]
    finally:
        sim.stop()
    assert without["reserved_idle"] is None and "## Reserved VM classes" not in without["markdown"]
    # by hand (the pools' VM classes are named gpu-<pool>): team-search 3 reserved, 2 running (the off one holds nothing): 1 idle; research: two
    # running notebooks fill zone-a's one and one of zone-b's two
    assert [(r["tenant"], r["vm_class"], r["zone"], r["reserved"], r["used"], r["idle"]) for r in res["reserved_idle"]] == [
        ("research", "gpu-notebooks", "zone-a", 1, 1, 0),
        ("research", "gpu-notebooks", "zone-b", 2, 1, 1),
        ("team-search", "gpu-inference", "zone-a", 3, 2, 1)]
    assert "## Reserved VM classes" in res["markdown"]
    # the namespaces come in the same retrieval: no call more than without reservations
    retrievals = ("RetrievePropertiesEx", "RetrieveProperties", "ContinueRetrievePropertiesEx")
    assert sum(after.get(m, 0) for m in retrievals) == sum(before.get(m, 0) for m in retrievals), (before, after)
