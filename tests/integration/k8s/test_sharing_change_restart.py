"""A time-slicing change that takes effect: device_plugin_restart on the rig with the device plugin double
(tests/sim/device_plugin_double.py, README section "Device plugin double").

A pool of three kwok nodes, one card each, whose configuration time-slices 4 ways: each advertises
nvidia.com/gpu=4. The device plugin runs as a real DaemonSet (the rig's controller manager makes its pods, the
double plays the plugin in them). An inference Deployment holds one GPU on the middle node. The ConfigMap goes to
2 replicas: the nodes go on advertising 4 (the plugin read 4 at its start); --check shows the order and changes
nothing; the run restarts the nodes in name order, the one with the inference pod drained first, each advertising
1 x 2 = 2 before the next one's plugin pod goes. A watcher records every node's allocatable, the cordons, the
plugin pods and the inference pods' Pending times while the run goes on.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest
import yaml
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

import device_plugin_double
from tests.lib.ansible_run import run_module

CM = "gpupool-device-plugin-config"
CONFIG = "ts-pool"
PLUGIN = {"app": "nvidia-device-plugin-daemonset"}
CARDS = 1


def config_text(replicas):
    """One configuration of the ConfigMap, in the device plugin's own format (written here, not by the collection)."""
    return yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": False,
        "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}})


