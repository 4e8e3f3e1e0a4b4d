# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reads and the writes of gpu_game_day (client layer: knows nothing of Ansible).

Kueue Workloads, ClusterQueues, Jobs and pods are read as plain dicts for ``pure._game_day``. The
writes: with method preempt, the creation and deletion of the reclaim Job (a higher-priority Job on the
victim's LocalQueue, for Kueue to preempt for); with method delete, the deletion of a pod, with a grace
period (never 0) and the pod's uid as precondition, so a replacement pod of the same name is never hit.
Every call goes through ``_k8s.K8sClient``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError

JOB_PODS = "batch.kubernetes.io/controller-uid"  # the Job controller's label on its pods


class GameDayApi(object):
    """`params`: the auth options (or `k8s`, a K8sClient); `kueue_api_version` of the Workloads."""

    def __init__(self, params=None, k8s=None, kueue_api_version="kueue.x-k8s.io/v1beta2"):
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self.kueue_api_version = kueue_api_version
        self._core = self._batch = self._workloads = None

    def _plain(self, obj):
        return self.k8s.api.sanitize_for_serialization(obj)

    def core(self):
        if self._core is None:
            from kubernetes import client
            self._core = client.CoreV1Api(self.k8s.api)
        return self._core

    def batch(self):
        if self._batch is None:
            from kubernetes import client
            self._batch = client.BatchV1Api(self.k8s.api)
        return self._batch

    def list_workloads(self, namespace=None):
        if self._workloads is None:
            self._workloads = self.k8s.resource(self.kueue_api_version, "Workload")
        found = self.k8s.call(self._workloads.get, namespace=namespace) if namespace else \
            self.k8s.call(self._workloads.get)
        return found.to_dict().get("items") or []

    def list_jobs(self, namespace=None):
        if namespace:
            found = self.k8s.call(self.batch().list_namespaced_job, namespace)
        else:
            found = self.k8s.call(self.batch().list_job_for_all_namespaces)
        return self._plain(found).get("items") or []

    def list_job_pods(self, namespace=None):
        """Pods the Job controller made (they carry its controller-uid label)."""
        if namespace:
            found = self.k8s.call(self.core().list_namespaced_pod, namespace, label_selector=JOB_PODS)
        else:
            found = self.k8s.call(self.core().list_pod_for_all_namespaces, label_selector=JOB_PODS)
        return self._plain(found).get("items") or []

    def read_job(self, namespace, name):
        try:
            return self._plain(self.k8s.call(self.batch().read_namespaced_job, name, namespace))
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def read_cluster_queue(self, name):
        """The Kueue ClusterQueue (its quota and reservation), None when there is none of that name."""
        resource = self.k8s.resource(self.kueue_api_version, "ClusterQueue")
        try:
            return self.k8s.call(resource.get, name=name).to_dict()
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def create_job(self, body):
        """Create the reclaim Job (a higher-priority workload on the victim's LocalQueue)."""
        return self._plain(self.k8s.call(self.batch().create_namespaced_job, body["metadata"]["namespace"], body))

    def delete_job(self, namespace, name):
        """Delete the reclaim Job and its pods (background propagation); False when it was already gone."""
        from kubernetes import client
        try:
            self.k8s.call(self.batch().delete_namespaced_job, name, namespace,
                          body=client.V1DeleteOptions(propagation_policy="Background"))
            return True
        except K8sError as exc:
            if exc.status == 404:
                return False
            raise

    def delete_pod(self, namespace, name, uid, grace_period=None):
        """Delete the pod with its uid as precondition and a grace period (None: the pod's own);
        False when it was already gone (or replaced)."""
        from kubernetes import client
        if grace_period is not None and grace_period < 1:
            raise ValueError("a game day deletes pods with a grace period, not %r" % grace_period)
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid),
                                      grace_period_seconds=grace_period)
        try:
            self.k8s.call(self.core().delete_namespaced_pod, name, namespace, body=body)
            return True
        except K8sError as exc:
            if exc.status in (404, 409):  # gone, or a new pod under that name (the uid precondition)
                return False
            raise
