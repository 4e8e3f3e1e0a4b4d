# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live capacity arithmetic (pure/_capacity_live.py), each figure counted by hand in the comments."""

from __future__ import absolute_import, division, print_function

import calendar

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live as cl
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import offered_profiles

H100_PROFILES = offered_profiles("H100-80GB")


def host(name, vms, cards=4, cluster="c1", model="H100-80GB", state="connected", maintenance=False, offered=None):
    return dict(name=name, cluster=cluster, connection_state=state, maintenance_mode=maintenance,
                gpus=[dict(model=model)] * cards,
                vgpu_profiles=list(H100_PROFILES if offered is None else offered),
                vgpu_vms=[dict(name=n, power_state=p, vgpu_profiles=list(v)) for n, v, p in vms])


def on(name, *profiles):
    return (name, profiles, "poweredOn")


def off(name, *profiles):
    return (name, profiles, "poweredOff")


DESIGN = {
    "pools": [
        {"name": "inference", "cluster": "c1", "vgpu_profile": "nvidia_h100-3-40c", "shape": "inference",
         "priority": "gpu-inference", "node_pool": {"name": "inference", "replicas": 6}, "vm_class": {"name": "gpu-inference"}},
        {"name": "training", "cluster": "c1", "vgpu_profile": "nvidia_h100-80c", "shape": "training",
         "priority": "gpu-training", "node_pool": {"name": "training", "replicas": 2}, "vm_class": {"name": "gpu-training"}},
    ],
    "priorities": {
        "gpu-inference": {"value": 100000, "preemption_policy": "PreemptLowerPriority"},
        "gpu-training": {"value": 50000, "preemption_policy": "PreemptLowerPriority"},
    },
}


# ---------------------------------------------------------------------------------------
# slots
# ---------------------------------------------------------------------------------------


def test_slots_one_host_mixed_profiles():
    # 4 H100 cards. Biggest first: C (80c) takes card 0 whole; A (3-40c) puts card 1 in MIG mode; B
    # (3-40c) joins card 1 (two 3g.40gb fill its 8 memory slices); D (20c) opens card 2 time-sliced.
    # Card 3 is empty.
    h = host("h1", [on("A", "nvidia_h100-3-40c"), on("B", "nvidia_h100-3-40c"), on("C", "nvidia_h100-80c"),
                    on("D", "nvidia_h100-20c"), off("E", "nvidia_h100-20c")])
    out = cl.slots([h])["c1"]
    rows = out["profiles"]
    # 3-40c: 2 per card -> 8 in all; 2 used; free only on card 3 (2); blocked 8 - 2 - 2 = 4
    assert dict(rows["nvidia_h100-3-40c"]) == dict(total=8, used=2, free=2, blocked=4, powered_off=0, per_card=2,
                                                   hosts_with_room=1)
    # 20c: 80 // 20 = 4 per card -> 16; 1 used (E is off); free: card 2 has 3 more, card 3 takes 4 -> 7;
    # blocked 16 - 1 - 7 = 8 (cards 0 and 1)
    assert dict(rows["nvidia_h100-20c"]) == dict(total=16, used=1, free=7, blocked=8, powered_off=1, per_card=4,
                                                 hosts_with_room=1)
    # 80c: 1 per card -> 4; 1 used; free 1 (card 3); blocked 2
    assert (rows["nvidia_h100-80c"]["total"], rows["nvidia_h100-80c"]["free"], rows["nvidia_h100-80c"]["blocked"]) == (4, 1, 2)
    assert out["gpus"] == 4 and out["gpus_in_use"] == 3
    assert out["overcommitted"] == []


def test_mig_room_next_to_a_bigger_instance():
    # one card with a 3g.40gb instance (4 of 8 memory slices, 3 of 7 compute slices): 1g.10gb takes
    # one of each, so min(8 - 4, 7 - 3) = 4 more fit, placed at slices 0-3 with the 3g at 4
    h = host("h1", [on("A", "nvidia_h100-3-40c")], cards=1)
    rows = cl.slots([h], profiles=["nvidia_h100-1-10c"])["c1"]["profiles"]
    assert rows["nvidia_h100-1-10c"]["free"] == 4
    assert rows["nvidia_h100-1-10c"]["total"] == 7      # 7 x 1g.10gb on an empty card
    assert rows["nvidia_h100-1-10c"]["blocked"] == 3    # 7 - 0 used - 4 free
    # a time-sliced profile gets nothing on a card in MIG mode
    assert cl.slots([h], profiles=["nvidia_h100-10c"])["c1"]["profiles"]["nvidia_h100-10c"]["free"] == 0


