# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which guest nodes advertise a stale GPU count after a sharing change, and in which order they restart.

NVIDIA's device plugin reads its sharing configuration when it starts: after a time-slicing (or MIG
strategy) change a node keeps advertising the count of the configuration its plugin started with until
the plugin's pod on that node restarts. This module only decides; the caller reads the nodes and pods
and does the drain, restart, wait and uncordon.

A node's configuration is the value of its ``nvidia.com/device-plugin.config`` label (no label: no
sharing); its physical GPUs are GPU feature discovery's ``nvidia.com/gpu.count`` label. The count the
design wants is GPUs x replicas of that configuration (GPUs when it does not time-slice), under
``nvidia.com/gpu``, or under ``nvidia.com/gpu.shared`` when the configuration renames shared GPUs
(``rename_by_default``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
FINISHED = ("Succeeded", "Failed")


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def advertised(node, resource=RESOURCE):
    """The node's ``status.allocatable`` count of `resource` (0 when it advertises none)."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    count = _int(value)
    return 0 if count is None else count


def mig_mixed(node):
    """The node advertises MIG devices by profile (``nvidia.com/mig-<profile>``, the mixed strategy): its count is
    the MIG geometry's, not GPUs x replicas."""
    status = node.get("status") or {}
    return any(str(k).startswith(MIG_PREFIX) for part in ("capacity", "allocatable") for k in (status.get(part) or {}))


def resource_and_count(node, time_slicing):
    """(resource name, count) the design's sharing gives the node, or None when its GPUs are not known or it
    advertises MIG devices by profile (not judged here).

    `time_slicing`: {configuration name: {"replicas": n, "rename_by_default": bool, ...}} as the
    gpu_operator role takes it.
    """
    labels = _meta(node).get("labels") or {}
    gpus = _int(labels.get(GPU_COUNT_LABEL))
    if gpus is None or mig_mixed(node):
        return None
    config = ((time_slicing or {}).get(labels.get(CONFIG_LABEL)) or {}) if labels.get(CONFIG_LABEL) else {}
    replicas = _int(config.get("replicas"))
    if not replicas or replicas < 2:
        return RESOURCE, gpus
    return (SHARED_RESOURCE if config.get("rename_by_default") else RESOURCE), gpus * replicas


def expected(node, time_slicing):
    """The count the design's sharing gives the node (see resource_and_count), or None."""
    got = resource_and_count(node, time_slicing)
    return None if got is None else got[1]


def stale_nodes(nodes, time_slicing):
    """[{"node", "config", "advertised", "expected"}] for each node whose allocatable differs from the design.

    Nodes without a known GPU count are left out (not GPU nodes, or discovery has not labelled them yet);
    the order is the nodes' names, so that a rerun takes them in the same order.
    """
    out = []
    for node in sorted(nodes or [], key=lambda n: _meta(n).get("name") or ""):
        got = resource_and_count(node, time_slicing)
        if got is None:
            continue
        resource, want = got
        have = advertised(node, resource)
        if have != want:
            out.append(OrderedDict([("node", _meta(node)["name"]), ("resource", resource),
                                    ("config", (_meta(node).get("labels") or {}).get(CONFIG_LABEL)),
                                    ("advertised", have), ("expected", want)]))
    return out


def _holds_gpu(pod):
    if (pod.get("status") or {}).get("phase") in FINISHED:
        return False
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for key in ("limits", "requests"):
            for resource in (RESOURCE, SHARED_RESOURCE):
                if (_int((resources.get(key) or {}).get(resource)) or 0) > 0:
                    return True
    return False


def gpu_pods_by_node(pods):
    """{node name: [namespace/name, ...]} of the running pods that request nvidia.com/gpu (or .shared)."""
    out = {}
    for pod in pods or []:
        name = (pod.get("spec") or {}).get("nodeName")
        if name and _holds_gpu(pod):
            out.setdefault(name, []).append("%s/%s" % (_meta(pod).get("namespace"), _meta(pod).get("name")))
    return out


def restart_plan(nodes, pods, time_slicing):
    """The node-by-node restart of the stale nodes: [{"node", "drain", "gpu_pods", "advertised", "expected", "steps"}].

    A node whose pods hold GPUs is drained first and uncordoned after; a node without is only restarted
    and waited for. Nodes already advertising the design's count are not in the plan (a rerun resumes).
    """
    holding = gpu_pods_by_node(pods)
    plan = []
    for row in stale_nodes(nodes, time_slicing):
        gpu_pods = sorted(holding.get(row["node"], []))
        drain = bool(gpu_pods)
        steps = (["drain"] if drain else []) + ["restart", "wait"] + (["uncordon"] if drain else [])
        plan.append(OrderedDict([("node", row["node"]), ("resource", row["resource"]), ("drain", drain), ("gpu_pods", gpu_pods),
                                 ("advertised", row["advertised"]), ("expected", row["expected"]),
                                 ("steps", steps)]))
    return plan


def wait_failure(node_name, node, want, resource=RESOURCE):
    """The message when a node still advertises the wrong count of `resource` after its restart, else None."""
    have = advertised(node or {}, resource)
    if have == want:
        return None
    return ("%s: after its device plugin restarted the node advertises %s=%d, the design's sharing gives %d"
            % (node_name, resource, have, want))


def capacity_findings(nodes, time_slicing):
    """Audit findings: one per node whose advertised GPU count differs from the design's sharing."""
    return [OrderedDict([
        ("rule", "device_plugin_capacity"), ("object", "Node/%s" % row["node"]),
        ("message", "%s advertises %s=%d, the design's sharing (%s) gives %d: restart its device plugin"
         % (row["node"], row["resource"], row["advertised"], row["config"] or "no time-slicing", row["expected"]))])
        for row in stale_nodes(nodes, time_slicing)]
