# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The MIG geometry of a design, card by card: derived from the pools when the design gives none,
taken as given otherwise, and the rules that refuse a geometry the pools or a lost host cannot live
with (mig_geometry_valid, mig_geometry_fits, the mode-aware spare_capacity)."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    derived_mig_geometry,
    geometry_positions,
    node_vms,
    place,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import json_schema, normalize

from tests.lib.design_edit import EXAMPLE, cluster, example, pool


@pytest.fixture
def design():
    return example()


def add_cluster(d, name, model, hosts, per_host):
    """A GPU cluster like the example's gpu-h100 (same driver) with another model and size."""
    c = copy.deepcopy(cluster(d, "gpu-h100"))
    c.update(name=name, gpu={"model": model, "per_host": per_host}, hosts=hosts)
    d["clusters"].append(c)
    return c


def add_pool(d, name, cluster_name, shape, sharing, profile, replicas, gpus_per_node=1, **extra):
    p = dict(name=name, shape=shape, cluster=cluster_name, sharing=sharing, vgpu_profile=profile,
             gpus_per_node=gpus_per_node, vm_class={"cpu": 8, "memory_gb": 64}, node_pool={"replicas": replicas})
    if shape == "training":  # preemptible on gpu-training: rule checkpoint_declared wants its checkpoint
        p["checkpoint"] = {"claim_template": "ckpt-{job}", "resume_check": {"annotation": "gpupool.vcf/resumed-from-step"}}
    p.update(extra)
    d["pools"].append(p)
    return p


def errors(d):
    return [f for f in validate(d) if f.severity == "error"]


def by_rule(d, rule):
    return [f for f in validate(d) if f.rule == rule]


def esxi(d, name):
    return derive(d)["esxi"]["clusters"][name]


def model_geometry(d, name):
    """The geometry the capacity model derives for a cluster of a design that need not be valid."""
    ctx = Context(normalize(d)[0])
    return derived_mig_geometry(ctx, ctx.clusters[name])


# ---------------------------------------------------------------------------------------
# derived
# ---------------------------------------------------------------------------------------


def test_the_example_geometry():
    derived = derive(EXAMPLE)
    h100, l40s = derived["esxi"]["clusters"]["gpu-h100"], derived["esxi"]["clusters"]["gpu-l40s"]
    # training 2 x 4 full cards on hosts 1 and 2; inference 4 x 3g.40gb, two per card, on GPUs 0-1 of
    # host 3; the spare host 4 keeps GPUs 0-1 in MIG mode for inference to restart on
    assert h100["mig_geometry"] == [[], [], [0, 1], [0, 1]]
    assert h100["mig_mode"] == "enabled"
    # no MIG-backed pool: one empty entry per host
    assert l40s["mig_geometry"] == [[], [], []] and l40s["mig_mode"] == "disabled"
    role = derived["roles"]["esxi_gpu_host"]
    assert role["gpu-h100"]["esxi_gpu_host_mig_geometry"] == [[], [], [0, 1], [0, 1]]
    assert role["gpu-l40s"]["esxi_gpu_host_mig_geometry"] == [[], [], []]
    # what the role makes of it on the hosts (sorted names: the positions)
    hosts = ["esx-h100-04", "esx-h100-02", "esx-h100-01", "esx-h100-03"]
    assert _esxi.mig_geometry_for(h100["mig_geometry"], hosts) == {
        "esx-h100-01": [], "esx-h100-02": [], "esx-h100-03": [0, 1], "esx-h100-04": [0, 1]}


def test_every_node_vm_has_a_card_of_its_mode_under_the_example_geometry():
    ctx = Context(normalize(EXAMPLE)[0])
    h100 = ctx.clusters["gpu-h100"]
    geometry = derived_mig_geometry(ctx, h100)
    cards, unplaced = place(node_vms(ctx, h100), 4, 4, geometry)
    assert unplaced == []
    mig = dict((name, ctx.profiles[name].mig_backed) for name in ctx.pools)
    for h, host in enumerate(cards):
        for index, card in enumerate(host):
            if card is not None:
                assert mig[card[0]] == (index in geometry[h]), (h, index, card)
    # mode-blind, the first full-card training node would take GPUs 0-3 of a MIG host
    assert place(node_vms(ctx, h100), 4, 4, [[0, 1, 2, 3]] * 4)[1] != []


