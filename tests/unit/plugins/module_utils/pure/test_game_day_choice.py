"""The pure logic of gpu_game_day: which jobs and pods are in play, the choice, recovery, the report."""
from __future__ import annotations

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _game_day as gd

CQ = "gpupool-training"


def job(name, ns="team-a", uid=None, queue="training", suspend=False, conditions=None):
    return {"metadata": {"name": name, "namespace": ns, "uid": uid or "uid-" + name,
                         "labels": {gd.QUEUE_LABEL: queue} if queue else {}},
            "spec": {"suspend": suspend, "parallelism": 2}, "status": {"conditions": conditions or []}}


def workload(job_, cq=CQ, admitted=True, evicted=False, queue="training", kind="Job"):
    meta = job_["metadata"]
    conds = [{"type": "Admitted", "status": "True" if admitted else "False"}]
    if evicted:
        conds.append({"type": "Evicted", "status": "True"})
    return {"metadata": {"name": "job-%s-1a2b3" % meta["name"], "namespace": meta["namespace"],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": kind, "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}]},
            "spec": {"queueName": queue},
            "status": {"admission": {"clusterQueue": cq} if cq else None, "conditions": conds}}


def pod(name, job_, phase="Running", ready=True, deleting=False, owner=True):
    meta = {"name": name, "namespace": job_["metadata"]["namespace"], "uid": "pod-uid-" + name}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job_["metadata"]["name"],
                                    "uid": job_["metadata"]["uid"], "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "node-of-" + name}, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def world():
    """Three running gang jobs in the queue, and jobs of the queue that must be left alone."""
    a, b, c = job("gang-a"), job("gang-b"), job("gang-c", ns="team-b")
    other_q = job("other-queue")
    waiting = job("waiting", suspend=True)
    done = job("done", conditions=[{"type": "Complete", "status": "True"}])
    idle = job("idle")
    unlabeled = job("unlabeled", queue=None)
    jobs = [a, b, c, other_q, waiting, done, idle, unlabeled]
    wls = [workload(a), workload(b), workload(c), workload(other_q, cq="gpupool-inference"),
           workload(waiting, admitted=False), workload(done), workload(idle), workload(unlabeled)]
    pods = [pod("gang-a-x", a), pod("gang-a-y", a), pod("gang-b-x", b), pod("gang-b-y", b),
            pod("gang-b-z", b, deleting=True), pod("gang-c-x", c), pod("gang-c-y", c, phase="Pending"),
            pod("other-queue-x", other_q), pod("idle-x", idle, phase="Pending"), pod("unlabeled-x", unlabeled),
            pod("stray", a, owner=False)]
    return wls, jobs, pods


def test_candidates_are_running_admitted_jobs_of_the_queue_only():
    eligible, passed = gd.candidates(*world(), cluster_queue=CQ)
    assert [(e["namespace"], e["job"], e["pods"]) for e in eligible] == [
        ("team-a", "gang-a", ["gang-a-x", "gang-a-y"]),
        ("team-a", "gang-b", ["gang-b-x", "gang-b-y"]),  # the pod being deleted is not counted
        ("team-b", "gang-c", ["gang-c-x"]),  # the Pending one is not Running
    ]
    assert eligible[0]["uids"] == {"gang-a-x": "pod-uid-gang-a-x", "gang-a-y": "pod-uid-gang-a-y"}
    assert eligible[0]["nodes"] == {"gang-a-x": "node-of-gang-a-x", "gang-a-y": "node-of-gang-a-y"}
    assert eligible[0]["workload"] == "job-gang-a-1a2b3" and eligible[0]["local_queue"] == "training"
    assert "team-a/other-queue" not in passed  # another ClusterQueue: not even named
    assert passed["team-a/waiting"].startswith("its Workload")
    assert passed["team-a/done"].startswith("the Job is finished: Complete")
    assert passed["team-a/idle"] == "no Running pod"
    assert "does not carry" in passed["team-a/unlabeled"]


def test_candidates_filter_by_namespace_and_local_queue():
    wls, jobs, pods = world()
    eligible = gd.candidates(wls, jobs, pods, CQ, namespaces=["team-b"])[0]
    assert [e["job"] for e in eligible] == ["gang-c"]
    eligible = gd.candidates(wls, jobs, pods, CQ, local_queue="elsewhere")[0]
    assert eligible == []


def test_evicted_workload_and_suspended_job_are_left_alone():
    a = job("a")
    eligible, passed = gd.candidates([workload(a, evicted=True)], [a], [pod("a-x", a)], CQ)
    assert eligible == [] and "not admitted" in passed["team-a/a"]
    s = job("s", suspend=True)
    eligible, passed = gd.candidates([workload(s)], [s], [pod("s-x", s)], CQ)
    assert eligible == [] and passed["team-a/s"] == "the Job is suspended"


