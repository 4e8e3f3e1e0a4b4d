"""Game day through Kueue's preemption on the real Kueue v0.17 controller, against a job that checkpoints.

The example design's training pool (2 nodes of 4 GPUs, quota 8) becomes, by derive() and the
gpu_scheduling_policy role, the ClusterQueue ``gpupool-training`` (withinClusterQueue LowerPriority) and the
LocalQueue ``training``. One gang Job of 2 pods of 2 GPUs runs on it on ``gpu-training``; the pool declares its
checkpoint as the example does (a claim per job, ``ckpt-{job}``, and the resume check, the Job annotation
``gpupool.vcf/resumed-from-step``).

What models the job's container: on kwok nodes no container runs, so :class:`Trainer`, a thread of this test
(not the product), plays the rank-0 container of the Job: it watches the Job's pods, and while its first
Running pod is alive it counts training steps and writes each one to the folder that stands for the Job's claim
(``claims/ckpt-<job>/progress``); when a new pod of the Job starts Running, it reads the folder first and, if a
step is there, resumes from it and annotates the Job with that step, as a real trainer restoring its checkpoint
would. What it does not model: no volume is mounted into any pod and no PersistentVolumeClaim exists on the rig
(the folder is found by the declared claim name, not through the kubelet), the steps are not a framework's, a
pod's end is seen by watching the API, not by SIGTERM, and the other pod of the gang writes nothing.

Then the game day, method preempt: it submits a ``gpu-inference`` Job to the same LocalQueue that needs the
job's 4 GPUs plus the queue's 4 free ones; Kueue preempts the training job (its Workload's Evicted condition,
reason Preempted, and Preempted, reason InClusterQueue), the pods go, the module ends the reclaim Job, Kueue
admits the training job again, the Trainer resumes it from the saved step and the game day's resume check reads
the annotation. A second game day whose declared check names an annotation the job never sets fails, naming the
pool.
"""
from __future__ import annotations

import json
import threading
import time

import pytest
from k8s_fixtures import wait_for
from kubernetes import client

from tests.lib import kueue_rig
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.kueue_rig import derived_inputs, queued_job, training_nodes

CQ, LQ, NS, JOB = "gpupool-training", "training", "team-vision", "trainer"
RECLAIM = "gpupool.vcf/game-day-reclaim"


