# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The what-if replay against a replay cluster (client layer: knows nothing of Ansible).

A replay cluster is a sandbox the user gives (a kubeconfig): a real kube-apiserver, kube-scheduler,
controller-manager and Kueue, with kwok managing the nodes annotated ``kwok.x-k8s.io/node=fake`` and
the pod lifetime stage of docs/what-if.md. :class:`ReplayCluster` creates a design's objects (nodes
first), submits the record's Jobs at their compressed arrival times, watches them by polling (one
list of Jobs, one of pods, one of Kueue Workloads per poll) and removes what it created: only objects
carrying the run's ``gpupool.vcf/what-if`` label. Every call goes through ``_k8s.K8sClient``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _what_if as wi

KUEUE_API = "kueue.x-k8s.io/v1beta2"
# deleted in this order (Jobs first: their pods and Kueue Workloads go with them)
RESET_KINDS = (("batch/v1", "Job"), (KUEUE_API, "LocalQueue"), (KUEUE_API, "ClusterQueue"),
               (KUEUE_API, "ResourceFlavor"), ("v1", "ResourceQuota"), ("scheduling.k8s.io/v1", "PriorityClass"),
               ("v1", "Node"))


class ReplayError(K8sError):
    """The replay cluster did not do what the replay needs (its objects did not go in time)."""


def _conditions(obj, kind):
    return [c for c in ((obj.get("status") or {}).get("conditions") or []) if c.get("type") == kind]


def _is_true(obj, kind):
    return any(c.get("status") == "True" for c in _conditions(obj, kind))


