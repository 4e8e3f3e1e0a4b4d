"""Honest limits of the what-if replay: on a workload where both apply, its mean wait against the analytic
queueing model (pure/_queueing.py) for the same servers, arrival rate and mean run time.

The workload: one pool (inference of the example design, 4 nodes of one GPU: c = 4 servers), no quota that binds
(the tenant's GPU quota is above the record's workload count, and ResourceQuota counts pending pods too),
Poisson arrivals from the seeded generator, one GPU per job, exponential run times of mean 600 s, offered at
utilization 0.7; seed 34 gives 43 workloads over 2.5 simulated hours at utilization 0.674 (the record's own
arrival rate and mean run time, 564 s). The replay runs it on the rig's real kube-apiserver, kube-scheduler and
controller-manager with kwok nodes at compression 150 (a 564 s run is 3.8 wall seconds), polling every 0.1 s.

Two errors, kept apart:

* sampling: a record of 43 workloads is one sample path that starts empty. The test runs it through its own
  discrete-event simulation (FCFS on c servers, the record's arrivals and run times, no lag): its mean wait is
  what a lag-free scheduler gives on this record. Over the seeds of the same generator that mean ranges from
  near nothing to more than twice the model's (5-95 % of 400 seeds: 4 to 486 s where M/M/4 says 214 s at 0.7), so
  the record's seed was chosen as one whose own FCFS mean is near the model's (within 15 %), which the test
  checks; the gap it leaves is part of the tolerance.
* the replay's: every wait it measures is the scheduler's plus the lag of the compressed clock: the Job and pod
  creation, the bind, kwok's Running, and the replayer's poll (0.1 s plus the time its lists take) happen in
  wall time and count ``compression`` times in simulated time; each run also ends a little late (kwok's
  Succeeded and the scheduler's next bind). The tolerance for that is ``LAG_WALL_S`` wall seconds of mean
  lag per workload (0.6 s: six polls, 90 simulated seconds), well above the 0.03-0.05 s by which two replays on
  the shared rig differed from the record's own FCFS (a wait is stamped at the start of the poll that sees it,
  so a loaded machine's slow lists make waits read short as well as its lag makes them read long).

The replay agrees with the model when |replay - M/M/c| <= |own FCFS - M/M/c| + LAG_WALL_S x compression (and
the same for M/G/c), and with its own record's FCFS when they differ by at most LAG_WALL_S x compression (the
lag adds; the scheduler's order, not strictly FCFS, moves a sample path's mean either way). The figures are
printed for docs/what-if.md ("Honest limits").
"""
from __future__ import annotations

import heapq
import json

import k8s_rig
import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing as queueing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _workload_record as wr
from tests.lib import kueue_rig
from tests.lib.ansible_run import run_module

SERVERS, MEAN_S, RHO, HOURS, SEED = 4, 600.0, 0.7, 2.5, 34
FACTOR, POLL = 150, 0.1
LAG_WALL_S = 0.6
SYSTEM_ONLY = {"defaults": {"cpu": "8", "memory": "32Gi", "labels": {"kubernetes.io/os": "linux"}},
               "pools": [{"name": "system", "count": 1}]}


def one_pool_design():
    """The example design cut to its inference pool (4 one-GPU node VMs) and one tenant whose quota never binds."""
    design = kueue_rig.example_design()
    design["pools"] = [p for p in design["pools"] if p["name"] == "inference"]
    design["pools"][0]["node_pool"]["replicas"] = SERVERS
    design["tenants"] = [dict(t, gpu_quota={"inference": 1000}) for t in design["tenants"]
                         if t["name"] == "team-search"]
    return design


def record():
    rate = RHO * SERVERS / MEAN_S * 3600.0
    return wr.generate({"inference": {"arrivals_per_hour": rate, "mean_seconds": MEAN_S, "gpus": 1,
                                      "tenants": ["team-search"]}}, HOURS, SEED)


def fcfs_waits(workloads, servers):
    """The waits of FCFS on ``servers`` identical servers, no lag (the test's own simulation)."""
    free = [0.0] * servers
    waits = []
    for w in sorted(workloads, key=lambda w: w["arrival"]):
        at = heapq.heappop(free)
        start = max(at, w["arrival"])
        waits.append(start - w["arrival"])
        heapq.heappush(free, start + w["duration"])
    return waits


