# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The seed rules: inference above preemptible pools in priority, vGPU VMs pinned unless waived,
notebooks on a best-effort scheduler unless waived, every multi-GPU pool gang-scheduled, and the
queueing knee of a pool's SLO against its planned utilization."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import design_knee, validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize

from tests.lib.design_edit import cluster, example, pool

NEW_RULES = ("inference_above_preemptible", "gpu_vms_pinned", "notebooks_best_effort", "multi_gpu_gang_scheduled",
             "slo_knee")


@pytest.fixture
def design():
    return example()


def found(d, rule):
    return [f for f in validate(d) if f.rule == rule]


def test_the_example_design_keeps_every_seed_rule(design):
    assert [str(f) for f in validate(design) if f.rule in NEW_RULES] == []


def test_inference_below_a_preemptible_pool(design):
    # an urgent class above training makes training preemptible; inference then sits below it
    design["priorities"]["gpu-urgent"] = {"value": 200000, "preemption_policy": "PreemptLowerPriority"}
    design["priorities"]["gpu-inference"]["value"] = 40000
    [f] = found(design, "inference_above_preemptible")
    assert f.severity == "error" and f.object == "pools.inference"
    assert "gpu-inference (value 40000), not above the preemptible pool training on gpu-training (value 50000)" \
        in f.message
    assert f.fix.startswith("give inference a class above 50000 (priorities.gpu-inference.value, e.g. 100000")
    design["priorities"]["gpu-inference"]["value"] = 150000
    assert found(design, "inference_above_preemptible") == []


def test_equal_priority_is_not_above(design):
    pool(design, "training")["priority"] = "gpu-inference"
    pool(design, "notebooks")["priority"] = "gpu-training"  # notebooks preemptible, inference above: fine
    assert found(design, "inference_above_preemptible") == []
    design["priorities"]["gpu-top"] = {"value": 200000, "preemption_policy": "PreemptLowerPriority"}
    # now training (on gpu-inference, below gpu-top) is preemptible and ranks equal with inference
    [f] = found(design, "inference_above_preemptible")
    assert "not above the preemptible pool training on gpu-inference (value 100000)" in f.message


def test_only_inference_pools_can_be_inverted(design):
    # a preemptible pool with a wait SLO accepts its evictions; two preemptible pools on one class
    # are no inversion
    pool(design, "notebooks")["slo"] = {"wait_seconds": 30}
    pool(design, "notebooks")["priority"] = "gpu-training"
    assert found(design, "inference_above_preemptible") == []
    # inference is never preemptible, even on the notebooks' class: every preemptible pool above it is named
    pool(design, "inference")["priority"] = "gpu-notebook"
    got = found(design, "inference_above_preemptible")
    assert sorted(f.message.split(" not above the preemptible pool ")[1].split(" ")[0] for f in got) == \
        ["notebooks", "training"]


def test_gpu_vms_pinned_unless_waived(design):
    cluster(design, "gpu-l40s")["drs"] = {"pinning": False}
    [f] = found(design, "gpu_vms_pinned")
    assert f.severity == "error" and f.object == "clusters.gpu-l40s"
    assert "(pools notebooks)" in f.message and "waivers.gpu_vms_pinned" in f.fix
    cluster(design, "gpu-l40s")["waivers"] = {"gpu_vms_pinned": "   "}
    assert len(found(design, "gpu_vms_pinned")) == 1  # blank is no reason
    cluster(design, "gpu-l40s")["waivers"] = {"gpu_vms_pinned": "VDI hosts: vMotion windows agreed with the team"}
    assert found(design, "gpu_vms_pinned") == []
    # derive leaves the waived cluster out of the pinning role, as before
    assert [c["name"] for c in derive(design)["vsphere"]["drs_pinning"]] == ["gpu-h100"]


def test_notebooks_on_a_best_effort_scheduler_unless_waived(design):
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "equal_share", "time_slice_ms": 2}
    [f] = found(design, "notebooks_best_effort")
    assert f.severity == "warning" and f.object == "pools.notebooks"
    assert "cluster gpu-l40s, whose vGPU scheduler is equal_share" in f.message
    assert f.fix == ("set clusters.gpu-l40s.scheduler.policy best_effort, or say why not in "
                     "waivers.notebooks_best_effort")
    # the H100 cluster has no time-sliced notebooks: its policy is not this rule's business
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "best_effort"}
    cluster(design, "gpu-h100")["scheduler"] = {"policy": "fixed_share"}
    assert found(design, "notebooks_best_effort") == []
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "fixed_share"}
    cluster(design, "gpu-l40s")["waivers"] = {"notebooks_best_effort": "a latency pool shares these cards"}
    assert found(design, "notebooks_best_effort") == []


