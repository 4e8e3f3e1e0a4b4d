"""A vGPU mode change of a GPU in use goes through the roll's maintenance window (the host refuses it under a
powered-on vGPU VM): the plan (host_changes, needs_maintenance, gpus_to_empty, turn_window) says so, and the
esxi_host_drain_vms / esxi_turn_window filters the role uses follow it."""
from ansible_collections.gpupool.vcf.plugins.filter.esxi import esxi_host_drain_vms, esxi_turn_window
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi

A, B = "0000:3b:00.0", "0000:5e:00.0"
VM = {"name": "notebooks-0", "moid": "vm-7", "profiles": ["nvidia_l40s-8c"]}


def host(modes, vms_on=(None, None), **extra):
    """A gpu_host_info record of an L40S host at the design but for the vGPU modes ``modes``; ``vms_on``: the
    VMs on each GPU (None: not read)."""
    gpus = [dict(pci_id=pci, index=i, vgpu_mode=mode, vms=vms) for i, (pci, mode, vms)
            in enumerate(zip((A, B), modes, vms_on))]
    powered_on = [dict(name=v["name"], uuid="u-" + v["name"], moid=v["moid"], power_state="poweredOn")
                  for g in gpus for v in g["vms"] or []]
    record = dict(name="esx-l40s-01", connection_state="connected", errors=[], gpu_count=2, maintenance_mode=False,
                  vgpu_profiles=["nvidia_l40s-8c"], gpus=gpus, vgpu_vms=powered_on, nvidia_module_options="",
                  driver=dict(version="550.90.05", full_version="550.90.05-1OEM.800.1.0.20613240"),
                  graphics=dict(default_type="shared_direct", assignment_policy="performance",
                                device_types={A: "shared_direct", B: "shared_direct"}))
    record.update(extra)
    return record


def plan(record, vgpu_mode="same_size"):
    return _esxi.host_plan(record, "550.90.05", "shared_direct", "performance", vgpu_mode=vgpu_mode)


def test_a_vgpu_mode_only_change_of_a_gpu_in_use_yields_the_drain_window():
    record = host(("mixedSize", "sameSize"), ([VM], []))
    items = plan(record)
    assert [(i.field, i.detail("gpu"), i.before, i.after, i.detail("vms")) for i in items] == [
        ("graphics.vgpu_mode", A, "mixed_size", "same_size", ["notebooks-0"])]
    assert items[0].reason == "GPU %s vGPU mode mixed_size -> same_size (carries VMs notebooks-0)" % A
    assert _esxi.gpus_to_empty(items) == [A]
    assert _esxi.needs_maintenance(items, reboot=False) is True
    assert _esxi.turn_window(items) == dict(maintenance=True, empty_gpus=[A], vgpu_modes=[items[0].reason],
                                            config_reboots=False)
    # the role's filters: the node VM's guest node is drained, the host taken through maintenance mode
    info = dict(hosts=[record], vgpu_hotmigrate=False)
    assert esxi_host_drain_vms(info, "esx-l40s-01", items) == [{"name": "notebooks-0", "uuid": "u-notebooks-0"}]
    assert esxi_turn_window(items)["empty_gpus"] == [A]
    # vCenter migrates vGPU VMs: none goes down, but the host still empties its GPUs in maintenance mode
    assert esxi_host_drain_vms(dict(info, vgpu_hotmigrate=True), "esx-l40s-01", items) == []


def test_no_change_yields_nothing():
    record = host(("sameSize", "sameSize"), ([VM], []))
    items = plan(record)
    assert items == []
    assert _esxi.hosts_to_roll([record], "550.90.05", "shared_direct", "performance", vgpu_mode="same_size") == {}
    assert _esxi.turn_window(items) == dict(maintenance=False, empty_gpus=[], vgpu_modes=[], config_reboots=False)
    assert esxi_host_drain_vms(dict(hosts=[record]), "esx-l40s-01", items) == []
    # the mode not managed: a GPU off any mode is left alone, with its VM
    assert plan(host(("mixedSize", "sameSize"), ([VM], [])), vgpu_mode=None) == []


def test_an_empty_gpu_changes_in_place():
    record = host(("sameSize", "mixedSize"), ([VM], []))
    items = plan(record)
    assert [(i.detail("gpu"), i.detail("vms")) for i in items] == [(B, [])]
    assert items[0].reason == "GPU %s vGPU mode mixed_size -> same_size" % B
    window = _esxi.turn_window(items)
    assert window["empty_gpus"] == [] and window["maintenance"] is False
    assert esxi_host_drain_vms(dict(hosts=[record]), "esx-l40s-01", items) == []


def test_a_gpu_whose_vms_were_not_read_is_emptied_first():
    items = plan(host(("mixedSize", "sameSize")))
    assert _esxi.gpus_to_empty(items) == [A] and _esxi.needs_maintenance(items, reboot=False)


def test_items_without_the_vms_of_the_gpu_are_not_judged_per_gpu():
    # esxi_gpu_config's own comparison (no VM list in its items) refuses a busy GPU itself
    _desired, items = _esxi.graphics_changes(dict(device_types={A: "shared_direct"}, vgpu_modes={A: "mixed_size"}),
                                             [A], vgpu_mode="same_size")
    assert items and _esxi.gpus_to_empty(items) == []


def test_the_graphics_step_reboots_in_the_window_only_for_what_needs_a_reboot():
    record = host(("mixedSize", "sameSize"), ([VM], []), nvidia_module_options="")
    with_options = _esxi.host_plan(record, "550.90.05", vgpu_mode="same_size",
                                   scheduler={"policy": "equal_share", "time_slice_ms": 3})
    assert [i.field for i in with_options] == ["graphics.vgpu_mode", "nvidia_module_options"]
    assert _esxi.turn_window(with_options)["config_reboots"] is True
    assert _esxi.turn_window(with_options, reboot=False)["config_reboots"] is False
    owed = plan(dict(record, reboot_pending=["reboot pending on the host (staged software not running)"]))
    assert _esxi.turn_window(owed)["config_reboots"] is True
    mig = plan(record) + [_esxi.mig_change("esx-l40s-01", None, None, "MIG mode disabled -> enabled on GPU 1")]
    assert _esxi.turn_window(mig)["config_reboots"] is True
    assert _esxi.turn_window(plan(record))["config_reboots"] is False


def test_a_window_left_by_a_failed_run_resumes():
    # an earlier run entered maintenance mode and powered the node VM off, then stopped before the change
    record = host(("mixedSize", "sameSize"), ([], []), maintenance_mode=True,
                  maintenance_by_collection="gpupool.vcf 2026-01-01T00:00:00Z",
                  vms_powered_off_by_collection=["vm-7"],
                  vgpu_vms=[dict(name="notebooks-0", uuid="u-n", moid="vm-7", power_state="poweredOff")])
    items = plan(record)
    assert [(i.field, i.action) for i in items] == [
        ("graphics.vgpu_mode", "set"), ("maintenance_mode", "exit"), ("vms_powered_off", "power_on")]
    # the GPU is empty now: changed in place, then the host leaves maintenance mode and the VM is powered on
    assert _esxi.gpus_to_empty(items) == []
