"""_drain_api without a server: a 429 from a PodDisruptionBudget is retried within the bound and
then named, a missing pod is already evicted, and each failure says what was left."""
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import DrainApi, DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from tests.lib.clock import Clock
from tests.lib.k8s_paths import Paths
from tests.lib.k8s_answers import budget_refusal as refused

POD = {"namespace": "apps", "name": "llm-0"}


class Api(Paths):
    """The ApiClient seen by K8sClient and the API server's eviction path with scripted answers."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, answers):
        self.answers = list(answers)
        self.posts = 0

    def create_namespaced_pod_eviction(self, name, namespace, body):
        self.posts += 1
        answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer
        return {"kind": "Status", "status": "Success"}


def drain(answers):
    api, clock = Api(answers), Clock()
    d = DrainApi(k8s=K8sClient(api=api, sleep=clock.sleep, clock=clock), sleep=clock.sleep, clock=clock, poll=1.0)
    d.k8s._paths = api
    return d, api, clock


def test_budget_refusal_is_retried_until_it_lets_go():
    d, api, clock = drain([refused(), refused(), None])
    assert d.evict(POD, budget_timeout=30) == "evicted"
    assert api.posts == 3 and clock.slept == [1.0, 1.0]
    assert d.evicted == ["apps/llm-0"]


def test_budget_refusal_past_the_bound_names_the_budget_and_what_was_left():
    d, api, clock = drain([refused()] * 100)
    d.cordoned, d.evicted = ["node-1"], ["apps/web-1"]
    with pytest.raises(DrainError) as err:
        d.evict(POD, budget_timeout=5)
    assert api.posts == 6 and clock.now == 5.0  # one post a second, none after the bound
    assert str(err.value) == ("the drain's deadline (5 s) passed before every pod was evicted; still in the way: "
                              "apps/llm-0 (PodDisruptionBudget llm allows no disruption) (left: nodes left cordoned: "
                              "node-1; pods evicted so far: apps/web-1; a plain rerun resumes from there)")


def test_missing_pod_was_evicted_before_and_other_failures_say_what_was_left():
    d = drain([ApiException(status=404, reason="Not Found")])[0]
    assert d.evict(POD) == "gone" and d.evicted == []
    d = drain([ApiException(status=403, reason="Forbidden")])[0]
    with pytest.raises(DrainError) as err:
        d.evict(POD)
    assert err.value.status == 403
    assert str(err.value).startswith("cannot evict pod apps/llm-0: the API server at https://guest:6443 answered "
                                     "403 Forbidden")
    assert str(err.value).endswith("(left: nodes left cordoned: none; pods evicted so far: none; "
                                   "a plain rerun resumes from there)")


def test_a_503_is_retried_by_the_boundary_not_counted_against_the_budget():
    d, api, clock = drain([ApiException(status=503, reason="Service Unavailable"), None])
    assert d.evict(POD, budget_timeout=30) == "evicted"
    assert api.posts == 2 and len(clock.slept) == 1 and clock.slept[0] < 1  # the boundary's backoff, not a round
