# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU-hours per tenant, pool and vGPU profile, priced from the design (pure: no I/O).

What is counted (docs/chargeback.md explains it with an example):

* **allocation**: the GPUs a Running pod's containers request, from kube-state-metrics
  (``kube_pod_container_resource_requests`` with resource ``nvidia_com_gpu``,
  ``nvidia_com_gpu_shared`` or ``nvidia_com_mig_<profile>``), joined on ``node`` to the node's
  pool and vGPU profile labels on ``kube_node_labels`` (kube-state-metrics must allow them:
  ``--metric-labels-allowlist=nodes=[gpupool.vcf/pool,nvidia.com/vgpu.profile]``);
* GPU-hours = the sum of the allocation sampled every ``step`` seconds over the period (a
  subquery ``sum_over_time(<allocation>[<period>:<step>])``), times ``step / 3600``: each sample
  stands for the ``step`` seconds before it;
* **efficiency** from dcgm-exporter, per tenant, pool and profile: the mean of
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` over the pods' GPU samples, and framebuffer used over
  framebuffer in all (``DCGM_FI_DEV_FB_USED`` / (``_FB_USED`` + ``_FB_FREE``)), joined to the
  node by the ``Hostname`` label;
* **price** of one unit of a row: the design's ``chargeback.profile_hour`` of the pool's profile,
  or ``card_hour`` of the cluster's GPU model times the profile's share of the card
  (1 / how many of the profile one card holds), divided by the pool's guest time-slicing
  replicas (a replica is a share of the node's vGPU).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import calendar
import datetime
import fnmatch
import html
import math
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import POOL_LABEL, PROFILE_LABEL
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    NvidiaError,
    gpu_model,
    gpu_model_for_stem,
    parse_profile,
    vgpu_mig_profile,
)

GPU_RESOURCES = r"nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"
KEY = ("namespace", "pool", "profile", "resource")
EFFICIENCY_KEY = ("namespace", "pool", "profile")
NONE = "(none)"
# digits kept in the report: Prometheus sums floats in no fixed order, so the last bits of a
# sum differ between two evaluations of the same data; 1e-9 GPU-hours is 3.6 microseconds
DIGITS = 9
CSV_COLUMNS = ("namespace", "pool", "profile", "resource", "gpu_hours", "engine_active", "fb_used_ratio",
               "unit_price", "cost", "currency", "kind")
# the resource pool under which vSphere keeps one resource pool per vSphere Namespace
NAMESPACES_POOL = "Namespaces"
VM_RESOURCE = "vgpu-vm"
# power events that start and end a VM's hold on its vGPUs (a suspended VM releases them)
VM_ON_EVENTS = ("VmPoweredOnEvent", "DrsVmPoweredOnEvent")
VM_OFF_EVENTS = ("VmPoweredOffEvent", "VmSuspendedEvent")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_MIG_RESOURCE = re.compile(r"^nvidia_com_mig_(\d+)g_(\d+)gb(_me)?$")


class ChargebackError(ValueError):
    """Bad input to the chargeback computation (a period, a price table)."""


# ---------------------------------------------------------------------------------------
# time
# ---------------------------------------------------------------------------------------

def parse_duration(text):
    """Seconds of a Prometheus-style duration (``30d``, ``1h30m``, ``90s``; a number is seconds)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    value = str(text).strip()
    if re.match(r"^\d+(\.\d+)?$", value):
        return float(value)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(value) or not value:
        raise ChargebackError("%r is not a duration; write it as 30d, 12h, 90m, 1h30m or a number of seconds" % (text,))
    return total


def parse_time(text, now):
    """Unix seconds of ``now``, ``now-<duration>``, an ISO 8601 UTC time or a Unix time."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    value = str(text).strip()
    if value == "now":
        return float(now)
    if value.startswith("now-"):
        return float(now) - parse_duration(value[4:])
    if re.match(r"^\d+(\.\d+)?$", value):
        return float(value)
    iso = value[:-1] + "+00:00" if value.endswith("Z") else value
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M%z", "%Y-%m-%d"):
        try:
            parsed = datetime.datetime.strptime(iso.replace("+00:00", "+0000"), fmt)
        except ValueError:
            continue
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return calendar.timegm(parsed.utctimetuple())
    raise ChargebackError("%r is not a time; write now, now-30d, 2026-11-01, 2026-11-01T00:00:00Z or Unix seconds"
                          % (text,))


def iso(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def period(start, end, step):
    """Checked (start, end, step) in seconds; the period must hold at least one step."""
    if step <= 0:
        raise ChargebackError("step must be more than 0 seconds, not %s" % step)
    if end <= start:
        raise ChargebackError("the period ends (%s) before it starts (%s)" % (iso(end), iso(start)))
    if end - start < step:
        raise ChargebackError("the period (%d s) is shorter than one step (%d s)" % (end - start, step))
    return start, end, step


# ---------------------------------------------------------------------------------------
# PromQL
# ---------------------------------------------------------------------------------------

def ksm_label(name):
    """The label kube-state-metrics gives a Kubernetes label on ``kube_*_labels``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


def node_pools(pool_label=POOL_LABEL, profile_label=PROFILE_LABEL):
    """Every node with its ``pool`` and ``profile`` (from kube_node_labels)."""
    return ('max by (node, pool, profile) (label_replace(label_replace(kube_node_labels, "pool", "$1", "%s", "(.*)"), '
            '"profile", "$1", "%s", "(.*)"))' % (ksm_label(pool_label), ksm_label(profile_label)))


def allocation(by=KEY, pool_label=POOL_LABEL, profile_label=PROFILE_LABEL):
    """GPUs requested by Running pods, by ``by``, with the node's pool and profile."""
    return ('sum by (%s) (kube_pod_container_resource_requests{resource=~"%s"} '
            '* on (namespace, pod) group_left () max by (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1) '
            '* on (node) group_left (pool, profile) %s)'
            % (", ".join(by), GPU_RESOURCES, node_pools(pool_label, profile_label)))


def dcgm(metric, pool_label=POOL_LABEL, profile_label=PROFILE_LABEL):
    """A dcgm-exporter metric of the pods' GPUs with the node's pool and profile (joined by Hostname)."""
    return ('(label_replace(%s{pod!=""}, "node", "$1", "Hostname", "(.*)") '
            '* on (node) group_left (pool, profile) %s)' % (metric, node_pools(pool_label, profile_label)))


def over(expr, window, step):
    """The sum of ``expr`` sampled every ``step`` s over the ``window`` s before the evaluation time."""
    return "sum_over_time((%s)[%ds:%ds])" % (expr, int(window), int(step))


def queries(window, step, pool_label=POOL_LABEL, profile_label=PROFILE_LABEL):
    """The instant queries of one report, evaluated at the end of the period."""
    by = ", ".join(EFFICIENCY_KEY)
    eng = dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", pool_label, profile_label)
    used = dcgm("DCGM_FI_DEV_FB_USED", pool_label, profile_label)
    free = dcgm("DCGM_FI_DEV_FB_FREE", pool_label, profile_label)
    return OrderedDict([
        ("allocation", over(allocation(KEY, pool_label, profile_label), window, step)),
        ("engine_sum", over("sum by (%s) (%s)" % (by, eng), window, step)),
        ("engine_count", over("count by (%s) (%s)" % (by, eng), window, step)),
        ("fb_used", over("sum by (%s) (%s)" % (by, used), window, step)),
        ("fb_total", over("sum by (%s) (%s + %s)" % (by, used, free), window, step)),
    ])


def buckets(start, end, step, count=48):
    """(bucket seconds, first end, last end) of the chart: at most ``count`` buckets, each a
    whole number of steps."""
    steps = max(1, int(math.ceil((end - start) / float(step) / count)))
    size = steps * step
    return size, start + size, end


def chart_query(size, step, pool_label=POOL_LABEL, profile_label=PROFILE_LABEL):
    return over(allocation(("namespace",), pool_label, profile_label), size, step)


# ---------------------------------------------------------------------------------------
# prices
# ---------------------------------------------------------------------------------------

def profile_share(profile_name, model_name):
    """(share of the card, how many of the profile one card holds) for a vGPU profile on a model."""
    model = gpu_model(model_name)
    profile = parse_profile(profile_name)
    if profile.mig_backed:
        per_card = vgpu_mig_profile(profile.name, model).max_instances
    else:
        per_card = max(1, model.memory_gb // profile.framebuffer_gb)
    return 1.0 / per_card, per_card


def price_table(design):
    """Prices per pool of a normalized design: ``{currency, pools: {pool: {...}}, profiles: {...}}``,
    or None when the design has no ``chargeback`` block."""
    cb = design.get("chargeback")
    if not cb:
        return None
    models = dict((c["name"], (c.get("gpu") or {}).get("model")) for c in design.get("clusters") or [])
    given = dict((parse_profile(k).vsphere_name, float(v)) for k, v in (cb.get("profile_hour") or {}).items())
    card = dict((gpu_model(k).name, float(v)) for k, v in (cb.get("card_hour") or {}).items())
    pools = OrderedDict()
    for pool in design.get("pools") or []:
        profile = parse_profile(pool["vgpu_profile"]).vsphere_name
        model = models.get(pool.get("cluster"))
        entry = OrderedDict([("profile", profile), ("gpu_model", model), ("share", None), ("per_card", None),
                             ("profile_price", None), ("source", None)])
        if model:
            try:
                entry["share"], entry["per_card"] = profile_share(profile, model)
            except NvidiaError as exc:
                raise ChargebackError("pool %s: %s" % (pool["name"], exc))
        if profile in given:
            entry["profile_price"], entry["source"] = given[profile], "profile_hour"
        elif model and gpu_model(model).name in card:
            entry["profile_price"] = card[gpu_model(model).name] * entry["share"]
            entry["source"] = "card_hour %s x 1/%d" % (gpu_model(model).name, entry["per_card"])
        replicas = (pool.get("guest_time_slicing") or {}).get("replicas") or 1
        entry["replicas"] = replicas
        entry["unit_price"] = None if entry["profile_price"] is None else entry["profile_price"] / replicas
        pools[pool["name"]] = entry
    return OrderedDict([("currency", cb.get("currency") or "USD"), ("pools", pools), ("profiles", given),
                        ("card", card)])


def profile_price(profile_name, table):
    """(price of one hour of a vGPU profile held whole, where it comes from) or (None, reason):
    the design's ``profile_hour``, else ``card_hour`` of the profile's GPU model times its share."""
    if not table:
        return None, "no chargeback prices in the design"
    try:
        profile = parse_profile(profile_name)
    except NvidiaError:
        return None, "%s is not a vGPU profile name" % profile_name
    if profile.vsphere_name in table["profiles"]:
        return table["profiles"][profile.vsphere_name], "profile_hour"
    model = gpu_model_for_stem(profile.gpu)
    if model is not None and model.name in (table.get("card") or {}):
        try:
            share, per_card = profile_share(profile.vsphere_name, model.name)
        except NvidiaError as exc:
            return None, "%s" % exc
        return table["card"][model.name] * share, "card_hour %s x 1/%d" % (model.name, per_card)
    return None, "no price for profile %s" % profile.vsphere_name


def unit_price(row, table):
    """(price of one unit-hour of the row's resource, where it comes from) or (None, reason)."""
    if not table:
        return None, "no chargeback prices in the design"
    entry = table["pools"].get(row["pool"])
    if entry is not None and entry["unit_price"] is not None:
        return entry["unit_price"], entry["source"]
    try:
        profile = parse_profile(row["profile"]).vsphere_name
    except NvidiaError:
        profile = None
    if profile in table["profiles"]:
        return table["profiles"][profile], "profile_hour"
    return None, "no price for pool %s, profile %s" % (row["pool"], row["profile"])


# ---------------------------------------------------------------------------------------
# vGPU VMs outside Kubernetes (from vSphere)
# ---------------------------------------------------------------------------------------

def on_seconds(transitions, powered_on_now, start, end, boot_time=None):
    """Seconds a VM was powered on within [start, end].

    ``transitions``: its power events from ``start`` until now as (unix time, True for on /
    False for off); ``powered_on_now``: its power state when they were read; ``boot_time``: its
    ``runtime.bootTime`` (unix), used only when no event is left (vCenter keeps events for a
    limited time): a VM on now with no event since ``start`` was on the whole period, or from its
    boot time when that is later.
    """
    trans = sorted((t, bool(on)) for t, on in transitions if t >= start)
    if not trans:
        if not powered_on_now:
            return 0.0
        since = start if boot_time is None else max(start, boot_time)
        return max(0.0, end - since)
    # before the first event the VM was in the other state
    state, cursor, total = not trans[0][1], start, 0.0
    for t, on in trans:
        if t >= end:
            break
        if state:
            total += t - cursor
        state, cursor = on, t
    if state:
        total += end - cursor
    return total


def vsphere_namespace(pool_moid, pools):
    """The vSphere Namespace of a VM's resource pool: the pool under the ``Namespaces`` pool on
    its path up (``pools``: moid -> (name, parent moid or None)), else None."""
    seen = set()
    current = pool_moid
    while current in pools and current not in seen:
        seen.add(current)
        name, parent = pools[current]
        if parent in pools and pools[parent][0] == NAMESPACES_POOL:
            return name
        current = parent
    return None


def vm_usage(vms, pools, transitions, start, end, table=None, exclude=()):
    """vGPU VM-hours per vSphere Namespace and vGPU profile.

    ``vms``: dicts with ``moid``, ``name``, ``resource_pool`` (moid), ``powered_on`` (bool),
    ``boot_time`` (unix or None) and ``profiles`` (one entry per vGPU device); ``pools``: moid ->
    (name, parent moid); ``transitions``: VM moid -> [(unix time, on)]; ``exclude``: names (or
    shell patterns) of VMs left out: the nodes of Kubernetes clusters, whose GPUs are counted
    through their pods.
    Returns (per-VM records, rows, names of the VMs left out)."""
    exclude = list(exclude)
    records, left_out, agg = [], [], OrderedDict()
    for vm in sorted(vms, key=lambda v: v["name"]):
        if not vm.get("profiles"):
            continue
        if any(fnmatch.fnmatchcase(vm["name"], pattern) for pattern in exclude):
            left_out.append(vm["name"])
            continue
        seconds = on_seconds(transitions.get(vm["moid"]) or [], vm["powered_on"], start, end, vm.get("boot_time"))
        namespace = vsphere_namespace(vm.get("resource_pool"), pools) or NONE
        records.append(OrderedDict([("name", vm["name"]), ("namespace", namespace),
                                    ("profiles", sorted(vm["profiles"])), ("on_hours", _round(seconds / 3600.0)),
                                    ("powered_on", bool(vm["powered_on"]))]))
        for profile in vm["profiles"]:
            row = agg.setdefault((namespace, profile), OrderedDict([
                ("namespace", namespace), ("profile", profile), ("vms", set()), ("vgpu_seconds", 0.0)]))
            row["vms"].add(vm["name"])
            row["vgpu_seconds"] += seconds
    out = []
    currency = table["currency"] if table else None
    for key in sorted(agg):
        a = agg[key]
        price, source = profile_price(a["profile"], table)
        hours = _round(a["vgpu_seconds"] / 3600.0)
        out.append(OrderedDict([("namespace", a["namespace"]), ("profile", a["profile"]), ("vms", len(a["vms"])),
                                ("vgpu_hours", hours), ("unit_price", price), ("price_source", source),
                                ("cost", None if price is None else _round(hours * price)), ("currency", currency)]))
    return records, out, sorted(left_out)


def design_reservations(design):
    """The reserved VM classes of a normalized design: ``[{tenant, vm_class, zone, count, profiles}]``, the
    tenant by its namespace, ``profiles`` the class's vGPUs (the pool's profile, once per GPU of a node)."""
    pools = dict((p.get("name"), p) for p in (design or {}).get("pools") or [])
    out = []
    for tenant in (design or {}).get("tenants") or []:
        for r in tenant.get("vm_reservations") or []:
            pool = pools.get(r.get("pool"))
            if pool is None:
                continue
            out.append(OrderedDict([
                ("tenant", tenant.get("namespace") or tenant.get("name")), ("vm_class", pool["vm_class"]["name"]),
                ("zone", r["zone"]), ("count", r["count"]),
                ("profiles", [pool["vgpu_profile"]] * (pool.get("gpus_per_node") or 1))]))
    return out


def reserved_idle(reservations, records, table=None):
    """Reserved-but-idle VM class slots per tenant at the end of the period (``_vm_reservations.reserved_idle``).

    ``reservations``: :func:`design_reservations`; ``records``: the vGPU VMs ``vm_usage`` counted, or None
    when vCenter was not read (then ``used`` and ``idle`` are None: unknown). A VM uses a slot of a class when
    it is powered on in the tenant's vSphere Namespace with the class's vGPU profiles (vCenter does not name
    a VM's class on the VM; its zone is not read, so it takes the tenant's first zone of the class with
    room). ``idle_hour_cost``: what the idle slots' vGPUs cost an hour at the profile's price (null without
    one): the price of capacity held for the tenant and not used."""
    if not reservations:
        return []
    profiles = dict((r["vm_class"], sorted(r["profiles"])) for r in reservations)
    running = None
    if records is not None:
        running = [dict(tenant=v["namespace"], vm_class=c, zone=None)
                   for v in records if v.get("powered_on") for c, want in sorted(profiles.items())
                   if sorted(v.get("profiles") or []) == want]
    rows_out = []
    for row in _vm_reservations.reserved_idle(reservations, running or []):
        row = OrderedDict(row)
        if running is None:
            row["used"] = row["idle"] = None
        price, _source = profile_price(profiles[row["vm_class"]][0], table) if table else (None, None)
        row["idle_hour_cost"] = (None if price is None or row["idle"] is None
                                 else _round(price * len(profiles[row["vm_class"]]) * row["idle"]))
        rows_out.append(row)
    return rows_out


def node_names(vector):
    """The node names of an instant vector with a ``node`` label (the Kubernetes nodes seen)."""
    return sorted(set(s["metric"]["node"] for s in vector or [] if s["metric"].get("node")))


def nodes_query(window):
    """Every Kubernetes node kube-state-metrics reported within the ``window`` seconds."""
    return "count by (node) (last_over_time(kube_node_info[%ds]))" % int(window)


def add_vms(rep, records, vm_rows, left_out):
    """The report with the vGPU VMs outside Kubernetes (``vm_usage``) added."""
    rep = OrderedDict(rep)
    rep["vgpu_vms"] = records
    rep["vm_rows"] = vm_rows
    rep["vms_left_out"] = left_out
    rep["vm_by_namespace"] = _vm_totals(vm_rows, "namespace")
    rep["vm_by_profile"] = _vm_totals(vm_rows, "profile")
    rep["vgpu_vm_hours"] = _round(sum((r["vgpu_hours"] for r in vm_rows), 0.0))
    priced = [r["cost"] for r in vm_rows if r["cost"] is not None]
    rep["vm_cost"] = _round(sum(priced, 0.0)) if rep.get("prices") else None
    return rep


def _vm_totals(vm_rows, by):
    out = OrderedDict()
    for r in vm_rows:
        t = out.setdefault(r[by], OrderedDict([(by, r[by]), ("vgpu_hours", 0.0), ("cost", None)]))
        t["vgpu_hours"] = _round(t["vgpu_hours"] + r["vgpu_hours"])
        if r["cost"] is not None:
            t["cost"] = _round((t["cost"] or 0.0) + r["cost"])
    return list(out.values())


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------

def resource_name(ksm_resource):
    """The Kubernetes resource name of a kube-state-metrics resource label."""
    m = _MIG_RESOURCE.match(ksm_resource or "")
    if m:
        return "nvidia.com/mig-%sg.%sgb%s" % (m.group(1), m.group(2), "+me" if m.group(3) else "")
    return {"nvidia_com_gpu": "nvidia.com/gpu", "nvidia_com_gpu_shared": "nvidia.com/gpu.shared"}.get(
        ksm_resource, ksm_resource)


def _value(sample):
    v = float(sample["value"][1])
    return 0.0 if math.isnan(v) else v


def _round(value):
    return None if value is None else round(value, DIGITS)


def _key(metric, key):
    return tuple(metric.get(k) or NONE for k in key)


def rows(results, step, table=None):
    """Report rows from the answers of ``queries()`` (name -> instant vector)."""
    eff = {}
    for name in ("engine_sum", "engine_count", "fb_used", "fb_total"):
        for s in results.get(name) or []:
            eff.setdefault(_key(s["metric"], EFFICIENCY_KEY), {})[name] = _value(s)
    out = []
    currency = table["currency"] if table else None
    for s in results.get("allocation") or []:
        k = _key(s["metric"], KEY)
        row = OrderedDict(zip(KEY, k))
        row["resource"] = resource_name(row["resource"])
        row["gpu_hours"] = _round(_value(s) * step / 3600.0)
        e = eff.get(k[:3], {})
        row["engine_active"] = _round(e["engine_sum"] / e["engine_count"]) if e.get("engine_count") else None
        row["fb_used_ratio"] = _round(e["fb_used"] / e["fb_total"]) if e.get("fb_total") else None
        price, source = unit_price(row, table)
        row["unit_price"] = price
        row["price_source"] = source
        row["cost"] = None if price is None else _round(row["gpu_hours"] * price)
        row["currency"] = currency
        out.append(row)
    out.sort(key=lambda r: (r["namespace"], r["pool"], r["profile"], r["resource"]))
    return out


def totals(report_rows, by):
    """GPU-hours and cost summed by one column (``namespace``, ``pool`` or ``profile``)."""
    out = OrderedDict()
    for r in report_rows:
        t = out.setdefault(r[by], OrderedDict([(by, r[by]), ("gpu_hours", 0.0), ("cost", None)]))
        t["gpu_hours"] = _round(t["gpu_hours"] + r["gpu_hours"])
        if r["cost"] is not None:
            t["cost"] = _round((t["cost"] or 0.0) + r["cost"])
    return list(out.values())


def series(matrix):
    """Chart series from the range answer of ``chart_query``: {namespace: [(t, GPU-hours), ...]}
    (values still in samples; ``report`` scales them)."""
    out = OrderedDict()
    for s in sorted(matrix or [], key=lambda s: s["metric"].get("namespace") or NONE):
        out[s["metric"].get("namespace") or NONE] = [(float(t), float(v)) for t, v in s["values"]]
    return out


def report(results, matrix, start, end, step, bucket, table=None, vms=None, reservations=None):
    """The whole report (JSON-ready). ``vms``: what ``vm_usage`` returned, when vSphere was read;
    ``reservations``: :func:`design_reservations` (the reserved-but-idle slots per tenant)."""
    rep = _pod_report(results, matrix, start, end, step, bucket, table)
    rep["vms_read"] = vms is not None
    rep = add_vms(rep, *(vms or ([], [], [])))
    rep["total_cost"] = (_round((rep["cost"] or 0.0) + (rep["vm_cost"] or 0.0)) if table else None)
    rep["reserved_idle"] = reserved_idle(reservations, vms[0] if vms is not None else None, table)
    return rep


def _pod_report(results, matrix, start, end, step, bucket, table):
    report_rows = rows(results, step, table)
    scale = step / 3600.0
    return OrderedDict([
        ("start", iso(start)), ("end", iso(end)), ("step_s", step), ("bucket_s", bucket),
        ("currency", table["currency"] if table else None),
        ("rows", report_rows),
        ("by_tenant", totals(report_rows, "namespace")),
        ("by_pool", totals(report_rows, "pool")),
        ("by_profile", totals(report_rows, "profile")),
        ("gpu_hours", _round(sum((r["gpu_hours"] for r in report_rows), 0.0))),
        ("cost", _round(sum(r["cost"] for r in report_rows if r["cost"] is not None)) if table else None),
        ("timeline", OrderedDict((ns, [[iso(t), _round(v * scale)] for t, v in pts])
                                 for ns, pts in series(matrix).items())),
        ("prices", table),
    ])


def _fmt(value, digits=4):
    if value is None:
        return ""
    return ("%%.%df" % digits) % value


def csv_text(rep):
    """The rows as CSV (RFC 4180 quoting where needed)."""
    def cell(v):
        text = _fmt(v) if isinstance(v, float) else ("" if v is None else str(v))
        return '"%s"' % text.replace('"', '""') if any(c in text for c in ',"\n') else text
    lines = [",".join(CSV_COLUMNS)]
    for r in rep["rows"]:
        lines.append(",".join(cell(dict(r, kind="pod").get(c)) for c in CSV_COLUMNS))
    for r in rep.get("vm_rows") or []:
        vm = dict(r, pool="", resource=VM_RESOURCE, gpu_hours=r["vgpu_hours"], kind="vm")
        lines.append(",".join(cell(vm.get(c)) for c in CSV_COLUMNS))
    return "\r\n".join(lines) + "\r\n"


PALETTE = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5", "#9c6b4e", "#9498a0")


def _esc(text):
    return html.escape("%s" % text, quote=True)


def _stacked_bars(chart_id, title, groups, items, unit, width=720, bar_height=22):
    """Inline SVG of horizontal bars, one per group, stacked by segment. ``groups``: (name,
    total) in order; ``items``: (group, segment, value, label) with value > 0 drawn as one
    ``rect.bar`` each."""
    segments = []
    for it in items:
        if it[1] not in segments:
            segments.append(it[1])
    color = dict((p, PALETTE[i % len(PALETTE)]) for i, p in enumerate(sorted(segments)))
    top = max([g[1] for g in groups] or [0]) or 1.0
    left, right = 160, 90
    plot = width - left - right
    height = 30 + len(groups) * (bar_height + 10) + 24 * int(math.ceil(len(segments) / 3.0)) + 10
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="%s" role="img" '
           'width="%d" height="%d" viewBox="0 0 %d %d">' % (chart_id, width, height, width, height),
           '<title>%s</title>' % _esc(title)]
    y = 20
    for group, total in groups:
        x = left
        out.append('<text x="%d" y="%d" text-anchor="end" font-size="12">%s</text>'
                   % (left - 8, y + bar_height * 0.7, _esc(group)))
        for g, segment, value, label in items:
            if g != group or value <= 0:
                continue
            w = plot * value / top
            out.append('<rect class="bar" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" data-group="%s" '
                       'data-segment="%s" data-value="%.9g"><title>%s: %.3f %s</title></rect>'
                       % (x, y, w, bar_height, color[segment], _esc(group), _esc(segment), value,
                          _esc(label), value, _esc(unit)))
            x += w
        out.append('<text x="%.1f" y="%d" font-size="12">%.2f</text>' % (x + 6, y + bar_height * 0.7, total))
        y += bar_height + 10
    y += 6
    for i, p in enumerate(segments):
        lx, ly = left + (i % 3) * 180, y + (i // 3) * 24
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d" font-size="12">%s</text>'
                   % (lx, ly, color[p], lx + 18, ly + 11, _esc(p)))
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(rep):
    """Inline SVG: GPU-hours per tenant, stacked by vGPU profile (one bar per row with hours)."""
    return _stacked_bars(
        "chart-tenants", "GPU-hours per tenant and vGPU profile",
        [(t["namespace"], t["gpu_hours"]) for t in rep["by_tenant"]],
        [(r["namespace"], r["profile"], r["gpu_hours"], "%s %s %s" % (r["namespace"], r["profile"], r["resource"]))
         for r in rep["rows"]], "GPU-hours")


def vm_chart(rep):
    """Inline SVG: vGPU-hours of the VMs outside Kubernetes per vSphere Namespace, stacked by profile."""
    return _stacked_bars(
        "chart-vms", "vGPU-hours of VMs outside Kubernetes per vSphere Namespace and profile",
        [(t["namespace"], t["vgpu_hours"]) for t in rep.get("vm_by_namespace") or []],
        [(r["namespace"], r["profile"], r["vgpu_hours"], "%s %s (%d VMs)" % (r["namespace"], r["profile"], r["vms"]))
         for r in rep.get("vm_rows") or []], "vGPU-hours")


def timeline_chart(rep, width=720, height=260):
    """Inline SVG: GPU-hours per bucket, one line per tenant."""
    lines = rep["timeline"]
    points = [pt[1] for pts in lines.values() for pt in pts]
    top = max(points or [0]) or 1.0
    left, bottom, top_pad, right = 60, 30, 16, 140
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    times = sorted(set(pt[0] for pts in lines.values() for pt in pts))
    idx = dict((t, i) for i, t in enumerate(times))
    span = max(1, len(times) - 1)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-timeline" role="img" '
           'width="%d" height="%d" viewBox="0 0 %d %d">' % (width, height, width, height),
           '<title>GPU-hours per %s s, per tenant</title>' % rep["bucket_s"],
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (left, top_pad + plot_h, left + plot_w, top_pad + plot_h),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>' % (left, top_pad, left, top_pad + plot_h),
           '<text x="%d" y="%d" font-size="11" text-anchor="end">%.3g</text>' % (left - 4, top_pad + 10, top),
           '<text x="%d" y="%d" font-size="11" text-anchor="end">0</text>' % (left - 4, top_pad + plot_h)]
    if times:
        out.append('<text x="%d" y="%d" font-size="11">%s</text>' % (left, height - 8, _esc(times[0])))
        out.append('<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>'
                   % (left + plot_w, height - 8, _esc(times[-1])))
    for i, (ns, pts) in enumerate(lines.items()):
        xy = " ".join("%.1f,%.1f" % (left + plot_w * idx[t] / span, top_pad + plot_h * (1 - v / top)) for t, v in pts)
        out.append('<polyline class="line" data-tenant="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                   % (_esc(ns), PALETTE[i % len(PALETTE)], xy))
        out.append('<text x="%d" y="%d" font-size="12" fill="%s">%s</text>'
                   % (left + plot_w + 8, top_pad + 14 + 16 * i, PALETTE[i % len(PALETTE)], _esc(ns)))
    out.append("</svg>")
    return "\n".join(out)


def html_text(rep, title="GPU usage and chargeback"):
    """A self-contained HTML page: totals, the charts (inline SVG) and every row."""
    cur = rep["currency"] or ""

    def table(head, body):
        return ("<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>"
                % ("".join("<th>%s</th>" % _esc(h) for h in head),
                   "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _esc(c) for c in row) for row in body)))

    def pct(v):
        return "" if v is None else "%.1f %%" % (100 * v)

    rows_html = table(("tenant", "pool", "profile", "resource", "GPU-hours", "engine active", "framebuffer used",
                       "price / hour", "cost"),
                      [(r["namespace"], r["pool"], r["profile"], r["resource"], "%.3f" % r["gpu_hours"],
                        pct(r["engine_active"]), pct(r["fb_used_ratio"]),
                        "" if r["unit_price"] is None else "%.4f %s" % (r["unit_price"], cur),
                        "" if r["cost"] is None else "%.2f %s" % (r["cost"], cur)) for r in rep["rows"]])
    sums = "".join("<h3>per %s</h3>%s" % (word, table((word, "GPU-hours", "cost"), [
        (t[col], "%.3f" % t["gpu_hours"], "" if t["cost"] is None else "%.2f %s" % (t["cost"], cur))
        for t in rep[key]])) for word, key, col in (("tenant", "by_tenant", "namespace"), ("pool", "by_pool", "pool"),
                                                    ("vGPU profile", "by_profile", "profile")))
    vms = ""
    if rep.get("vms_read"):
        vm_rows = table(("vSphere Namespace", "vGPU profile", "VMs", "vGPU-hours", "price / hour", "cost"),
                        [(r["namespace"], r["profile"], r["vms"], "%.3f" % r["vgpu_hours"],
                          "" if r["unit_price"] is None else "%.4f %s" % (r["unit_price"], cur),
                          "" if r["cost"] is None else "%.2f %s" % (r["cost"], cur)) for r in rep["vm_rows"]])
        vms = ("<h2>vGPU VMs outside Kubernetes</h2>\n<p class=\"total\">%.3f vGPU-hours%s</p>\n%s\n%s"
               % (rep["vgpu_vm_hours"], "" if rep["vm_cost"] is None else ", %.2f %s" % (rep["vm_cost"], _esc(cur)),
                  vm_chart(rep), vm_rows))
        if rep.get("vms_left_out"):
            vms += "<p>Left out as Kubernetes nodes (counted through their pods): %s</p>" % _esc(
                ", ".join(rep["vms_left_out"]))
    return """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%(title)s</title>
<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f3f3f3}
.total{font-size:1.2em}</style></head>
<body><h1>%(title)s</h1>
<p>%(start)s to %(end)s, sampled every %(step)s s.</p>
<p class="total">%(hours).3f GPU-hours%(cost)s</p>
<h2>GPU-hours per tenant and vGPU profile</h2>
%(bars)s
<h2>GPU-hours over time</h2>
%(timeline)s
<h2>Totals</h2>
%(sums)s
<h2>Every row</h2>
%(rows)s
%(vms)s
</body></html>
""" % dict(vms=vms, title=_esc(title), start=rep["start"], end=rep["end"], step=_fmt(rep["step_s"], 0), hours=rep["gpu_hours"],
           cost="" if rep["cost"] is None else ", %.2f %s" % (rep["cost"], _esc(cur)),
           bars=bar_chart(rep), timeline=timeline_chart(rep), sums=sums, rows=rows_html)
