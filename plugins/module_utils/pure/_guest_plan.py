# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One plan per guest object: the manifests the gpu_scheduling_policy role writes (PriorityClasses,
tenant Namespaces, ResourceQuotas, Kueue's ResourceFlavors, ClusterQueues and LocalQueues), those
the gpu_operator role writes (the device plugin's time-slicing ConfigMap, the DCGM exporter's metrics
ConfigMap, the fields it sets on the chart's ClusterPolicy) and
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

import hashlib
import json

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, UPDATE, Change

REPLACE = "replace"  # an immutable field differs: delete and create again
OWNER_FIELD = "metadata.labels.%s" % list(_objects.MANAGED_BY)[0]
PRIORITY_API = "scheduling.k8s.io/v1"
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue")
CLUSTER_POLICY_API = "nvidia.com/v1"
OPERATOR_KINDS = ("ConfigMap", "ClusterPolicy")
KINDS = ("PriorityClass", "Namespace", "ResourceQuota") + KUEUE_KINDS + OPERATOR_KINDS + ("Secret",)
SNAKE = {"PriorityClass": "priority_class", "ResourceQuota": "resource_quota", "Namespace": "namespace",
         "ResourceFlavor": "resource_flavor", "ClusterQueue": "cluster_queue", "LocalQueue": "local_queue",
         "ConfigMap": "config_map", "ClusterPolicy": "cluster_policy", "Secret": "secret"}
LICENSING_LABEL = {"gpupool.vcf/licensing": "true"}  # nls_licensing's Secrets: those it may prune
MISSING = "missing"  # an object the collection sets fields of but does not make (the chart's ClusterPolicy) is absent
NOT_ADOPTED = ("ClusterPolicy",)  # the chart's: the collection sets fields of it, never records it as its own
# (nor Kueue's configuration ConfigMap: Kueue's installation's)


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


def dump_config(config):
    """The YAML text of one device plugin configuration, as the gpu_operator role has always written it
    (Ansible's ``to_nice_yaml``: block style, keys sorted, indent 2)."""
    if yaml is None:  # pragma: no cover
        return json.dumps(config, indent=2, sort_keys=True) + "\n"
    return yaml.safe_dump(config, indent=2, allow_unicode=True, default_flow_style=False)


def parse_config(value):
    """A device plugin configuration read back: parsed YAML text (a mapping as it is); None where the text is not
    YAML (it then differs from any configuration)."""
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(value) if yaml is not None else json.loads(value)
    except Exception:  # pylint: disable=broad-except  # yaml.YAMLError or ValueError: not a configuration
        return None


def cluster_policy(op):
    """The ClusterPolicy fields the gpu_operator role sets with its inputs `op` (role_inputs("gpu_operator", ...)):
    ``spec`` as ``_k8s_objects.cluster_policy_spec`` gives it (the chart values, the extra values that override
    them), without the licensing Secret's name when none is given. The chart makes the object; the role patches
    only these fields back."""
    spec = _objects.cluster_policy_spec(op)
    licensing = spec["driver"].get("licensingConfig") or {}
    if not licensing.get("secretName"):
        licensing.pop("secretName", None)
    return _objects._manifest(CLUSTER_POLICY_API, "ClusterPolicy", _objects.CLUSTER_POLICY, labels={}, spec=spec)


def operator_objects(op, kinds=OPERATOR_KINDS):
    """The gpu_operator role's objects with its inputs `op` (the role's defaults for those not given), in the order
    they are written: the device plugin ConfigMap (time-sliced pools only), the DCGM metrics ConfigMap (metrics
    given only), then the ClusterPolicy's fields; only those of `kinds`."""
    op = _objects.role_inputs("gpu_operator", op)
    out = [cm for cm in (_objects.device_plugin_config_map(op, dump_config), _objects.dcgm_metrics_config_map(op))
           if cm is not None]
    return [obj for obj in out + [cluster_policy(op)] if obj["kind"] in kinds]


def secret_hash(data):
    """The first 10 hex digits of the sha256 of a Secret's `data` as JSON with sorted keys (the content part of the
    licensing Secret's name: new content, new name)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:10]


def secret_text(value):
    """A Secret value as plans, diffs and findings show it: never the value, a short hash of it."""
    if value is None:
        return None
    return "(secret data, sha256 %s)" % hashlib.sha256(str(value).encode("utf-8")).hexdigest()[:12]


def licensing_secret(namespace, name, data):
    """The licensing Secret `name` with `data` ({}: a Secret known by its name only, as the audit knows it - the
    token is not the audit's to read - so that its plan is only whether it exists)."""
    labels = dict(_objects.MANAGED_BY, **LICENSING_LABEL)
    return _objects._manifest("v1", "Secret", name, namespace, labels=labels, type="Opaque", data=dict(data))


def licensing_objects(namespace, secret_prefix, data, cluster_policy_fields=False):
    """The nls_licensing role's objects: the GPU Operator's Namespace (created with the collection's label, labels
    of a live one left alone), the licensing Secret ``<secret_prefix>-<secret_hash(data)>`` with `data` (base64
    values: ``gridd.conf``, the client configuration token), and with `cluster_policy_fields` the ClusterPolicy's
    licensing fields (``driver.licensingConfig``: that Secret, NLS on)."""
    name = "%s-%s" % (secret_prefix, secret_hash(data))
    out = [_objects._manifest("v1", "Namespace", namespace, labels={}), licensing_secret(namespace, name, data)]
    if cluster_policy_fields:
        out.append(_objects._manifest(CLUSTER_POLICY_API, "ClusterPolicy", _objects.CLUSTER_POLICY, labels={}, spec={
            "driver": {"licensingConfig": {"secretName": name, "nlsEnabled": True}}}))
    return out


KUEUE_CONFIGURATION = "kueueConfiguration"  # a wanted ConfigMap whose key holds Kueue's Configuration, merged into


def kueue_config_map(policy):
    """Kueue's configuration ConfigMap as the gpu_scheduling_policy role keeps it with its inputs `policy` (the
    role's defaults for those not given): ``[manifest]`` whose key (``gpu_scheduling_policy_kueue_config_key``)
    holds the live Configuration with waitForPodsReady set, every other setting kept; [] where the role leaves
    Kueue's configuration alone (no timeout, or Kueue off). Kueue's installation makes it, never the collection."""
    policy = _objects.role_inputs("gpu_scheduling_policy", policy)
    if _objects.kueue_wait_for_pods_ready(policy) is None:
        return []
    out = _objects._manifest("v1", "ConfigMap", policy["gpu_scheduling_policy_kueue_config_map"],
                             policy["gpu_scheduling_policy_kueue_namespace"], labels={}, data={})
    out[KUEUE_CONFIGURATION] = {
        "key": policy["gpu_scheduling_policy_kueue_config_key"],
        "policy": dict((k, policy[k]) for k in ("gpu_scheduling_policy_kueue",
                                                "gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout"))}
    return [out]


def dump_kueue_configuration(config):
    """Kueue's Configuration as the role writes it back (block style, its keys in their order)."""
    if yaml is None:  # pragma: no cover
        return json.dumps(config, indent=2) + "\n"
    return yaml.safe_dump(config, indent=2, allow_unicode=True, default_flow_style=False, sort_keys=False)


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


def _created(wanted):
    out = dict(wanted, metadata=dict(wanted["metadata"], labels=dict(wanted["metadata"].get("labels") or {})))
    out["metadata"]["labels"].update(_objects.MANAGED_BY)
    return out


def _create(wanted):
    """A create; a Secret's values shown as secret_text (``created()`` is what is written)."""
    after = _created(wanted)
    if wanted["kind"] == "Secret":
        after["data"] = dict((k, secret_text(v)) for k, v in sorted((after.get("data") or {}).items()))
    return [Change(object_name(wanted), "object", None, after, CREATE)]


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


def _same_data(key, want, have):
    """Whether the live value `have` of ConfigMap key `key` holds what `want` (the text the role writes) says:
    the DCGM metrics file by its fields and types, a device plugin configuration by what it sets (parsed; others'
    keys stay)."""
    if have is None:
        return False
    if key == _objects.DCGM_METRICS_KEY:
        return _objects.dcgm_metrics_fields(have) == _objects.dcgm_metrics_fields(want)
    return not _objects.differences(parse_config(want), parse_config(have))


def plan_kueue_configuration(live, wanted):
    """Kueue's configuration key (``data.<key>``): its waitForPodsReady as the role sets it, every other setting
    kept (``_objects.kueue_config_differences``: timeouts as durations); the change's ``after`` is the whole text
    written back. The ConfigMap or the key absent is ``missing`` (Kueue's installation makes it); ValueError where
    the key holds no Kueue Configuration."""
    given = wanted[KUEUE_CONFIGURATION]
    obj, key = object_name(wanted), given["key"]
    text = ((live or {}).get("data") or {}).get(key)
    if text is None:
        return [Change(obj, "data.%s" % key, None, None, MISSING)]
    config = parse_config(text)
    if not _objects.kueue_config_differences(given["policy"], config):
        return []
    return [Change(obj, "data.%s" % key, text, dump_kueue_configuration(
        _objects.kueue_configuration(given["policy"], config)), UPDATE)]


def plan_config_map(live, wanted):
    """Each key of ``data`` the role writes (``data.<key>``, compared as _same_data says); others' keys stay.
    Kueue's configuration ConfigMap (kueue_config_map()) by plan_kueue_configuration."""
    if KUEUE_CONFIGURATION in wanted:
        return plan_kueue_configuration(live, wanted)
    if live is None:
        return _create(wanted)
    data = live.get("data") or {}
    return [Change(object_name(wanted), "data.%s" % key, data.get(key), value, UPDATE)
            for key, value in sorted(wanted["data"].items()) if not _same_data(key, value, data.get(key))]


def plan_secret(live, wanted):
    """Each key of ``data`` the collection writes (compared as base64 text, shown as secret_text), and its labels
    other than the ownership record (``gpupool.vcf/licensing``: what pruning selects); others' keys stay."""
    if live is None:
        return _create(wanted)
    obj = object_name(wanted)
    data = live.get("data") or {}
    have = (live.get("metadata") or {}).get("labels") or {}
    out = [Change(obj, "data.%s" % key, secret_text(data.get(key)), secret_text(value), UPDATE)
           for key, value in sorted(wanted["data"].items()) if data.get(key) != value]
    return out + [Change(obj, "metadata.labels.%s" % key, have.get(key), value, UPDATE)
                  for key, value in sorted(wanted["metadata"]["labels"].items())
                  if key not in _objects.MANAGED_BY and _text(have.get(key)) != value]


def _leaves(value, path=()):
    """[(path, value)] of a mapping's leaves (lists and scalars; a list is one value)."""
    if isinstance(value, dict) and value:
        out = []
        for key, item in value.items():
            out += _leaves(item, path + (key,))
        return out
    return [(path, value)]


def _at(obj, path):
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def plan_cluster_policy(live, wanted):
    """Each field of ``spec`` the role sets (``spec.<path>``, compared as ``_k8s_objects.differences`` does:
    scalars as text, lists item by item), an ``update`` of a merge patch; the fields it does not set are never
    compared. An absent ClusterPolicy is ``missing``: the chart makes it, the collection does not."""
    obj = object_name(wanted)
    if live is None:
        return [Change(obj, "object", None, None, MISSING)]
    spec = live.get("spec") or {}
    return [Change(obj, "spec.%s" % ".".join(path), _at(spec, path), value, UPDATE)
            for path, value in _leaves(wanted["spec"]) if _objects.differences(value, _at(spec, path))]


PLANS = {"PriorityClass": plan_priority_class, "Namespace": plan_namespace, "ResourceQuota": plan_resource_quota,
         "ResourceFlavor": plan_kueue, "ClusterQueue": plan_kueue, "LocalQueue": plan_kueue,
         "ConfigMap": plan_config_map, "ClusterPolicy": plan_cluster_policy, "Secret": plan_secret}


def plan(live, wanted, adopt=False):
    """The changes from `live` (None: absent) to `wanted`, by the plan of its kind; with `adopt`, an
    object that exists without the collection's label gets it (one more ``update``: it is recorded as
    the collection's, after the changes its plan makes; never the chart's ClusterPolicy)."""
    changes = PLANS[wanted["kind"]](live, wanted)
    if adopt and live is not None and not owned(live) and wanted["kind"] not in NOT_ADOPTED and (
            KUEUE_CONFIGURATION not in wanted):
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
        elif wanted["kind"] == "ClusterPolicy":  # spec.<path>: its keys hold no dots
            node = body
            path = change.field.split(".")
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = change.after
        elif change.field.startswith("data."):  # what is written, not what is shown (a Secret's secret_text)
            key_ = change.field[len("data."):]
            body.setdefault("data", {})[key_] = wanted["data"][key_] if key_ in wanted["data"] else change.after
        elif change.field.startswith("spec.hard."):
            body.setdefault("spec", {}).setdefault("hard", {})[change.field[len("spec.hard."):]] = change.after
        elif change.field.startswith("spec."):
            body.setdefault("spec", {})[change.field[len("spec."):]] = change.after
        else:
            body[change.field] = wanted[change.field]
    return body


def created(wanted):
    """`wanted` as it is created: with the collection's label."""
    return _created(wanted)


__all__ = ["KINDS", "KUEUE_CONFIGURATION", "KUEUE_KINDS", "LICENSING_LABEL", "MISSING", "OPERATOR_KINDS", "OWNER_FIELD", "REPLACE",
           "adopting", "builtin_priority_classes", "cluster_policy", "created", "dump_config", "key",
           "kueue_config_map", "kueue_objects", "licensing_objects", "licensing_secret", "object_name",
           "operator_objects", "owned", "parse_config", "patch_body", "plan", "plan_cluster_policy", "plan_config_map",
           "plan_kueue", "plan_kueue_configuration", "plan_namespace", "plan_priority_class", "plan_resource_quota",
           "plan_secret", "priority_class", "resource_quotas", "secret_hash", "secret_text", "wanted_objects"]
