# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What if: the objects a replay of a workload record builds for one design, the Jobs it submits,
and the report of two designs side by side with their SLO breaches (pure).

The objects come from the design's derive() and the plan functions site.yml's roles write with:
the node pools of ``vks_gpu_node_pools`` (``_k8s_objects.node_pools``: labels, taints, replicas)
become kwok nodes whose allocatable is the pool's GPUs per node (vGPUs per node VM times the guest
time-slicing replicas, as ``_design_capacity.pool_gpus`` counts them) and the VM class's vCPUs and
memory; the PriorityClasses, tenant Namespaces, ResourceQuotas and Kueue objects are
``_guest_plan.wanted_objects`` of the ``gpu_scheduling_policy`` inputs. Everything the replay
creates carries the label ``gpupool.vcf/what-if`` and is the only thing its reset deletes.

Time is compressed by ``factor`` (simulated seconds per wall second): a workload arriving at
``t`` is submitted ``t / factor`` wall seconds after the replay's start and its pods finish
``duration / factor`` wall seconds after they start (kwok's stage delay from the pod annotation
``gpupool.vcf/sim-lifetime``). Waits are measured on the wall clock and multiplied by ``factor``.
No I/O here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import math
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing

LABEL = "gpupool.vcf/what-if"
POOL_LABEL = "gpupool.vcf/pool"
WORKLOAD_LABEL = "gpupool.vcf/what-if-workload"
LIFETIME = "gpupool.vcf/sim-lifetime"
KWOK_NODE = "kwok.x-k8s.io/node"
GPU = "nvidia.com/gpu"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PERCENTILES = (50, 95, 99)
MIN_LIFETIME_MS = 50


class WhatIfError(ValueError):
    """A design, a record or a setting the replay cannot use."""


def percentile(values, p):
    """The nearest-rank ``p``-th percentile of ``values`` (None for none): the smallest value with at
    least p % of the values at or below it."""
    values = sorted(values)
    if not values:
        return None
    rank = max(1, int(math.ceil(p / 100.0 * len(values))))
    return values[min(rank, len(values)) - 1]


def _mark(obj, run):
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {}).setdefault("labels", {})[LABEL] = run
    return obj


# -- the design's replay cluster ---------------------------------------------------------------

def design_pools(design, derived):
    """{pool: {gpus_per_node, replicas, cpu, memory_gb, labels, taints, priority, slo, local_queue,
    tenants}} of the design's pools that have a node pool, from the design and its derive()."""
    node_pools = {}
    for entry in derived["roles"]["vks_gpu_node_pools"]:
        inputs = _k8s_objects.role_inputs("vks_gpu_node_pools", entry)
        for np in _k8s_objects.node_pools(inputs):
            pool = (np.get("labels") or {}).get(POOL_LABEL) or np["name"]
            node_pools[pool] = np
    policy = derived["roles"]["gpu_scheduling_policy"]
    queues = {}
    if policy.get("gpu_scheduling_policy_kueue"):
        for q in policy.get("gpu_scheduling_policy_kueue_queues") or []:
            pool = (q.get("node_labels") or {}).get(POOL_LABEL)
            if pool:
                queues[pool] = q["local_queue"]
    tenants = {}
    for t in design.get("tenants") or []:
        for pool in (t.get("gpu_quota") or {}):
            tenants.setdefault(pool, []).append(t["name"])
    out = OrderedDict()
    for pool in design.get("pools") or []:
        np = node_pools.get(pool["name"])
        if np is None:
            continue
        slicing = (pool.get("guest_time_slicing") or {}).get("replicas") or 1
        out[pool["name"]] = OrderedDict([
            ("gpus_per_node", (pool.get("gpus_per_node") or 1) * slicing),
            ("replicas", int(np.get("replicas") or 0)),
            ("cpu", (pool.get("vm_class") or {}).get("cpu") or 8),
            ("memory_gb", (pool.get("vm_class") or {}).get("memory_gb") or 32),
            ("labels", dict(np.get("labels") or {})),
            ("taints", [dict(t) for t in np.get("taints") or []]),
            ("priority", pool.get("priority")),
            ("slo", pool.get("slo") or None),
            ("local_queue", queues.get(pool["name"])),
            ("tenants", tenants.get(pool["name"], [])),
        ])
    return out


