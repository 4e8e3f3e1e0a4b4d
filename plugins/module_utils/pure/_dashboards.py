# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The Grafana dashboards of a pool design, as plain data (pure: no I/O, no Grafana library).

``dashboards(design, options)`` returns one dashboard per pool and one for the platform, each a
mapping of ``uid``, ``title``, ``tags`` and ``panels``; a panel has a ``title``, a ``kind``
(``timeseries`` or ``stat``), a ``unit`` (Grafana's unit ids), ``targets`` (PromQL and legend) and
``thresholds`` ((value, colour) steps above the base colour). The filter ``grafana_dashboards``
turns this into Grafana's dashboard JSON with the Grafana Foundation SDK on the controller.

Every expression reads the recording rules of ``_prom_rules`` (the same names, the same pool
label) or the series they are made from (dcgm-exporter's field names, as NVIDIA's own
dcgm-exporter dashboard uses them; kube-state-metrics; Prometheus's ``ALERTS`` of the rules'
alerts). The thresholds are the design's: the pool's SLO bound on its wait, its knee (the one
the GpuPoolPastKnee alert uses) on its utilization, its GPU slots on its offered GPUs.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

# the rules' own helpers (wait series, knee, quoting), so a panel and its alert cannot disagree
# pylint: disable=protected-access
import hashlib
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback import ksm_label
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import pool_gpus
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import MANAGED_BY

GREEN, YELLOW, RED = "green", "yellow", "red"
# the series a dashboard may read besides the recording rules' (tests hold every expression to them)
SOURCE_SERIES = OrderedDict([
    ("dcgm-exporter", ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_FB_USED",
                       "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_VGPU_LICENSE_STATUS")),
    ("kube-state-metrics", ("kube_node_labels",)),
    ("Prometheus", ("ALERTS",)),
    ("the latency probe", tuple(_prom_rules.LATENCY_SERIES.values()) + (_prom_rules.LATENCY_FAILURES,)),
])
LATENCY_PANEL = "p99 time to first token and request latency"


def _q(value):
    return _prom_rules._quote(value)


def _uid(*parts):
    """Grafana's uid holds at most 40 characters: a longer one keeps its start and a hash of the whole."""
    uid = "-".join(parts)
    return uid if len(uid) <= 40 else uid[:31] + "-" + hashlib.sha256(uid.encode()).hexdigest()[:8]


def _panel(title, expr_legends, unit, kind="timeseries", thresholds=None, description="", max_value=None):
    """A panel; ``thresholds`` are (value, colour) steps: below the first the base colour is the
    other one (red under a floor such as the design's slots, green under a ceiling such as the SLO)."""
    steps = [(float(v), c) for v, c in (thresholds or [])]
    base = RED if steps and steps[0][1] == GREEN else GREEN
    return OrderedDict([
        ("title", title), ("kind", kind), ("unit", unit), ("description", description),
        ("targets", [OrderedDict([("expr", e), ("legend", leg)]) for e, leg in expr_legends]),
        ("base", base), ("thresholds", steps), ("max", max_value),
    ])


