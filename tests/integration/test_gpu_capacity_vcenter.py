"""gpu_capacity beside vCenter's own figures (DirectPathProfileManagerQueryCapacity) against the vSphere
simulator: on a 9.1 presentation node VMs with vGPUs on a fleet of mixed MIG and time-sliced cards, where
vCenter's figures equal ours (both counted by hand); a reservation set behind the collection's back takes
from vCenter's remaining and is a finding that names it; per host one more call each, only when asked. The
same module on 8.0.3 makes no QueryCapacity call and says why."""
import pathlib
import sys

import pytest

from tests.lib.ansible_run import run_module

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

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


def test_vcenter_figures_equal_ours_then_a_reservation_is_a_finding(sim91):
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
    finally:
        sim91._call("POST", "/_sim/capacity/reservations", {"cluster": "vcap", "profile": "nvidia_l40s-8c", "count": 0})
    assert calls == 1
    row = res["vcenter_capacity"]["clusters"]["vcap"]["nvidia_l40s-8c"]
    assert row["ours"] == HAND["nvidia_l40s-8c"]
    assert row["vcenter"] == dict(max=12, consumed=2, remaining=7, unused_reservation=3)
    assert [(f["cluster"], f["profile"], f["field"], f["ours"], f["vcenter"]) for f in res["findings"]] == [
        ("vcap", "nvidia_l40s-8c", "free/remaining", 10, 7)]
    line = "- vcap nvidia_l40s-8c: our free is 10, vCenter's remaining is 7"
    assert line in res["markdown"].splitlines()
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