def test_vgpus_of_one_vm_go_to_different_cards():
    # a VM with two 20c vGPUs uses two cards (1 of 4 each): 3 + 3 free there, 4 on each empty card
    h = host("h1", [on("A", "nvidia_h100-20c", "nvidia_h100-20c")])
    cards, unplaced = cl.pack_host(h)
    assert [c.count for c in cards] == [1, 1, 0, 0] and unplaced == []
    assert cl.slots([h])["c1"]["profiles"]["nvidia_h100-20c"]["free"] == 3 + 3 + 4 + 4


def test_unavailable_hosts_and_profiles_not_offered():
    # h2 is in maintenance mode: its cards are not counted, its (powered-off) VM shows as powered off;
    # h3 has no driver loaded (offers no profile): no slots either
    hosts = [host("h1", [on("A", "nvidia_h100-80c")], cards=2),
             host("h2", [off("B", "nvidia_h100-80c")], cards=2, maintenance=True),
             host("h3", [], cards=2, offered=[])]
    out = cl.slots(hosts)["c1"]
    row = out["profiles"]["nvidia_h100-80c"]
    assert (row["total"], row["used"], row["free"], row["powered_off"]) == (2, 1, 1, 1)
    assert out["unavailable_hosts"] == ["h2"]
    assert out["available_hosts"] == ["h1", "h3"]


def test_more_vgpus_than_cards_are_reported():
    h = host("h1", [on("A", "nvidia_h100-80c"), on("B", "nvidia_h100-80c")], cards=1)
    out = cl.slots([h])["c1"]
    assert out["overcommitted"] == [dict(host="h1", vm="B", vgpu_profiles=["nvidia_h100-80c"])]


def test_design_pool_profiles_are_listed_even_unused():
    h = host("h1", [], cards=1)
    rows = cl.slots([h], cl.Pools(DESIGN))["c1"]["profiles"]
    assert list(rows) == ["nvidia_h100-3-40c", "nvidia_h100-80c"]
    assert rows["nvidia_h100-3-40c"]["free"] == 2 and rows["nvidia_h100-80c"]["free"] == 1


# ---------------------------------------------------------------------------------------
# spare rule
# ---------------------------------------------------------------------------------------


def failing_fleet():
    # h1, h2: a training node each (4 x 80c: every card); h3: six inference VMs (3-40c, 2 per card:
    # 3 cards) and one card free
    return [host("h1", [on("training-0", *["nvidia_h100-80c"] * 4)]),
            host("h2", [on("training-1", *["nvidia_h100-80c"] * 4)]),
            host("h3", [on("inference-%d" % i, "nvidia_h100-3-40c") for i in range(6)])]


def test_spare_rule_fails_naming_the_protected_pool():
    # all hosts have 4 GPUs. h1 down: training-0 needs 4 cards of one host, h2 has 0 free, h3 1 ->
    # 1 preemptible VM short. h3 down: 6 inference VMs, h1 and h2 are full -> 6 protected VMs
    # short: the worst case, and the rule fails naming inference
    out = cl.spare(failing_fleet(), cl.Pools(DESIGN))["c1"]
    assert out["ok"] is False
    assert out["host_down"] == "h3" and out["host_gpus"] == 4 and out["hosts_left"] == 2
    assert (out["vms_to_restart"], out["vms_short"]) == (6, 6)
    [short] = out["short"]
    assert short["pool"] == "inference" and short["protected"] is True
    assert short["vgpu_profiles"] == ["nvidia_h100-3-40c"] and len(short["vms"]) == 6
    assert "inference 6 VMs" in out["message"]