def replay_nodes(pools, run):
    """The kwok Node manifests of every pool's node VMs (``wi-<pool>-<i>``)."""
    out = []
    for name, pool in pools.items():
        capacity = {"cpu": str(pool["cpu"]), "memory": "%dGi" % pool["memory_gb"], "pods": "110",
                    GPU: str(pool["gpus_per_node"])}
        for i in range(pool["replicas"]):
            node = "wi-%s-%d" % (name, i)
            labels = dict(pool["labels"], **{"kubernetes.io/hostname": node, "type": "kwok"})
            labels[POOL_LABEL] = name
            out.append(_mark({"apiVersion": "v1", "kind": "Node",
                              "metadata": {"name": node, "labels": labels,
                                           "annotations": {KWOK_NODE: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                              "spec": {"taints": [dict(t) for t in pool["taints"]]},
                              "status": {"capacity": dict(capacity), "allocatable": dict(capacity)}}, run))
    return out


def policy_objects(derived, run):
    """The PriorityClasses, tenant Namespaces, ResourceQuotas and Kueue objects the
    gpu_scheduling_policy role writes for the design (the same plan functions), marked for the run."""
    policy = _k8s_objects.role_inputs("gpu_scheduling_policy", derived["roles"]["gpu_scheduling_policy"])
    kueue = policy if _k8s_objects.flag(policy.get("gpu_scheduling_policy_kueue")) else None
    objs = _guest_plan.wanted_objects(policy.get("gpu_scheduling_policy_priority_classes") or
                                      _guest_plan.builtin_priority_classes(policy),
                                      policy.get("gpu_scheduling_policy_tenants") or [],
                                      quota_name=policy.get("gpu_scheduling_policy_quota_name") or "gpu-quota",
                                      gpu_resource=policy.get("gpu_scheduling_policy_gpu_resource") or GPU,
                                      kueue=kueue)
    return [_mark(o, run) for o in objs]


def lifetime_ms(duration, factor):
    """The wall milliseconds a pod of ``duration`` simulated seconds lives at compression ``factor``."""
    return max(MIN_LIFETIME_MS, int(round(duration * 1000.0 / factor)))


def _toleration(taint):
    """The toleration of one node taint."""
    out = OrderedDict([("key", taint["key"]), ("operator", "Equal" if taint.get("value") else "Exists")])
    if taint.get("value"):
        out["value"] = taint["value"]
    if taint.get("effect"):
        out["effect"] = taint["effect"]
    return dict(out)


def workload_job(workload, pool, run, factor, index):
    """The Job of one record workload for the design's ``pool`` (design_pools' entry): its pods request
    the GPUs, carry the pool's node selector, tolerations and PriorityClass, and live the compressed
    run time; in a Kueue pool it is created suspended with the LocalQueue label (as Kueue's webhook
    makes it)."""
    tolerations = [_toleration(t) for t in pool["taints"]]
    priority = workload.get("priority") or pool["priority"]
    labels = {LABEL: run, WORKLOAD_LABEL: workload["name"], POOL_LABEL: workload["pool"]}
    pod = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
           "nodeSelector": {POOL_LABEL: workload["pool"]}, "tolerations": tolerations,
           "containers": [{"name": "main", "image": "what-if.invalid/replay:1",
                           "resources": {"requests": {GPU: str(workload["gpus"])},
                                         "limits": {GPU: str(workload["gpus"])}}}]}
    if priority:
        pod["priorityClassName"] = priority
    job_labels = dict(labels)
    spec = {"parallelism": workload["pods"], "completions": workload["pods"], "backoffLimit": 6,
            "template": {"metadata": {"labels": labels,
                                      "annotations": {LIFETIME: "%dms" % lifetime_ms(workload["duration"], factor)}},
                         "spec": pod}}
    if pool["local_queue"]:
        job_labels[QUEUE_LABEL] = pool["local_queue"]
        spec["suspend"] = True
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "wi-%05d" % index, "namespace": workload["tenant"], "labels": job_labels},
            "spec": spec}


def check_factor(factor):
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 <= factor <= 100000:
        raise WhatIfError("compression must be a number from 1 to 100000 (simulated seconds per wall second), "
                          "not %r" % (factor,))
    return float(factor)


