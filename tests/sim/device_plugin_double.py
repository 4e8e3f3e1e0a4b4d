#!/usr/bin/env python3
"""A stand-in for NVIDIA's device plugin on the Kubernetes rig (see tests/sim/k8s/README.md, section
"Device plugin double").

The rig has no kubelet and no GPUs: a kwok node advertises whatever its Node object says. This double
plays the one behaviour of the GPU Operator's device plugin that sharing changes depend on: **the plugin
reads its sharing configuration when its pod starts, and only then**. Per GPU node (a node with GPU
feature discovery's ``nvidia.com/gpu.count`` label, optionally of a ``--selector``), its device plugin pod is
the pod of ``--namespace`` labelled ``app=nvidia-device-plugin-daemonset`` (the label of the operator's
DaemonSet) bound to the node. When such a pod is Running and is not the one the double last started for the
node (a new pod uid), the double "starts the plugin": it reads the ConfigMap ``--config-map`` then, takes the
key the node's ``nvidia.com/device-plugin.config`` label names (``--default-config`` without the label), and
``--start-delay`` seconds later patches the node's ``status.capacity`` and ``status.allocatable``:
``nvidia.com/gpu`` (or ``nvidia.com/gpu.shared`` where the configuration renames shared GPUs) = cards x
replicas. Changing the ConfigMap afterwards changes nothing until that pod is deleted and another one runs.
While a node has no Running plugin pod its allocatable count of the resource is 0 (the kubelet marks the
devices of a plugin that went away unhealthy), its capacity kept.

A configuration the plugin would not load (no ConfigMap, no such key, not YAML, ``version`` not ``v1``, a
``replicas`` that is not a whole number of at least 1) starts nothing: the node advertises 0, the double logs
why and tries again each period, as a pod in CrashLoopBackOff would.

With ``--create-daemonset`` the double also stands for the GPU Operator's state-device-plugin: once
``--namespace`` exists it creates the DaemonSet ``nvidia-device-plugin-daemonset`` (pod label as above, tolerating
every taint, on the GPU nodes of the selector), and the rig's DaemonSet controller makes and remakes its pods; kwok
runs them. Without it, the test creates the DaemonSet (or bare pods with the label).

    python3 tests/sim/device_plugin_double.py --kubeconfig K --namespace gpu-operator \
        --config-map gpupool-device-plugin-config [--selector gpupool.vcf/pool=notebooks] [--create-daemonset]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

POD_LABEL = ("app", "nvidia-device-plugin-daemonset")
CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
RESOURCE = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"


def log(msg: str) -> None:
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def parse_config(text) -> tuple[bool, int]:
    """(rename shared GPUs, replicas of nvidia.com/gpu) of one configuration of the ConfigMap; ValueError
    where the plugin would not load it."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError("not YAML: %s" % exc)
    if not isinstance(doc, dict) or doc.get("version") != "v1":
        raise ValueError("version is %r, not v1" % ((doc or {}).get("version") if isinstance(doc, dict) else doc))
    ts = ((doc.get("sharing") or {}).get("timeSlicing")) or {}
    replicas = 1
    for res in ts.get("resources") or []:
        if res.get("name") == RESOURCE:
            replicas = res.get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
                raise ValueError("replicas of %s is %r, not a whole number of at least 1" % (RESOURCE, replicas))
    return bool(ts.get("renameByDefault")), replicas


def advertise_for(node_labels: dict, data: dict | None, default_config: str) -> tuple[str, int]:
    """(resource, count) a plugin starting now on a node with these labels advertises; ValueError when it fails."""
    if data is None:
        raise ValueError("no ConfigMap")
    key = node_labels.get(CONFIG_LABEL) or default_config
    if key not in data:
        raise ValueError("the ConfigMap has no configuration %r" % key)
    rename, replicas = parse_config(data[key])
    cards = int(node_labels[GPU_COUNT_LABEL])
    if replicas > 1:
        return (SHARED if rename else RESOURCE), cards * replicas
    return RESOURCE, cards


