"""Host MIG mode: what the GPUs need, and the roll's plan items for a host whose mode differs."""

from __future__ import annotations

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import EsxiError

H100 = "0, 00000000:3B:00.0, Disabled, Disabled\n1, 00000000:5E:00.0, Disabled, Enabled\n2, 00000000:86:00.0, Enabled, Enabled\n"
L40S = "0, 00000000:3B:00.0, [N/A], [N/A]\n1, 00000000:5E:00.0, [N/A], [N/A]\n"


def test_query_rows_say_whether_the_gpu_has_mig():
    assert [r["supported"] for r in _esxi.parse_mig_query(L40S)] == [False, False]
    assert [r["supported"] for r in _esxi.parse_mig_query(H100)] == [True, True, True]


def test_plan_sets_what_is_not_pending_and_resets_what_is_not_running():
    plan = _esxi.mig_plan(_esxi.parse_mig_query(H100), True)
    assert plan == dict(set=[0], reset=[0, 1], before={0: False, 1: False, 2: True})
    assert _esxi.mig_plan(_esxi.parse_mig_query(H100), False) == dict(set=[1, 2], reset=[2], before={0: False, 1: False, 2: True})
    assert _esxi.mig_plan(_esxi.parse_mig_query(H100), True, [2]) == dict(set=[], reset=[], before={2: True})


def test_gpus_without_mig_are_left_alone_when_disabling_and_refused_when_enabling():
    assert _esxi.mig_plan(_esxi.parse_mig_query(L40S), False) == dict(set=[], reset=[], before={})
    with pytest.raises(EsxiError, match="GPU 0, 1 cannot run MIG"):
        _esxi.mig_plan(_esxi.parse_mig_query(L40S), True)
    with pytest.raises(EsxiError, match="no GPU with index 7"):
        _esxi.mig_plan(_esxi.parse_mig_query(H100), True, [7])
    with pytest.raises(EsxiError):
        _esxi.mig_plan([], "yes")


def test_a_host_whose_mig_mode_differs_takes_its_turn_in_maintenance_mode():
    host = {"name": "a", "gpu_count": 4, "connection_state": "connected", "driver": {"version": "550.90.05"},
            "vgpu_profiles": ["x"]}
    mig = {"a": {"before": {"0": "disabled"}, "after": "enabled", "reason": "MIG mode disabled -> enabled on GPU 0"}}
    items = _esxi.hosts_to_roll([host], "550.90.05", mig=mig)["a"]
    assert [(i.field, i.action, i.reason) for i in items] == [
        ("mig_mode", "set", "MIG mode disabled -> enabled on GPU 0")]
    assert _esxi.needs_maintenance(items, reboot=False)
    assert _esxi.hosts_to_roll([host], "550.90.05", mig={}) == {}