def test_spare_rule_preemptible_short_does_not_fail():
    # h1: training-0 on its 4 cards; h2, h3: one inference VM each (one card in MIG mode with room for
    # one more 3g.40gb) and 3 empty cards. h1 down: training-0 needs 4 cards of one host, h2 and h3
    # have 3 -> short, but training is preemptible. h2 down: inference-0 takes the room on h3's MIG
    # card (and the other way round). The rule holds, naming training as short.
    fleet = [host("h1", [on("training-0", *["nvidia_h100-80c"] * 4)]),
             host("h2", [on("inference-0", "nvidia_h100-3-40c")]),
             host("h3", [on("inference-1", "nvidia_h100-3-40c")])]
    out = cl.spare(fleet, cl.Pools(DESIGN))["c1"]
    assert out["ok"] is True and out["host_down"] == "h1"
    assert [(s["pool"], s["protected"], s["vms"]) for s in out["short"]] == [("training", False, ["training-0"])]
    assert "training [preemptible] 1 VM" in out["message"]
    # with an empty third host the training node restarts there: nothing short
    fleet[2] = host("h3", [])
    out = cl.spare(fleet, cl.Pools(DESIGN))["c1"]
    assert out["ok"] is True and out["short"] == [] and out["vms_short"] == 0


def test_spare_rule_restarts_protected_pools_first():
    # h1 down with one inference VM (3-40c) and one training VM (1 x 80c); h2 has exactly one free
    # card: inference goes first and takes it (2 slots of 3-40c), training is left short
    design = {"pools": [dict(DESIGN["pools"][0]), dict(DESIGN["pools"][1], gpus_per_node=1)],
              "priorities": DESIGN["priorities"]}
    fleet = [host("h1", [on("training-9", "nvidia_h100-80c"), on("inference-9", "nvidia_h100-3-40c")], cards=2),
             host("h2", [on("training-8", "nvidia_h100-80c")], cards=2)]
    out = cl.spare(fleet, cl.Pools(design))["c1"]
    assert out["host_down"] == "h1"
    assert [(s["pool"], s["vms"]) for s in out["short"]] == [("training", ["training-9"])]
    assert out["ok"] is True


def test_spare_rule_without_a_design_counts_every_vm_as_protected():
    out = cl.spare(failing_fleet())["c1"]
    assert out["ok"] is False
    assert [s["pool"] for s in out["short"]] == ["(profile nvidia_h100-3-40c)"]


def test_spare_rule_largest_host_by_gpus():
    # h1 has 2 GPUs, h2 4: h2 is the one taken down, its VM needs 1 card, h1 has 1 free
    fleet = [host("h1", [on("a", "nvidia_h100-80c")], cards=2), host("h2", [on("b", "nvidia_h100-80c")], cards=4)]
    out = cl.spare(fleet)["c1"]
    assert out["host_down"] == "h2" and out["ok"] is True and out["host_gpus"] == 4


def test_pool_of_vm_by_profile_then_name():
    design = {"pools": [{"name": "a", "cluster": "c1", "vgpu_profile": "nvidia_h100-80c", "node_pool": {"name": "big-a"}},
                        {"name": "b", "cluster": "c1", "vgpu_profile": "nvidia_h100-80c", "node_pool": {"name": "big-b"}},
                        {"name": "c", "cluster": "c1", "vgpu_profile": "nvidia_h100-20c", "node_pool": {"name": "c"}}]}
    pools = cl.Pools(design)
    assert pools.of_vm("c1", dict(name="w-big-b-x1", vgpu_profiles=["nvidia_h100-80c"])) == "b"
    assert pools.of_vm("c1", dict(name="anything", vgpu_profiles=["NVIDIA_H100-20C"])) == "c"
    assert pools.of_vm("c1", dict(name="anything", vgpu_profiles=["nvidia_h100-80c"])) is None
    assert pools.of_vm("c2", dict(name="c-0", vgpu_profiles=["nvidia_h100-20c"])) is None
    assert pools.group("c1", dict(name="anything", vgpu_profiles=["nvidia_h100-80c"])) == "(profile nvidia_h100-80c)"


# ---------------------------------------------------------------------------------------
# guest cluster
# ---------------------------------------------------------------------------------------

NOW = calendar.timegm((2026, 11, 30, 12, 0, 0))


def pod(name, phase="Pending", gpus=None, selector=None, tolerations=None, created="2026-11-30T11:50:00Z",
        node=None, conditions=None, gates=None):
    spec = {"containers": [{"name": "c", "resources": {"limits": dict(gpus or {})}}]}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"name": name, "namespace": "t1", "creationTimestamp": created},
            "spec": spec, "status": {"phase": phase, "conditions": conditions or []}}


