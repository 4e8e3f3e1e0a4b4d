# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One plan per guest object: the manifests the gpu_scheduling_policy role writes (PriorityClasses,
tenant Namespaces, ResourceQuotas, Kueue's ResourceFlavors, ClusterQueues and LocalQueues) and
``plan(live, wanted)`` for each, a list of ``_plan.Change``
(pure: no I/O). The guest_objects module converges from these plans and the audit reports them,
so ``--check`` of a guest object and its audit are one computation.

A live object is the API's own form (camelCase, as ``sanitize_for_serialization`` gives it), None
when it does not exist. Only what the collection sets is compared; what the API server adds
(defaults, status, managed fields) and labels or annotations of others are left alone. The
collection's label (``app.kubernetes.io/managed-by``, its ownership record for Kubernetes objects) is
set when an object is created, and on one that existed only with ``adopt`` (a change the plan shows):
without it nothing changes owner, and only what carries it may be deleted or replaced.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, UPDATE, Change

REPLACE = "replace"  # an immutable field differs: delete and create again
OWNER_FIELD = "metadata.labels.%s" % list(_objects.MANAGED_BY)[0]
PRIORITY_API = "scheduling.k8s.io/v1"
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue")
KINDS = ("PriorityClass", "Namespace", "ResourceQuota") + KUEUE_KINDS
SNAKE = {"PriorityClass": "priority_class", "ResourceQuota": "resource_quota", "Namespace": "namespace",
         "ResourceFlavor": "resource_flavor", "ClusterQueue": "cluster_queue", "LocalQueue": "local_queue"}


def owned(obj):
    """Whether a live object carries the collection's label (created by it)."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in _objects.MANAGED_BY.items())


def object_name(obj):
    """``<kind in snake case> [<namespace>/]<name>``, the name the audit's findings carry."""
    meta = obj.get("metadata") or {}
    kind = SNAKE[obj["kind"]]
    return "%s %s%s" % (kind, "%s/" % meta["namespace"] if meta.get("namespace") else "", meta["name"])


# -- manifests -----------------------------------------------------------------------------------

def priority_class(pc):
    """The PriorityClass of one entry ``{name, value, preemption_policy, description}``."""
    return _objects._manifest(PRIORITY_API, "PriorityClass", pc["name"], value=int(pc["value"]),
                              preemptionPolicy=pc.get("preemption_policy") or "Never", globalDefault=False,
                              description=pc.get("description") or pc["name"])


def builtin_priority_classes(policy):
    """The role's three classes (inference > training > notebook) from its scalar inputs."""
    out = []
    for role, text in (("inference", "GPU inference - highest priority"),
                       ("training", "GPU training - below inference, preemptible"),
                       ("notebook", "GPU notebooks - lowest priority")):
        out.append({"name": policy["gpu_scheduling_policy_%s_priority_class" % role],
                    "value": int(policy["gpu_scheduling_policy_%s_priority" % role]),
                    "preemption_policy": policy.get("gpu_scheduling_policy_%s_preemption_policy" % role) or "Never",
                    "description": text})
    return out