def test_h200_with_two_mig_profiles_and_full_cards(design):
    add_cluster(design, "gpu-h200", "H200-141GB", hosts=3, per_host=4)
    # preemptible fine-tuning on 2 full cards per node; two protected inference pools of other MIG sizes
    add_pool(design, "finetune", "gpu-h200", "training", "full_card", "nvidia_h200x-141c", 2, gpus_per_node=2)
    add_pool(design, "llm", "gpu-h200", "inference", "mig", "nvidia_h200x-3-71c", 2)      # 2 per card
    add_pool(design, "embed", "gpu-h200", "inference", "mig", "nvidia_h200x-1-18c", 7)    # 7 per card
    assert errors(design) == []
    h200 = esxi(design, "gpu-h200")
    # finetune fills host 1; llm on GPU 0 and embed on GPU 1 of host 2; the spare host 3 takes both
    assert h200["mig_geometry"] == [[], [0, 1], [0, 1]] and h200["mig_mode"] == "enabled"
    # one card fewer on the spare host, given explicitly: losing host 2 strands one of the two pools
    cluster(design, "gpu-h200")["mig_geometry"] = [[], [0, 1], [0]]
    found = by_rule(design, "spare_capacity")
    assert [f.object for f in found] == ["pools.embed"]
    assert found[0].message == (
        "losing host 2 of gpu-h200 (in name order; 4 GPUs, MIG on GPUs 0, 1) leaves 7 of its 7 node VMs without "
        "a GPU in MIG mode (they need 1 GPU in MIG mode; the other hosts have 0 free)")
    assert "clusters.gpu-h200.mig_geometry" in found[0].fix


def test_a100_with_only_mig_pools(design):
    add_cluster(design, "gpu-a100", "A100-80GB", hosts=3, per_host=4)
    add_pool(design, "serve", "gpu-a100", "inference", "mig", "grid_a100d-3-40c", 4)      # 2 cards
    add_pool(design, "labs", "gpu-a100", "notebooks", "mig", "grid_a100d-1-10c", 7)       # 1 card
    assert errors(design) == []
    # host 1 carries everything (labs first: preemptible); the spare host's MIG cards: 2 for serve,
    # and one more because the spare rule places the preemptible labs first
    assert esxi(design, "gpu-a100")["mig_geometry"] == [[0, 1, 2], [], [0, 1, 2]]
    # with only serve's 2 cards on the spare host the rule refuses it, and says why
    cluster(design, "gpu-a100")["mig_geometry"] = [[0, 1, 2], [], [0, 1]]
    found = by_rule(design, "spare_capacity")
    assert [f.object for f in found] == ["pools.serve"]
    assert "losing host 1 of gpu-a100" in found[0].message and "leaves 2 of its 4 node VMs" in found[0].message


def test_eight_gpu_hosts(design):
    add_cluster(design, "gpu-h100x8", "H100-80GB", hosts=3, per_host=8)
    add_pool(design, "big-train", "gpu-h100x8", "training", "full_card", "nvidia_h100-80c", 2, gpus_per_node=8,
             training={"gpus_per_job": 8, "gang_scheduling": True})
    add_pool(design, "chat", "gpu-h100x8", "inference", "mig", "nvidia_h100-1-10c", 20)  # 7 per card: 3 cards
    design["tenants"][0]["gpu_quota"]["big-train"] = 8
    # big-train takes hosts 1 and 2 whole, chat 3 MIG cards of host 3: the spare host is in use
    assert model_geometry(design, "gpu-h100x8") == [[], [], [0, 1, 2]]
    # losing host 3 leaves chat nothing in MIG mode; losing host 1 strands a big-train node (preemptible)
    found = by_rule(design, "spare_capacity")
    assert [f.object for f in found] == ["pools.chat"]
    assert found[0].message.startswith("losing host 3 of gpu-h100x8 (in name order; 8 GPUs, MIG on GPUs 0, 1, 2) "
                                       "leaves 20 of its 20 node VMs without a GPU in MIG mode (they need 3 GPUs")
    # 56 chat nodes: 8 cards of 7, all of host 3 in MIG mode
    pool(design, "chat")["node_pool"]["replicas"] = 56
    assert model_geometry(design, "gpu-h100x8") == [[], [], [0, 1, 2, 3, 4, 5, 6, 7]]