def test_pending_gpu_pods_per_pool():
    unsched = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    pods = [
        pod("a", gpus={"nvidia.com/gpu": 2}, selector={"gpupool.vcf/pool": "inference"}, conditions=unsched),  # 600 s
        pod("b", gpus={"nvidia.com/gpu": 1}, tolerations=[{"key": "gpupool.vcf/pool", "value": "inference"}],
            created="2026-11-30T11:00:00Z", gates=["kueue.x-k8s.io/admission"]),  # 3600 s
        pod("c", gpus={"nvidia.com/mig-3g.40gb": 1}),  # mixed strategy: the pool with the 3g.40gb profile
        pod("d", gpus={"nvidia.com/gpu": 1}, phase="Running", node="n1"),
        pod("e"),  # no GPU
        pod("f", gpus={"nvidia.com/gpu": 1}),  # no pool
    ]
    out = cl.pending_pods(pods, NOW, cl.Pools(DESIGN))
    assert [e["pool"] for e in out] == ["(none)", "inference"]
    none, inference = out
    assert none["pods"] == 1 and none["gpus"] == {"nvidia.com/gpu": 1}
    assert inference["pods"] == 3
    assert inference["gpus"] == {"nvidia.com/gpu": 3, "nvidia.com/mig-3g.40gb": 1}
    assert inference["oldest_wait_s"] == 3600.0
    assert inference["reasons"] == {"Unschedulable": 1, "SchedulingGated (kueue.x-k8s.io/admission)": 1,
                                    "NotScheduled": 1}


def wl(name, queue, created, admitted_at=None, cq=None, finished=False):
    conds = []
    if admitted_at:
        conds.append({"type": "Admitted", "status": "True", "lastTransitionTime": admitted_at})
    if finished:
        conds.append({"type": "Finished", "status": "True", "lastTransitionTime": admitted_at})
    status = {"conditions": conds}
    if cq:
        status["admission"] = {"clusterQueue": cq}
    return {"metadata": {"name": name, "namespace": "t1", "creationTimestamp": created},
            "spec": {"queueName": queue}, "status": status}


def test_kueue_admission_waits():
    lqs = [{"metadata": {"name": "training", "namespace": "t1"}, "spec": {"clusterQueue": "gpupool-training"}}]
    wls = [
        wl("w1", "training", "2026-11-30T11:00:00Z", "2026-11-30T11:00:30Z", "gpupool-training"),  # waited 30 s
        wl("w2", "training", "2026-11-30T11:00:00Z", "2026-11-30T11:01:30Z", "gpupool-training"),  # 90 s
        wl("w3", "training", "2026-11-30T11:40:00Z"),  # pending for 1200 s
        wl("w4", "training", "2026-11-30T11:55:00Z"),  # pending for 300 s
        wl("w5", "training", "2026-11-30T10:00:00Z", "2026-11-30T10:30:00Z", "gpupool-training", finished=True),
    ]
    out = cl.kueue_waits(wls, lqs, NOW)
    [lq] = out["local_queues"]
    assert lq["queue"] == "t1/training" and lq["cluster_queue"] == "gpupool-training"
    assert (lq["pending"], lq["admitted"], lq["oldest_pending_s"]) == (2, 2, 1200.0)
    assert dict(lq["admission_wait"]) == dict(count=2, mean_s=60.0, median_s=60.0, max_s=90.0)
    [cq] = out["cluster_queues"]
    assert cq["queue"] == "gpupool-training" and cq["pending"] == 2 and cq["admission_wait"]["max_s"] == 90.0


def test_parse_k8s_time():
    assert cl.parse_k8s_time("2026-11-30T12:00:00Z") == NOW
    assert cl.parse_k8s_time("2026-11-30T12:00:00.123456Z") == NOW
    assert cl.parse_k8s_time(None) is None
    assert cl.parse_k8s_time("yesterday") is None


def test_markdown_names_the_short_pool_and_the_knee_place():
    report = dict(clusters=cl.slots(failing_fleet(), cl.Pools(DESIGN)), spare=cl.spare(failing_fleet(), cl.Pools(DESIGN)),
                  guest=dict(pending_pods=[], kueue=None))
    text = cl.markdown(report)
    # 3 hosts x 4 cards x 2 = 24 slots, 6 used, 2 free (h3's fourth card), 24 - 6 - 2 = 16 held by 80c
    assert "| nvidia_h100-3-40c | 2 | 24 | 6 | 2 | 16 | 0 |" in text
    assert "**c1**: FAILS" in text and "inference 6 VMs" in text
    assert "Kueue is not installed" in text
    assert cl.KNEE_NOT_COMPUTED in text


