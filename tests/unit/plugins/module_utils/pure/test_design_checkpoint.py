# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rule checkpoint_declared: a preemptible training pool declares its checkpoint (one volume, one resume
check) or waives the rule with a reason; a declared checkpoint is held to that form on any pool."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize

from tests.lib.design_edit import example, pool


def findings(design, rule="checkpoint_declared"):
    return [f for f in validate(design) if f.rule == rule]


def test_the_example_training_pool_declares_its_checkpoint_and_it_normalizes():
    design = example()
    assert findings(design) == []
    d = normalize(design)[0]
    ckpt = [p for p in d["pools"] if p["name"] == "training"][0]["checkpoint"]
    assert ckpt == {"claim": None, "claim_template": "ckpt-{job}", "mount_path": "/checkpoints",
                    "resume_check": {"annotation": "gpupool.vcf/resumed-from-step", "condition": None,
                                     "command": None}}
    # the other pools declare none and need none: inference is protected, notebooks are not training
    assert [p["checkpoint"] for p in d["pools"] if p["name"] != "training"] == [None, None]


def test_a_preemptible_training_pool_without_a_checkpoint_is_refused():
    design = example()
    del pool(design, "training")["checkpoint"]
    [found] = findings(design)
    assert (found.severity, found.object) == ("error", "pools.training")
    assert "preemptible (priority gpu-training)" in found.message
    assert "pools.training.waivers.checkpoint_declared" in found.fix
    with pytest.raises(Exception) as err:
        derive(design)
    assert "checkpoint_declared" in str(err.value)


def test_the_waiver_needs_a_reason():
    design = example()
    del pool(design, "training")["checkpoint"]
    pool(design, "training")["waivers"] = {"checkpoint_declared": "   "}
    assert len(findings(design)) == 1  # blank is no reason
    pool(design, "training")["waivers"] = {"checkpoint_declared": "ten-minute jobs restart from the start"}
    assert findings(design) == []
    derive(design)


def test_a_training_pool_nothing_preempts_needs_no_checkpoint():
    design = example()
    del pool(design, "training")["checkpoint"]
    # gpu-training made the highest preempting class: nothing ranks above it, the pool is protected
    design.setdefault("priorities", {})["gpu-training"] = {"value": 2000000, "preemption_policy": "PreemptLowerPriority"}
    design["priorities"]["gpu-inference"] = {"value": 1000000, "preemption_policy": "Never"}
    assert findings(design) == []


@pytest.mark.parametrize("ckpt, wants", [
    ({"resume_check": {"annotation": "a/b"}}, ["names no volume", "exactly one of claim and claim_template"]),
    ({"claim": "ckpt", "claim_template": "ckpt-{job}", "resume_check": {"annotation": "a/b"}},
     ["names claim and claim_template"]),
    ({"claim_template": "ckpt", "resume_check": {"annotation": "a/b"}}, ["has no {job}: every job would share"]),
    ({"claim": "ckpt", "resume_check": {}}, ["resume_check has none of annotation, condition, command"]),
    ({"claim": "ckpt", "resume_check": {"annotation": "a/b", "command": "true"}},
     ["resume_check has annotation and command"]),
])
def test_a_declared_checkpoint_has_one_volume_and_one_check(ckpt, wants):
    design = example()
    pool(design, "training")["checkpoint"] = ckpt
    [found] = findings(design)
    assert found.object == "pools.training.checkpoint"
    for want in wants:
        assert want in found.message + " " + found.fix, (want, found)


def test_resume_check_is_required_by_the_schema():
    design = example()
    pool(design, "training")["checkpoint"] = {"claim": "ckpt"}
    found = [f for f in validate(design) if f.rule == "schema"]
    assert [f.object for f in found] == ["pools.training.checkpoint.resume_check"], [str(f) for f in found]


def test_discover_waives_an_unseen_checkpoint_with_a_placeholder_and_a_note():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _discover  # pylint: disable=import-outside-toplevel
    design = {"pools": [{"name": "train", "shape": "training"}, {"name": "serve", "shape": "inference"},
                        {"name": "own", "shape": "training", "checkpoint": {"claim": "c"}}]}
    notes = {}
    _discover.waive_unseen_checkpoints(design, notes)
    assert design["pools"][0]["waivers"] == {"checkpoint_declared": _discover.CHECKPOINT_UNSEEN}
    assert "waivers" not in design["pools"][1] and "waivers" not in design["pools"][2]
    assert list(notes) == [("pools", 0, "waivers")] and "declare checkpoint" in notes[("pools", 0, "waivers")]
    # live PriorityClasses that put gpu-training on top: nothing preempts it, no waiver is written
    top = {"pools": [{"name": "train", "shape": "training"}],
           "priorities": {"gpu-training": {"value": 2000000, "preemption_policy": "PreemptLowerPriority"}}}
    _discover.waive_unseen_checkpoints(top, {})
    assert "waivers" not in top["pools"][0]