def fit_problems(record, pools):
    """What the record asks of the design that it lacks: [text]."""
    out = []
    for w in record["workloads"]:
        pool = pools.get(w["pool"])
        if pool is None:
            out.append("workload %s: pool %s has no node pool in the design" % (w["name"], w["pool"]))
        elif w["tenant"] not in pool["tenants"]:
            out.append("workload %s: tenant %s has no GPU quota on pool %s" % (w["name"], w["tenant"], w["pool"]))
    return out


def compression_note(factor, poll_s):
    """What the compression distorts, in one paragraph (the report and the docs say the same)."""
    return ("Time runs %g times faster than recorded (1 wall second = %g simulated seconds). Every fixed delay of "
            "the real control plane is stretched by that factor in simulated time: the scheduler's and Kueue's "
            "requeue backoffs, the Job controller's pod creation retries, watch and status latencies (tens of "
            "milliseconds become seconds to minutes), and the replayer's poll interval (%g s wall = %g s simulated) "
            "bounds the resolution of every wait. Waits shorter than that are not resolved." % (
                factor, factor, poll_s, poll_s * factor))


# -- measuring and the report --------------------------------------------------------------------

def outcomes(record, observed, factor, end_wall):
    """Per workload its simulated waits from what the replay observed on the wall clock.
    ``observed``: {name: {submitted, admitted, running, finished, preempted}} (wall seconds after the
    replay's start; None when not reached). A workload never admitted or never running by
    ``end_wall`` counts its wait until then (a lower bound) and is ``waiting``. ``start`` and ``end``
    are when all its pods ran and when it finished, in simulated seconds after the replay's start (None
    when not reached); ``gpus`` the GPUs it holds (per pod times pods), ``duration`` its recorded run time."""
    out = []
    for w in record["workloads"]:
        o = observed.get(w["name"]) or {}
        submitted = o.get("submitted")
        if submitted is None:
            submitted = w["arrival"] / factor
        admitted, running = o.get("admitted"), o.get("running")
        admission = ((admitted if admitted is not None else end_wall) - submitted) * factor
        started_from = admitted if admitted is not None else submitted
        scheduling = None if admitted is None else (
            ((running if running is not None else end_wall) - started_from) * factor)
        total = ((running if running is not None else end_wall) - submitted) * factor
        finished = o.get("finished")
        out.append(OrderedDict([
            ("name", w["name"]), ("pool", w["pool"]), ("tenant", w["tenant"]),
            ("gpus", w["gpus"] * w["pods"]), ("duration", w["duration"]),
            ("start", None if running is None else round(running * factor, 3)),
            ("end", None if finished is None or running is None else round(finished * factor, 3)),
            ("admitted", admitted is not None), ("running", running is not None),
            ("finished", o.get("finished") is not None), ("preempted", int(o.get("preempted") or 0)),
            ("admission_wait", round(max(0.0, admission), 3)),
            ("scheduling_wait", None if scheduling is None else round(max(0.0, scheduling), 3)),
            ("wait", round(max(0.0, total), 3)),
        ]))
    return out


def _stats(rows):
    out = OrderedDict([("workloads", len(rows)), ("admitted", sum(1 for r in rows if r["admitted"])),
                       ("waiting", sum(1 for r in rows if not r["running"])),
                       ("preempted", sum(1 for r in rows if r["preempted"]))])
    for key in ("admission_wait", "scheduling_wait", "wait"):
        values = [r[key] for r in rows if r[key] is not None]
        for p in PERCENTILES:
            out["%s_p%d" % (key, p)] = percentile(values, p)
    return out


def usage_series(rows, horizon):
    """{pool: [(t, gpus)]}: per pool the GPUs in use over the replay as a step series in simulated
    seconds, from each workload's own ``start`` to its ``end`` (``horizon`` for one still running when
    the replay ended; a workload that never ran holds none). The series starts at (0, 0), has a point
    at each change (the value holds until the next point) and ends at (horizon, value)."""
    changes = OrderedDict()
    for r in rows:
        pool = changes.setdefault(r["pool"], {})
        if r.get("start") is None:
            continue
        end = r["end"] if r.get("end") is not None else horizon
        start = min(r["start"], horizon)
        end = min(max(end, start), horizon)
        if end <= start:
            continue
        pool[start] = pool.get(start, 0) + r["gpus"]
        pool[end] = pool.get(end, 0) - r["gpus"]
    out = OrderedDict()
    for name in sorted(changes):
        series, level = [(0.0, 0)], 0
        for t in sorted(changes[name]):
            delta = changes[name][t]
            if not delta:
                continue
            level += delta
            if series[-1][0] == t:
                series[-1] = (t, level)
            else:
                series.append((t, level))
        if series[-1][0] < horizon:
            series.append((float(horizon), level))
        out[name] = series
    return out


