# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vks link of the drift audit: VKS clusters and their node pools, judged against the derived design (pure).

Live state, as the module reads it: ``clusters``: ``{name: {"namespace", "machine_deployments": {name: {"replicas", "vm_class",
"labels", "taints", "lacks"}}, "owned": [pool names]}}`` (each pool as ``_cluster_class.read_pool`` reads it through its
ClusterClass's variables; None where the class has no variable, the reason in ``lacks``) or the
name absent when the Cluster does not exist. ``owned``: the pools the Cluster's ``gpupool.vcf/node-pools``
annotation records (absent: the record was not read, and ownership is not judged).

:data:`RULES` is this link's rule table (severity, link, one line, fix); ``_audit_report`` assembles
every link's table into one. Every finding takes its rule's fix from there; ``object_not_owned`` (the vsphere
link's row) with this link's design key, ``vks_clusters[].adopt``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_vsphere, _ownership
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _cluster_class as _cc


RULES = OrderedDict([
    ("vks_cluster_missing", ("error", "vks", "Every VKS cluster of the design exists on the Supervisor.",
                             "create the cluster, or fix vks_clusters in the design")),
    ("node_pool_missing", ("error", "vks", "Every GPU pool has its node pool in its VKS cluster.",
                           "add it (vks_node_pool, or the vks_gpu_node_pools role)")),
    ("node_pool_changed", ("warning", "vks", "A node pool has the design's replicas and VM class (the vmClass "
                                             "variable its ClusterClass defines).",
                           "set it back (vks_node_pool, or the vks_gpu_node_pools role)")),
    ("node_pool_labels_changed", ("error", "vks", "A node pool labels its nodes as the design says (the labels "
                                                  "variable of its ClusterClass).",
                                  "set the node pool labels back (vks_node_pool labels, or the vks_gpu_node_pools "
                                  "role)")),
    ("node_pool_taints_changed", ("error", "vks", "A node pool taints its nodes as the design says (the taints "
                                                  "variable of its ClusterClass).",
                                  "set the node pool taints back (vks_node_pool taints, or the vks_gpu_node_pools "
                                  "role)")),
    ("node_pool_class_lacks", ("error", "vks", "A node pool's ClusterClass has one variable for each of the node "
                                               "labels and taints the design gives the pool.",
                               "move the cluster to a ClusterClass with node labels and taints (builtin-generic), or "
                               "take them out of the pool's design; vks_node_pool refuses the pool until then")),
])


def finding(rule, obj, message, fix=None, severity=None):
    """A finding of a rule of this link's table (``fix`` None: the table's)."""
    return _audit.finding(rule, obj, message, fix, RULES[rule], severity=severity)


def _vks_expected(derived):
    """[(cluster, namespace, [pool options])] as the vks_gpu_node_pools role passes them to
    vks_node_pool, from the role inputs derive() gives it (one entry per VKS cluster)."""
    out = []
    for entry in (derived.get("roles") or {}).get("vks_gpu_node_pools") or []:
        inputs = _objects.role_inputs("vks_gpu_node_pools", entry)
        out.append((entry["vks_gpu_node_pools_cluster_name"], entry.get("vks_gpu_node_pools_namespace"),
                    _objects.node_pools(inputs)))
    return out


def _adopting(derived):
    """{VKS cluster: whether the vks_gpu_node_pools role adopts its pools} (the role input derive() gives)."""
    return dict((entry["vks_gpu_node_pools_cluster_name"], bool(entry.get("vks_gpu_node_pools_adopt")))
                for entry in (derived.get("roles") or {}).get("vks_gpu_node_pools") or [])


def not_owned_findings(cluster, pools, owned, adopting):
    """``object_not_owned`` (info, vks link) for each node pool of ``pools`` (those of the design that exist
    as designed) that the Cluster's record ``owned`` (the pool names of its gpupool.vcf/node-pools annotation;
    None: the record was not read, nothing is judged) does not hold: made by hand, no purge of the collection
    touches it until it is adopted. Judged, as for VM classes and namespaces, only where the design adopts
    (``adopting``): the findings name what site.yml will record."""
    if owned is None or not adopting:
        return []
    entry = _audit_vsphere.RULES["object_not_owned"]  # the rule's row (the vsphere link's), its fix for this key
    how = _audit.table_fix(entry).format(key="vks_clusters[].adopt")
    return [_audit.finding("object_not_owned", "node_pool %s/%s" % (cluster, name),
                           "node pool %s of VKS cluster %s matches the design but is not the collection's own (the "
                           "Cluster's gpupool.vcf/node-pools annotation does not record it): until it is adopted no "
                           "purge touches it" % (name, cluster), how, entry, link="vks")
            for name in _ownership.not_owned(pools, owned)]


def _taint_set(taints):
    return sorted(_audit.taint_text(t) for t in taints or [])


# the class the audit plans a read pool on: one place per field, so apply_pool writes each field where
# read_pool reads it back (read_pool is apply_pool's inverse: a field's layout does not matter to its value)
_PLACES = dict(vm_class="vmClass", labels=dict(variable="nodeLabels", property=None, form="map"),
               taints=dict(variable="nodeTaints", property=None))


def pool_plan(md, pool):
    """vks_node_pool's plan of one node pool (``_cluster_class.plan_machine_deployments``) over the pool
    as the audit read it (``md``: read_pool's form, None when the pool is missing), ``pool``: the role's
    pool options. A field the read does not carry, or reads as None without a reason in ``lacks``, is not
    asked for; one the class has no place for (its reason in ``lacks``) is. Returns ``(changes, refusal)``:
    ``changes`` {field: (live, planned)} for replicas, vm_class, labels and taints, or the refusal's text
    (PlanError: the class cannot hold what the pool asks for) with ``changes`` None."""
    lacks = (md or {}).get("lacks") or {}
    plan = dict(_cc.variable_plan([]), **{"class": (md or {}).get("class")})
    plan["vm_class"] = _PLACES["vm_class"]
    for field in ("labels", "taints"):
        if md is None or (md.get(field) is not None and field not in lacks):
            plan[field] = _PLACES[field]
    want = dict(pool)
    for field in ("replicas", "vm_class", "labels", "taints"):
        if md is not None and (field not in md or md[field] is None and field not in lacks):
            want[field] = None  # not read (None without the class's reason): not asked for
    current = []
    if md is not None:
        current = [_cc.apply_pool(None, dict(name=pool["name"], replicas=md.get("replicas"), vm_class=md.get("vm_class"),
                                             labels=md.get("labels"), taints=md.get("taints")), plan, "node-pool")]
    try:
        after = _cc.plan_machine_deployments(current, [want], plan, "node-pool")
    except _cc.PlanError as exc:
        reasons = [lacks[f] for f in ("labels", "taints") if pool.get(f) and lacks.get(f)]
        return None, "; ".join(reasons) or str(exc)
    new = _cc.read_pool(after[0], {}, plan)
    old = _cc.read_pool(current[0], {}, plan) if current else dict((f, None) for f in new)
    return OrderedDict((f, (old[f], new[f])) for f in ("replicas", "vm_class", "labels", "taints")
                       if old[f] != new[f]), None


def _resolved_class(md, pool, allowed):
    """The VM class the role gives the pool: the live one where it is one of the names the design's class
    resolves to (a class revision), else the first of them."""
    names = allowed.get(pool["vm_class"], [pool["vm_class"]])
    return ((md or {}).get("vm_class") if (md or {}).get("vm_class") in names else names[0]), names


def _pool_findings(out, name, pool, md, allowed):
    obj = "node_pool %s/%s" % (name, pool["name"])
    names = None
    if pool.get("vm_class") is not None:
        resolved, names = _resolved_class(md, pool, allowed)
        pool = dict(pool, vm_class=resolved)
    if md is None:
        out.append(finding("node_pool_missing", obj, "VKS cluster %s has no node pool %s" % (name, pool["name"])))
        return
    changes, refusal = pool_plan(md, pool)
    if refusal is not None:
        out.append(finding("node_pool_class_lacks", obj, "node pool %s: %s" % (pool["name"], refusal)))
        return
    diffs = []
    if "replicas" in changes:
        diffs.append("replicas %s (design %s)" % changes["replicas"])
    if "vm_class" in changes:
        diffs.append("VM class %s (design %s)" % (changes["vm_class"][0], " or ".join(names)))
    if diffs:
        out.append(finding("node_pool_changed", obj, "node pool %s: %s" % (pool["name"], ", ".join(diffs))))
    if "labels" in changes:
        labels, want = changes["labels"][0] or {}, changes["labels"][1] or {}
        wrong = ["%s=%s (design %s)" % (k, labels.get(k, "unset"), v) for k, v in sorted(want.items())
                 if labels.get(k) != v]
        wrong += ["%s=%s (not in the design)" % (k, labels[k]) for k in sorted(set(labels) - set(want))]
        out.append(finding(
            "node_pool_labels_changed", obj,
            "node pool %s labels its nodes differently: %s" % (pool["name"], ", ".join(wrong))))
    if "taints" in changes:
        taints, want = changes["taints"][0] or [], changes["taints"][1] or []
        out.append(finding(
            "node_pool_taints_changed", obj,
            "node pool %s taints its nodes with [%s], the design says [%s]: %s" % (
                pool["name"], ", ".join(_taint_set(taints)), ", ".join(_taint_set(want)),
                "pods without the toleration land on its GPUs" if len(taints) < len(want)
                else "pods of the pool may not schedule" if _taint_set(taints) != _taint_set(want)
                else "the same taints in another order, which vks_node_pool writes back")))


def audit_vks(derived, clusters, vm_classes=None):
    """Findings of the VKS link: each cluster and its node pools (MachineDeployments).

    Each node pool is planned by vks_node_pool's own plan (:func:`pool_plan`) from the pool as read
    through its ClusterClass's variables; a finding per field the plan changes, and the plan's refusal
    where the class has no place for the pool's labels or taints. With class revisions a pool's class
    is the one vm_class resolves against ``vm_classes`` (the live classes, {id: normal form}); without
    them read, the design's name or the revision of the design's shape."""
    out = []
    clusters = clusters or {}
    tenancy = _audit.role_inputs(derived, "supervisor_gpu_tenancy")
    if vm_classes is not None:
        allowed = dict((k, [v]) for k, v in _audit_vsphere.class_names(tenancy, vm_classes)[0].items())
    else:
        allowed = _audit_vsphere.designed_class_names(tenancy)
    adopting = _adopting(derived)
    for name, namespace, pools in _vks_expected(derived):
        have = clusters.get(name)
        if have is None:
            out.append(finding("vks_cluster_missing", "vks_cluster %s" % name,
                               "VKS cluster %s is not in namespace %s" % (name, namespace)))
            continue
        mds = have.get("machine_deployments") or {}
        as_designed = []
        for pool in pools:
            found = []
            _pool_findings(found, name, pool, mds.get(pool["name"]), allowed)
            out += found
            if not found:
                as_designed.append(pool["name"])
        out += not_owned_findings(name, as_designed, have.get("owned"), adopting.get(name, False))
    return out
