# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The roll's capacity: which pools a host roll protects (min_gpus) and when the design says,
before any change, that a cluster cannot be rolled one host at a time without force."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    preemptible,
    roll_min_gpus,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import DEFAULT_PRIORITIES, normalize

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
CRITICAL = {"value": 200000, "preemption_policy": "PreemptLowerPriority", "description": "Never drained"}


@pytest.fixture
def design():
    return copy.deepcopy(EXAMPLE)


def pool(d, name):
    return [p for p in d["pools"] if p["name"] == name][0]


def spare(findings):
    return dict((f.object, f) for f in findings if f.rule == "spare_capacity")


def min_gpus(d):
    """min_gpus per cluster; derive() gives it for a valid design, and agrees with the model's."""
    ctx = Context(normalize(d)[0])
    model = dict((name, roll_min_gpus(ctx, c)) for name, c in ctx.clusters.items())
    if not [f for f in validate(d) if f.severity == "error"]:
        assert dict((name, c["min_gpus"]) for name, c in derive(d)["esxi"]["clusters"].items()) == model
    return model


def test_preemptible_from_the_priority_classes():
    priorities = copy.deepcopy(DEFAULT_PRIORITIES)
    assert not preemptible({"shape": "inference", "priority": "gpu-inference"}, priorities)
    assert preemptible({"shape": "training", "priority": "gpu-training"}, priorities)
    # gpu-notebook's own policy is Never (its pods preempt nobody); it is still below preempting classes
    assert preemptible({"shape": "notebooks", "priority": "gpu-notebook"}, priorities)
    # inference is protected whatever its class
    assert not preemptible({"shape": "inference", "priority": "gpu-notebook"}, priorities)
    # training on the highest preempting class, or on an unknown one, is protected
    priorities["gpu-critical"] = CRITICAL
    assert not preemptible({"shape": "training", "priority": "gpu-critical"}, priorities)
    assert not preemptible({"shape": "training", "priority": "nope"}, priorities)
    # no class above preempts: nothing evicts the training pods
    never = dict((k, dict(v, preemption_policy="Never")) for k, v in DEFAULT_PRIORITIES.items())
    assert not preemptible({"shape": "training", "priority": "gpu-training"}, never)


def test_min_gpus_counts_the_protected_pools_only(design):
    # gpu-h100: 2 training nodes x 4 cards (preemptible) + 4 inference nodes, 2 per card: 2 cards
    # gpu-l40s: notebooks only (preemptible): nothing to protect
    assert min_gpus(design) == {"gpu-h100": 2, "gpu-l40s": 0}
    assert derive(design)["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_min_gpus"] == 2
    # training made protected: its 8 cards count too
    design["priorities"]["gpu-critical"] = CRITICAL
    pool(design, "training")["priority"] = "gpu-critical"
    assert min_gpus(design)["gpu-h100"] == 10


def test_a_cluster_whose_training_fills_its_cards_can_be_rolled(design):
    # the case: L40S hosts full of preemptible pods (3 hosts x 2 cards, 36 notebook nodes at 6
    # per card = 6 cards of 6): the design is valid and the roll leaves 4 GPUs for the 0 it protects
    pool(design, "notebooks")["node_pool"]["replicas"] = 36
    assert validate(design) == []
    assert min_gpus(design)["gpu-l40s"] == 0
    allowed, message = _esxi.roll_capacity({"esx-l40s-01": 2, "esx-l40s-02": 2, "esx-l40s-03": 2}, 0)
    assert allowed, message
    # before, min_gpus counted every card used (6): the role refused with 4 of 6 left
    allowed, message = _esxi.roll_capacity({"esx-l40s-01": 2, "esx-l40s-02": 2, "esx-l40s-03": 2}, 6)
    assert not allowed and "would leave 4 of 6 GPUs, fewer than the 6" in message


def test_a_preemptible_pool_short_with_a_host_out_does_not_stop_the_roll(design):
    # 16 inference nodes (8 cards) + 2 training nodes (8 cards) = 16 of 16. With a host out the
    # training VMs would keep their cards (spare finding on the pool), but the roll drains training:
    # 12 GPUs stay for the 8 inference needs, so no cluster finding
    pool(design, "inference")["node_pool"]["replicas"] = 16
    found = spare(validate(design))
    assert list(found) == ["pools.inference"]
    assert "leaves 8 of its 16 node VMs without a GPU" in found["pools.inference"].message
    assert min_gpus(design)["gpu-h100"] == 8


def test_validation_says_when_a_roll_needs_force(design):
    # training on a class nothing preempts is protected: 3 nodes x 4 cards + 2 inference cards = 14
    # GPUs to keep, 12 of 16 stay with a host out: the role would refuse; validation says so first
    design["priorities"]["gpu-critical"] = CRITICAL
    pool(design, "training")["priority"] = "gpu-critical"
    pool(design, "training")["node_pool"]["replicas"] = 3
    found = spare(validate(design))
    # every card keeps its MIG mode: losing host 4 (inference on its MIG GPUs 0-1) strands inference,
    # losing a training host leaves the third training node 2 GPUs with MIG off on host 4, not 4
    assert sorted(found) == ["clusters.gpu-h100", "pools.inference", "pools.training"]
    assert "leaves 1 of its 3 node VMs without a GPU with MIG off" in found["pools.training"].message
    roll = found["clusters.gpu-h100"]
    assert roll.severity == "error"
    assert roll.message == ("the esxi_gpu_host role refuses to roll gpu-h100 one host at a time without "
                            "esxi_gpu_host_force: its protected pools need 14 GPUs, 12 of 16 stay with the largest host out")
    assert "add a host to gpu-h100" in roll.fix
    # the same numbers the role's check gets from the live hosts
    allowed, message = _esxi.roll_capacity(dict(("esx-h100-%02d" % i, 4) for i in range(1, 5)), 14)
    assert not allowed and "would leave 12 of 16 GPUs, fewer than the 14" in message
    # one training node less: 10 GPUs to keep, 12 stay: no roll finding. The pools fit, but not every
    # host loss with the cards' MIG modes fixed: the spare host (MIG on GPUs 0-1 for inference) keeps
    # only 2 GPUs with MIG off for a lost 4-GPU training node
    pool(design, "training")["node_pool"]["replicas"] = 2
    found = spare(validate(design))
    assert list(found) == ["pools.training"]
    assert found["pools.training"].message.startswith("losing host 1 of gpu-h100 (in name order; 4 GPUs, MIG off) "
                                                      "leaves 1 of its 2 node VMs without a GPU with MIG off")
    # a fifth host: training restarts on host 4's full cards, inference on host 5's MIG GPUs
    [c for c in design["clusters"] if c["name"] == "gpu-h100"][0]["hosts"] = 5
    assert spare(validate(design)) == {}
    assert derive(design)["esxi"]["clusters"]["gpu-h100"]["mig_geometry"] == [[], [], [0, 1], [], [0, 1]]


def test_the_same_design_with_preemptible_training_rolls(design):
    # as above but training on its default (preemptible) class: only the 2 inference cards are kept
    pool(design, "training")["node_pool"]["replicas"] = 3
    found = spare(validate(design))
    assert list(found) == ["pools.inference"]   # the unplanned loss of a host still leaves inference short
    assert min_gpus(design)["gpu-h100"] == 2
