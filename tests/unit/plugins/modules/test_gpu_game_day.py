"""gpu_game_day through main(): the Kueue queue, its Jobs and pods are a fake of the GameDayApi the module
imports; the check command runs for real through /bin/sh. A hit Job is Running again at the first look, so
the module's own clock and sleep are never waited on."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.modules import gpu_game_day
from tests.lib.module_docs import leaked, missing_keys, secret_options
from tests.lib.module_main import K8S, run_main

CQ = "gpupool-training"
API_KEY = "k8s-api-key-5c1d"


def _job(name):
    return {"metadata": {"name": name, "namespace": "team-a", "uid": "uid-" + name,
                         "labels": {"kueue.x-k8s.io/queue-name": "training"}},
            "spec": {"suspend": False}, "status": {}}


def _workload(job, admitted=True):
    return {"metadata": {"name": "job-%s-x1" % job, "namespace": "team-a",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "uid-" + job}]},
            "spec": {"queueName": "training"},
            "status": {"admission": {"clusterQueue": CQ} if admitted else None,
                       "conditions": [{"type": "Admitted", "status": "True" if admitted else "False"}]}}


def _pod(job, name):
    return {"metadata": {"name": name, "namespace": "team-a", "uid": "uid-" + name,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "uid-" + job,
                                              "controller": True}]},
            "spec": {"nodeName": "node-" + name[-1]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


class Queue:
    """Two admitted Jobs of the queue, two Running pods each; a killed pod is replaced at once by a new one
    (the Job controller). ``fail``: method name -> K8sError; ``calls``: every call made."""

    def __init__(self):
        self.jobs = {"gang-a": _job("gang-a"), "gang-b": _job("gang-b")}
        self.workloads = [_workload("gang-a"), _workload("gang-b")]
        self.pods = dict((n, _pod(j, n)) for j in ("gang-a", "gang-b") for n in (j + "-1", j + "-2"))
        self.deleted = []
        self.calls = []
        self.made = []
        self.fail = {}

    def api(self, params, kueue_api_version=None):
        self.made.append(dict(params=dict(params), kueue_api_version=kueue_api_version))
        queue = self

        class Api:
            def __getattr__(self, name):
                def call(*args):
                    queue.calls.append((name,) + args)
                    if name in queue.fail:
                        raise queue.fail[name]
                    return getattr(queue, "_" + name)(*args)
                return call

        return Api()

    def _list_workloads(self, namespace=None):
        return [dict(w) for w in self.workloads]

    def _list_jobs(self, namespace=None):
        return list(self.jobs.values())

    def _list_job_pods(self, namespace=None):
        return list(self.pods.values())

    def _read_job(self, namespace, name):
        return self.jobs[name]

    def _delete_pod(self, namespace, name, uid, grace_period=None):
        self.deleted.append((namespace, name, uid, grace_period))
        job = self.pods[name]["metadata"]["ownerReferences"][0]["uid"][len("uid-"):]
        del self.pods[name]
        self.pods[name + "-new"] = _pod(job, name + "-new")
        return True


@pytest.fixture
def queue(monkeypatch):
    q = Queue()
    monkeypatch.setattr(gpu_game_day, "GameDayApi", q.api)
    return q


def args(**extra):
    # a short bound: a fake that never lets a Job come back fails the test in a second, not in ten minutes
    # method delete: these tests are of the pod kill (the reclaim through Kueue: test_gpu_game_day_preempt.py)
    out = dict(K8S, cluster_queue=CQ, api_key=API_KEY, recovery_timeout=1, poll_interval=0.05, method="delete")
    out.update(extra)
    return out


WOULD_KILL = [dict(namespace="team-a", job="gang-a", workload="job-gang-a-x1", local_queue="training",
                   kill=["gang-a-1", "gang-a-2"])]


def test_check_mode_names_what_the_real_run_kills_and_kills_nothing(queue):
    checked = run_main(gpu_game_day, args(), check_mode=True)
    assert not checked.get("failed"), checked.get("msg")
    assert missing_keys(gpu_game_day, checked) == []
    assert checked["changed"] is True and checked["would_kill"] == WOULD_KILL and checked["jobs"] == []
    assert queue.deleted == [] and not [c for c in queue.calls if c[0] == "delete_pod"]

    real = run_main(gpu_game_day, args(grace_period=20))
    assert not real.get("failed"), real.get("msg")
    assert missing_keys(gpu_game_day, real) == []
    assert real["changed"] is True and real["would_kill"] == checked["would_kill"]
    assert queue.deleted == [("team-a", "gang-a-1", "uid-gang-a-1", 20), ("team-a", "gang-a-2", "uid-gang-a-2", 20)]
    [job] = real["jobs"]
    assert job["kill"] == ["gang-a-1", "gang-a-2"] and job["state"] == "recovered" and job["survived"] is True
    # every pod killed, each once, with its Job and node; the per-Job summary (jobs[].kill) beside it
    assert checked["killed"] == []
    assert real["killed"] == [dict(namespace="team-a", name="gang-a-1", job="gang-a", node="node-1"),
                              dict(namespace="team-a", name="gang-a-2", job="gang-a", node="node-2")]
    assert real["survived"] == ["team-a/gang-a"] and real["lost"] == []
    assert real["report"]["cluster_queue"] == CQ and "gang-a" in real["markdown"]
    assert queue.made[0]["kueue_api_version"] == "kueue.x-k8s.io/v1beta2"
    assert queue.made[0]["params"]["kubeconfig"] == K8S["kubeconfig"]


def test_a_queue_with_nothing_admitted_is_refused_alike_in_check_mode_and_for_real(queue):
    queue.workloads = [_workload("gang-a", admitted=False), _workload("gang-b", admitted=False)]
    checked = run_main(gpu_game_day, args(), check_mode=True)
    real = run_main(gpu_game_day, args())
    assert checked == real
    assert real == dict(failed=True, msg="Unable to play a game day on ClusterQueue gpupool-training: no running "
                                         "Kueue-admitted job in the queue")
    assert queue.deleted == []


def test_a_second_game_day_hits_the_replacement_pods(queue):
    first = run_main(gpu_game_day, args())
    second = run_main(gpu_game_day, args())
    # a game day is an action, not a state: each run kills again (changed), the pods the Job made meanwhile
    assert first["changed"] is True and second["changed"] is True
    assert second["would_kill"][0]["kill"] == ["gang-a-1-new", "gang-a-2-new"] and second["survived"] == ["team-a/gang-a"]


def test_diff_mode_shows_the_pods_of_the_hit_jobs_before_and_after_the_kill_as_check_mode_predicts(queue):
    checked = run_main(gpu_game_day, args(jobs=2, pods=1), check_mode=True, diff=True)
    assert not checked.get("failed"), checked.get("msg")
    assert queue.deleted == []
    before = {"team-a/gang-a-1": dict(job="team-a/gang-a", node="node-1"),
              "team-a/gang-a-2": dict(job="team-a/gang-a", node="node-2"),
              "team-a/gang-b-1": dict(job="team-a/gang-b", node="node-1"),
              "team-a/gang-b-2": dict(job="team-a/gang-b", node="node-2")}
    after = dict((k, v) for k, v in before.items() if k.endswith("-2"))  # pods=1: the first pod of each job goes
    assert checked["diff"] == dict(before=dict(pods=before), after=dict(pods=after))
    real = run_main(gpu_game_day, args(jobs=2, pods=1), diff=True)
    assert not real.get("failed"), real.get("msg")
    assert real["diff"] == checked["diff"]
    assert [d[1] for d in queue.deleted] == ["gang-a-1", "gang-b-1"]
    plain = run_main(gpu_game_day, args())
    assert "diff" not in plain


def test_a_lost_job_fails_the_run_with_the_diff_and_every_pod_killed(queue):
    result = run_main(gpu_game_day, args(check_command="exit 3"), diff=True)
    assert result["failed"] is True and result["lost"] == ["team-a/gang-a"]
    assert [k["name"] for k in result["killed"]] == ["gang-a-1", "gang-a-2"]
    assert result["diff"]["after"] == dict(pods={}) and sorted(result["diff"]["before"]["pods"]) == [
        "team-a/gang-a-1", "team-a/gang-a-2"]


def test_the_check_command_runs_once_per_hit_job_with_the_game_day_environment(queue, tmp_path):
    seen = tmp_path / "seen"
    cmd = 'echo "$GAME_DAY_NAMESPACE/$GAME_DAY_JOB $GAME_DAY_PODS_KILLED $GAME_DAY_RECOVERED" >> %s' % seen
    result = run_main(gpu_game_day, args(jobs=2, pods=1, check_command=cmd))
    assert not result.get("failed"), result.get("msg")
    assert seen.read_text().splitlines() == ["team-a/gang-a gang-a-1 true", "team-a/gang-b gang-b-1 true"]
    assert [j["check"]["rc"] for j in result["jobs"]] == [0, 0]
    assert result["survived"] == ["team-a/gang-a", "team-a/gang-b"]


def test_a_failed_check_loses_the_job_and_fails_the_run_with_the_report(queue):
    result = run_main(gpu_game_day, args(check_command="echo no checkpoint; exit 3"))
    assert result["failed"] is True
    assert result["msg"] == ("Game day on ClusterQueue gpupool-training: 1 of 1 hit jobs did not survive: "
                             "team-a/gang-a (the check command exited 3)"), result["msg"]
    assert result["changed"] is True and result["lost"] == ["team-a/gang-a"]
    assert result["would_kill"] == WOULD_KILL and "no checkpoint" in result["jobs"][0]["check"]["output"]
    relaxed = run_main(gpu_game_day, args(check_command="exit 3", fail_on_loss=False))
    assert not relaxed.get("failed") and relaxed["lost"] == ["team-a/gang-a"]


@pytest.mark.parametrize("bad, message", [
    (dict(jobs=0), "jobs must be 1 or more jobs to hit, not 0"),
    (dict(grace_period=0), "grace_period must be 1 or more seconds"),
    (dict(only=["gang-a"]), "only[0] must be namespace/name of a Job, not 'gang-a'"),
    (dict(cluster_queue=" "), "cluster_queue must not be empty"),
])
def test_bad_input_is_refused_before_the_cluster_is_reached(queue, bad, message):
    result = run_main(gpu_game_day, dict(args(), **bad))
    assert result["failed"] is True and result["msg"].startswith("Invalid input for gpu_game_day: "), result["msg"]
    assert message in result["msg"], result["msg"]
    assert queue.made == [] and queue.calls == []


def test_a_bad_request_timeout_is_refused_before_the_cluster_is_reached(queue):
    result = run_main(gpu_game_day, args(request_timeout=0))
    assert result["failed"] is True and "request_timeout must be a whole number of seconds, 1 or more, not 0" in result["msg"]
    assert queue.made == [] and queue.calls == []


def test_a_job_not_of_the_queue_is_refused_with_its_name(queue):
    result = run_main(gpu_game_day, args(only=["team-a/other"]), check_mode=True)
    assert result["failed"] is True and result["msg"].startswith(
        "Unable to play a game day on ClusterQueue gpupool-training: "), result["msg"]
    assert "team-a/other" in result["msg"] and queue.deleted == []


def test_an_api_error_while_reading_names_the_queue_and_nothing_was_killed(queue):
    queue.fail["list_jobs"] = K8sError("jobs.batch is forbidden", status=403)
    result = run_main(gpu_game_day, args())
    assert result["failed"] is True
    assert result["msg"] == ("Unable to read the Kueue Workloads, Jobs and pods of ClusterQueue gpupool-training: "
                             "jobs.batch is forbidden"), result["msg"]
    assert queue.deleted == [] and "killed" not in result


def test_an_api_error_during_the_kill_names_the_pod_and_what_was_killed(queue):
    real_delete = queue._delete_pod
    state = dict(n=0)

    def second_fails(namespace, name, uid, grace_period=None):
        state["n"] += 1
        if state["n"] == 2:
            raise K8sError("pods \"%s\" is forbidden" % name, status=403)
        return real_delete(namespace, name, uid, grace_period)

    queue._delete_pod = second_fails
    result = run_main(gpu_game_day, args(jobs=2, pods=1))
    assert result["failed"] is True
    assert result["msg"] == 'Unable to delete pod team-a/gang-b-1: pods "gang-b-1" is forbidden', result["msg"]
    # the first job's pod went before the second job's failed
    assert result["killed"] == [dict(namespace="team-a", name="gang-a-1", job="gang-a", node="node-1")]
    assert [e["kill"] for e in result["would_kill"]] == [["gang-a-1"], ["gang-b-1"]]  # what was attempted
    assert [d[1] for d in queue.deleted] == ["gang-a-1"]


def test_a_failure_within_one_jobs_pods_still_names_the_pods_of_that_job_killed_before_it(queue):
    real_delete = queue._delete_pod

    def third_fails(namespace, name, uid, grace_period=None):
        if name == "gang-a-3":
            raise K8sError("pods \"%s\" is forbidden" % name, status=403)
        return real_delete(namespace, name, uid, grace_period)

    queue.pods["gang-a-3"] = _pod("gang-a", "gang-a-3")
    queue._delete_pod = third_fails
    result = run_main(gpu_game_day, args())
    assert result["failed"] is True and result["msg"].startswith("Unable to delete pod team-a/gang-a-3: ")
    assert result["killed"] == [dict(namespace="team-a", name="gang-a-1", job="gang-a", node="node-1"),
                                dict(namespace="team-a", name="gang-a-2", job="gang-a", node="node-2")]
    assert [d[1] for d in queue.deleted] == ["gang-a-1", "gang-a-2"]


def test_the_api_key_is_not_in_the_result(queue):
    assert secret_options(gpu_game_day.ARGUMENT_SPEC) == ["api_key"]
    for check_mode in (True, False):
        result = run_main(gpu_game_day, args(check_command="echo ok"), check_mode=check_mode)
        assert not result.get("failed"), result.get("msg")
        assert leaked(result, [API_KEY]) == []
    assert queue.made[0]["params"]["api_key"] == API_KEY  # the client got it
