"""The drain's `timeout` is one deadline for the whole drain of a call, shared by every pod and node:
ten pods behind a budget that never lets go stop the drain after `timeout`, not ten times it; one pod
a budget holds does not hold up the others; the wait for the pods gone gets what the evictions left of
the deadline; the boundary's retries wait no longer than it. On a fake API clock, without sleeping."""
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import DrainApi, DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from tests.lib.clock import Clock
from tests.lib.k8s_paths import Paths
from tests.lib.k8s_answers import budget_refusal as refused


class Server(Paths):
    """Pods on nodes behind budgets: a pod of ``stuck`` is refused (429) by its budget while the clock is
    before ``stuck[key]`` (None: for ever); an evicted pod is gone at once, or ``lingers`` seconds later."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, clock, pods, stuck=None, lingers=None, post_seconds=0.0, faults=None):
        self.clock = clock
        self.pods = dict(pods)  # "ns/name" -> uid
        self.stuck = dict(stuck or {})
        self.lingers = dict(lingers or {})
        self.post_seconds = post_seconds
        self.faults = list(faults or [])
        self.gone_at = {}
        self.posts = []

    def create_namespaced_pod_eviction(self, name, namespace, body):
        key = "%s/%s" % (namespace, name)
        self.posts.append((self.clock.now, key))
        self.clock.now += self.post_seconds
        if self.faults:
            raise self.faults.pop(0)
        if key not in self.pods or key in self.gone_at:
            raise ApiException(status=404, reason="Not Found")
        if key in self.stuck and (self.stuck[key] is None or self.clock.now < self.stuck[key]):
            raise refused(key.split("/")[1].rsplit("-", 1)[0])
        self.gone_at[key] = self.clock.now + self.lingers.get(key, 0)
        return {"kind": "Status", "status": "Success"}

    def read_namespaced_pod(self, name, namespace):
        key = "%s/%s" % (namespace, name)
        if key not in self.pods or (key in self.gone_at and self.clock.now >= self.gone_at[key]):
            raise ApiException(status=404, reason="Not Found")
        return {"metadata": {"name": name, "namespace": namespace, "uid": self.pods[key]}}


def pod(key, node):
    ns, name = key.split("/")
    return {"namespace": ns, "name": name, "uid": "uid-" + name, "node": node}


def drain(server, clock):
    d = DrainApi(k8s=K8sClient(api=server, sleep=clock.sleep, clock=clock), sleep=clock.sleep, clock=clock, poll=1.0)
    d.k8s._paths = server
    return d


def test_ten_pods_behind_a_stuck_budget_stop_at_one_deadline_naming_every_pod():
    clock = Clock()
    pods = [pod("apps/llm-%d" % i, "node-%d" % (1 + i // 5)) for i in range(10)]
    server = Server(clock, dict(("%s/%s" % (p["namespace"], p["name"]), p["uid"]) for p in pods),
                    stuck=dict(("%s/%s" % (p["namespace"], p["name"]), None) for p in pods))
    d = drain(server, clock)
    d.cordoned = ["node-1", "node-2"]
    deadline = d.deadline(600)
    with pytest.raises(DrainError) as err:
        d.evict_all(pods, deadline, 600)
    # one deadline for all ten: about 600 s, not 10 x 600 s (per pod it was 6000 s)
    assert clock.now == 600.0
    assert not [t for t, _key in server.posts if t > 600.0]
    # every round asks for every pod once: the last pod was asked as often as the first
    per_pod = dict((k, sum(1 for _t, key in server.posts if key == k)) for k in server.pods)
    assert set(per_pod.values()) == {601}
    msg = str(err.value)
    assert msg.startswith("the drain's deadline (600 s) passed before every pod was evicted; still in the way: "
                          "on node node-1: apps/llm-0 (PodDisruptionBudget llm allows no disruption), "), msg
    assert "; on node node-2: apps/llm-5 (PodDisruptionBudget llm allows no disruption), " in msg
    assert all("apps/llm-%d (" % i in msg for i in range(10))
    assert msg.endswith("(left: nodes left cordoned: node-1, node-2; pods evicted so far: none; "
                        "a plain rerun resumes from there)"), msg


def test_one_pod_a_budget_holds_does_not_hold_up_the_others():
    clock = Clock()
    pods = [pod("apps/llm-0", "node-1"), pod("apps/web-0", "node-1"), pod("apps/web-1", "node-2")]
    server = Server(clock, dict(("%s/%s" % (p["namespace"], p["name"]), p["uid"]) for p in pods),
                    stuck={"apps/llm-0": 30.0})
    d = drain(server, clock)
    assert d.evict_all(pods, d.deadline(600), 600) == {
        "apps/llm-0": "evicted", "apps/web-0": "evicted", "apps/web-1": "evicted"}
    # the pods behind llm-0 went in the first round, not after its budget let go
    assert server.gone_at["apps/web-0"] == 0.0 and server.gone_at["apps/web-1"] == 0.0
    assert server.gone_at["apps/llm-0"] == 30.0 and d.evicted == ["apps/web-0", "apps/web-1", "apps/llm-0"]


def test_the_wait_for_pods_gone_gets_only_what_the_evictions_left():
    clock = Clock()
    pods = [pod("apps/llm-0", "node-1"), pod("apps/web-0", "node-2")]
    server = Server(clock, dict(("%s/%s" % (p["namespace"], p["name"]), p["uid"]) for p in pods),
                    stuck={"apps/llm-0": 550.0}, lingers={"apps/llm-0": 10000.0})
    d = drain(server, clock)
    d.cordoned = ["node-1", "node-2"]
    deadline = d.deadline(600)
    d.evict_all(pods, deadline, 600)
    assert clock.now == 550.0
    with pytest.raises(DrainError) as err:
        d.wait_gone(pods, 600, deadline=deadline)
    assert clock.now == 600.0  # 50 s of wait, not another 600
    assert str(err.value) == (
        "the drain's deadline (600 s) passed before the evicted pods were gone; still in the way: on node node-1: "
        "apps/llm-0 (evicted, not gone yet) (left: nodes left cordoned: node-1, node-2; pods evicted so far: "
        "apps/web-0, apps/llm-0; a plain rerun resumes from there)")


def test_every_pod_is_asked_for_once_even_past_the_deadline_and_a_rerun_finds_them_gone():
    clock = Clock()
    pods = [pod("apps/a-0", "node-1"), pod("apps/b-0", "node-1")]
    server = Server(clock, dict(("%s/%s" % (p["namespace"], p["name"]), p["uid"]) for p in pods), post_seconds=2.0)
    d = drain(server, clock)
    assert d.evict_all(pods, d.deadline(1), 1) == {"apps/a-0": "evicted", "apps/b-0": "evicted"}
    again = drain(server, clock)
    assert again.evict_all(pods, again.deadline(1), 1) == {"apps/a-0": "gone", "apps/b-0": "gone"}


def test_the_boundarys_retries_wait_no_longer_than_the_drains_deadline():
    clock = Clock()
    busy = ApiException(status=503, reason="Service Unavailable")
    busy.headers = {"Retry-After": "300"}
    server = Server(clock, {"apps/llm-0": "uid-llm-0"}, faults=[busy, busy])
    d = drain(server, clock)
    d.k8s.timeout = 200  # a call's own bound (3 x 200 s) is not what stops it here
    with pytest.raises(DrainError) as err:
        d.evict_all([pod("apps/llm-0", "node-1")], d.deadline(20), 20)
    assert clock.slept == [20.0] and clock.now == 20.0  # the server asked for 300 s; 20 were left
    assert "cannot evict pod apps/llm-0: the API server at https://guest:6443 answered 503 Service Unavailable" \
        in str(err.value)
    assert d.k8s.deadline is None  # the drain's deadline does not stay on the client