def _pool_panels(pool, s):
    name = pool["name"]
    sel = "{pool=%s}" % _q(name)
    _rules, wait, what, percentile = _prom_rules._wait_rules(pool, s)
    bound = (pool.get("slo") or {}).get("wait_seconds")
    knee, source = _prom_rules._pool_knee(pool, s)
    slots = pool_gpus(pool)
    pct = _prom_rules._num(percentile)
    panels = [
        _panel("p%s %s" % (pct, what), [("%s%s" % (wait, sel), "p%s wait" % pct)], "s",
               thresholds=[(bound, RED)] if bound is not None else [],
               description=("The SLO bound (%s s) is the red line; GpuPoolSloBurn fires past it." % _prom_rules._num(bound)
                            if bound is not None else "The pool has no SLO wait bound.")),
        _panel("SM active", [("pool:gpupool_sm_active:avg%s" % sel, "SM active")], "percentunit", max_value=1,
               description="DCGM_FI_PROF_SM_ACTIVE averaged over the pool's GPUs (a DCP profiling field)."),
        _panel("DRAM active", [("pool:gpupool_dram_active:avg%s" % sel, "DRAM active")], "percentunit", max_value=1,
               description="DCGM_FI_PROF_DRAM_ACTIVE averaged over the pool's GPUs (a DCP profiling field)."),
        _panel("Framebuffer used", [("pool:gpupool_fb_used_mib:sum%s" % sel, "framebuffer used")], "mbytes",
               description="DCGM_FI_DEV_FB_USED (MiB) summed over the pool's GPUs."),
        _panel("GPU-hours per tenant and profile (last hour)",
               [("sum by (namespace, profile) (namespace_pool_profile:gpupool_gpu_hours:1h%s)" % sel,
                 "{{namespace}} {{profile}}")], "short",
               description="The GPUs each tenant namespace held per vGPU profile, averaged over an hour: GPU-hours per hour."),
        _panel("GPU slots offered", [("pool:gpupool_gpus_capacity:sum%s" % sel, "offered")], "short", kind="stat",
               thresholds=[(slots, GREEN)], description="Allocatable GPUs of the pool's nodes; red below the design's %d slots." % slots),
        _panel("Spare GPU slots",
               [("pool:gpupool_gpus_capacity:sum%s - on (pool) (pool:gpupool_gpus_allocated:sum%s or pool:gpupool_gpus_capacity:sum%s * 0)"
                 % (sel, sel, sel), "spare")], "short", kind="stat", thresholds=[(1, GREEN)],
               description="Offered GPUs not allocated to a pod; red at none left."),
        _panel("Allocated share of the pool vs its knee", [("pool:gpupool_utilization:ratio%s" % sel, "allocated")], "percentunit",
               thresholds=[(knee, RED)] if knee is not None else [], max_value=1,
               description=("The knee (%s %%, %s) is the red line; GpuPoolPastKnee fires past it."
                            % (_prom_rules._num(knee * 100), source) if knee is not None else source)),
    ]
    if pool["shape"] == "inference" or (pool.get("slo") or {}).get("first_token_seconds") is not None:
        # the latency first, SM active beside it in the same row (two timeseries a row), the wait below
        panels.insert(0, _latency_panel(pool))
        panels[1], panels[2] = panels[2], panels[1]
    return panels


def _latency_panel(pool):
    sel = "{pool=%s}" % _q(pool["name"])
    bound = (pool.get("slo") or {}).get("first_token_seconds")
    return _panel(
        LATENCY_PANEL, [("%s%s" % (_prom_rules.LATENCY_P99["first_token"], sel), "p99 time to first token"),
                        ("%s%s" % (_prom_rules.LATENCY_P99["request"], sel), "p99 request")], "s",
        thresholds=[(bound, RED)] if bound is not None else [],
        description=("The latency probe's streaming completions (docs/gpu-metrics.md); the SLO bound on the time to "
                     "first token (%s s) is the red line, GpuPoolFirstTokenSlo fires past it." % _prom_rules._num(bound)
                     if bound is not None else
                     "The latency probe's streaming completions (docs/gpu-metrics.md); the pool has no latency bound "
                     "(slo.first_token_seconds)."))