def mean_in_use(series):
    """The time-weighted mean of a step series (``usage_series``) over its span; 0 for an empty span."""
    span = series[-1][0] - series[0][0]
    if span <= 0:
        return 0.0
    area = sum((t1 - t0) * v for (t0, v), (t1, _v) in zip(series, series[1:]))
    return area / span


def knee_position(pool, rows, series):
    """Where one design's ``pool`` (``design_pools``' entry) sits against its queueing knee in the replay:
    ``gpus`` (the nodes' GPUs), ``mean_in_use`` and ``utilization`` (the mean of the step ``series`` over
    the GPUs), ``gpus_per_job`` (the mean GPUs of the pool's workloads, rounded), ``servers`` (GPUs over
    that), ``service_s`` and ``cv`` (the mean and the coefficient of variation of the recorded run times of
    the pool's ``rows``), and with the pool's ``slo`` the ``knee_utilization`` (``_queueing.knee`` of
    those under M/G/c, M/M/c when the CV is not known), ``model_wait_s`` (the model's wait at the SLO
    percentile at the replay's utilization; None at or above 1) and ``past_knee``."""
    gpus = pool["replicas"] * pool["gpus_per_node"]
    sizes = [r["gpus"] for r in rows]
    per_job = max(1, int(round(float(sum(sizes)) / len(sizes)))) if sizes else 1
    cv, service, _n = _queueing.cv_from_durations([r["duration"] for r in rows])
    in_use = mean_in_use(series) if series else 0.0
    slo = pool.get("slo") or {}
    out = OrderedDict([
        ("gpus", gpus), ("mean_in_use", round(in_use, 3)),
        ("utilization", round(in_use / gpus, 4) if gpus else None),
        ("gpus_per_job", per_job), ("servers", gpus // per_job),
        ("service_s", None if service is None else round(service, 3)),
        ("cv", None if cv is None else round(cv, 3)),
        ("model", _queueing.MODEL if cv is None else _queueing.MODEL_MGC),
        ("slo_wait_s", slo.get("wait_seconds")), ("slo_percentile", slo.get("percentile") or 95),
        ("knee_utilization", None), ("model_wait_s", None), ("past_knee", None), ("note", None),
    ])
    if out["servers"] < 1 or not service:
        out["note"] = ("no knee: %s" % ("the pool has fewer GPUs than one job's %d" % per_job if out["servers"] < 1
                                        else "no workload ran on the pool"))
        return out
    if not slo.get("wait_seconds"):
        out["note"] = "no knee: the pool has no slo.wait_seconds"
        return out
    model_cv = 1.0 if cv is None else cv
    value = _queueing.knee(out["servers"], service, slo["wait_seconds"], out["slo_percentile"], cv=model_cv)
    out["knee_utilization"] = round(value, 4)
    rho = in_use / gpus
    if rho < 1:
        out["model_wait_s"] = round(_queueing.wait_percentile(out["servers"], rho, service, out["slo_percentile"],
                                                              cv=model_cv), 1)
    out["past_knee"] = rho > value
    return out


def usage(rows, pools, horizon):
    """{pool: knee_position + ``series``} of one design's outcomes over [0, horizon] simulated seconds."""
    series = usage_series(rows, horizon)
    out = OrderedDict()
    for name in sorted(series):
        entry = knee_position(pools.get(name) or {"replicas": 0, "gpus_per_node": 0},
                              [r for r in rows if r["pool"] == name], series[name])
        entry["series"] = [[round(t, 3), v] for t, v in series[name]]
        out[name] = entry
    return out


def summary(rows, pools, horizon=None):
    """{"pools": {pool: stats}, "tenants": {pool/tenant: stats}, "usage": {pool: usage}, "breaches": [...]}
    of one design's outcomes; a pool breaches its SLO when the p-th percentile (the SLO's ``percentile``,
    95 by default) of its waits (arrival to running) is above ``wait_seconds``. ``usage`` is each pool's
    GPUs in use over [0, ``horizon``] (simulated seconds; by default the last start or end of a
    workload) and its place against the knee (``usage``)."""
    if horizon is None:
        horizon = max([r.get("end") or r.get("start") or 0 for r in rows] + [0])
    by_pool, by_tenant = OrderedDict(), OrderedDict()
    for r in rows:
        by_pool.setdefault(r["pool"], []).append(r)
        by_tenant.setdefault("%s/%s" % (r["pool"], r["tenant"]), []).append(r)
    out = OrderedDict([("pools", OrderedDict((p, _stats(v)) for p, v in sorted(by_pool.items()))),
                       ("tenants", OrderedDict((t, _stats(v)) for t, v in sorted(by_tenant.items()))),
                       ("usage", usage(rows, pools, horizon)), ("breaches", [])])
    for name, stats in out["pools"].items():
        slo = (pools.get(name) or {}).get("slo") or {}
        if not slo.get("wait_seconds"):
            continue
        p = int(slo.get("percentile") or 95)
        value = percentile([r["wait"] for r in by_pool[name]], p)
        stats["slo"] = OrderedDict([("percentile", p), ("wait_seconds", slo["wait_seconds"]), ("value", value)])
        if value is not None and value > slo["wait_seconds"]:
            out["breaches"].append(OrderedDict([
                ("pool", name), ("percentile", p), ("wait_seconds", slo["wait_seconds"]), ("value", value),
                ("message", "pool %s: p%d wait %s s is above the SLO's %s s" % (
                    name, p, _fmt(value), slo["wait_seconds"]))]))
    return out


def _fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float) and value != int(value):
        return "%.1f" % value
    return "%d" % value


