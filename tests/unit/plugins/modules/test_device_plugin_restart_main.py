"""device_plugin_restart through main(): the real DrainApi and DevicePluginApi on a fake guest cluster
(tests/lib/fakes_guest.py) whose device plugin pods, when deleted, come back advertising the count the ConfigMap
gives now. Check mode returns the order and writes nothing; the run takes the nodes in name order, drains the one
whose pod holds a GPU, and a node that never advertises the design's count stops the run by name."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._device_plugin_api import DevicePluginApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpupool.vcf.plugins.modules import device_plugin_restart
from tests.lib.fakes_guest import GuestCluster, drain_api, node, pod
from tests.lib.module_docs import missing_keys
from tests.lib.module_main import K8S, run_main

NS = "gpu-operator"
LABELS = {"nvidia.com/gpu.count": "1", "nvidia.com/device-plugin.config": "notebooks"}


class Plugins(GuestCluster):
    """A guest cluster whose device plugin pods restart when deleted: the new pod advertises `reads` x cards
    (what the ConfigMap says now), as the plugin reads its configuration at its start."""

    def __init__(self, reads, **kw):
        GuestCluster.__init__(self, **kw)
        self.reads = reads
        self.restarted = []

    def list_namespaced_pod(self, namespace, label_selector=None, field_selector=None, **_kw):
        self._call("list_namespaced_pod", namespace)
        return self._select(label_selector, field_selector, namespace=namespace)

    def delete_namespaced_pod(self, name, namespace, body=None):
        gone = copy.deepcopy(self.pods.get("%s/%s" % (namespace, name)))
        out = GuestCluster.delete_namespaced_pod(self, name, namespace, body)
        if gone and (gone["metadata"].get("labels") or {}).get("app") == "nvidia-device-plugin-daemonset":
            where = gone["spec"]["nodeName"]
            self.restarted.append(where)
            fresh = pod(name + "-new", where, namespace=NS, owner="DaemonSet",
                        labels={"app": "nvidia-device-plugin-daemonset"})
            self.pods["%s/%s" % (NS, name + "-new")] = fresh
            self.nodes[where]["status"]["allocatable"]["nvidia.com/gpu"] = str(self.reads)
        return out


def gpu_pod(name, node_name):
    out = pod(name, node_name, namespace="serve", app="infer")
    out["spec"]["containers"] = [{"name": "server", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    return out


def cluster(reads=2):
    names = ["nb-0", "nb-1", "nb-2"]
    return Plugins(reads, nodes=[node(n, gpus=4, labels=LABELS) for n in names] + [node("cpu-0", gpus=0)],
                   pods=[pod("dp-%s" % n, n, namespace=NS, owner="DaemonSet",
                             labels={"app": "nvidia-device-plugin-daemonset"}) for n in names]
                   + [gpu_pod("infer-1", "nb-1")])


@pytest.fixture
def guest(monkeypatch):
    made = {}

    def use(c):
        made["c"] = c
        monkeypatch.setattr(device_plugin_restart, "DrainApi", drain_api(c))

        def plugins(namespace, k8s=None):
            api = DevicePluginApi(namespace, k8s=K8sClient(api=c, sleep=c.clock.sleep, clock=c.clock),
                                  sleep=c.clock.sleep, clock=c.clock)
            api.k8s._paths = c  # pylint: disable=protected-access
            return api
        monkeypatch.setattr(device_plugin_restart, "DevicePluginApi", plugins)
        return c
    return use


def args(**extra):
    out = dict(K8S, namespace=NS, time_slicing={"notebooks": {"replicas": 2}})
    out.update(extra)
    return out


def test_check_mode_returns_the_order_then_the_run_restarts_node_by_node(guest):
    c = guest(cluster())
    checked = run_main(device_plugin_restart, args(), check_mode=True, diff=True)
    assert not checked.get("failed"), checked.get("msg")
    assert c.writes() == []
    assert missing_keys(device_plugin_restart, checked) == []
    assert [(r["node"], r["drain"], r["advertised"], r["expected"], r["steps"]) for r in checked["order"]] == [
        ("nb-0", False, 4, 2, ["restart", "wait"]),
        ("nb-1", True, 4, 2, ["drain", "restart", "wait", "uncordon"]),
        ("nb-2", False, 4, 2, ["restart", "wait"])]
    assert checked["diff"] == {"before": {"nb-0": 4, "nb-1": 4, "nb-2": 4}, "after": {"nb-0": 2, "nb-1": 2, "nb-2": 2}}
    assert "steps" not in checked

    done = run_main(device_plugin_restart, args())
    assert not done.get("failed"), done.get("msg")
    assert done["changed"] is True and c.restarted == ["nb-0", "nb-1", "nb-2"]
    assert [(s["node"], s["drained"], s["evicted"]) for s in done["steps"]] == [
        ("nb-0", False, []), ("nb-1", True, ["serve/infer-1"]), ("nb-2", False, [])]
    # nb-1 was cordoned before its plugin pod went and is schedulable again, without the collection's mark
    writes = [w[:2] for w in c.writes()]
    assert writes.index(("patch_node", "nb-1")) < writes.index(("delete_namespaced_pod", "dp-nb-1"))
    assert not c.nodes["nb-1"]["spec"].get("unschedulable") and CORDONED_BY not in c.nodes["nb-1"]["metadata"]["annotations"]
    assert [c.nodes[n]["status"]["allocatable"]["nvidia.com/gpu"] for n in ("nb-0", "nb-1", "nb-2")] == ["2"] * 3

    again = run_main(device_plugin_restart, args())
    assert again["changed"] is False and again["order"] == []


def test_a_node_that_never_advertises_the_design_count_stops_the_run_by_name(guest):
    c = guest(cluster(reads=3))  # the ConfigMap gives 3 replicas, the design 2
    failed = run_main(device_plugin_restart, args(wait_timeout=10))
    assert failed.get("failed")
    assert failed["msg"].startswith("Unable to wait until it advertises nvidia.com/gpu=2: node nb-0: nb-0: after its "
                                    "device plugin restarted the node advertises nvidia.com/gpu=3"), failed["msg"]
    assert "nodes done: none" in failed["msg"]
    assert c.restarted == ["nb-0"]  # nb-1 and nb-2 untouched


def test_a_node_this_module_left_cordoned_is_uncordoned_by_a_rerun(guest):
    c = cluster()
    for n in ("nb-0", "nb-1", "nb-2"):
        c.nodes[n]["status"]["allocatable"]["nvidia.com/gpu"] = "2"
    c.nodes["nb-1"]["spec"]["unschedulable"] = True
    c.nodes["nb-1"]["metadata"]["annotations"][CORDONED_BY] = "gpupool.vcf/device-plugin"
    guest(c)
    done = run_main(device_plugin_restart, args())
    assert [r["steps"] for r in done["order"]] == [["uncordon"]] and c.restarted == []
    assert not c.nodes["nb-1"]["spec"].get("unschedulable")


def test_bad_replicas_are_refused_before_any_call(guest):
    c = guest(cluster())
    failed = run_main(device_plugin_restart, args(time_slicing={"notebooks": {"replicas": 0}}))
    assert failed.get("failed") and "time_slicing.notebooks.replicas must be a whole number of at least 1" in failed["msg"]
    assert c.calls == []
