"""K8sClient.request, down to the HTTP requests the kubernetes client makes: a request by path sends that request
and no discovery, answers plain data, goes through the fault boundary (a read repeated after a 503, a change
without a precondition never repeated after a 504), and the guest objects' built-in kinds are written at their
paths with the strategic merge patch the typed client sent; the token and the request timeout reach it as they
reach a typed call."""
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import GuestObjectsApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError, api_client, api_path
from tests.lib.k8s_paths import http_client


def k8s(*answers):
    return http_client(*answers)


@pytest.mark.parametrize("args, path", [
    (("v1", "namespaces"), "/api/v1/namespaces"),
    (("v1", "nodes", None, "gpu-0"), "/api/v1/nodes/gpu-0"),
    (("v1", "pods", "apps", "llm-0"), "/api/v1/namespaces/apps/pods/llm-0"),
    (("policy/v1", "poddisruptionbudgets"), "/apis/policy/v1/poddisruptionbudgets"),
    (("scheduling.k8s.io/v1", "priorityclasses", None, "inference"), "/apis/scheduling.k8s.io/v1/priorityclasses/inference"),
])
def test_the_path_of_the_core_group_and_of_the_others(args, path):
    assert api_path(*args) == path


def test_a_request_by_path_is_that_request_alone_and_answers_plain_data():
    c, pool = k8s((200, {"kind": "NamespaceList", "items": [{"metadata": {"name": "gpu-operator"}}]}))
    items = c.items(api_path("v1", "namespaces"), label_selector="app=x")
    assert items == [{"metadata": {"name": "gpu-operator"}}] and isinstance(items[0], dict)
    assert [(r["method"], r["path"], r["query"]) for r in pool.requests] == [
        ("GET", "/api/v1/namespaces", {"labelSelector": "app=x"})]


def test_a_read_is_repeated_after_a_503_and_a_change_without_precondition_never_after_a_504():
    c, pool = k8s((503, {"message": "busy"}), (200, {"items": []}))
    assert c.items("/api/v1/nodes") == [] and len(pool.requests) == 2
    c, pool = k8s((504, {"message": "gateway timeout"}), (201, {}))
    with pytest.raises(K8sError) as err:
        c.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "a"}}, once=True)
    assert err.value.outcome_unknown and err.value.status == 504 and len(pool.requests) == 1


def test_send_raises_what_the_client_raised_for_its_caller_to_judge():
    c, pool = k8s((429, {"message": "Cannot evict pod as it would violate the pod's disruption budget."}))
    with pytest.raises(Exception) as err:
        c.send("POST", "/api/v1/namespaces/apps/pods/llm-0/eviction", body={"kind": "Eviction"})
    assert not isinstance(err.value, K8sError) and err.value.status == 429 and len(pool.requests) == 1


def test_the_guest_objects_built_in_kinds_are_written_at_their_paths():
    c, pool = k8s((200, {}))
    guest = GuestObjectsApi(k8s=c)
    guest.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "team-a"}})
    guest.patch("PriorityClass", "inference", None, "7", {"value": 1000})
    guest.delete("ResourceQuota", "gpu", "team-a", "uid-1", "8")
    sent = [(r["method"], r["path"], r["headers"].get("Content-Type"), r["body"]) for r in pool.requests]
    assert sent == [
        ("POST", "/api/v1/namespaces/team-a/resourcequotas", "application/json",
         {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": "team-a"}}),
        ("PATCH", "/apis/scheduling.k8s.io/v1/priorityclasses/inference", "application/strategic-merge-patch+json",
         {"value": 1000, "metadata": {"resourceVersion": "7"}}),
        ("DELETE", "/api/v1/namespaces/team-a/resourcequotas/gpu", "application/json",
         {"preconditions": {"uid": "uid-1", "resourceVersion": "8"}}),
    ]


def test_a_request_by_path_carries_the_token_and_the_request_timeout():
    api = api_client({"host": "https://guest.example:6443", "api_key": "t0ken"}, request_timeout=7)
    seen = []

    def request(method, url, headers=None, body=None, post_params=None, _request_timeout=None, **_kw):
        seen.append((method, url, (headers or {}).get("authorization"), _request_timeout))
        raise ApiException(status=404, reason="Not Found")

    api.rest_client.request = request
    with pytest.raises(K8sError) as err:
        K8sClient(api=api, attempts=1, warn=False).request("GET", api_path("v1", "namespaces", name="x"))
    assert err.value.status == 404
    assert seen == [("GET", "https://guest.example:6443/api/v1/namespaces/x", "Bearer t0ken", 7)]
