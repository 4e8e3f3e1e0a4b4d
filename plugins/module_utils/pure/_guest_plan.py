# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One plan per guest object: the manifests the gpu_scheduling_policy role writes (PriorityClasses,
tenant Namespaces, ResourceQuotas, Kueue's ResourceFlavors, ClusterQueues and LocalQueues), those
the gpu_operator role writes (the device plugin's time-slicing ConfigMap, the DCGM exporter's metrics
ConfigMap, the fields it sets on the chart's ClusterPolicy), the notebook culler's (its Namespace,
ServiceAccount, ClusterRole and binding, the ConfigMap with its script and the CronJob; or, with
Kubeflow, the culling settings of Kubeflow's notebook-controller Deployment) and
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

import copy
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
# the notebook culler's kinds besides its Namespace and ConfigMap (read by name, at the API version of their
# manifests; not among the kinds a capture records)
CULLING_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "CronJob", "Deployment")
SNAKE = {"PriorityClass": "priority_class", "ResourceQuota": "resource_quota", "Namespace": "namespace",
         "ResourceFlavor": "resource_flavor", "ClusterQueue": "cluster_queue", "LocalQueue": "local_queue",
         "ConfigMap": "config_map", "ClusterPolicy": "cluster_policy", "Secret": "secret",
         "ServiceAccount": "service_account", "ClusterRole": "cluster_role",
         "ClusterRoleBinding": "cluster_role_binding", "CronJob": "cronjob", "Deployment": "deployment"}
LICENSING_LABEL = {"gpupool.vcf/licensing": "true"}  # nls_licensing's Secrets: those it may prune
MISSING = "missing"  # an object the collection sets fields of but does not make (the chart's ClusterPolicy) is absent
# the chart's ClusterPolicy and Kubeflow's notebook-controller Deployment: the collection sets fields of them, never
# records them as its own (nor Kueue's configuration ConfigMap: Kueue's installation's)
NOT_ADOPTED = ("ClusterPolicy", "Deployment")


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
    they are written: with ``Namespace`` in `kinds` the release's Namespace (created with the collection's label, labels
    of a live one left alone), the device plugin ConfigMap (time-sliced pools only), the DCGM metrics ConfigMap
    (metrics given only), then the ClusterPolicy's fields; only those of `kinds`."""
    op = _objects.role_inputs("gpu_operator", op)
    out = [_objects._manifest("v1", "Namespace", op["gpu_operator_namespace"], labels={})]
    out += [cm for cm in (_objects.device_plugin_config_map(op, dump_config), _objects.dcgm_metrics_config_map(op))
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


CULLING_MECHANISMS = ("cronjob", "kubeflow", "none")


def culling_mechanism(policy, kubeflow=False):
    """The notebook culling the gpu_scheduling_policy role keeps with its inputs `policy`: its
    ``gpu_scheduling_policy_culling``, ``auto`` resolved by `kubeflow` (whether Kubeflow's Notebook CRD is installed)
    to ``kubeflow`` or ``cronjob``. ValueError for a mechanism the role does not know."""
    given = _objects.role_inputs("gpu_scheduling_policy", policy)["gpu_scheduling_policy_culling"]
    if given == "auto":
        return "kubeflow" if kubeflow else "cronjob"
    if given not in CULLING_MECHANISMS:
        raise ValueError("gpu_scheduling_policy_culling must be one of auto, %s, not %r" % (
            ", ".join(CULLING_MECHANISMS), given))
    return given


def _whole(value, name, low=1, high=None):
    """`value` as a whole number from `low` (to `high`); ValueError naming the input `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, str) and value.isdigit()):
        raise ValueError("%s must be a whole number, not %r" % (name, value))
    if int(value) < low or (high is not None and int(value) > high):
        bounds = "from %d to %d" % (low, high) if high else "%d or more" % low
        raise ValueError("%s must be %s, not %s" % (name, bounds, value))
    return int(value)


def kubeflow_controller(policy):
    """What the role sets on Kubeflow's notebook-controller Deployment with its inputs `policy` (the role's defaults
    for those not given): the culling settings of its container (``ENABLE_CULLING``, ``CULL_IDLE_TIME``,
    ``IDLENESS_CHECK_PERIOD``, minutes as text), nothing else. Kubeflow makes the Deployment, never the collection."""
    policy = _objects.role_inputs("gpu_scheduling_policy", policy)
    idle, check = ("gpu_scheduling_policy_culling_%s_minutes" % k for k in ("idle", "check"))
    env = [{"name": "ENABLE_CULLING", "value": "true"},
           {"name": "CULL_IDLE_TIME", "value": str(_whole(policy[idle], idle))},
           {"name": "IDLENESS_CHECK_PERIOD", "value": str(_whole(policy[check], check))}]
    container = {"name": policy["gpu_scheduling_policy_kubeflow_controller_container"], "env": env}
    return _objects._manifest("apps/v1", "Deployment", policy["gpu_scheduling_policy_kubeflow_controller_deployment"],
                              policy["gpu_scheduling_policy_kubeflow_controller_namespace"], labels={},
                              spec={"template": {"spec": {"containers": [container]}}})


def culling_objects(policy, script=None):
    """The notebook culler's objects the gpu_scheduling_policy role keeps with its inputs `policy` (the role's defaults
    for those not given; ``gpu_scheduling_policy_culling`` resolved, see culling_mechanism), in the order they are
    written: for ``cronjob`` the culling Namespace (created with the collection's label, labels of a live one left
    alone), the ServiceAccount, ClusterRole and ClusterRoleBinding, the ConfigMap with `script` (the culler's source;
    None: a ConfigMap known by its name only, as the audit knows it - the script is the role's file - so that its plan
    is only whether it exists) and the CronJob (``_k8s_objects.culling_manifests``); for ``kubeflow`` the fields of
    Kubeflow's notebook-controller Deployment (kubeflow_controller); [] for ``none``. ValueError for bad inputs."""
    policy = _objects.role_inputs("gpu_scheduling_policy", policy)
    if policy["gpu_scheduling_policy_culling"] == "auto":
        raise ValueError("gpu_scheduling_policy_culling auto must be resolved first: cronjob, or kubeflow where "
                         "Kubeflow's Notebook CRD (notebooks.kubeflow.org) is installed")
    mechanism = culling_mechanism(policy)
    if mechanism == "none":
        return []
    if mechanism == "kubeflow":
        return [kubeflow_controller(policy)]
    for name in ("idle_minutes", "check_minutes", "port"):
        _whole(policy["gpu_scheduling_policy_culling_%s" % name], "gpu_scheduling_policy_culling_%s" % name,
               high=65535 if name == "port" else None)
    pools = policy.get("gpu_scheduling_policy_culling_pools") or {}
    if not isinstance(pools, dict):
        raise ValueError("gpu_scheduling_policy_culling_pools must be a mapping of pool names to idle minutes, not %r"
                         % (pools,))
    for pool in sorted(pools):
        _whole(pools[pool], "gpu_scheduling_policy_culling_pools.%s" % pool)
    prom = policy.get("gpu_scheduling_policy_culling_prometheus_url") or ""
    if not isinstance(prom, str) or (prom and not prom.startswith(("http://", "https://"))):
        raise ValueError("gpu_scheduling_policy_culling_prometheus_url must be an http:// or https:// URL, or empty, "
                         "not %r" % (prom,))
    if script is not None and not isinstance(script, str):
        raise ValueError("the culler's script must be its source text, not %r" % (script,))
    out = [_objects._manifest("v1", "Namespace", policy["gpu_scheduling_policy_culling_namespace"], labels={})]
    for obj in _objects.culling_manifests(policy, script or ""):
        obj["metadata"]["labels"] = {}
        if obj["kind"] == "ConfigMap" and script is None:
            obj["data"] = {}
        out.append(obj)
    return out


