# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Game day on a preemptible Kueue queue: which pods to kill, whether their Jobs came back, the report (pure).

The jobs in play are the Jobs whose Kueue Workload is admitted to one ClusterQueue (optionally
through one LocalQueue, in given namespaces), not suspended, not finished, with at least one
Running pod that the Job controls. :func:`candidates` finds them in what the client layer read;
:func:`choose` picks the jobs and pods to kill, in name order or shuffled by a seed, so the same
inputs always give the same choice; :func:`recovery` says whether a hit Job runs again (as many
Running pods as before the kill, none of them a killed one, its Workload admitted), has failed
for good, or is still on its way; :func:`report` and :func:`markdown` say what survived. No I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_API = "batch/v1"
RECOVERED, FAILED, NOT_RECOVERED = "recovered", "failed", "not_recovered"
OUTPUT_TAIL = 2000  # characters of a check command's output kept in the report


class GameDayError(Exception):
    """The game day cannot go on as asked (for example nothing in the queue to kill)."""


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _status(obj):
    return (obj or {}).get("status") or {}


def _condition(obj, kind):
    for cond in _status(obj).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def _true(obj, kind):
    cond = _condition(obj, kind)
    return bool(cond) and cond.get("status") == "True"


def key(namespace, name):
    return "%s/%s" % (namespace, name)


def owner_uid(obj, kind, api_version=JOB_API, controller=False):
    """The uid of the ``kind`` owning ``obj`` (only the controller owner with ``controller``), or None."""
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("apiVersion") == api_version and (ref.get("controller") or not controller):
            return ref.get("uid")
    return None


def workload_admitted(workload, cluster_queue=None):
    """Whether the Workload is admitted (to ``cluster_queue`` when given) and not being evicted."""
    admission = _status(workload).get("admission") or {}
    if cluster_queue is not None and admission.get("clusterQueue") != cluster_queue:
        return False
    return _true(workload, "Admitted") and not _true(workload, "Evicted")


def job_finished(job):
    """``Complete`` or ``Failed`` (with its reason and message), else None."""
    for kind in ("Complete", "Failed"):
        cond = _condition(job, kind)
        if cond and cond.get("status") == "True":
            why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
            return "%s%s" % (kind, " (%s)" % why if why else "")
    return None


def pod_running(pod):
    """Running, not being deleted, and Ready when the pod says (kubelets set Ready once the containers are)."""
    if _meta(pod).get("deletionTimestamp") or _status(pod).get("phase") != "Running":
        return False
    ready = _condition(pod, "Ready")
    return ready is None or ready.get("status") == "True"


def pods_of(job, pods):
    """The pods the Job controls (by the controller reference to its uid), by name."""
    uid = _meta(job).get("uid")
    return sorted((p for p in pods or [] if uid and owner_uid(p, "Job", controller=True) == uid),
                  key=lambda p: _meta(p).get("name"))


def candidates(workloads, jobs, pods, cluster_queue, local_queue=None, namespaces=None):
    """The jobs a game day may hit, and the queue's other jobs with why they are left alone.

    Returns ``(eligible, passed_over)``. Each eligible entry: ``namespace``, ``job``, ``uid``,
    ``workload``, ``local_queue``, ``pods`` (names of its Running pods, sorted), ``uids`` (pod name:
    uid, for the deletion's precondition), ``nodes`` (pod name: the node it runs on). ``passed_over``:
    ``{namespace/job: reason}`` for Jobs of the ClusterQueue's Workloads that are not eligible.
    """
    jobs_by_uid = dict((_meta(j).get("uid"), j) for j in jobs or [])
    eligible, passed_over = [], {}
    for wl in workloads or []:
        meta = _meta(wl)
        ns = meta.get("namespace")
        if namespaces and ns not in namespaces:
            continue
        admission = _status(wl).get("admission") or {}
        if admission.get("clusterQueue") != cluster_queue:
            continue
        queue = (wl.get("spec") or {}).get("queueName")
        if local_queue and queue != local_queue:
            continue
        job = jobs_by_uid.get(owner_uid(wl, "Job"))
        if job is None:
            continue  # a Workload of another kind of workload, or of a Job already gone
        name = key(ns, _meta(job).get("name"))
        live = [p for p in pods_of(job, pods) if pod_running(p)]
        running = [_meta(p).get("name") for p in live]
        finished = job_finished(job)
        if not workload_admitted(wl, cluster_queue):
            passed_over[name] = "its Workload %s is not admitted now" % meta.get("name")
        elif (job.get("spec") or {}).get("suspend"):
            passed_over[name] = "the Job is suspended"
        elif finished:
            passed_over[name] = "the Job is finished: %s" % finished
        elif (_meta(job).get("labels") or {}).get(QUEUE_LABEL) != queue:
            passed_over[name] = "the Job does not carry %s=%s" % (QUEUE_LABEL, queue)
        elif not running:
            passed_over[name] = "no Running pod"
        else:
            eligible.append(dict(namespace=ns, job=_meta(job).get("name"), uid=_meta(job).get("uid"),
                                 workload=meta.get("name"), local_queue=queue, pods=running,
                                 uids=dict((_meta(p).get("name"), _meta(p).get("uid")) for p in live),
                                 nodes=dict((_meta(p).get("name"), (p.get("spec") or {}).get("nodeName"))
                                            for p in live)))
    eligible.sort(key=lambda e: (e["namespace"], e["job"]))
    return eligible, passed_over