@pytest.mark.parametrize("profile,cap", [("nvidia_h100-80c", ("time_sliced", 1, None)),
                                         ("nvidia_h100-16c", ("time_sliced", 5, None)),
                                         ("nvidia_h100-1-10c", ("mig", 7, "1g.10gb")),
                                         ("nvidia_h100-3-40c", ("mig", 2, "3g.40gb")),
                                         ("nvidia_l40s-8c", None)])
def test_profile_cap(profile, cap):
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import gpu_model
    assert cl.profile_cap(profile, gpu_model("H100-80GB")) == cap


# ---------------------------------------------------------------------------------------
# cards in their mode, with the vGPUs vSphere places on them (gpu_host_info's per-GPU view)
# ---------------------------------------------------------------------------------------


def viewed(name, modes, placed=(), unlisted=(), cluster="c1"):
    """A host whose GPUs have the per-GPU view: ``modes`` per GPU, ``placed`` [(GPU, VM, profiles)] (the
    VMs graphicsInfo lists, powered on), ``unlisted`` powered-on VMs no GPU lists."""
    gpus = [dict(index=i, model="H100-80GB", vgpu_mode=m, vms=[]) for i, m in enumerate(modes)]
    vms = OrderedVms()
    for index, vm, profiles in placed:
        gpus[index]["vms"].append(dict(name=vm, moid="vm-" + vm, profiles=list(profiles)))
        vms.add(vm, profiles)
    for vm, profiles in unlisted:
        vms.add(vm, profiles)
    return dict(name=name, cluster=cluster, connection_state="connected", maintenance_mode=False, gpus=gpus,
                vgpu_profiles=list(H100_PROFILES), vgpu_vms=vms.listing)


class OrderedVms:
    def __init__(self):
        self.listing = []

    def add(self, name, profiles):
        for vm in self.listing:
            if vm["name"] == name:
                vm["vgpu_profiles"] += list(profiles)
                return
        self.listing.append(dict(name=name, moid="vm-" + name, power_state="poweredOn", vgpu_profiles=list(profiles)))


MIG, SAME, MIXED = "multiInstanceGpu", "sameSize", "mixedSize"


def test_slots_follow_each_cards_mode():
    # GPUs 0, 1 in MIG mode, 2, 3 without: MIG-backed slots only on 0, 1, time-sliced and full-card only on 2, 3
    rows = cl.slots([viewed("h1", [MIG, MIG, SAME, SAME])],
                    profiles=["nvidia_h100-3-40c", "nvidia_h100-80c", "nvidia_h100-20c"])["c1"]["profiles"]
    assert (rows["nvidia_h100-3-40c"]["total"], rows["nvidia_h100-3-40c"]["free"]) == (2 * 2, 2 * 2)
    assert (rows["nvidia_h100-80c"]["total"], rows["nvidia_h100-80c"]["free"]) == (2, 2)
    assert (rows["nvidia_h100-20c"]["total"], rows["nvidia_h100-20c"]["free"]) == (2 * 4, 2 * 4)
    assert all(r["blocked"] == 0 for r in rows.values())
    # the same host without the view: every card takes either kind
    blind = host("h1", [], cards=4)
    assert cl.slots([blind], profiles=["nvidia_h100-80c"])["c1"]["profiles"]["nvidia_h100-80c"]["free"] == 4


def test_the_vgpus_each_card_carries_are_where_vsphere_lists_them():
    # two 20c VMs spread on two sameSize cards (assignment policy performance): 3 + 3 more 20c, no card left
    # for an 80c. The tight guess would have put both on card 0 and left card 1 free for one 80c.
    h = viewed("h1", [SAME, SAME], placed=[(0, "A", ["nvidia_h100-20c"]), (1, "B", ["nvidia_h100-20c"])])
    cards, unplaced = cl.pack_host(h)
    assert [c.count for c in cards] == [1, 1] and unplaced == []
    rows = cl.slots([h], profiles=["nvidia_h100-80c"])["c1"]["profiles"]
    assert (rows["nvidia_h100-20c"]["used"], rows["nvidia_h100-20c"]["free"]) == (2, 3 + 3)
    assert (rows["nvidia_h100-80c"]["free"], rows["nvidia_h100-80c"]["blocked"]) == (0, 2)
    blind = host("h1", [on("A", "nvidia_h100-20c"), on("B", "nvidia_h100-20c")], cards=2)
    assert cl.slots([blind], profiles=["nvidia_h100-80c"])["c1"]["profiles"]["nvidia_h100-80c"]["free"] == 1


