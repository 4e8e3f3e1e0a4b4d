# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A VKS Cluster and its ClusterClass in the Supervisor's Kubernetes API (client layer: knows nothing of Ansible).

What vks_node_pool reads and writes, through the fault boundary of ``_k8s.K8sClient`` (request
timeout, bounded retries, one error type): the Cluster (``cluster.x-k8s.io``) in the first
version the server serves that holds its managed topology, its ClusterClass, and one ``PUT`` of
the Cluster carrying the ``resourceVersion`` it was read at. Errors are ``K8sError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import class_ref

GROUP = "cluster.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")


class VksClusterApi:
    """One Cluster of one Supervisor namespace (the client is made from the auth options)."""

    def __init__(self, params, namespace, name):
        self.k8s = K8sClient(params)
        self.namespace = namespace
        self.name = name

    def resource(self, version, kind):
        return self.k8s.resource("%s/%s" % (GROUP, version), kind)

    def read_cluster(self):
        """(version, Cluster dict, {name, namespace} of its ClusterClass) in the version it was written in.

        (None, None, None) when no served version shows a managed topology; a missing Cluster is a
        K8sError "not found" (status 404).
        """
        last = None
        for version in VERSIONS:
            try:
                obj = self.k8s.call(self.resource(version, "Cluster").get, name=self.name, namespace=self.namespace).to_dict()
            except K8sError as exc:
                if exc.status == 404:
                    raise K8sError("not found", status=404, attempts=exc.attempts)
                if exc.kind != "not_served":
                    raise
                last = exc
                continue
            ref = class_ref(obj, version, self.namespace)
            if ref is not None:
                return version, obj, ref
        if last is not None:
            raise last
        return None, None, None

    def read_class(self, version, ref):
        """The ClusterClass ``ref`` names, in the Cluster's version first; K8sError "not found" when no version has it."""
        for each in (version,) + tuple(x for x in VERSIONS if x != version):
            try:
                return self.k8s.call(self.resource(each, "ClusterClass").get, name=ref["name"],
                                     namespace=ref["namespace"]).to_dict()
            except K8sError as exc:
                if exc.status != 404 and exc.kind != "not_served":
                    raise
        raise K8sError("ClusterClass %s/%s not found" % (ref["namespace"], ref["name"]), status=404)

    def replace(self, version, body, dry_run=False):
        """One PUT of the Cluster (a server-side dry run with ``dry_run``).

        It carries the resourceVersion it was read at: idempotent enough to retry on a timeout or
        a 5xx (a repeat of a stored update gets 409), never half-written.
        """
        kwargs = {"dry_run": "All"} if dry_run else {}
        self.k8s.call(self.resource(version, "Cluster").replace, body=body, namespace=self.namespace, **kwargs)


__all__ = ["GROUP", "VERSIONS", "VksClusterApi"]