class ReplayCluster(object):
    """One replay run (``run``: the value of its label) on the cluster of ``params`` (the auth options)."""

    def __init__(self, params=None, run="replay", k8s=None, clock=time.monotonic, sleep=time.sleep):
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self.run = run
        self.clock, self.sleep = clock, sleep
        self.kept = []  # objects that were there already and not the run's: used, never deleted
        self.namespaces = []  # tenant namespaces this run created (removed by finish())
        self.job_uids = set()  # the Jobs this run created: their Kueue Workloads go in the reset

    def _res(self, api_version, kind):
        return self.k8s.resource(api_version, kind)

    def _selector(self):
        return "%s=%s" % (wi.LABEL, self.run)

    def _list(self, api_version, kind, selector=None):
        found = self.k8s.call(self._res(api_version, kind).get, label_selector=selector or self._selector())
        return [item.to_dict() for item in (found.items or [])]

    def kueue_served(self):
        try:
            self._res(KUEUE_API, "ClusterQueue")
        except K8sError as exc:
            if exc.kind == "not_served":
                return False
            raise
        return True

    def create(self, obj):
        """Create one object; one already there is used as it is (kept in ``kept`` when not the run's)."""
        meta = obj["metadata"]
        res = self._res(obj["apiVersion"], obj["kind"])
        try:
            self.k8s.call_once(res.create, body=obj, namespace=meta.get("namespace"))
        except K8sError as exc:
            if exc.status != 409:
                raise
            live = self.k8s.call(res.get, name=meta["name"], namespace=meta.get("namespace")).to_dict()
            name = "%s %s%s" % (obj["kind"], meta.get("namespace") + "/" if meta.get("namespace") else "", meta["name"])
            if ((live.get("metadata") or {}).get("labels") or {}).get(wi.LABEL) != self.run and name not in self.kept:
                self.kept.append(name)
            return
        if obj["kind"] == "Namespace":
            self.namespaces.append(meta["name"])

    def build(self, nodes, objects, timeout=120.0, poll=0.2):
        """Create the design's nodes and objects and wait until the nodes are Ready (kwok)."""
        for obj in nodes + objects:
            self.create(obj)
        names = {n["metadata"]["name"] for n in nodes}
        queues = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects
                  if o["kind"] in ("ClusterQueue", "LocalQueue")}
        deadline = self.clock() + timeout
        while True:
            ready = {n["metadata"]["name"] for n in self._list("v1", "Node") if _is_true(n, "Ready")}
            active = set()
            for kind in sorted({q[0] for q in queues}):
                active |= {(kind, q["metadata"].get("namespace"), q["metadata"]["name"])
                           for q in self._list(KUEUE_API, kind) if _is_true(q, "Active")}
            if names <= ready and queues <= active:
                return
            if self.clock() >= deadline:
                raise ReplayError("the replay cluster is not ready after %d s: nodes not Ready %s (does kwok manage nodes "
                                  "annotated %s=fake?), Kueue queues not Active %s" % (
                                      timeout, ", ".join(sorted(names - ready)) or "none", wi.KWOK_NODE,
                                      ", ".join("%s %s" % (q[0], q[2]) for q in sorted(queues - active, key=str)) or "none"))
            self.sleep(poll)

    def observe(self, jobs, seen, now):
        """Update ``seen`` ({workload: {submitted, admitted, running, finished, preempted}}) from one
        list of the run's Jobs, pods and (with Kueue) Workloads at wall time ``now``."""
        by_job = {}
        for pod in self._list("v1", "Pod"):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            name = labels.get(wi.WORKLOAD_LABEL)
            phase = (pod.get("status") or {}).get("phase")
            entry = by_job.setdefault(name, {"up": 0, "disrupted": 0})
            if phase in ("Running", "Succeeded"):
                entry["up"] += 1
            if _conditions(pod, "DisruptionTarget"):
                entry["disrupted"] += 1
        evicted = {}
        if any(j["metadata"]["labels"].get(wi.QUEUE_LABEL) for j in jobs.values()):
            for wl in self._workloads():
                owner = [o.get("name") for o in (wl.get("metadata") or {}).get("ownerReferences") or []
                         if o.get("kind") == "Job"]
                if owner and (_conditions(wl, "Preempted") or
                              any(c.get("reason") == "Preempted" for c in _conditions(wl, "Evicted"))):
                    evicted[(wl["metadata"]["namespace"], owner[0])] = 1
        for job in self._list("batch/v1", "Job"):
            meta = job.get("metadata") or {}
            name = (meta.get("labels") or {}).get(wi.WORKLOAD_LABEL)
            o = seen.get(name)
            if o is None or o.get("finished") is not None:
                continue
            spec, status = job.get("spec") or {}, job.get("status") or {}
            if o.get("admitted") is None and not spec.get("suspend"):
                o["admitted"] = now
            pods = by_job.get(name) or {"up": 0, "disrupted": 0}
            if o.get("running") is None and (pods["up"] >= int(spec.get("parallelism") or 1)
                                             or _is_true(job, "Complete")):
                o["running"] = now
            if o.get("finished") is None and _is_true(job, "Complete"):
                o["finished"] = now
            o["preempted"] = max(int(o.get("preempted") or 0), pods["disrupted"], int(status.get("failed") or 0),
                                 evicted.get((meta.get("namespace"), meta.get("name")), 0))
        return seen

    def _workloads(self):
        found = self.k8s.call(self._res(KUEUE_API, "Workload").get)
        return [item.to_dict() for item in (found.items or [])]

    def replay(self, record, jobs, factor, poll=0.25, tail=None):
        """Submit each workload's Job ``arrival / factor`` wall seconds after the start and watch until every
        Job is complete or ``tail`` wall seconds after the last arrival's compressed end have passed.
        Returns (seen, end): the observations and the wall seconds the replay ran."""
        start = self.clock()
        pending = list(record["workloads"])
        seen, submitted = {}, {}
        last_end = max(w["arrival"] + w["duration"] for w in record["workloads"]) / factor
        limit = last_end + (tail if tail is not None else max(30.0, last_end))
        while True:
            now = self.clock() - start
            while pending and pending[0]["arrival"] / factor <= now:
                w = pending.pop(0)
                job = jobs[w["name"]]
                made = self.k8s.call_once(self._res("batch/v1", "Job").create, body=job,
                                          namespace=job["metadata"]["namespace"])
                self.job_uids.add(made.metadata.uid)
                seen[w["name"]] = {"submitted": self.clock() - start}
                submitted[w["name"]] = job
            self.observe(submitted, seen, self.clock() - start)
            for name in [n for n, o in seen.items() if o.get("finished") is not None and n in submitted]:
                self._drop(submitted.pop(name))  # measured: its Job, pods and Workload go, the lists stay short
            done = not pending and all(o.get("finished") is not None for o in seen.values())
            now = self.clock() - start
            if done or now >= limit:
                return seen, now
            wake = pending[0]["arrival"] / factor if pending else now + poll
            self.sleep(max(0.0, min(poll, wake - now)))

    def _drop(self, job):
        meta = job["metadata"]
        try:
            self.k8s.call(self._res("batch/v1", "Job").delete, name=meta["name"], namespace=meta["namespace"],
                          body={"propagationPolicy": "Background"})
        except K8sError as exc:
            if exc.status != 404:
                raise

    def reset(self, timeout=120.0, poll=0.25):
        """Delete every object of the run but its namespaces, and wait until its pods and nodes are gone
        (the Kueue kinds only where the cluster serves Kueue: a replay of pools without it needs none)."""
        kueue = self.kueue_served()
        for api_version, kind in RESET_KINDS:
            if api_version == KUEUE_API and not kueue:
                continue
            res = self._res(api_version, kind)
            for obj in self._list(api_version, kind):
                meta = obj["metadata"]
                try:
                    self.k8s.call(res.delete, name=meta["name"], namespace=meta.get("namespace"),
                                  body={"propagationPolicy": "Background"})
                except K8sError as exc:
                    if exc.status != 404:
                        raise
        deadline = self.clock() + timeout
        while True:
            left = [k for av, k in (("v1", "Pod"), ("batch/v1", "Job"), ("v1", "Node")) if self._list(av, k)]
            if kueue:
                left += ["ClusterQueue"] if self._list(KUEUE_API, "ClusterQueue") else []
                left += ["Workload"] if self._delete_workloads() else []
            if not left:
                return
            if self.clock() >= deadline:
                raise ReplayError("the replay's %s are still there %d s after the reset" % (", ".join(left), timeout))
            self.sleep(poll)

    def _delete_workloads(self):
        """Delete the Kueue Workloads of the run's Jobs; whether any was still there."""
        res, left = self._res(KUEUE_API, "Workload"), False
        for wl in self._workloads():
            meta = wl.get("metadata") or {}
            if not any(o.get("uid") in self.job_uids for o in meta.get("ownerReferences") or []):
                continue
            left = True
            if not meta.get("deletionTimestamp"):
                try:
                    self.k8s.call(res.delete, name=meta["name"], namespace=meta["namespace"])
                except K8sError as exc:
                    if exc.status != 404:
                        raise
        return left

    def finish(self, timeout=180.0, poll=0.5):
        """Reset, then delete the tenant namespaces this run created and wait until they are gone."""
        self.reset()
        res = self._res("v1", "Namespace")
        for name in self.namespaces:
            try:
                self.k8s.call(res.delete, name=name)
            except K8sError as exc:
                if exc.status != 404:
                    raise
        deadline = self.clock() + timeout
        while True:
            left = [n for n in self.namespaces if self._exists(res, n)]
            if not left:
                break
            if self.clock() >= deadline:
                raise ReplayError("the replay's namespaces %s are still there %d s after their delete" % (
                    ", ".join(left), timeout))
            self.sleep(poll)
        self.namespaces = []

    def _exists(self, res, name):
        try:
            self.k8s.call(res.get, name=name)
        except K8sError as exc:
            if exc.status == 404:
                return False
            raise
        return True