def test_waivers_are_schema_checked(design):
    cluster(design, "gpu-l40s")["waivers"] = {"gpu_vm_pinned": "typo"}
    _d, findings = normalize(design)
    assert [(f.object, f.fix) for f in findings] == [("clusters.gpu-l40s.waivers.gpu_vm_pinned",
                                                      "did you mean 'gpu_vms_pinned'?")]


def test_multi_gpu_jobs_on_a_pool_without_a_gang_queue(design):
    pool(design, "inference")["training"] = {"gpus_per_job": 2}
    [f] = found(design, "multi_gpu_gang_scheduled")
    assert f.object == "pools.inference" and f.message.startswith("2-GPU jobs on a inference pool")
    assert "training.gang_scheduling true" in f.fix


def test_a_gang_larger_than_the_pool_is_never_admitted(design):
    pool(design, "training")["training"]["gpus_per_job"] = 16  # 2 nodes x 4 GPUs
    [f] = found(design, "multi_gpu_gang_scheduled")
    assert f.message == "a job takes 16 GPUs and the pool has 8: Kueue would never admit its gang"
    assert f.fix.startswith("grow node_pool.replicas to at least 4,")


def test_a_gang_pool_without_a_local_queue(design):
    for t in design["tenants"]:
        t["gpu_quota"].pop("training", None)
    [f] = found(design, "multi_gpu_gang_scheduled")
    assert "no tenant has quota on the gang-scheduled pool" in f.message
    assert f.fix == "give the tenants that train on it gpu_quota.training"


def test_training_gang_off_stays_training_multi_gpu(design):
    pool(design, "training")["training"]["gang_scheduling"] = False
    rules = {f.rule for f in validate(design)}
    assert "training_multi_gpu" in rules and "multi_gpu_gang_scheduled" not in rules


def test_slo_knee_from_the_design_numbers(design):
    inf = pool(design, "inference")  # 4 node VMs x 1 vGPU: M/M/4
    inf["slo"] = {"wait_seconds": 120, "percentile": 99, "job_seconds": 60, "planned_utilization": 0.5}
    assert found(design, "slo_knee") == []
    want = _queueing.knee(4, 60.0, 120.0, 99)
    assert 0.5 < want < 0.95
    inf["slo"]["planned_utilization"] = 0.95
    [f] = found(design, "slo_knee")
    assert f.severity == "warning" and f.object == "pools.inference"
    assert "planned at 95 %% utilization, past the knee at %.1f %%" % (want * 100) in f.message
    assert "with 4 servers of 1 GPU(s) and 60 s jobs, the p99 wait" in f.message
    d, _findings = normalize(design)
    result = design_knee([p for p in d["pools"] if p["name"] == "inference"][0])
    need = result["replicas_needed"]
    assert f.fix == "plan the pool at most at %d %%, or carry the planned load on %d replicas, or relax " \
                    "slo.wait_seconds" % (int(want * 100), need)
    # the replicas named carry 0.95 x 4 Erlangs below their knee; one fewer does not
    load = 0.95 * 4
    assert load / need <= _queueing.knee(need, 60.0, 120.0, 99)
    assert need - 1 <= load or load / (need - 1) > _queueing.knee(need - 1, 60.0, 120.0, 99)


def test_slo_knee_counts_gangs_as_servers(design):
    tr = pool(design, "training")  # 2 nodes x 4 GPUs, 4-GPU jobs: M/M/2
    tr["slo"] = {"wait_seconds": 600, "job_seconds": 3600, "planned_utilization": 0.6}
    d, _findings = normalize(design)
    result = design_knee([p for p in d["pools"] if p["name"] == "training"][0])
    assert result["servers"] == 2 and result["gpus_per_job"] == 4
    assert result["knee"] == pytest.approx(_queueing.knee(2, 3600.0, 600.0, 95))
    assert result["planned_wait_s"] == pytest.approx(_queueing.wait_percentile(2, 0.6, 3600.0, 95))


def test_slo_knee_without_a_job_time_says_so(design):
    pool(design, "inference")["slo"] = {"wait_seconds": 60, "planned_utilization": 0.7}
    [f] = found(design, "slo_knee")
    assert "slo.job_seconds (the mean time a job holds its GPUs) is not given" in f.message
    assert "knee.<pool>.service_s" in f.fix
    pool(design, "inference")["slo"] = {"wait_seconds": 60, "planned_utilization": 0.7, "job_seconds": 30,
                                        "percentile": 100}
    # percentile 100 (an unbounded wait in the M/M/c model) is refused by the schema's bound
    assert found(design, "slo_knee") == []
    [f] = found(design, "schema")
    assert f.object == "pools.inference.slo.percentile" and "above 0 and below 100" in f.message
