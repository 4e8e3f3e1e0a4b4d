"""gpu_game_day with method preempt through main(): a fake Kueue behind the GameDayApi the module imports. The
reclaim Job's creation makes the fake evict the victim (Evicted: Preempted, Preempted: InClusterQueue) and its
pods go; the reclaim Job's deletion lets the fake admit the victim again with new pods and, when asked to, the
job annotate its resume. Kueue's own behaviour is the rig's (tests/integration/k8s/test_game_day_preemption.py)."""
import copy

from ansible_collections.gpupool.vcf.plugins.modules import gpu_game_day
from tests.lib.module_docs import missing_keys
from tests.lib.module_main import K8S, run_main

CQ, GPU, STEP = "gpupool-training", "nvidia.com/gpu", "gpupool.vcf/resumed-from-step"


def _pod(name, gpus=2):
    return {"metadata": {"name": name, "namespace": "team-a", "uid": "uid-" + name,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "uid-train",
                                              "controller": True}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "main", "resources": {
                "requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


class Kueue:
    """One admitted Job ``train`` of 2 pods of 2 GPUs in a queue of 8 GPUs, 4 reserved. ``evicts``: whether a
    reclaim makes it evict the job; ``annotates``: whether the resumed job sets its annotation."""

    def __init__(self, evicts=True, annotates=True):
        self.evicts, self.annotates = evicts, annotates
        self.job = {"metadata": {"name": "train", "namespace": "team-a", "uid": "uid-train",
                                 "labels": {"kueue.x-k8s.io/queue-name": "training"}, "annotations": {}},
                    "spec": {"suspend": False}, "status": {}}
        self.conditions = [{"type": "Admitted", "status": "True"}]
        self.pods = [_pod("train-0"), _pod("train-1")]
        self.created, self.deleted, self.calls = [], [], []

    def api(self, params, kueue_api_version=None):
        kueue = self

        class Api:
            def __getattr__(self, name):
                def call(*args):
                    kueue.calls.append(name)
                    return getattr(kueue, "_" + name)(*args)
                return call
        return Api()

    def _list_workloads(self, namespace=None):
        return [{"metadata": {"name": "job-train-1", "namespace": "team-a",
                              "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "uid": "uid-train"}]},
                 "spec": {"queueName": "training"},
                 "status": {"admission": {"clusterQueue": CQ}, "conditions": copy.deepcopy(self.conditions)}}]

    def _list_jobs(self, namespace=None):
        return [copy.deepcopy(self.job)]

    def _list_job_pods(self, namespace=None):
        return copy.deepcopy(self.pods)

    def _read_job(self, namespace, name):
        return copy.deepcopy(self.job)

    def _read_cluster_queue(self, name):
        return {"spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
            {"name": "training", "resources": [{"name": GPU, "nominalQuota": 8}]}]}]},
            "status": {"flavorsReservation": [{"name": "training", "resources": [{"name": GPU, "total": "4"}]}]}}

    def _create_job(self, body):
        self.created.append(copy.deepcopy(body))
        if self.evicts:
            self.conditions = [{"type": "Admitted", "status": "False"},
                               {"type": "Evicted", "status": "True", "reason": "Preempted"},
                               {"type": "Preempted", "status": "True", "reason": "InClusterQueue"}]
            self.job["spec"]["suspend"] = True
            self.pods = []
        return body

    def _delete_job(self, namespace, name):
        self.deleted.append((namespace, name))
        if self.evicts:
            self.conditions = [{"type": "Admitted", "status": "True"},
                               {"type": "Evicted", "status": "False", "reason": "QuotaReserved"}]
            self.job["spec"]["suspend"] = False
            self.pods = [_pod("train-2"), _pod("train-3")]
            if self.annotates:
                self.job["metadata"]["annotations"][STEP] = "120"
        return True


def args(**extra):
    out = dict(K8S, cluster_queue=CQ, recovery_timeout=2, poll_interval=0.05, check_timeout=1,
               resume_check=dict(annotation=STEP))
    out.update(extra)
    return out


def test_kueue_evicts_the_job_for_the_reclaim_it_resumes_and_the_reclaim_job_is_removed(monkeypatch):
    kueue = Kueue()
    monkeypatch.setattr(gpu_game_day, "GameDayApi", kueue.api)
    result = run_main(gpu_game_day, args())
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(gpu_game_day, result) == []
    assert "delete_pod" not in kueue.calls  # the module killed nothing itself
    [made] = kueue.created
    # the job's 4 GPUs plus the 4 free of 8: 4 pods of 2, on the higher class, on the job's LocalQueue
    assert made["spec"]["parallelism"] == 4 and made["spec"]["suspend"] is True
    assert made["spec"]["template"]["spec"]["priorityClassName"] == "gpu-inference"
    assert made["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {GPU: "2"}
    assert made["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert kueue.deleted == [("team-a", made["metadata"]["name"])]
    [job] = result["jobs"]
    assert job["kill"] == ["train-0", "train-1"] and job["state"] == "recovered" and job["survived"] is True
    pre = result["preempted"]["team-a/train"]
    want = ("preempted", "Preempted", "InClusterQueue", 4)
    assert (pre["state"], pre["evicted"], pre["preempted"], pre["pods"]) == want
    assert job["resume"]["passed"] is True and job["resume"]["pool"] == "training"
    assert job["resume"]["detail"] == "annotation %s=120 (was unset)" % STEP
    assert "reclaimed through Kueue by %s (preempted)" % made["metadata"]["name"] in result["markdown"]


def test_a_resume_check_that_fails_names_the_pool(monkeypatch):
    kueue = Kueue(annotates=False)
    monkeypatch.setattr(gpu_game_day, "GameDayApi", kueue.api)
    result = run_main(gpu_game_day, args(pool="batch"))
    assert result["failed"] and "team-a/train (pool batch: its resume check failed: the Job carries no annotation " \
        "%s)" % STEP in result["msg"], result["msg"]
    assert result["lost"] == ["team-a/train"] and len(kueue.deleted) == 1


def test_a_job_kueue_does_not_evict_is_named_and_the_reclaim_job_still_removed(monkeypatch):
    kueue = Kueue(evicts=False)
    monkeypatch.setattr(gpu_game_day, "GameDayApi", kueue.api)
    result = run_main(gpu_game_day, args(recovery_timeout=1))
    assert result["failed"] and "Kueue did not preempt it within 1 s" in result["msg"], result["msg"]
    assert "its Workload was not evicted" in result["msg"]
    assert kueue.deleted == [("team-a", kueue.created[0]["metadata"]["name"])]
    assert result["preempted"]["team-a/train"]["state"] == "not_preempted"
