# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate

from tests.lib.design_edit import cluster, example, tenant


def reserve(d, name, *entries):
    tenant(d, name)["vm_reservations"] = [dict(pool=p, zone=z, count=n) for p, z, n in entries]
    return d


def found(d, rule="vm_reservations_fit"):
    return [f for f in validate(d) if f.rule == rule]


# ---------------------------------------------------------------------------------------
# the design rule
# ---------------------------------------------------------------------------------------


def test_reservations_that_fit_validate_clean():
    # gpu-h100 with one of its 4 hosts spare: training fills 2 hosts, inference 2 cards of the third,
    # whose 2 free cards hold 4 more inference VMs (2 per card)
    d = reserve(example(), "team-search", ("inference", "zone-a", 3))
    reserve(d, "team-vision", ("inference", "zone-b", 1), ("notebooks", "zone-a", 12))
    assert validate(d) == []


def test_a_reservation_too_big_names_tenant_class_zone_count_and_what_fits():
    d = reserve(example(), "team-search", ("inference", "zone-a", 3))
    reserve(d, "team-vision", ("inference", "zone-b", 2))
    f = found(d)
    assert len(f) == 1
    assert f[0].object == "tenants.team-vision"
    assert f[0].severity == "error"
    assert "tenant team-vision reserves 2 VMs of class gpu-inference (pool inference) in zone zone-b; 1 fit on " \
        "gpu-h100 (one host kept spare, 4 hosts x 4 GPUs" in f[0].message
    assert "lower the count to 1" in f[0].fix


def test_a_multi_gpu_reservation_needs_cards_on_one_host():
    # training VMs take 4 cards of one host: the spare-less hosts have 2 free cards at most
    d = reserve(example(), "team-vision", ("training", "zone-a", 1))
    f = found(d)
    assert [x.message.split(";")[1].strip().split(" ")[0] for x in f] == ["0"]


def test_the_spare_host_is_not_counted():
    d = example()
    cluster(d, "gpu-h100")["hosts"] = 5   # a fifth host: its 4 cards take one training VM
    reserve(d, "team-vision", ("training", "zone-a", 1))
    assert found(d) == []
    reserve(d, "team-vision", ("training", "zone-a", 2))
    assert "1 fit on gpu-h100" in found(d)[0].message


def test_a_reservation_needs_a_quota_on_its_pool_and_one_entry_per_zone():
    d = reserve(example(), "team-search", ("notebooks", "zone-a", 1), ("inference", "zone-a", 1),
                ("inference", "zone-a", 1))
    messages = [f.message for f in found(d)]
    assert any("does not offer (no gpu_quota on notebooks)" in m for m in messages)
    assert any("names pool inference in zone zone-a twice" in m for m in messages)


def test_a_reservation_of_an_unknown_pool_is_an_unknown_reference():
    d = reserve(example(), "team-search", ("inferense", "zone-a", 1))
    assert [f.message for f in found(d, "unknown_reference")] == ["vm_reservations names pool inferense, which is "
                                                                  "not in pools"]
    assert found(d) == []


@pytest.mark.parametrize("bad, words", [
    (dict(pool="inference", zone="zone-a", count=-1), "count"),
    (dict(pool="inference", count=1), "zone"),
])
def test_schema_refuses_a_bad_reservation(bad, words):
    d = example()
    tenant(d, "team-search")["vm_reservations"] = [bad]
    schema = [f for f in validate(d) if f.rule == "schema"]
    assert schema and words in schema[0].object


# ---------------------------------------------------------------------------------------
# the API gate
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, refused", [
    ("8.0.3.0", True), ("8.0.2.00300", True), (None, True), ("garbage", True), ("9.0.0.0", False), ("9.1.0.0", False),
])
def test_reserved_vm_classes_need_api_9(version, refused):
    words = vr.refusal(version)
    assert (words is not None) == refused
    if refused:
        assert "API 9.0 or later" in words and "nothing was changed" in words


# ---------------------------------------------------------------------------------------
# wanted state and plans
# ---------------------------------------------------------------------------------------

TENANTS = [
    dict(vm_reservations=[dict(vm_class="gpu-inference", zone="zone-b", count=2),
                          dict(vm_class="gpu-training", zone="zone-a", count=1)]),
    dict(vm_reservations=[dict(vm_class="gpu-inference", zone="zone-b", count=1),
                          dict(vm_class="gpu-notebooks", zone="zone-a", count=0)]),
]
MANAGED = ("gpu-inference", "gpu-training", "gpu-notebooks")