def choose(eligible, jobs=1, pods=None, seed=None, only=None):
    """The jobs and pods to kill: ``jobs`` of the eligible ones, ``pods`` of each (None: all its Running pods).

    Without ``seed`` the first jobs and pods in name order; with a seed, a shuffle by that seed
    (the same seed and the same jobs give the same choice). ``only`` (``namespace/name`` strings)
    limits the choice to those jobs; a name in it that is not eligible is an error.
    Each entry of the result is the eligible entry with ``kill`` (pod names) added.
    """
    pool = sorted(eligible, key=lambda e: (e["namespace"], e["job"]))
    if only:
        names = dict((key(e["namespace"], e["job"]), e) for e in pool)
        missing = [n for n in only if n not in names]
        if missing:
            raise GameDayError("not a running Kueue-admitted job of the queue: %s" % ", ".join(missing))
        pool = [names[n] for n in sorted(set(only))]
    if not pool:
        raise GameDayError("no running Kueue-admitted job in the queue")
    rng = random.Random(seed) if seed is not None else None
    picked = rng.sample(pool, min(jobs, len(pool))) if rng else pool[:jobs]
    out = []
    for entry in picked:
        names = sorted(entry["pods"])
        count = len(names) if pods is None else min(pods, len(names))
        kill = sorted(rng.sample(names, count)) if rng else names[:count]
        out.append(dict(entry, kill=kill))
    return sorted(out, key=lambda e: (e["namespace"], e["job"]))


def killed_pod(entry, pod):
    """One pod a game day killed, as the result lists it: ``namespace``, ``name``, ``job`` (the Job it
    belonged to) and ``node`` (where it ran; None when the pod named none)."""
    return dict(namespace=entry["namespace"], name=pod, job=entry["job"], node=(entry.get("nodes") or {}).get(pod))


def pods_diff(chosen):
    """The game day's before/after for --diff: the Running pods of the hit jobs, ``{namespace/pod: {"job":
    namespace/job, "node": node}}`` under ``pods``, before the kill and after it (the killed ones gone; the
    pods the Job controller makes in their place are not the module's change)."""
    before, after = {}, {}
    for entry in chosen:
        for pod in entry["pods"]:
            item = dict(job=key(entry["namespace"], entry["job"]), node=(entry.get("nodes") or {}).get(pod))
            before[key(entry["namespace"], pod)] = item
            if pod not in entry["kill"]:
                after[key(entry["namespace"], pod)] = dict(item)
    return dict(pods=before), dict(pods=after)


def recovery(entry, job, workload, pods):
    """Where a hit job stands: ``(state, detail, running)``.

    ``state`` is ``recovered`` (its Workload admitted, the Job not suspended, as many Running pods
    as before the kill and none of them a killed pod; or the Job completed since), ``failed`` (the
    Job failed, or is gone: it will not run again by itself) or None (not yet). ``running``: the Running pods
    that are not killed ones.
    """
    if job is None or _meta(job).get("uid") != entry["uid"]:
        return FAILED, "the Job is gone", []
    finished = job_finished(job)
    if finished and finished.startswith("Complete"):
        return RECOVERED, "the Job ran again and completed", []
    if finished:
        return FAILED, "the Job is %s" % finished, []
    killed = set(entry["kill"])
    fresh = [_meta(p).get("name") for p in pods_of(job, pods) if pod_running(p) and _meta(p).get("name") not in killed]
    want = len(entry["pods"])
    if (job.get("spec") or {}).get("suspend"):
        return None, "the Job is suspended (its Workload requeued, waiting for admission)", fresh
    if workload is None or not workload_admitted(workload):
        return None, "its Workload is not admitted", fresh
    if len(fresh) >= want:
        return RECOVERED, "%d of %d pods Running again" % (len(fresh), want), fresh
    return None, "%d of %d pods Running" % (len(fresh), want), fresh