def test_chat_restarts_on_a_spare_with_three_mig_cards(design):
    add_cluster(design, "gpu-h100x8", "H100-80GB", hosts=4, per_host=8)
    add_pool(design, "big-train", "gpu-h100x8", "training", "full_card", "nvidia_h100-80c", 2, gpus_per_node=8,
             training={"gpus_per_job": 8, "gang_scheduling": True})
    add_pool(design, "chat", "gpu-h100x8", "inference", "mig", "nvidia_h100-1-10c", 20)
    design["tenants"][0]["gpu_quota"]["big-train"] = 8
    assert errors(design) == []
    assert esxi(design, "gpu-h100x8")["mig_geometry"] == [[], [], [0, 1, 2], [0, 1, 2]]


def test_a_one_host_cluster(design):
    add_cluster(design, "gpu-lab", "A100-80GB", hosts=1, per_host=4)
    add_pool(design, "lab-notebooks", "gpu-lab", "notebooks", "mig", "grid_a100d-2-20c", 4)   # 3 per card
    add_pool(design, "lab-train", "gpu-lab", "training", "full_card", "grid_a100d-80c", 2)
    assert errors(design) == []
    # no spare host: the MIG cards are the ones the MIG pool uses
    assert esxi(design, "gpu-lab")["mig_geometry"] == [[2, 3]]
    # a protected pool on one host has nowhere to go when it is lost
    pool(design, "lab-train")["node_pool"]["replicas"] = 1
    add_pool(design, "lab-serve", "gpu-lab", "inference", "mig", "grid_a100d-3-40c", 1)
    assert model_geometry(design, "gpu-lab") == [[1, 2, 3]]
    found = dict((f.object, f) for f in by_rule(design, "spare_capacity"))
    assert sorted(found) == ["clusters.gpu-lab", "pools.lab-serve"]      # nor can the role roll it
    assert found["pools.lab-serve"].message.startswith(
        "losing the largest host of gpu-lab (4 GPUs) leaves 1 of its 1 node VMs without a GPU in MIG mode")


def test_a_cluster_without_mig_pools_gets_no_mig(design):
    add_cluster(design, "gpu-full", "H100-80GB", hosts=2, per_host=4)
    add_pool(design, "serve-full", "gpu-full", "inference", "full_card", "nvidia_h100-80c", 2)
    assert errors(design) == []
    full = esxi(design, "gpu-full")
    assert full["mig_geometry"] == [[], []] and full["mig_mode"] == "disabled"


# ---------------------------------------------------------------------------------------
# explicit
# ---------------------------------------------------------------------------------------


def test_an_explicit_geometry_is_taken_as_given(design):
    cluster(design, "gpu-h100")["mig_geometry"] = [[], [], [1, 0, 1][:2], [2, 3]]
    assert errors(design) == []
    h100 = esxi(design, "gpu-h100")
    assert h100["mig_geometry"] == [[], [], [0, 1], [2, 3]]        # sorted, not re-derived
    assert derive(design)["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_mig_geometry"] == h100["mig_geometry"]
    # the mapping form, by host name: hosts not named run no MIG
    cluster(design, "gpu-h100")["mig_geometry"] = {"esx-h100-04": [1, 0], "esx-h100-03": [0, 1]}
    assert errors(design) == []
    h100 = esxi(design, "gpu-h100")
    assert h100["mig_geometry"] == {"esx-h100-03": [0, 1], "esx-h100-04": [0, 1]} and h100["mig_mode"] == "enabled"
    assert list(h100["mig_geometry"]) == ["esx-h100-03", "esx-h100-04"]
    # fewer positions than hosts: the others run no MIG, one entry each (the role enforces MIG off there)
    cluster(design, "gpu-h100")["mig_geometry"] = [[], [], [0, 1], [0, 1, 2]]
    cluster(design, "gpu-h100")["hosts"] = 5
    assert esxi(design, "gpu-h100")["mig_geometry"] == [[], [], [0, 1], [0, 1, 2], []]
    # no MIG at all, given: L40S with [] (or empty entries, or no host named) is fine, every host MIG off
    for none in ([], [[], []], {}):
        cluster(design, "gpu-l40s")["mig_geometry"] = none
        assert errors(design) == []
        assert esxi(design, "gpu-l40s")["mig_geometry"] == [[], [], []]
        assert esxi(design, "gpu-l40s")["mig_mode"] == "disabled"