def test_one_size_per_samesize_card_several_on_a_mixedsize_card():
    # a 20c on each card: a sameSize card takes no 40c next to it, a mixedSize card (80 - 20) // 40 = 1
    h = viewed("h1", [SAME, MIXED], placed=[(0, "A", ["nvidia_h100-20c"]), (1, "B", ["nvidia_h100-20c"])])
    cards, _unplaced = cl.pack_host(h)
    assert [c.room("nvidia_h100-40c") for c in cards] == [0, 1]
    assert [c.room("nvidia_h100-20c") for c in cards] == [3, 3]
    assert [c.room("nvidia_h100-3-40c") for c in cards] == [0, 0]


def test_a_mig_card_carries_its_instances():
    # a 3g.40gb on MIG GPU 0: four 1g.10gb still fit beside it (test_mig_room_next_to_a_bigger_instance)
    h = viewed("h1", [MIG, SAME], placed=[(0, "A", ["nvidia_h100-3-40c"])])
    rows = cl.slots([h], profiles=["nvidia_h100-1-10c", "nvidia_h100-10c"])["c1"]["profiles"]
    assert (rows["nvidia_h100-1-10c"]["total"], rows["nvidia_h100-1-10c"]["free"]) == (7, 4)
    assert (rows["nvidia_h100-10c"]["total"], rows["nvidia_h100-10c"]["free"]) == (8, 8)


def test_a_vgpu_on_a_card_of_the_wrong_kind_is_overcommitted():
    # vSphere lists a MIG-backed vGPU on a sameSize GPU: no real host runs that, the VM is not counted as fitting
    h = viewed("h1", [SAME, SAME], placed=[(0, "A", ["nvidia_h100-3-40c"])])
    assert cl.slots([h])["c1"]["overcommitted"] == [dict(host="h1", vm="A", vgpu_profiles=["nvidia_h100-3-40c"])]


def test_a_powered_on_vgpu_no_card_lists_is_placed_on_a_card_of_its_kind():
    # GPU 0 runs MIG: the unlisted 80c goes to GPU 1, leaving GPU 0 its two 3g.40gb
    h = viewed("h1", [MIG, SAME], unlisted=[("T", ["nvidia_h100-80c"])])
    cards, unplaced = cl.pack_host(h)
    assert [c.count for c in cards] == [0, 1] and unplaced == []
    assert cl.slots([h], profiles=["nvidia_h100-3-40c"])["c1"]["profiles"]["nvidia_h100-3-40c"]["free"] == 2


def test_the_spare_rule_restarts_vms_only_on_cards_of_their_kind():
    # h2's two inference VMs (3-40c on MIG GPU 0) cannot restart on h1, whose GPUs run without MIG
    design = dict(DESIGN, pools=[dict(DESIGN["pools"][0], cluster="c1")])
    hosts = [viewed("h1", [SAME, SAME]),
             viewed("h2", [MIG, SAME], placed=[(0, "inference-0", ["nvidia_h100-3-40c"]),
                                               (0, "inference-1", ["nvidia_h100-3-40c"])])]
    out = cl.spare(hosts, cl.Pools(design))["c1"]
    assert out["ok"] is False and out["host_down"] == "h2" and out["vms_short"] == 2
    # with h1's GPU 0 in MIG mode they do
    hosts[0] = viewed("h1", [MIG, SAME])
    out = cl.spare(hosts, cl.Pools(design))["c1"]
    assert out["ok"] is True and out["vms_short"] == 0


def test_powered_off_vgpu_vms_of_a_failed_host_are_named():
    """After a host failure the VMs HA did not restart stay off on the failed host: the report names them;
    a powered-off VM of an available host and a running VM are not listed."""
    hosts = [host("h1", [off("T", "nvidia_h100-80c")], cards=2, maintenance=True),
             host("h2", [on("I", "nvidia_h100-80c"), off("O", "nvidia_h100-80c")], cards=2)]
    out = cl.slots(hosts)["c1"]
    assert out["off_on_unavailable_hosts"] == [dict(host="h1", vm="T", vgpu_profiles=["nvidia_h100-80c"])]
    assert out["unavailable_hosts"] == ["h1"]
