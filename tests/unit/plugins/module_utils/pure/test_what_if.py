"""What if (pure): the replay's objects from a design, the Jobs, the waits and the side-by-side report."""
import copy
import math

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _what_if as wi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _workload_record as wr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.lib.paths import ROOT


@pytest.fixture(scope="module")
def design():
    return yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


@pytest.fixture(scope="module")
def pools(design):
    return wi.design_pools(design, derive(design))


@pytest.mark.parametrize("values, p, want", [
    ([], 95, None), ([5], 50, 5), ([1, 2, 3, 4], 50, 2), ([1, 2, 3, 4], 95, 4), (list(range(1, 101)), 95, 95),
    (list(range(1, 101)), 99, 99), ([3, 1, 2], 100, 3),
])
def test_nearest_rank_percentile(values, p, want):
    assert wi.percentile(values, p) == want


def test_the_design_gives_the_nodes_of_each_pool_with_its_gpus_labels_and_taints(pools):
    assert {n: (p["replicas"], p["gpus_per_node"], p["local_queue"]) for n, p in pools.items()} == {
        "inference": (4, 1, None), "training": (2, 4, "training"), "notebooks": (8, 4, None)}  # 4 time-slicing replicas
    nodes = wi.replay_nodes(pools, "run-1")
    assert len(nodes) == 14
    [node] = [n for n in nodes if n["metadata"]["name"] == "wi-training-1"]
    assert node["metadata"]["labels"][wi.LABEL] == "run-1"
    assert node["metadata"]["labels"]["gpupool.vcf/pool"] == "training"
    assert node["metadata"]["annotations"][wi.KWOK_NODE] == "fake"
    assert node["status"]["allocatable"] == {"cpu": "32", "memory": "384Gi", "pods": "110", "nvidia.com/gpu": "4"}
    assert {t["key"] for t in node["spec"]["taints"]} == {"nvidia.com/gpu", "gpupool.vcf/pool"}


def test_the_policy_objects_are_the_roles_and_carry_the_run_label(design):
    objs = wi.policy_objects(derive(design), "run-1")
    kinds = [o["kind"] for o in objs]
    assert kinds.count("PriorityClass") == 3 and kinds.count("ClusterQueue") == 1 and kinds.count("LocalQueue") == 2
    assert all(o["metadata"]["labels"][wi.LABEL] == "run-1" for o in objs)
    [cq] = [o for o in objs if o["kind"] == "ClusterQueue"]
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in quota}["nvidia.com/gpu"] == "8"


def test_a_quota_cut_in_the_design_is_the_cluster_queues(design):
    cut = copy.deepcopy(design)
    [training] = [p for p in cut["pools"] if p["name"] == "training"]
    training["node_pool"]["replicas"] = 1
    [cq] = [o for o in wi.policy_objects(derive(cut), "r") if o["kind"] == "ClusterQueue"]
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in quota}["nvidia.com/gpu"] == "4"