def requeued(job, workload):
    """Whether Kueue has taken the job back (suspended Job, or its Workload evicted or not admitted)."""
    return bool((job or {}).get("spec", {}).get("suspend")) or workload is None or not workload_admitted(workload)


def survived(outcome):
    """A hit job survived when it ran again within the bound, its check command (if any) passed and, after a
    preemption, its pool's declared resume check (if any) passed."""
    check, resume = outcome.get("check"), outcome.get("resume")
    return outcome.get("state") == RECOVERED and (check is None or check.get("rc") == 0) and \
        (resume is None or bool(resume.get("passed")))


def tail(text, size=OUTPUT_TAIL):
    text = text or ""
    return text if len(text) <= size else "..." + text[-size:]


def report(cluster_queue, outcomes, bound, seed=None, check_command=None, passed_over=None, check_mode=False):
    """The game day's report as data: the queue, the bound, and per hit job what became of it."""
    jobs = []
    for o in outcomes:
        item = dict(o)
        item["survived"] = None if check_mode else survived(o)
        jobs.append(item)
    lost = [key(j["namespace"], j["job"]) for j in jobs if j["survived"] is False]
    return dict(cluster_queue=cluster_queue, bound_seconds=bound, seed=seed, check_command=check_command,
                check_mode=check_mode, jobs=jobs, passed_over=dict(passed_over or {}),
                pods_killed=sum(len(j["kill"]) for j in jobs) if not check_mode else 0,
                survived=[key(j["namespace"], j["job"]) for j in jobs if j["survived"]], lost=lost)


# --- the reclaim through Kueue (method preempt)

RECLAIM_LABEL = "gpupool.vcf/game-day-reclaim"  # on the reclaim Job: the namespace/name of the job it reclaims from
PREEMPTED, NOT_PREEMPTED = "preempted", "not_preempted"


def _quantity(value):
    """A whole-number resource quantity (GPUs, pods) as an int; None for what is not one."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def covered_resources(cluster_queue):
    """The resources the ClusterQueue's quota covers, in its order."""
    out = []
    for group in (cluster_queue or {}).get("spec", {}).get("resourceGroups") or []:
        out += [r for r in group.get("coveredResources") or [] if r not in out]
    return out


