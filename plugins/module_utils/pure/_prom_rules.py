# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Prometheus recording rules and alerts of a pool design (pure: no I/O).

``rule_file(design)`` validates the design the way ``derive()`` does and returns the rule file
Prometheus reads (``{"groups": [...]}``); ``prometheus_rule(design, name, namespace)`` wraps the
same groups in a Prometheus Operator ``PrometheusRule``. docs/gpu-metrics.md names every rule and
alert with its expression.

The series the rules read, and how a series finds its pool:

* kube-state-metrics: ``kube_node_labels`` with the pool label (``gpupool.vcf/pool``) allowed
  (``--metric-labels-allowlist=nodes=[gpupool.vcf/pool,...]``), the pods' GPU requests
  (``kube_pod_container_resource_requests``), ``kube_pod_status_phase``, ``kube_pod_info``
  (a pending pod has no node yet: it finds its pool by its PriorityClass, one per pool in the
  design), ``kube_pod_created`` and ``kube_pod_status_scheduled_time``;
* dcgm-exporter: ``DCGM_FI_PROF_SM_ACTIVE``, ``DCGM_FI_PROF_DRAM_ACTIVE``,
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED`` and
  ``DCGM_FI_DEV_VGPU_LICENSE_STATUS`` (the metrics ConfigMap of the gpu_operator role), joined to
  the node by their ``Hostname`` label; a GPU shared by several pods has one series per pod, so
  per-GPU values are taken once (``max by`` the GPU) before they are summed;
* Kueue: ``kueue_admission_wait_time_seconds`` (histogram) per ``cluster_queue``, the
  ClusterQueue ``gpupool-<pool>`` of a gang-scheduled pool;
