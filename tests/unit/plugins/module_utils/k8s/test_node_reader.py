"""The node reader's lists by path, down to the HTTP requests: gpu_capacity's Pending pods and the first Kueue
version the API serves (a 404 is the next version, none served is no Kueue), preflight's CRD names, and
driver_upgrade_wait's nodes of a label selector (all of them without one)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s import _node_reader
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from tests.lib.k8s_paths import http_client

PENDING = {"metadata": {"name": "train-0", "namespace": "team-a"}, "status": {"phase": "Pending"}}


def sent(pool):
    return [(r["method"], r["path"], r["query"]) for r in pool.requests]


def test_pending_pods_and_the_first_kueue_version_served():
    k8s, pool = http_client((200, {"items": [PENDING]}), (404, {"message": "not found"}),
                            (200, {"items": [{"metadata": {"name": "wl-1"}}]}), (200, {"items": []}))
    out = _node_reader.read_pending(k8s, "kueue.x-k8s.io", ["v1beta2", "v1beta1"])
    assert out == {"pods": [PENDING], "kueue": {"workloads": [{"metadata": {"name": "wl-1"}}], "local_queues": []}}
    assert sent(pool) == [
        ("GET", "/api/v1/pods", {"fieldSelector": "status.phase=Pending"}),
        ("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads", {}),
        ("GET", "/apis/kueue.x-k8s.io/v1beta1/workloads", {}),
        ("GET", "/apis/kueue.x-k8s.io/v1beta1/localqueues", {}),
    ]


def test_no_kueue_version_served_is_no_kueue_and_another_failure_is_raised():
    k8s, _pool = http_client((200, {"items": []}), (404, {"message": "not found"}))
    assert _node_reader.read_pending(k8s, "kueue.x-k8s.io", ["v1beta2", "v1beta1"]) == {"pods": [], "kueue": None}
    k8s, _pool = http_client((200, {"items": []}), (403, {"message": "forbidden"}))
    with pytest.raises(K8sError) as err:
        _node_reader.read_pending(k8s, "kueue.x-k8s.io", ["v1beta2"])
    assert err.value.status == 403


def test_the_nodes_of_a_selector_and_all_of_them_without_one():
    k8s, pool = http_client((200, {"items": [{"metadata": {"name": "gpu-0"}}]}))
    assert _node_reader.list_nodes(k8s, "nvidia.com/gpu.present=true") == [{"metadata": {"name": "gpu-0"}}]
    assert _node_reader.list_nodes(k8s) == [{"metadata": {"name": "gpu-0"}}]
    assert sent(pool) == [("GET", "/api/v1/nodes", {"labelSelector": "nvidia.com/gpu.present=true"}),
                          ("GET", "/api/v1/nodes", {})]


def test_the_crd_names_sorted_or_the_error(monkeypatch):
    k8s, pool = http_client((200, {"items": [{"metadata": {"name": "notebooks.kubeflow.org"}},
                                             {"metadata": {"name": "clusterpolicies.nvidia.com"}}]}))
    monkeypatch.setattr(_node_reader, "K8sClient", lambda params, timeout: k8s)
    params = dict(kubeconfig="kc", context=None, request_timeout=5)
    assert _node_reader.read_crd_names(params) == {"crds": ["clusterpolicies.nvidia.com", "notebooks.kubeflow.org"]}
    assert sent(pool) == [("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {})]
    k8s, pool = http_client((401, {"message": "Unauthorized"}))
    assert "401" in _node_reader.read_crd_names(params)["error"]