def test_each_pod_killed_is_named_with_its_job_and_node_and_the_diff_drops_exactly_those():
    eligible = gd.candidates(*world(), cluster_queue=CQ)[0]
    chosen = gd.choose(eligible, jobs=2, pods=1)
    assert [gd.killed_pod(e, p) for e in chosen for p in e["kill"]] == [
        dict(namespace="team-a", name="gang-a-x", job="gang-a", node="node-of-gang-a-x"),
        dict(namespace="team-a", name="gang-b-x", job="gang-b", node="node-of-gang-b-x")]
    before, after = gd.pods_diff(chosen)
    assert sorted(before["pods"]) == ["team-a/gang-a-x", "team-a/gang-a-y", "team-a/gang-b-x", "team-a/gang-b-y"]
    assert before["pods"]["team-a/gang-b-y"] == dict(job="team-a/gang-b", node="node-of-gang-b-y")
    assert sorted(after["pods"]) == ["team-a/gang-a-y", "team-a/gang-b-y"]
    assert gd.killed_pod(dict(namespace="n", job="j"), "p") == dict(namespace="n", name="p", job="j", node=None)


def test_choice_without_seed_is_name_order():
    eligible = gd.candidates(*world(), cluster_queue=CQ)[0]
    chosen = gd.choose(eligible, jobs=2, pods=1)
    assert [(c["job"], c["kill"]) for c in chosen] == [("gang-a", ["gang-a-x"]), ("gang-b", ["gang-b-x"])]
    assert [c["kill"] for c in gd.choose(eligible, jobs=1)] == [["gang-a-x", "gang-a-y"]]  # all pods by default


def test_choice_with_seed_is_repeatable_and_depends_on_the_seed():
    eligible = gd.candidates(*world(), cluster_queue=CQ)[0]
    first = gd.choose(eligible, jobs=2, pods=1, seed=42)
    assert gd.choose(list(reversed(eligible)), jobs=2, pods=1, seed=42) == first  # input order does not matter
    picks = set()
    for seed in range(40):
        chosen = gd.choose(eligible, jobs=1, pods=1, seed=seed)
        assert len(chosen) == 1 and len(chosen[0]["kill"]) == 1
        assert set(chosen[0]["kill"]) <= set(chosen[0]["pods"])
        picks.add((chosen[0]["job"], chosen[0]["kill"][0]))
    assert len(picks) == 5  # every Running pod of the queue is reachable by some seed


def test_choice_takes_fewer_when_fewer_run_and_refuses_nothing_or_unknown():
    eligible = gd.candidates(*world(), cluster_queue=CQ)[0]
    assert len(gd.choose(eligible, jobs=10)) == 3
    assert [c["job"] for c in gd.choose(eligible, jobs=5, only=["team-b/gang-c"])] == ["gang-c"]
    with pytest.raises(gd.GameDayError, match="team-a/done"):
        gd.choose(eligible, only=["team-a/done"])
    with pytest.raises(gd.GameDayError, match="no running Kueue-admitted job"):
        gd.choose([], jobs=1)


def _entry(j, kill, pods_before):
    return dict(namespace=j["metadata"]["namespace"], job=j["metadata"]["name"], uid=j["metadata"]["uid"],
                workload="wl", kill=kill, pods=pods_before)


def test_recovery_states():
    a = job("gang-a")
    entry = _entry(a, ["gang-a-x"], ["gang-a-x", "gang-a-y"])
    wl = workload(a)
    # only the survivor runs: not yet
    state, detail, running = gd.recovery(entry, a, wl, [pod("gang-a-y", a), pod("gang-a-new", a, phase="Pending")])
    assert state is None and detail == "1 of 2 pods Running" and running == ["gang-a-y"]
    # the replacement Running but not Ready: not yet
    state = gd.recovery(entry, a, wl, [pod("gang-a-y", a), pod("gang-a-new", a, ready=False)])[0]
    assert state is None
    # a killed pod still terminating does not count
    state = gd.recovery(entry, a, wl, [pod("gang-a-y", a), pod("gang-a-x", a)])[0]
    assert state is None
    state, detail, running = gd.recovery(entry, a, wl, [pod("gang-a-y", a), pod("gang-a-new", a)])
    assert state == gd.RECOVERED and running == ["gang-a-new", "gang-a-y"]
    # requeued by Kueue: suspended, or Workload not admitted: not yet, and requeued says so
    suspended = job("gang-a", suspend=True)
    assert gd.recovery(entry, suspended, wl, [])[0] is None and gd.requeued(suspended, wl)
    evicted = workload(a, evicted=True)
    assert gd.recovery(entry, a, evicted, [pod("gang-a-new", a), pod("gang-a-y", a)])[0] is None
    assert gd.requeued(a, evicted) and not gd.requeued(a, wl)
    # failed for good
    failed = job("gang-a", conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}])
    state, detail = gd.recovery(entry, failed, wl, [])[:2]
    assert state == gd.FAILED and "BackoffLimitExceeded" in detail
    assert gd.recovery(entry, None, wl, [])[:2] == (gd.FAILED, "the Job is gone")
    # ran again and finished meanwhile: back
    complete = job("gang-a", conditions=[{"type": "Complete", "status": "True"}])
    assert gd.recovery(entry, complete, wl, [])[:2] == (gd.RECOVERED, "the Job ran again and completed")
    assert gd.recovery(entry, job("gang-a", uid="another"), wl, [])[0] == gd.FAILED  # a new Job of that name


