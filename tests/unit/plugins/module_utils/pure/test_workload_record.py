"""The what-if workload record: its checks, the seeded generator and the record made from Prometheus answers."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _workload_record as wr


def record(*workloads):
    return {"schema": wr.SCHEMA, "version": wr.VERSION, "workloads": list(workloads)}


def job(name="a", **kw):
    out = {"name": name, "tenant": "research", "pool": "training", "gpus": 4, "arrival": 0, "duration": 60}
    out.update(kw)
    return out


def test_a_record_is_sorted_by_arrival_and_start_end_give_the_run_time():
    out = wr.check_record(record(job("late", arrival=100), job("early", arrival=5, duration=None, start=10, end=70)))
    assert [w["name"] for w in out["workloads"]] == ["early", "late"]
    assert out["workloads"][0]["duration"] == 60 and out["workloads"][0]["pods"] == 1
    assert out["span_seconds"] == 160


@pytest.mark.parametrize("bad, words", [
    ({"schema": "other", "version": 1, "workloads": [job()]}, "schema must be"),
    ({"schema": wr.SCHEMA, "version": 2, "workloads": [job()]}, "version 2 is not known"),
    (record(), "non-empty list"),
    (record(job(), job()), "given twice"),
    (record(job(gpus=0)), "gpus must be at least 1"),
    (record(job(gpus=1.5)), "whole number"),
    (record(job(arrival=-1)), "arrival must be at least 0"),
    (record(job(duration=None)), "give duration, or start and end"),
    (record(job(duration=None, start=50, end=40)), "arrival <= start <= end"),
    (record(job(name="Bad_Name")), "DNS label"),
    (record(job(colour="blue")), "unknown key(s) colour"),
    (record(job(duration=0)), "more than 0 seconds"),
])
def test_bad_records_are_refused_with_the_reason(bad, words):
    with pytest.raises(wr.RecordError, match=None) as err:
        wr.check_record(bad)
    assert words in str(err.value)


def test_the_generator_is_seeded_and_follows_the_rate_and_the_mean():
    pools = {"training": {"arrivals_per_hour": 6, "mean_seconds": 1800, "gpus": 4, "tenants": ["a", "b"],
                          "priority": "gpu-training"}}
    one, two = wr.generate(pools, 1000, 7), wr.generate(pools, 1000, 7)
    assert one == two
    assert one != wr.generate(pools, 1000, 8)
    n = len(one["workloads"])
    assert 5400 <= n <= 6600  # 6000 expected, Poisson: within 8 standard deviations
    mean = sum(w["duration"] for w in one["workloads"]) / n
    assert 1650 <= mean <= 1950
    assert {w["tenant"] for w in one["workloads"]} == {"a", "b"}
    assert all(w["priority"] == "gpu-training" and w["gpus"] == 4 for w in one["workloads"])


def test_fixed_and_lognormal_durations():
    fixed = wr.generate({"p": {"arrivals_per_hour": 10, "mean_seconds": 300, "distribution": "fixed", "tenants": ["t"]}}, 10, 1)
    assert {w["duration"] for w in fixed["workloads"]} == {300}
    logn = wr.generate({"p": {"arrivals_per_hour": 60, "mean_seconds": 600, "distribution": "lognormal", "cv": 2,
                              "tenants": ["t"]}}, 200, 1)
    values = [w["duration"] for w in logn["workloads"]]
    mean = sum(values) / len(values)
    cv = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 / mean
    assert 500 <= mean <= 700 and 1.4 <= cv <= 2.6


@pytest.mark.parametrize("pools, words", [
    ({}, "at least one pool"),
    ({"p": {"arrivals_per_hour": 0, "mean_seconds": 1, "tenants": ["t"]}}, "more than 0"),
    ({"p": {"arrivals_per_hour": 1, "mean_seconds": 1, "tenants": []}}, "tenants is empty"),
    ({"p": {"arrivals_per_hour": 1, "mean_seconds": 1, "tenants": ["t"], "distribution": "pareto"}}, "distribution"),
])
def test_bad_generator_settings_are_refused(pools, words):
    with pytest.raises(wr.RecordError) as err:
        wr.generate(pools, 1, 0)
    assert words in str(err.value)


def vec(rows):
    return [{"metric": m, "value": [0, str(v)]} for m, v in rows]


def pod(name, ns="research", uid=None):
    return {"namespace": ns, "pod": name, "uid": uid or name}


def test_the_record_from_prometheus_groups_a_jobs_pods_and_leaves_out_unfinished_ones():
    start = 1000.0
    results = {
        "created": vec([(pod("j-0"), 1100), (pod("j-1"), 1105), (pod("solo"), 1200), (pod("running"), 1300),
                        (pod("before"), 900)]),
        "started": vec([(pod("j-0"), 1110), (pod("j-1"), 1120), (pod("solo"), 1260), (pod("running"), 1310),
                        (pod("before"), 950)]),
        "completed": vec([(pod("j-0"), 1500), (pod("j-1"), 1700), (pod("solo"), 1400), (pod("before"), 1000)]),
        "gpus": vec([(dict(pod("j-0"), pool="training"), 4), (dict(pod("j-1"), pool="training"), 4),
                     (dict(pod("solo"), pool="inference"), 1), (dict(pod("running"), pool="training"), 2),
                     (dict(pod("before"), pool="training"), 1)]),
        "info": vec([(dict(pod("j-0"), priority_class="gpu-training"), 1),
                     (dict(pod("j-1"), priority_class="gpu-training"), 1)]),
        "owner": vec([(dict(pod("j-0"), owner_name="Train.Big"), 1), (dict(pod("j-1"), owner_name="Train.Big"), 1)]),
    }
    out = wr.record_from_prometheus(results, start, 2000.0)
    assert out["source"] == "prometheus" and out["skipped_pods"] == 2
    big, solo = out["workloads"]
    assert dict(big) == {"name": "train-big", "tenant": "research", "pool": "training", "priority": "gpu-training",
                         "gpus": 4, "pods": 2, "arrival": 100.0, "start": 110.0, "end": 700.0, "duration": 590.0}
    assert (solo["name"], solo["pool"], solo["duration"], "priority" in solo) == ("solo", "inference", 140.0, False)


def test_no_finished_pod_in_prometheus_is_an_error():
    with pytest.raises(wr.RecordError) as err:
        wr.record_from_prometheus({}, 0, 10)
    assert "no finished GPU pod" in str(err.value)


def test_queries_name_the_series():
    q = wr.prometheus_queries(3600)
    assert "kube_pod_completion_time[3600s]" in q["completed"] and 'owner_kind="Job"' in q["owner"]


def test_anonymise_renames_tenants_in_order_and_keeps_pools():
    out = wr.anonymise(wr.check_record(record(job("x", tenant="zeta"), job("y", tenant="alpha", arrival=1),
                                              job("z", tenant="zeta", arrival=2))))
    assert [(w["name"], w["tenant"], w["pool"]) for w in out["workloads"]] == [
        ("w-00001", "tenant-1", "training"), ("w-00002", "tenant-2", "training"), ("w-00003", "tenant-1", "training")]
