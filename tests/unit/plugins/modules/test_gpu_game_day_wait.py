"""gpu_game_day on the runner with its client layer replaced by a fake and a fake clock: the kill, a job that
Kueue requeues and admits again, the bound, check mode."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.modules import gpu_game_day
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module
from tests.lib.clock import Clock

CQ = "gpupool-training"


def _job(suspend=False):
    return {"metadata": {"name": "gang-a", "namespace": "team-a", "uid": "job-uid",
                         "labels": {"kueue.x-k8s.io/queue-name": "training"}},
            "spec": {"suspend": suspend}, "status": {}}


def _workload(admitted=True):
    return {"metadata": {"name": "job-gang-a-x1", "namespace": "team-a",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "job-uid"}]},
            "spec": {"queueName": "training"},
            "status": {"admission": {"clusterQueue": CQ} if admitted else None,
                       "conditions": [{"type": "Admitted", "status": "True" if admitted else "False"}]}}


def _pod(name, phase="Running"):
    return {"metadata": {"name": name, "namespace": "team-a", "uid": "uid-" + name,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "job-uid",
                                              "controller": True}]},
            "status": {"phase": phase}}


class FakeApi:
    """The cluster as the game day sees it: ``looks`` is what each look after the kill returns
    (job, workload, pods), the last one repeated."""

    looks = []
    deleted = []

    def __init__(self, params=None, kueue_api_version=None):
        self.seen = 0

    def list_workloads(self, namespace=None):
        return [self._now()[1]] if self.seen else [_workload()]

    def list_jobs(self, namespace=None):
        return [_job()]

    def list_job_pods(self, namespace=None):
        return self._now()[2] if self.seen else [_pod("gang-a-1"), _pod("gang-a-2")]

    def read_job(self, namespace, name):
        self.seen += 1  # the first read of a look
        return self._now()[0]

    def _now(self):
        return copy.deepcopy(FakeApi.looks[min(self.seen, len(FakeApi.looks)) - 1])

    def delete_pod(self, namespace, name, uid, grace_period=None):
        FakeApi.deleted.append((namespace, name, uid, grace_period))
        return True


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(gpu_game_day, "GameDayApi", FakeApi)
    FakeApi.deleted = []
    return FakeApi


def run(params, clock, check_mode=False):
    defaults = dict((k, v.get("default")) for k, v in gpu_game_day.ARGUMENT_SPEC.items())
    module = Module(dict(defaults, cluster_queue=CQ, **dict(dict(method="delete"), **params)), check_mode=check_mode)
    with pytest.raises(Exited) as exc:
        Runner(module, gpu_game_day.GameDay(module, clock=clock, sleep=clock.sleep)).run()
    return exc.value.result


def test_requeued_and_admitted_again_counts_as_back(fake):
    fake.looks = [
        (_job(suspend=True), _workload(admitted=False), []),  # Kueue took the job back
        (_job(), _workload(), [_pod("gang-a-3")]),  # admitted again, one pod up
        (_job(), _workload(), [_pod("gang-a-3"), _pod("gang-a-4")]),
    ]
    clock = Clock(100.0)
    result = run(dict(recovery_timeout=60, poll_interval=2.0, grace_period=30), clock)
    assert not result.get("failed"), result.get("msg")
    assert fake.deleted == [("team-a", "gang-a-1", "uid-gang-a-1", 30), ("team-a", "gang-a-2", "uid-gang-a-2", 30)]
    [job] = result["jobs"]
    assert job["state"] == "recovered" and job["requeued"] is True and job["survived"] is True
    assert job["seconds"] == 4.0 and clock.slept == [2.0, 2.0]
    assert job["running"] == ["gang-a-3", "gang-a-4"] and result["survived"] == ["team-a/gang-a"]
    assert result["changed"] is True


def test_the_bound_is_kept_and_the_job_named(fake):
    fake.looks = [(_job(), _workload(), [_pod("gang-a-3"), _pod("gang-a-4", phase="Pending")])]
    clock = Clock(100.0)
    result = run(dict(recovery_timeout=5, poll_interval=2.0), clock)
    assert result["failed"] and "team-a/gang-a (not recovered: not Running again within 5 s: 1 of 2 pods Running)" \
        in result["msg"]
    assert clock.slept == [2.0, 2.0, 1.0]  # never past the bound
    assert result["lost"] == ["team-a/gang-a"] and result["jobs"][0]["seconds"] is None


def test_check_mode_kills_nothing(fake):
    fake.looks = []
    result = run(dict(jobs=3), Clock(100.0), check_mode=True)
    assert fake.deleted == [] and result["changed"] is True and result["jobs"] == []
    assert result["would_kill"] == [dict(namespace="team-a", job="gang-a", workload="job-gang-a-x1",
                                         local_queue="training", kill=["gang-a-1", "gang-a-2"])]
