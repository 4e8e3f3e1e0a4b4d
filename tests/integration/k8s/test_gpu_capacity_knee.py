"""gpu_capacity's queueing knee from real Prometheus samples (playbooks/capacity.yml), on the
Kubernetes rig with metrics (real scheduler, kwok nodes, kube-state-metrics, Prometheus).

A seeded random workload of 1-GPU pods runs on the example design's inference pool (two nodes of
two GPUs: M/M/4): Poisson arrivals, a light phase then a heavy one, each pod held for an
time after it is bound (3 s plus an exponential one), then deleted. The test records each pod's creation, binding
and deletion from the API and checks the module's samples against them: per window the same
pods with the same mean scheduling wait, the utilization within a scrape's worth; the fitted
service time is the mean time the pods held their GPUs, and the knee is where the M/M/4 wait with
that service time at the design's percentile reaches the design's target.
"""
import calendar
import random
import time
from pathlib import Path

import pytest
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing
from tests.lib.ansible_run import run_playbook
from tests.lib import knee_workload
from tests.lib.knee_workload import capacity_knee, poisson_arrivals, run_workload

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
RIG_NODES = HERE / "capacity_knee_nodes.yml"
FLEET = knee_workload.FLEET
NS = "knee"
GPUS = 4
WINDOW = 20
PHASES = [(40, 0.3), (60, 0.6)]   # (seconds, arrivals per second): rho about 0.45, then 0.9 by 6 s holds
MIN_HOLD, MEAN_HOLD = 3.0, 6.0  # at least a few scrapes: a pod that lives under one is never seen
SLO = {"wait_seconds": 5.0, "percentile": 90.0, "planned_utilization": 0.85}


@pytest.fixture(scope="module")
def workload(k8s_metrics_rig):
    """Runs the workload; returns {pod: (created, scheduled, deleted)} in epoch seconds."""
    rng = random.Random(14)
    due = poisson_arrivals(rng, PHASES)
    holds = [MIN_HOLD + rng.expovariate(1 / (MEAN_HOLD - MIN_HOLD)) for _arrival in due]
    record, _held = run_workload(k8s_metrics_rig, NS, due, holds, "knee")
    return record


def expected(record, end):
    """Per window end: (pods created in it, their mean wait, GPU utilization) from the API's times."""
    out = {}
    for e in end:
        inside = [s - c for c, s, _d in record.values() if e - WINDOW < c <= e]
        busy = sum(max(0.0, min(d, e) - max(s, e - WINDOW)) for _c, s, d in record.values())
        out[e] = (len(inside), sum(inside) / len(inside) if inside else None, busy / (GPUS * WINDOW))
    return out


def test_knee_from_prometheus_samples(k8s_metrics_rig, workload, vsphere_env, tmp_path):
    knee, res, out, took = capacity_knee(k8s_metrics_rig, vsphere_env, tmp_path, workload, SLO, WINDOW)
    held = sum(d - s for _c, s, d in workload.values()) / len(workload)
    figures = (len(workload), held, took, knee["service_s"], knee["wait_fit_service_s"], knee["fit_rms_s"],
               knee["knee_utilization"], knee["windows_used"], knee["windows"])
    print("knee test: %d pods held %.2f s on average; playbook %.1f s; service %s s, waits fit %s s, RMS %s s, "
          "knee %s, windows used %d of %d" % figures)
    for s in knee["samples"]:
        print("  ", s)
    assert (knee["gpus"], knee["servers"], knee["gpus_per_job"]) == (GPUS, 4, 1)
    ends = [calendar.timegm(time.strptime(s["end"], "%Y-%m-%dT%H:%M:%SZ")) for s in knee["samples"]]
    want = expected(workload, ends)
    assert sum(w[0] for w in want.values()) == len(workload), "every pod falls in a window of the range"
    for s, e in zip(knee["samples"], ends):
        count, mean, rho = want[e]
        assert s["pods"] == count, (s, want[e])
        if count:
            # no tolerance: the same pods' whole-second timestamps (kube-state-metrics reads the API's), so the
            # same mean, which the module rounds to 0.01 s; one pod read 1 s apart moves a window's mean by 1 s
            # over its pods
            assert s["mean_wait_s"] == round(mean, 2), (s, want[e])
        # kube-state-metrics sees a pod's phase a scrape or two late (about 2 s on the rig, more under load):
        # a window's utilization moves by what crosses its edges in that time
        assert s["utilization"] == pytest.approx(rho, abs=0.2), (s, want[e])
    # over the whole range the lag cancels out: the same GPU-seconds
    assert sum(s["utilization"] for s in knee["samples"]) == pytest.approx(sum(w[2] for w in want.values()), rel=0.1)
    # the service time is the pods' mean GPU holding time (Little's law over the samples): the API's
    # bind-to-delete time, within what a 1 s scrape and kwok's phase updates blur
    rows = [(s["utilization"], s["mean_wait_s"], s["pods"]) for s in knee["samples"]]
    service = _queueing.service_from_load(4, WINDOW, [(r, n) for r, _w, n in rows])
    assert knee["service_s"] == pytest.approx(service, abs=1e-3)
    assert knee["service_s"] == pytest.approx(held, rel=0.2)
    fit = _queueing.fit_service(4, rows)
    assert knee["windows_used"] == fit["used"] >= 2
    if fit["service_s"] is not None:
        assert knee["wait_fit_service_s"] == pytest.approx(fit["service_s"], abs=1e-3)
    want_knee = _queueing.knee(4, knee["service_s"], SLO["wait_seconds"], SLO["percentile"])
    assert knee["knee_utilization"] == pytest.approx(want_knee, abs=1e-3)
    assert knee["past_knee"] is (SLO["planned_utilization"] > knee["knee_utilization"])
    text = (out / "gpu-capacity.md").read_text()
    assert "## Queueing knee" in text and "| inference | 4 (4 / 1) |" in text
    shown = [r for name, r in res.tasks if name == "Show the queueing knee per pool"]
    assert shown and any(m.startswith("inference: M/M/4, service time") for m in shown[0]["msg"])


def test_prometheus_that_does_not_answer_fails_naming_it(vsphere_env, tmp_path):
    url = "http://127.0.0.1:9"  # discard port: nothing listens
    res = run_playbook(ROOT / "playbooks" / "capacity.yml", env=vsphere_env, extra_vars={
        "capacity_design_file": "", "capacity_output_dir": str(tmp_path), "capacity_prometheus_url": url,
        "capacity_knee_range": "1h", "capacity_knee_window": "5m"})
    assert res.rc != 0
    failed = [r for _n, r in res.tasks if r.get("failed")]
    assert failed and failed[0]["msg"].startswith("Unable to query the knee's scheduled series from Prometheus %s"
                                                  % url), failed[0]["msg"]


def test_bad_knee_window_fails_before_reading(vsphere_env, tmp_path):
    res = run_playbook(ROOT / "playbooks" / "capacity.yml", env=vsphere_env, extra_vars={
        "capacity_design_file": "", "capacity_output_dir": str(tmp_path),
        "capacity_prometheus_url": "http://127.0.0.1:9", "capacity_knee_range": "1h",
        "capacity_knee_window": "2h"})
    assert res.rc != 0
    failed = [r for _n, r in res.tasks if r.get("failed")]
    assert failed and "knee_window (7200 s) is longer than knee_range (3600 s)" in failed[0]["msg"], failed[0]["msg"]
