"""guest_node_drain's `timeout` is one deadline for the whole drain of the call, shared by every pod and
node: ten pods behind a budget that never lets go fail the run after `timeout` on the API's clock (it was
spent per eviction: ten times as long), naming per node the pods still in the way, what was evicted and
the nodes left cordoned; a plain rerun, once the budget lets go, resumes. No sleeping: a fake clock."""
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.modules import guest_node_drain
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module
from tests.lib.clock import Clock
from tests.lib.k8s_paths import Paths

NODES = ("tkc-gpu-1", "tkc-gpu-2")


class Guest(Paths):
    """A guest cluster's nodes, pods and one PodDisruptionBudget ``llm`` that refuses every eviction of an
    ``llm-*`` pod while ``budget_stuck``, and else before ``next_allowed`` on the clock (``every`` seconds
    after the last one: the time a replacement takes to be healthy); an evicted pod is gone at once."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, clock):
        self.clock = clock
        self.budget_stuck = True
        self.next_allowed = 0.0
        self.every = 0.0
        self.nodes = dict((n, {"metadata": {"name": n, "resourceVersion": "1", "annotations": {}},
                               "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
                          for n in NODES)
        self.pods = {}
        for i in range(10):
            self._pod("llm-%d" % i, NODES[i % 2], "llm")
        self._pod("web-0", NODES[0], "web")
        self.evictions = []

    def _pod(self, name, node, app):
        self.pods["apps/" + name] = {
            "metadata": {"name": name, "namespace": "apps", "uid": "uid-" + name, "labels": {"app": app},
                         "ownerReferences": [{"controller": True, "kind": "ReplicaSet", "name": app, "uid": "rs"}]},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}

    # nodes
    def list_node(self):
        return {"items": list(self.nodes.values())}

    def read_node(self, name):
        return self.nodes[name]

    def patch_node(self, name, body):
        node = self.nodes[name]
        for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
            node["metadata"]["annotations"][key] = value
        node["spec"].update(body.get("spec") or {})
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return node

    # pods and budgets
    def list_pod_for_all_namespaces(self, **_kw):
        return {"items": list(self.pods.values())}

    def list_pod_disruption_budget_for_all_namespaces(self):
        return {"items": [{"metadata": {"name": "llm", "namespace": "apps"},
                           "spec": {"selector": {"matchLabels": {"app": "llm"}}},
                           "status": {"disruptionsAllowed": 0 if self.budget_stuck else 10, "expectedPods": 10,
                                      "desiredHealthy": 9, "currentHealthy": 9}}]}

    def create_namespaced_pod_eviction(self, name, namespace, body):
        key = "%s/%s" % (namespace, name)
        self.evictions.append((self.clock.now, key))
        if key not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        if name.startswith("llm-") and (self.budget_stuck or self.clock.now < self.next_allowed):
            exc = ApiException(status=429, reason="Too Many Requests")
            exc.body = json.dumps({"kind": "Status", "code": 429, "details": {"causes": [
                {"reason": "DisruptionBudget", "message": "The disruption budget llm needs 9 healthy pods and has 9 "
                                                          "currently"}]}})
            raise exc
        if name.startswith("llm-"):
            self.next_allowed = self.clock.now + self.every
        del self.pods[key]
        return {"kind": "Status", "status": "Success"}

    def read_namespaced_pod(self, name, namespace):
        key = "%s/%s" % (namespace, name)
        if key not in self.pods:
            raise ApiException(status=404, reason="Not Found")
        return {"metadata": {"name": name, "namespace": namespace, "uid": "uid-" + name}}


class NoKueue(object):
    @staticmethod
    def get():
        raise ApiException(status=404, reason="Not Found")


@pytest.fixture
def guest(monkeypatch):
    clock = Clock()
    server = Guest(clock)

    def api(_params, owner):
        d = DrainApi(k8s=K8sClient(api=server, sleep=clock.sleep, clock=clock), owner=owner, sleep=clock.sleep,
                     clock=clock)
        d.k8s._paths = server  # pylint: disable=protected-access
        d._workloads = NoKueue()  # pylint: disable=protected-access
        return d

    monkeypatch.setattr(guest_node_drain, "DrainApi", api)
    return server, clock


def run(**params):
    spec = dict((k, v.get("default")) for k, v in guest_node_drain.ARGUMENT_SPEC.items())
    spec.update(vms=[{"name": n, "uuid": None} for n in NODES], owner="host-roll/esx-1", **params)
    module = Module(spec, warnings_expected=False)
    with pytest.raises(Exited) as exc:
        Runner(module, guest_node_drain.GuestNodes(module)).run()
    return exc.value.result


def test_ten_pods_behind_a_stuck_budget_fail_the_drain_at_one_deadline_and_a_rerun_resumes(guest):
    server, clock = guest
    res = run(timeout=600)
    assert res.get("failed"), res
    assert clock.now == 600.0  # one deadline for the drain; per eviction it was 10 x 600 s
    msg = res["msg"]
    assert msg.startswith("Unable to evict the pods of the guest nodes of 2 VMs (host-roll/esx-1): the drain's "
                          "deadline (600 s) passed before every pod was evicted; still in the way: on node tkc-gpu-1: "
                          "apps/llm-0 (PodDisruptionBudget llm allows no disruption), apps/llm-2 "), msg
    assert "; on node tkc-gpu-2: apps/llm-1 (PodDisruptionBudget llm allows no disruption), apps/llm-3 " in msg, msg
    assert all("apps/llm-%d (PodDisruptionBudget llm" % i in msg for i in range(10)), msg
    assert msg.endswith("(left: nodes left cordoned: tkc-gpu-1, tkc-gpu-2; pods evicted so far: apps/web-0; "
                        "a plain rerun resumes from there)"), msg
    assert "apps/web-0" not in server.pods
    assert all(n["spec"]["unschedulable"] and n["metadata"]["annotations"][CORDONED_BY] == "host-roll/esx-1"
               for n in server.nodes.values())

    server.budget_stuck = False  # the budget lets go: a plain rerun resumes on the nodes it left cordoned
    start = clock.now
    res = run(timeout=600)
    assert not res.get("failed") and res["changed"], res
    assert res["cordoned"] == [] and sorted(res["evicted"]) == sorted("apps/llm-%d" % i for i in range(10))
    assert server.pods == {} and clock.now == start  # nothing held it: no wait


def test_a_budget_that_lets_one_pod_go_every_590_s_is_not_waited_for_ten_times(guest):
    server, clock = guest
    server.budget_stuck, server.every, server.next_allowed = False, 590.0, 590.0
    res = run(timeout=600)
    # spent per eviction, each of the ten pods waited 590 s of its own 600: 98 minutes, and the run passed
    assert res.get("failed") and clock.now == 600.0, (clock.now, res)
    assert "pods evicted so far: apps/web-0, apps/llm-0;" in res["msg"], res["msg"]
    assert all("apps/llm-%d (PodDisruptionBudget llm allows no disruption)" % i in res["msg"] for i in range(1, 10))
    assert not [t for t, _key in server.evictions if t > 600.0]