def test_the_record_is_poisson_exponential_at_the_planned_load_and_representative():
    rec = record()
    ws = rec["workloads"]
    rate = len(ws) / rec["span_seconds"]
    mean = sum(w["duration"] for w in ws) / len(ws)
    rho = rate * mean / SERVERS
    cv = queueing.cv_from_durations([w["duration"] for w in ws])[0]
    assert len(ws) == 43 and all(w["gpus"] == 1 and w["pods"] == 1 for w in ws)
    assert 0.6 <= rho <= 0.7 and 0.9 <= cv <= 1.1, (rho, cv)
    own = sum(fcfs_waits(ws, SERVERS)) / len(ws)
    model = queueing.mean_wait(SERVERS, rho, mean)
    assert abs(own - model) <= 0.15 * model, (own, model)


@pytest.fixture(scope="module")
def k8s_rig_instance(tmp_path_factory):
    """A rig without Kueue and one system node: the replay makes its own kwok nodes."""
    nodes = tmp_path_factory.mktemp("what-if-model") / "nodes.yml"
    nodes.write_text(yaml.safe_dump(SYSTEM_ONLY))
    try:
        rig = k8s_rig.start(nodes_file=nodes, kueue=False)
    except k8s_rig.RigError as exc:
        pytest.fail("the Kubernetes rig did not start: %s" % exc, pytrace=False)
    try:
        yield rig
    finally:
        rig.stop()


def test_the_replay_mean_wait_agrees_with_mmc_within_the_lag_of_its_clock(k8s_rig_instance):
    rec = record()
    ws = rec["workloads"]
    result, _run = run_module("gpupool.vcf.gpu_what_if", dict(
        design=one_pool_design(), record=json.loads(json.dumps(rec)), kubeconfig=str(k8s_rig_instance.kubeconfig),
        compression=FACTOR, poll_interval=POLL), env=k8s_rig_instance.env)
    assert not result.get("failed"), result.get("msg")
    rows = result["current"]["workloads"]
    assert len(rows) == len(ws) and all(r["finished"] and r["preempted"] == 0 for r in rows), rows
    assert all(r["admission_wait"] <= POLL * FACTOR * 3 for r in rows)  # no Kueue: admitted when submitted
    replay = sum(r["wait"] for r in rows) / len(rows)
    rate = len(ws) / rec["span_seconds"]
    mean = sum(w["duration"] for w in ws) / len(ws)
    rho = rate * mean / SERVERS
    cv = queueing.cv_from_durations([w["duration"] for w in ws])[0]
    mmc, mgc = queueing.mean_wait(SERVERS, rho, mean), queueing.mean_wait(SERVERS, rho, mean, cv)
    own = sum(fcfs_waits(ws, SERVERS)) / len(ws)
    lag = LAG_WALL_S * FACTOR
    usage = result["current"]["usage"]["inference"]
    print("what-if against the model: %d workloads, c %d, utilization %.3f (replay %.3f), mean run %.0f s, CV %.2f, "
          "compression %d, poll %.2f s: replay mean wait %.1f s, own FCFS %.1f s, M/M/c %.1f s, M/G/c %.1f s; "
          "error against M/M/c %+.1f s (%+.0f %%), against M/G/c %+.1f s (%+.0f %%), against own FCFS %+.1f s; "
          "replay lag floor (p25 of the waits) %.1f s" % (
              len(ws), SERVERS, rho, usage["utilization"], mean, cv, FACTOR, POLL, replay, own, mmc, mgc,
              replay - mmc, 100 * (replay - mmc) / mmc, replay - mgc, 100 * (replay - mgc) / mgc, replay - own,
              sorted(r["wait"] for r in rows)[len(rows) // 4]))
    assert abs(replay - own) <= lag, (replay, own, lag)
    assert abs(replay - mmc) <= abs(own - mmc) + lag, (replay, mmc, own, lag)
    assert abs(replay - mgc) <= abs(own - mgc) + lag, (replay, mgc, own, lag)
