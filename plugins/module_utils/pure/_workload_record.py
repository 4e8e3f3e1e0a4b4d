# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload record of the what-if replay (pure): its file format, its checks, a seeded
synthetic generator and the record made from the pool's own Prometheus series.

A record is a small versioned document a user can edit, share and anonymise::

    schema: gpupool.vcf/workload-record
    version: 1
    source: prometheus | synthetic | hand
    start: 1767225600          # epoch seconds of the record's time zero (information only)
    span_seconds: 604800       # the period the record covers
    workloads:
      - name: job-0001         # unique
        tenant: research       # the namespace
        pool: training         # the design's pool
        priority: gpu-training # the PriorityClass (optional: the pool's)
        gpus: 4                # GPUs per pod
        pods: 1                # pods of the workload (a Job's parallelism; default 1)
        arrival: 0             # seconds after time zero
        duration: 3600         # run time in seconds; or start and end (seconds after time zero)

Times are seconds after the record's ``start``; the replay keeps only the arrival and the run time
(``duration``, or ``end - start`` as observed): the waits are what the replay measures. No I/O here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import random
import re
from collections import OrderedDict

SCHEMA = "gpupool.vcf/workload-record"
VERSION = 1
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$")
DISTRIBUTIONS = ("exponential", "lognormal", "fixed")
MAX_WORKLOADS = 100000
MAX_GPUS = 64
MAX_PODS = 64


class RecordError(ValueError):
    """A record, a generator setting or a Prometheus answer the replay cannot use."""


