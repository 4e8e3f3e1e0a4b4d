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


def drain_refs(plan, kinds=("evict", "blocked")):
    """The pod refs of a drain_plan's `kinds` lists, node by node in the plan's order, each with its
    ``node``: what a drain evicts (or waits for) and names when it stops."""
    return [dict(ref, node=node) for node, entry in (plan or {}).items() for kind in kinds for ref in entry[kind]]


def in_the_way(items):
    """The words for the pods a drain left behind, grouped by node in the order given:
    ``on node n1: ns/a (why), ns/b (why); on node n2: ns/c (why)`` for `items`, a list of
    (pod ref {"namespace", "name", "node" optional}, why). Pods without a node are named alone."""
    groups = []
    by_node = {}
    for ref, why in items or []:
        node = ref.get("node")
        if node not in by_node:
            by_node[node] = []
            groups.append(node)
        by_node[node].append("%s/%s (%s)" % (ref.get("namespace"), ref.get("name"), why))
    return "; ".join(("on node %s: " % node if node else "") + ", ".join(by_node[node]) for node in groups) or "none"


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


# ---------------------------------------------------------------------------------------
# the spare rule on the live fleet: can the protected pods go somewhere else?
# ---------------------------------------------------------------------------------------

GPU_PREFIX = "nvidia.com/"


def _quantity(value):
    """A whole-number extended resource quantity ("2", 2); GPUs are never fractional."""
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return 0


def gpu_requests(pod):
    """{resource: count} of the NVIDIA resources a pod asks for (``nvidia.com/gpu``,
    ``nvidia.com/mig-1g.10gb``, ``nvidia.com/gpu.shared``...): the containers' requests (or
    limits, which stand for requests of extended resources), and the largest init container's."""
    spec = (pod or {}).get("spec") or {}

    def of(container):
        res = container.get("resources") or {}
        out = {}
        for part in ("limits", "requests"):
            for key, value in (res.get(part) or {}).items():
                if key.startswith(GPU_PREFIX):
                    out[key] = _quantity(value)
        return out

    total = {}
    for container in spec.get("containers") or []:
        for key, value in of(container).items():
            total[key] = total.get(key, 0) + value
    for container in spec.get("initContainers") or []:
        for key, value in of(container).items():
            total[key] = max(total.get(key, 0), value)
    return dict((k, v) for k, v in total.items() if v > 0)


