"""Benchmark: a driver roll of a pool that carries workloads, drained host by host.

One simulator with one cluster of N GPU hosts on the old driver, two node VMs per host (an
inference node and a training node, named as their guest nodes); the Kubernetes rig holds a kwok
node per VM, an inference Deployment with a PodDisruptionBudget (one pod per inference node but
one: the spare) and a training Deployment on every training node. tests/sim/power_bridge.py makes
a node NotReady while its VM is off. The esxi_gpu_host role runs through ansible-playbook with the
rig's kubeconfig. Printed per host: the whole turn, the drain, the restore (Ready and uncordon)
and the pods moved; then the roll's wall time, the pods moved and preempted in all.
"""
import argparse
import pathlib
import re
import sys
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim"), str(ROOT / ".build" / "collections")]

import k8s_rig  # noqa: E402
import power_bridge  # noqa: E402
import vsphere_sim  # noqa: E402
from kubernetes import client  # noqa: E402
from tests.lib.ansible_run import run_playbook  # noqa: E402

OLD = "550.54.10-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip"
TURN = re.compile(r"^(\S+): ([0-9.]+) s in all; drain ([0-9.]+) s, (\d+) pods moved; restore ([0-9.]+) s$")


def node(name, pool):
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", "gpupool.vcf/pool": pool}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def deployment(name, pool, replicas, priority):
    spec = {"containers": [{"name": "main", "image": "sim/cuda:12", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "terminationGracePeriodSeconds": 0, "priorityClassName": priority, "nodeSelector": {"gpupool.vcf/pool": pool}}
    return {"metadata": {"name": name}, "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                                  "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def wait(what, check, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.3)
    raise SystemExit("timed out waiting for %s" % what)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    n = parser.parse_args().hosts
    hosts = ["bench-%02d" % i for i in range(1, n + 1)]
    vms = {}
    for i, host in enumerate(hosts):
        vms["inf-%d" % i] = (host, "inference")
        vms["trn-%d" % i] = (host, "training")
    fleet = {"clusters": [{"name": "bench", "hosts": [
        {"prefix": "bench-", "count": n, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]}],
        "vms": [{"name": vm, "host": host, "vgpu": ["nvidia_l40s-48q"]} for vm, (host, _pool) in sorted(vms.items())]}
    suffix = uuid.uuid4().hex[:5]
    inference, training = "bench-inference-%s" % suffix, "bench-training-%s" % suffix
    with vsphere_sim.start(fleet) as sim, k8s_rig.start(kueue=False) as rig:
        api = rig.api_client()
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        sched, policy = client.SchedulingV1Api(api), client.PolicyV1Api(api)
        for vm, (_host, pool) in vms.items():
            core.create_node(node(vm, pool))
        sched.create_priority_class({"metadata": {"name": inference}, "value": 100000})
        sched.create_priority_class({"metadata": {"name": training}, "value": 1000, "preemptionPolicy": "Never"})
        core.create_namespace({"metadata": {"name": "bench"}})
        apps.create_namespaced_deployment("bench", deployment("llm", "inference", n - 1, inference))
        apps.create_namespaced_deployment("bench", deployment("train", "training", n, training))
        policy.create_namespaced_pod_disruption_budget("bench", {
            "metadata": {"name": "llm"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "llm"}}}})
        wait("the workloads running", lambda: len([p for p in core.list_namespaced_pod("bench").items
                                                   if p.status.phase == "Running"]) == 2 * n - 1)
        role_vars = {"esxi_gpu_host_cluster": "bench", "esxi_gpu_host_driver_version": "550.90.05",
                     "esxi_gpu_host_driver_bundle": BUNDLE, "esxi_gpu_host_reboot_timeout": 120,
                     "esxi_gpu_host_guest_kubeconfigs": [str(rig.kubeconfig)],
                     "esxi_gpu_host_protected_priority_classes": [inference],
                     "esxi_gpu_host_drain_timeout": 120, "esxi_gpu_host_node_ready_timeout": 120}
        play = [{"name": "bench", "hosts": "localhost", "gather_facts": False,
                 "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                            "vars": role_vars}]}]
        with power_bridge.follow(sim, api, dict((vm, vm) for vm in vms)) as bridge:
            start = time.monotonic()
            res = run_playbook(play, env=sim.env, timeout=3600)
            wall = time.monotonic() - start
        if res.rc != 0:
            raise SystemExit("role failed: %s" % [(t, r.get("msg")) for t, r in res.tasks if r.get("failed")])
        turns = [TURN.match(r.get("msg") or "") for t, r in res.tasks if "Turn done" in t]
        drains = [item for t, r in res.tasks if "Drain the guest nodes" in t for item in r.get("results") or []
                  if "preempted" in item]
        preempted = sum(sum(item["preempted"].values()) for item in drains)
    print("drained driver roll of %d hosts (2 x L40S, an inference and a training node VM each)" % n)
    print("%-10s %8s %8s %9s %12s" % ("host", "turn s", "drain s", "restore s", "pods moved"))
    for m in turns:
        print("%-10s %8s %8s %9s %12s" % (m.group(1), m.group(2), m.group(3), m.group(5), m.group(4)))
    print("roll: %.1f s wall, %d pods moved, %d preempted (training), %d node VM power changes"
          % (wall, sum(int(m.group(4)) for m in turns), preempted, len(bridge.changes)))


if __name__ == "__main__":
    main()
