"""_esxi.mig_strands and the turn it refuses: a host's MIG mode change under powered-on VMs that hold vGPUs
of the other kind on the GPUs it changes. Where the VMs run again (the host's GPUs as the turn leaves them, or
with vGPU hot migration the other hosts of the cluster) decides: no GPU of their kind with room, and the turn
is refused in the plan (host_turns), naming the host, the GPUs, the VMs and their profiles and the way out."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi

FULL = "550.90.05-1OEM.800.1.0.20613240"
MIG_VGPU, HALF_MIG, FULL_CARD = "nvidia_h100-3-40c", "nvidia_h100-4-40c", "nvidia_h100-80c"
ROLE = dict(esxi_gpu_host_driver_version=FULL, esxi_gpu_host_lifecycle="direct", esxi_gpu_host_reboot=True)


def gpu(index, mig=False, vms=(), mode="sameSize"):
    """One H100 of a gpu_host_info record; ``vms``: (name, [profiles]) placed on it."""
    return dict(index=index, pci_id="0000:%02x:00.0" % (0x3b + index), model="H100-80GB", memory_mb=81920,
                vgpu_mode="multiInstanceGpu" if mig else mode, configured_vgpu_mode=mode,
                mig="enabled" if mig else "disabled",
                vms=[dict(name=n, moid="vm-" + n, profiles=list(p)) for n, p in vms])


def host(name, gpus, **kw):
    names = sorted(set(v["name"] for g in gpus for v in g["vms"]))
    rec = dict(name=name, gpu_count=len(gpus), connection_state="connected", errors=[], maintenance_mode=False,
               gpus=gpus, driver=dict(version="550.90.05", full_version=FULL), vgpu_profiles=[MIG_VGPU, FULL_CARD],
               vgpu_vms=[dict(name=n, moid="vm-" + n, uuid="u-" + n, power_state="poweredOn",
                              vgpu_profiles=[p for g in gpus for v in g["vms"] if v["name"] == n for p in v["profiles"]])
                         for n in names])
    rec.update(kw)
    return rec


def mig(before, after):
    """esxi_gpu_config's report of a host's MIG change: {index: on} before and after."""
    words = {True: "enabled", False: "disabled"}
    changing = sorted(i for i in after if before[i] != after[i])
    return dict(before=dict((str(i), words[on]) for i, on in before.items()),
                after=dict((str(i), words[on]) for i, on in after.items()), changed=bool(changing),
                enabled=[i for i in changing if after[i]], disabled=[i for i in changing if not after[i]],
                reason="MIG mode ... (test)")


# the bench's esx-h100-04: GPUs 0 and 1 in MIG mode, each carrying a MIG-backed node VM; the grown design's
# geometry turns MIG off on both
H100_04 = host("esx-h100-04", [gpu(0, True, [("inference-2", [MIG_VGPU])]), gpu(1, True, [("inference-3", [MIG_VGPU])]),
                               gpu(2), gpu(3)])
OFF_01 = mig({0: True, 1: True, 2: False, 3: False}, {0: False, 1: False, 2: False, 3: False})


def test_mig_turned_off_under_mig_backed_vms_strands_them_when_no_mig_gpu_is_left():
    stranded = _esxi.mig_strands(H100_04, OFF_01)
    assert stranded == [
        dict(vm="inference-2", profiles=[MIG_VGPU], gpus=[0], pci_ids=["0000:3b:00.0"]),
        dict(vm="inference-3", profiles=[MIG_VGPU], gpus=[1], pci_ids=["0000:3c:00.0"])]


def test_a_gpu_of_the_right_kind_with_room_on_the_host_keeps_them():
    # MIG off on GPU 1 only: GPU 0 stays in MIG mode and has room for a second 3g.40gb instance
    half = mig({0: True, 1: True, 2: False, 3: False}, {0: True, 1: False, 2: False, 3: False})
    assert _esxi.mig_strands(H100_04, half) == []
    # ... but not when GPU 0 is full: a 4g.40gb and a 3g.40gb use its 7 compute slices
    full = host("esx-h100-04", [gpu(0, True, [("inference-2", [MIG_VGPU]), ("big", [HALF_MIG])]),
                                gpu(1, True, [("inference-3", [MIG_VGPU])]), gpu(2), gpu(3)])
    assert [s["vm"] for s in _esxi.mig_strands(full, half)] == ["inference-3"]


def test_mig_turned_on_under_a_time_sliced_vm_moves_it_to_a_card_left_out_of_mig_mode():
    # the full card on GPU 1 comes back on GPU 2 or 3 (out of MIG mode, empty): nothing stranded
    h = host("h", [gpu(0, True, [("inference-0", [MIG_VGPU])]), gpu(1, vms=[("training-0", [FULL_CARD])]),
                   gpu(2), gpu(3)])
    on_1 = mig({0: True, 1: False, 2: False, 3: False}, {0: True, 1: True, 2: False, 3: False})
    assert _esxi.mig_strands(h, on_1) == []
    # every card out of MIG mode is taken (a full card each): the one on GPU 1 has nowhere to go
    busy = host("h", [gpu(0, True, [("inference-0", [MIG_VGPU])]), gpu(1, vms=[("training-0", [FULL_CARD])]),
                      gpu(2, vms=[("training-1", [FULL_CARD])]), gpu(3, vms=[("training-2", [FULL_CARD])])])
    assert _esxi.mig_strands(busy, on_1) == [dict(vm="training-0", profiles=[FULL_CARD], gpus=[1],
                                                  pci_ids=["0000:3c:00.0"])]
    # and MIG on every GPU strands all three full cards
    every = mig({0: True, 1: False, 2: False, 3: False}, {0: True, 1: True, 2: True, 3: True})
    assert [s["vm"] for s in _esxi.mig_strands(busy, every)] == ["training-0", "training-1", "training-2"]


def test_same_size_mode_takes_one_profile_per_gpu_mixed_size_several():
    small = "nvidia_h100-40c"
    h = host("h", [gpu(0, True, [("inference-0", [MIG_VGPU])]), gpu(1, vms=[("training-0", [FULL_CARD])]),
                   gpu(2, vms=[("notebook-0", [small])])])
    on_0_off = mig({0: True, 1: False, 2: False}, {0: False, 1: False, 2: False})
    # a MIG-backed vGPU needs a GPU in MIG mode, whatever the room out of it
    assert [s["vm"] for s in _esxi.mig_strands(h, on_0_off)] == ["inference-0"]
    on_2 = mig({0: True, 1: False, 2: False}, {0: True, 1: False, 2: True})
    # sameSize: GPU 1 carries an 80c, no 40c beside it; mixedSize (the design's mode): no room either (80 GB used)
    assert [s["vm"] for s in _esxi.mig_strands(h, on_2)] == ["notebook-0"]
    assert [s["vm"] for s in _esxi.mig_strands(h, on_2, vgpu_mode="mixed_size")] == ["notebook-0"]
    half = host("h", [gpu(0, True, [("inference-0", [MIG_VGPU])]), gpu(1, vms=[("notebook-1", ["nvidia_h100-20c"])]),
                      gpu(2, vms=[("notebook-0", [small])])])
    assert [s["vm"] for s in _esxi.mig_strands(half, on_2)] == ["notebook-0"]
    assert _esxi.mig_strands(half, on_2, vgpu_mode="mixed_size") == []


def test_no_change_or_vms_of_the_same_kind_strand_nothing():
    same = mig({0: True, 1: True, 2: False, 3: False}, {0: True, 1: True, 2: False, 3: False})
    assert _esxi.mig_strands(H100_04, same) == []
    # MIG on GPU 2, which carries nothing: the MIG-backed VMs on 0 and 1 are not touched
    more = mig({0: True, 1: True, 2: False, 3: False}, {0: True, 1: True, 2: True, 3: False})
    assert _esxi.mig_strands(H100_04, more) == []
    assert _esxi.mig_strands(H100_04, None) == []


def test_with_vgpu_hot_migration_the_other_hosts_of_the_cluster_decide():
    peer = host("esx-h100-05", [gpu(0, True), gpu(1), gpu(2), gpu(3)])
    # a MIG GPU of another host has room for both 3g.40gb instances: vCenter moves them there
    assert _esxi.mig_strands(H100_04, OFF_01, [H100_04, peer], hotmigrate=True) == []
    # the peer out of MIG mode, or in maintenance mode: nowhere to go
    plain = host("esx-h100-05", [gpu(0), gpu(1)])
    assert len(_esxi.mig_strands(H100_04, OFF_01, [H100_04, plain], hotmigrate=True)) == 2
    away = dict(peer, maintenance_mode=True)
    assert len(_esxi.mig_strands(H100_04, OFF_01, [H100_04, away], hotmigrate=True)) == 2
    # the peer's GPU holds one more 3g.40gb only: one of the two is stranded
    crowded = host("esx-h100-05", [gpu(0, True, [("other", [HALF_MIG])])])
    assert [s["vm"] for s in _esxi.mig_strands(H100_04, OFF_01, [crowded], hotmigrate=True)] == ["inference-3"]


def test_the_turn_is_refused_in_the_plan_naming_host_gpus_vms_profiles_and_the_way_out():
    info = dict(hosts=[H100_04, host("esx-h100-01", [gpu(0), gpu(1)])])
    turns = _esxi.host_turns(info, dict(vars=ROLE, target=FULL, mig={"esx-h100-04": OFF_01}))
    turn = turns["esx-h100-04"]
    assert [s["vm"] for s in turn["stranded"]] == ["inference-2", "inference-3"]
    refusal = turn["refusal"]
    assert refusal.startswith("host esx-h100-04: GPU 0 MIG mode enabled -> disabled, GPU 1 MIG mode enabled -> "
                              "disabled would strand powered-on VMs"), refusal
    for text in ("inference-2 (%s on GPU 0)" % MIG_VGPU, "inference-3 (%s on GPU 1)" % MIG_VGPU,
                 "vSphere would refuse their power-on", "power them off", "keep the MIG mode of GPU 0, 1 of host "
                 "esx-h100-04", "mig_geometry of the cluster in the design (esxi_gpu_host_mig_geometry)",
                 "mapping of host name"):
        assert text in refusal, (text, refusal)
    # the plan says it as its own change, as host_plan says any refusal
    assert [(c.field, c.action, c.reason) for c in turn["changes"] if c.action == "refused"] == [
        ("plan", "refused", refusal)]
    assert turn["plan"]["host"][-1].reason == refusal
    # a turn that strands nothing has no refusal
    fine = _esxi.host_turns(info, dict(vars=ROLE, target=FULL, mig={"esx-h100-04": mig(
        {0: True, 1: True, 2: False, 3: False}, {0: True, 1: False, 2: False, 3: False})}))["esx-h100-04"]
    assert fine["refusal"] is None and fine["stranded"] == []
    assert not [c for c in fine["changes"] if c.action == "refused"]
    # with hot migration and a peer that has room: not refused either
    peer = host("esx-h100-05", [gpu(0, True), gpu(1)])
    moved = _esxi.host_turns(dict(info, hosts=info["hosts"] + [peer], vgpu_hotmigrate=True),
                             dict(vars=ROLE, target=FULL, mig={"esx-h100-04": OFF_01}))["esx-h100-04"]
    assert moved["refusal"] is None