def declared_checkpoint():
    """The example design's training pool's checkpoint, as the design normalizes it."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize  # pylint: disable=import-outside-toplevel
    d = normalize(kueue_rig.example_design())[0]
    return json.loads(json.dumps([p for p in d["pools"] if p["name"] == "training"][0]["checkpoint"]))


class Trainer(threading.Thread):
    """The rank-0 container of the Job, played on this machine (see the module docstring): ``runs`` lists each
    container start as ``{"pod", "uid", "resumed_from", "last"}`` (the step read from the claim's folder at the
    start, the last step written)."""

    def __init__(self, core, batch, folder, annotation):
        threading.Thread.__init__(self, daemon=True)
        self.core, self.batch, self.folder, self.annotation = core, batch, folder, annotation
        self.folder.mkdir(parents=True, exist_ok=True)
        self.progress = folder / "progress"
        self.runs, self.errors = [], []
        self.halt = threading.Event()

    def _rank0(self):
        pods = [p for p in self.core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name=%s" % JOB).items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        return sorted(pods, key=lambda p: p.metadata.name)[0] if pods else None

    def _write(self, step):
        part = self.folder / "progress.part"
        part.write_text("%d\n" % step)
        part.replace(self.progress)  # a checkpoint is whole or not there

    def run(self):
        current = None
        while not self.halt.is_set():
            try:
                pod = self._rank0()
                if pod is None:
                    current = None
                elif pod.metadata.uid != current:
                    current = pod.metadata.uid
                    start = int(self.progress.read_text()) if self.progress.exists() else 0
                    if start > 0:
                        self.batch.patch_namespaced_job(JOB, NS, {"metadata": {"annotations": {
                            self.annotation: str(start)}}})
                    self.runs.append(dict(pod=pod.metadata.name, uid=current, resumed_from=start, last=start))
                else:
                    self.runs[-1]["last"] += 1
                    self._write(self.runs[-1]["last"])
            except Exception as exc:  # noqa: BLE001 - kept for the test to report, the thread goes on
                self.errors.append(repr(exc))
            self.halt.wait(0.1)


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("game-day-preempt")
    ckpt = declared_checkpoint()
    with kueue_rig.kueue_rig(tmp, training_nodes(2)) as rig:
        api = rig.api_client()
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        inputs = derived_inputs()
        converge = run_playbook(kueue_rig.role_play(inputs, gpu_scheduling_policy_culling="none",
                                gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout=""), env=rig.env)
        assert converge.rc == 0, converge.stdout[-3000:]
        batch.create_namespaced_job(NS, queued_job(JOB, LQ, pods=2, gpus=2, backoff_limit=6, grace_seconds=5))
        trainer = Trainer(core, batch, tmp / "claims" / ckpt["claim_template"].format(job=JOB),
                          ckpt["resume_check"]["annotation"])
        trainer.start()
        try:
            wait_for("the trainer past step 10", lambda: trainer.runs and trainer.runs[-1]["last"] >= 10, timeout=90)
            yield dict(rig=rig, core=core, batch=batch, trainer=trainer, ckpt=ckpt)
        finally:
            trainer.halt.set()
            trainer.join(5)


def game_day(day, **args):
    base = dict(kubeconfig=str(day["rig"].kubeconfig), cluster_queue=CQ, local_queue=LQ, poll_interval=0.5,
                method="preempt", recovery_timeout=90, check_timeout=20, reclaim_hold=1)
    return run_module("gpupool.vcf.gpu_game_day", dict(base, **args), env=day["rig"].env)[0]


def test_kueue_preempts_the_job_for_a_higher_class_and_it_resumes_from_its_checkpoint(day):
    trainer, batch = day["trainer"], day["batch"]
    assert trainer.runs[0]["resumed_from"] == 0  # the first start found no checkpoint
    before = [(r["pod"], r["uid"]) for r in trainer.runs]
    started = time.monotonic()
    result = game_day(day, resume_check=day["ckpt"]["resume_check"])
    took = time.monotonic() - started
    assert not result.get("failed"), result.get("msg")
    assert trainer.errors == [], trainer.errors
    [job] = result["jobs"]
    pre = job["preemption"]
    # Kueue evicted it for the reclaim: the Workload's conditions say why, in Kueue's words
    assert (pre["state"], pre["evicted"], pre["preempted"]) == ("preempted", "Preempted", "InClusterQueue"), pre
    # the reclaim asked for the job's 4 GPUs plus the 4 the queue had free: 4 pods of 2 (the job's pod shape)
    assert (pre["pods"], pre["per_pod"]) == (4, {"nvidia.com/gpu": 2}), pre
    assert result["preempted"] == {"%s/%s" % (NS, JOB): pre}
    assert job["state"] == "recovered" and job["requeued"] is True and job["survived"] is True, job
    assert len(job["kill"]) == 2 and before[-1][0] in job["kill"], job  # both pods of the gang, Kueue's eviction
    # the reclaim Job is gone
    assert batch.list_namespaced_job(NS, label_selector=RECLAIM).items == []
    # the job resumed from the step its last container wrote, and goes on from there
    runs = trainer.runs
    assert len(runs) >= 2 and runs[-1]["uid"] not in [pair[1] for pair in before]
    saved = int((trainer.folder / "progress").read_text()) if runs[-1]["last"] == runs[-1]["resumed_from"] else None
    resumed = runs[-1]["resumed_from"]
    assert resumed == runs[-2]["last"] and resumed >= 10, runs
    assert saved in (None, resumed)
    wait_for("the resumed trainer past its saved step", lambda: trainer.runs[-1]["last"] > resumed + 3, timeout=30)
    annotations = batch.read_namespaced_job(JOB, NS).metadata.annotations or {}
    assert annotations.get(day["ckpt"]["resume_check"]["annotation"]) == str(resumed)
    resume = job["resume"]
    assert resume["passed"] is True and resume["pool"] == "training" and resume["kind"] == "annotation"
    assert "gpupool.vcf/resumed-from-step=%d" % resumed in resume["detail"], resume
    assert "resume check of pool training passed" in result["markdown"]
    print("game day preemption figures: evicted %.2f s after the reclaim, Running again %.2f s after the eviction, "
          "resumed from step %d, run %.1f s" % (pre["seconds"], job["seconds"], resumed, took))


def test_a_pool_whose_resume_check_fails_fails_the_game_day_naming_the_pool(day):
    trainer = day["trainer"]
    runs_before = len(trainer.runs)
    result = game_day(day, pool="training", resume_check={"annotation": "example.com/never-set"}, check_timeout=3)
    assert result.get("failed"), result
    [job] = result["jobs"]
    # Kueue did preempt it and it ran again: only the declared check failed
    assert job["preemption"]["evicted"] == "Preempted" and job["state"] == "recovered", job
    assert job["resume"]["passed"] is False and job["survived"] is False
    assert "pool training: its resume check failed: the Job carries no annotation example.com/never-set" \
        in result["msg"], result["msg"]
    assert result["lost"] == ["%s/%s" % (NS, JOB)]
    # the trainer itself resumed again, from its checkpoint
    assert len(trainer.runs) > runs_before and trainer.runs[-1]["resumed_from"] == trainer.runs[-2]["last"] > 0
