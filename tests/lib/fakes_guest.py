"""A guest (VKS) cluster's Kubernetes API as the collection's Kubernetes client layer calls it, for the main()
unit tests of the guest modules: the requests the drain, device plugin and pool_ready clients make by path
(``Paths``, tests/lib/k8s_paths.py), each answered by the method below that the typed API names it by, over
plain objects. The client classes of ``plugins/module_utils/k8s`` run on it unchanged (their fault boundary
turns the ``ApiException`` a test sets in ``fail`` into the room's ``K8sError``); ``calls`` records every
request, ``made`` the auth options each client was built with."""
import copy
import json

from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import DrainApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._pool_ready_api import PoolReadyApi
from tests.lib.clock import Clock
from tests.lib.k8s_paths import Paths

WRITES = ("patch_node", "create_namespaced_pod", "delete_namespaced_pod", "create_namespaced_pod_eviction")


def node(name, ready=True, gpus=1, resource="nvidia.com/gpu", labels=None, unschedulable=False, annotations=None):
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": dict(labels or {}),
                         "annotations": dict(annotations or {})},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                       "allocatable": {resource: str(gpus)} if gpus else {},
                       "nodeInfo": {"bootID": "boot-" + name}}}


def pod(name, node_name, namespace="apps", app=None, owner="ReplicaSet", labels=None, ready=True, priority=None):
    meta = {"name": name, "namespace": namespace, "uid": "uid-" + name,
            "labels": dict(labels or ({"app": app} if app else {}))}
    if owner:
        meta["ownerReferences"] = [{"controller": True, "kind": owner, "name": app or name, "uid": "owner-" + name}]
    spec = {"nodeName": node_name}
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": meta, "spec": spec,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def budget(name, app, allowed, namespace="apps"):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed, "expectedPods": 2, "desiredHealthy": 1, "currentHealthy": 2}}


