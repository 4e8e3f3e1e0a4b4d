"""Drain writes whose answer a gateway lost, on the rig behind the fault proxy (tests/sim/k8s_proxy.py):
the eviction reaches the API server and is carried out, the proxy answers 504; by the time the client
repeats it, a new pod of the same name exists (made by the test in the client's backoff pause, as a
StatefulSet would). The uid precondition makes the API server refuse the repeat (409) and the new pod
stays. A cordon PATCH forwarded then answered 504 is read again and reported done."""
from __future__ import annotations

import uuid

from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, api_client

TAINT = "gpupool.vcf/drain-test"


def node(core, name):
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core.create_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                                   "annotations": {"kwok.x-k8s.io/node": "fake"}},
                      "spec": {"taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]},
                      "status": {"capacity": capacity, "allocatable": capacity}})


def pod(core, ns, name, on):
    return core.create_namespaced_pod(ns, {"metadata": {"name": name, "labels": {"app": "once"}}, "spec": {
        "nodeName": on, "terminationGracePeriodSeconds": 0, "containers": [{"name": "main", "image": "sim/cuda:12"}],
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]}})


def gone(core, ns, name, old_uid):
    try:
        return core.read_namespaced_pod(name, ns).metadata.uid != old_uid
    except ApiException as exc:
        return exc.status == 404


def test_a_repeated_eviction_leaves_the_replacement_pod_and_a_lost_cordon_answer_is_read_again(
        k8s_rig, k8s_api, k8s_namespace):
    core, ns = client.CoreV1Api(k8s_api), k8s_namespace
    name = "drain-once-%s" % uuid.uuid4().hex[:6]
    node(core, name)
    try:
        first = pod(core, ns, "llm-0", name)
        wait_for("pod llm-0 bound", lambda: core.read_namespaced_pod("llm-0", ns).spec.node_name == name)
        made = {}

        def pause(_seconds):
            # the client's backoff before its repeat: the first eviction was carried out; a new pod of
            # the same name appears, as its StatefulSet would make it
            if "uid" not in made:
                wait_for("llm-0 evicted", lambda: gone(core, ns, "llm-0", first.metadata.uid))
                made["uid"] = pod(core, ns, "llm-0", name).metadata.uid

        with k8s_rig.fault_proxy() as proxy:
            api = DrainApi(k8s=K8sClient(api=api_client({"kubeconfig": str(proxy.kubeconfig)}), sleep=pause),
                           sleep=lambda s: None)
            eviction = "/namespaces/%s/pods/llm-0/eviction$" % ns
            proxy.fail(eviction, status=504, method="POST", forward=True, times=1)
            ref = {"namespace": ns, "name": "llm-0", "uid": first.metadata.uid}
            assert api.evict(ref) == "gone"
            assert proxy.count("POST", eviction) == 2  # the repeat was sent, and refused by the precondition
            assert core.read_namespaced_pod("llm-0", ns).metadata.uid == made["uid"]  # the new pod stays
            assert api.evicted == []

            nodes = "/api/v1/nodes/%s$" % name
            proxy.fail(nodes, status=504, method="PATCH", forward=True, times=1)
            assert api.cordon(name) == "cordoned"
            assert proxy.count("PATCH", nodes) == 2  # the repeat carried the old resourceVersion: 409
            got = core.read_node(name)
            assert got.spec.unschedulable is True and got.metadata.annotations[CORDONED_BY] == "gpupool.vcf"
            assert api.cordoned == [name]
    finally:
        core.delete_node(name)