def node_ready(node):
    conds = ((node or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _tolerates(tolerations, taint):
    for tol in tolerations or []:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if not tol.get("key"):
            if tol.get("operator") == "Exists":
                return True
            continue
        if tol.get("key") != taint.get("key"):
            continue
        if tol.get("operator") == "Exists" or (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _affinity_matches(pod, labels):
    required = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(all(_expression_matches(e, labels) for e in term.get("matchExpressions") or []) for term in terms)


def schedulable_on(pod, node):
    """Why `pod` cannot run on `node` (a Ready, schedulable node whose labels its nodeSelector and
    required node affinity select and whose NoSchedule/NoExecute taints it tolerates), or None."""
    spec = pod.get("spec") or {}
    labels = _meta(node).get("labels") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    if not node_ready(node):
        return "not Ready"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "nodeSelector %s=%s" % (key, value)
    if not _affinity_matches(pod, labels):
        return "node affinity"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(spec.get("tolerations"), taint):
            return "taint %s" % taint.get("key")
    return None


def free_gpus(nodes, pods):
    """{node name: {resource: free count}}: allocatable NVIDIA resources less what the pods bound to
    the node (not finished) ask for."""
    free = {}
    for node in nodes or []:
        alloc = ((node.get("status") or {}).get("allocatable")) or {}
        free[_meta(node).get("name")] = dict((k, _quantity(v)) for k, v in alloc.items() if k.startswith(GPU_PREFIX))
    for pod in pods or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in free or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        for key, value in gpu_requests(pod).items():
            free[node][key] = free[node].get(key, 0) - value
    return free


def unplaceable(plan, pods, nodes, protected_priority):
    """The protected pods of a drain plan that no other node can take: the spare rule, judged on the
    live cluster before anything is cordoned.

    Each evicted pod of a protected PriorityClass that asks for NVIDIA resources is placed, largest
    first, on a node outside the plan that is Ready, not cordoned, selected by its nodeSelector and
    required node affinity, whose taints it tolerates (:func:`schedulable_on`) and has the GPUs free (allocatable
    less the requests of the pods bound to it, and of the pods placed before). Returns
    [{"namespace", "name", "node", "priority_class", "gpus", "reason"}] for the pods left over.
    Pods without GPU requests, and preemptible ones, are not judged (the scheduler and Kueue find
    them a place when capacity comes back).
    """
    protected = set(protected_priority or ())
    by_key = dict(((_meta(p).get("namespace"), _meta(p).get("name")), p) for p in pods or [])
    draining = set(plan or {})
    others = [n for n in nodes or [] if _meta(n).get("name") not in draining]
    free = free_gpus(others, pods)
    wanted = []
    for node, entry in (plan or {}).items():
        for ref in entry["evict"]:
            pod = by_key.get((ref["namespace"], ref["name"]))
            if pod is None or ref["priority_class"] not in protected:
                continue
            if (pod.get("status") or {}).get("phase") in FINISHED:
                continue
            need = gpu_requests(pod)
            if need:
                wanted.append((node, ref, pod, need))
    wanted.sort(key=lambda w: (-sum(w[3].values()), w[1]["namespace"] or "", w[1]["name"] or ""))
    left = []
    for node, ref, pod, need in wanted:
        reasons = []
        placed = None
        for other in sorted(others, key=lambda n: _meta(n).get("name") or ""):
            name = _meta(other).get("name")
            why = schedulable_on(pod, other)
            if why is None and any(free[name].get(k, 0) < v for k, v in need.items()):
                why = "no free %s" % ", ".join(sorted(need))
            if why is None:
                placed = name
                break
            reasons.append(why)
        if placed is None:
            counts = {}
            for why in reasons:
                counts[why] = counts.get(why, 0) + 1
            summary = ", ".join("%d %s" % (n, why) for why, n in sorted(counts.items())) or "no other node"
            left.append(dict(namespace=ref["namespace"], name=ref["name"], node=node,
                             priority_class=ref["priority_class"], gpus=need,
                             reason="no other node can take it (%s)" % summary))
            continue
        for key, value in need.items():
            free[placed][key] = free[placed].get(key, 0) - value
    return left


def budgets_that_never_allow(pdbs):
    """PodDisruptionBudgets that cannot allow an eviction whatever happens elsewhere: every pod they
    expect is healthy and the budget still wants them all (``desiredHealthy >= expectedPods > 0``).
    A budget short of healthy pods now (a replacement still starting) is not among them: the
    eviction waits for it within its bound."""
    out = []
    for pdb in pdbs or []:
        status = pdb.get("status") or {}
        expected = int(status.get("expectedPods") or 0)
        desired = int(status.get("desiredHealthy") or 0)
        healthy = int(status.get("currentHealthy") or 0)
        if expected > 0 and desired >= expected and healthy >= expected:
            out.append("%s/%s" % (_meta(pdb).get("namespace"), _meta(pdb).get("name")))
    return sorted(out)


# --- Kueue: a training Job's pods leave through Kueue, not one by one

KUEUE_DEACTIVATED_BY = "gpupool.vcf/deactivated-by"


def _admitted(workload):
    status = workload.get("status") or {}
    return bool(status.get("admission")) or any(
        c.get("type") == "Admitted" and c.get("status") == "True" for c in status.get("conditions") or [])


def kueue_requeues(plan, pods, workloads):
    """The admitted Kueue Workloads whose pods a drain_plan evicts: {"ns/name": {"namespace", "name",
    "job", "pods": [the evicted refs of its Job on the drained nodes]}}.

    A pod belongs to a Workload when its controller (a Job) is the Workload's owner (by uid). Such
    pods are better not evicted one by one: a gang that loses one pod holds its quota and its other
    pods until Kueue's waitForPodsReady gives up. Deactivating the Workload (``spec.active: false``)
    makes Kueue evict it whole (the Job is suspended, its pods go), and activating it again requeues
    it, to be admitted where there is room. Workloads not admitted, and pods of other owners, are
    left to the Eviction API.
    """
    by_owner = {}
    for wl in workloads or []:
        if not _admitted(wl):
            continue
        for ref in _meta(wl).get("ownerReferences") or []:
            if ref.get("uid"):
                by_owner[ref["uid"]] = wl
    owners = {}
    for pod in pods or []:
        for ref in _meta(pod).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Job":
                owners[(_meta(pod).get("namespace"), _meta(pod).get("name"))] = ref
    out = {}
    for entry in (plan or {}).values():
        for ref in entry["evict"]:
            owner = owners.get((ref["namespace"], ref["name"]))
            wl = by_owner.get(owner["uid"]) if owner else None
            if wl is None or _meta(wl).get("namespace") != ref["namespace"]:
                continue
            key = "%s/%s" % (ref["namespace"], _meta(wl).get("name"))
            item = out.setdefault(key, {"namespace": ref["namespace"], "name": _meta(wl).get("name"),
                                        "job": owner.get("name"), "pods": []})
            item["pods"].append(ref)
    return out


def workloads_left_inactive(workloads, owners):
    """Workloads an earlier drain of ``owners`` deactivated and did not activate again (a failure in
    between): [{"namespace", "name"}], to be activated (requeued) by a rerun."""
    owners = set(owners or ())
    return [{"namespace": _meta(wl).get("namespace"), "name": _meta(wl).get("name")} for wl in workloads or []
            if (_meta(wl).get("annotations") or {}).get(KUEUE_DEACTIVATED_BY) in owners
            and (wl.get("spec") or {}).get("active") is False]


def _pod_key(ref):
    return "%s/%s" % (ref["namespace"], ref["name"])


def drain_diff(plan, unschedulable, marks, owner, requeue=(), reactivate=()):
    """The before/after of a drain for --diff, from its drain_plan: ``(before, after)``.

    ``nodes``: per drained node ``unschedulable``, ``cordoned_by`` (the cordon annotation; a node
    already cordoned keeps its own, a node cordoned now gets ``owner``) and ``pods`` (``namespace/name``
    of the pods on it: every pod of the plan before, the skipped DaemonSet and static pods after).
    ``workloads``: the Kueue Workloads that leave through Kueue (``requeue``, ``namespace/name``:
    ``admitted`` before) and those an earlier run left inactive (``reactivate``: ``inactive``), all
    ``requeued`` after. ``unschedulable``, ``marks``: {node: bool}, {node: annotation value or None}.
    """
    before, after = {}, {}
    for node, entry in (plan or {}).items():
        cordoned = bool((unschedulable or {}).get(node))
        mark = (marks or {}).get(node)
        on_node = sorted(_pod_key(r) for kind in ("evict", "blocked", "terminating", "skipped") for r in entry[kind])
        before[node] = dict(unschedulable=cordoned, cordoned_by=mark, pods=on_node)
        after[node] = dict(unschedulable=True, cordoned_by=mark if cordoned else owner,
                           pods=sorted(_pod_key(r) for r in entry["skipped"]))
    was = dict((k, "admitted") for k in requeue or ())
    was.update((k, "inactive") for k in reactivate or ())
    return (dict(nodes=before, workloads=was),
            dict(nodes=after, workloads=dict((k, "requeued") for k in was)))


def restore_diff(names, unschedulable, marks, uncordon):
    """The before/after of a restore for --diff: per node ``unschedulable`` and ``cordoned_by``; the nodes
    in ``uncordon`` schedulable and without the annotation after, the others as they are."""
    before, after = {}, {}
    for node in names or []:
        before[node] = dict(unschedulable=bool((unschedulable or {}).get(node)), cordoned_by=(marks or {}).get(node))
        after[node] = dict(unschedulable=False, cordoned_by=None) if node in (uncordon or ()) else dict(before[node])
    return dict(nodes=before), dict(nodes=after)