def _number(value, where, low=0.0, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError("%s must be a number, not %r" % (where, value))
    if integer and int(value) != value:
        raise RecordError("%s must be a whole number, not %r" % (where, value))
    if math.isnan(value) or math.isinf(value) or value < low:
        raise RecordError("%s must be at least %s, not %r" % (where, low, value))
    return int(value) if integer else float(value)


def _name(value, where):
    if not isinstance(value, str) or not NAME.match(value):
        raise RecordError("%s must be a DNS label (lower case letters, digits and '-', at most 52 characters), "
                          "not %r" % (where, value))
    return value


def run_seconds(workload):
    """The run time of a checked workload entry."""
    return workload["duration"]


def check_workload(entry, where):
    """One workload entry, checked and normalised (``duration`` always set; ``start``/``end`` kept)."""
    if not isinstance(entry, dict):
        raise RecordError("%s must be a mapping" % where)
    known = {"name", "tenant", "pool", "priority", "gpus", "pods", "arrival", "duration", "start", "end"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise RecordError("%s: unknown key(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(known))))
    for key in ("name", "tenant", "pool", "gpus", "arrival"):
        if key not in entry:
            raise RecordError("%s: %s is missing" % (where, key))
    out = OrderedDict()
    out["name"] = _name(entry["name"], "%s.name" % where)
    out["tenant"] = _name(entry["tenant"], "%s.tenant" % where)
    out["pool"] = _name(entry["pool"], "%s.pool" % where)
    if entry.get("priority") is not None:
        out["priority"] = _name(entry["priority"], "%s.priority" % where)
    out["gpus"] = _number(entry["gpus"], "%s.gpus" % where, 1, integer=True)
    if out["gpus"] > MAX_GPUS:
        raise RecordError("%s.gpus: at most %d GPUs per pod, not %d" % (where, MAX_GPUS, out["gpus"]))
    out["pods"] = _number(entry.get("pods", 1), "%s.pods" % where, 1, integer=True)
    if out["pods"] > MAX_PODS:
        raise RecordError("%s.pods: at most %d pods per workload, not %d" % (where, MAX_PODS, out["pods"]))
    out["arrival"] = _number(entry["arrival"], "%s.arrival" % where)
    if entry.get("duration") is not None:
        out["duration"] = _number(entry["duration"], "%s.duration" % where)
    elif entry.get("start") is not None and entry.get("end") is not None:
        start = _number(entry["start"], "%s.start" % where)
        end = _number(entry["end"], "%s.end" % where)
        if start < out["arrival"] or end < start:
            raise RecordError("%s: arrival <= start <= end does not hold (%s, %s, %s)" % (
                where, out["arrival"], start, end))
        out["start"], out["end"], out["duration"] = start, end, end - start
    else:
        raise RecordError("%s: give duration, or start and end" % where)
    if out["duration"] <= 0:
        raise RecordError("%s: the run time must be more than 0 seconds" % where)
    return out


def check_record(record):
    """The record checked and normalised (workloads sorted by arrival, then name); RecordError
    naming the first problem otherwise."""
    if not isinstance(record, dict):
        raise RecordError("a workload record must be a mapping")
    if record.get("schema") != SCHEMA:
        raise RecordError("schema must be %r, not %r" % (SCHEMA, record.get("schema")))
    if record.get("version") != VERSION:
        raise RecordError("version %r is not known: this collection reads version %d" % (record.get("version"), VERSION))
    workloads = record.get("workloads")
    if not isinstance(workloads, list) or not workloads:
        raise RecordError("workloads must be a non-empty list")
    if len(workloads) > MAX_WORKLOADS:
        raise RecordError("at most %d workloads, not %d" % (MAX_WORKLOADS, len(workloads)))
    out = [check_workload(w, "workloads[%d]" % i) for i, w in enumerate(workloads)]
    seen = set()
    for w in out:
        if w["name"] in seen:
            raise RecordError("workload name %s is given twice" % w["name"])
        seen.add(w["name"])
    out.sort(key=lambda w: (w["arrival"], w["name"]))
    end = max(w["arrival"] + w["duration"] for w in out)
    return OrderedDict([("schema", SCHEMA), ("version", VERSION), ("source", record.get("source") or "hand"),
                        ("start", record.get("start") or 0), ("span_seconds", record.get("span_seconds") or end),
                        ("workloads", out)])


def record_problems(record, design_pools, tenants_of_pool):
    """What the record asks of a design that the design does not have: [text] (empty: it fits).
    ``design_pools``: {pool: priority}; ``tenants_of_pool``: {pool: [namespaces with quota on it]}."""
    out = []
    for w in record["workloads"]:
        if w["pool"] not in design_pools:
            out.append("workload %s: pool %s is not in the design (pools: %s)" % (
                w["name"], w["pool"], ", ".join(sorted(design_pools))))
        elif w["tenant"] not in tenants_of_pool.get(w["pool"], ()):
            out.append("workload %s: tenant %s has no quota on pool %s" % (w["name"], w["tenant"], w["pool"]))
    return out


def anonymise(record):
    """The record with tenants renamed tenant-1, tenant-2 ... (in order of first arrival) and workloads
    w-00001 ...; pools and priorities kept (they are the design's)."""
    tenants = OrderedDict()
    out = []
    for i, w in enumerate(record["workloads"], 1):
        tenants.setdefault(w["tenant"], "tenant-%d" % (len(tenants) + 1))
        item = OrderedDict(w)
        item["name"] = "w-%05d" % i
        item["tenant"] = tenants[w["tenant"]]
        out.append(item)
    return OrderedDict(record, workloads=out)


# -- the synthetic generator ---------------------------------------------------------------------

def _duration(rng, dist, mean, cv):
    if dist == "fixed":
        return mean
    if dist == "exponential":
        return rng.expovariate(1.0 / mean)
    sigma2 = math.log(1.0 + cv * cv)  # lognormal with the given mean and coefficient of variation
    return rng.lognormvariate(math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2))


def check_generator(pools):
    """The generator settings ``{pool: {arrivals_per_hour, mean_seconds, distribution, cv, gpus, pods,
    tenants, priority}}`` checked; RecordError otherwise."""
    if not isinstance(pools, dict) or not pools:
        raise RecordError("the generator needs at least one pool")
    out = OrderedDict()
    for pool in sorted(pools):
        given = pools[pool] or {}
        where = "generator pool %s" % pool
        _name(pool, where)
        dist = given.get("distribution", "exponential")
        if dist not in DISTRIBUTIONS:
            raise RecordError("%s: distribution must be one of %s, not %r" % (where, ", ".join(DISTRIBUTIONS), dist))
        tenants = given.get("tenants") or []
        if not tenants:
            raise RecordError("%s: tenants is empty" % where)
        spec = OrderedDict([
            ("arrivals_per_hour", _number(given.get("arrivals_per_hour"), where + ".arrivals_per_hour")),
            ("mean_seconds", _number(given.get("mean_seconds"), where + ".mean_seconds", 1)),
            ("distribution", dist),
            ("cv", _number(given.get("cv", 1.0), where + ".cv")),
            ("gpus", _number(given.get("gpus", 1), where + ".gpus", 1, integer=True)),
            ("pods", _number(given.get("pods", 1), where + ".pods", 1, integer=True)),
            ("tenants", [_name(t, where + ".tenants") for t in tenants]),
            ("priority", given.get("priority")),
        ])
        if spec["arrivals_per_hour"] <= 0:
            raise RecordError("%s: arrivals_per_hour must be more than 0" % where)
        out[pool] = spec
    return out


def generate(pools, hours, seed):
    """A synthetic record over ``hours``: per pool Poisson arrivals at ``arrivals_per_hour``, run times
    of the pool's distribution (``exponential`` of ``mean_seconds``, ``lognormal`` with that mean and
    coefficient of variation ``cv``, or ``fixed``), tenants taken in turn. The same seed gives the same
    record."""
    spec = check_generator(pools)
    span = _number(hours, "hours", 0.001) * 3600.0
    rng = random.Random(seed)
    workloads = []
    for pool, s in spec.items():
        t, n = 0.0, 0
        while True:
            t += rng.expovariate(s["arrivals_per_hour"] / 3600.0)
            if t >= span:
                break
            n += 1
            w = OrderedDict([("name", "%s-%05d" % (pool, n)), ("tenant", s["tenants"][(n - 1) % len(s["tenants"])]),
                             ("pool", pool)])
            if s["priority"]:
                w["priority"] = s["priority"]
            w.update([("gpus", s["gpus"]), ("pods", s["pods"]), ("arrival", round(t, 3)),
                      ("duration", round(max(1.0, _duration(rng, s["distribution"], s["mean_seconds"], s["cv"])), 3))])
            workloads.append(w)
    if not workloads:
        raise RecordError("the generator made no workload in %s hours: raise arrivals_per_hour or hours" % hours)
    return check_record({"schema": SCHEMA, "version": VERSION, "source": "synthetic", "start": 0,
                         "span_seconds": span, "workloads": workloads})


# -- the record from Prometheus --------------------------------------------------------------------

def prometheus_queries(span, pool_label="label_gpupool_vcf_pool"):
    """The instant queries (evaluated at the period's end) the record is made of, per pod: when it was
    created, started and completed (kube-state-metrics' ``kube_pod_created``, ``kube_pod_start_time``,
    ``kube_pod_completion_time``; last value in the period, so pods gone since still count), the GPUs
    it requested on the node it ran on with the node's pool (``kube_node_labels``' pool label), its
    PriorityClass (``kube_pod_info``) and its owning Job (``kube_pod_owner``)."""
    pods = "namespace, pod, uid"
    last = "max by (%s) (last_over_time(%%s[%ds]))" % (pods, span)
    nodes = ('max by (node, pool) (label_replace(last_over_time(kube_node_labels[%ds]), "pool", "$1", "%s", "(.+)"))'
             % (span, pool_label))
    return OrderedDict([
        ("created", last % "kube_pod_created"),
        ("started", last % "kube_pod_start_time"),
        ("completed", last % "kube_pod_completion_time"),
        ("gpus", 'sum by (%s, pool) (last_over_time(kube_pod_container_resource_requests{resource=~"nvidia_com_gpu.*", '
                 'node!=""}[%ds]) * on (node) group_left (pool) %s)' % (pods, span, nodes)),
        ("info", "max by (%s, priority_class) (last_over_time(kube_pod_info[%ds]))" % (pods, span)),
        ("owner", 'max by (%s, owner_name) (last_over_time(kube_pod_owner{owner_kind="Job"}[%ds]))' % (pods, span)),
    ])


def _key(metric):
    return (metric.get("namespace"), metric.get("pod"), metric.get("uid"))


def _values(result):
    out = {}
    for row in result or []:
        try:
            out[_key(row["metric"])] = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return out


def _labels(result, label):
    return dict((_key(row.get("metric") or {}), (row.get("metric") or {}).get(label)) for row in result or [])


def _job_name(text):
    name = re.sub(r"[^-a-z0-9]", "-", (text or "").lower()).strip("-")[:52].strip("-")
    return name or "workload"


def record_from_prometheus(results, start, end):
    """The record of the GPU workloads created in [start, end] (epoch seconds) and finished by ``end``,
    from the answers of :func:`prometheus_queries` (``results``: {name: the query's result vector}).
    The pods of one Job are one workload (pods: their count; GPUs per pod: the largest request;
    arrival: the first pod's creation; run time: from the first start to the last completion). Pods
    without a pool, a start or a completion are left out and counted in ``skipped``."""
    created, started, completed = (_values(results.get(k)) for k in ("created", "started", "completed"))
    priority, owner = _labels(results.get("info"), "priority_class"), _labels(results.get("owner"), "owner_name")
    groups = OrderedDict()
    skipped = 0
    for row in results.get("gpus") or []:
        metric = row.get("metric") or {}
        key = _key(metric)
        try:
            gpus = int(round(float(row["value"][1])))
        except (KeyError, IndexError, TypeError, ValueError):
            gpus = 0
        if not metric.get("pool") or gpus < 1 or key not in created or not start <= created[key] <= end:
            skipped += 1
            continue
        if key not in started or key not in completed or completed[key] < started[key]:
            skipped += 1
            continue
        job = owner.get(key)
        group = groups.setdefault((key[0], job or key[1]), {
            "tenant": key[0], "pool": metric["pool"], "priority": priority.get(key), "gpus": 0, "pods": 0,
            "arrival": created[key], "start": started[key], "end": completed[key]})
        group["gpus"] = max(group["gpus"], gpus)
        group["pods"] += 1
        group["arrival"] = min(group["arrival"], created[key])
        group["start"] = min(group["start"], started[key])
        group["end"] = max(group["end"], completed[key])
    if not groups:
        raise RecordError("Prometheus holds no finished GPU pod created between %s and %s (pods left out: %d)" % (
            start, end, skipped))
    workloads, names = [], set()
    for (ns, name), g in groups.items():
        base = _job_name(name)
        unique, n = base, 1
        while unique in names:
            n += 1
            unique = "%s-%d" % (base[:48], n)
        names.add(unique)
        w = OrderedDict([("name", unique), ("tenant", _job_name(ns)), ("pool", g["pool"])])
        if g["priority"]:
            w["priority"] = g["priority"]
        w.update([("gpus", g["gpus"]), ("pods", g["pods"]), ("arrival", round(g["arrival"] - start, 3)),
                  ("start", round(max(g["start"], g["arrival"]) - start, 3)), ("end", round(g["end"] - start, 3))])
        if w["end"] <= w["start"]:
            skipped += 1
            continue
        workloads.append(w)
    record = check_record({"schema": SCHEMA, "version": VERSION, "source": "prometheus", "start": start,
                           "span_seconds": end - start, "workloads": workloads})
    record["skipped_pods"] = skipped
    return record
