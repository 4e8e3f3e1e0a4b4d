# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest objects of the gpu_scheduling_policy and gpu_operator roles, read and written (client layer: knows
nothing of Ansible).

PriorityClasses, Namespaces, ResourceQuotas, ConfigMaps, Kueue's ResourceFlavors, ClusterQueues and LocalQueues and
the GPU Operator's ClusterPolicy (custom resources, through the dynamic client at the API version the caller names)
through the fault boundary of ``_k8s.K8sClient``:
one list per kind (``read``; ConfigMaps one list per namespace asked for, Secrets only those asked for by name,
Nodes only those of a label selector: the pools' nodes),
and writes that carry a precondition so that a repeat cannot apply twice - a patch names the resourceVersion it
was planned from, a delete its uid and resourceVersion. Creates go once (``call_once``). Errors are ``K8sError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import STRATEGIC_MERGE_PATCH, K8sClient, api_path


MERGE_PATCH = "application/merge-patch+json"
# the built-in kinds, by path: {kind: (api version, plural, namespaced)}; the notebook culler's (ServiceAccount to
# Deployment) are read by path by the audit (_guest_reader), guest_objects reads them at its manifests' versions
BUILTIN = {
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False),
    "Namespace": ("v1", "namespaces", False),
    "Node": ("v1", "nodes", False),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "ConfigMap": ("v1", "configmaps", True),
    "Secret": ("v1", "secrets", True),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "CronJob": ("batch/v1", "cronjobs", True),
    "Deployment": ("apps/v1", "deployments", True),
}


def builtin_path(kind, namespace=None, name=None):
    """The path of a built-in kind's collection (in `namespace` where the kind is namespaced), or of one object."""
    api_version, plural, namespaced = BUILTIN[kind]
    return api_path(api_version, plural, namespace if namespaced else None, name)


class GuestObjectsApi:
    """The guest objects of one guest cluster (the client is made from the auth options, or given);
    `versions`: the API version of each custom kind ({"ClusterQueue": "kueue.x-k8s.io/v1beta2", ...}).
    The built-in kinds go by path (``K8sClient.request``), the custom kinds through the dynamic client's resource
    of the version named."""

    def __init__(self, params=None, k8s=None, versions=None):
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self.versions = dict(versions or {})
        self._resources = {}

    def _custom(self, kind):
        """The dynamic resource of a custom kind (K8sError of kind ``not_served`` when the server lacks it)."""
        if kind not in self._resources:
            self._resources[kind] = self.k8s.resource(self.versions[kind], kind)
        return self._resources[kind]

    def read(self, kinds, namespaces=(), names=(), node_selector=None):
        """{(kind, namespace, name): object} of every object of `kinds`, one list per kind (ConfigMaps: one list in
        each of `namespaces`; Secrets: each of `names`, ``(namespace, name)``, by a field selector, so that no
        other Secret's data is read; Nodes: those of the label selector `node_selector`, none without one)."""
        out = {}
        for kind in kinds:
            if kind in self.versions:
                resource = self._custom(kind)
                items = (self.k8s.call(resource.get).to_dict().get("items") or [])
            elif kind == "ConfigMap":
                items = []
                for ns in sorted(set(namespaces)):
                    items += self.k8s.items(builtin_path(kind, ns))
            elif kind == "Node":
                items = self.k8s.items(builtin_path(kind), label_selector=node_selector) if node_selector else []
            elif kind == "Secret":
                items = []
                for ns, name in sorted(set(names)):
                    items += self.k8s.items(builtin_path(kind, ns), field_selector="metadata.name=%s" % name)
            else:
                items = self.k8s.items(builtin_path(kind))
            for obj in items:
                meta = obj.get("metadata") or {}
                obj.setdefault("kind", kind)
                out[(kind, meta.get("namespace") or "", meta["name"])] = obj
        return out

    def create(self, obj):
        kind, ns = obj["kind"], obj["metadata"].get("namespace")
        if kind in self.versions:
            return self.k8s.call_once(self._custom(kind).create, body=obj, namespace=ns)
        return self.k8s.request("POST", builtin_path(kind, ns), body=obj, once=True)

    def patch(self, kind, name, namespace, resource_version, body):
        """A patch of `body` that the server refuses (409) when the object changed since it was read: a merge
        patch of a custom kind, the strategic merge patch of a built-in one (a Node's labels merged, its taint
        list replaced by the one of `body`)."""
        body = dict(body, metadata=dict(body.get("metadata") or {}, resourceVersion=resource_version))
        if kind in self.versions:
            return self.k8s.call(self._custom(kind).patch, body=body, name=name, namespace=namespace,
                                 content_type=MERGE_PATCH)
        return self.k8s.request("PATCH", builtin_path(kind, namespace, name), body=body,
                                content_type=STRATEGIC_MERGE_PATCH)

    def delete(self, kind, name, namespace, uid, resource_version):
        body = {"preconditions": {"uid": uid, "resourceVersion": resource_version}}
        if kind in self.versions:
            return self.k8s.call(self._custom(kind).delete, name=name, namespace=namespace, body=body)
        return self.k8s.request("DELETE", builtin_path(kind, namespace, name), body=body)


__all__ = ["BUILTIN", "GuestObjectsApi", "builtin_path"]