@pytest.fixture
def pool(k8s_api, k8s_namespace, k8s_rig, tmp_path):
    """(namespace, pool label, node names, taint key) with the ConfigMap at 4 replicas, the DaemonSet and the double."""
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    tag = uuid.uuid4().hex[:5]
    pool_label, taint = "ts-%s" % tag, "gpupool.vcf/ts-%s" % tag
    names = ["ts-%s-%d" % (tag, i) for i in range(3)]
    ns = k8s_namespace
    core.create_namespaced_config_map(ns, {"metadata": {"name": CM}, "data": {
        "default": yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "none"}}), CONFIG: config_text(4)}})
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": str(CARDS)}
    for name in names:
        core.create_node({"metadata": {
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", "gpupool.vcf/pool": pool_label,
                       "nvidia.com/gpu.count": str(CARDS), "nvidia.com/device-plugin.config": CONFIG}},
            "spec": {"taints": [{"key": taint, "value": "yes", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": capacity}})
    apps.create_namespaced_daemon_set(ns, {"metadata": {"name": "nvidia-device-plugin-daemonset", "labels": PLUGIN},
                                           "spec": {"selector": {"matchLabels": PLUGIN}, "template": {
                                               "metadata": {"labels": PLUGIN},
                                               "spec": {"nodeSelector": {"gpupool.vcf/pool": pool_label},
                                                        "tolerations": [{"operator": "Exists"}],
                                                        "terminationGracePeriodSeconds": 0,
                                                        "containers": [{"name": "nvidia-device-plugin",
                                                                        "image": "registry.invalid/device-plugin"}]}}}})
    log = tmp_path / "device-plugin-double.log"
    with device_plugin_double.running(k8s_rig.kubeconfig, log, ns, CM, selector="gpupool.vcf/pool=%s" % pool_label,
                                      period=0.2, start_delay=0.5):
        try:
            wait_for("each node advertises 1 x 4", lambda: [advertised(core, n) for n in names] == [4, 4, 4],
                     timeout=60)
            yield ns, pool_label, names, taint
        finally:
            print(log.read_text()[-3000:])
            for name in names:
                try:
                    core.delete_node(name)
                except ApiException:
                    pass


def advertised(core, node):
    return int((core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu", "0"))


def plugin_pods(core, ns):
    return dict((p.spec.node_name, p.metadata.uid) for p in core.list_namespaced_pod(
        ns, label_selector="app=nvidia-device-plugin-daemonset").items if p.status.phase == "Running")


def inference(apps, ns, taint, pool_label, first, second):
    """One-replica Deployment holding a GPU; it prefers node `first`, then `second`."""
    apps.create_namespaced_deployment(ns, {"metadata": {"name": "infer"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "infer"}}, "template": {
            "metadata": {"labels": {"app": "infer"}}, "spec": {
                "terminationGracePeriodSeconds": 0, "nodeSelector": {"gpupool.vcf/pool": pool_label},
                "tolerations": [{"key": taint, "operator": "Exists"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "preference": {"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [first]}]}},
                    {"weight": 50, "preference": {"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [second]}]}}]}},
                "containers": [{"name": "server", "image": "registry.invalid/infer",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})


class Watcher(threading.Thread):
    """Polls the nodes and pods: per node the times its allocatable changed and it was cordoned, per inference pod
    the time it was first seen and first seen Running."""

    def __init__(self, core, ns, names):
        threading.Thread.__init__(self, daemon=True)
        self.core, self.ns, self.names = core, ns, names
        self.events = []      # (t, node, "allocatable", n) | (t, node, "cordoned", bool)
        self.seen, self.running = {}, {}
        self.stop = threading.Event()

    def run(self):
        last = {}
        while not self.stop.is_set():
            now = time.monotonic()
            for name in self.names:
                node = self.core.read_node(name)
                state = (int((node.status.allocatable or {}).get("nvidia.com/gpu", "0")), bool(node.spec.unschedulable))
                old = last.get(name)
                if old is None or old[0] != state[0]:
                    self.events.append((now, name, "allocatable", state[0]))
                if old is None or old[1] != state[1]:
                    self.events.append((now, name, "cordoned", state[1]))
                last[name] = state
            for node, uid in plugin_pods(self.core, self.ns).items():
                if last.get(("plugin", node)) != uid:
                    self.events.append((now, node, "plugin", uid))
                    last[("plugin", node)] = uid
            for pod in self.core.list_namespaced_pod(self.ns, label_selector="app=infer").items:
                self.seen.setdefault(pod.metadata.name, now)
                if pod.status.phase == "Running" and pod.metadata.name not in self.running:
                    self.running[pod.metadata.name] = (now, pod.spec.node_name)
            time.sleep(0.1)

    def first(self, node, kind, value):
        return min(t for t, n, k, v in self.events if n == node and k == kind and v == value)

    def longest_pending(self, start):
        return max([self.running.get(p, (time.monotonic(), None))[0] - t for p, t in self.seen.items()
                    if t >= start] or [0.0])


def test_sharing_change_restarts_node_by_node_drained_first_where_a_pod_holds_a_gpu(k8s_rig, k8s_api, pool):
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    ns, pool_label, names, taint = pool
    inference(apps, ns, taint, pool_label, names[1], names[0])
    wait_for("the inference pod Running on %s" % names[1], lambda: [
        p for p in core.list_namespaced_pod(ns, label_selector="app=infer").items
        if p.status.phase == "Running" and p.spec.node_name == names[1]])
    first_pod = core.list_namespaced_pod(ns, label_selector="app=infer").items[0].metadata.name
    pods_before = plugin_pods(core, ns)
    assert sorted(pods_before) == names

    core.patch_namespaced_config_map(CM, ns, {"data": {CONFIG: config_text(2)}})
    time.sleep(2)  # ten periods of the double: the plugin read 4 at its start and keeps it
    assert [advertised(core, n) for n in names] == [4, 4, 4]

    args = {"namespace": ns, "time_slicing": {CONFIG: {"replicas": 2}}, "node_labels": {"gpupool.vcf/pool": pool_label},
            "wait_timeout": 60, "drain_timeout": 60}
    checked = run_module("gpupool.vcf.device_plugin_restart", args, env=k8s_rig.env, check=True, diff=True)[0]
    assert not checked.get("failed"), checked.get("msg")
    want = CARDS * 2
    assert checked["changed"] is True
    assert [(r["node"], r["drain"], r["advertised"], r["expected"], r["steps"]) for r in checked["order"]] == [
        (names[0], False, 4, want, ["restart", "wait"]),
        (names[1], True, 4, want, ["drain", "restart", "wait", "uncordon"]),
        (names[2], False, 4, want, ["restart", "wait"])]
    assert checked["order"][1]["gpu_pods"] == ["%s/%s" % (ns, first_pod)]
    assert checked["diff"]["before"] == dict((n, 4) for n in names)
    assert checked["diff"]["after"] == dict((n, want) for n in names)
    # --check changed nothing: same plugin pods, same counts, no cordon
    assert plugin_pods(core, ns) == pods_before
    assert [advertised(core, n) for n in names] == [4, 4, 4]
    assert not any(core.read_node(n).spec.unschedulable for n in names)

    watcher = Watcher(core, ns, names)
    watcher.start()
    time.sleep(0.5)
    start = time.monotonic()
    try:
        done = run_module("gpupool.vcf.device_plugin_restart", args, env=k8s_rig.env)[0]
    finally:
        time.sleep(0.5)
        watcher.stop.set()
        watcher.join(10)
    assert not done.get("failed"), done.get("msg")
    assert [(s["node"], s["drained"]) for s in done["steps"]] == [(names[0], False), (names[1], True), (names[2], False)]
    assert done["steps"][1]["evicted"] == ["%s/%s" % (ns, first_pod)]
    assert [advertised(core, n) for n in names] == [want] * 3
    after = plugin_pods(core, ns)
    assert all(after[n] != pods_before[n] for n in names), "every node's plugin pod is a new one"

    # in order: a node's plugin pod is replaced only after the node before advertises the new count, and the node
    # stops advertising the old count (0 while no plugin runs) only then
    gone = [watcher.first(n, "plugin", after[n]) for n in names]
    assert all(watcher.first(n, "allocatable", 0) >= gone[i] - 0.2 for i, n in enumerate(names)), watcher.events
    reached = [watcher.first(n, "allocatable", want) for n in names]
    assert gone[0] < reached[0] < gone[1] < reached[1] < gone[2] < reached[2], watcher.events
    # the node with the inference pod: cordoned before its plugin restart, uncordoned after it advertised
    cordoned = watcher.first(names[1], "cordoned", True)
    assert cordoned < gone[1]
    assert min(t for t, n, k, v in watcher.events if n == names[1] and k == "cordoned" and not v and t > cordoned) \
        > reached[1], watcher.events
    assert not [e for e in watcher.events if e[1] != names[1] and e[2] == "cordoned" and e[3]], watcher.events
    assert not any(core.read_node(n).spec.unschedulable for n in names)
    # the replacement inference pod runs on the node it prefers next (restarted already)
    moved = [(p, where) for p, (t, where) in watcher.running.items() if p != first_pod]
    assert [where for _p, where in moved] == [names[0]], watcher.running

    pending = watcher.longest_pending(start)
    print("\nsharing change 4 -> 2 replicas on %d nodes: %s; longest Pending of an inference pod %.1f s; run %.1f s"
          % (len(names), ", ".join("%s %s s (%s)" % (s["node"], s["seconds"]["total"], ", ".join(
              "%s %s" % kv for kv in s["seconds"].items() if kv[0] != "total")) for s in done["steps"]),
             pending, time.monotonic() - start))
    assert pending < 10, pending

    again = run_module("gpupool.vcf.device_plugin_restart", args, env=k8s_rig.env)[0]
    assert not again.get("failed") and again["changed"] is False and again["order"] == []


def test_sharing_change_stops_with_the_node_name_past_the_wait(k8s_rig, k8s_api, pool):
    """The design says 3 replicas, the ConfigMap 4: the first node restarts and advertises 4, not 1 x 3; the run
    stops on it by name and does not touch the next node."""
    core = client.CoreV1Api(k8s_api)
    ns, pool_label, names, _taint = pool
    before = plugin_pods(core, ns)
    args = {"namespace": ns, "time_slicing": {CONFIG: {"replicas": 3}}, "node_labels": {"gpupool.vcf/pool": pool_label},
            "wait_timeout": 4}
    start = time.monotonic()
    failed = run_module("gpupool.vcf.device_plugin_restart", args, env=k8s_rig.env)[0]
    took = time.monotonic() - start
    assert failed.get("failed"), failed
    assert names[0] in failed["msg"] and "nvidia.com/gpu=4" in failed["msg"] and "gives 3" in failed["msg"], failed["msg"]
    assert names[1] not in failed["msg"].split(";")[0]
    after = plugin_pods(core, ns)
    assert after[names[0]] != before[names[0]] and after[names[1]] == before[names[1]] and after[names[2]] == before[names[2]]
    assert took < 60, took