def free_quota(cluster_queue, resource):
    """Nominal quota of ``resource`` over the ClusterQueue's flavors less what its admitted Workloads reserve
    (``status.flavorsReservation``); never below 0. None when the quota is not a whole number."""
    nominal = 0
    for group in (cluster_queue or {}).get("spec", {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") == resource:
                    value = _quantity(res.get("nominalQuota"))
                    if value is None:
                        return None
                    nominal += value
    reserved = 0
    status = _status(cluster_queue)
    for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            if res.get("name") == resource:
                reserved += _quantity(res.get("total")) or 0
    return max(0, nominal - reserved)


def pod_requests(pod, resources):
    """{resource: amount} the pod asks of ``resources`` (requests, else limits, summed over its containers)."""
    out = dict((r, 0) for r in resources)
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        for name in resources:
            value = (res.get("requests") or {}).get(name, (res.get("limits") or {}).get(name))
            out[name] += _quantity(value) or 0
    return out


def reclaim_size(victim_pods, cluster_queue, with_free=True):
    """``(per_pod, count)`` of the reclaim Job: pods the shape of the victim's largest (by the covered
    resources it asks for), as many as it takes to need the victim's share plus all the queue's free quota
    (without ``with_free``: the victim's share alone, for a second victim of the same run), so Kueue cannot
    admit it without preempting at least that much. Raises GameDayError when the victim asks
    for none of the covered resources (no quota of its to take)."""
    resources = covered_resources(cluster_queue)
    asks = [pod_requests(p, resources) for p in victim_pods]
    per_pod = dict((r, max([a[r] for a in asks] or [0])) for r in resources)
    per_pod = dict((r, v) for r, v in per_pod.items() if v > 0)
    if not per_pod:
        raise GameDayError("the job's pods ask for none of the resources the ClusterQueue's quota covers (%s): "
                           "a higher-priority workload cannot take quota from it" % (", ".join(resources) or "none"))
    count = 0
    for name, each in per_pod.items():
        held = sum(a[name] for a in asks)
        free = (free_quota(cluster_queue, name) or 0) if with_free else 0
        count = max(count, -(-(held + free) // each))
    return per_pod, count


def reclaim_job(entry, name, priority_class, image, per_pod, count):
    """The higher-priority Job a game day submits to the victim's LocalQueue: suspended with the queue label (as
    Kueue's webhook makes it), ``count`` pods of ``per_pod``, on ``priority_class`` (Kueue takes the Workload's
    priority from it), labelled with the job it reclaims from."""
    resources = dict((k, str(v)) for k, v in sorted(per_pod.items()))
    return {"apiVersion": JOB_API, "kind": "Job",
            "metadata": {"name": name, "namespace": entry["namespace"],
                         "labels": {QUEUE_LABEL: entry["local_queue"],
                                    RECLAIM_LABEL: "%s.%s" % (entry["namespace"], entry["job"])}},
            "spec": {"suspend": True, "parallelism": count, "completions": count, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {RECLAIM_LABEL: "%s.%s" % (entry["namespace"], entry["job"])}},
                                  "spec": {"restartPolicy": "Never", "priorityClassName": priority_class,
                                           "terminationGracePeriodSeconds": 5,
                                           "containers": [{"name": "reclaim", "image": image,
                                                           "resources": {"requests": dict(resources),
                                                                         "limits": dict(resources)}}]}}}}


def reclaim_name(job, salt):
    """The reclaim Job's name: ``gd-<job>-<salt>``, cut to a DNS label (63) with the salt kept."""
    tail = "-%s" % salt
    return ("gd-%s" % job)[:63 - len(tail)].rstrip("-") + tail


def eviction(workload):
    """How Kueue took the Workload back, or None: ``{"evicted": reason, "preempted": reason, "message": ...}``
    from its ``Evicted`` condition (True) and its ``Preempted`` condition (True: InClusterQueue,
    InCohortReclamation, ...)."""
    ev = _condition(workload, "Evicted")
    if not ev or ev.get("status") != "True":
        return None
    pre = _condition(workload, "Preempted")
    return dict(evicted=ev.get("reason"), message=ev.get("message") or "",
                preempted=pre.get("reason") if pre and pre.get("status") == "True" else None)


RESUME_KINDS = ("annotation", "condition", "command")


def resume_kind(check):
    """The one kind of a declared resume check (annotation, condition or command), or None."""
    kinds = [k for k in RESUME_KINDS if (check or {}).get(k)]
    return kinds[0] if len(kinds) == 1 else None


def resume_seen(check, before, after, since):
    """Whether the Job ``after`` shows the declared resume (``check``: annotation or condition) since the
    preemption: ``(passed, detail)``. An annotation passes when the Job carries it with a value it did not
    carry in ``before`` (the Job as read before the reclaim); a condition when it is True with a
    ``lastTransitionTime`` not before ``since`` (RFC 3339, UTC)."""
    kind = resume_kind(check)
    if kind == "annotation":
        name = check["annotation"]
        was = (_meta(before).get("annotations") or {}).get(name)
        now = (_meta(after).get("annotations") or {}).get(name)
        if not now:
            return False, "the Job carries no annotation %s" % name
        if now == was:
            return False, "annotation %s=%s is the one it had before the preemption" % (name, now)
        return True, "annotation %s=%s (was %s)" % (name, now, "unset" if was is None else was)
    if kind == "condition":
        name = check["condition"]
        cond = _condition(after, name)
        if not cond or cond.get("status") != "True":
            return False, "the Job has no condition %s True" % name
        when = cond.get("lastTransitionTime") or ""
        if since and when < since:
            return False, "condition %s turned True at %s, before the preemption (%s)" % (name, when, since)
        return True, "condition %s True since %s" % (name, when)
    return False, "no annotation or condition to check"


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(rep):
    """The report as Markdown: one row per hit job."""
    title = "# Game day: ClusterQueue %s" % rep["cluster_queue"]
    lines = [title, ""]
    if rep["check_mode"]:
        lines += ["Check mode: nothing was killed. Would kill:", "",
                  "| job | Workload | pods to kill |", "|---|---|---|"]
        for j in rep["jobs"]:
            lines.append("| %s | %s | %s |" % (key(j["namespace"], j["job"]), j["workload"], ", ".join(j["kill"])))
        return "\n".join(lines) + "\n"
    command = "`%s`" % rep["check_command"] if rep["check_command"] else "none"
    lines += ["Bound: %s s. Check command: %s." % (rep["bound_seconds"], command), "",
              "| job | pods killed | state | seconds until Running again | requeued | check | survived | detail |",
              "|---|---|---|---:|---|---|---|---|"]
    for j in rep["jobs"]:
        check = j.get("check")
        check_text = "not run" if check is None else ("passed" if check.get("rc") == 0 else "failed (rc %s)" % check.get("rc"))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key(j["namespace"], j["job"]), ", ".join(j["kill"]), j["state"].replace("_", " "),
            "" if j.get("seconds") is None else "%.2f" % j["seconds"], "yes" if j.get("requeued") else "no",
            check_text, "yes" if j["survived"] else "no", _cell(j.get("detail") or "")))
    lines.append("")
    for j in rep["jobs"]:
        pre, resume = j.get("preemption"), j.get("resume")
        if pre:
            lines.append("- %s: reclaimed through Kueue by %s (%s); its Workload %s" % (
                key(j["namespace"], j["job"]), pre.get("reclaim_job"), pre.get("state", "").replace("_", " "),
                "Evicted (%s), Preempted (%s)" % (pre.get("evicted"), pre.get("preempted"))
                if pre.get("evicted") else "was not evicted"))
        if resume:
            lines.append("- %s: resume check of pool %s %s: %s" % (
                key(j["namespace"], j["job"]), resume.get("pool"), "passed" if resume.get("passed") else "failed",
                _cell(resume.get("detail") or "")))
    if any(j.get("preemption") or j.get("resume") for j in rep["jobs"]):
        lines.append("")
    if rep["lost"]:
        lines.append("Lost: %s." % ", ".join(rep["lost"]))
    else:
        lines.append("Every hit job survived.")
    return "\n".join(lines) + "\n"


