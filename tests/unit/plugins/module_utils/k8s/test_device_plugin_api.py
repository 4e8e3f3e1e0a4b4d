"""_device_plugin_api without a server: the restart deletes the node's device plugin pods, the wait is bounded
and its failure names the node and what it advertises."""
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._device_plugin_api import DevicePluginApi, DevicePluginError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from tests.lib.clock import Clock


class Api(object):
    """The ApiClient seen by K8sClient and the API server's paths it requests (K8sClient.request), with scripted
    pods and nodes."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, pods=None, counts=None, delete_error=None):
        self.pods = pods or {}
        self.counts = list(counts or [])
        self.deleted = []
        self.listed = []
        self.delete_error = delete_error

    def request(self, method, path, body=None, serializer=None, label_selector=None, field_selector=None):
        parts = path.strip("/").split("/")
        if (method, parts[:3], parts[4:]) == ("GET", ["api", "v1", "namespaces"], ["pods"]):
            self.listed.append((parts[3], label_selector, field_selector))
            node = field_selector.split("=", 1)[1]
            return {"items": [{"metadata": {"name": n}} for n in self.pods.get(node, [])]}
        if (method, parts[:3], parts[4:5]) == ("DELETE", ["api", "v1", "namespaces"], ["pods"]):
            if self.delete_error is not None:
                raise self.delete_error
            self.deleted.append((parts[3], parts[5]))
            return {}
        if (method, parts[:3]) == ("GET", ["api", "v1", "nodes"]):
            count = self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]
            return {"metadata": {"name": parts[3]}, "status": {"allocatable": {"nvidia.com/gpu": str(count)}}}
        raise AssertionError("unexpected request %s %s" % (method, path))


def client(api):
    clock = Clock()
    d = DevicePluginApi("gpu-operator", k8s=K8sClient(api=api, sleep=clock.sleep, clock=clock, warn=False),
                        sleep=clock.sleep, clock=clock, poll=2.0)
    d.k8s._paths = api
    return d, clock


def test_restart_deletes_the_nodes_plugin_pod_found_by_label_and_node():
    api = Api(pods={"n1": ["nvidia-device-plugin-daemonset-abcde"]})
    d, _clock = client(api)
    assert d.restart("n1") == ["nvidia-device-plugin-daemonset-abcde"]
    assert api.listed == [("gpu-operator", "app=nvidia-device-plugin-daemonset", "spec.nodeName=n1")]
    assert api.deleted == [("gpu-operator", "nvidia-device-plugin-daemonset-abcde")]


def test_restart_without_a_plugin_pod_fails_naming_the_node():
    d, _clock = client(Api())
    with pytest.raises(DevicePluginError) as err:
        d.restart("n2")
    assert str(err.value).startswith("n2: no device plugin pod")


def test_a_pod_already_gone_is_restarted():
    api = Api(pods={"n1": ["p"]}, delete_error=ApiException(status=404, reason="Not Found"))
    d, _clock = client(api)
    assert d.restart("n1") == ["p"]


def test_wait_returns_once_the_node_advertises_the_new_count():
    d, clock = client(Api(counts=[2, 2, 4]))
    assert d.wait_advertised("n1", 4, timeout=30) == 4.0
    assert clock.slept == [2.0, 2.0]


def test_wait_past_its_bound_names_the_node_and_what_it_advertises():
    d, clock = client(Api(counts=[2]))
    with pytest.raises(DevicePluginError) as err:
        d.wait_advertised("n1", 4, timeout=10)
    assert clock.now == 10.0
    assert str(err.value) == ("n1: after its device plugin restarted the node advertises nvidia.com/gpu=2, "
                              "the design's sharing gives 4 (waited 10 s)")