def _platform_panels():
    driver = ksm_label(_prom_rules.HOST_DRIVER_LABEL)
    return [
        _panel("Allocated share per pool", [("pool:gpupool_utilization:ratio", "{{pool}}")], "percentunit", max_value=1),
        _panel("GPUs allocated and offered per pool", [("pool:gpupool_gpus_allocated:sum", "{{pool}} allocated"),
                                                       ("pool:gpupool_gpus_capacity:sum", "{{pool}} offered")], "short"),
        _panel("SM active per pool", [("pool:gpupool_sm_active:avg", "{{pool}}")], "percentunit", max_value=1),
        _panel("DRAM active per pool", [("pool:gpupool_dram_active:avg", "{{pool}}")], "percentunit", max_value=1),
        _panel("Framebuffer used per pool", [("pool:gpupool_fb_used_mib:sum", "{{pool}}")], "mbytes"),
        _panel("GPU-hours per tenant, pool and profile (last hour)",
               [("sum by (namespace, pool, profile) (namespace_pool_profile:gpupool_gpu_hours:1h)",
                 "{{namespace}} {{pool}} {{profile}}")], "short"),
        _panel("Unlicensed vGPUs", [("count(DCGM_FI_DEV_VGPU_LICENSE_STATUS == 0) or vector(0)", "unlicensed")], "short",
               kind="stat", thresholds=[(1, RED)], description="GPUs whose dcgm-exporter licence status is 0."),
        _panel("Host driver versions", [('count by (%s) (kube_node_labels{%s!=""})' % (driver, driver), "{{%s}}" % driver)],
               "short", kind="stat", description="GPU nodes per NVIDIA host driver version (node label %s)."
               % _prom_rules.HOST_DRIVER_LABEL),
        _panel("Firing GPU pool alerts", [('count by (alertname, pool) (ALERTS{alertstate="firing", alertname=~"Gpu.*"})',
                                           "{{alertname}} {{pool}}")], "short", kind="stat", thresholds=[(1, RED)]),
    ]


def dashboards(design, options=None):
    """One dashboard per pool and one for the platform (plain data; ``RulesError``/``DesignError`` on bad input)."""
    s = _prom_rules.settings(options)
    d = _prom_rules._design(design)
    unknown = sorted(set(s["knees"]) - set(p["name"] for p in d["pools"]))
    if unknown:
        raise _prom_rules.RulesError("knees: no pool %s in design %s" % (", ".join(unknown), d["name"]))
    tags = ["gpupool", d["name"]]
    out = [OrderedDict([("uid", _uid("gpupool", d["name"], "platform")), ("design", d["name"]), ("title", "GPU pools %s: platform" % d["name"]),
                        ("tags", tags), ("panels", _platform_panels())])]
    for pool in d["pools"]:
        out.append(OrderedDict([
            ("uid", _uid("gpupool", d["name"], pool["name"])), ("design", d["name"]),
            ("title", "GPU pool %s/%s (%s)" % (d["name"], pool["name"], pool["shape"])),
            ("tags", tags + [pool["name"]]), ("panels", _pool_panels(pool, s))]))
    return out


def config_map(board, text, namespace="monitoring", label="grafana_dashboard", label_value="1"):
    """The ConfigMap Grafana's dashboard sidecar reads (``label: label_value``), ``text`` the dashboard's JSON."""
    for what, value in (("namespace", namespace), ("label", label), ("label value", label_value)):
        if not isinstance(value, str) or not value or len(value) > 253:
            raise _prom_rules.RulesError("the dashboards' ConfigMap %s %r is not a non-empty string" % (what, value))
    if not re.match(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", namespace):
        raise _prom_rules.RulesError("namespace %r is not a Kubernetes namespace name" % (namespace,))
    labels = OrderedDict(MANAGED_BY)
    labels["gpupool.vcf/design"] = board["design"]
    labels[label] = label_value
    return OrderedDict([
        ("apiVersion", "v1"), ("kind", "ConfigMap"),
        ("metadata", OrderedDict([("name", board["uid"]), ("namespace", namespace), ("labels", labels)])),
        ("data", OrderedDict([("%s.json" % board["uid"], text)])),
    ])


def expressions(boards):
    """Every (dashboard uid, panel title, PromQL) of ``dashboards()``, for the docs and the tests."""
    return [(b["uid"], p["title"], t["expr"]) for b in boards for p in b["panels"] for t in p["targets"]]


__all__ = ["SOURCE_SERIES", "config_map", "dashboards", "expressions"]