class Double:
    def __init__(self, kubeconfig, namespace, config_map, default_config="default", selector=None,
                 create_daemonset=False, start_delay=0.0):
        from kubernetes import client, config
        self.core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        self.namespace, self.config_map, self.default_config = namespace, config_map, default_config
        self.selector, self.create_daemonset, self.start_delay = selector, create_daemonset, start_delay
        self.started = {}   # node -> {"uid", "resource", "count", "at", "patched"}
        self.failing = {}   # node -> the last reason its plugin did not start (logged once per reason)
        self._made = False

    def read_config(self):
        from kubernetes.client.rest import ApiException
        try:
            return dict(self.core.read_namespaced_config_map(self.config_map, self.namespace).data or {})
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _patch(self, node, capacity, allocatable):
        self.core.patch_node_status(node, {"status": {"capacity": capacity, "allocatable": allocatable}})

    def _make_daemonset(self):
        """The operator's DaemonSet, once the namespace exists (True when it exists)."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        apps = client.AppsV1Api(self.core.api_client)
        try:
            apps.read_namespaced_daemon_set(POD_LABEL[1], self.namespace)
            return True
        except ApiException as exc:
            if exc.status != 404:
                raise
        terms = [{"key": GPU_COUNT_LABEL, "operator": "Exists"}]
        for part in (self.selector or "").split(","):
            if part.strip():
                key, _eq, value = part.strip().partition("=")
                terms.append({"key": key, "operator": "In", "values": [value]} if _eq else
                             {"key": key, "operator": "Exists"})
        labels = {POD_LABEL[0]: POD_LABEL[1]}
        try:
            apps.create_namespaced_daemon_set(self.namespace, {
                "metadata": {"name": POD_LABEL[1], "labels": labels},
                "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": terms}]}}},
                    "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                    "priorityClassName": "system-node-critical",
                    "containers": [{"name": "nvidia-device-plugin", "image": "registry.invalid/k8s-device-plugin"}]}}}})
        except ApiException as exc:
            if exc.status == 404:  # the namespace is not there yet
                return False
            raise
        log("created DaemonSet %s/%s" % (self.namespace, POD_LABEL[1]))
        return True

    def tick(self):
        if self.create_daemonset and not self._made:
            self._made = self._make_daemonset()
        nodes = [n for n in self.core.list_node(label_selector=self.selector).items
                 if GPU_COUNT_LABEL in (n.metadata.labels or {})
                 and not any(k.startswith(MIG_PREFIX) for k in ((n.status.capacity or {}) if n.status else {}))]
        pods = self.core.list_namespaced_pod(self.namespace, label_selector="%s=%s" % POD_LABEL).items
        data = None
        read = False
        now = time.monotonic()
        for node in nodes:
            name = node.metadata.name
            mine = [p for p in pods if p.spec.node_name == name]
            running = [p for p in mine if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
            state = self.started.get(name)
            if not running:
                if state is not None:
                    log("%s: device plugin pod %s gone: allocatable %s=0" % (name, state["uid"][:8], state["resource"]))
                    self._patch(name, {}, {state["resource"]: "0"})
                    del self.started[name]
                continue
            pod = running[0]
            if state is not None and state["uid"] != pod.metadata.uid:
                # the pod was replaced between two periods: the old plugin went away first
                log("%s: device plugin pod %s replaced: allocatable %s=0" % (name, state["uid"][:8], state["resource"]))
                self._patch(name, {}, {state["resource"]: "0"})
                del self.started[name]
                state = None
            if state is None:
                if not read:
                    data, read = self.read_config(), True
                try:
                    resource, count = advertise_for(node.metadata.labels or {}, data, self.default_config)
                except ValueError as exc:
                    if self.failing.get(name) != str(exc):
                        log("%s: device plugin pod %s does not start: %s" % (name, pod.metadata.name, exc))
                        self.failing[name] = str(exc)
                    continue
                self.failing.pop(name, None)
                state = self.started[name] = {"uid": pod.metadata.uid, "resource": resource, "count": count,
                                              "at": now, "patched": False}
                log("%s: device plugin pod %s started, read %s=%d" % (name, pod.metadata.name, resource, count))
            if not state["patched"] and now - state["at"] >= self.start_delay:
                other = SHARED if state["resource"] == RESOURCE else RESOURCE
                have = dict((node.status.allocatable or {}) if node.status else {})
                allocatable = {state["resource"]: str(state["count"])}
                capacity = {state["resource"]: str(state["count"])}
                if other in have:  # the plugin no longer serves the other name: nothing of it is allocatable
                    allocatable[other] = "0"
                self._patch(name, capacity, allocatable)
                state["patched"] = True
                log("%s: advertises %s=%d" % (name, state["resource"], state["count"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--config-map", required=True)
    ap.add_argument("--default-config", default="default")
    ap.add_argument("--selector", default=None, help="label selector of the nodes (default: every GPU node)")
    ap.add_argument("--create-daemonset", action="store_true")
    ap.add_argument("--start-delay", type=float, default=0.0)
    ap.add_argument("--period", type=float, default=0.3)
    args = ap.parse_args(argv)
    double = Double(args.kubeconfig, args.namespace, args.config_map, args.default_config, args.selector,
                    args.create_daemonset, args.start_delay)
    log("device plugin double: namespace %s, ConfigMap %s, nodes %s" % (args.namespace, args.config_map,
                                                                       args.selector or "all GPU nodes"))
    while True:
        try:
            double.tick()
        except Exception as exc:  # noqa: BLE001 - an API hiccup: the next period tries again
            log("error: %s: %s" % (type(exc).__name__, exc))
        time.sleep(args.period)


@contextlib.contextmanager
def running(kubeconfig, log_file, namespace, config_map, selector=None, create_daemonset=False, start_delay=0.0,
            period=0.3, default_config="default"):
    """The double as a child process while the block runs (its log in ``log_file``)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--kubeconfig", str(kubeconfig), "--namespace", namespace,
           "--config-map", config_map, "--default-config", default_config, "--start-delay", str(start_delay),
           "--period", str(period)]
    cmd += (["--selector", selector] if selector else []) + (["--create-daemonset"] if create_daemonset else [])
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(os.environ))
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