def binding(zone, **counts):
    return dict(zone=zone, type="WORKLOAD", resource_allocation=dict(
        vm_reservations=[dict(reserved_vm_class=k, count=v) for k, v in sorted(counts.items())]))


def test_supervisor_bindings_sum_the_tenants_per_zone():
    wanted = vr.supervisor_bindings(TENANTS)
    assert wanted == [binding("zone-a", **{"gpu-training": 1}), binding("zone-b", **{"gpu-inference": 3})]


def test_binding_plan_creates_updates_and_keeps_foreign_classes():
    wanted = vr.supervisor_bindings(TENANTS)
    plan = vr.plan_bindings("sv-1", [], wanted, MANAGED)
    assert [(c.object, c.field, c.action) for c in plan] == [
        ("supervisor sv-1 zone zone-a", "binding", "create"), ("supervisor sv-1 zone zone-b", "binding", "create")]
    live = [binding("zone-a", **{"gpu-training": 1, "other-class": 5}), binding("zone-b", **{"gpu-inference": 2}),
            binding("zone-c", **{"gpu-inference": 9})]
    plan = vr.plan_bindings("sv-1", live, wanted, MANAGED)
    assert [(c.object, c.field, c.before, c.after) for c in plan] == [
        ("supervisor sv-1 zone zone-b", "vm_reservations", [dict(reserved_vm_class="gpu-inference", count=2)],
         [dict(reserved_vm_class="gpu-inference", count=3)])]
    # converged: no change, other-class and zone-c untouched
    live[1] = binding("zone-b", **{"gpu-inference": 3})
    assert not vr.plan_bindings("sv-1", live, wanted, MANAGED)


def test_binding_plan_removes_a_managed_class_the_design_dropped():
    live = [binding("zone-a", **{"gpu-training": 1, "gpu-notebooks": 4})]
    plan = vr.plan_bindings("sv-1", live, [binding("zone-a", **{"gpu-training": 1})], MANAGED)
    assert [c.after for c in plan] == [[dict(reserved_vm_class="gpu-training", count=1)]]


def test_namespace_zone_plan_sets_reservations_and_the_direct_path_flag():
    wanted = vr.namespace_zones(TENANTS[0]["vm_reservations"], disallow_unreserved=True)
    assert [z["name"] for z in wanted] == ["zone-a", "zone-b"]
    live = [dict(name="zone-a", vm_reservations=[dict(reserved_vm_class="gpu-training", count=1)],
                 disallow_unreserved_direct_path_usage=False)]
    plan = vr.plan_namespace_zones("team-x", live, wanted, MANAGED)
    assert [(c.object, c.field, c.action) for c in plan] == [
        ("namespace team-x zone zone-a", "disallow_unreserved_direct_path_usage", "update"),
        ("namespace team-x zone zone-b", "zone", "create")]
    assert not vr.plan_namespace_zones("team-x", plan.after, wanted, MANAGED)


# ---------------------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------------------


def test_reserved_idle_counts_running_vms_against_their_reservations():
    reservations = [dict(tenant="team-x", vm_class="gpu-inference", zone="zone-a", count=2),
                    dict(tenant="team-x", vm_class="gpu-inference", zone="zone-b", count=1),
                    dict(tenant="team-y", vm_class="gpu-training", zone="zone-a", count=1)]
    running = [dict(tenant="team-x", vm_class="gpu-inference", zone="zone-a"),
               dict(tenant="team-x", vm_class="gpu-inference", zone="zone-a"),
               dict(tenant="team-x", vm_class="gpu-inference", zone="zone-a"),   # beyond: unreserved
               dict(namespace="team-y", vm_class="gpu-training", zone=None)]
    rows = vr.reserved_idle(reservations, running)
    assert [(r["tenant"], r["vm_class"], r["zone"], r["reserved"], r["used"], r["idle"]) for r in rows] == [
        ("team-x", "gpu-inference", "zone-a", 2, 2, 0),
        ("team-x", "gpu-inference", "zone-b", 1, 0, 1),
        ("team-y", "gpu-training", "zone-a", 1, 1, 0)]
