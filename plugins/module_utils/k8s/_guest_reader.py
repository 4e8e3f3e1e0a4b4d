# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side of a GPU pool as the audit and the discovery read it (client layer: knows nothing of Ansible).

I/O only, plain data out, through the fault boundary of ``_k8s.K8sClient``: the VKS clusters'
node pools on the Supervisor (read through ``_vks_api`` and the ClusterClass's variables, as
``vks_node_pool`` writes them) and the guest cluster's objects (nodes, namespaces, quotas,
PriorityClasses, the ClusterPolicy, the device plugin ConfigMap, Kueue, notebook culling), each
read by path (``K8sClient.request``: the objects as the API server writes them, camelCase, as
guest_objects reads them; none of the kubernetes client's typed API classes).
A read that fails raises ``LinkError`` naming what could not be read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

try:
    import yaml
    HAS_YAML = True
    # what a ConfigMap value that does not parse raises (json's and yaml's)
    PARSE_ERRORS = (ValueError, yaml.YAMLError)
except ImportError:  # pragma: no cover - ansible-core ships PyYAML
    HAS_YAML = False
    PARSE_ERRORS = (ValueError,)

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _guest_plan
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import builtin_path
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import DEFAULT_REQUEST_TIMEOUT, K8sClient, K8sError, api_path
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import read_nodes
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import read_pool, variable_plan
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._k8s_objects import (
    CLUSTER_POLICY, kueue_objects, kueue_wait_for_pods_ready)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import owned_node_pools
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._vks_api import VksClusterApi


class LinkError(ClientError):
    """A link could not be read."""


def _link_failures():
    """The failures of a Kubernetes link itself: the collection's client errors, the kubernetes client's API and
    kubeconfig errors, urllib3's and the socket's (OSError: refused, reset, timed out, a file that cannot be read).
    A bug of the collection's own code (AttributeError, KeyError, TypeError ...) is none of them."""
    found = [ClientError, OSError]
    try:
        from kubernetes.client.exceptions import ApiException  # not ApiTypeError: a wrong call is a bug
        from kubernetes.config.config_exception import ConfigException
        found.extend((ApiException, ConfigException))
    except ImportError:  # without the library no call reaches its errors
        pass
    try:
        from urllib3.exceptions import HTTPError
        found.append(HTTPError)
    except ImportError:
        pass
    return tuple(found)


LINK_FAILURES = _link_failures()


def k8s_client(kubeconfig, context, request_timeout=DEFAULT_REQUEST_TIMEOUT):
    """The fault boundary for one cluster (K8sError when the kubeconfig cannot be used)."""
    return K8sClient(dict(kubeconfig=kubeconfig, context=context), request_timeout)


def _get(k8s, what, path):
    """One object read by path through the fault boundary: the object, or None when it does not exist."""
    try:
        return k8s.request("GET", path)
    except K8sError as exc:
        if exc.status == 404:
            return None
        raise LinkError("could not read %s: %s" % (what, exc))


def _items(k8s, what, path):
    """The items of one list by path through the fault boundary; LinkError naming what could not be read."""
    try:
        return k8s.items(path)
    except K8sError as exc:
        raise LinkError("could not read %s: %s" % (what, exc))


def read_vks(params, derived):
    """{VKS cluster name: {namespace, machine_deployments: {name: {replicas, vm_class, labels, taints}}}}.

    The Cluster and its ClusterClass are read by the client layer vks_node_pool writes through
    (_vks_api), and each pool through the class's variables as that module writes them
    (_cluster_class.variable_plan and its inverse read_pool). `params`: the connection options."""
    out = {}
    for name, want in ((derived.get("vks") or {}).get("clusters") or {}).items():
        what = "VKS cluster %s/%s" % (want["namespace"], name)
        api = VksClusterApi(params, want["namespace"], name)
        try:
            version, obj, ref = api.read_cluster()
        except K8sError as exc:
            if exc.status == 404:
                continue
            raise LinkError("could not read %s: %s" % (what, exc))
        if obj is None:
            raise LinkError("could not read %s: it has no managed topology (spec.topology with a ClusterClass)" % what)
        try:
            cc = api.read_class(version, ref)
        except K8sError as exc:
            raise LinkError("could not read the ClusterClass of %s: %s" % (what, exc))
        plan = variable_plan(cc)  # spec and status variables, and the class name for findings
        topology = (obj.get("spec") or {}).get("topology") or {}
        top_vars = dict((v.get("name"), v.get("value")) for v in topology.get("variables") or [])
        mds = {}
        for md in (topology.get("workers") or {}).get("machineDeployments") or []:
            mds[md.get("name")] = read_pool(md, top_vars, plan)
        # the pools the Cluster's record holds as the collection's (object_not_owned where the design adopts)
        owned = sorted(owned_node_pools((obj.get("metadata") or {}).get("annotations")))
        out[name] = dict(namespace=want["namespace"], machine_deployments=mds, owned=owned)
    return out


def _yaml_data(data):
    """A ConfigMap's data with each value parsed as YAML (the text kept when it does not parse)."""
    out = {}
    for key, text in (data or {}).items():
        try:
            out[key] = yaml.safe_load(text) if HAS_YAML else json.loads(text)
        except PARSE_ERRORS:  # text that does not parse: compared as text, so it differs
            out[key] = text
    return out


def _labelled(labels, kind, obj, namespace=None):
    """Record ``obj``'s labels in ``labels`` under the name the audit's findings give it; ``obj`` as read."""
    meta = obj.get("metadata") or {}
    name = _guest_plan.object_name(dict(kind=kind, metadata=dict(name=meta.get("name"), namespace=namespace)))
    labels[name] = dict(meta.get("labels") or {})
    return obj


def _kueue(k8s, policy, namespaces, labels=None):
    """Kueue objects the gpu_scheduling_policy role writes: {served, resource_flavors,
    cluster_queues, local_queues: {namespace: {name: spec}}, configuration}; None when the role
    writes none. ``configuration`` (Kueue's parsed Configuration, None where its ConfigMap or key
    is missing) only when the role sets waitForPodsReady. ``labels``: each object's labels are added to it
    under the name the audit's findings give the object."""
    labels = {} if labels is None else labels
    want = kueue_objects(policy)
    if want is None:
        return None
    version = want["api_version"]
    out = dict(served=True, resource_flavors={}, cluster_queues={}, local_queues={})
    for i, (flavor, _spec) in enumerate(want["resource_flavors"]):
        try:
            found = k8s.request("GET", api_path(version, "resourceflavors", name=flavor))
        except K8sError as exc:
            if exc.status != 404:
                raise LinkError("could not read Kueue ResourceFlavor %s: %s" % (flavor, exc))
            found = None
            if i == 0 and ("could not find the requested resource" in str(exc) or "page not found" in str(exc).lower()):
                return dict(served=False)
        if found is not None:
            out["resource_flavors"][flavor] = _labelled(labels, "ResourceFlavor", found).get("spec") or {}
    for cq, _spec in want["cluster_queues"]:
        found = _get(k8s, "Kueue ClusterQueue %s" % cq, api_path(version, "clusterqueues", name=cq))
        if found is not None:
            out["cluster_queues"][cq] = _labelled(labels, "ClusterQueue", found).get("spec") or {}
    for ns, name, _spec in want["local_queues"]:
        if ns not in namespaces:
            continue
        found = _get(k8s, "Kueue LocalQueue %s/%s" % (ns, name), api_path(version, "localqueues", ns, name))
        if found is not None:
            out["local_queues"].setdefault(ns, {})[name] = _labelled(labels, "LocalQueue", found, ns).get("spec") or {}
    if kueue_wait_for_pods_ready(policy) is not None:
        ns, name = policy["gpu_scheduling_policy_kueue_namespace"], policy["gpu_scheduling_policy_kueue_config_map"]
        found = _get(k8s, "ConfigMap %s/%s" % (ns, name), builtin_path("ConfigMap", ns, name)) \
            if ns in namespaces else None
        text = (found.get("data") or {}).get(policy["gpu_scheduling_policy_kueue_config_key"]) if found is not None else None
        out["configuration"] = _yaml_data({"c": text})["c"] if text is not None else None
    return out


def _culling_objects(k8s, policy, kubeflow, namespaces):
    """The live objects of the notebook culler the role keeps (``_guest_plan.culling_objects`` of the mechanism it
    chooses: `kubeflow`, whether Kubeflow's Notebook CRD is installed, resolves auto), each read by its name, as the
    API gives them (camelCase, as guest_objects reads them); those absent, or in a namespace that is not there, are
    left out."""
    mechanism = _guest_plan.culling_mechanism(policy, kubeflow)
    out = []
    for want in _guest_plan.culling_objects(dict(policy, gpu_scheduling_policy_culling=mechanism)):
        kind, ns, name = _guest_plan.key(want)
        where = ns or (name if kind == "Namespace" else None)
        if where is not None and where not in namespaces:
            continue
        found = _get(k8s, "%s %s" % (kind, "%s/%s" % (ns, name) if ns else name), builtin_path(kind, ns, name))
        if found is not None:
            found.setdefault("kind", kind)
            out.append(found)
    return out


def _culling(k8s, policy, namespaces, objects=False):
    """The notebook culling as the role writes it: the CronJob as {exists, schedule, image, env}, or, where the role
    leaves it to Kubeflow (its Notebook CRD installed, or the mechanism kubeflow), Kubeflow's notebook controller as
    {kubeflow, exists (the Deployment and its container), env of its container}; None when culling is off. With
    `objects`, ``objects`` holds the culler's live objects (_culling_objects), the ones its plans judge."""
    mechanism = policy.get("gpu_scheduling_policy_culling")
    if mechanism == "none":
        return None
    kubeflow = mechanism == "kubeflow" or (mechanism == "auto" and _get(
        k8s, "the CRD notebooks.kubeflow.org", api_path("apiextensions.k8s.io/v1", "customresourcedefinitions",
                                                        name="notebooks.kubeflow.org")) is not None)
    found = _culling_objects(k8s, policy, kubeflow, namespaces)
    if kubeflow:
        want = _guest_plan.kubeflow_controller(policy)
        container = want["spec"]["template"]["spec"]["containers"][0]["name"]
        have = [c for obj in found if obj["kind"] == "Deployment"
                for c in ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
                if c.get("name") == container]
        out = dict(kubeflow=True, exists=bool(have))
        if have:
            out["env"] = dict((e.get("name"), e.get("value")) for e in have[0].get("env") or [])
    else:
        jobs = [obj for obj in found if obj["kind"] == "CronJob"]
        out = dict(exists=bool(jobs))
        if jobs:
            out.update(_guest_plan.cron_job_settings(jobs[0]))
    if objects:
        out["objects"] = found
    return out


def _meta(obj):
    return obj.get("metadata") or {}


def _spec(obj):
    return obj.get("spec") or {}


def _priority_class(pc):
    """A PriorityClass's fields the audit and discovery judge (camelCase, as the API writes them)."""
    return dict(value=pc.get("value"), preemptionPolicy=pc.get("preemptionPolicy"), description=pc.get("description"))


def read_guest(k8s, derived):
    """Nodes, tenant namespaces (labels) and their ResourceQuotas, the licensing Secrets, PriorityClasses,
    the ClusterPolicy, the device plugin ConfigMap, Kueue's objects and the notebook culler's objects."""
    op, policy = _audit_guest.guest_inputs(derived)
    nodes = read_nodes(k8s, _items)
    listed = _items(k8s, "the namespaces", builtin_path("Namespace"))
    namespaces = [_meta(ns).get("name") for ns in listed]
    labels = dict((_meta(ns).get("name"), dict(_meta(ns).get("labels") or {})) for ns in listed)
    quotas, scopes, object_labels = {}, {}, {}
    for tenant in policy.get("gpu_scheduling_policy_tenants") or []:
        ns = tenant["namespace"]
        if ns not in namespaces or ns in quotas:
            continue
        listed = _items(k8s, "the ResourceQuotas of namespace %s" % ns, builtin_path("ResourceQuota", ns))
        quotas[ns] = dict((_meta(q).get("name"), dict(_spec(q).get("hard") or {})) for q in listed)
        for q in listed:
            _labelled(object_labels, "ResourceQuota", q, ns)
        scopes[ns] = dict((_meta(q).get("name"), _spec(q).get("scopeSelector")) for q in listed)
    secrets = {}
    op_ns = op["gpu_operator_namespace"]
    if op.get("gpu_operator_licensing_secret_name"):
        # names only: nls_licensing rotates the Secret by name (<secret_name>-<content hash>)
        secrets[op_ns] = [_meta(s).get("name") for s in _items(
            k8s, "the Secrets of namespace %s" % op_ns, builtin_path("Secret", op_ns))] \
            if op_ns in namespaces else []
    policy_obj = _get(k8s, "ClusterPolicy %s" % CLUSTER_POLICY,
                      api_path("nvidia.com/v1", "clusterpolicies", name=CLUSTER_POLICY))
    cluster_policy = dict(exists=policy_obj is not None, spec=(policy_obj or {}).get("spec") or {})
    config = None
    if op.get("gpu_operator_time_slicing"):
        name = op["gpu_operator_device_plugin_config_name"]
        found = _get(k8s, "ConfigMap %s/%s" % (op_ns, name), builtin_path("ConfigMap", op_ns, name)) \
            if op_ns in namespaces else None
        config = dict(exists=found is not None, data=_yaml_data(found.get("data") if found is not None else None))
    dcgm = None
    if op.get("gpu_operator_dcgm_metrics"):
        name = op["gpu_operator_dcgm_metrics_config_name"]
        found = _get(k8s, "ConfigMap %s/%s" % (op_ns, name), builtin_path("ConfigMap", op_ns, name)) \
            if op_ns in namespaces else None
        dcgm = dict(exists=found is not None, data=dict(found.get("data") or {}) if found is not None else {})
    listed = _items(k8s, "the PriorityClasses", builtin_path("PriorityClass"))
    pcs = dict((_meta(pc).get("name"), dict(_priority_class(pc), globalDefault=bool(pc.get("globalDefault"))))
               for pc in listed)
    for pc in listed:
        _labelled(object_labels, "PriorityClass", pc)
    kueue = _kueue(k8s, policy, namespaces, object_labels)
    return dict(nodes=nodes, namespaces=namespaces, namespace_labels=labels, resource_quotas=quotas,
                resource_quota_scopes=scopes, secrets=secrets,
                priority_classes=pcs, cluster_policy=cluster_policy, device_plugin_config=config,
                dcgm_metrics_config=dcgm,
                kueue=kueue, object_labels=object_labels,
                culling=_culling(k8s, policy, namespaces, objects=True))


def _quota_priority(quota):
    """The PriorityClass a ResourceQuota is scoped to (scopeSelector PriorityClass In [one]), else None."""
    selector = _spec(quota).get("scopeSelector") or {}
    for expr in selector.get("matchExpressions") or []:
        values = expr.get("values") or []
        if expr.get("scopeName") == "PriorityClass" and expr.get("operator") == "In" and len(values) == 1:
            return values[0]
    return None


def read_guest_design(k8s, derived):
    """The guest objects discovery describes, for the design ``derived`` was derived from (its tenants,
    operator namespace, culling names): {priority_classes: {name: {value, preemptionPolicy, description}},
    resource_quotas: {namespace: [{name, hard, priority_class}]}, cluster_policy: spec or None,
    kueue: {name: ClusterQueue spec} or None where Kueue is not served, culling: as read_guest reads it}.
    Lists, not gets: discovery does not know the names a platform built by hand gave its objects."""
    _op, policy = _audit_guest.guest_inputs(derived)
    pcs = dict((_meta(pc).get("name"), _priority_class(pc))
               for pc in _items(k8s, "the PriorityClasses", builtin_path("PriorityClass")))
    namespaces = [_meta(ns).get("name") for ns in _items(k8s, "the namespaces", builtin_path("Namespace"))]
    quotas = {}
    for tenant in policy.get("gpu_scheduling_policy_tenants") or []:
        ns = tenant["namespace"]
        if ns in namespaces and ns not in quotas:
            quotas[ns] = [dict(name=_meta(q).get("name"), hard=dict(_spec(q).get("hard") or {}),
                               priority_class=_quota_priority(q))
                          for q in _items(k8s, "the ResourceQuotas of namespace %s" % ns,
                                          builtin_path("ResourceQuota", ns))]
    listed = _get(k8s, "the ClusterPolicies", api_path("nvidia.com/v1", "clusterpolicies"))
    items = sorted((listed or {}).get("items") or [], key=lambda o: _meta(o).get("name") or "")
    cluster_policy = (items[0].get("spec") or {}) if items else None
    queues = _get(k8s, "the Kueue ClusterQueues", api_path(policy["gpu_scheduling_policy_kueue_api_version"],
                                                           "clusterqueues"))
    kueue = None if queues is None else dict(
        (_meta(q).get("name"), q.get("spec") or {}) for q in queues.get("items") or [])
    return dict(priority_classes=pcs, resource_quotas=quotas, cluster_policy=cluster_policy, kueue=kueue,
                culling=_culling(k8s, policy, namespaces))
