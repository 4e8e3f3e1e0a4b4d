"""GuestObjectsApi's Nodes, down to the HTTP request the kubernetes client makes: one list of the nodes of a label
selector (none without one), and a patch of a node that is a strategic merge carrying the resourceVersion it was
planned from."""
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import GuestObjectsApi
from tests.lib.k8s_paths import http_client


def api(requests, data):
    k8s, pool = http_client((200, data), attempts=1)
    pool.requests = requests
    return GuestObjectsApi(k8s=k8s)


NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-0", "resourceVersion": "12", "labels": {"gpupool.vcf/pool": "gpu-h100"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}


def test_the_nodes_of_a_selector_are_one_list_and_none_are_read_without_one():
    requests = []
    guest = api(requests, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [NODE]})
    out = guest.read(["Node"], node_selector="gpupool.vcf/pool in (gpu-h100)")
    assert list(out) == [("Node", "", "gpu-0")]
    assert out[("Node", "", "gpu-0")]["spec"]["taints"] == NODE["spec"]["taints"]
    assert [(r["method"], r["path"], r["query"]) for r in requests] == [
        ("GET", "/api/v1/nodes", {"labelSelector": "gpupool.vcf/pool in (gpu-h100)"})]
    assert guest.read(["Node"]) == {} and len(requests) == 1


def test_a_node_patch_is_a_strategic_merge_with_the_planned_resource_version():
    requests = []
    guest = api(requests, NODE)
    guest.patch("Node", "gpu-0", None, "12", {"metadata": {"labels": {"a": "b"}}, "spec": {"taints": []}})
    (req,) = requests
    assert (req["method"], req["path"]) == ("PATCH", "/api/v1/nodes/gpu-0")
    assert req["headers"]["Content-Type"] == "application/strategic-merge-patch+json"
    assert req["body"] == {"metadata": {"labels": {"a": "b"}, "resourceVersion": "12"}, "spec": {"taints": []}}