def test_an_explicit_geometry_that_cannot_hold_the_pools_is_refused(design):
    cluster(design, "gpu-h100")["mig_geometry"] = [[0], [], [], []]
    found = by_rule(design, "mig_geometry_fits")
    assert [f.object for f in found] == ["clusters.gpu-h100"]
    assert found[0].message == (
        "under the given MIG geometry [[0], [], [], []] of gpu-h100, 2 of 6 node VMs find no card of their mode: "
        "inference: 2 node VMs short (they need 1 GPU in MIG mode, 0 free)")
    assert found[0].fix == ("put MIG on 1 more GPU in clusters.gpu-h100.mig_geometry, or remove it to have it "
                            "derived ([[], [], [0, 1], [0, 1]])")
    with pytest.raises(DesignError):
        derive(design)
    # MIG on the cards training needs: one full-card node short, and MIG-off cards named
    cluster(design, "gpu-h100")["mig_geometry"] = [[0], [0], [0], [0]]
    found = by_rule(design, "mig_geometry_fits")
    assert len(found) == 1
    assert ("training: 2 node VMs short (they need 8 GPUs with MIG off, 12 free, at most 3 on one host)"
            in found[0].message)
    assert "inference" not in found[0].message
    assert found[0].fix.startswith("turn MIG off on 8 more GPUs in clusters.gpu-h100.mig_geometry")
    # the spare rule does not pile on a geometry that does not even hold the pools
    assert by_rule(design, "spare_capacity") == []


def test_mig_on_l40s_is_refused(design):
    cluster(design, "gpu-l40s")["mig_geometry"] = [[0], [], []]
    found = by_rule(design, "mig_geometry_valid")
    assert [f.object for f in found] == ["clusters.gpu-l40s"]
    assert found[0].message == "mig_geometry puts MIG on L40S GPUs, which have no MIG mode"
    assert "L40S runs full-card and time-sliced vGPUs only" in found[0].fix
    with pytest.raises(DesignError):
        derive(design)


def test_a_malformed_geometry_is_refused(design):
    c = cluster(design, "gpu-h100")
    c["mig_geometry"] = [[0], [4], [1, 1], [], []]
    messages = [f.message for f in by_rule(design, "mig_geometry_valid")]
    assert messages == ["mig_geometry gives 5 host positions, the cluster has 4 hosts",
                        "mig_geometry position 2: GPU index 4 is not one of the host's 4 GPUs (0-3)",
                        "mig_geometry position 3 lists GPU 1 more than once"]
    c["mig_geometry"] = {"a": [0], "b": [0], "c": [0], "d": [0], "e": [0]}
    assert [f.message for f in by_rule(design, "mig_geometry_valid")] == [
        "mig_geometry names 5 hosts (a, b, c, d, e), the cluster has 4"]
    # the form is the schema's: not a list or a mapping, a negative index, an index that is not a number
    for bad, words in (("all", "is not a list or a mapping"), ([[-1]], "below the minimum 0"),
                       ({"esx-h100-01": ["0"]}, "is not a whole number")):
        c["mig_geometry"] = bad
        schema = [f for f in validate(design) if f.rule == "schema"]
        assert schema and all(f.object.startswith("clusters.gpu-h100.mig_geometry") for f in schema), bad
        assert words in schema[0].message
    # a geometry with an error inside is not used in part: no rule judges what is left of it (the
    # entries after a dropped one would shift to other hosts)
    c["mig_geometry"] = [[0, 1, 2, 3], "x", [0, 1, 2, 3], [0, 1, 2, 3]]
    assert {f.rule for f in validate(design)} == {"schema"}
    assert normalize(design)[0]["clusters"][0]["mig_geometry"] is None