def _outcome(name, state, rc=0, seconds=3.5, check=True):
    return dict(namespace="team-a", job=name, workload="wl-" + name, local_queue="training", kill=[name + "-x"],
                state=state, seconds=seconds if state == gd.RECOVERED else None, requeued=False,
                detail="2 of 2 pods Running again" if state == gd.RECOVERED else "1 of 2 pods Running",
                check=dict(rc=rc, output="", seconds=0.1) if check else None)


def test_survival_needs_recovery_and_a_passing_check():
    assert gd.survived(_outcome("a", gd.RECOVERED))
    assert gd.survived(_outcome("a", gd.RECOVERED, check=False))
    assert not gd.survived(_outcome("a", gd.RECOVERED, rc=1))
    assert not gd.survived(_outcome("a", gd.RECOVERED, rc=None))  # no exit status
    assert not gd.survived(_outcome("a", gd.NOT_RECOVERED))
    assert not gd.survived(_outcome("a", gd.FAILED))


def test_report_and_markdown_say_what_survived():
    outcomes = [_outcome("a", gd.RECOVERED), _outcome("b", gd.RECOVERED, rc=3), _outcome("c", gd.NOT_RECOVERED)]
    rep = gd.report(CQ, outcomes, 30, seed=5, check_command="test -s ckpt", passed_over={"team-a/d": "no Running pod"})
    assert rep["survived"] == ["team-a/a"] and rep["lost"] == ["team-a/b", "team-a/c"]
    assert rep["pods_killed"] == 3 and rep["bound_seconds"] == 30 and rep["seed"] == 5
    assert [j["survived"] for j in rep["jobs"]] == [True, False, False]
    md = gd.markdown(rep)
    assert md.startswith("# Game day: ClusterQueue gpupool-training")
    assert "| team-a/a | a-x | recovered | 3.50 | no | passed | yes |" in md
    assert "| team-a/b | b-x | recovered | 3.50 | no | failed (rc 3) | no |" in md
    assert "| team-a/c | c-x | not recovered |  | no | passed | no |" in md
    assert "Lost: team-a/b, team-a/c." in md
    ok = gd.markdown(gd.report(CQ, outcomes[:1], 30))
    assert "Every hit job survived." in ok


def test_check_mode_report_lists_what_would_be_killed():
    rep = gd.report(CQ, [dict(namespace="team-a", job="a", workload="wl", local_queue="training", kill=["a-x", "a-y"],
                              state="not_started")], 30, check_mode=True)
    assert rep["pods_killed"] == 0 and rep["survived"] == [] and rep["lost"] == []
    md = gd.markdown(rep)
    assert "nothing was killed" in md and "| team-a/a | wl | a-x, a-y |" in md


def test_tail_keeps_the_end():
    assert gd.tail("x" * 10) == "x" * 10
    assert gd.tail("a" + "x" * 3000) == "..." + "x" * 2000


@pytest.mark.parametrize("changes, words", [
    (dict(jobs=0), "jobs must be 1 or more"),
    (dict(pods=0), "pods must be 1 or more"),
    (dict(grace_period=0), "never force-deletes"),
    (dict(poll_interval=0), "poll_interval"),
    (dict(cluster_queue=" "), "cluster_queue must not be empty"),
    (dict(check_command=""), "check_command must not be empty"),
    (dict(only=["team-a"]), "only[0] must be namespace/name"),
    (dict(namespaces=[""]), "namespaces[0] is empty"),
])
def test_input_errors(changes, words):
    good = dict(cluster_queue=CQ, local_queue=None, jobs=1, pods=None, grace_period=None, poll_interval=2.0,
                only=None, namespaces=None, check_command=None, kueue_api_version="kueue.x-k8s.io/v1beta2")
    assert gd.input_errors(good) == []
    errors = gd.input_errors(dict(good, **changes))
    assert len(errors) == 1 and words in errors[0], errors
