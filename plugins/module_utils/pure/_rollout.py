# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout of a node pool to a VM class, judged from the guest's nodes (pure).

Cluster API replaces a machineDeployment's machines when its VM class changes; the guest sees
new nodes come and old ones go. A pool's nodes are the nodes that carry all of the pool's labels;
the class a node runs on is its ``node.kubernetes.io/instance-type`` label (the VM class, as the
vSphere cloud provider sets it). A pool has rolled when it has as many nodes as its replicas,
every one on the pool's class, Ready and schedulable, and no other node of the pool is left.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def node_ready(node):
    for cond in ((node or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def node_class(node):
    return (((node or {}).get("metadata") or {}).get("labels") or {}).get(INSTANCE_TYPE)


def pool_nodes(nodes, labels):
    """The nodes carrying every one of ``labels`` (sorted by name); none for empty labels."""
    if not labels:
        return []

    def has_all(node):
        have = (node.get("metadata") or {}).get("labels") or {}
        return all(have.get(k) == str(v) for k, v in labels.items())
    out = [n for n in nodes or [] if has_all(n)]
    return sorted(out, key=lambda n: n["metadata"]["name"])


def pool_rollout(pool, vm_class, replicas, nodes):
    """Where one pool stands: {pool, vm_class, replicas, ready, done, left: [{node, vm_class, ready, cordoned}]}.

    ``nodes``: the pool's nodes (pool_nodes); ``replicas`` None: as many as there are.
    """
    good, left = [], []
    for n in nodes:
        ready, cordoned = node_ready(n), bool((n.get("spec") or {}).get("unschedulable"))
        if node_class(n) == vm_class and ready and not cordoned:
            good.append(n["metadata"]["name"])
        else:
            left.append(dict(node=n["metadata"]["name"], vm_class=node_class(n), ready=ready, cordoned=cordoned))
    want = len(good) + len([x for x in left if x["vm_class"] == vm_class]) if replicas is None else replicas
    return dict(pool=pool, vm_class=vm_class, replicas=want, ready=len(good), left=left,
                done=not left and len(good) >= want)


def classes_in_use(pools, nodes):
    """The VM classes a node pool names (``pools``: read_pool dicts) or a node runs on, sorted."""
    out = set(p.get("vm_class") for p in pools or [] if p.get("vm_class"))
    out.update(node_class(n) for n in nodes or [] if node_class(n))
    return sorted(out)


def describe(report):
    """One pool's state in words."""
    text = "node pool %s: %d of %d nodes on VM class %s and Ready" % (
        report["pool"], report["ready"], report["replicas"], report["vm_class"])
    if report["left"]:
        text += "; left: " + ", ".join("%s (class %s, %s%s)" % (
            x["node"], x["vm_class"] or "unknown", "Ready" if x["ready"] else "not Ready",
            ", cordoned" if x["cordoned"] else "") for x in report["left"])
    return text


def timeout_message(reports, seconds):
    """The failure of a rollout that did not finish in time: what is left, and how to resume."""
    pending = [r for r in reports if not r["done"]]
    return ("the rollout did not finish in %d s: %s. The Cluster already names the new VM classes (Cluster API goes "
            "on replacing the machines); the superseded classes are kept. A rerun waits again, then retires them"
            % (seconds, "; ".join(describe(r) for r in pending)))


__all__ = ["INSTANCE_TYPE", "classes_in_use", "describe", "node_class", "node_ready", "pool_nodes", "pool_rollout",
           "timeout_message"]