COLUMNS = (("workloads", "workloads"), ("admitted", "admitted"), ("waiting", "waiting"), ("preempted", "preempted"),
           ("admission_wait_p50", "adm p50"), ("admission_wait_p95", "adm p95"), ("admission_wait_p99", "adm p99"),
           ("scheduling_wait_p50", "sched p50"), ("scheduling_wait_p95", "sched p95"),
           ("scheduling_wait_p99", "sched p99"), ("wait_p95", "wait p95"))


def _rows(current, proposed, key):
    names = sorted(set(current[key]) | set(proposed[key]))
    for name in names:
        for label, side in (("current", current), ("proposed", proposed)):
            stats = side[key].get(name)
            yield name, label, stats


def knee_text(entry):
    """One design's place against a pool's knee in words (``usage``' entry)."""
    if entry is None:
        return "-"
    head = "%.1f %% of %d GPUs (mean %.1f in use)" % (
        (entry["utilization"] or 0) * 100, entry["gpus"], entry["mean_in_use"])
    if entry["knee_utilization"] is None:
        return "%s, %s" % (head, entry["note"])
    model = "M/%s/%d" % ("M" if entry["model"] == _queueing.MODEL else "G", entry["servers"])
    return "%s, knee %.1f %% (%s, service %s s, CV %s, p%s wait <= %s s): %s" % (
        head, entry["knee_utilization"] * 100, model, _fmt(entry["service_s"]),
        "-" if entry["cv"] is None else "%.2f" % entry["cv"], _fmt(entry["slo_percentile"]),
        _fmt(entry["slo_wait_s"]), "PAST THE KNEE" if entry["past_knee"] else "below the knee")


def _usage_lines(current, proposed):
    names = sorted(set(current.get("usage") or {}) | set(proposed.get("usage") or {}))
    lines = ["GPU utilization over the replay and the knee (the utilization at which the model's wait at the SLO "
             "percentile reaches the SLO):"]
    for name in names:
        lines.append("  %s: current %s; proposed %s" % (
            name, knee_text((current.get("usage") or {}).get(name)), knee_text((proposed.get("usage") or {}).get(name))))
    return lines + [""] if names else []


