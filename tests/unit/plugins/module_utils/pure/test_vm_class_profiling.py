# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Profiling counters in the guest: the VM class's pciPassthru<n>.cfg.enable_profiling, from the design to the audit."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _profiling
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate

from tests.lib.design_edit import example

WANT = dict(name="gpu-mig", cpu_count=8, memory_mb=65536, vgpu_profiles=["nvidia_h100-3-40c", "nvidia_h100-3-40c"])


def _live(after):
    """The class as the API returns it after a create in the config_spec form."""
    body = vmc.request_body("gpu-mig", after, "config_spec", create=True)
    return vmc.normalize(dict(body, memory_mb=body["memory_MB"]))


def test_the_spec_sets_the_parameter_for_each_vgpu():
    after = vmc.merge(None, vmc.desired(dict(WANT, profiling=True)))
    spec = vmc.vgpu_config_spec(after)
    assert spec["extraConfig"] == [
        {"_typeName": "OptionValue", "key": "pciPassthru0.cfg.enable_profiling", "value": "1"},
        {"_typeName": "OptionValue", "key": "pciPassthru1.cfg.enable_profiling", "value": "1"}]
    assert _live(after)["profiling"] is True


def test_off_or_unset_writes_nothing_and_a_class_without_vgpu_has_none():
    for asked in (False, None):
        after = vmc.merge(None, vmc.desired(dict(WANT, profiling=asked)))
        assert after["profiling"] is False and "extraConfig" not in vmc.vgpu_config_spec(after)
    plain = vmc.merge(None, vmc.desired(dict(name="cpu-only", cpu_count=2, memory_mb=4096, vgpu_profiles=[], profiling=True)))
    assert plain["profiling"] is False and "extraConfig" not in vmc.vgpu_config_spec(plain)


def test_one_vgpu_without_the_parameter_reads_as_off():
    after = vmc.merge(None, vmc.desired(dict(WANT, profiling=True)))
    spec = vmc.vgpu_config_spec(after)
    spec["extraConfig"] = spec["extraConfig"][:1]
    assert vmc.normalize(dict(cpu_count=8, memory_MB=65536, config_spec=spec))["profiling"] is False
    spec["extraConfig"] = [dict(spec["extraConfig"][0], value="0"),
                           {"key": "pciPassthru1.cfg.enable_profiling", "value": "1"}]
    assert vmc.normalize(dict(cpu_count=8, memory_MB=65536, config_spec=spec))["profiling"] is False


def test_differs_finds_it_missing_and_unset_keeps_it():
    current = _live(vmc.merge(None, vmc.desired(dict(WANT, profiling=False))))
    assert vmc.differs(current, vmc.merge(current, vmc.desired(dict(WANT, profiling=True)))) == ["profiling"]
    assert vmc.differs(current, vmc.merge(current, vmc.desired(WANT))) == []
    on = _live(vmc.merge(None, vmc.desired(dict(WANT, profiling=True))))
    assert vmc.merge(on, vmc.desired(WANT))["profiling"] is True
    assert vmc.differs(on, vmc.merge(on, vmc.desired(dict(WANT, profiling=False)))) == ["profiling"]


def test_bad_value_and_the_devices_form_are_refused():
    with pytest.raises(vmc.VmClassError, match="profiling must be true or false"):
        vmc.desired(dict(WANT, profiling="yes"))
    after = vmc.merge(None, vmc.desired(dict(WANT, profiling=True)))
    with pytest.raises(vmc.VmClassError, match="needs the config_spec form"):
        vmc.request_body("gpu-mig", after, "devices", create=True)
    off = vmc.merge(None, vmc.desired(WANT))
    assert vmc.request_body("gpu-mig", off, "devices", create=True)["devices"]["vgpu_devices"]


@pytest.mark.parametrize("sharing, asked, flag, problem", [
    ("mig", None, True, False), ("full_card", None, True, False), ("time_sliced", None, False, False),
    ("mig", False, False, False), ("full_card", True, True, False), ("time_sliced", False, False, False),
    ("time_sliced", True, False, True),
])
def test_the_pool_rule(sharing, asked, flag, problem):
    pool = dict(name="p", sharing=sharing, profiling=asked)
    assert _profiling.pool_profiling(pool) is flag
    assert bool(_profiling.problem(pool)) is problem


def test_the_design_turns_it_on_where_supported_and_refuses_it_on_time_sliced():
    d = example()
    classes = dict((c["pool"], c) for c in derive(d)["vsphere"]["vm_classes"])
    for p in d["pools"]:
        assert classes[p["name"]]["profiling"] is (p["sharing"] in ("mig", "full_card")), p["name"]
    on = [p for p in d["pools"] if p["sharing"] != "time_sliced"][0]
    on["profiling"] = False
    assert [c for c in derive(d)["vsphere"]["vm_classes"] if c["pool"] == on["name"]][0]["profiling"] is False
    sliced = [p for p in d["pools"] if p["sharing"] == "time_sliced"][0]
    sliced["profiling"] = True
    found = [f for f in validate(d) if f.rule == "profiling_supported"]
    assert len(found) == 1 and sliced["name"] in found[0].object and "time_sliced" in found[0].message
