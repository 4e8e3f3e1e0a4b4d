# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_capacity's knee from Prometheus answers (pure): the pods' waits joined to their pools, one
sample per window, the M/M/c fit and the knee against the design's slo."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live as live
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing as q

START, WINDOW = 1000, 100


def vec(rows):
    return [{"metric": dict(m), "value": [0, str(v)]} for m, v in rows]


def pod(name, pool=None, uid=None):
    m = {"namespace": "ns", "pod": name, "uid": uid or "u-" + name}
    if pool:
        m["pool"] = pool
    return m


def matrix(pool, points):
    return [{"metric": {"pool": pool}, "values": [[t, str(v)] for t, v in points]}]


def results(pods, alloc, cap, pool="training"):
    """pods: [(name, created, wait)]; alloc/cap: [(window end, value)]."""
    return {"scheduled": vec([(pod(n), c + w) for n, c, w in pods]),
            "created": vec([(pod(n), c) for n, c, _w in pods]),
            "pod_pools": vec([(pod(n, pool), 1) for n, _c, _w in pods]),
            "allocated": matrix(pool, alloc), "capacity": matrix(pool, cap)}


def test_queries_read_kube_state_metrics():
    qs = live.knee_queries(3600, 300, 15)
    assert list(qs) == ["scheduled", "created", "pod_pools", "allocated", "capacity", "durations", "kueue_wait_sum",
                        "kueue_wait_count"]
    assert qs["kueue_wait_count"] == "sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_count[300s]))"
    assert qs["kueue_wait_sum"] == "sum by (cluster_queue) (increase(kueue_admission_wait_time_seconds_sum[300s]))"
    assert qs["durations"] == ('sum by (namespace, pod, uid) (count_over_time((kube_pod_status_phase{phase="Running"} '
                               '== 1)[3600s:15s])) * 15 unless on (namespace, pod, uid) '
                               '(kube_pod_status_phase{phase="Running"} == 1)')
    assert qs["scheduled"] == "max by (namespace, pod, uid) (last_over_time(kube_pod_status_scheduled_time[3600s]))"
    assert "label_gpupool_vcf_pool" in qs["pod_pools"] and 'node!=""' in qs["pod_pools"]
    assert qs["allocated"].startswith("avg_over_time(((sum by (pool) (kube_pod_container_resource_requests")
    assert qs["allocated"].endswith("[300s:15s])") and " or (" in qs["allocated"]
    assert qs["capacity"].startswith("avg_over_time((sum by (pool) (kube_node_status_allocatable")


def test_pod_waits_keep_scheduled_gpu_pods_created_in_the_range():
    res = results([("a", 1010, 3), ("b", 1020, 0), ("old", 900, 5)], [], [])
    res["scheduled"] += vec([(pod("pending"), 0)])[:0]  # a Pending pod has no scheduled time
    res["created"] += vec([(pod("pending"), 1030)])
    res["pod_pools"] += vec([(pod("nopool"), 1)])  # on a node without a pool label
    waits = live.pod_waits(res["scheduled"], res["created"], res["pod_pools"], 1000, 1100)
    assert waits == {"training": [(1010.0, 3.0, 1.0), (1020.0, 0.0, 1.0)]}


def test_samples_per_window_by_creation_time():
    waits = [(1001, 2.0, 1), (1100, 4.0, 1), (1101, 10.0, 1), (1250, 1.0, 1)]
    cap = {1100: 4.0, 1200: 4.0, 1300: 0.0}
    alloc = {1100: 2.0, 1200: 3.0}
    got = live.knee_samples(waits, alloc, cap, WINDOW)
    # (1000, 1100]: 1001 and 1100; (1100, 1200]: 1101; the empty-capacity window is left out
    assert got == [(1100, 0.5, 3.0, 2), (1200, 0.75, 10.0, 1)]


def mm4_samples(service):
    """4 GPUs, 1-GPU jobs: M/M/4 with ``service`` s per job; per 100 s window n = rho x 4 x 100 / service pods
    (Little's law), each waiting the model's mean wait: (pods, allocated, capacity) samples."""
    pods, alloc, cap = [], [], []
    for k, (rho, n) in enumerate(((0.3, 6), (0.5, 10), (0.7, 14), (0.85, 17))):
        end = START + (k + 1) * WINDOW
        alloc.append((end, 4 * rho))
        cap.append((end, 4))
        for i in range(n):
            pods.append(("p%d-%d" % (k, i), end - 5 * (i + 1), q.mean_wait(4, rho, service)))
    return pods, alloc, cap


