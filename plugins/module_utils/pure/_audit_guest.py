# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest link of the drift audit: the guest cluster's nodes and the objects the guest roles write, judged against the derived design (pure).

Live state, as the module reads it: ``nodes``: ``[{"name", "labels": {}, "taints": [{"key", "value", "effect"}],
"capacity": {}, "allocatable": {}}]`` (``allocatable`` where read: the advertised GPU count is judged from it);
``namespaces``: names; ``namespace_labels``: ``{name: labels}``;
``resource_quotas``: ``{namespace: {quota name: hard dict}}``; ``resource_quota_scopes``: ``{namespace:
{quota name: scopeSelector or None}}``; ``secrets``: ``{namespace:
[names]}`` (only the names asked for need be there); ``priority_classes``: ``{name: {"value",
"preemptionPolicy", "description", "globalDefault"}}`` (the PriorityClasses, Namespaces and ResourceQuotas
are judged by their plans in ``_guest_plan``, as guest_objects converges them); ``cluster_policy``: ``{"exists", "spec"}``;
``device_plugin_config``: ``{"exists", "data": {key: parsed YAML}}``; ``dcgm_metrics_config``:
``{"exists", "data": {key: text}}``; ``kueue``: ``{"served",
"resource_flavors": {name: spec}, "cluster_queues": {name: spec}, "local_queues": {namespace:
{name: spec}}, "configuration": Kueue's parsed Configuration or None}``; ``culling``: ``{"exists", "schedule", "image", "env": {}}`` (the CronJob), or
``{"kubeflow": True, "exists", "env": {}}`` (Kubeflow's notebook controller's container), with ``objects``
(the culler's live objects) where they were read: the culler is judged by its objects' plans in ``_guest_plan``. What the guest
roles write is built by ``_k8s_objects`` from the role inputs derive() gives them.

:data:`RULES` is this link's rule table (severity, link, one line, fix); ``_audit_report`` assembles
every link's table into one. Every finding takes its rule's fix from there; a fix that names the object (the node
and its missing taints, the pool's profile) has format fields the finding fills.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _device_plugin_restart as _restart
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_node_plan
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan

GPU_TAINT_KEY = "nvidia.com/gpu"
PROFILE_LABEL = "nvidia.com/vgpu.profile"
POOL_LABEL = "gpupool.vcf/pool"

RULES = OrderedDict([
    ("gpu_node_untainted", ("error", "guest",
                            "Every GPU node carries the nvidia.com/gpu taint and its pool's taints.",
                            "set the taints on the node pool (vks_node_pool taints) so every node gets them; "
                            "kubectl taint nodes {node} {taints} for this node now")),
    ("gpu_node_profile_label_missing", ("error", "guest",
                                        "Every GPU node of a pool carries the nvidia.com/vgpu.profile label of the "
                                        "pool's profile.",
                                        "set the node pool labels (vks_node_pool labels) to "
                                        "nvidia.com/vgpu.profile={profile}")),
    ("node_pool_no_nodes", ("warning", "guest",
                            "A node pool with replicas has nodes in the guest cluster.",
                            "check the node pool on the Supervisor and its gpupool.vcf/pool label")),
    ("guest_namespace_missing", ("error", "guest",
                                 "Every tenant namespace exists in the guest cluster.",
                                 "create it with its quotas (gpu_scheduling_policy role)")),
    ("gpu_quota_missing", ("error", "guest",
                           "Every tenant namespace has its GPU ResourceQuotas.",
                           "create it (gpu_scheduling_policy role)")),
    ("gpu_quota_changed", ("warning", "guest",
                           "A GPU ResourceQuota has the design's limits.",
                           "set it back (gpu_scheduling_policy role); its scope is immutable: where the scope "
                           "changed, the role deletes and recreates a quota the collection made and refuses one made "
                           "by hand, which you delete yourself")),
    ("priority_class_missing", ("error", "guest",
                                "Every PriorityClass of the design exists.",
                                "create it (gpu_scheduling_policy role)")),
    ("priority_class_changed", ("warning", "guest",
                                "A PriorityClass has the design's value and preemption policy (both immutable) and "
                                "description.",
                                "set it back (gpu_scheduling_policy role); value and preemption policy are "
                                "immutable: where they changed, the role deletes and recreates a PriorityClass the "
                                "collection made and refuses one made by hand, which you delete yourself")),
    ("guest_namespace_labels_changed", ("warning", "guest",
                                        "A tenant namespace carries the labels the gpu_scheduling_policy role sets "
                                        "(Kueue selects training tenants by them).",
                                        "set the labels back (gpu_scheduling_policy role)")),
    ("licensing_secret_missing", ("error", "guest",
                                  "The licensing Secret is in the GPU Operator namespace.",
                                  "create it from a DLS client configuration token (nls_licensing role)")),
    ("cluster_policy_missing", ("error", "guest",
                                "The GPU Operator's ClusterPolicy exists.",
                                "install the GPU Operator chart (gpu_operator role)")),
    ("cluster_policy_changed", ("error", "guest",
                                "The ClusterPolicy has the driver (repository, image, version, pull Secrets), "
                                "licensing Secret and device plugin configuration the gpu_operator role sets.",
                                "set it back (gpu_operator role; nls_licensing points it at the licensing Secret)")),
    ("mig_strategy_changed", ("error", "guest",
                              "The ClusterPolicy's mig.strategy is the design's (the gpu_operator role changes a live "
                              "one only with guest.allow_mig_strategy_change).",
                              "check the workloads that request GPUs, then set it back (gpu_operator role): the role "
                              "changes a live mig.strategy only where the design sets guest.allow_mig_strategy_change "
                              "true (gpu_operator_allow_mig_strategy_change)")),
    ("guest_driver_missing", ("error", "guest",
                              "The design names the vGPU guest driver of a vGPU guest cluster (the gpu_operator role "
                              "refuses to install the operator without one).",
                              "add guest.driver to the design and run site.yml (gpu_operator role)")),
    ("time_slicing_config_missing", ("error", "guest",
                                     "The device plugin ConfigMap of the time-sliced pools exists.",
                                     "create it (gpu_operator role)")),
    ("time_slicing_config_changed", ("error", "guest",
                                     "The device plugin ConfigMap holds the configurations the gpu_operator role "
                                     "writes (MIG strategy, time-slicing replicas per pool).",
                                     "set it back (gpu_operator role, which then restarts the device plugin "
                                     "node by node: the plugin reads it only when it starts)")),
    ("device_plugin_capacity", ("error", "guest",
                                "Every GPU node advertises (status.allocatable) the count the design's sharing gives it: "
                                "GPUs x replicas of its time-slicing configuration; the device plugin reads its "
                                "ConfigMap only when it starts.",
                                "restart the device plugin node by node (gpu_operator role, device_plugin_restart: "
                                "drained first where pods hold GPUs)")),
    ("dcgm_metrics_config_missing", ("warning", "guest",
                                     "The DCGM exporter metrics ConfigMap the gpu_operator role writes exists.",
                                     "create it (gpu_operator role)")),
    ("dcgm_metrics_config_changed", ("warning", "guest",
                                     "The DCGM exporter metrics ConfigMap lists the metrics the gpu_operator role "
                                     "writes (profiling counters, framebuffer, vGPU license status).",
                                     "set it back (gpu_operator role); the exporter reads it when its pods restart")),
    ("kueue_missing", ("error", "guest",
                       "The guest cluster serves Kueue where the design gang-schedules training.",
                       "install Kueue in the guest cluster, then run the gpu_scheduling_policy role")),
    ("resource_flavor_missing", ("error", "guest",
                                 "Every gang-scheduled pool's Kueue ResourceFlavor exists.",
                                 "create it (gpu_scheduling_policy role)")),
    ("resource_flavor_changed", ("warning", "guest",
                                 "The ResourceFlavor has the pool's node labels and tolerations.",
                                 "set it back (gpu_scheduling_policy role)")),
    ("cluster_queue_missing", ("error", "guest",
                               "Every gang-scheduled pool's Kueue ClusterQueue exists.",
                               "create it (gpu_scheduling_policy role)")),
    ("cluster_queue_changed", ("error", "guest",
                               "The ClusterQueue has the role's namespace selector, queueing strategy, preemption and "
                               "the pool's size as nominal quota.",
                               "set it back (gpu_scheduling_policy role)")),
    ("local_queue_missing", ("error", "guest",
                             "Every tenant with quota on a gang-scheduled pool has its Kueue LocalQueue.",
                             "create it (gpu_scheduling_policy role)")),
    ("local_queue_changed", ("error", "guest",
                             "A LocalQueue points at the training ClusterQueue.",
                             "set it back (gpu_scheduling_policy role); its clusterQueue is immutable: the role "
                             "deletes and recreates a LocalQueue the collection made and refuses one made by hand, "
                             "which you delete yourself")),
    ("kueue_config_changed", ("error", "guest",
                              "Kueue's configuration has waitForPodsReady (the design's timeout, blockAdmission) "
                              "where the design gang-schedules training.",
                              "set it (gpu_scheduling_policy role, which restarts Kueue); where the configuration "
                              "itself is missing, install Kueue from its manifests or chart, or point the role at its "
                              "configuration (gpu_scheduling_policy_kueue_config_map)")),
    ("notebook_culling_missing", ("warning", "guest",
                                  "The notebook culler's objects exist: without Kubeflow its namespace, CronJob, "
                                  "script ConfigMap, ServiceAccount and RBAC; with Kubeflow its notebook controller.",
                                  "create it (gpu_scheduling_policy role); with Kubeflow, install Kubeflow's notebook "
                                  "controller, or set guest.culling.mechanism to cronjob")),
    ("notebook_culling_changed", ("warning", "guest",
                                  "The culler's objects hold what the role sets: the CronJob's schedule, image and idle "
                                  "times, its RBAC; Kubeflow's notebook controller's culling settings.",
                                  "set it back (gpu_scheduling_policy role)")),
])


def finding(rule, obj, message, fix=None, severity=None, **fields):
    """A finding of a rule of this link's table: ``fix`` None takes the table's, with ``fields`` in its format fields
    (the node, its missing taints, the pool's profile)."""
    if fix is None and _audit.table_fix(RULES[rule]) is not None:
        fix = _audit.table_fix(RULES[rule]).format(**fields)
    return _audit.finding(rule, obj, message, fix, RULES[rule], severity=severity)


# object_not_owned is one rule of the catalogue (its row is the vsphere link's); a guest object's finding of it
# carries this link and this fix
NOT_OWNED = ("info", "guest", "A guest object in scope is the collection's own (it carries the label "
                              "app.kubernetes.io/managed-by=gpupool.vcf).",
             "run site.yml: the design sets adopt: true, which labels it as the collection's (gpu_scheduling_policy "
             "role)")


def _not_owned(want, changes):
    """``object_not_owned`` where the object's plan adopts it (the design adopts; the object lacks the label)."""
    if not _guest_plan.adopting(changes):
        return []
    name = _guest_plan.object_name(want)
    return [_audit.finding("object_not_owned", name, "%s was made by hand (it lacks the label "
                           "app.kubernetes.io/managed-by=gpupool.vcf): until it is adopted the collection never "
                           "replaces it" % name, None, NOT_OWNED)]


def _split(changes):
    """(the changes of the object's fields, those of its ownership record)."""
    return ([c for c in changes if c.field != _guest_plan.OWNER_FIELD],
            [c for c in changes if c.field == _guest_plan.OWNER_FIELD])


def licensing_secret_matches(name, secret_name):
    """The design's licensing Secret, or one nls_licensing made from it (``<secret_name>-<content hash>``)."""
    return name == secret_name or re.match(r"^%s-[0-9a-f]{10}$" % re.escape(secret_name), name or "") is not None


def guest_inputs(derived):
    """(gpu_operator inputs, gpu_scheduling_policy inputs): the roles' defaults overridden by what
    derive() gives them, the same variables site.yml passes to the roles."""
    return (_objects.role_inputs("gpu_operator", _audit.role_inputs(derived, "gpu_operator")),
            _objects.role_inputs("gpu_scheduling_policy", _audit.role_inputs(derived, "gpu_scheduling_policy")))


def _diff_text(diffs):
    return ", ".join("%s %s (design %s)" % (path, "unset" if have is None else have, want) for path, have, want in diffs)


def audit_guest(derived, nodes=None, namespaces=None, resource_quotas=None, secrets=None,
                priority_classes=None, licensing_secret_in_use=None, namespace_labels=None, cluster_policy=None,
                device_plugin_config=None, kueue=None, culling=None, dcgm_metrics_config=None, resource_quota_scopes=None,
                object_labels=None):
    """Findings of the guest link: GPU nodes, tenant namespaces and quotas, PriorityClasses, the
    licensing Secret, the ClusterPolicy, the device plugin ConfigMap, Kueue, notebook culling.

    What the roles write is built from the inputs derive() gives them (``derived["roles"]``) by
    ``_k8s_objects``; a part not read (None) is not judged. The licensing Secret is the one the
    ClusterPolicy names when there is one, else any Secret named as the design says or
    ``<secret_name>-<hash>`` (rotation by name).

    Where the role adopts (``gpu_scheduling_policy_adopt``, from the design's ``adopt``), an object in scope
    without the collection's label is ``object_not_owned`` (info): namespaces judged from
    ``namespace_labels``, the other objects from ``object_labels`` ({object name as findings name it:
    labels}; None: not read, not judged).
    """
    out = []
    op, policy = guest_inputs(derived)
    _guest_nodes(out, derived, nodes)
    missing_ns = _scheduling_objects(out, policy, namespaces, namespace_labels, resource_quotas,
                                     resource_quota_scopes, priority_classes, object_labels)
    # the Secret the design names (nls_licensing makes <name>-<hash> of it); none: licensing is not judged
    secret_name = op.get("gpu_operator_licensing_secret_name") or None
    ns = op["gpu_operator_namespace"]
    cp_spec = (cluster_policy or {}).get("spec") if (cluster_policy or {}).get("exists") else None
    if cp_spec is not None:
        licensing_secret_in_use = ((cp_spec.get("driver") or {}).get("licensingConfig") or {}).get("secretName") or None
    if secrets is not None and secret_name:
        _licensing_secret(out, ns, secret_name, secrets.get(ns) or [], licensing_secret_in_use)
    if cluster_policy is not None:
        refusal = _objects.missing_guest_driver(op)
        if refusal:
            out.append(finding("guest_driver_missing", "design guest.driver", refusal))
        _cluster_policy(out, op, cp_spec, secret_name)
    if device_plugin_config is not None:
        _device_plugin_config(out, op, device_plugin_config)
    _device_plugin_capacity(out, op, nodes)
    if dcgm_metrics_config is not None:
        _dcgm_metrics_config(out, op, dcgm_metrics_config)
    if kueue is not None:
        _kueue(out, policy, kueue, missing_ns, object_labels)
    if culling is not None:
        _culling(out, policy, culling)
    return out


def _licensing_secret(out, ns, secret_name, present, in_use):
    """The licensing Secret's finding: its plan (``_guest_plan.plan_secret``) for the Secret the ClusterPolicy names,
    else one named as the design says or ``<secret_name>-<hash>``. The audit knows it by name only (its content is
    the token), so its plan is whether it exists: ``present`` holds the names in namespace `ns`."""
    if in_use:
        name = in_use
        what = "the ClusterPolicy names licensing Secret %s, which is not in namespace %s" % (name, ns)
    else:
        found = [n for n in present if licensing_secret_matches(n, secret_name)]
        name = found[0] if found else secret_name
        what = "no licensing Secret %s (or %s-<hash>) is in namespace %s" % (name, name, ns)
    want = _guest_plan.licensing_secret(ns, name, {})
    if _guest_plan.plan(_live(want, want["metadata"]["labels"]) if name in present else None, want):
        out.append(finding(
            "licensing_secret_missing", _guest_plan.object_name(want),
            "%s: guest vGPU drivers run unlicensed and are throttled" % what))


def _guest_nodes(out, derived, nodes):
    """The GPU nodes' findings: the changes of the Node plan (``_guest_node_plan.plan_node``, as guest_objects plans
    a pool's nodes) to the design's taints of its pool (the GPU taint first; a GPU node of no pool: the GPU taint)
    and its pool's vGPU profile label; a pool with replicas and no node is a warning no plan repairs."""
    pools = _audit.design_pools(derived)
    gpu_taint = {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}
    seen = dict((p, 0) for p in pools)
    for node in sorted(nodes or [], key=lambda n: n["name"]):
        if not _audit.is_gpu_node(node, pools):
            continue
        pool_name = (node.get("labels") or {}).get(POOL_LABEL)
        pool = pools.get(pool_name)
        if pool is not None:
            seen[pool_name] += 1
        wanted = list(pool.get("taints") or []) if pool is not None else [gpu_taint]
        if not any(t["key"] == GPU_TAINT_KEY for t in wanted):
            wanted.insert(0, gpu_taint)
        profile = pool["labels"].get(PROFILE_LABEL) if pool is not None else None
        changes = _guest_node_plan.plan_node(_guest_node_plan.api_node(node), {PROFILE_LABEL: profile} if profile else {},
                                             wanted)
        missing = [c.after for c in changes if c.field.startswith(_guest_node_plan.TAINT_FIELD)]
        if missing:
            out.append(finding(
                "gpu_node_untainted", "node %s" % node["name"],
                "GPU node %s%s lacks taint(s) %s: pods without the toleration land on it" % (
                    node["name"], " (pool %s)" % pool_name if pool_name else "",
                    ", ".join(_audit.taint_text(t) for t in missing)),
                node=node["name"], taints=" ".join(_audit.taint_text(t) for t in missing)))
        for change in [c for c in changes if c.field == _guest_node_plan.LABEL_FIELD + PROFILE_LABEL]:
            out.append(finding(
                "gpu_node_profile_label_missing", "node %s" % node["name"],
                "GPU node %s of pool %s has %s=%s, the pool's profile is %s" % (
                    node["name"], pool_name, PROFILE_LABEL, "(none)" if change.before is None else change.before,
                    change.after),
                profile=change.after))
    if nodes is not None:
        for name, count in seen.items():
            if not count and pools[name].get("replicas"):
                out.append(finding(
                    "node_pool_no_nodes", "node_pool %s" % name,
                    "no node of the guest cluster has %s=%s; the design asks for %s" % (
                        POOL_LABEL, name, pools[name]["replicas"])))


def scheduling_objects(policy):
    """The PriorityClasses, tenant Namespaces and ResourceQuotas the gpu_scheduling_policy role writes
    with its inputs `policy` (the manifests guest_objects converges to)."""
    return _guest_plan.wanted_objects(
        policy.get("gpu_scheduling_policy_priority_classes") or [], policy.get("gpu_scheduling_policy_tenants") or [],
        policy.get("gpu_scheduling_policy_quota_name") or "gpu-quota",
        policy.get("gpu_scheduling_policy_gpu_resource") or "nvidia.com/gpu",
        policy.get("gpu_scheduling_policy_mig_resources") or [])


def live_guest_objects(objects):
    """audit_guest's ``namespaces``, ``namespace_labels``, ``resource_quotas``, ``resource_quota_scopes``,
    ``priority_classes``, ``kueue`` (its objects) and ``object_labels`` from live objects ``{(kind, namespace, name): object}`` (as
    guest_objects reads them)."""
    out = dict(namespaces=[], namespace_labels={}, resource_quotas={}, resource_quota_scopes={}, priority_classes={},
               kueue=dict(served=True, resource_flavors={}, cluster_queues={}, local_queues={}), object_labels={})
    for (kind, ns, name), obj in sorted(objects.items()):
        out["object_labels"][_guest_plan.object_name(obj)] = dict((obj.get("metadata") or {}).get("labels") or {})
        if kind == "Namespace":
            out["namespaces"].append(name)
            out["namespace_labels"][name] = dict((obj.get("metadata") or {}).get("labels") or {})
        elif kind == "ResourceQuota":
            spec = obj.get("spec") or {}
            out["resource_quotas"].setdefault(ns, {})[name] = dict(spec.get("hard") or {})
            out["resource_quota_scopes"].setdefault(ns, {})[name] = spec.get("scopeSelector")
        elif kind == "PriorityClass":
            out["priority_classes"][name] = dict((k, obj.get(k)) for k in (
                "value", "preemptionPolicy", "description", "globalDefault"))
        elif kind == "LocalQueue":
            out["kueue"]["local_queues"].setdefault(ns, {})[name] = dict(obj.get("spec") or {})
        elif kind in ("ResourceFlavor", "ClusterQueue"):
            out["kueue"]["resource_flavors" if kind == "ResourceFlavor" else "cluster_queues"][name] = dict(
                obj.get("spec") or {})
    return out


def _live(obj, labels=None, **fields):
    """A live object as the plans read it, built from what the audit read: the wanted metadata, with
    `labels` where they were read (else the collection's: ownership not judged)."""
    meta = dict(obj["metadata"])
    meta["labels"] = dict(_objects.MANAGED_BY) if labels is None else dict(labels)
    out = dict(apiVersion=obj["apiVersion"], kind=obj["kind"], metadata=meta)
    out.update(fields)
    return out


def _labels(object_labels, want):
    """The labels read of the object `want` names; None where they were not read."""
    return None if object_labels is None else object_labels.get(_guest_plan.object_name(want)) or {}


def _scheduling_objects(out, policy, namespaces, namespace_labels, quotas, scopes, classes, object_labels=None):
    """Findings of the PriorityClasses, tenant Namespaces and ResourceQuotas: one where the object's plan
    (``_guest_plan``, with the role's adopt) has a change. A part not read (None) is not judged; the quotas
    of a missing namespace are part of its one finding. Returns the missing namespaces."""
    missing_ns = set()
    found_classes = []
    adopt = _objects.flag(policy.get("gpu_scheduling_policy_adopt"))
    for want in scheduling_objects(policy):
        kind, ns, name = _guest_plan.key(want)
        if kind == "PriorityClass":
            if classes is not None:
                have = classes.get(name)
                live = None if have is None else _live(want, _labels(object_labels, want), **dict(
                    (k, have.get(k, want[k])) for k in ("value", "preemptionPolicy", "description", "globalDefault")))
                fields, owner = _split(_guest_plan.plan(live, want, adopt))
                found_classes += _priority_class(want, fields) + _not_owned(want, owner)
        elif namespaces is None or ns in missing_ns:
            continue
        elif kind == "Namespace":
            if name not in namespaces:
                missing_ns.add(name)
            labels = dict(want["metadata"]["labels"], **_objects.MANAGED_BY) if namespace_labels is None else (
                namespace_labels.get(name) or {})
            live = None if name not in namespaces else _live(want, labels, metadata=dict(name=name, labels=labels))
            fields, owner = _split(_guest_plan.plan(live, want, adopt))
            out += _namespace(want, fields) + _not_owned(want, owner)
        else:
            have = (quotas or {}).get(ns, {}).get(name)
            spec = dict(hard=have, scopeSelector=want["spec"].get("scopeSelector") if scopes is None else (
                scopes.get(ns) or {}).get(name))
            live = None if have is None else _live(want, _labels(object_labels, want), spec=spec)
            fields, owner = _split(_guest_plan.plan(live, want, adopt))
            out += _guest_quota(want, fields) + _not_owned(want, owner)
    out += found_classes
    return missing_ns


def _namespace(want, changes):
    name = want["metadata"]["name"]
    obj = "namespace %s" % name
    if not changes:
        return []
    if changes[0].action == "create":
        return [finding("guest_namespace_missing", obj, "tenant namespace %s does not exist in the guest cluster" % name)]
    wrong = ["%s=%s (design %s)" % (c.field[len("metadata.labels."):], "unset" if c.before is None else c.before, c.after)
             for c in changes]
    training = [c for c in changes if c.field == "metadata.labels.gpupool.vcf/training" and c.after == "true"]
    return [finding("guest_namespace_labels_changed", obj, "tenant namespace %s: %s%s" % (name, ", ".join(wrong), (
        "; Kueue's ClusterQueue selects training tenants by gpupool.vcf/training=true" if training else "")))]


def _guest_quota(want, changes):
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    obj = "resource_quota %s/%s" % (ns, name)
    if not changes:
        return []
    if changes[0].action == "create":
        return [finding("gpu_quota_missing", obj, "namespace %s has no ResourceQuota %s (%s): its GPU use is unbounded" % (
            ns, name, ", ".join("%s=%s" % kv for kv in sorted(want["spec"]["hard"].items()))))]
    text = ["%s=%s (design %s)" % (c.field[len("spec.hard."):], "unset" if c.before is None else c.before, c.after)
            if c.field.startswith("spec.hard.") else "%s %s (design %s)" % (c.field, c.before, c.after) for c in changes]
    return [finding("gpu_quota_changed", obj, "ResourceQuota %s/%s: %s" % (ns, name, ", ".join(text)))]


def _priority_class(want, changes):
    name = want["metadata"]["name"]
    obj = "priority_class %s" % name
    if not changes:
        return []
    if changes[0].action == "create":
        return [finding("priority_class_missing", obj, "PriorityClass %s does not exist" % name)]
    text = ["%s %r (design %r)" % (c.field, c.before, c.after) if c.field == "description"
            else "%s %s (design %s)" % (c.field, c.before, c.after) for c in changes]
    return [finding("priority_class_changed", obj, "PriorityClass %s: %s" % (name, ", ".join(text)))]


def _operator_object(op, kind, name):
    """The gpu_operator role's object of `kind` named `name` with its inputs `op` (``_guest_plan``); None when the
    role writes none."""
    for obj in _guest_plan.operator_objects(op):
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    return None


def _cluster_policy(out, op, spec, secret_prefix):
    """Findings of the ClusterPolicy: its plan's changes (``_guest_plan.plan_cluster_policy``, the fields the role
    patches back). The licensing Secret's name is judged by the design's name: the one the ClusterPolicy names
    when it is that name or ``<name>-<hash>`` (nls_licensing's rotation), else that name's ``-<hash>`` form."""
    want = _guest_plan.cluster_policy(op)
    licensing = want["spec"]["driver"].setdefault("licensingConfig", {})
    licensing.pop("secretName", None)
    secret = ((((spec or {}).get("driver") or {}).get("licensingConfig") or {}).get("secretName"))
    if secret_prefix:
        licensing["secretName"] = secret if licensing_secret_matches(secret, secret_prefix) else (
            "%s-<hash>" % secret_prefix)
    obj = _guest_plan.object_name(want)
    changes = _guest_plan.plan(None if spec is None else _live(want, spec=spec), want)
    if not changes:
        return
    if changes[0].action == _guest_plan.MISSING:
        out.append(finding(
            "cluster_policy_missing", obj,
            "the GPU Operator has no ClusterPolicy %s: no guest driver, device plugin or licensing" % (
                _objects.CLUSTER_POLICY)))
        return
    diffs = [(c.field[len("spec."):], c.before, c.after) for c in changes]
    strategy = [d for d in diffs if d[0] == "mig.strategy"]
    diffs = [d for d in diffs if d[0] != "mig.strategy"]
    if strategy:
        out.append(finding(
            "mig_strategy_changed", obj, "ClusterPolicy %s: %s; the GPU resource every workload requests depends on "
            "it (nvidia.com/gpu or nvidia.com/mig-<profile>)%s" % (
                _objects.CLUSTER_POLICY, _diff_text(strategy),
                "; the design allows the change (guest.allow_mig_strategy_change)"
                if _objects.flag(op.get("gpu_operator_allow_mig_strategy_change")) else "")))
    if diffs:
        out.append(finding(
            "cluster_policy_changed", obj, "ClusterPolicy %s: %s" % (_objects.CLUSTER_POLICY, _diff_text(diffs))))


def _config_map_changes(op, name, live):
    """(the wanted ConfigMap, its plan's changes) from the audit's read ``{"exists", "data"}``; (None, []) when
    the role writes none."""
    want = _operator_object(op, "ConfigMap", name)
    if want is None:
        return None, []
    have = _live(want, data=live.get("data") or {}) if live.get("exists") else None
    return want, _guest_plan.plan(have, want)


def _dcgm_metrics_config(out, op, live):
    want, changes = _config_map_changes(op, op["gpu_operator_dcgm_metrics_config_name"], live)
    if not changes:
        return
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    obj = _guest_plan.object_name(want)
    if changes[0].action == "create":
        out.append(finding(
            "dcgm_metrics_config_missing", obj,
            "the DCGM exporter metrics ConfigMap %s/%s is missing: the exporter exports its own list, without "
            "the profiling counters the design's dashboards read" % (ns, name)))
        return
    [change] = changes
    have = [f for f, _t in _objects.dcgm_metrics_fields(change.before)]
    wanted = [f for f, _t in _objects.dcgm_metrics_fields(change.after)]
    missing = [f for f in wanted if f not in have]
    extra = [f for f in have if f not in wanted]
    what = "; ".join(part for part in (
        "missing %s" % ", ".join(missing) if missing else "",
        "not the role's %s" % ", ".join(extra) if extra else "") if part) or "types or order differ"
    out.append(finding("dcgm_metrics_config_changed", obj,
                       "DCGM exporter metrics ConfigMap %s/%s: %s" % (ns, name, what)))


def _device_plugin_config(out, op, live):
    want, changes = _config_map_changes(op, op["gpu_operator_device_plugin_config_name"], live)
    if not changes:
        return
    ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
    obj = _guest_plan.object_name(want)
    if changes[0].action == "create":
        out.append(finding(
            "time_slicing_config_missing", obj,
            "the device plugin ConfigMap %s/%s is missing: time-sliced pools (%s) advertise one GPU per card" % (
                ns, name, ", ".join(sorted(op["gpu_operator_time_slicing"])))))
        return
    diffs = []
    for change in changes:
        key = change.field[len("data."):]
        if change.before is None:
            diffs.append((key, None, "a configuration"))
            continue
        diffs += [("%s: %s" % (key, p), h, w) for p, h, w in _objects.differences(
            _guest_plan.parse_config(change.after), _guest_plan.parse_config(change.before))]
    out.append(finding("time_slicing_config_changed", obj,
                       "device plugin ConfigMap %s/%s: %s" % (ns, name, _diff_text(diffs))))


def _device_plugin_capacity(out, op, nodes):
    """The GPU nodes whose advertised count differs from the design's sharing (``_device_plugin_restart``, the plan
    device_plugin_restart repairs by): judged where the design time-slices and the nodes were read with their
    ``allocatable``."""
    if not op.get("gpu_operator_time_slicing") or nodes is None:
        return
    read = [dict(metadata=dict(name=n["name"], labels=n.get("labels") or {}),
                 status=dict(allocatable=n["allocatable"], capacity=n.get("capacity") or {}))
            for n in nodes if n.get("allocatable") is not None]
    for row in _restart.capacity_findings(read, op["gpu_operator_time_slicing"]):
        out.append(finding("device_plugin_capacity", "node %s" % row["object"][len("Node/"):], row["message"]))


def kueue_objects(policy):
    """The ResourceFlavors, ClusterQueues and LocalQueues the gpu_scheduling_policy role writes with its
    inputs `policy` (the manifests guest_objects converges to)."""
    return _guest_plan.kueue_objects(policy)


def _kueue(out, policy, live, missing_ns, object_labels=None):
    """Findings of the Kueue objects: one where the object's plan (``_guest_plan``) has a change; a
    LocalQueue of a missing namespace is part of the namespace's finding."""
    want = kueue_objects(policy)
    if not want:  # no queue: the role still keeps waitForPodsReady where it is given
        _kueue_config(out, policy, live)
        return
    api_version = want[0]["apiVersion"]
    if not live.get("served", True):
        out.append(finding("kueue_missing", "kueue %s" % api_version,
                           "the guest cluster does not serve %s: training jobs are not gang-scheduled" % api_version))
        return
    for obj in want:
        kind, ns, name = _guest_plan.key(obj)
        rule = _guest_plan.SNAKE[kind]
        if kind == "LocalQueue":
            if ns in missing_ns:
                continue
            have = ((live.get("local_queues") or {}).get(ns) or {}).get(name)
        else:
            have = (live.get({"ResourceFlavor": "resource_flavors", "ClusterQueue": "cluster_queues"}[kind]) or {}).get(name)
        changes, owner = _split(_guest_plan.plan(None if have is None else _live(
            obj, _labels(object_labels, obj), spec=have), obj, _objects.flag(policy.get("gpu_scheduling_policy_adopt"))))
        out += _not_owned(obj, owner)
        if not changes:
            continue
        label = "%s/%s" % (ns, name) if ns else name
        if changes[0].action == "create":
            out.append(finding("%s_missing" % rule, _guest_plan.object_name(obj), "Kueue %s %s does not exist: training "
                               "jobs %s" % (kind, label, "of its namespace wait unadmitted" if kind == "LocalQueue"
                                            else "are not admitted")))
            continue
        diffs = [(path, h, w) for c in changes for path, h, w in _objects.differences(c.after, c.before, c.field[len("spec."):])]
        out.append(finding("%s_changed" % rule, _guest_plan.object_name(obj), "Kueue %s %s: %s" % (
            kind, label, _diff_text(diffs))))
    _kueue_config(out, policy, live)


def _kueue_config(out, policy, live):
    """waitForPodsReady in Kueue's configuration (``live["configuration"]``: the parsed
    Configuration, None where its ConfigMap or key is missing; absent: not read)."""
    if "configuration" not in live or _objects.kueue_wait_for_pods_ready(policy) is None:
        return
    ns, name = policy["gpu_scheduling_policy_kueue_namespace"], policy["gpu_scheduling_policy_kueue_config_map"]
    obj = "config_map %s/%s" % (ns, name)
    config = live["configuration"]
    restart = "; Kueue's controller reads it only when it starts (the role restarts it)"
    [want] = _guest_plan.kueue_config_map(policy)
    try:  # the plan guest_objects converges from: missing, or the key with waitForPodsReady set
        changes = _guest_plan.plan(_live(want, data={} if config is None else {
            want[_guest_plan.KUEUE_CONFIGURATION]["key"]: config}), want)
    except ValueError as exc:
        out.append(finding("kueue_config_changed", obj, "Kueue's configuration %s/%s: %s%s" % (
            ns, name, _diff_text([("configuration", "not a Kueue Configuration", str(exc))]), restart)))
        return
    if not changes:
        return
    if changes[0].action == _guest_plan.MISSING:
        out.append(finding("kueue_config_changed", obj,
                           "Kueue's configuration %s/%s (key %s) is missing: waitForPodsReady cannot be set, gang "
                           "jobs may start some of their pods and hold GPUs waiting for the rest" % (
                               ns, name, policy["gpu_scheduling_policy_kueue_config_key"])))
        return
    diffs = _objects.kueue_config_differences(policy, config)
    out.append(finding("kueue_config_changed", obj, "Kueue's configuration %s/%s: %s%s" % (
        ns, name, _diff_text(diffs), restart)))


def _culler_missing(want, where):
    """The message of a culler's object that is missing (`where`: its namespace/name)."""
    kind = want["kind"]
    if kind == "Deployment":
        return "Kubeflow's notebook controller %s (container %s) is missing: nothing culls idle notebooks" % (
            where, want["spec"]["template"]["spec"]["containers"][0]["name"])
    if kind == "CronJob":
        return "the notebook culling CronJob %s is missing: idle notebooks keep their GPUs" % where
    if kind == "Namespace":
        return "the culling namespace %s is missing, and the culling CronJob with it: idle notebooks keep their GPUs" % (
            where)
    return "the notebook culler's %s %s is missing: the culling CronJob cannot cull without it" % (kind, where)


def _culling(out, policy, live):
    """Findings of the notebook culler: one per object whose plan (``_guest_plan``, as guest_objects converges it) has
    a change - ``notebook_culling_missing`` where it is to be created (Kubeflow's Deployment or its container: is
    missing), else ``notebook_culling_changed``; the objects of a missing culling namespace are part of its finding.
    ``auto`` is Kubeflow's where the reader found its Notebook CRD (``live["kubeflow"]``)."""
    wanted = _guest_plan.culling_objects(dict(policy, gpu_scheduling_policy_culling=_guest_plan.culling_mechanism(
        policy, live.get("kubeflow"))))
    have = _guest_plan.culling_read(wanted, live)
    missing_ns = set()
    for want in wanted:
        kind, ns, name = _guest_plan.key(want)
        if ns in missing_ns:
            continue
        changes, owner = _split(_guest_plan.plan(have.get(_guest_plan.key(want)), want, _objects.flag(
            policy.get("gpu_scheduling_policy_adopt"))))
        out += _not_owned(want, owner)
        if not changes:
            continue
        obj, where = _guest_plan.object_name(want), "%s/%s" % (ns, name) if ns else name
        if changes[0].action in ("create", _guest_plan.MISSING):
            missing_ns.update([name] if kind == "Namespace" else [])
            out.append(finding("notebook_culling_missing", obj, _culler_missing(want, where)))
            continue
        if kind == "Deployment":
            what = "Kubeflow's notebook controller"
            diffs = [(c.field.split("].", 1)[1], c.before, c.after) for c in changes]
        else:
            what = "notebook culling CronJob" if kind == "CronJob" else "the notebook culler's %s" % kind
            diffs = _objects.differences(_guest_plan.cron_job_settings(want), _guest_plan.cron_job_settings(
                have.get(_guest_plan.key(want)))) if kind == "CronJob" else []
            diffs = diffs or [d for c in changes for d in _objects.differences(c.after, c.before, c.field)]
        out.append(finding("notebook_culling_changed", obj, "%s %s: %s" % (what, where, _diff_text(diffs))))