def input_errors(params):
    """The game day's own input checks (see _inputs.py)."""
    out = []
    for name in ("cluster_queue", "local_queue", "check_command", "kueue_api_version"):
        value = params.get(name)
        if isinstance(value, str) and not value.strip():
            out.append("%s must not be empty" % name)
    jobs = params.get("jobs")
    if jobs is not None and not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        out.append("jobs must be 1 or more jobs to hit, not %r" % (jobs,))
    pods = params.get("pods")
    if pods is not None and not (isinstance(pods, int) and not isinstance(pods, bool) and pods >= 1):
        out.append("pods must be 1 or more pods per job (leave it out for all of a job's Running pods), not %r" % (pods,))
    grace = params.get("grace_period")
    if grace is not None and not (isinstance(grace, int) and not isinstance(grace, bool) and grace >= 1):
        out.append("grace_period must be 1 or more seconds (a game day never force-deletes; leave it out for the "
                   "pod's own terminationGracePeriodSeconds), not %r" % (grace,))
    poll = params.get("poll_interval")
    if poll is not None and not poll > 0:
        out.append("poll_interval must be more than 0 seconds, not %r" % (poll,))
    for index, name in enumerate(params.get("only") or []):
        parts = str(name or "").split("/")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            out.append("only[%d] must be namespace/name of a Job, not %r" % (index, name))
    for index, name in enumerate(params.get("namespaces") or []):
        if not str(name or "").strip():
            out.append("namespaces[%d] is empty" % index)
    check = params.get("resume_check")
    if check is not None and resume_kind(check) is None:
        out.append("resume_check must give exactly one of annotation, condition and command (the pool's "
                   "checkpoint.resume_check), not %s" % (", ".join(k for k in RESUME_KINDS if check.get(k)) or "none"))
    if check is not None and params.get("method") == "delete" and resume_kind(check) != "command":
        out.append("resume_check %s needs method preempt (it is read against the Job as it was before the "
                   "reclaim)" % resume_kind(check) if resume_kind(check) else None)
    for name in ("reclaim_priority_class", "reclaim_image", "pool"):
        value = params.get(name)
        if isinstance(value, str) and not value.strip():
            out.append("%s must not be empty" % name)
    hold = params.get("reclaim_hold")
    if hold is not None and not hold >= 0:
        out.append("reclaim_hold must be 0 or more seconds, not %r" % (hold,))
    return [o for o in out if o]


__all__ = ["FAILED", "GameDayError", "NOT_PREEMPTED", "NOT_RECOVERED", "PREEMPTED", "QUEUE_LABEL", "RECLAIM_LABEL",
           "RECOVERED", "RESUME_KINDS", "candidates", "choose", "covered_resources", "eviction", "free_quota",
           "input_errors", "job_finished", "key", "killed_pod", "markdown", "owner_uid", "pod_requests", "pod_running",
           "pods_diff", "pods_of", "reclaim_job", "reclaim_name", "reclaim_size", "recovery", "report", "requeued",
           "resume_kind", "resume_seen", "survived", "tail", "workload_admitted"]