def text_report(current, proposed, note):
    """The side-by-side report as plain text (seconds are simulated seconds)."""
    head = ["%-28s %-9s" % ("pool / tenant", "design")] + ["%9s" % c[1] for c in COLUMNS]
    lines = ["What if: current and proposed design on the recorded workload (waits in simulated seconds)", "",
             " ".join(head)]
    for key in ("pools", "tenants"):
        for name, label, stats in _rows(current, proposed, key):
            cells = ["%-28s %-9s" % (name, label)]
            cells += ["%9s" % (_fmt(stats[c[0]]) if stats else "-") for c in COLUMNS]
            lines.append(" ".join(cells))
        lines.append("")
    lines += _usage_lines(current, proposed)
    for label, side in (("current", current), ("proposed", proposed)):
        if side["breaches"]:
            lines += ["%s design breaches: %s" % (label, "; ".join(b["message"] for b in side["breaches"]))]
        else:
            lines += ["%s design: no SLO breach" % label]
    lines += ["", note]
    return "\n".join(lines) + "\n"


def _esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"))


FILL = {"current": "#4a78b0", "proposed": "#d9822b"}


def _chart(current, proposed):
    """An SVG chart of each pool's p95 wait: one horizontal bar per pool and design (none for a wait of 0),
    its width proportional to the wait."""
    pools = sorted(set(current["pools"]) | set(proposed["pools"]))
    rows = [(pool, label, (side["pools"].get(pool) or {}).get("wait_p95") or 0)
            for pool in pools for label, side in (("current", current), ("proposed", proposed))]
    top = max([value for _pool, _label, value in rows] + [1])
    plot_x, plot_w, row_h = 170, 560, 22
    parts = ['<svg id="wait-chart" class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'role="img" aria-label="p95 wait per pool and design">' % (plot_x + plot_w + 90, row_h * len(rows) + 10)]
    for i, (pool, label, value) in enumerate(rows):
        y = 5 + i * row_h
        parts.append('<text x="4" y="%d" font-size="12">%s (%s)</text>' % (y + 14, _esc(pool), label))
        if value > 0:
            width = plot_w * float(value) / top
            parts.append('<rect class="bar %s" data-group="%s" data-segment="%s" data-value="%s" x="%d" y="%d" '
                         'width="%.2f" height="%d" fill="%s"><title>%s %s p95 wait %s s</title></rect>' % (
                             label, _esc(pool), label, repr(float(value)), plot_x, y, width, row_h - 6,
                             FILL[label], _esc(pool), label, _fmt(value)))
        parts.append('<text x="%d" y="%d" font-size="12">%s s</text>' % (
            plot_x + (plot_w * float(value) / top) + 4, y + 14, _fmt(value)))
    parts.append("</svg>")
    return "".join(parts)


def _step_path(series, x, y):
    """The SVG path data of a step series, through the mapping functions ``x`` and ``y``."""
    parts = ["M%.2f %.2f" % (x(series[0][0]), y(series[0][1]))]
    for (_t0, v0), (t1, v1) in zip(series, series[1:]):
        parts.append("H%.2f" % x(t1))
        if v1 != v0:
            parts.append("V%.2f" % y(v1))
    return " ".join(parts)


def usage_chart(pool, current, proposed):
    """An SVG chart of one pool's GPUs in use over the replay: a step path per design (blue: current,
    orange: proposed), each design's GPUs (dashed) and its knee (the knee utilization times its GPUs,
    dotted); x in simulated hours, y in GPUs."""
    sides = [(label, (side.get("usage") or {}).get(pool))
             for label, side in (("current", current), ("proposed", proposed))]
    sides = [(label, entry) for label, entry in sides if entry]
    horizon = max([e["series"][-1][0] for _l, e in sides] + [1.0])
    top = max([max(e["gpus"], max(v for _t, v in e["series"])) for _l, e in sides] + [1])
    left, width, top_y, height = 50, 640, 10, 170

    def x(t):
        return left + width * float(t) / horizon

    def y(v):
        return top_y + height * (1.0 - float(v) / top)

    parts = ['<svg id="usage-%s" class="chart usage" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'role="img" aria-label="GPUs in use on pool %s">' % (
                 _esc(pool), left + width + 110, top_y + height + 30, _esc(pool)),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>' % (left, y(0), left + width, y(0)),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>' % (left, top_y, left, y(0)),
             '<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>' % (left - 4, y(top) + 4, top),
             '<text x="%d" y="%.1f" font-size="11" text-anchor="end">0</text>' % (left - 4, y(0) + 4),
             '<text x="%d" y="%d" font-size="11">0 h</text>' % (left, y(0) + 16),
             '<text x="%d" y="%d" font-size="11" text-anchor="end">%.1f h (simulated)</text>' % (
                 left + width, y(0) + 16, horizon / 3600.0)]
    for label, e in sides:
        colour, below = FILL[label], 0 if label == "current" else 12  # the proposal's labels a line lower
        parts.append('<line class="capacity %s" x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="%s" '
                     'stroke-dasharray="6 3"/>' % (label, left, y(e["gpus"]), left + width, y(e["gpus"]), colour))
        parts.append('<text x="%d" y="%.1f" font-size="11" fill="%s">%s: %d GPUs</text>' % (
            left + width + 4, y(e["gpus"]) + 4 + below, colour, label, e["gpus"]))
        if e["knee_utilization"] is not None:
            knee_gpus = e["knee_utilization"] * e["gpus"]
            parts.append('<line class="knee %s" x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="%s" '
                         'stroke-dasharray="2 3"/>' % (label, left, y(knee_gpus), left + width, y(knee_gpus), colour))
            parts.append('<text x="%d" y="%.1f" font-size="11" fill="%s">knee %.1f %%</text>' % (
                left + width + 4, y(knee_gpus) + 4 + below, colour, e["knee_utilization"] * 100))
    for label, e in sides:
        peak = max(v for _t, v in e["series"])
        parts.append('<path class="line %s" data-design="%s" data-max="%s" data-utilization="%s" fill="none" '
                     'stroke="%s" stroke-width="2" d="%s"><title>%s: %s</title></path>' % (
                         label, label, peak, e["utilization"], FILL[label], _step_path(e["series"], x, y),
                         label, _esc(knee_text(e))))
    parts.append("</svg>")
    return "".join(parts)


