#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_game_day
short_description: Reclaim the quota of running Kueue-admitted Jobs on a preemptible queue and check that they resume
version_added: 0.2.0
description:
  - A game day for preemptible batch on the reserved GPU capacity. On one Kueue ClusterQueue (the queue of a
    gang-scheduled training pool, C(gpupool-<pool>), as the M(gpupool.vcf.gpu_pool_design) derived inputs of the
    C(gpu_scheduling_policy) role name it), takes the GPUs of O(jobs) of the Jobs whose Kueue Workload is
    admitted to that queue back (through Kueue's preemption, or by deleting their pods), then waits, within
    O(recovery_timeout), until each hit Job runs again, checks the resume as the pool declares it
    (O(resume_check)), and runs O(check_command) once per hit Job.
  - With O(method=preempt) (the default) the pods are not deleted by the module. It submits, per hit Job, a
    higher-priority Job (O(reclaim_priority_class)) to the hit Job's LocalQueue that needs the hit Job's quota and
    all the ClusterQueue's free quota of the covered resources, so Kueue cannot admit it without preempting (the
    real reclaim path); waits for Kueue to evict the hit Job (its Workload's C(Evicted) condition, reason
    C(Preempted), and the C(Preempted) condition with Kueue's reason) and for its pods to be gone; lets the
    reclaim Job run O(reclaim_hold) seconds, deletes it (the higher-priority work is done), then waits for Kueue
    to admit the hit Job again and for it to run, and checks the resume by O(resume_check), the pool's declared
    C(checkpoint.resume_check). The reclaim Job is deleted also when the run fails. Kueue chooses its victims, and a
    Job it did not evict within the bound is reported C(not_recovered) with the reason.
  - With O(method=delete) the chosen pods are deleted (a pod lost with its node, not a reclaim).
  - With method delete, only pods that a Job controls, of Jobs whose Workload is admitted to O(cluster_queue) now, are ever touched, and
    only by a deletion with a grace period (the pod's own C(terminationGracePeriodSeconds), or O(grace_period)) and
    the pod's uid as precondition. Nothing else is created, changed or removed.
  - The choice is deterministic. Without O(seed), the first jobs by C(namespace/name) and their first pods by
    name; with O(seed), a shuffle by that seed (the same seed on the same jobs gives the same choice).
  - A hit Job runs again when its Workload is admitted, the Job is not suspended, and it has as many Running (and
    Ready) pods as before the kill, none of them a killed one; Kueue may have requeued the Workload and admitted
    it again meanwhile (the job's C(requeued) says so). A Job that completes meanwhile counts as back; one that
    fails, or is removed, will not run again by itself. The Job controller counts a killed pod that ended
    C(Failed) against the Job's C(backoffLimit); a job that should survive a game day needs a backoff limit (or
    pod failure policy) that allows lost pods.
  - The collection cannot know a job's checkpoint format, where it writes it, or how it resumes. O(check_command)
    is the user's own check of that; its exit status decides (0 passed). It runs where the module runs, through
    C(/bin/sh -c), once per hit Job after the wait (also for a Job that did not run again), with the environment
    variables C(GAME_DAY_NAMESPACE), C(GAME_DAY_JOB), C(GAME_DAY_WORKLOAD), C(GAME_DAY_CLUSTER_QUEUE),
    C(GAME_DAY_LOCAL_QUEUE), C(GAME_DAY_PODS_KILLED) (comma-separated), C(GAME_DAY_RECOVERED) (C(true) or
    C(false)) and, when O(kubeconfig) is given, C(KUBECONFIG).
  - A hit Job survived when it ran again within the bound, its check command passed and its resume check passed. The module fails, with
    the whole report in its result, when a hit Job did not survive (unless O(fail_on_loss=false)).
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes
options:
  cluster_queue:
    description: The Kueue ClusterQueue of the preemptible training queue (for a design's pool, C(gpupool-<pool>)).
    type: str
    required: true
  local_queue:
    description: Only Jobs submitted through the LocalQueue of this name (for a design's pool, the pool's name).
    type: str
  namespaces:
    description: Only Jobs in these namespaces (default every namespace).
    type: list
    elements: str
  only:
    description: Choose from these Jobs only (C(namespace/name)), O(jobs) of them; each must be a running Kueue-admitted Job of the queue.
    type: list
    elements: str
  jobs:
    description: How many of the queue's running Jobs to hit (fewer when the queue runs fewer; a warning says so).
    type: int
    default: 1
  pods:
    description: How many Running pods of each hit Job to kill (default all of them).
    type: int
  seed:
    description: Shuffle the choice of jobs and pods by this seed; without it the choice is in name order.
    type: int
  grace_period:
    description: Seconds of grace for each deletion; default the pod's own C(terminationGracePeriodSeconds). Never 0.
    type: int
  recovery_timeout:
    description: The bound, in seconds from the kill, within which each hit Job must run again.
    type: int
    default: 600
  check_command:
    description:
      - A shell command run once per hit Job, after the wait, that checks the job resumed from its checkpoint (see
        the description for its environment); its exit status decides. Without it only the recovery is checked.
      - It is bounded by O(check_timeout) through the C(timeout) command where the machine has one (exit status 124
        when it ran too long).
    type: str
  check_timeout:
    description:
      - Seconds each check command may run; one that runs longer is stopped and counts as failed.
      - Also the seconds, after the job runs again, within which the resume check's annotation or condition must
        show.
    type: int
    default: 300
  method:
    description:
      - C(preempt) - Kueue preempts the hit Jobs for a higher-priority Job that needs their quota (the reclaim path).
      - C(delete) - the module deletes the chosen pods (a pod lost with its node).
    type: str
    choices: [preempt, delete]
    default: preempt
  pool:
    description: The design's pool of the queue, named in the report and in the failure of its resume check; default
      the O(cluster_queue) without its C(gpupool-) prefix.
    type: str
  resume_check:
    description:
      - The pool's declared C(checkpoint.resume_check) (docs/design.md), exactly one of its keys.
      - C(annotation) passes when the resumed Job carries the annotation with a value it did not carry before the
        reclaim; C(condition) when the Job's status condition of that type turned C(True) after the reclaim (both
        need O(method=preempt)); C(command) runs like O(check_command), with C(GAME_DAY_POD) (a Running pod of the
        resumed Job) added to its environment.
    type: dict
    suboptions:
      annotation:
        description: Job annotation the job sets when it resumed from a checkpoint.
        type: str
      condition:
        description: Job status condition type the job sets C(True) when it resumed from a checkpoint.
        type: str
      command:
        description: Shell command; exit status 0 - resumed.
        type: str
  reclaim_priority_class:
    description: PriorityClass of the reclaim Job's pods; Kueue takes the Workload's priority from it, and it must
      rank above the hit Jobs' class for Kueue to preempt them (the design's C(gpu-inference) does).
    type: str
    default: gpu-inference
  reclaim_image:
    description: Image of the reclaim Job's containers (they only hold the quota; the module deletes the Job).
    type: str
    default: registry.k8s.io/pause:3.10
  reclaim_hold:
    description: Seconds the reclaim Job stays after Kueue admitted it, before the module deletes it.
    type: float
    default: 0
  fail_on_loss:
    description: Fail when a hit Job did not survive (the report is in the result either way).
    type: bool
    default: true
  kueue_api_version:
    description: The API version of Kueue's Workloads.
    type: str
    default: kueue.x-k8s.io/v1beta2
  poll_interval:
    description: Seconds between two looks at the hit Jobs.
    type: float
    default: 2.0
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
attributes:
  check_mode:
    description: Reads the queue and returns what would be killed (C(would_kill)); kills nothing, runs no command.
  diff_mode:
    description:
      - The Running pods of the hit Jobs (C(namespace/name) with its C(job) and C(node)) before the kill, and after
        it without the pods killed; check mode shows the same. The pods the Job controller makes in their place
        are not shown (they are not the module's change).
"""

EXAMPLES = r"""
- name: Kill the pods of two training jobs and check they resume from their checkpoints
  gpupool.vcf.gpu_game_day:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    cluster_queue: gpupool-training
    local_queue: training
    jobs: 2
    seed: 20260401
    recovery_timeout: 900
    check_command: >-
      kubectl logs -n "$GAME_DAY_NAMESPACE" "job/$GAME_DAY_JOB" | grep -q 'resumed from checkpoint'
  register: game_day

- name: Reclaim a training job through Kueue and check it resumes as the pool declares
  gpupool.vcf.gpu_game_day:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    cluster_queue: gpupool-training
    local_queue: training
    method: preempt
    resume_check:
      annotation: gpupool.vcf/resumed-from-step
    recovery_timeout: 900

- name: What a game day would hit
  gpupool.vcf.gpu_game_day:
    cluster_queue: gpupool-training
    jobs: 3
  check_mode: true
"""

RETURN = r"""
would_kill:
  description: The chosen jobs, each with C(namespace), C(job), C(workload), C(local_queue) and C(kill) (pod names).
  returned: always
  type: list
  elements: dict
killed:
  description:
    - Each pod the game day killed (deleted), in the order of the kill - C(namespace), C(name), C(job) (the Job it
      belonged to) and C(node) (where it ran). A pod already gone at its turn is not in it. Empty in check mode.
    - With a failure during the kill, the pods killed before it.
  returned: always
  type: list
  elements: dict
  sample: [{namespace: team-a, name: train-7f-0, job: train-7f, node: tkc-gpu-training-x2}]
jobs:
  description:
    - Per hit Job (after a real run) C(namespace), C(job), C(workload), C(kill) (the pods killed), C(state)
      (C(recovered), C(failed), C(not_recovered)), C(seconds) (from the kill until Running again), C(requeued),
      C(detail), C(running) (its Running pods at the end), C(check) (C(rc), C(output), C(seconds); null without
      O(check_command)) and C(survived).
  returned: always
  type: list
  elements: dict
preempted:
  description: With O(method=preempt), per hit Job (C(namespace/name)) what Kueue did - C(reclaim_job), C(pods) and
    C(per_pod) (its size), C(state) (C(preempted) or C(not_preempted)), C(evicted) and C(preempted) (the reasons
    of the Workload's C(Evicted) and C(Preempted) conditions) and C(seconds) (from the reclaim until the job's pods
    were gone). The same is in each C(jobs) entry as C(preemption), and the resume check as C(resume) (C(pool),
    C(kind), C(passed), C(detail), C(seconds)).
  returned: always
  type: dict
report:
  description: The report as data (C(cluster_queue), C(bound_seconds), C(seed), C(jobs), C(passed_over), C(survived), C(lost)).
  returned: always
  type: dict
markdown:
  description: The report as Markdown.
  returned: always
  type: str
survived:
  description: The hit Jobs (C(namespace/name)) that survived.
  returned: always
  type: list
  elements: str
lost:
  description: The hit Jobs (C(namespace/name)) that did not survive.
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._game_day_api import GameDayApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    auth_argument_spec, request_argument_spec, request_timeout_error,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _game_day as gd
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._game_day import input_errors as gpu_game_day_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import DELETE, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    cluster_queue=dict(type="str", required=True),
    local_queue=dict(type="str"),
    namespaces=dict(type="list", elements="str"),
    only=dict(type="list", elements="str"),
    jobs=dict(type="int", default=1),
    pods=dict(type="int"),
    seed=dict(type="int"),
    grace_period=dict(type="int"),
    recovery_timeout=dict(type="int", default=600),
    check_command=dict(type="str"),
    check_timeout=dict(type="int", default=300),
    fail_on_loss=dict(type="bool", default=True),
    kueue_api_version=dict(type="str", default="kueue.x-k8s.io/v1beta2"),
    poll_interval=dict(type="float", default=2.0),
    method=dict(type="str", choices=["preempt", "delete"], default="preempt"),
    pool=dict(type="str"),
    resume_check=dict(type="dict", options=dict(annotation=dict(type="str"), condition=dict(type="str"),
                                                command=dict(type="str"))),
    reclaim_priority_class=dict(type="str", default="gpu-inference"),
    reclaim_image=dict(type="str", default="registry.k8s.io/pause:3.10"),
    reclaim_hold=dict(type="float", default=0),
)
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


class GameDay(Resource):
    """The chosen pods of one queue's running Jobs: killed, then their Jobs watched until they run again."""

    verb = "play a game day on"
    refusals = (gd.GameDayError,)

    def __init__(self, module, clock=time.monotonic, sleep=time.sleep):
        self.p = module.params
        Resource.__init__(self, "ClusterQueue %s" % self.p["cluster_queue"])
        self.module = module
        self.clock, self.sleep = clock, sleep
        self.api = None
        self.chosen = []
        self.killed = []
        self.passed_over = {}
        self.jobs_before, self.pods_before = {}, {}
        self.reclaims = []
        self._unbounded_said = False

    def read(self):
        p = self.p
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        with self.doing("reach the guest cluster for"):
            self.api = GameDayApi(p, kueue_api_version=p["kueue_api_version"])
        workloads, jobs, pods = [], [], []
        with self.doing("read the Kueue Workloads, Jobs and pods of", self.name):
            for ns in p["namespaces"] or [None]:
                workloads += self.api.list_workloads(ns)
                jobs += self.api.list_jobs(ns)
                pods += self.api.list_job_pods(ns)
        eligible, self.passed_over = gd.candidates(workloads, jobs, pods, p["cluster_queue"], p["local_queue"],
                                                   p["namespaces"])
        self.jobs_before = dict((j["metadata"].get("uid"), j) for j in jobs)
        self.pods_before = dict((e["uid"], [q for q in gd.pods_of(self.jobs_before[e["uid"]], pods) if gd.pod_running(q)])
                                for e in eligible)
        self.chosen = gd.choose(eligible, p["jobs"], p["pods"], p["seed"], p["only"])
        if len(self.chosen) < p["jobs"]:
            self.warnings.append("%d jobs asked, the queue runs %d that can be hit: hitting those" % (
                p["jobs"], len(self.chosen)))
        return self.chosen

    def plan(self, live):
        before, after = gd.pods_diff(live)
        plan = Plan(before=before, after=after)
        for entry in live:
            for pod in entry["kill"]:
                plan.add("pod %s" % gd.key(entry["namespace"], pod), "pod", "Running", None, DELETE)
        return plan

    def _would_kill(self):
        return [dict((k, e[k]) for k in ("namespace", "job", "workload", "local_queue", "kill")) for e in self.chosen]

    def result(self, live, plan):
        rep = gd.report(self.p["cluster_queue"], [dict(e, state="not_started") for e in self._would_kill()],
                        self.p["recovery_timeout"], self.p["seed"], self.p["check_command"], self.passed_over,
                        check_mode=True)
        return dict(would_kill=self._would_kill(), killed=[], jobs=[], report=rep, markdown=gd.markdown(rep),
                    survived=[], lost=[], preempted={})

    # --- a real run

    def _kill(self, outcomes):
        for entry in self.chosen:
            out = outcomes[gd.key(entry["namespace"], entry["job"])]
            for pod in entry["kill"]:
                with self.doing("delete pod", gd.key(entry["namespace"], pod)):
                    if self.api.delete_pod(entry["namespace"], pod, entry["uids"][pod], self.p["grace_period"]):
                        out["kill"].append(pod)
                        self.killed.append(gd.killed_pod(entry, pod))
                        self.partial = dict(killed=list(self.killed))  # what a failure at the next pod leaves
                    else:
                        out["gone"].append(pod)
            out["killed_at"] = self.clock()

    def _pool(self):
        cq = self.p["cluster_queue"]
        return self.p["pool"] or (cq[len("gpupool-"):] if cq.startswith("gpupool-") else cq)

    def _reclaim(self, outcomes):
        """Submit a higher-priority Job per hit Job, wait for Kueue to evict the hit Jobs, end the reclaim Jobs."""
        p = self.p
        with self.doing("read ClusterQueue", p["cluster_queue"]):
            queue = self.api.read_cluster_queue(p["cluster_queue"])
        if queue is None:
            raise Failure("Unable to play a game day on %s: there is no such ClusterQueue" % self.name)
        salt = "%06x" % (int(time.time() * 1000) % 0xffffff)
        first = True
        for entry in self.chosen:
            out = outcomes[gd.key(entry["namespace"], entry["job"])]
            per_pod, count = gd.reclaim_size(self.pods_before[entry["uid"]], queue, with_free=first)
            first = False
            name = gd.reclaim_name(entry["job"], salt)
            body = gd.reclaim_job(entry, name, p["reclaim_priority_class"], p["reclaim_image"], per_pod, count)
            with self.doing("submit the reclaim Job", gd.key(entry["namespace"], name)):
                self.api.create_job(body)
            self.reclaims.append((entry["namespace"], name))
            self.partial = dict(reclaim_jobs=["%s/%s" % r for r in self.reclaims])
            out["preemption"] = dict(reclaim_job=name, pods=count, per_pod=per_pod, state=None, evicted=None,
                                     preempted=None, seconds=None)
            out["since"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            out["reclaimed_at"] = self.clock()
        deadline = self.clock() + p["recovery_timeout"]
        waiting = list(self.chosen)
        while True:
            for entry in list(waiting):
                out = outcomes[gd.key(entry["namespace"], entry["job"])]
                ns = entry["namespace"]
                with self.doing("watch Job", gd.key(ns, entry["job"])):
                    evictions = [gd.eviction(w) for w in self.api.list_workloads(ns)
                                 if gd.owner_uid(w, "Job") == entry["uid"]]
                    pods = self.api.list_job_pods(ns)
                ev = next((e for e in evictions if e), None)
                if ev and not out["preemption"]["evicted"]:
                    out["preemption"].update(evicted=ev["evicted"], preempted=ev["preempted"])
                    out["requeued"] = True
                left = [gd.key(ns, q["metadata"].get("name")) for q in pods
                        if q["metadata"].get("name") in entry["pods"] and q["metadata"].get("namespace") == ns]
                if out["preemption"]["evicted"] and not left:
                    out["preemption"].update(state=gd.PREEMPTED,
                                             seconds=round(self.clock() - out["reclaimed_at"], 3))
                    out["kill"] = list(entry["pods"])  # the pods Kueue's eviction ended
                    out["killed_at"] = self.clock()
                    waiting.remove(entry)
            if not waiting or self.clock() >= deadline:
                break
            self.sleep(max(0.0, min(p["poll_interval"], deadline - self.clock())))
        for entry in waiting:
            out = outcomes[gd.key(entry["namespace"], entry["job"])]
            out["preemption"]["state"] = gd.NOT_PREEMPTED
            out["state"] = gd.NOT_RECOVERED
            out["detail"] = "Kueue did not preempt it within %d s for %s (%s)" % (
                p["recovery_timeout"], out["preemption"]["reclaim_job"],
                "its Workload is Evicted (%s) but its pods are still there" % out["preemption"]["evicted"]
                if out["preemption"]["evicted"] else "its Workload was not evicted")
        if p["reclaim_hold"]:
            self.sleep(p["reclaim_hold"])
        self._end_reclaims()

    def _end_reclaims(self):
        while self.reclaims:
            ns, name = self.reclaims[0]
            with self.doing("delete the reclaim Job", gd.key(ns, name)):
                self.api.delete_job(ns, name)
            self.reclaims.pop(0)

    def _resume(self, out):
        """The pool's declared resume check on a job that runs again: annotation or condition polled within
        check_timeout, or the command."""
        check = self.p["resume_check"]
        kind = gd.resume_kind(check)
        started = self.clock()
        if kind == "command":
            run = self._check(out, command=check["command"])
            passed, detail = run["rc"] == 0, "the command exited %s: %s" % (run["rc"], run["output"].strip()[-200:])
        else:
            deadline = started + self.p["check_timeout"]
            before = self.jobs_before.get(out["uid"])
            while True:
                with self.doing("read Job", gd.key(out["namespace"], out["job"])):
                    job = self.api.read_job(out["namespace"], out["job"])
                passed, detail = gd.resume_seen(check, before, job, out.get("since"))
                if passed or self.clock() >= deadline:
                    break
                self.sleep(max(0.0, min(self.p["poll_interval"], deadline - self.clock())))
        return dict(pool=self._pool(), kind=kind, passed=passed, detail=detail,
                    seconds=round(self.clock() - started, 3))

    def _look(self, entry):
        ns = entry["namespace"]
        job = self.api.read_job(ns, entry["job"])
        # the Job's Workload by its owner reference: Kueue may have made a new one for a requeued Job
        workloads = [w for w in self.api.list_workloads(ns) if gd.owner_uid(w, "Job") == entry["uid"]]
        workloads.sort(key=lambda w: not gd.workload_admitted(w))  # an admitted one first
        return job, (workloads[0] if workloads else None), self.api.list_job_pods(ns)

    def _wait(self, outcomes):
        deadline = self.clock() + self.p["recovery_timeout"]
        waiting = [e for e in self.chosen if outcomes[gd.key(e["namespace"], e["job"])]["kill"]]
        while True:
            for entry in list(waiting):
                out = outcomes[gd.key(entry["namespace"], entry["job"])]
                with self.doing("watch Job", gd.key(entry["namespace"], entry["job"])):
                    job, workload, pods = self._look(entry)
                out["requeued"] = out["requeued"] or gd.requeued(job, workload)
                state, detail, running = gd.recovery(dict(entry, kill=out["kill"]), job, workload, pods)
                out["detail"], out["running"] = detail, running
                if state is not None:
                    out["state"] = state
                    if state == gd.RECOVERED:
                        out["seconds"] = round(self.clock() - out["killed_at"], 3)
                    waiting.remove(entry)
            if not waiting or self.clock() >= deadline:
                break
            self.sleep(max(0.0, min(self.p["poll_interval"], deadline - self.clock())))
        for entry in waiting:
            out = outcomes[gd.key(entry["namespace"], entry["job"])]
            out["state"] = gd.NOT_RECOVERED
            out["detail"] = "not Running again within %d s: %s" % (self.p["recovery_timeout"], out["detail"])

    def _check(self, out, command=None):
        env = dict(GAME_DAY_NAMESPACE=out["namespace"], GAME_DAY_JOB=out["job"], GAME_DAY_WORKLOAD=out["workload"],
                   GAME_DAY_CLUSTER_QUEUE=self.p["cluster_queue"], GAME_DAY_LOCAL_QUEUE=out["local_queue"] or "",
                   GAME_DAY_PODS_KILLED=",".join(out["kill"]),
                   GAME_DAY_POD=(out.get("running") or [""])[0], GAME_DAY_POOL=self._pool(),
                   GAME_DAY_RECOVERED="true" if out["state"] == gd.RECOVERED else "false")
        if self.p["kubeconfig"]:
            env["KUBECONFIG"] = self.p["kubeconfig"]
        limit = self.p["check_timeout"]
        argv = ["/bin/sh", "-c", command or self.p["check_command"]]
        bounded = self.module.get_bin_path("timeout")
        if bounded:
            argv = [bounded, "--kill-after=5", str(limit)] + argv
        elif not self._unbounded_said:
            self._unbounded_said = True
            self.warnings.append("no timeout command on this machine: check_timeout (%d s) is not enforced" % limit)
        started = self.clock()
        rc, stdout, stderr = self.module.run_command(argv, environ_update=env)
        output = (stdout or "") + (stderr or "")
        if bounded and rc in (124, 137):
            output += "\n[stopped after check_timeout, %d s]" % limit
        return dict(rc=rc, output=gd.tail(output), seconds=round(self.clock() - started, 3))

    def apply(self, plan):
        outcomes = {}
        for entry in self.chosen:
            outcomes[gd.key(entry["namespace"], entry["job"])] = dict(
                namespace=entry["namespace"], job=entry["job"], workload=entry["workload"],
                local_queue=entry["local_queue"], pods_before=len(entry["pods"]), kill=[], gone=[], state=None,
                seconds=None, requeued=False, detail="", running=[], check=None, killed_at=None,
                uid=entry["uid"], preemption=None, resume=None)
        preempt = self.p["method"] == "preempt"
        try:
            if preempt:
                self._reclaim(outcomes)
            else:
                self._kill(outcomes)
                for out in outcomes.values():
                    if not out["kill"]:
                        out["state"], out["detail"] = gd.NOT_RECOVERED, "no pod was killed: they were gone before the kill"
        finally:
            if self.reclaims:  # a failure halfway: the higher-priority Jobs do not stay behind
                self._end_reclaims()
        self._wait(outcomes)
        ordered = [outcomes[gd.key(e["namespace"], e["job"])] for e in self.chosen]
        if self.p["check_command"]:
            for out in ordered:
                if out["kill"]:
                    out["check"] = self._check(out)
        if self.p["resume_check"]:
            for out in ordered:
                if out["kill"]:
                    out["resume"] = self._resume(out)
        for out in ordered:
            for private in ("killed_at", "reclaimed_at", "since", "uid"):
                out.pop(private, None)
            if not preempt:
                out.pop("preemption", None)
        rep = gd.report(self.p["cluster_queue"], ordered, self.p["recovery_timeout"], self.p["seed"],
                        self.p["check_command"], self.passed_over)
        result = dict(killed=list(self.killed), jobs=rep["jobs"], report=rep, markdown=gd.markdown(rep),
                      survived=rep["survived"], lost=rep["lost"],
                      preempted=dict((gd.key(j["namespace"], j["job"]), j["preemption"]) for j in rep["jobs"]
                                     if j.get("preemption")))
        if rep["lost"] and self.p["fail_on_loss"]:
            why = ["%s (%s)" % (gd.key(j["namespace"], j["job"]), self._why(j)) for j in rep["jobs"] if not j["survived"]]
            if getattr(self.module, "_diff", False):  # the pods were killed all the same
                result["diff"] = self.diff(None, plan)
            raise Failure("Game day on %s: %d of %d hit jobs did not survive: %s" % (
                self.name, len(rep["lost"]), len(rep["jobs"]), "; ".join(why)),
                changed=True, would_kill=self._would_kill(), **result)
        return result

    @staticmethod
    def _why(job):
        if job["state"] != gd.RECOVERED:
            return "%s: %s" % (job["state"].replace("_", " "), job["detail"])
        if job.get("check") and job["check"].get("rc") != 0:
            return "the check command exited %s" % job["check"]["rc"]
        return "pool %s: its resume check failed: %s" % (job["resume"]["pool"], job["resume"]["detail"])


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "gpu_game_day", gpu_game_day_errors)
    Runner(module, GameDay(module)).run()


if __name__ == "__main__":
    main()
