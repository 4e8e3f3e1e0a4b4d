#!/usr/bin/env python3
"""A stand-in for Cluster API's MachineDeployment rollout on the Kubernetes rig (see
tests/sim/k8s/README.md, section "Node-pool rollout double").

The rig stores Cluster objects but runs no Cluster API controller: nothing replaces a node pool's
machines when its VM class changes. This double does, for the kwok nodes that stand for the
machines. Every ``--period`` seconds it reads the ``v1beta2`` Clusters (of ``--namespace``, or all)
and, for each machineDeployment, the VM class it names (its ``vmClass`` override, else the
Cluster's ``vmClass`` variable). The pool's nodes are the nodes annotated
``gpupool.vcf/sim-machine-deployment: <namespace>/<cluster>/<machineDeployment>`` (the double
never touches another node). When some of them run on another class
(``node.kubernetes.io/instance-type``), it rolls the pool one node at a time, as a
MachineDeployment with ``maxSurge: 1, maxUnavailable: 0`` would:

1. while fewer nodes than the replicas run on the new class, it creates one (a copy of an old
   node: capacity, labels, taints, with the new class and a new name; the labels and taints the
   machineDeployment's ClusterClass variables give now - ``node`` or ``nodePoolLabels`` /
   ``nodePoolTaints`` - replace the old ones, as Cluster API would make the new machines) and
   waits until kwok has made it Ready;
2. then it cordons one old node, evicts its pods through the eviction API (a PodDisruptionBudget
   that refuses holds the drain, it is tried again next period) and deletes the node.

Each step is at least ``--step`` seconds after the one before, so a test can see a rollout midway.

    python3 tests/sim/k8s/rollout_double.py --kubeconfig K [--namespace NS] [--step 1] [--period 0.3]
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

ADOPT = "gpupool.vcf/sim-machine-deployment"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
KWOK = "kwok.x-k8s.io/node"


def log(msg: str) -> None:
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def md_values(cluster: dict, md: dict) -> dict:
    """{variable: value} a machineDeployment sees: the Cluster's variables, its own overrides winning."""
    values = {}
    for var in cluster["spec"]["topology"].get("variables") or []:
        values[var.get("name")] = var.get("value")
    for ov in ((md.get("variables") or {}).get("overrides") or []):
        values[ov.get("name")] = ov.get("value")
    return values


def md_class(cluster: dict, md: dict) -> str | None:
    return md_values(cluster, md).get("vmClass")


def md_node(cluster: dict, md: dict) -> tuple[dict, list | None]:
    """(labels, taints) a machineDeployment gives its nodes through the ClusterClass variables: the later
    ``node`` object (``labels`` map, ``taints`` list) or the v3.1-era ``nodePoolLabels`` (key/value items)
    and ``nodePoolTaints``, the pool's override first, else the Cluster's variable; taints None when unset."""
    values = md_values(cluster, md)
    node = values.get("node") if isinstance(values.get("node"), dict) else {}
    labels = dict(node.get("labels") or {})
    labels.update((i["key"], i["value"]) for i in values.get("nodePoolLabels") or [] if "key" in i)
    taints = node.get("taints") if "taints" in node else values.get("nodePoolTaints")
    return dict((k, str(v)) for k, v in labels.items()), taints


def ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def new_node(template: dict, key: str, vm_class: str, taken: set[str], spec: tuple = ({}, None)) -> dict:
    md = key.rsplit("/", 1)[-1]
    stem = "%s-%s" % (md, hashlib.sha256(vm_class.encode()).hexdigest()[:5])
    i = 0
    while "%s-%d" % (stem, i) in taken:
        i += 1
    name = "%s-%d" % (stem, i)
    labels = dict(template["metadata"].get("labels") or {})
    # the pool's labels and taints as its machineDeployment gives them now (a profile label may have changed)
    labels.update(spec[0])
    labels.update({INSTANCE_TYPE: vm_class, "kubernetes.io/hostname": name})
    taints = [t for t in (template.get("spec") or {}).get("taints") or []
              if not t["key"].startswith("node.kubernetes.io/")] if spec[1] is None else [dict(t) for t in spec[1]]
    status = template.get("status") or {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {KWOK: "fake", "node.alpha.kubernetes.io/ttl": "0", ADOPT: key}},
            "spec": {"taints": taints},
            "status": {"capacity": status.get("capacity") or {}, "allocatable": status.get("allocatable") or {}}}


