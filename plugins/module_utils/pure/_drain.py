# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Draining the guest nodes of a GPU host (pure: the caller reads the objects, this only decides).

Which Kubernetes nodes are a host's VKS node VMs, and for each node which pods an eviction
moves, which pods a PodDisruptionBudget holds, and how many pods of each preemptible priority
class are preempted. Objects are dicts as the API serves them (camelCase keys).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PROVIDER_PREFIX = "vsphere://"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED = ("Succeeded", "Failed")


def _meta(obj):
    return (obj or {}).get("metadata") or {}


def _uuid(value):
    return (value or "").strip().lower()


def nodes_of_vms(vms, nodes):
    """{vm name: node name or None} for the given VKS node VMs, in their order.

    `vms`: VM names, or VM records {"name", "uuid"} (the VM's BIOS/instance uuid as vSphere
    gives it). `nodes`: Node objects. A node is a VM's when the node's name is the VM's name,
    or when its ``spec.providerID`` is vSphere's ``vsphere://<vm uuid>`` for the VM's uuid
    (compared without case). A VM no node matches maps to None (not a node of this cluster,
    or its node was not registered yet).
    """
    by_name = {}
    by_uuid = {}
    for node in nodes or []:
        name = _meta(node).get("name")
        if not name:
            continue
        by_name[name] = name
        provider = ((node.get("spec") or {}).get("providerID") or "").strip()
        if provider.lower().startswith(PROVIDER_PREFIX):
            by_uuid[_uuid(provider[len(PROVIDER_PREFIX):])] = name
    out = {}
    for vm in vms or []:
        record = vm if isinstance(vm, dict) else {"name": vm}
        name = record.get("name")
        node = by_name.get(name)
        if node is None and record.get("uuid"):
            node = by_uuid.get(_uuid(record["uuid"]))
        out[name] = node
    return out


def _expression_matches(expr, labels):
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def selector_matches(selector, labels):
    """Whether a label selector selects `labels`. policy/v1: an empty selector ({}) selects
    every pod of the namespace, a missing one (None) selects none."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or [])


def pdbs_of_pod(pod, pdbs):
    """The PodDisruptionBudgets that cover `pod` (same namespace, selector matches its labels)."""
    meta = _meta(pod)
    return [b for b in pdbs or []
            if _meta(b).get("namespace") == meta.get("namespace")
            and selector_matches((b.get("spec") or {}).get("selector"), meta.get("labels"))]


def skip_reason(pod):
    """Why a drain leaves the pod alone (as ``kubectl drain --ignore-daemonsets`` does), else None:
    ``daemonset`` (its DaemonSet puts it back at once) or ``mirror`` (a static pod the kubelet runs)."""
    meta = _meta(pod)
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "mirror"
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "DaemonSet":
            return "daemonset"
    return None


def _ref(pod):
    meta = _meta(pod)
    spec = pod.get("spec") or {}
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
            "priority_class": spec.get("priorityClassName") or ""}


def drain_plan(node_names, pods, pdbs, protected_priority):
    """What draining `node_names` does: {node: {"evict", "blocked", "skipped", "terminating",
    "unmanaged", "preempted"}} for each node, in the order given.

    - ``evict``: pod refs {"namespace", "name", "uid", "priority_class"} to evict through the
      Eviction API. Pods with emptyDir volumes are evicted (their scratch data goes, as with
      ``kubectl drain --delete-emptydir-data``); finished pods too (no budget counts them).
    - ``skipped``: DaemonSet-owned and mirror (static) pods, each with its ``reason``.
    - ``terminating``: pods already being deleted: nothing to evict, only to wait for.
    - ``unmanaged``: evicted pods no controller owns (nothing recreates them; kubectl drain
      refuses them without --force), for the caller to report.
    - ``blocked``: pods of a protected priority class (`protected_priority`: names, the
      inference classes) that a PodDisruptionBudget keeps: the budget's
      ``status.disruptionsAllowed`` is used up (budgets are consumed in the order of the plan,
      as if every node given were drained at once), or more than one budget covers the pod
      (the API refuses such an eviction). Each ref has ``pdb`` (names) and ``reason``. They are
      not in ``evict``.
    - ``preempted``: {priority class: count} of the evicted running pods whose class is not
      protected ("" for pods without a class).

    `pods`: Pod objects (only those whose ``spec.nodeName`` is one of the nodes count);
    `pdbs`: PodDisruptionBudget objects with their status.
    """
    protected = set(protected_priority or ())
    allowed = {}
    for pdb in pdbs or []:
        key = (_meta(pdb).get("namespace"), _meta(pdb).get("name"))
        allowed[key] = int(((pdb.get("status") or {}).get("disruptionsAllowed")) or 0)
    plan = {}
    for node in node_names or []:
        plan[node] = {"evict": [], "blocked": [], "skipped": [], "terminating": [], "unmanaged": [],
                      "preempted": {}}
    for pod in sorted(pods or [], key=lambda p: (_meta(p).get("namespace") or "", _meta(p).get("name") or "")):
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in plan:
            continue
        entry, ref = plan[node], _ref(pod)
        reason = skip_reason(pod)
        if reason:
            entry["skipped"].append(dict(ref, reason=reason))
            continue
        if _meta(pod).get("deletionTimestamp"):
            entry["terminating"].append(ref)
            continue
        finished = (pod.get("status") or {}).get("phase") in FINISHED
        if not finished:
            covering = pdbs_of_pod(pod, pdbs)
            keys = [(_meta(b).get("namespace"), _meta(b).get("name")) for b in covering]
            names = sorted(k[1] for k in keys)
            if ref["priority_class"] in protected:
                if len(keys) > 1:
                    entry["blocked"].append(dict(ref, pdb=names, reason="more than one PodDisruptionBudget covers it"))
                    continue
                if keys and allowed[keys[0]] < 1:
                    entry["blocked"].append(dict(ref, pdb=names, reason="PodDisruptionBudget %s allows no disruption"
                                                 % names[0]))
                    continue
            for key in keys:
                allowed[key] -= 1
            if ref["priority_class"] not in protected:
                entry["preempted"][ref["priority_class"]] = entry["preempted"].get(ref["priority_class"], 0) + 1
        if not any(r.get("controller") for r in _meta(pod).get("ownerReferences") or []):
            entry["unmanaged"].append(ref)
        entry["evict"].append(ref)
    return plan


def blocked_pods(plan):
    """Every blocked pod of a drain_plan, with its node: [(node, ref)]."""
    return [(node, ref) for node, entry in plan.items() for ref in entry["blocked"]]


def preempted_total(plan):
    """{priority class: count} preempted over every node of a drain_plan."""
    out = {}
    for entry in plan.values():
        for cls, count in entry["preempted"].items():
            out[cls] = out.get(cls, 0) + count
    return out