def _usage_html(current, proposed):
    names = sorted(set(current.get("usage") or {}) | set(proposed.get("usage") or {}))
    if not names:
        return []
    out = ["<h2>GPU utilization and the knee</h2>",
           "<p>GPUs in use over the replay (simulated time), each design's GPUs (dashed) and its knee (dotted: the "
           "utilization at which the model's wait at the SLO percentile reaches the SLO).</p>"]
    for name in names:
        out.append("<h3>%s</h3>" % _esc(name))
        out.append(usage_chart(name, current, proposed))
        out.append('<ul class="knee" id="knee-%s">%s</ul>' % (_esc(name), "".join(
            '<li>%s: %s</li>' % (label, _esc(knee_text((side.get("usage") or {}).get(name))))
            for label, side in (("current", current), ("proposed", proposed)))))
    return out


def html_report(current, proposed, note):
    """The side-by-side report as one HTML page with a chart of the pools' p95 waits."""
    out = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>What if: current and proposed design</title>",
           "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #999;"
           "padding:2px 6px;text-align:right}td.name{text-align:left}"
           "tr.breach td{background:#fbe3e3}</style></head><body>",
           "<h1>What if: current and proposed design</h1>",
           "<p>Waits in simulated seconds; p95 wait per pool (blue: current, orange: proposed):</p>",
           _chart(current, proposed)]
    breached = {("current", b["pool"]) for b in current["breaches"]} | {("proposed", b["pool"]) for b in proposed["breaches"]}
    for key, title in (("pools", "Per pool"), ("tenants", "Per pool and tenant")):
        out.append("<h2>%s</h2><table id=\"%s\"><tr><th>%s</th><th>design</th>%s</tr>" % (
            title, key, "pool" if key == "pools" else "pool/tenant", "".join("<th>%s</th>" % _esc(c[1]) for c in COLUMNS)))
        for name, label, stats in _rows(current, proposed, key):
            cls = ' class="breach"' if key == "pools" and (label, name) in breached else ""
            out.append("<tr%s><td class=\"name\">%s</td><td class=\"name\">%s</td>%s</tr>" % (
                cls, _esc(name), label, "".join("<td>%s</td>" % (_fmt(stats[c[0]]) if stats else "-") for c in COLUMNS)))
        out.append("</table>")
    out += _usage_html(current, proposed)
    out.append("<h2>SLO breaches</h2><ul id=\"breaches\">")
    for label, side in (("current", current), ("proposed", proposed)):
        if side["breaches"]:
            out += ["<li>%s: %s</li>" % (label, _esc(b["message"])) for b in side["breaches"]]
        else:
            out.append("<li>%s: none</li>" % label)
    out.append("</ul><p id=\"compression\">%s</p></body></html>" % _esc(note))
    return "\n".join(out) + "\n"