class GuestCluster(Paths):
    """Nodes, pods and PodDisruptionBudgets. An eviction a budget allows removes the pod at once and spends
    one disruption; one it does not allow answers 429 as the API server does. A pod created runs at once in
    the ``probe_phase`` given (Running and Ready by default)."""

    class configuration:
        host = "https://guest.example.com:6443"

    def __init__(self, nodes=(), pods=(), budgets=()):
        self.nodes = dict((n["metadata"]["name"], copy.deepcopy(n)) for n in nodes)
        self.pods = dict(("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]), copy.deepcopy(p))
                         for p in pods)
        self.budgets = [copy.deepcopy(b) for b in budgets]
        self.fail = {}  # method name -> the exception it raises
        self.calls = []
        self.made = []
        self.probe_phase = "Running"
        self.clock = Clock()

    def writes(self):
        return [c for c in self.calls if c[0] in WRITES]

    def _call(self, name, *args):
        self.calls.append((name,) + args)
        if name in self.fail:
            raise self.fail[name]

    # nodes
    def list_node(self, **_kw):
        self._call("list_node")
        return {"items": [copy.deepcopy(n) for n in self.nodes.values()]}

    def read_node(self, name):
        self._call("read_node", name)
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.nodes[name])

    def patch_node(self, name, body):
        self._call("patch_node", name)
        n = self.nodes[name]
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            if value is None:
                n["metadata"]["annotations"].pop(key, None)
            else:
                n["metadata"]["annotations"][key] = value
        n["spec"].update(body.get("spec") or {})
        n["metadata"]["resourceVersion"] = str(int(n["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(n)

    # pods
    def _select(self, label_selector=None, field_selector=None, namespace=None):
        out = []
        want = dict(kv.split("=", 1) for kv in label_selector.split(",")) if label_selector else {}
        on = field_selector.split("=", 1)[1] if field_selector else None
        for p in self.pods.values():
            labels = p["metadata"].get("labels") or {}
            if namespace and p["metadata"]["namespace"] != namespace:
                continue
            if any(labels.get(k) != v for k, v in want.items()) or (on and p["spec"].get("nodeName") != on):
                continue
            out.append(copy.deepcopy(p))
        return {"items": out}

    def list_pod_for_all_namespaces(self, label_selector=None, field_selector=None, **_kw):
        self._call("list_pod_for_all_namespaces")
        return self._select(label_selector, field_selector)

    def list_namespaced_pod(self, namespace, label_selector=None, **_kw):
        self._call("list_namespaced_pod", namespace)
        return self._select(label_selector, namespace=namespace)

    def read_namespaced_pod(self, name, namespace):
        self._call("read_namespaced_pod", name, namespace)
        key = "%s/%s" % (namespace, name)
        if key not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.pods[key])

    def create_namespaced_pod(self, namespace, body):
        self._call("create_namespaced_pod", namespace, body["metadata"]["name"])
        made = copy.deepcopy(body)
        made["metadata"]["uid"] = "uid-" + body["metadata"]["name"]
        ready = self.probe_phase == "Running"
        made["spec"]["nodeName"] = sorted(self.nodes)[0] if self.nodes else None
        made["status"] = {"phase": self.probe_phase,
                          "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        self.pods["%s/%s" % (namespace, body["metadata"]["name"])] = made
        return copy.deepcopy(made)

    def delete_namespaced_pod(self, name, namespace, body=None):
        self._call("delete_namespaced_pod", name, namespace)
        if self.pods.pop("%s/%s" % (namespace, name), None) is None:
            raise ApiException(status=404, reason="Not Found")
        return {"kind": "Status", "status": "Success"}

    # budgets and evictions
    def list_pod_disruption_budget_for_all_namespaces(self, **_kw):
        self._call("list_pod_disruption_budget_for_all_namespaces")
        return {"items": copy.deepcopy(self.budgets)}

    def list_namespaced_pod_disruption_budget(self, namespace, **_kw):
        self._call("list_namespaced_pod_disruption_budget", namespace)
        return {"items": [copy.deepcopy(b) for b in self.budgets if b["metadata"]["namespace"] == namespace]}

    def _budget_of(self, p):
        labels = p["metadata"].get("labels") or {}
        for b in self.budgets:
            match = b["spec"]["selector"]["matchLabels"]
            if b["metadata"]["namespace"] == p["metadata"]["namespace"] and all(
                    labels.get(k) == v for k, v in match.items()):
                return b
        return None

    def create_namespaced_pod_eviction(self, name, namespace, body):
        self._call("create_namespaced_pod_eviction", name, namespace)
        key = "%s/%s" % (namespace, name)
        if key not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        b = self._budget_of(self.pods[key])
        if b is not None:
            if b["status"]["disruptionsAllowed"] < 1:
                exc = ApiException(status=429, reason="Too Many Requests")
                exc.body = json.dumps({"kind": "Status", "code": 429, "details": {"causes": [
                    {"reason": "DisruptionBudget", "message": "The disruption budget %s needs 1 healthy pods"
                                                              % b["metadata"]["name"]}]}})
                raise exc
            b["status"]["disruptionsAllowed"] -= 1
        del self.pods[key]
        return {"kind": "Status", "status": "Success"}


class _NoKueue:
    """The cluster serves no Kueue API."""

    @staticmethod
    def get():
        raise ApiException(status=404, reason="Not Found")


def drain_api(cluster):
    """A stand-in for the ``DrainApi`` class guest_node_drain imports: the real DrainApi, on ``cluster``."""
    def make(params, owner):
        cluster.made.append(dict(params))
        clock = cluster.clock
        api = DrainApi(k8s=K8sClient(api=cluster, sleep=clock.sleep, clock=clock), owner=owner, sleep=clock.sleep,
                       clock=clock)
        api.k8s._paths = cluster  # pylint: disable=protected-access
        api._workloads = _NoKueue()  # pylint: disable=protected-access
        return api
    return make


def pool_ready_api(cluster):
    """A stand-in for the ``PoolReadyApi`` class pool_ready imports: the real PoolReadyApi, on ``cluster``."""
    def make(params):
        cluster.made.append(dict(params))
        api = PoolReadyApi(k8s=K8sClient(api=cluster, sleep=cluster.clock.sleep, clock=cluster.clock))
        api.k8s._paths = cluster  # pylint: disable=protected-access
        return api
    return make