def test_a_kueue_pools_job_is_suspended_with_the_queue_label_and_a_compressed_lifetime(pools):
    w = {"name": "train-1", "tenant": "research", "pool": "training", "gpus": 4, "pods": 2, "arrival": 0,
         "duration": 3600}
    job = wi.workload_job(w, pools["training"], "r", 600, 3)
    assert job["metadata"]["name"] == "wi-00003" and job["metadata"]["namespace"] == "research"
    assert job["metadata"]["labels"][wi.QUEUE_LABEL] == "training" and job["spec"]["suspend"] is True
    assert job["spec"]["parallelism"] == 2
    tpl = job["spec"]["template"]
    assert tpl["metadata"]["annotations"][wi.LIFETIME] == "6000ms"
    pod = tpl["spec"]
    assert pod["priorityClassName"] == "gpu-training"
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    assert {"key": "gpupool.vcf/pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in pod["tolerations"]
    inference = wi.workload_job(dict(w, pool="inference", tenant="team-search"), pools["inference"], "r", 600, 1)
    assert "suspend" not in inference["spec"] and wi.QUEUE_LABEL not in inference["metadata"]["labels"]


def test_lifetime_has_a_floor_and_the_factor_is_bounded():
    assert wi.lifetime_ms(1, 100000) == wi.MIN_LIFETIME_MS
    for bad in (0, 0.5, True, "10", 200000):
        with pytest.raises(wi.WhatIfError):
            wi.check_factor(bad)


def test_fit_problems_name_unknown_pools_and_tenants_without_quota(pools):
    rec = wr.check_record({"schema": wr.SCHEMA, "version": 1, "workloads": [
        {"name": "a", "tenant": "team-search", "pool": "training", "gpus": 1, "arrival": 0, "duration": 1},
        {"name": "b", "tenant": "research", "pool": "gpu-x", "gpus": 1, "arrival": 0, "duration": 1}]})
    assert wi.fit_problems(rec, pools) == ["workload a: tenant team-search has no GPU quota on pool training",
                                           "workload b: pool gpu-x has no node pool in the design"]


RECORD = wr.check_record({"schema": wr.SCHEMA, "version": 1, "workloads": [
    {"name": "first", "tenant": "research", "pool": "training", "gpus": 4, "arrival": 0, "duration": 7200},
    {"name": "second", "tenant": "team-vision", "pool": "training", "gpus": 4, "arrival": 60, "duration": 7200},
    {"name": "never", "tenant": "team-vision", "pool": "training", "gpus": 4, "arrival": 120, "duration": 60}]})


def test_outcomes_scale_wall_waits_and_count_the_unstarted_until_the_end():
    seen = {"first": {"submitted": 0.0, "admitted": 0.5, "running": 1.0, "finished": 13.0},
            "second": {"submitted": 0.1, "admitted": 12.1, "running": 12.5, "finished": 25.0, "preempted": 1}}
    rows = {r["name"]: r for r in wi.outcomes(RECORD, seen, 600, end_wall=30.0)}
    assert (rows["first"]["admission_wait"], rows["first"]["scheduling_wait"], rows["first"]["wait"]) == (300, 300, 600)
    assert rows["second"]["admission_wait"] == pytest.approx(7200) and rows["second"]["preempted"] == 1
    never = rows["never"]  # not submitted in the observations: its arrival 120 s is 0.2 s wall
    assert (never["admitted"], never["running"], never["scheduling_wait"]) == (False, False, None)
    assert never["admission_wait"] == pytest.approx((30.0 - 0.2) * 600)


def test_summary_counts_and_breaches_the_pools_slo(pools):
    seen = {"first": {"submitted": 0.0, "admitted": 0.0, "running": 0.0, "finished": 12.0},
            "second": {"submitted": 0.1, "admitted": 12.0, "running": 12.0, "finished": 24.0},
            "never": {"submitted": 0.2, "admitted": 24.0, "running": 24.0, "finished": 24.1}}
    out = wi.summary(wi.outcomes(RECORD, seen, 600, 30.0), pools)
    stats = out["pools"]["training"]
    assert (stats["workloads"], stats["admitted"], stats["waiting"], stats["preempted"]) == (3, 3, 0, 0)
    assert stats["wait_p50"] == pytest.approx(7140) and stats["wait_p95"] == pytest.approx(14280)
    assert stats["slo"] == {"percentile": 95, "wait_seconds": 3600, "value": pytest.approx(14280)}
    [breach] = out["breaches"]
    assert breach["pool"] == "training" and "p95 wait 14280 s is above the SLO's 3600 s" in breach["message"]
    assert set(out["tenants"]) == {"training/research", "training/team-vision"}
    assert out["tenants"]["training/research"]["wait_p99"] == 0


def test_reports_side_by_side(pools):
    quick = {n: {"submitted": 0.0, "admitted": 0.0, "running": 0.0, "finished": 1.0} for n in ("first", "second", "never")}
    current = wi.summary(wi.outcomes(RECORD, quick, 600, 2.0), pools)
    slow = dict(quick, second={"submitted": 0.1, "admitted": 12.0, "running": 12.0, "finished": 24.0})
    proposed = wi.summary(wi.outcomes(RECORD, slow, 600, 30.0), pools)
    note = wi.compression_note(600, 0.25)
    text = wi.text_report(current, proposed, note)
    assert "current design: no SLO breach" in text and "proposed design breaches: pool training" in text
    assert "(0.25 s wall = 150 s simulated)" in text
    html = wi.html_report(current, proposed, note)
    assert html.count('class="bar current"') == 0 and html.count('class="bar proposed"') == 1  # no bar for a 0 s wait
    assert '<tr class="breach"><td class="name">training</td><td class="name">proposed</td>' in html
    assert "<li>current: none</li>" in html


# -- utilization over time and the knee --------------------------------------------------------

def _row(pool, gpus, start, end, duration=3600):
    return {"pool": pool, "gpus": gpus, "start": start, "end": end, "duration": duration}


def test_usage_series_is_a_step_series_of_the_gpus_in_use_by_hand():
    rows = [_row("training", 4, 0, 7200), _row("training", 4, 60, 7260),
            _row("training", 1, 100, None),  # still running at the end: holds its GPU until the horizon
            _row("training", 4, None, None),  # never ran: holds none
            _row("inference", 1, 10, 610)]
    series = wi.usage_series(rows, 8000)
    assert series == {"inference": [(0.0, 0), (10, 1), (610, 0), (8000.0, 0)],
                      "training": [(0.0, 4), (60, 8), (100, 9), (7200, 5), (7260, 1), (8000, 0)]}
    # by hand: 4 x 60 + 8 x 40 + 9 x 7100 + 5 x 60 + 1 x 740 = 65500 GPU-seconds over 8000 s
    assert wi.mean_in_use(series["training"]) == pytest.approx(65500 / 8000.0)
    assert wi.mean_in_use(series["inference"]) == pytest.approx(600 / 8000.0)


def test_a_job_ending_as_another_starts_makes_no_point_and_the_horizon_clips():
    rows = [_row("training", 4, 0, 7200), _row("training", 4, 7200, 14400)]
    assert wi.usage_series(rows, 14400)["training"] == [(0.0, 4), (14400, 0)]
    assert wi.usage_series(rows, 10000)["training"] == [(0.0, 4), (10000, 0)]


def _hand_knee(wait):
    """The utilization where ``wait(rho)`` reaches the target, by the test's own bisection."""
    low, high = 0.0, 1.0 - 1e-12
    for _step in range(80):
        mid = (low + high) / 2.0
        low, high = (low, mid) if wait(mid) >= 0 else (mid, high)
    return low


def test_knee_position_of_two_servers_against_the_erlang_c_of_two_by_hand():
    # 8 GPUs, 4-GPU jobs: c = 2 servers; run times 3600 and 10800: mean 7200, CV sqrt(2) x 3600 / 7200
    pool = {"replicas": 2, "gpus_per_node": 4, "slo": {"wait_seconds": 3600, "percentile": 95}}
    rows = [_row("training", 4, 0, 3600, duration=3600), _row("training", 4, 0, 10800, duration=10800)]
    series = [(0.0, 0), (100, 4), (300, 8), (400, 0)]  # mean (4 x 200 + 8 x 100) / 400 = 4 GPUs: 50 %
    out = wi.knee_position(pool, rows, series)
    assert (out["gpus"], out["servers"], out["gpus_per_job"], out["service_s"]) == (8, 2, 4, 7200)
    assert out["cv"] == pytest.approx(0.7071, abs=1e-3) and out["model"] == "M/G/c (Allen-Cunneen)"
    assert (out["mean_in_use"], out["utilization"]) == (4, 0.5)

    # Erlang C of 2 servers at utilization rho is 2 rho^2 / (1 + rho); Allen-Cunneen (1 + 0.5) / 2 = 0.75
    def p95(rho):
        return 0.75 * 7200 / (2 * (1 - rho)) * math.log(2 * rho * rho / (1 + rho) / 0.05)

    assert out["knee_utilization"] == pytest.approx(_hand_knee(lambda r: p95(r) - 3600), abs=2e-4)
    assert out["model_wait_s"] == pytest.approx(p95(0.5), abs=0.1)  # 5400 x ln(20 / 3) = 10244.3 s
    assert out["past_knee"] is True


def test_knee_position_of_one_server_without_a_cv_is_mm1_and_no_slo_is_no_knee():
    pool = {"replicas": 1, "gpus_per_node": 1, "slo": {"wait_seconds": 600, "percentile": 90}}
    rows = [_row("p", 1, 0, 1200, duration=1200)]
    out = wi.knee_position(pool, rows, [(0.0, 0), (300, 1), (1500, 0), (4800, 0)])  # 1200 / 4800 = 25 %
    assert out["model"] == "M/M/c (Erlang C)" and out["cv"] is None and out["utilization"] == 0.25
    assert out["past_knee"] is True and out["model_wait_s"] == pytest.approx(1200 / 0.75 * math.log(2.5), abs=0.1)
    low = wi.knee_position(pool, rows, [(0.0, 0), (300, 1), (780, 0), (4800, 0)])  # 480 / 4800 = 10 %
    # at 10 % a job waits with probability 0.1, so the p90 wait is 0
    # M/M/1: P(wait > t) = rho exp(-(1 - rho) t / S)
    knee = _hand_knee(lambda r: 1200 / (1 - r) * math.log(r / 0.1) - 600 if r > 0.1 else -600)
    assert out["knee_utilization"] == pytest.approx(knee, abs=2e-4)
    assert 0.1 < knee < 0.2 and low["past_knee"] is False and low["model_wait_s"] == 0
    none = wi.knee_position(dict(pool, slo=None), rows, [(0.0, 1), (10, 0)])
    assert none["knee_utilization"] is None and none["note"] == "no knee: the pool has no slo.wait_seconds"
    assert wi.knee_position(pool, [_row("p", 2, 0, 1)], [(0.0, 0), (1, 0)])["note"].startswith(
        "no knee: the pool has fewer GPUs than one job's 2")


def test_the_step_path_of_a_series():
    assert wi._step_path([(0, 0), (100, 4), (150, 4), (200, 0)], float, float) == \
        "M0.00 0.00 H100.00 V4.00 H150.00 H200.00 V0.00"


def test_the_reports_show_the_usage_and_the_knee_per_pool(pools):
    seen = {"first": {"submitted": 0.0, "admitted": 0.0, "running": 0.0, "finished": 12.0},
            "second": {"submitted": 0.1, "admitted": 0.1, "running": 0.1, "finished": 12.1},
            "never": {"submitted": 0.2, "admitted": 0.2, "running": 0.2, "finished": 0.3}}
    current = wi.summary(wi.outcomes(RECORD, seen, 600, 12.5), pools, 12.5 * 600)
    use = current["usage"]["training"]
    # first 0-7200 s, second 60-7260 s (4 GPUs each), never 120-180 s (4 GPUs): 4 x 60 + 8 x 60 + 12 x 60 +
    # 8 x 7020 + 4 x 60 = 57840 GPU-seconds over the 7500 s of the replay on 8 GPUs
    assert use["series"] == [[0.0, 4], [60.0, 8], [120.0, 12], [180.0, 8], [7200.0, 4], [7260.0, 0], [7500.0, 0]]
    assert use["utilization"] == pytest.approx(57840 / 7500.0 / 8, abs=1e-4)
    assert use["servers"] == 2 and use["service_s"] == pytest.approx((7200 + 7200 + 60) / 3.0)
    text = wi.text_report(current, current, "note")
    [line] = [x for x in text.splitlines() if x.startswith("  training: ")]
    assert "current %.1f %% of 8 GPUs" % (use["utilization"] * 100) in line
    assert "knee %.1f %% (M/G/2" % (use["knee_utilization"] * 100) in line and "PAST THE KNEE" in line
    html = wi.html_report(current, current, "note")
    assert html.count('<svg id="usage-training" class="chart usage"') == 1
    assert html.count('<path class="line current"') == 1 and html.count('<path class="line proposed"') == 1