def cron_job_settings(obj):
    """{"schedule", "image", "env"} of a culling CronJob (its culler container's; env by name), as findings name
    them."""
    spec = (obj or {}).get("spec") or {}
    pod = ((((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
    containers = pod.get("containers") or []
    container = ([c for c in containers if c.get("name") == "culler"] or containers or [{}])[0]
    return {"schedule": spec.get("schedule"), "image": container.get("image"),
            "env": dict((e.get("name"), e.get("value")) for e in container.get("env") or [])}


def culling_read(wanted, culling):
    """{key: live object} of the culling objects `wanted` (culling_objects) from the audit's read `culling`: its
    ``objects`` (the live objects, as guest_objects reads them) where they were read; else from the settings the
    reader gives discovery - the CronJob's ``schedule``, ``image`` and ``env`` (``exists``), Kubeflow's controller's
    container ``env`` - with the other objects as wanted (not read: not judged)."""
    if culling.get("objects") is not None:
        return dict((key(obj), obj) for obj in culling["objects"])
    out = {}
    for want in wanted:
        live = created(copy.deepcopy(want))
        if want["kind"] in ("CronJob", "Deployment"):
            if not culling.get("exists"):
                continue
            env = [{"name": k, "value": v} for k, v in (culling.get("env") or {}).items()]
            if want["kind"] == "CronJob":
                live["spec"]["schedule"] = culling.get("schedule")
                [container] = live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
                container["image"] = culling.get("image")
            else:
                [container] = live["spec"]["template"]["spec"]["containers"]
            container["env"] = env
        out[key(want)] = live
    return out


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
    keys stay), any other text (the culler's script) as it is."""
    if have is None:
        return False
    if key == _objects.DCGM_METRICS_KEY:
        return _objects.dcgm_metrics_fields(have) == _objects.dcgm_metrics_fields(want)
    config = parse_config(want)
    if not isinstance(config, dict):  # not a configuration (the culler's script): the text itself
        return have == want
    return not _objects.differences(config, parse_config(have))


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


def plan_service_account(live, wanted):
    """The culler's ServiceAccount: whether it exists (the collection sets nothing of it but its name)."""
    return _create(wanted) if live is None else []


def plan_cluster_role(live, wanted):
    """``rules`` (compared as ``_k8s_objects.differences`` does: item by item, on what the collection sets), an
    ``update`` that writes them whole."""
    if live is None:
        return _create(wanted)
    if _objects.differences(wanted["rules"], live.get("rules")):
        return [Change(object_name(wanted), "rules", live.get("rules"), wanted["rules"], UPDATE)]
    return []


def plan_cluster_role_binding(live, wanted):
    """``roleRef`` (immutable: a change is a ``replace``) and ``subjects`` (an ``update`` that writes them whole)."""
    if live is None:
        return _create(wanted)
    obj = object_name(wanted)
    out = []
    if _objects.differences(wanted["roleRef"], live.get("roleRef")):
        out.append(Change(obj, "roleRef", live.get("roleRef"), wanted["roleRef"], REPLACE))
    if _objects.differences(wanted["subjects"], live.get("subjects")):
        out.append(Change(obj, "subjects", live.get("subjects"), wanted["subjects"], UPDATE))
    return out


def plan_cron_job(live, wanted):
    """Each field of ``spec`` the collection sets (``spec.<field>``: the schedule, the history limits, the job
    template), compared on what it sets (the API server's defaults stay out of it), an ``update`` that writes the
    field whole."""
    if live is None:
        return _create(wanted)
    spec = live.get("spec") or {}
    return [Change(object_name(wanted), "spec.%s" % field, spec.get(field), value, UPDATE)
            for field, value in wanted["spec"].items() if _objects.differences(value, spec.get(field))]


def _containers(obj):
    return ((((obj or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []


def container_field(name):
    """The field of a Deployment's container `name` in a plan (``spec.template.spec.containers[<name>]``)."""
    return "spec.template.spec.containers[%s]" % name


def plan_deployment(live, wanted):
    """Kubeflow's notebook-controller Deployment: each env variable the role sets on its container
    (``spec.template.spec.containers[<name>].env.<variable>``, compared as text), an ``update`` (patch_body: the
    controller's other containers, variables and settings stay). The Deployment or its
    container absent is ``missing``: Kubeflow makes them, the collection never does."""
    obj = object_name(wanted)
    [want] = _containers(wanted)
    if live is None:
        return [Change(obj, "object", None, None, MISSING)]
    have = [c for c in _containers(live) if c.get("name") == want["name"]]
    if not have:
        return [Change(obj, container_field(want["name"]), None, None, MISSING)]
    env = dict((e.get("name"), e.get("value")) for e in have[0].get("env") or [])
    return [Change(obj, "%s.env.%s" % (container_field(want["name"]), e["name"]), env.get(e["name"]), e["value"],
                   UPDATE) for e in want["env"] if _text(env.get(e["name"])) != e["value"]]


PLANS = {"PriorityClass": plan_priority_class, "Namespace": plan_namespace, "ResourceQuota": plan_resource_quota,
         "ResourceFlavor": plan_kueue, "ClusterQueue": plan_kueue, "LocalQueue": plan_kueue,
         "ConfigMap": plan_config_map, "ClusterPolicy": plan_cluster_policy, "Secret": plan_secret,
         "ServiceAccount": plan_service_account, "ClusterRole": plan_cluster_role,
         "ClusterRoleBinding": plan_cluster_role_binding, "CronJob": plan_cron_job, "Deployment": plan_deployment}


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


def patch_body(wanted, changes, live=None):
    """The merge patch of the in-place (``update``) changes of one object: only the changed fields. A Deployment's
    (another's object, `live` as it was read) holds its containers as read with the env variables of the changes set
    in theirs: a merge patch replaces a list whole, and the resourceVersion it carries makes the server refuse it
    where the Deployment changed since."""
    if wanted["kind"] == "Deployment":
        [container] = _containers(wanted)
        prefix = "%s.env." % container_field(container["name"])
        values = dict((c.field[len(prefix):], c.after) for c in changes if c.action == UPDATE and c.field.startswith(prefix))
        containers = copy.deepcopy(_containers(live))
        for have in containers:
            if have.get("name") == container["name"]:
                env = list(have.get("env") or [])
                for index, var in enumerate(env):
                    if var.get("name") in values:
                        env[index] = {"name": var["name"], "value": values.pop(var["name"])}
                have["env"] = env + [{"name": e["name"], "value": values[e["name"]]} for e in container["env"]
                                     if e["name"] in values]
        return {"spec": {"template": {"spec": {"containers": containers}}}}
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


__all__ = ["CULLING_KINDS", "CULLING_MECHANISMS", "KINDS", "KUEUE_CONFIGURATION", "KUEUE_KINDS", "LICENSING_LABEL",
           "MISSING", "OPERATOR_KINDS", "OWNER_FIELD", "REPLACE",
           "adopting", "builtin_priority_classes", "cluster_policy", "container_field", "created", "cron_job_settings",
           "culling_mechanism", "culling_objects", "culling_read", "dump_config", "key", "kubeflow_controller",
           "kueue_config_map", "kueue_objects", "licensing_objects", "licensing_secret", "object_name",
           "operator_objects", "owned", "parse_config", "patch_body", "plan", "plan_cluster_policy", "plan_config_map",
           "plan_cluster_role", "plan_cluster_role_binding", "plan_cron_job", "plan_deployment", "plan_kueue",
           "plan_kueue_configuration", "plan_namespace", "plan_priority_class", "plan_resource_quota", "plan_secret",
           "plan_service_account", "priority_class", "resource_quotas", "secret_hash", "secret_text", "wanted_objects"]
