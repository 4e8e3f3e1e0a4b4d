"""Pure ESXi host logic: driver versions, plans, fleet decisions, graphics and scheduler plans, MIG commands."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import EsxiError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change

FULL = "550.90.05-1OEM.800.1.0.20613240"


@pytest.mark.parametrize("a,b,expected", [
    ("550.90.05", "550.54.10", 1),
    ("550.54.10", "550.90.05", -1),
    ("550.90.05", FULL, 0),
    ("535.161.08", "550.54.10", -1),
    ("550.90", "550.90.0", 0),
    ("550.100.01", "550.90.05", 1),  # numbers, not strings
    ("550.90.05-1OEM.800.1.0.20613240", "550.90.05-1OEM.800.1.0.20613241", -1),
])
def test_compare_versions(a, b, expected):
    assert _esxi.compare_versions(a, b) == expected


@pytest.mark.parametrize("bad", ["", "latest", "550", "550.90.05.1", "v550.90.05", "550.90.05-", None, 550])
def test_malformed_version(bad):
    with pytest.raises(EsxiError, match="Invalid NVIDIA driver version"):
        _esxi.parse_driver_version(bad)


def test_short_forms():
    v = _esxi.parse_driver_version(FULL)
    assert v.short == "550.90.05" and v.numbers == (550, 90, 5) and v.suffix == "1OEM.800.1.0.20613240"


def test_driver_plan():
    assert _esxi.driver_plan(None, "550.90.05") == "install"
    assert _esxi.driver_plan(FULL, "550.90.05") == "none"
    assert _esxi.driver_plan("550.54.10", "550.90.05") == "upgrade"
    with pytest.raises(EsxiError, match="allow_downgrade"):
        _esxi.driver_plan("550.90.05", "550.54.10")
    assert _esxi.driver_plan("550.90.05", "550.54.10", allow_downgrade=True) == "downgrade"
    with pytest.raises(EsxiError):
        _esxi.driver_plan("550.54.10", "bogus")


def test_version_from_bundle():
    assert _esxi.version_from_bundle("https://d/x/NVD-AIE-800_%s_23912345.zip" % FULL) == FULL
    assert _esxi.version_from_bundle("[ds] NVD-AIE_ESXi_8.0.0_Driver_%s.vib" % FULL) == FULL
    assert _esxi.version_from_bundle("https://d/x/driver.zip") is None
    assert _esxi.version_from_bundle(None) is None


def test_bundle_location():
    assert _esxi.bundle_location("[datastore1] nv/NVD.zip") == ("bundle", "/vmfs/volumes/datastore1/nv/NVD.zip")
    assert _esxi.bundle_location("https://depot/NVD.zip") == ("bundle", "https://depot/NVD.zip")
    assert _esxi.bundle_location("/vmfs/volumes/ds/x.vib") == ("vib", "/vmfs/volumes/ds/x.vib")
    with pytest.raises(EsxiError, match="no driver bundle given"):
        _esxi.bundle_location(None)
    with pytest.raises(EsxiError, match="Invalid bundle"):
        _esxi.bundle_location("relative/path.zip")
    with pytest.raises(EsxiError, match=r"\.zip"):
        _esxi.bundle_location("https://depot/readme.txt")


def test_bundle_must_match_target():
    b = "[ds] NVD-AIE-800_550.54.10-1OEM.800.1.0.20613240_1.zip"
    with pytest.raises(EsxiError, match="holds NVIDIA driver 550.54.10"):
        _esxi.check_bundle_matches(b, "550.90.05")
    assert _esxi.check_bundle_matches(b, "550.54.10") == "550.54.10-1OEM.800.1.0.20613240"
    assert _esxi.check_bundle_matches("https://d/custom.zip", "550.54.10") is None


def test_design_version_majority_never_the_rebuilt_host():
    versions = {"a": "550.90.05", "b": "550.90.05", "c": "550.54.10", "rebuilt": "550.54.10"}
    assert _esxi.design_version(versions, exclude=["rebuilt"]) == "550.90.05"
    assert _esxi.design_version(versions, target="550.54.10") == "550.54.10"
    with pytest.raises(EsxiError, match="no majority"):
        _esxi.design_version({"a": "550.90.05", "b": "550.54.10"})
    with pytest.raises(EsxiError, match="no other GPU host"):
        _esxi.design_version({"rebuilt": "550.54.10"}, exclude=["rebuilt"])


def test_version_gate():
    assert _esxi.version_gate({"a": "550.90.05", "b": "550.90.05"}) == "550.90.05"
    assert _esxi.version_gate({"a": "550.90.05", "b": "550.54.10"}, target="550.90.05") == "550.90.05"
    with pytest.raises(EsxiError) as err:
        _esxi.version_gate({"a": "550.90.05", "b": "550.54.10", "c": "550.90.05"})
    assert "550.54.10 on b; 550.90.05 on a, c" in str(err.value)
    with pytest.raises(EsxiError, match="no NVIDIA driver on x"):
        _esxi.version_gate({"x": None})


def test_roll_capacity():
    ok, msg = _esxi.roll_capacity({"a": 4, "b": 4, "c": 4}, min_gpus=8)
    assert ok and "8 of 12" in msg
    ok, msg = _esxi.roll_capacity({"a": 4, "b": 4}, min_gpus=8)
    assert not ok and "fewer than the 8" in msg
    ok, msg = _esxi.roll_capacity({"a": 4, "b": 4}, min_gpus=8, force=True)
    assert ok and "forced" in msg
    ok, _message = _esxi.roll_capacity({"a": 4, "b": 4, "c": 4}, min_gpus=8, unavailable=["c"])
    assert not ok


CUR = dict(default_type="shared", assignment_policy="performance", device_types={"0000:3b:00.0": "shared"})


def test_graphics_plan():
    desired, changes = _esxi.graphics_plan(CUR, ["0000:3b:00.0", "0000:5e:00.0"], "shared_direct", "consolidation")
    assert desired == dict(default_type="shared_direct", assignment_policy="consolidation",
                           device_types={"0000:3b:00.0": "shared_direct", "0000:5e:00.0": "shared_direct"})
    assert len(changes) == 4
    # only what is asked is compared
    desired, changes = _esxi.graphics_plan(CUR, ["0000:3b:00.0"], None, "performance")
    assert changes == [] and desired["default_type"] == "shared"
    with pytest.raises(EsxiError):
        _esxi.graphics_plan(CUR, [], "vsga", None)
    assert _esxi.vim_graphics_type("shared_direct") == "sharedDirect"


def test_one_graphics_map_two_directions():
    assert _esxi.GRAPHICS_API_BY_WORD == {"shared_direct": "sharedDirect", "shared": "shared"}
    for word, api in _esxi.GRAPHICS_API_BY_WORD.items():
        assert _esxi.vim_graphics_type(word) == api and _esxi.graphics_word(api) == word
    assert _esxi.GRAPHICS_WORDS == ("shared_direct", "shared")
    # values neither side knows are passed on as they are
    assert _esxi.graphics_word("basic") == "basic" and _esxi.vim_graphics_type("vsga") == "vsga"


def test_scheduler_plan_merges_and_is_idempotent():
    new, changed = _esxi.scheduler_plan("NVreg_EnableMSI=1", {"policy": "equal_share", "time_slice_ms": 3})
    assert changed and new == "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00030001"
    again, changed = _esxi.scheduler_plan(new, {"policy": "equal_share", "time_slice_ms": 3})
    assert not changed and again == new
    # per GPU only: the all-GPU value stays
    per, changed = _esxi.scheduler_plan(new, {"per_gpu": [{"pci_id": "0000:3b:00.0", "policy": "fixed_share"}]},
                                        gpu_pci_ids=["0000:3b:00.0"])
    assert changed and "RmPVMRL=0x00030001" in per and "pci=0000:3b:00.0;RmPVMRL=0x00000011" in per
    # nothing asked: nothing changes
    assert _esxi.scheduler_plan(new, {}) == (new, False)


@pytest.mark.parametrize("sched,match", [
    ({"policy": "fixed_share", "time_slice_ms": 0}, "outside 1-30"),
    ({"policy": "fixed_share", "time_slice_ms": 31}, "outside 1-30"),
    ({"policy": "best_effort", "time_slice_ms": 3}, "best_effort takes no time_slice_ms"),
    ({"policy": "round_robin"}, "unknown scheduler policy"),
    ({"per_gpu": [{"pci_id": "0000:99:00.0", "policy": "equal_share"}]}, "no NVIDIA GPU at PCI address"),
    ({"per_gpu": [{"pci_id": "zz", "policy": "equal_share"}]}, "per_gpu"),
])
def test_scheduler_bad_input(sched, match):
    with pytest.raises(EsxiError, match=match):
        _esxi.scheduler_plan("", sched, gpu_pci_ids=["0000:3b:00.0"])


def test_fixed_share_on_mixed_sizes_refused():
    mixed = {"0000:3b:00.0": ["nvidia_h100-20c", "nvidia_h100-40c"], "0000:5e:00.0": ["nvidia_h100-20c"]}
    with pytest.raises(EsxiError, match="0000:3b:00.0.*mixed sizes"):
        _esxi.scheduler_plan("", {"policy": "fixed_share"}, profiles_by_gpu=mixed)
    # equal share is fine; fixed share only on the uniform GPU is fine
    assert _esxi.scheduler_plan("", {"policy": "equal_share"}, profiles_by_gpu=mixed)[1]
    assert _esxi.scheduler_plan("", {"per_gpu": [{"pci_id": "0000:5e:00.0", "policy": "fixed_share"}]},
                                profiles_by_gpu=mixed)[1]


def test_mig_mode_commands():
    assert _esxi.mig_mode_commands(True) == ["nvidia-smi -mig 1"]
    assert _esxi.mig_mode_commands(False, [0, 3]) == ["nvidia-smi -i 0 -mig 0", "nvidia-smi -i 3 -mig 0"]
    with pytest.raises(EsxiError):
        _esxi.mig_mode_commands("yes")
    with pytest.raises(EsxiError):
        _esxi.mig_mode_commands(True, ["0; reboot"])
    rows = _esxi.parse_mig_query("0, 00000000:3B:00.0, Disabled, Enabled\n1, 00000000:5E:00.0, Enabled, Enabled\n")
    assert rows[0] == dict(index=0, pci_id="00000000:3B:00.0", current=False, pending=True, supported=True)
    assert rows[1]["current"] is True


# --- which hosts need their turn -------------------------------------------------------

NEW_FULL = "550.90.05-1OEM.800.1.0.20613240"


def _host(name="esx-01", version="550.90.05", options="NVreg_RegistryDwords=RmPVMRL=0x00030001", **extra):
    host = dict(name=name, connection_state="connected", gpu_count=2, errors=[],
                gpus=[dict(pci_id="0000:3b:00.0"), dict(pci_id="0000:5e:00.0")],
                graphics=dict(default_type="shared_direct", assignment_policy="performance",
                              device_types={"0000:3b:00.0": "shared_direct", "0000:5e:00.0": "shared_direct"}),
                driver=dict(version=version, full_version=version and NEW_FULL.replace("550.90.05", version)),
                nvidia_module_options=options, vgpu_profiles=["nvidia_h100-80c"], vgpu_vms=[])
    host.update(extra)
    return host


EQUAL3 = dict(policy="equal_share", time_slice_ms=3)


def test_host_at_the_design_needs_nothing():
    assert _esxi.host_changes(_host(), "550.90.05", "shared_direct", None, EQUAL3) == []
    assert _esxi.host_changes(_host(), NEW_FULL, "shared_direct", "performance", {}) == []
    assert _esxi.hosts_to_roll([_host(), _host("plain", gpu_count=0)], "550.90.05", "shared_direct", None, EQUAL3) == {}


def _reasons(*args):
    return _esxi.reasons(_esxi.host_changes(*args))


def test_each_difference_is_a_reason():
    assert "upgrade" in _reasons(_host(version="550.54.10"), "550.90.05")[0]
    assert _reasons(_host(version=None), "550.90.05")[0].endswith("(install)")
    graphics = _host()["graphics"]
    graphics["device_types"]["0000:5e:00.0"] = "shared"
    assert _reasons(_host(graphics=graphics), "550.90.05", "shared_direct") == [
        "GPU 0000:5e:00.0 graphics type shared -> shared_direct"]
    assert _reasons(_host(), "550.90.05", None, "consolidation") == [
        "assignment policy performance -> consolidation"]
    assert "nvidia module options" in _reasons(_host(options=""), "550.90.05", None, None, EQUAL3)[0]
    # only what is asked is compared
    assert _esxi.host_changes(_host(options=""), "550.90.05", None, None, {}) == []


def test_plan_items_are_structured():
    items = _esxi.host_changes(_host(version="550.54.10", options=""), NEW_FULL, "shared_direct", "consolidation",
                               EQUAL3)
    assert [(i.field, i.action) for i in items] == [
        ("driver", "upgrade"), ("graphics.assignment_policy", "set"), ("nvidia_module_options", "set")]
    driver = items[0]
    assert driver.before == NEW_FULL.replace("550.90.05", "550.54.10") and driver.after == NEW_FULL
    assert items[1].before == "performance" and items[1].after == "consolidation"
    assert items[2].before == "" and items[2].after == "NVreg_RegistryDwords=RmPVMRL=0x00030001"
    graphics = _host()["graphics"]
    graphics["device_types"]["0000:5e:00.0"] = "shared"
    item = _esxi.host_changes(_host(graphics=graphics), "550.90.05", "shared_direct")[0]
    assert item == Change("host esx-01", "graphics.device_type", "shared", "shared_direct", "set",
                          "GPU 0000:5e:00.0 graphics type shared -> shared_direct", gpu="0000:5e:00.0")
    assert item.to_dict() == {"object": "host esx-01", "field": "graphics.device_type", "before": "shared",
                              "after": "shared_direct", "action": "set", "gpu": "0000:5e:00.0",
                              "reason": "GPU 0000:5e:00.0 graphics type shared -> shared_direct"}
    assert Change.from_dict(item.to_dict()) == item
    known = dict(_esxi.HOST_PLAN)
    for i in items + [item]:
        assert i.action in known[i.field]


def test_what_cannot_be_judged_rolls_the_host():
    assert _reasons(_host(connection_state="notResponding"), "550.90.05") == ["host is notResponding"]
    assert "downgrade" in _reasons(_host(version="560.28.03"), "550.90.05")[0]
    assert _esxi.host_changes(_host(version="560.28.03"), "550.90.05")[0].action == "refused"
    no_module = _host()
    del no_module["nvidia_module_options"]
    assert _reasons(no_module, "550.90.05", None, None, EQUAL3) == ["nvidia module options not available"]
    assert _reasons(_host(vgpu_profiles=[]), "550.90.05") == ["no vGPU profiles offered (driver not loaded)"]
    fixed = _host(options="NVreg_RegistryDwords=RmPVMRL=0x11",
                  vgpu_vms=[dict(name="vm", power_state="poweredOn", vgpu_profiles=["nvidia_h100-40c"])])
    assert "fixed share" in _reasons(fixed, "550.90.05", None, None, dict(policy="fixed_share"))[0]
    assert _esxi.host_changes(_host(options="NVreg_RegistryDwords=RmPVMRL=0x11"), "550.90.05", None, None,
                              dict(policy="fixed_share")) == []
    # options that cannot be merged are refused as an item of the plan, not an exception
    bad = _esxi.host_plan(_host(options="NVreg_RegistryDwords=RmPVMRL=0x11;RmPVMRL=0x01"), "550.90.05", None, None,
                          EQUAL3)
    assert [(i.field, i.action) for i in bad] == [("nvidia_module_options", "refused")]
    assert "RmPVMRL" in bad[0].reason
    refused = _esxi.host_plan(_host(), "550.90.05", "vsga")
    assert [(i.field, i.action) for i in refused] == [("plan", "refused")] and "vsga" in refused[0].reason


def test_hosts_to_roll_only_and_always():
    hosts = [_host("a"), _host("b", version="550.54.10"), _host("c", version="550.54.10")]
    assert sorted(_esxi.hosts_to_roll(hosts, "550.90.05")) == ["b", "c"]
    assert sorted(_esxi.hosts_to_roll(hosts, "550.90.05", only=["a", "b"])) == ["b"]
    assert sorted(_esxi.hosts_to_roll(hosts, "550.90.05", always=True)) == ["a", "b", "c"]
    assert [i.field for i in _esxi.hosts_to_roll(hosts, "550.90.05", always=True)["a"]] == ["mig_mode"]


def test_vlcm_lifecycle_leaves_the_driver_out():
    hosts = [_host("a", version="550.54.10"), _host("b", version="550.54.10", options="")]
    assert sorted(_esxi.hosts_to_roll(hosts, "550.90.05", scheduler=EQUAL3, driver=False)) == ["b"]


def test_version_gate_reads_versions_as_driver_versions():
    # a short and a full spelling of one driver are one version (grouped as raw text they were two)
    assert _esxi.version_gate({"a": "550.90.05", "b": NEW_FULL}) == "550.90.05"
    with pytest.raises(EsxiError, match="550.54.10 on b; 550.90.05 on a"):
        _esxi.version_gate({"a": NEW_FULL, "b": "550.54.10-1OEM.800.1.0.20613240"})
    with pytest.raises(EsxiError, match="Invalid NVIDIA driver version"):
        _esxi.version_gate({"a": "latest"})


def test_needs_maintenance_only_for_steps_that_take_the_host_down():
    def item(field, before, after, action, reason):
        return Change("host a", field, before, after, action, reason)

    graphics = [item("graphics.default_type", "shared", "shared_direct", "set", "graphics")]
    options = [item("nvidia_module_options", None, "RmPVMRL=0x1", "set", "scheduler")]
    assert _esxi.needs_maintenance(graphics) is False
    assert _esxi.needs_maintenance(graphics + [item("driver", "550.54.10", "550.90.05", "upgrade", "driver")]) is True
    assert _esxi.needs_maintenance([item("mig_mode", None, None, "set", "mig")], reboot=False) is True
    assert _esxi.needs_maintenance(options) is True
    assert _esxi.needs_maintenance(options, reboot=False) is False  # the options wait for a reboot the roll does not do
    assert _esxi.needs_maintenance([item("reboot", "pending", "done", "reboot", "owed")]) is True
    assert _esxi.needs_maintenance([item("vms_powered_off", ["a"], [], "power_on", "left off")]) is False
    assert _esxi.needs_maintenance([]) is False


def test_vms_going_down_are_the_powered_on_vgpu_vms_unless_vcenter_migrates_them():
    host = {"vgpu_vms": [{"name": "a", "uuid": "u-a", "power_state": "poweredOn", "moid": "vm-1"},
                         {"name": "b", "uuid": "u-b", "power_state": "poweredOff", "moid": "vm-2"}]}
    assert _esxi.vms_going_down(host, hotmigrate=False) == [{"name": "a", "uuid": "u-a"}]
    assert _esxi.vms_going_down(host, hotmigrate=True) == []
    assert _esxi.vms_going_down({}, hotmigrate=False) == []
