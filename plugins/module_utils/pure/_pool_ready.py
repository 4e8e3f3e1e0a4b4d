# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pool-ready after a host or node replacement: the steps until the capacity is in service (pure).

The steps, in order: ``ready`` (the nodes Ready), ``validated`` (the GPU Operator's validator pod
Ready on each node), ``advertised`` (the pool's GPU resource in each node's allocatable),
``licensed`` (the vGPU license status of the DCGM exporter, through Prometheus), ``probe_pod`` (a
pod of the pool with one GPU Running and Ready on those nodes) and ``first_token`` (the first
streamed chunk of one completion from an inference endpoint). Each ``*_check`` takes what the
client layer read and returns ``(done, detail)``; :class:`Timeline` keeps the time of each step
and says which step was not reached, with what was. No I/O here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

# the request and the first streamed chunk, shared with the latency probe (one definition)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._first_token import (  # noqa: F401
    completion_request,
    stream_chunk,
)

STEPS = ("ready", "validated", "advertised", "licensed", "probe_pod", "first_token")
OPTIONAL = ("validated", "licensed", "probe_pod")  # the steps a user may skip
VALIDATOR_SELECTOR = "app=nvidia-operator-validator"
LICENSE_METRIC = "DCGM_FI_DEV_VGPU_LICENSE_STATUS"
LICENSED = 1.0  # the exporter's value for a licensed vGPU (0: not licensed)
PROBE_LABEL = "gpupool.vcf/probe"
MANAGED_BY = "app.kubernetes.io/managed-by"


