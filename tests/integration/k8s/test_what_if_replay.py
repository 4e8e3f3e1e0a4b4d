"""What if on the rig (real kube-apiserver, kube-scheduler, controller-manager, Kueue, kwok nodes): a record whose
outcome is known by construction.

The example design's training pool is gang-scheduled through Kueue with 2 nodes of 4 GPUs (ClusterQueue quota 8).
The record: two 4-GPU training jobs of 2 hours, ``first`` (team-vision) at 0 s and ``second`` (research) at 60 s.
On the current design both run at once. The proposal cuts the pool to one node, so derive() gives the ClusterQueue
a quota of 4: ``second`` must wait in Kueue until ``first`` ends (about 7140 simulated seconds), which breaches the
pool's SLO (p95 wait at most 3600 s), and the module fails naming the pool. Afterwards nothing of the replay is left
on the cluster.
"""
from __future__ import annotations

import copy

import pytest
import yaml
from kubernetes import client

from tests.lib import kueue_rig
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.paths import ROOT

SYSTEM_ONLY = {"defaults": {"cpu": "8", "memory": "32Gi", "labels": {"kubernetes.io/os": "linux"}},
               "pools": [{"name": "system", "count": 1}]}
FACTOR = 600
RECORD = {"schema": "gpupool.vcf/workload-record", "version": 1, "workloads": [
    {"name": "first", "tenant": "team-vision", "pool": "training", "gpus": 4, "arrival": 0, "duration": 7200},
    {"name": "second", "tenant": "research", "pool": "training", "gpus": 4, "arrival": 60, "duration": 7200}]}


def cut_training(design, replicas):
    out = copy.deepcopy(design)
    for pool in out["pools"]:
        if pool["name"] == "training":
            pool["node_pool"]["replicas"] = replicas
    return out


@pytest.fixture(scope="module")
def k8s_rig_instance(tmp_path_factory):
    """A rig with Kueue and one system node: each design's replay makes its own kwok nodes."""
    with kueue_rig.kueue_rig(tmp_path_factory.mktemp("what-if"), SYSTEM_ONLY) as running:
        yield running


def by_name(side):
    return dict((w["name"], w) for w in side["workloads"])


def test_quota_cut_makes_exactly_the_second_job_wait_and_breaches_the_slo(k8s_rig_instance, tmp_path):
    design = kueue_rig.example_design()
    (tmp_path / "current.yml").write_text(yaml.safe_dump(design))
    (tmp_path / "proposed.yml").write_text(yaml.safe_dump(cut_training(design, 1)))
    (tmp_path / "record.yml").write_text(yaml.safe_dump(RECORD))
    result, _run = run_module("gpupool.vcf.gpu_what_if", dict(
        design_file=str(tmp_path / "current.yml"), proposed_design_file=str(tmp_path / "proposed.yml"),
        record_file=str(tmp_path / "record.yml"), kubeconfig=str(k8s_rig_instance.kubeconfig), compression=FACTOR,
        report_dest=str(tmp_path / "what-if.txt"), html_dest=str(tmp_path / "what-if.html")), env=k8s_rig_instance.env)
    assert result.get("failed"), result
    assert "training" in result["msg"], result["msg"]
    assert [b["pool"] for b in result["breaches"]] == ["training"]
    current, proposed = by_name(result["current"]), by_name(result["proposed"])
    # current design: both admitted at once (within a few polls of simulated time)
    for name in ("first", "second"):
        assert current[name]["admitted"] and current[name]["finished"], current[name]
        assert current[name]["wait"] < 900, current[name]
    assert result["current"]["breaches"] == []
    # proposed: only the second waits, until the first's 7200 s are over (it came 60 s later)
    assert proposed["first"]["wait"] < 900, proposed["first"]
    assert 7140 - 900 <= proposed["second"]["admission_wait"] <= 7140 + 900, proposed["second"]
    assert proposed["second"]["finished"], proposed["second"]
    assert all(w["preempted"] == 0 for w in list(current.values()) + list(proposed.values()))
    assert result["proposed"]["pools"]["training"]["admitted"] == 2
    # the GPUs in use from the replay's own times: 8 at once on the current design, never more than 4 on the cut
    use = dict((side, result[side]["usage"]["training"]) for side in ("current", "proposed"))
    assert [max(v for _t, v in use[side]["series"]) for side in ("current", "proposed")] == [8, 4], use
    assert (use["current"]["gpus"], use["proposed"]["gpus"]) == (8, 4)
    # 8 GPU-hours of jobs over each design's GPUs and replay: the cut runs about twice as long on half the GPUs
    for side in ("current", "proposed"):
        busy = sum((t1 - t0) * v for (t0, v), (t1, _v) in zip(use[side]["series"], use[side]["series"][1:]))
        assert 2 * 7200 * 4 * 0.9 <= busy <= 2 * 7200 * 4 * 1.1, (side, busy)
        assert use[side]["servers"] == use[side]["gpus"] // 4 and use[side]["knee_utilization"] is not None
    text = (tmp_path / "what-if.txt").read_text()
    assert "proposed design breaches: pool training" in text
    assert "Time runs 600 times faster" in text
    assert "  training: current " in text and "knee " in text
    assert 'id="wait-chart"' in (tmp_path / "what-if.html").read_text()
    # nothing of the replay is left on the cluster
    core = client.CoreV1Api(k8s_rig_instance.api_client())
    assert not core.list_node(label_selector="gpupool.vcf/what-if").items
    assert not client.BatchV1Api(k8s_rig_instance.api_client()).list_job_for_all_namespaces(
        label_selector="gpupool.vcf/what-if").items


def test_the_same_cut_within_a_looser_slo_passes(k8s_rig_instance):
    design = kueue_rig.example_design()
    proposed = cut_training(design, 1)
    for pool in proposed["pools"]:
        if pool["name"] == "training":
            pool["slo"]["wait_seconds"] = 20000
    result, _run = run_module("gpupool.vcf.gpu_what_if", dict(
        design=design, proposed_design=proposed, record=RECORD, kubeconfig=str(k8s_rig_instance.kubeconfig),
        compression=FACTOR), env=k8s_rig_instance.env)
    assert not result.get("failed"), result.get("msg")
    assert result["breaches"] == []
    stats = result["proposed"]["pools"]["training"]
    assert stats["slo"]["wait_seconds"] == 20000 and 6000 <= stats["slo"]["value"] <= 20000, stats


def test_the_playbook_fails_on_the_breach_after_writing_its_reports(k8s_rig_instance, tmp_path):
    design = kueue_rig.example_design()
    (tmp_path / "current.yml").write_text(yaml.safe_dump(design))
    (tmp_path / "proposed.yml").write_text(yaml.safe_dump(cut_training(design, 1)))
    (tmp_path / "record.yml").write_text(yaml.safe_dump(RECORD))
    run = run_playbook(ROOT / "playbooks" / "what_if.yml", env=k8s_rig_instance.env, extra_vars={
        "gpupool_design_file": str(tmp_path / "current.yml"), "gpupool_what_if_design": str(tmp_path / "proposed.yml"),
        "gpupool_what_if_record": str(tmp_path / "record.yml"),
        "gpupool_what_if_kubeconfig": str(k8s_rig_instance.kubeconfig), "gpupool_what_if_compression": FACTOR,
        "gpupool_what_if_output_dir": str(tmp_path / "out")})
    assert run.rc != 0
    assert "breaches the SLO of pool(s) training" in run.stdout, run.stdout[-3000:]
    assert "proposed design breaches: pool training" in (tmp_path / "out" / "what-if.txt").read_text()
    assert (tmp_path / "out" / "what-if.html").exists()