* the latency probe (playbooks/files/gpupool_latency_probe.py, ``_latency_probe``):
  ``gpupool_inference_time_to_first_token_seconds`` and ``gpupool_inference_request_seconds``
  (histograms) and ``gpupool_inference_probe_failures_total`` (counter), each with the ``pool``.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback import (
    GPU_RESOURCES,
    allocation,
    ksm_label,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import pool_gpus
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import POOL_LABEL
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import design_knee, gang_scheduled
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError

HOST_DRIVER_LABEL = "nvidia.com/vgpu.host-driver-version"
# the GPU of a dcgm-exporter series: node, GPU index and MIG instance (empty on a whole GPU)
GPU_KEY = "node, gpu, GPU_I_ID, pool"
DEFAULTS = OrderedDict([
    ("interval", "1m"),        # evaluation interval of every group
    ("wait_window", "30m"),    # the window the wait percentiles are computed over
    ("slo_for", "10m"),        # how long a percentile stays over the SLO before the burn alert fires
    ("latency_window", "5m"),  # the window the latency probe's p99 is computed over
    ("knee_window", "1h"),     # the window the utilization is averaged over for the knee alert
    ("knee_for", "15m"),
    ("pending_for", "15m"),    # pending GPU pods of a pool without an SLO
    ("unlicensed_for", "10m"),
    ("driver_mixed_for", "1h"),
])
# the latency probe's series (the probe program writes them) and the p99 the rules record of each
LATENCY_SERIES = OrderedDict([("first_token", "gpupool_inference_time_to_first_token_seconds"),
                              ("request", "gpupool_inference_request_seconds")])
LATENCY_FAILURES = "gpupool_inference_probe_failures_total"
LATENCY_P99 = OrderedDict((k, "pool:%s:p99" % v) for k, v in LATENCY_SERIES.items())
DURATION = re.compile(r"^([1-9][0-9]{0,5})([smhd])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# what the rules cannot alert on, and why (docs/gpu-metrics.md says the same)
DROPPED = OrderedDict([
    ("client_token_expiring",
     "no Prometheus series carries the client token's expiry: dls_client_token keeps it in the token's "
     "metadata file and nvidia_license_info reads the lease expiry from nvidia-smi; neither is exported"),
])


class RulesError(ClientError):
    """A design or an option the rules cannot be made from."""


def _seconds(duration):
    m = DURATION.match(duration)
    return int(m.group(1)) * UNIT_SECONDS[m.group(2)]


def _duration(seconds):
    seconds = max(1, int(round(seconds)))
    for unit in ("d", "h", "m"):
        if seconds % UNIT_SECONDS[unit] == 0:
            return "%d%s" % (seconds // UNIT_SECONDS[unit], unit)
    return "%ds" % seconds


def settings(options=None):
    """The options merged over ``DEFAULTS``; ``RulesError`` names an unknown option or a bad duration."""
    options = options or {}
    if not isinstance(options, dict):
        raise RulesError("the rule options are %r, not a mapping" % type(options).__name__)
    unknown = sorted(set(options) - set(DEFAULTS) - {"knees"})
    if unknown:
        raise RulesError("unknown rule option(s) %s; known: %s" % (", ".join(unknown), ", ".join(list(DEFAULTS) + ["knees"])))
    out = OrderedDict(DEFAULTS)
    for key in DEFAULTS:
        value = options.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not DURATION.match(value):
            raise RulesError("%s: %r is not a duration such as 30s, 10m, 1h or 1d" % (key, value))
        out[key] = value
    knees = options.get("knees") or {}
    if not isinstance(knees, dict):
        raise RulesError("knees: give a mapping of pool name to utilization (0-1), not %r" % type(knees).__name__)
    for pool, value in knees.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise RulesError("knees.%s: %r is not a utilization above 0 and at most 1" % (pool, value))
    out["knees"] = knees
    return out


def _design(design):
    """The normalized design, after the same validation as derive() (DesignError on errors)."""
    derive(design)
    return normalize(design)[0]


def _quote(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"')


def _pool_nodes(pools=None):
    """Every node with its ``pool`` (kube_node_labels), only the nodes of ``pools`` (names) when given."""
    label = ksm_label(POOL_LABEL)
    match = "=~%s" % _quote("|".join(re.escape(p) for p in pools)) if pools else '!=""'
    return ('max by (node, pool) (label_replace(kube_node_labels{%s%s}, "pool", "$1", "%s", "(.+)"))'
            % (label, match, label))


def _per_gpu(metric, pools=None):
    """One value per GPU (MIG instance) with the node's pool: pods sharing a GPU repeat its series."""
    return ('max by (%s) (label_replace(%s, "node", "$1", "Hostname", "(.*)") * on (node) group_left (pool) %s)'
            % (GPU_KEY, metric, _pool_nodes(pools)))


def _rule(record, expr, labels=None):
    out = OrderedDict([("record", record), ("expr", expr)])
    if labels:
        out["labels"] = OrderedDict(labels)
    return out


def _alert(name, expr, duration, pool, severity, summary, description, extra=None):
    labels = OrderedDict([("pool", pool), ("severity", severity)])
    labels.update(extra or {})
    out = OrderedDict([("alert", name), ("expr", expr)])
    if duration:
        out["for"] = duration
    out["labels"] = labels
    out["annotations"] = OrderedDict([("summary", summary), ("description", description)])
    return out


def _latency_p99(histogram, window):
    return "histogram_quantile(0.99, sum by (pool, le) (rate(%s_bucket[%s])))" % (histogram, window)


def _usage_rules(window):
    """The recording rules of every pool (by the pool label of the nodes, or of the latency probe)."""
    gpu_requests = 'kube_pod_container_resource_requests{resource=~"%s"}' % GPU_RESOURCES
    capacity = 'sum by (pool) (kube_node_status_allocatable{resource=~"%s"} * on (node) group_left (pool) %s)' % (
        GPU_RESOURCES, _pool_nodes())
    busy = "(DCGM_FI_PROF_GR_ENGINE_ACTIVE or (DCGM_FI_DEV_GPU_UTIL / 100))"
    rules = [
        _rule("namespace_pool_profile:gpupool_gpus_allocated:sum", allocation(by=("namespace", "pool", "profile"))),
        _rule("namespace_pool_profile:gpupool_gpu_hours:1h",
              "avg_over_time(namespace_pool_profile:gpupool_gpus_allocated:sum[1h])"),
        _rule("pool:gpupool_gpus_allocated:sum", "sum by (pool) (namespace_pool_profile:gpupool_gpus_allocated:sum)"),
        _rule("pool:gpupool_gpus_capacity:sum", capacity),
        _rule("pool:gpupool_gpus_used:sum", "sum by (pool) (%s)" % _per_gpu(busy)),
        _rule("pool:gpupool_utilization:ratio",
              "pool:gpupool_gpus_allocated:sum / on (pool) (pool:gpupool_gpus_capacity:sum > 0)"),
        _rule("pool:gpupool_sm_active:avg", "avg by (pool) (%s)" % _per_gpu("DCGM_FI_PROF_SM_ACTIVE")),
        _rule("pool:gpupool_dram_active:avg", "avg by (pool) (%s)" % _per_gpu("DCGM_FI_PROF_DRAM_ACTIVE")),
        _rule("pool:gpupool_fb_used_mib:sum", "sum by (pool) (%s)" % _per_gpu("DCGM_FI_DEV_FB_USED")),
        _rule(LATENCY_P99["first_token"], _latency_p99(LATENCY_SERIES["first_token"], window)),
        _rule(LATENCY_P99["request"], _latency_p99(LATENCY_SERIES["request"], window)),
        _rule("namespace_pod_pool:gpupool_scheduling_wait_seconds",
              "max by (namespace, pod, pool) ((kube_pod_status_scheduled_time - on (namespace, pod, uid) kube_pod_created)"
              " * on (namespace, pod) group_left (pool) max by (namespace, pod, pool) (kube_pod_info{node!=\"\"}"
              " * on (node) group_left (pool) %s) and on (namespace, pod) %s)"
              % (_pool_nodes(), gpu_requests)),
    ]
    return rules


def _percentile_name(percentile):
    return ("p%s" % ("%.3f" % percentile).rstrip("0").rstrip(".")).replace(".", "_")


def _wait_rules(pool, s):
    """The pool's wait percentile: Kueue's admission wait for a gang-scheduled pool, else the
    scheduling wait of its pods. Returns (rules, the recorded series, what the wait is)."""
    slo = pool.get("slo") or {}
    percentile = slo.get("percentile") or 95.0
    q = percentile / 100.0
    name = pool["name"]
    pct = _percentile_name(percentile)
    if gang_scheduled(pool):
        record = "pool:gpupool_admission_wait_seconds:%s" % pct
        expr = ('histogram_quantile(%s, sum by (le) (rate(kueue_admission_wait_time_seconds_bucket{cluster_queue=%s}[%s])))'
                % (q, _quote("gpupool-%s" % name), s["wait_window"]))
        what = "Kueue admission wait (ClusterQueue gpupool-%s)" % name
    else:
        record = "pool:gpupool_scheduling_wait_seconds:%s" % pct
        expr = ("quantile(%s, max_over_time(namespace_pod_pool:gpupool_scheduling_wait_seconds{pool=%s}[%s]))"
                % (q, _quote(name), s["wait_window"]))
        what = "pod scheduling wait"
    return [_rule(record, expr, [("pool", name)])], record, what, percentile


def _latency_alerts(pool, s):
    """The latency SLO of a pool with ``slo.first_token_seconds``: the probe's p99 time to first token
    over the bound for slo_for, and the probe failing (no latency to judge is no sign of health)."""
    bound = (pool.get("slo") or {}).get("first_token_seconds")
    if bound is None:
        return []
    name = pool["name"]
    return [
        _alert(
            "GpuPoolFirstTokenSlo", "%s{pool=%s} > %s" % (LATENCY_P99["first_token"], _quote(name), _num(bound)),
            s["slo_for"], name, "critical",
            "Pool %s: p99 time to first token over its SLO of %s s" % (name, _num(bound)),
            "The latency probe's p99 time to first token of pool %s over the last %s is {{ $value | humanizeDuration }}, "
            "past the SLO's %s s for %s. Requests wait for the pool's GPUs: look at SM active beside it on the pool's "
            "dashboard (a busy pool, or a noisy neighbour on a shared card), then add replicas or capacity."
            % (name, s["latency_window"], _num(bound), s["slo_for"])),
        _alert(
            "GpuPoolLatencyProbeFailing",
            "sum by (pool) (increase(%s{pool=%s}[%s])) > 0" % (LATENCY_FAILURES, _quote(name), s["latency_window"]),
            s["slo_for"], name, "warning",
            "The latency probe of pool %s fails" % name,
            "The latency probe's completions to pool %s failed {{ $value }} times over the last %s (the reason is the "
            "reason label of %s): without answers there is no time to first token for GpuPoolFirstTokenSlo to judge."
            % (name, s["latency_window"], LATENCY_FAILURES)),
    ]


def _priority_pools(pools):
    """PriorityClass -> the pools that use it (a pending pod has no node: its class names its pool)."""
    out = OrderedDict()
    for pool in pools:
        out.setdefault(pool["priority"], []).append(pool["name"])
    return out


def _pending_expr(priority):
    return ('sum by (namespace, pod) (kube_pod_container_resource_requests{resource=~"%s"}'
            ' * on (namespace, pod) group_left () (kube_pod_status_phase{phase="Pending"} == 1)'
            ' * on (namespace, pod) group_left () max by (namespace, pod) (kube_pod_info{priority_class=%s})) > 0'
            % (GPU_RESOURCES, _quote(priority)))


def _pool_knee(pool, s):
    """(knee, where it comes from) of the pool, or (None, why not)."""
    if pool["name"] in s["knees"]:
        return float(s["knees"][pool["name"]]), "the knee given for the pool (gpu_capacity's fit)"
    if (pool.get("slo") or {}).get("wait_seconds") is not None:
        result = design_knee(pool)
        if "knee" in result:
            return result["knee"], "the knee of the design's SLO (M/M/c, rule slo_knee)"
    planned = (pool.get("slo") or {}).get("planned_utilization")
    if planned:
        return float(planned), "the design's planned utilization"
    return None, "no knee: the pool has no SLO with job_seconds, no planned_utilization and no knee given"


def _pool_groups(d, s):
    groups = []
    by_priority = _priority_pools(d["pools"])
    for pool in d["pools"]:
        name = pool["name"]
        slo = pool.get("slo") or {}
        rules, wait, what, percentile = _wait_rules(pool, s)
        bound = slo.get("wait_seconds")
        if bound is not None:
            rules.append(_alert(
                "GpuPoolSloBurn", "%s{pool=%s} > %s" % (wait, _quote(name), _num(bound)), s["slo_for"], name, "critical",
                "Pool %s: p%s %s over its SLO of %s s" % (name, _num(percentile), what, _num(bound)),
                "The p%s %s of pool %s over the last %s is {{ $value | humanizeDuration }}, past the SLO's %s s for %s. "
                "Jobs wait longer than the design promises: add capacity or move load (docs/capacity.md)."
                % (_num(percentile), what, name, s["wait_window"], _num(bound), s["slo_for"])))
        rules.extend(_latency_alerts(pool, s))
        knee, source = _pool_knee(pool, s)
        if knee is not None:
            rules.append(_alert(
                "GpuPoolPastKnee",
                "avg_over_time(pool:gpupool_utilization:ratio{pool=%s}[%s]) > %s" % (_quote(name), s["knee_window"], _num(knee)),
                s["knee_for"], name, "warning",
                "Pool %s is allocated past its knee (%s %%)" % (name, _num(knee * 100)),
                "Pool %s had {{ $value | humanizePercentage }} of its %d GPUs allocated on average over %s, past %s "
                "at %s %%: queueing waits grow fast from here."
                % (name, pool_gpus(pool), s["knee_window"], source, _num(knee * 100))))
        pools_of_class = by_priority[pool["priority"]]
        if pools_of_class[0] == name:
            shared = ",".join(pools_of_class)
            pending = _seconds(s["pending_for"]) if bound is None else bound
            rules.append(_alert(
                "GpuPodsPending", _pending_expr(pool["priority"]), _duration(pending), shared, "warning",
                "GPU pod {{ $labels.namespace }}/{{ $labels.pod }} pending on pool %s" % shared,
                "Pod {{ $labels.namespace }}/{{ $labels.pod }} of PriorityClass %s requests {{ $value }} GPU(s) and has "
                "been Pending for more than %s: the pool has no free GPU slot of its profile, or the pod's "
                "tolerations and node selector match no node." % (pool["priority"], _duration(pending))))
        rules.append(_alert(
            "GpuNodeUnlicensed",
            '%s == 0' % _per_gpu("DCGM_FI_DEV_VGPU_LICENSE_STATUS", [name]),
            s["unlicensed_for"], name, "critical",
            "GPU node {{ $labels.node }} of pool %s is not licensed" % name,
            "dcgm-exporter reports vGPU license status 0 (unlicensed) for GPU {{ $labels.gpu }} of node {{ $labels.node }}: "
            "the guest driver runs degraded after its grace period. Check the licensing Secret and the DLS appliance "
            "(docs/licensing.md)."))
        rules.append(_alert(
            "GpuNodeLicenseUnknown",
            '%s unless on (node) label_replace(DCGM_FI_DEV_VGPU_LICENSE_STATUS, "node", "$1", "Hostname", "(.*)")'
            % _pool_nodes([name]),
            s["unlicensed_for"], name, "warning",
            "License state of GPU node {{ $labels.node }} of pool %s is unknown" % name,
            "Node {{ $labels.node }} carries pool %s's label but no dcgm-exporter series reports its vGPU license "
            "status: the exporter is not running there, is not scraped, or the metrics ConfigMap lacks "
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS." % name))
        if pool["shape"] == "notebooks":
            idle = pool["culling"]["idle_minutes"] or d["guest"]["culling"]["idle_minutes"]
            window = _duration((idle + d["guest"]["culling"]["check_minutes"]) * 60)
            rules.append(_alert(
                "GpuNotebookIdle",
                '(max by (namespace, pod, pool) (max_over_time((label_replace(DCGM_FI_DEV_GPU_UTIL{pod!=""}, "node", "$1", '
                '"Hostname", "(.*)") * on (node) group_left (pool) %s)[%s:])) == 0)'
                ' and on (namespace, pod) (time() - kube_pod_created > %d)'
                % (_pool_nodes([name]), window, _seconds(window)),
                "", name, "warning",
                "Notebook {{ $labels.namespace }}/{{ $labels.pod }} holds an idle GPU of pool %s" % name,
                "The GPU of notebook pod {{ $labels.namespace }}/{{ $labels.pod }} was idle for the last %s, past the "
                "culling timeout of %d minutes and one culler check: the culler did not stop it (docs/notebook-culling.md). "
                "Under time-slicing the GPU's activity is shared by its pods, so only a GPU idle for all of them "
                "counts." % (window, idle)))
        groups.append(OrderedDict([("name", "gpupool-%s-%s" % (d["name"], name)), ("interval", s["interval"]),
                                   ("rules", rules)]))
    return groups


def _driver_group(d, s):
    rules = []
    label = ksm_label(HOST_DRIVER_LABEL)
    for cluster in d["clusters"]:
        pools = [p["name"] for p in d["pools"] if p["cluster"] == cluster["name"]]
        if not pools:
            continue
        rules.append(_alert(
            "GpuHostDriverMixed",
            'count(count by (%s) (kube_node_labels{%s!=""} * on (node) group_left () %s)) > 1'
            % (label, label, _pool_nodes(pools)),
            s["driver_mixed_for"], ",".join(pools), "warning",
            "Mixed NVIDIA host driver versions under cluster %s" % cluster["name"],
            "The GPU nodes of pools %s report {{ $value }} host driver versions (node label %s); the design wants "
            "%s on every host of cluster %s. Run site.yml or host_rebuild.yml." % (
                ", ".join(pools), HOST_DRIVER_LABEL, cluster["driver"]["version"], cluster["name"]),
            extra=[("cluster", cluster["name"])]))
    return OrderedDict([("name", "gpupool-%s-hosts" % d["name"]), ("interval", s["interval"]), ("rules", rules)])


def _num(value):
    return ("%.6f" % value).rstrip("0").rstrip(".")


def rule_file(design, options=None):
    """The Prometheus rule file of the design: ``{"groups": [usage, one per pool, hosts]}``."""
    s = settings(options)
    d = _design(design)
    unknown = sorted(set(s["knees"]) - set(p["name"] for p in d["pools"]))
    if unknown:
        raise RulesError("knees: no pool %s in design %s" % (", ".join(unknown), d["name"]))
    groups = [OrderedDict([("name", "gpupool-%s-usage" % d["name"]), ("interval", s["interval"]),
                           ("rules", _usage_rules(s["latency_window"]))])]
    groups.extend(_pool_groups(d, s))
    groups.append(_driver_group(d, s))
    return OrderedDict([("groups", groups)])


def prometheus_rule(design, name="gpupool-rules", namespace="monitoring", labels=None, options=None):
    """The same groups as a Prometheus Operator PrometheusRule (monitoring.coreos.com/v1)."""
    if not re.match(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", name or ""):
        raise RulesError("name %r is not a Kubernetes object name" % (name,))
    if not re.match(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", namespace or ""):
        raise RulesError("namespace %r is not a Kubernetes namespace name" % (namespace,))
    meta_labels = OrderedDict([("app.kubernetes.io/managed-by", "gpupool.vcf")])
    meta_labels.update(labels or {})
    return OrderedDict([
        ("apiVersion", "monitoring.coreos.com/v1"),
        ("kind", "PrometheusRule"),
        ("metadata", OrderedDict([("name", name), ("namespace", namespace), ("labels", meta_labels)])),
        ("spec", rule_file(design, options)),
    ])


def rule_names(rules):
    """Every (group, record or alert name) of a rule file, for the docs and the tests."""
    return [(g["name"], r.get("record") or r.get("alert")) for g in rules["groups"] for r in g["rules"]]


__all__ = ["DEFAULTS", "DROPPED", "LATENCY_FAILURES", "LATENCY_P99", "LATENCY_SERIES", "POOL_LABEL", "RulesError",
           "prometheus_rule", "rule_file", "rule_names", "settings"]
