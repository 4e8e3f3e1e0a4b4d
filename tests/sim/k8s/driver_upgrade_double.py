#!/usr/bin/env python3
"""A stand-in for the GPU Operator's driver upgrade controller on the Kubernetes rig (see
tests/sim/k8s/README.md, section "Driver upgrade double").

The rig installs the real GPU Operator chart (its CRDs and its ClusterPolicy) but runs no operator:
nothing upgrades a node when the ClusterPolicy's ``driver.version`` changes. This double does, for the
nodes of ``--node-selector`` (default ``nvidia.com/gpu.present=true``), in the steps NVIDIA documents
("GPU Driver Upgrades", GPU Operator; the states of NVIDIA's k8s-operator-libs ``pkg/upgrade``) on the
node label ``nvidia.com/gpu-driver-upgrade-state``. Every ``--period`` seconds it reads the ClusterPolicy
``cluster-policy`` and the nodes:

- a node's driver is the annotation ``gpupool.vcf/sim-driver-version`` (the double's stand-in for the
  driver pod's image); a node without it is taken as running the ClusterPolicy's version now
  (``upgrade-done``). A node whose driver differs from ``spec.driver.version`` becomes ``upgrade-required``.
- with ``upgradePolicy.autoUpgrade`` true, at most ``maxParallelUpgrades`` nodes (0: no limit) are past
  ``upgrade-required`` and not yet done; the others wait there.
- ``cordon-required``: the node is made unschedulable. ``wait-for-jobs-required``: passed at once (no
  ``waitForCompletion.podSelector`` is modelled). ``pod-deletion-required``: the pods that request
  ``nvidia.com/gpu`` are evicted; ``drain-required`` (with ``drain.enable``): every other pod but
  DaemonSet pods is evicted. Both go through the real Eviction API (``policy/v1``), so the apiserver
  honours the PodDisruptionBudgets: a refused eviction (429) is tried again next period until
  ``timeoutSeconds`` (``podDeletion`` / ``drain``; 0: no limit), then the node is ``upgrade-failed``.
  With ``force`` the pod is deleted instead of evicted (as a forced drain ends).
- ``pod-restart-required``: the node's driver becomes the new version (no driver pod runs on the rig).
  ``validation-required``: passed at once (no validator runs). ``uncordon-required``: the node is made
  schedulable again, then ``upgrade-done``.

Each state lasts at least ``--step`` seconds, so a test sees a rollout midway. ``--stick NODE`` stops
that node in the first state past ``upgrade-required`` it reaches (``--stick-state`` picks another), as a
controller would that never gets past it (a driver pod that does not start, a drain that never ends).

Not modelled: ``maxUnavailable`` (taken as large as ``maxParallelUpgrades``), waiting for jobs, the driver
pods and their DaemonSet, validation, ``deleteEmptyDir``, the safe driver load annotation, the
NVIDIADriver CRD, the operator's events and metrics.

    python3 tests/sim/k8s/driver_upgrade_double.py --kubeconfig K [--step 1] [--period 0.3] [--stick NODE]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

STATE = "nvidia.com/gpu-driver-upgrade-state"
DRIVER = "gpupool.vcf/sim-driver-version"
GPU = "nvidia.com/gpu"
FLOW = ["upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
        "pod-restart-required", "validation-required", "uncordon-required", "upgrade-done"]
BUSY = FLOW[1:-1]


def log(msg: str) -> None:
    print("%s %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Double:
    def __init__(self, api: client.ApiClient, selector: str, step: float, stick: set[str], stick_state: str | None):
        self.core = client.CoreV1Api(api)
        self.policies = dynamic.DynamicClient(api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
        self.selector, self.step, self.stick, self.stick_state = selector, step, stick, stick_state
        self.entered: dict[str, float] = {}  # node: when it entered its current state
        self.evicting: dict[str, float] = {}  # node: when its pod deletion or drain began

    def set_state(self, node: str, state: str, **extra) -> None:
        meta = {"labels": {STATE: state}}
        if extra.get("driver"):
            meta["annotations"] = {DRIVER: extra["driver"]}
        body = {"metadata": meta}
        if "unschedulable" in extra:
            body["spec"] = {"unschedulable": extra["unschedulable"]}
        self.core.patch_node(node, body)
        self.entered[node] = time.monotonic()
        log("%s -> %s" % (node, state))

    def tick(self) -> None:
        try:
            spec = self.policies.get(name="cluster-policy").to_dict().get("spec") or {}
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        driver = spec.get("driver") or {}
        version, policy = driver.get("version"), driver.get("upgradePolicy") or {}
        if not version:
            return
        nodes = self.core.list_node(label_selector=self.selector).items
        now = time.monotonic()
        states = {}
        for node in nodes:
            name = node.metadata.name
            labels, notes = node.metadata.labels or {}, node.metadata.annotations or {}
            state = labels.get(STATE, "")
            if DRIVER not in notes:  # first seen: it runs the version of the policy it was installed with
                self.set_state(name, "upgrade-done", driver=version)
                state = "upgrade-done"
            elif notes[DRIVER] != version and state in ("", "upgrade-done"):
                self.set_state(name, "upgrade-required")
                state = "upgrade-required"
            states[name] = state
        if not policy.get("autoUpgrade"):
            return
        limit = int(policy.get("maxParallelUpgrades") or 0) or len(states)
        busy = [n for n, s in states.items() if s in BUSY]
        for name in sorted(states):
            state = states[name]
            if now - self.entered.get(name, 0.0) < self.step:
                continue
            if name in self.stick and state in BUSY and (self.stick_state in (None, state)):
                continue  # held here, as a controller that never gets past this state
            if state == "upgrade-required":
                if len(busy) >= limit:
                    continue
                busy.append(name)
                self.set_state(name, "cordon-required")
            elif state == "cordon-required":
                self.set_state(name, "wait-for-jobs-required", unschedulable=True)
            elif state == "wait-for-jobs-required":
                self.set_state(name, "pod-deletion-required")
            elif state == "pod-deletion-required":
                self.evict(name, policy.get("podDeletion") or {}, gpu_only=True, then="drain-required")
            elif state == "drain-required":
                drain = policy.get("drain") or {}
                if not drain.get("enable"):
                    self.set_state(name, "pod-restart-required")
                else:
                    self.evict(name, drain, gpu_only=False, then="pod-restart-required")
            elif state == "pod-restart-required":
                self.set_state(name, "validation-required", driver=version)
            elif state == "validation-required":
                self.set_state(name, "uncordon-required")
            elif state == "uncordon-required":
                self.set_state(name, "upgrade-done", unschedulable=False)

    def evict(self, name: str, spec: dict, gpu_only: bool, then: str) -> None:
        began = self.evicting.setdefault(name, time.monotonic())
        pods = self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=%s" % name).items
        left = []
        for pod in pods:
            if pod.status and pod.status.phase in ("Succeeded", "Failed"):
                continue
            if any(ref.kind == "DaemonSet" for ref in (pod.metadata.owner_references or [])):
                continue
            wants_gpu = any(GPU in ((c.resources.limits or {}) if c.resources else {}) or
                            GPU in ((c.resources.requests or {}) if c.resources else {})
                            for c in pod.spec.containers)
            if gpu_only and not wants_gpu:
                continue
            ns, pname = pod.metadata.namespace, pod.metadata.name
            try:
                if spec.get("force"):
                    self.core.delete_namespaced_pod(pname, ns)
                else:
                    self.core.create_namespaced_pod_eviction(pname, ns, {
                        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pname, "namespace": ns}})
                log("%s: evicted %s/%s" % (name, ns, pname))
            except ApiException as exc:
                if exc.status == 429:
                    log("%s: eviction of %s/%s refused by a PodDisruptionBudget; trying again" % (name, ns, pname))
                    left.append(pname)
                elif exc.status != 404:
                    raise
        if not left:
            self.evicting.pop(name, None)
            self.set_state(name, then)
            return
        timeout = int(spec.get("timeoutSeconds") or 0)
        if timeout and time.monotonic() - began > timeout:
            self.evicting.pop(name, None)
            log("%s: %s not evicted within %s s" % (name, ", ".join(left), timeout))
            self.set_state(name, "upgrade-failed")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node-selector", default="nvidia.com/gpu.present=true")
    ap.add_argument("--step", type=float, default=1.0, help="seconds at least in each state")
    ap.add_argument("--period", type=float, default=0.3, help="seconds between two reads")
    ap.add_argument("--stick", action="append", default=[], help="a node that stops in a state")
    ap.add_argument("--stick-state", default=None, help="the state it stops in (default: the first past upgrade-required)")
    args = ap.parse_args(argv)
    cfg = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg, persist_config=False)
    double = Double(client.ApiClient(cfg), args.node_selector, args.step, set(args.stick), args.stick_state)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log("driver upgrade double: nodes %s%s" % (args.node_selector, ", holding %s" % args.stick if args.stick else ""))
    while not stop:
        try:
            double.tick()
        except ApiException as exc:  # a conflict or a node that went meanwhile: read again next period
            log("retrying after %s %s" % (exc.status, exc.reason))
        time.sleep(args.period)
    return 0


@contextlib.contextmanager
def running(kubeconfig, log_file, node_selector="nvidia.com/gpu.present=true", step=1.0, period=0.3, stick=(),
            stick_state=None):
    """The double as a child process while the block runs (its log in ``log_file``)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--kubeconfig", str(kubeconfig), "--node-selector",
           node_selector, "--step", str(step), "--period", str(period)]
    for node in stick:
        cmd += ["--stick", node]
    if stick_state:
        cmd += ["--stick-state", stick_state]
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