def test_the_json_schema_takes_both_forms():
    node = json_schema()["properties"]["clusters"]["items"]["properties"]["mig_geometry"]
    assert [form.get("type") for form in node["anyOf"]] == ["array", "object", "null"]
    assert node["anyOf"][0]["items"] == {"type": "array", "maxItems": 64, "items": {"type": "integer", "minimum": 0, "maximum": 63}}
    assert node["anyOf"][1]["additionalProperties"]["items"]["minimum"] == 0


def test_positions_of_either_form():
    assert geometry_positions([[1, 0], [0, 0]], 3) == [[0, 1], [0], []]
    assert geometry_positions([[0], [1], [2]], 2) == [[0], [1]]
    assert geometry_positions({"h-2": [3], "h-1": [1]}, 3) == [[1], [3], []]
    assert geometry_positions(None, 2) == [[], []]


# ---------------------------------------------------------------------------------------
# the spare rule, mode-aware
# ---------------------------------------------------------------------------------------


def test_a_spare_host_that_cannot_restart_the_mig_pool_is_refused(design):
    # the example with MIG only where inference runs: losing host 3 leaves it no MIG card
    cluster(design, "gpu-h100")["mig_geometry"] = [[], [], [0, 1], []]
    found = by_rule(design, "spare_capacity")
    assert [f.object for f in found] == ["pools.inference"]
    assert found[0].message == (
        "losing host 3 of gpu-h100 (in name order; 4 GPUs, MIG on GPUs 0, 1) leaves 4 of its 4 node VMs without a "
        "GPU in MIG mode (they need 2 GPUs in MIG mode; the other hosts have 0 free)")
    assert found[0].fix.startswith("keep as many GPUs in MIG mode free on gpu-h100 as inference uses on one host")
    assert by_rule(design, "mig_geometry_fits") == []          # the pools themselves fit
    # the same cards by host name: the same verdict
    cluster(design, "gpu-h100")["mig_geometry"] = {"esx-h100-03": [0, 1]}
    assert [f.object for f in by_rule(design, "spare_capacity")] == ["pools.inference"]
    # MIG on the spare host too (the derived geometry): nothing to report
    cluster(design, "gpu-h100")["mig_geometry"] = [[], [], [0, 1], [0, 1]]
    assert errors(design) == []


def test_preemptible_pools_may_be_left_short(design):
    # the example's geometry: losing host 1 leaves a training node no host with 4 GPUs with MIG off,
    # training is preemptible (a roll drains it): no finding
    cluster(design, "gpu-h100")["mig_geometry"] = [[], [], [0, 1], [0, 1]]
    assert by_rule(design, "spare_capacity") == []


def test_a_uniform_geometry_speaks_of_the_largest_host(design):
    # training made protected and the MIG pool gone: every host alike, no MIG
    design["pools"] = [p for p in design["pools"] if p["name"] != "inference"]
    for t in design["tenants"]:
        t["gpu_quota"].pop("inference", None)
    design["priorities"]["gpu-critical"] = {"value": 200000, "preemption_policy": "PreemptLowerPriority"}
    pool(design, "training")["priority"] = "gpu-critical"
    pool(design, "training")["node_pool"]["replicas"] = 4
    found = [f for f in by_rule(design, "spare_capacity") if f.object.startswith("pools.")]
    assert [f.message for f in found] == [
        "losing the largest host of gpu-h100 (4 GPUs) leaves 1 of its 4 node VMs without a GPU"]
    assert model_geometry(design, "gpu-h100") == [[], [], [], []]