class Double:
    def __init__(self, api: client.ApiClient, namespace: str | None, step: float):
        self.core = client.CoreV1Api(api)
        self.clusters = dynamic.DynamicClient(api).resources.get(api_version="cluster.x-k8s.io/v1beta2",
                                                                  kind="Cluster")
        self.namespace = namespace
        self.step = step
        self.last = 0.0

    def tick(self) -> None:
        kwargs = {"namespace": self.namespace} if self.namespace else {}
        clusters = self.clusters.get(**kwargs).to_dict().get("items") or []
        nodes = [self.core.api_client.sanitize_for_serialization(n) for n in self.core.list_node().items]
        adopted: dict[str, list[dict]] = {}
        for n in nodes:
            key = (n["metadata"].get("annotations") or {}).get(ADOPT)
            if key:
                adopted.setdefault(key, []).append(n)
        taken = {n["metadata"]["name"] for n in nodes}
        for cluster in clusters:
            meta = cluster["metadata"]
            for md in ((cluster["spec"].get("topology") or {}).get("workers") or {}).get("machineDeployments") or []:
                key = "%s/%s/%s" % (meta["namespace"], meta["name"], md["name"])
                want = md_class(cluster, md)
                if want and adopted.get(key):
                    self.roll(key, want, md.get("replicas"), sorted(adopted[key], key=lambda n: n["metadata"]["name"]),
                              taken, md_node(cluster, md))

    def roll(self, key: str, want: str, replicas: int | None, nodes: list[dict], taken: set[str],
             spec: tuple = ({}, None)) -> None:
        old = [n for n in nodes if (n["metadata"].get("labels") or {}).get(INSTANCE_TYPE) != want]
        new = [n for n in nodes if n not in old]
        if not old or time.monotonic() - self.last < self.step:
            return
        if not all(ready(n) for n in new):
            return  # maxUnavailable 0: a surge node must be Ready before an old one goes
        target = max(len(new), len(old)) if replicas is None else replicas
        if len(new) < target and len(nodes) < target + 1:  # maxSurge 1
            body = new_node(old[0], key, want, taken, spec)
            self.core.create_node(body)
            taken.add(body["metadata"]["name"])
            log("%s: created node %s on class %s" % (key, body["metadata"]["name"], want))
        else:
            victim = old[0]["metadata"]["name"]
            self.core.patch_node(victim, {"spec": {"unschedulable": True}})
            pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % victim).items
            for pod in pods:
                try:
                    self.core.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, {
                        "apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace}})
                except ApiException as exc:
                    if exc.status == 429:
                        log("%s: eviction of %s/%s refused by a PodDisruptionBudget; trying again"
                            % (key, pod.metadata.namespace, pod.metadata.name))
                        return
                    if exc.status != 404:
                        raise
            self.core.delete_node(victim)
            log("%s: drained and deleted node %s (class %s)" % (
                key, victim, (old[0]["metadata"].get("labels") or {}).get(INSTANCE_TYPE)))
        self.last = time.monotonic()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default=None, help="only the Clusters of this namespace")
    ap.add_argument("--step", type=float, default=1.0, help="seconds at least between two steps")
    ap.add_argument("--period", type=float, default=0.3, help="seconds between two reads")
    args = ap.parse_args(argv)
    cfg = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg, persist_config=False)
    double = Double(client.ApiClient(cfg), args.namespace, args.step)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log("rollout double: watching %s" % (args.namespace or "every namespace"))
    while not stop:
        try:
            double.tick()
        except ApiException as exc:  # a conflict or a node that went meanwhile: read again next period
            log("retrying after %s %s" % (exc.status, exc.reason))
        time.sleep(args.period)
    return 0


@contextlib.contextmanager
def running(kubeconfig, log_file, namespace=None, step=1.0, period=0.3):
    """The double as a child process while the block runs (its log in ``log_file``)."""
    with open(log_file, "ab") as out:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--kubeconfig", str(kubeconfig),
                                 "--step", str(step), "--period", str(period)]
                                + (["--namespace", namespace] if namespace else []),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(os.environ))
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
