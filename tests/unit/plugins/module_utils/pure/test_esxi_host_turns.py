"""_esxi.host_inputs (the one mapping from the esxi_gpu_host role's variables to the host plan) and
_esxi.host_turns (each host's turn planned once per cluster, what the role takes its steps from)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi

FULL = "550.90.05-1OEM.800.1.0.20613240"
OLD = "535.183.04-1OEM.800.1.0.20613240"
A, B = "0000:3b:00.0", "0000:5e:00.0"
BUNDLE = "[datastore1] drivers/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip"


def host(name, version=FULL, vms=(), **kw):
    rec = dict(name=name, gpu_count=2, connection_state="connected", errors=[], maintenance_mode=False,
               gpus=[dict(pci_id=A, vgpu_mode="sameSize", vms=list(vms)), dict(pci_id=B, vgpu_mode="sameSize", vms=[])],
               graphics=dict(default_type="shared_direct", assignment_policy="performance",
                             device_types={A: "shared_direct", B: "shared_direct"}),
               driver=dict(version=version.split("-")[0], full_version=version) if version else None,
               nvidia_module_options="", vgpu_profiles=["nvidia_l40s-8c"],
               vgpu_vms=[dict(name=v, uuid="u-" + v, power_state="poweredOn") for v in vms])
    rec.update(kw)
    return rec


ROLE = dict(esxi_gpu_host_driver_version=FULL, esxi_gpu_host_driver_bundle=BUNDLE, esxi_gpu_host_graphics_type="shared_direct",
            esxi_gpu_host_assignment_policy="", esxi_gpu_host_vgpu_mode="", esxi_gpu_host_scheduler={},
            esxi_gpu_host_allow_downgrade=False, esxi_gpu_host_lifecycle="direct", esxi_gpu_host_reboot=True)


def test_host_inputs_maps_the_role_variables_empty_is_left_alone():
    assert _esxi.host_inputs(ROLE) == dict(target=FULL, graphics_type="shared_direct", assignment_policy=None,
                                           scheduler=None, allow_downgrade=False, vgpu_mode=None)
    sched = {"policy": "equal_share", "time_slice_ms": 3}
    got = _esxi.host_inputs(dict(ROLE, esxi_gpu_host_scheduler=sched, esxi_gpu_host_vgpu_mode="mixed_size",
                                 esxi_gpu_host_allow_downgrade="true"), target="550.54.10")
    assert got["target"] == "550.54.10" and got["scheduler"] == sched and got["vgpu_mode"] == "mixed_size"
    assert got["allow_downgrade"] is True
    # text from the command line (-e) is read as a boolean, not as a non-empty string
    assert _esxi.host_inputs(dict(ROLE, esxi_gpu_host_allow_downgrade="false"))["allow_downgrade"] is False
    assert _esxi.host_inputs({}) == dict(target=None, graphics_type=None, assignment_policy=None, scheduler=None,
                                         allow_downgrade=False, vgpu_mode=None)


def test_host_inputs_are_the_host_plan_arguments():
    # every key is an argument of host_plan and hosts_to_roll: the mapping cannot drift from the plan
    import inspect
    for func in (_esxi.host_plan, _esxi.hosts_to_roll):
        assert set(_esxi.host_inputs(ROLE)) <= set(inspect.signature(func).parameters)
    h = host("a", OLD)
    assert _esxi.host_plan(h, **_esxi.host_inputs(ROLE)) == _esxi.host_plan(h, FULL, "shared_direct")


def test_turns_only_for_hosts_that_change_with_plan_window_and_driver_step():
    info = dict(hosts=[host("a"), host("b", OLD, vms=["node-1"]), host("mgmt", gpu_count=0)])
    turns = _esxi.host_turns(info, dict(vars=ROLE, target=FULL))
    assert sorted(turns) == ["b"]
    b = turns["b"]
    assert [(i.field, i.action) for i in b["changes"]] == [("driver", "upgrade")]
    assert b["reasons"] == ["driver 535.183.04 -> 550.90.05 (upgrade)"]
    assert [i.action for i in b["plan"]["driver"]] == ["upgrade"]
    assert b["plan"]["graphics"] == b["plan"]["mig"] == b["plan"]["scheduler"] == b["plan"]["vgpu_mode"] == []
    assert b["needs_maintenance"] is True and b["gpus_to_empty"] == [] and b["turn_window"]["maintenance"] is True
    assert b["drain_vms"] == [{"name": "node-1", "uuid": "u-node-1"}]
    assert b["driver"] == dict(action="upgrade", previous_version="535.183.04", maintenance_mode=False,
                               stuck_vms=["node-1"], refusal=None)
    # vCenter migrates vGPU VMs: nothing to drain, nothing stuck
    moved = _esxi.host_turns(dict(info, vgpu_hotmigrate=True), dict(vars=ROLE))["b"]
    assert moved["drain_vms"] == [] and moved["driver"]["stuck_vms"] == []


def test_turns_are_the_same_plan_as_hosts_to_roll_and_the_audit_mapping():
    hosts = [host("a", OLD), host("b", graphics=dict(default_type="shared", assignment_policy="performance",
                                                     device_types={A: "shared", B: "shared_direct"})),
             host("c", reboot_pending=["reboot pending on the host (staged software not running)"])]
    turns = _esxi.host_turns(dict(hosts=hosts), dict(vars=ROLE, hosts=["a", "b"]))
    plans = _esxi.hosts_to_roll(hosts, only=["a", "b"], **_esxi.host_inputs(ROLE))
    assert dict((n, t["changes"]) for n, t in turns.items()) == plans
    assert sorted(turns) == ["a", "b"]  # c is not among the hosts asked for
    assert turns["b"]["needs_maintenance"] is False and turns["b"]["drain_vms"] == []
    assert turns["b"]["driver"]["action"] == "none"


def test_mig_change_is_the_last_item_and_takes_maintenance():
    mig = {"a": dict(before={A: False}, after={A: True}, reason="MIG mode: GPU 0 disabled -> enabled")}
    turn = _esxi.host_turns(dict(hosts=[host("a", vms=["n"])]), dict(vars=ROLE, mig=mig))["a"]
    assert [i.field for i in turn["changes"]] == ["mig_mode"]
    assert turn["plan"]["mig"][0].after == {A: True}
    assert turn["needs_maintenance"] and turn["turn_window"]["config_reboots"]
    assert turn["driver"]["action"] == "none" and turn["driver"]["stuck_vms"] == []


def test_vgpu_mode_change_of_a_gpu_in_use_empties_it():
    role = dict(ROLE, esxi_gpu_host_vgpu_mode="mixed_size")
    turn = _esxi.host_turns(dict(hosts=[host("a", vms=["nb-0"])]), dict(vars=role))["a"]
    assert turn["gpus_to_empty"] == [A] and turn["needs_maintenance"]
    assert [i.detail("gpu") for i in turn["plan"]["vgpu_mode"]] == [A, B]
    assert turn["drain_vms"] == [{"name": "nb-0", "uuid": "u-nb-0"}]


@pytest.mark.parametrize("record, action", [
    (dict(reboot_pending=["reboot pending on the host (staged software not running)"]), "reboot"),
    (dict(maintenance_mode=True, maintenance_by_collection="driver"), "exit_maintenance_mode"),
    (dict(vms_powered_off_by_collection=["vm-1"], vgpu_vms=[dict(moid="vm-1", name="n", power_state="poweredOff")]),
     "power_on_vms"),
])
def test_driver_step_names_what_an_earlier_run_left(record, action):
    turn = _esxi.host_turns(dict(hosts=[host("a", **record)]), dict(vars=ROLE))["a"]
    assert turn["driver"]["action"] == action
    # a host an earlier run left in maintenance mode ends out of it
    assert turn["driver"]["maintenance_mode"] is False


def test_driver_step_refusals_are_named_before_any_change():
    downgrade = _esxi.host_turns(dict(hosts=[host("a", "560.35.03-1OEM.800.1.0.20613240")]), dict(vars=ROLE))["a"]
    assert downgrade["driver"]["action"] == "refused" and "allow_downgrade" in downgrade["driver"]["refusal"]
    nobundle = _esxi.host_turns(dict(hosts=[host("a", OLD)]), dict(vars=dict(ROLE, esxi_gpu_host_driver_bundle="")))["a"]
    assert nobundle["driver"]["action"] == "refused" and "no driver bundle" in nobundle["driver"]["refusal"]
    wrong = _esxi.host_turns(dict(hosts=[host("a", OLD)]), dict(vars=dict(
        ROLE, esxi_gpu_host_driver_bundle="[ds] NVD-AIE-800_535.183.04-1OEM.800.1.0.20613240_1.zip")))["a"]
    assert wrong["driver"]["action"] == "refused" and "not the target" in wrong["driver"]["refusal"]
    gone = _esxi.host_turns(dict(hosts=[host("a", connection_state="notResponding")]), dict(vars=ROLE))["a"]
    assert gone["driver"] == dict(action="refused", previous_version="550.90.05", maintenance_mode=False, stuck_vms=[],
                                  refusal="host is notResponding")


def test_no_driver_yet_and_vlcm():
    first = _esxi.host_turns(dict(hosts=[host("a", None)]), dict(vars=ROLE))["a"]
    assert first["driver"]["action"] == "install" and first["driver"]["previous_version"] is None
    # vLCM owns the driver: no esxi_host_driver step, the image's version
    vlcm = dict(ROLE, esxi_gpu_host_lifecycle="vlcm")
    turn = _esxi.host_turns(dict(hosts=[host("a", OLD, maintenance_mode=True)]), dict(vars=vlcm, driver=True))["a"]
    assert turn["driver"] == dict(action="none", previous_version=FULL, maintenance_mode=True, stuck_vms=[], refusal=None)
    # vLCM remediates the whole cluster: the driver is not compared
    assert _esxi.host_turns(dict(hosts=[host("a", OLD)]), dict(vars=vlcm, driver=False)) == {}


def test_one_host_plan_per_gpu_host(monkeypatch):
    """The measure of the issue: each GPU host is planned once per role run (before: the roll filter, the
    driver module in check mode and then for real, three driver plans per host that changes)."""
    calls = []
    real = _esxi.host_plan

    def counting(host, *args, **kwargs):
        calls.append(host["name"])
        return real(host, *args, **kwargs)

    monkeypatch.setattr(_esxi, "host_plan", counting)
    hosts = [host("a"), host("b", OLD), host("c", OLD), host("mgmt", gpu_count=0)]
    turns = _esxi.host_turns(dict(hosts=hosts), dict(vars=ROLE))
    assert sorted(turns) == ["b", "c"]
    assert sorted(calls) == ["a", "b", "c"]


def _steps(items, action="none", reboot=True, vlcm_per_host=False):
    return _esxi.turn_steps(items, _esxi.turn_window(items, reboot), action, reboot, vlcm_per_host)


UPGRADE = dict(field="driver", action="upgrade")
OPTIONS = dict(field="nvidia_module_options", action="set")
MIG = dict(field="mig_mode", action="set")
MODE_IN_USE = dict(field="graphics.vgpu_mode", action="set", gpu=A, vms=["nb-0"], reason="vGPU mode")


def test_turn_steps_the_graphics_step_reboots_only_where_no_later_step_does():
    # scheduler alone: the graphics step reboots; with a driver change, the driver's reboot loads the options
    assert _steps([OPTIONS])["config_reboot"] is True
    assert _steps([UPGRADE, OPTIONS], "upgrade")["config_reboot"] is False
    assert _steps([OPTIONS], reboot=False)["config_reboot"] is False
    # a reboot owed and a MIG change: one window, the graphics step's reboot sets MIG mode too
    owed = _steps([dict(field="reboot", action="reboot"), MIG], "reboot")
    assert owed["config_reboot"] and owed["mig_with_config"] and owed["mig"]
    assert _steps([dict(field="reboot", action="reboot")], "reboot")["config_reboot"] is False
    # vLCM remediates this host in its turn: its reboot loads the options
    vlcm = _steps([UPGRADE, OPTIONS], vlcm_per_host=True)
    assert vlcm["vlcm_host"] and not vlcm["config_reboot"]
    assert not _steps([OPTIONS], vlcm_per_host=True)["vlcm_host"]


def test_turn_steps_the_window_of_a_vgpu_mode_change():
    alone = _steps([MODE_IN_USE])
    assert alone["window_ends_here"] and not alone["config_reboot"]
    # options too: the graphics step's reboot ends the window
    both = _steps([MODE_IN_USE, OPTIONS])
    assert both["config_reboot"] and not both["window_ends_here"]
    # a driver step or a MIG step later ends it
    assert not _steps([MODE_IN_USE, UPGRADE], "upgrade")["window_ends_here"]
    assert not _steps([MODE_IN_USE, MIG])["window_ends_here"]
    assert _steps([])["window_ends_here"] is False


def test_turn_steps_the_graphics_step_runs_only_with_something_to_do():
    # a driver change alone: no graphics step (the role does not call esxi_gpu_config before the driver)
    assert _steps([UPGRADE], "upgrade")["config"] is False
    # a reboot owed: the step runs to report the options it is owed for
    assert _steps([dict(field="reboot", action="reboot")], "reboot")["config"] is True
    assert _steps([dict(field="vms_powered_off", action="power_on")], "power_on_vms")["config"] is False
    # graphics, vGPU mode, scheduler, a graphics read that failed: the step runs (and fails or changes)
    assert _steps([UPGRADE, OPTIONS], "upgrade")["config"] is True
    assert _steps([MODE_IN_USE])["config"] is True
    assert _steps([dict(field="graphics.default_type", action="set")])["config"] is True
    assert _steps([dict(field="graphics", action="refused", reason="not read")])["config"] is True
    # MIG mode in the step's reboot window; without the roll's reboot, MIG has its own step
    assert _steps([dict(field="reboot", action="reboot"), MIG], "reboot")["config"] is True
    assert _steps([MIG], reboot=False)["config"] is False