def resource_quotas(tenant, quota_name="gpu-quota", gpu_resource="nvidia.com/gpu", mig_resources=()):
    """The ResourceQuotas of one tenant: each of its ``quotas`` ({name, hard, priority_class}: scoped
    to that PriorityClass), or without any, ``quota_name`` over its ``gpus`` and ``mig`` counts."""
    ns = tenant["namespace"]
    out = []
    for q in tenant.get("quotas") or []:
        spec = {"hard": dict((k, str(v)) for k, v in (q.get("hard") or {}).items())}
        if q.get("priority_class"):
            spec["scopeSelector"] = {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": [q["priority_class"]]}]}
        out.append(_objects._manifest("v1", "ResourceQuota", q["name"], ns, spec=spec))
    if not out:
        hard = {"requests.%s" % gpu_resource: str(tenant.get("gpus") or 0)}
        mig = tenant.get("mig") or {}
        hard.update(("requests.%s" % r, str(mig.get(r, 0))) for r in mig_resources)
        out.append(_objects._manifest("v1", "ResourceQuota", quota_name, ns, spec={"hard": hard}))
    return out


def kueue_objects(policy):
    """The ResourceFlavors, then the ClusterQueues, then the LocalQueues the role writes with its
    Kueue inputs `policy` (its variables, the role's defaults for those not given); [] when it writes
    none. ValueError for inputs the builder refuses."""
    manifests = _objects.kueue_manifests(_objects.role_inputs("gpu_scheduling_policy", policy))
    if manifests is None:
        return []
    return manifests["resource_flavors"] + manifests["cluster_queues"] + manifests["local_queues"]


def wanted_objects(priority_classes, tenants, quota_name="gpu-quota", gpu_resource="nvidia.com/gpu",
                   mig_resources=(), kueue=None):
    """Every object, in the order they are written (classes, then per tenant its Namespace, then its
    quotas, then the Kueue objects of the role's Kueue inputs `kueue`). A tenant Namespace is wanted
    without the collection's label; plan() adds it to a create."""
    out = [priority_class(pc) for pc in priority_classes]
    for tenant in tenants:
        out.append(_objects.tenant_namespace(tenant))
        out += resource_quotas(tenant, quota_name, gpu_resource, mig_resources)
    return out + (kueue_objects(kueue) if kueue else [])


# -- plans ---------------------------------------------------------------------------------------

def _text(value):
    return None if value is None else str(value)


def _create(wanted):
    created = dict(wanted, metadata=dict(wanted["metadata"], labels=dict(wanted["metadata"].get("labels") or {})))
    created["metadata"]["labels"].update(_objects.MANAGED_BY)
    return [Change(object_name(wanted), "object", None, created, CREATE)]


def plan_priority_class(live, wanted):
    """``value`` and ``preemptionPolicy`` are immutable (a change is a ``replace``); ``description``
    and ``globalDefault`` are updated in place (globalDefault false is what the server defaults)."""
    if live is None:
        return _create(wanted)
    obj = object_name(wanted)
    out = []
    for field in ("value", "preemptionPolicy"):
        if _text(live.get(field)) != _text(wanted[field]):
            out.append(Change(obj, field, live.get(field), wanted[field], REPLACE))
    if (live.get("description") or "") != wanted["description"]:
        out.append(Change(obj, "description", live.get("description"), wanted["description"], UPDATE))
    if bool(live.get("globalDefault")) != bool(wanted["globalDefault"]):
        out.append(Change(obj, "globalDefault", live.get("globalDefault"), wanted["globalDefault"], UPDATE))
    return out


def plan_namespace(live, wanted):
    """The labels the collection keeps on a tenant Namespace (others' labels stay)."""
    if live is None:
        return _create(wanted)
    have = (live.get("metadata") or {}).get("labels") or {}
    # the collection's label is its ownership record: set by a create or by adopt (plan()), never as a label
    return [Change(object_name(wanted), "metadata.labels.%s" % key, have.get(key), value, UPDATE)
            for key, value in sorted(wanted["metadata"]["labels"].items())
            if key not in _objects.MANAGED_BY and _text(have.get(key)) != value]


def plan_resource_quota(live, wanted):
    """The limits the collection sets (``spec.hard``, as quantities' text; other limits stay) and
    the PriorityClass scope (``spec.scopeSelector``, immutable once set: a change is a ``replace``)."""
    if live is None:
        return _create(wanted)
    obj = object_name(wanted)
    spec = live.get("spec") or {}
    hard = spec.get("hard") or {}
    out = [Change(obj, "spec.hard.%s" % key, hard.get(key), value, UPDATE)
           for key, value in sorted(wanted["spec"]["hard"].items()) if _text(hard.get(key)) != value]
    if (spec.get("scopeSelector") or None) != (wanted["spec"].get("scopeSelector") or None):
        out.append(Change(obj, "spec.scopeSelector", spec.get("scopeSelector"), wanted["spec"].get("scopeSelector"),
                          REPLACE))
    return out


def plan_kueue(live, wanted):
    """Each field of ``spec`` the collection sets, compared on what it sets (mappings key by key,
    lists item by item, scalars as text: Kueue's defaults and others' keys stay). A LocalQueue's
    ``clusterQueue`` is immutable (a change is a ``replace``); the others are updated in place."""
    if live is None:
        return _create(wanted)
    obj = object_name(wanted)
    spec = live.get("spec") or {}
    action = REPLACE if wanted["kind"] == "LocalQueue" else UPDATE
    return [Change(obj, "spec.%s" % field, spec.get(field), value, action)
            for field, value in wanted["spec"].items() if _objects.differences(value, spec.get(field))]


PLANS = {"PriorityClass": plan_priority_class, "Namespace": plan_namespace, "ResourceQuota": plan_resource_quota,
         "ResourceFlavor": plan_kueue, "ClusterQueue": plan_kueue, "LocalQueue": plan_kueue}


def plan(live, wanted, adopt=False):
    """The changes from `live` (None: absent) to `wanted`, by the plan of its kind; with `adopt`, an
    object that exists without the collection's label gets it (one more ``update``: it is recorded as
    the collection's, after the changes its plan makes)."""
    changes = PLANS[wanted["kind"]](live, wanted)
    if adopt and live is not None and not owned(live):
        have = ((live.get("metadata") or {}).get("labels") or {}).get(list(_objects.MANAGED_BY)[0])
        changes.append(Change(object_name(wanted), OWNER_FIELD, have, list(_objects.MANAGED_BY.values())[0], UPDATE))
    return changes


def adopting(changes):
    """Whether `changes` (one object's plan) record the object as the collection's (adopt)."""
    return any(c.field == OWNER_FIELD and c.action == UPDATE for c in changes)


def key(obj):
    """(kind, namespace, name) of a manifest or a live object."""
    meta = obj.get("metadata") or {}
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def patch_body(wanted, changes):
    """The merge patch of the in-place (``update``) changes of one object: only the changed fields."""
    body = {}
    for change in changes:
        if change.action != UPDATE:
            continue
        if change.field.startswith("metadata.labels."):
            body.setdefault("metadata", {}).setdefault("labels", {})[change.field[len("metadata.labels."):]] = change.after
        elif change.field.startswith("spec.hard."):
            body.setdefault("spec", {}).setdefault("hard", {})[change.field[len("spec.hard."):]] = change.after
        elif change.field.startswith("spec."):
            body.setdefault("spec", {})[change.field[len("spec."):]] = change.after
        else:
            body[change.field] = wanted[change.field]
    return body


def created(wanted):
    """`wanted` as it is created: with the collection's label."""
    return _create(wanted)[0].after


__all__ = ["KINDS", "KUEUE_KINDS", "OWNER_FIELD", "REPLACE", "adopting", "builtin_priority_classes", "created", "key", "kueue_objects",
           "object_name", "owned", "patch_body", "plan", "plan_kueue", "plan_namespace", "plan_priority_class",
           "plan_resource_quota", "priority_class", "resource_quotas", "wanted_objects"]