def test_service_time_measured_and_the_knee():
    # 4 GPUs, 1-GPU jobs: M/M/4 with a 20 s service time; per 100 s window n = rho x 4 x 100 / 20
    # pods (Little's law), each waiting the model's mean wait
    service = 20.0
    pods, alloc, cap = mm4_samples(service)
    slo = {"wait_seconds": 30.0, "percentile": 95.0, "planned_utilization": 0.8}
    pools = live.Pools({"pools": [{"name": "training", "training": {"gpus_per_job": 1}, "slo": slo}]})
    out = live.knees(results(pods, alloc, cap), START, START + 4 * WINDOW, WINDOW, pools)
    e = out["training"]
    assert e["servers"] == 4 and e["windows"] == 4 and e["windows_used"] == 4 and e["pods"] == 47
    assert e["service_s"] == pytest.approx(service)
    # the waits say the same (up to the rounding of the reported waits to 0.01 s)
    assert e["wait_fit_service_s"] == pytest.approx(service, rel=1e-3) and e["fit_rms_s"] < 0.01
    want = q.knee(4, service, 30.0, 95.0)
    assert e["knee_utilization"] == pytest.approx(want, abs=1e-4)
    assert e["past_knee"] is (0.8 > want)
    assert "M/M/4, service time 20.0 s measured (the waits fit 20.0 s" in e["message"]
    assert "p95 wait reaches 30 s at %.1f %% utilization" % (want * 100) in e["message"]
    md = live.markdown({"clusters": {}, "spare": {}, "knee": out})
    assert "| training | 4 (4 / 1) | 4 of 4 | 20.0 | p95 <= 30 s | %.1f %% |" % (want * 100) in md


def test_mgc_knee_from_the_pods_durations():
    # the samples of test_service_time_measured_and_the_knee, whose waits are M/M/4's; the pods' durations
    # (seconds Running) spread with a CV above 1: M/G/c puts the knee earlier and, against these waits, fits worse
    service = 20.0
    pods, alloc, cap = mm4_samples(service)
    slo = {"wait_seconds": 30.0, "percentile": 95.0, "planned_utilization": 0.6}
    pools = live.Pools({"pools": [{"name": "training", "slo": slo}]})
    res = results(pods, alloc, cap)
    # 40 short pods and 7 long ones
    held = [2.0] * 40 + [100.0] * 7
    cv, _m, _n = q.cv_from_durations(held)
    assert cv > 1.5
    res["durations"] = vec([(pod(n), d) for (n, _c, _w), d in zip(pods, held)] + [(pod("other"), 900)])
    e = live.knees(res, START, START + 4 * WINDOW, WINDOW, pools)["training"]
    m = e["mgc"]
    assert (m["model"], m["cv_source"], m["durations"]) == ("M/G/c (Allen-Cunneen)", "durations", 47)
    assert m["cv"] == pytest.approx(cv, abs=1e-3)
    assert m["knee_utilization"] == pytest.approx(q.knee(4, service, 30.0, 95.0, cv=cv), abs=1e-4)
    assert m["knee_utilization"] < e["knee_utilization"]
    assert m["past_knee"] is (0.6 > m["knee_utilization"]) and e["past_knee"] is (0.6 > e["knee_utilization"])
    rows = [(s["utilization"], s["mean_wait_s"], s["pods"]) for s in e["samples"]]
    assert m["fit_rms_s"] == pytest.approx(q.wait_rms(4, rows, service, cv=cv), abs=1e-3) and m["fit_rms_s"] > 1
    assert m["wait_fit_service_s"] == pytest.approx(service / q.scale(cv), rel=1e-3)
    assert "M/G/4 (Allen-Cunneen): CV %.2f from 47 pod durations" % cv in e["message"], e["message"]
    md = live.markdown({"clusters": {}, "spare": {}, "knee": {"training": e}})
    assert "| %.2f (durations) | %.1f %% |" % (m["cv"], m["knee_utilization"] * 100) in md


def test_mgc_cv_from_the_waits_without_durations():
    # one 1-GPU job per window on 4 GPUs; waits 2.5 times what M/M/4 says for the measured service time: CV 2
    service = 100.0  # rho 0.25 x 4 GPUs x 100 s / 1 pod
    wait = 2.5 * q.mean_wait(4, 0.25, service)
    pods = [("a", 1050, wait), ("b", 1150, wait)]
    res = results(pods, [(1100, 1.0), (1200, 1.0)], [(1100, 4), (1200, 4)])
    res["durations"] = vec([(pod("a"), 100.0)])  # one duration: no CV from it
    pools = live.Pools({"pools": [{"name": "training", "slo": {"wait_seconds": 60.0, "percentile": 90.0}}]})
    e = live.knees(res, START, 1200, WINDOW, pools)["training"]
    m = e["mgc"]
    assert m["cv_source"] == "waits" and m["durations"] == 1 and m["cv"] == pytest.approx(2.0, abs=1e-2)
    assert m["fit_rms_s"] < 0.05 < e["fit_rms_s"]
    assert m["past_knee"] is None and m["knee_utilization"] < e["knee_utilization"]


def kueue_matrix(queue, points):
    return [{"metric": {"cluster_queue": queue}, "values": [[t, str(v)] for t, v in points]}]