class PoolReadyError(Exception):
    """A step can never be reached as things are (for example the probe pod failed)."""


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _conditions(obj):
    return dict((c.get("type"), c) for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def _names(items):
    return ", ".join(items)


def selector_matches(selector, labels):
    """Whether ``labels`` carry every key=value of ``selector`` (a nodeSelector)."""
    labels = labels or {}
    return all(labels.get(k) == str(v) for k, v in (selector or {}).items())


def target_nodes(nodes, names=None, vms=None, node_selector=None, node_of_vm=None):
    """The node names to wait for: ``names`` as given; the node of each VM (``node_of_vm``: {vm: node or
    None}; a VM whose node is not registered yet stands for a node named as the VM, as VKS names
    them); else every node the pool's ``node_selector`` matches."""
    if names:
        return list(names)
    if vms:
        return [node_of_vm.get(vm["name"]) or vm["name"] for vm in vms] if node_of_vm else [vm["name"] for vm in vms]
    return sorted(_meta(n).get("name") for n in nodes or [] if selector_matches(node_selector, _meta(n).get("labels")))


def node_ready(node):
    """(ready, why not) of one Node object."""
    ready = _conditions(node).get("Ready")
    if not ready:
        return False, "no Ready condition yet"
    if ready.get("status") == "True":
        return True, "Ready"
    reason = ready.get("reason") or ready.get("status")
    return False, "Ready %s (%s%s)" % (ready.get("status"), reason, ": %s" % ready["message"] if ready.get("message") else "")


def ready_check(nodes, names, min_nodes=1):
    """Every named node registered and Ready, and at least ``min_nodes`` of them."""
    by_name = dict((_meta(n).get("name"), n) for n in nodes or [])
    if len(names) < min_nodes:
        return False, "%d of the %d nodes wanted exist (%s)" % (len(names), min_nodes, _names(names) or "none")
    waiting = []
    for name in names:
        if name not in by_name:
            waiting.append("%s not registered" % name)
            continue
        ok, why = node_ready(by_name[name])
        if not ok:
            waiting.append("%s %s" % (name, why))
    if waiting:
        return False, "; ".join(waiting)
    return True, "%d nodes Ready: %s" % (len(names), _names(names))


def pod_ready(pod):
    status = (pod or {}).get("status") or {}
    return status.get("phase") == "Running" and (_conditions(pod).get("Ready") or {}).get("status") == "True"


def validated_check(pods, names):
    """Each named node runs a Ready validator pod (the GPU Operator's ``nvidia-operator-validator``:
    its init containers validate driver, container toolkit, CUDA and device plugin in turn; the pod
    is Ready only once every one passed)."""
    on = {}
    for pod in pods or []:
        node = ((pod.get("spec") or {}).get("nodeName"))
        if node in names and not _meta(pod).get("deletionTimestamp"):
            on.setdefault(node, []).append(pod)
    waiting = []
    for name in names:
        mine = on.get(name) or []
        if not mine:
            waiting.append("%s: no validator pod" % name)
        elif not any(pod_ready(p) for p in mine):
            pod = mine[0]
            waiting.append("%s: validator pod %s %s, not Ready" % (
                name, _meta(pod).get("name"), ((pod.get("status") or {}).get("phase") or "Pending")))
    if waiting:
        return False, "; ".join(waiting)
    return True, "validator pod Ready on %s" % _names(names)


def quantity(value):
    """A whole-number Kubernetes quantity ("2", "0", "1k") as a number; 0 for what does not parse."""
    text = str(value if value is not None else "").strip()
    scale = {"k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "m": 1e-3}
    for suffix in sorted(scale, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[:-len(suffix)]) * scale[suffix]
            except ValueError:
                return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def advertised_check(nodes, names, resource):
    """Each named node's allocatable ``resource`` (the pool's GPU resource) is more than 0."""
    by_name = dict((_meta(n).get("name"), n) for n in nodes or [])
    counts, waiting = {}, []
    for name in names:
        alloc = (((by_name.get(name) or {}).get("status") or {}).get("allocatable") or {})
        counts[name] = quantity(alloc.get(resource))
        if counts[name] <= 0:
            waiting.append("%s: %s allocatable %s" % (name, resource, alloc.get(resource, "absent")))
    if waiting:
        return False, "; ".join(waiting)
    return True, "%s allocatable: %s" % (resource, ", ".join("%s %g" % (n, counts[n]) for n in names))


def license_query(names, metric=LICENSE_METRIC):
    """The PromQL of the license series of the named nodes (dcgm-exporter's ``Hostname`` label is the node)."""
    alternatives = "|".join(n.replace("\\", "\\\\").replace(".", "\\\\.") for n in names)
    return '%s{Hostname=~"%s"}' % (metric, alternatives)


def license_by_node(series):
    """{node: [license status values]} of the DCGM exporter's license series (its ``Hostname`` label is the
    node), in the order of the series; a value that does not parse is NaN (not licensed). The audit's
    licensing link judges the same values."""
    out = OrderedDict()
    for item in series or []:
        host = (item.get("metric") or {}).get("Hostname")
        try:
            value = float((item.get("value") or [None, "nan"])[1])
        except (TypeError, ValueError):
            value = float("nan")
        out.setdefault(host, []).append(value)
    return out


def licensed_check(series, names):
    """Every named node has license series and each says licensed (value 1)."""
    per_node = license_by_node(series)
    waiting = []
    for name in names:
        values = per_node.get(name)
        if not values:
            waiting.append("%s: no license series yet" % name)
        elif any(v != LICENSED for v in values):
            waiting.append("%s: %d of %d GPUs not licensed" % (name, len([v for v in values if v != LICENSED]),
                                                               len(values)))
    if waiting:
        return False, "; ".join(waiting)
    return True, "licensed: %s" % ", ".join("%s (%d GPUs)" % (n, len(per_node[n])) for n in names)


def probe_pod(name, namespace, resource, image, node_selector=None, tolerations=None, nodes=None):
    """The probe pod: the pool's node selector and tolerations, one ``resource``, pinned to ``nodes``
    (the replaced capacity) when given; marked as the collection's."""
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "containers": [{"name": "probe", "image": image, "command": ["sleep", "3600"],
                        "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}}}],
    }
    if node_selector:
        spec["nodeSelector"] = dict((k, str(v)) for k, v in node_selector.items())
    if tolerations:
        spec["tolerations"] = [dict((k, v) for k, v in t.items() if v is not None) for t in tolerations]
    if nodes:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {PROBE_LABEL: "pool-ready", MANAGED_BY: "gpupool.vcf"}},
            "spec": spec}


def probe_check(pod):
    """(done, detail) of the probe pod; a pod that ended can never be Running: PoolReadyError."""
    if pod is None:
        return False, "probe pod not found"
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    node = (pod.get("spec") or {}).get("nodeName")
    if phase in ("Failed", "Succeeded"):
        why = ": %s" % status["message"] if status.get("message") else ""
        raise PoolReadyError("probe pod %s ended %s on %s%s" % (_meta(pod).get("name"), phase, node, why))
    if pod_ready(pod):
        return True, "probe pod %s Running on %s" % (_meta(pod).get("name"), node)
    scheduled = _conditions(pod).get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        return False, "probe pod %s not scheduled (%s: %s)" % (
            _meta(pod).get("name"), scheduled.get("reason"), scheduled.get("message") or "")
    return False, "probe pod %s %s%s" % (_meta(pod).get("name"), phase, " on %s" % node if node else "")


class Timeline(object):
    """The steps of one run: when each was reached (seconds since the start, and in its own wait).

    ``start`` is the clock at the beginning; ``wall`` the epoch seconds then (the report's times).
    """

    def __init__(self, start, wall):
        self.start = start
        self.wall = wall
        self.steps = []
        self.mark = start

    def _add(self, name, state, now, detail):
        entry = {"name": name, "state": state, "seconds": round(now - self.mark, 2) if state != "skipped" else 0.0,
                 "at": round(now - self.start, 2), "reached_at": None, "detail": detail}
        if state == "reached":
            entry["reached_at"] = round(self.wall + (now - self.start), 3)
        self.steps.append(entry)
        self.mark = now
        return entry

    def reached(self, name, now, detail):
        return self._add(name, "reached", now, detail)

    def skipped(self, name, now, why):
        return self._add(name, "skipped", now, why)

    def not_reached(self, name, now, detail):
        entry = self._add(name, "not_reached", now, detail)
        done = set(s["name"] for s in self.steps)
        for later in STEPS[STEPS.index(name) + 1:]:
            if later not in done:
                self.steps.append({"name": later, "state": "not_started", "seconds": None, "at": None,
                                   "reached_at": None, "detail": "the step before was not reached"})
        return entry

    def seconds(self):
        """{step: seconds its wait took} of the reached steps."""
        return dict((s["name"], s["seconds"]) for s in self.steps if s["state"] == "reached")

    def total(self):
        reached = [s["at"] for s in self.steps if s["state"] == "reached"]
        return reached[-1] if reached else 0.0

    def summary(self):
        """'ready after 2.1 s, validated after 4.0 s (licensed skipped: ...)' for messages."""
        parts = []
        for s in self.steps:
            if s["state"] == "reached":
                parts.append("%s after %.1f s" % (s["name"], s["at"]))
            elif s["state"] == "skipped":
                parts.append("%s skipped" % s["name"])
        return ", ".join(parts) or "nothing"

    def failure(self, name, timeout, detail, what):
        """The message of a step not reached: the step named, why, and what was reached."""
        return ("Unable to bring %s into service: step %s not reached within %s s (%s); reached: %s"
                % (what, name, timeout, detail, self.summary()))


def markdown(what, steps, total, nodes):
    """The report as Markdown: one row per step."""
    lines = ["# Pool ready: %s" % what, "",
             "Nodes: %s" % (_names(nodes) or "none"), "",
             "| step | state | seconds | since start | detail |", "|---|---|---:|---:|---|"]
    for s in steps:
        lines.append("| %s | %s | %s | %s | %s |" % (
            s["name"], s["state"].replace("_", " "), "" if s["seconds"] is None else "%.2f" % s["seconds"],
            "" if s["at"] is None else "%.2f" % s["at"], str(s["detail"]).replace("|", "\\|")))
    lines += ["", "In service after %.2f s." % total if all(s["state"] in ("reached", "skipped") for s in steps)
              else "Not in service: %s." % ", ".join(s["name"] for s in steps if s["state"] == "not_reached")]
    return "\n".join(lines) + "\n"


__all__ = ["LICENSE_METRIC", "OPTIONAL", "PoolReadyError", "STEPS", "Timeline", "VALIDATOR_SELECTOR",
           "advertised_check", "completion_request", "license_query", "licensed_check", "markdown", "node_ready",
           "pod_ready", "probe_check", "probe_pod", "quantity", "ready_check", "selector_matches", "stream_chunk",
           "target_nodes", "validated_check"]
