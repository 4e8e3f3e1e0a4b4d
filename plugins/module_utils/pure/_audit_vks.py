# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vks link of the drift audit: VKS clusters and their node pools, judged against the derived design (pure).

Live state, as the module reads it: ``clusters``: ``{name: {"namespace", "machine_deployments": {name: {"replicas", "vm_class",
"labels", "taints", "lacks"}}}}`` (each pool as ``_cluster_class.read_pool`` reads it through its
ClusterClass's variables; None where the class has no variable, the reason in ``lacks``) or the
name absent when the Cluster does not exist.

:data:`RULES` is this link's rule table (severity, link, one line); ``_audit_report`` assembles
every link's table into one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_vsphere


RULES = OrderedDict([
    ("vks_cluster_missing", ("error", "vks", "Every VKS cluster of the design exists on the Supervisor.")),
    ("node_pool_missing", ("error", "vks", "Every GPU pool has its node pool in its VKS cluster.")),
    ("node_pool_changed", ("warning", "vks", "A node pool has the design's replicas and VM class (the vmClass "
                                             "variable its ClusterClass defines).")),
    ("node_pool_labels_changed", ("error", "vks", "A node pool labels its nodes as the design says (the labels "
                                                  "variable of its ClusterClass).")),
    ("node_pool_taints_changed", ("error", "vks", "A node pool taints its nodes as the design says (the taints "
                                                  "variable of its ClusterClass).")),
    ("node_pool_class_lacks", ("error", "vks", "A node pool's ClusterClass has one variable for each of the node "
                                               "labels and taints the design gives the pool.")),
])


def finding(rule, obj, message, fix, severity=None):
    """A finding of a rule of this link's table."""
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


def _taint_set(taints):
    return sorted(_audit.taint_text(t) for t in taints or [])


def audit_vks(derived, clusters, vm_classes=None):
    """Findings of the VKS link: each cluster and its node pools (MachineDeployments).

    A node pool's fields are read through the variables of its Cluster's ClusterClass (the same
    plan vks_node_pool writes by); a field read as None is not judged. With class revisions a pool's
    class is the one vm_class resolves against ``vm_classes`` (the live classes, {id: normal form});
    without them read, the design's name or the revision of the design's shape."""
    out = []
    clusters = clusters or {}
    tenancy = _audit.role_inputs(derived, "supervisor_gpu_tenancy")
    if vm_classes is not None:
        allowed = dict((k, [v]) for k, v in _audit_vsphere.class_names(tenancy, vm_classes)[0].items())
    else:
        allowed = _audit_vsphere.designed_class_names(tenancy)
    for name, namespace, pools in _vks_expected(derived):
        have = clusters.get(name)
        if have is None:
            out.append(finding("vks_cluster_missing", "vks_cluster %s" % name,
                               "VKS cluster %s is not in namespace %s" % (name, namespace),
                               "create the cluster, or fix vks_clusters in the design"))
            continue
        mds = have.get("machine_deployments") or {}
        for pool in pools:
            obj = "node_pool %s/%s" % (name, pool["name"])
            md = mds.get(pool["name"])
            if md is None:
                out.append(finding("node_pool_missing", obj,
                                   "VKS cluster %s has no node pool %s" % (name, pool["name"]),
                                   "add it (vks_node_pool, or the vks_gpu_node_pools role)"))
                continue
            diffs = []
            if md.get("replicas") is not None and pool.get("replicas") is not None and md["replicas"] != pool["replicas"]:
                diffs.append("replicas %s (design %s)" % (md["replicas"], pool.get("replicas")))
            if pool.get("vm_class") is not None and md.get("vm_class") not in allowed.get(pool["vm_class"],
                                                                                          [pool["vm_class"]]):
                diffs.append("VM class %s (design %s)" % (md.get("vm_class"), " or ".join(
                    allowed.get(pool["vm_class"], [pool["vm_class"]]))))
            if diffs:
                out.append(finding("node_pool_changed", obj, "node pool %s: %s" % (pool["name"], ", ".join(diffs)),
                                   "set it back (vks_node_pool, or the vks_gpu_node_pools role)"))
            labels = md.get("labels")
            if labels is not None and pool.get("labels") is not None:
                want = dict((k, str(v)) for k, v in pool["labels"].items())
                wrong = ["%s=%s (design %s)" % (k, labels.get(k, "unset"), v) for k, v in sorted(want.items())
                         if labels.get(k) != v]
                wrong += ["%s=%s (not in the design)" % (k, labels[k]) for k in sorted(set(labels) - set(want))]
                if wrong:
                    out.append(finding(
                        "node_pool_labels_changed", obj,
                        "node pool %s labels its nodes differently: %s" % (pool["name"], ", ".join(wrong)),
                        "set the node pool labels back (vks_node_pool labels, or the vks_gpu_node_pools role)"))
            taints = md.get("taints")
            if taints is not None and pool.get("taints") is not None and _taint_set(taints) != _taint_set(pool["taints"]):
                out.append(finding(
                    "node_pool_taints_changed", obj,
                    "node pool %s taints its nodes with [%s], the design says [%s]: %s" % (
                        pool["name"], ", ".join(_taint_set(taints)), ", ".join(_taint_set(pool["taints"])),
                        "pods without the toleration land on its GPUs" if len(taints) < len(pool["taints"])
                        else "pods of the pool may not schedule"),
                    "set the node pool taints back (vks_node_pool taints, or the vks_gpu_node_pools role)"))
            lacking = [f for f in ("labels", "taints") if pool.get(f) and (md.get("lacks") or {}).get(f)]
            if lacking:
                out.append(finding(
                    "node_pool_class_lacks", obj,
                    "node pool %s: %s" % (pool["name"], "; ".join(md["lacks"][f] for f in lacking)),
                    "move the cluster to a ClusterClass with node labels and taints (builtin-generic), or "
                    "take them out of the pool's design; vks_node_pool refuses the pool until then"))
    return out