def test_kueue_gated_pools_take_the_admission_wait_histogram():
    gang = {"name": "training", "shape": "training", "training": {"gpus_per_job": 1, "gang_scheduling": True},
            "slo": {"wait_seconds": 60.0, "percentile": 90.0}}
    pools = live.Pools({"pools": [gang]})
    # the pods themselves wait 0 s (Kueue creates them once admitted); the histogram says 3.9 workloads
    # (an extrapolated increase) waited 39 s in all in the first window, none came in the second
    pods = [("a", 1050, 0.0), ("b", 1060, 0.0), ("c", 1070, 0.0), ("d", 1080, 0.0)]
    res = results(pods, [(1100, 2.0), (1200, 0.0)], [(1100, 4), (1200, 4)])
    res["kueue_wait_sum"] = kueue_matrix("gpupool-training", [(1100, 39.0), (1200, 0.0)])
    res["kueue_wait_count"] = kueue_matrix("gpupool-training", [(1100, 3.9), (1200, 0.0)])
    res["kueue_wait_sum"] += kueue_matrix("gpupool-other", [(1100, 500.0)])
    res["kueue_wait_count"] += kueue_matrix("gpupool-other", [(1100, 5.0)])
    e = live.knees(res, START, 1200, WINDOW, pools)["training"]
    assert e["waits"] == "Kueue admission"
    assert [(s["utilization"], s["mean_wait_s"], s["pods"]) for s in e["samples"]] == [(0.5, 10.0, 4), (0.0, None, 0)]
    assert e["service_s"] == pytest.approx(50.0)  # 200 busy GPU-seconds over 4 workloads
    # without the histogram (Kueue's metrics not scraped), or for a pool Kueue does not gate: the pods' waits
    for extra, design in (({}, gang), ({"kueue_wait_sum": res["kueue_wait_sum"], "kueue_wait_count": res["kueue_wait_count"]},
                                       dict(gang, training={"gpus_per_job": 1}))):
        res2 = dict(results(pods, [(1100, 2.0), (1200, 0.0)], [(1100, 4), (1200, 4)]), **extra)
        e = live.knees(res2, START, 1200, WINDOW, live.Pools({"pools": [design]}))["training"]
        assert e["waits"] == "pod scheduling" and e["samples"][0]["mean_wait_s"] == 0.0


def test_gangs_are_servers_of_several_gpus():
    pools = live.Pools({"pools": [{"name": "training", "training": {"gpus_per_job": 4}, "slo": {}}]})
    pods = [("a", 1050, 600.0)]
    out = live.knees(results(pods, [(1100, 4)], [(1100, 8)]), START, 1100, WINDOW, pools)
    e = out["training"]
    assert (e["servers"], e["gpus_per_job"]) == (2, 4)
    # one server busy for the window's 100 s, one job: S = 100 s; its 600 s wait at rho 0.5 (f = 1/3) fits 1800 s
    assert e["service_s"] == pytest.approx(100.0) and e["wait_fit_service_s"] == pytest.approx(1800.0)
    assert e["knee_utilization"] is None and "no slo.wait_seconds in the design" in e["message"]


def test_saturated_windows_measure_the_service_time_but_not_the_waits():
    pods = [("a", 1050, 30.0), ("b", 1150, 0.0)]
    slo = {"wait_seconds": 10.0, "percentile": 95.0}
    pools = live.Pools({"pools": [{"name": "training", "slo": slo}]})
    e = live.knees(results(pods, [(1100, 4), (1200, 0)], [(1100, 4), (1200, 4)]), START, 1200, WINDOW,
                   pools)["training"]
    assert e["service_s"] == pytest.approx(200.0)  # 400 busy server-seconds, 2 pods
    assert e["wait_fit_service_s"] is None and e["windows_left_out"] == 2 and e["fit_rms_s"] is None
    assert "RMS error of the modelled waits not known" in e["message"]
    assert e["knee_utilization"] == pytest.approx(q.knee(4, 200.0, 10.0, 95.0), abs=1e-4)


def test_no_pods_no_model():
    e = live.knees(results([], [(1100, 0)], [(1100, 4)]), START, 1100, WINDOW)["training"]
    assert e["service_s"] is None and "no GPU pod came and held its GPUs" in e["message"]
    assert e["mgc"]["cv"] is None and e["mgc"]["knee_utilization"] is None


def test_knee_settings_and_input_errors():
    assert live.knee_settings({}) == (7 * 86400, 900, 30)
    assert live.knee_settings({"knee_range": "2h", "knee_window": "5m", "knee_step": 10}) == (7200, 300, 10)
    assert live.knee_input_errors({"knee_window": "8d"}) == ["knee_window (691200 s) is longer than knee_range "
                                                             "(604800 s)"]
    assert live.knee_input_errors({"knee_step": "1.5"}) == ["knee_step must be a whole number of seconds, 1 or "
                                                            "more, not '1.5'"]
    assert "knee_range: 'a week' is not a duration" in live.knee_input_errors({"knee_range": "a week"})[0]
    assert live.knee_input_errors({"prometheus_url": "prom:9090"}) == [
        "prometheus_url must be an http:// or https:// URL, not 'prom:9090'"]
