"""Pure logic of resuming a host: the collection's record, running vs staged, the waiter and backoff."""
import datetime

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import backoff_delays
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereConnectionError,
    VsphereTaskError,
    wait,
)
from tests.lib.clock import Clock

BOOT = datetime.datetime(2026, 11, 30, 2, 0, tzinfo=datetime.timezone.utc)
LATER = BOOT + datetime.timedelta(minutes=20)


@pytest.mark.parametrize("value, expected", [
    ("", {}), (None, {}), ("not json", {}), ("[1, 2]", {}), ('"text"', {}),
    ('{"maintenance": "esxi_host_driver 2026-11-30T02:00:00Z"}', {"maintenance": "esxi_host_driver 2026-11-30T02:00:00Z"}),
])
def test_parse_host_state(value, expected):
    assert _esxi.parse_host_state(value) == expected


def test_format_host_state_drops_empty_keys_and_is_stable():
    assert _esxi.format_host_state({"maintenance": None, "powered_off": []}) == ""
    text = _esxi.format_host_state({"powered_off": ["vm-2"], "maintenance": "x"})
    assert text == '{"maintenance":"x","powered_off":["vm-2"]}'
    assert _esxi.parse_host_state(text) == {"maintenance": "x", "powered_off": ["vm-2"]}


def test_nothing_pending_on_a_clean_host():
    assert _esxi.pending_reboot(False, BOOT, {}, running="550.90.05", installed="550.90.05-1OEM.800.1.0.20613240") == []


def test_staged_driver_named_with_both_versions():
    reasons = _esxi.pending_reboot(True, BOOT, {}, running="550.54.10", installed="550.90.05-1OEM.800.1.0.20613240")
    assert reasons == ["driver 550.90.05 installed but 550.54.10 running (staged, not running until a reboot)"]


def test_reboot_required_without_versions_is_still_pending():
    assert _esxi.pending_reboot(True, BOOT, {}) == ["reboot pending on the host (staged software not running)"]


def test_module_options_pending_until_the_host_boots_again():
    state = {"options_boot": _esxi.boot_stamp(BOOT)}
    assert _esxi.pending_reboot(False, BOOT, state) == [
        "nvidia module options changed since the last boot (not loaded until a reboot)"]
    # the host rebooted since: the options are loaded, the stale record means nothing
    assert _esxi.pending_reboot(False, LATER, state) == []


HOST = dict(name="esx-01", connection_state="connected", gpu_count=2, vgpu_profiles=["nvidia_l40s-24q"],
            gpus=[{"pci_id": "0000:3b:00.0"}], errors=[], maintenance_mode=False,
            driver={"version": "550.90.05", "full_version": "550.90.05-1OEM.800.1.0.20613240"})


def test_host_at_the_design_has_no_turn():
    assert _esxi.host_changes(dict(HOST), "550.90.05") == []


def test_pending_reboot_gives_the_host_its_turn():
    host = dict(HOST, reboot_pending=["reboot pending on the host (staged software not running)"])
    assert _esxi.reasons(_esxi.host_changes(host, "550.90.05")) == ["reboot pending on the host (staged software not running)"]


def test_maintenance_left_by_an_earlier_run_gives_the_host_its_turn():
    host = dict(HOST, maintenance_mode=True, maintenance_by_collection="esxi_host_driver 2026-11-30T02:00:00Z")
    assert _esxi.reasons(_esxi.host_changes(host, "550.90.05")) == [
        "left in maintenance mode by an earlier run (esxi_host_driver 2026-11-30T02:00:00Z)"]
    # an administrator's maintenance mode is not the collection's to end
    assert _esxi.host_changes(dict(HOST, maintenance_mode=True), "550.90.05") == []


def test_vms_left_off_give_the_host_its_turn():
    host = dict(HOST, vms_powered_off_by_collection=["vm-41"])
    assert _esxi.reasons(_esxi.host_changes(host, "550.90.05")) == ["VMs an earlier run powered off and did not power on: vm-41"]


def test_backoff_doubles_to_the_bound_with_jitter():
    delays = backoff_delays(1.0, 8.0, rand=lambda: 1.0)
    assert [next(delays) for _i in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    low = backoff_delays(1.0, 8.0, rand=lambda: 0.0)
    assert [next(low) for _i in range(3)] == [0.5, 1.0, 2.0]


def test_wait_outlasts_transient_errors_and_returns_the_value():
    clock = Clock()
    answers = iter([VsphereConnectionError("refused"), (False, "running"), VsphereConnectionError("503"), (True, 42)])

    def check():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait(check, 60, "install", transient=(VsphereConnectionError,), sleep=clock.sleep, clock=clock) == 42


def test_wait_names_the_last_state_at_the_deadline():
    clock = Clock()

    def check():
        raise VsphereConnectionError("refused")

    with pytest.raises(VsphereTaskError, match=r"install did not finish within 5s \(last state: unreachable: refused\)"):
        wait(check, 5, "install", transient=(VsphereConnectionError,), sleep=clock.sleep, clock=clock)
    assert clock.now >= 5


def test_wait_does_not_swallow_other_errors():
    clock = Clock()

    def check():
        raise VsphereTaskError("install failed: depot unreachable")

    with pytest.raises(VsphereTaskError, match="depot unreachable"):
        wait(check, 60, "install", transient=(VsphereConnectionError,), sleep=clock.sleep, clock=clock)


def test_vms_left_off_are_judged_from_their_power_state_now():
    on = dict(HOST, vms_powered_off_by_collection=["vm-41"],
              vgpu_vms=[{"name": "llm-01", "moid": "vm-41", "power_state": "poweredOn"}])
    assert _esxi.host_changes(on, "550.90.05") == []
    off = dict(on, vgpu_vms=[{"name": "llm-01", "moid": "vm-41", "power_state": "poweredOff"}])
    assert _esxi.reasons(_esxi.host_changes(off, "550.90.05")) == ["VMs an earlier run powered off and did not power on: llm-01"]
    moved = dict(on, vgpu_vms=[])
    assert _esxi.host_changes(moved, "550.90.05") == []
