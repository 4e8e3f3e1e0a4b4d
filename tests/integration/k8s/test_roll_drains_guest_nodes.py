"""A driver roll of a pool whose node VMs sit on every GPU host, with the guest cluster told.

The vSphere simulator holds three GPU hosts on the old driver, each carrying node VMs; the
Kubernetes rig holds a kwok node of the same name for each VM (inference nodes on every host,
training nodes on two). tests/sim/power_bridge.py makes a node NotReady while its VM is off and
Ready again when it is on, as the kubelet of a real node VM would. The role esxi_gpu_host, given
the rig's kubeconfig, drains each host's nodes (cordon, eviction through the API with a
PodDisruptionBudget on inference), powers the VMs off, installs the driver, reboots, powers them
on, waits until the nodes are Ready and uncordons them, host by host.
"""
import threading
import time
import uuid

import power_bridge
import pytest
import vsphere_sim
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.test_fault_suite import NEW, OLD, vm_power
from tests.integration.test_fault_suite import role_play as play
from tests.lib.ansible_run import failures, run_playbook

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY

SUFFIX = uuid.uuid4().hex[:5]
HOSTS = ["roll-01", "roll-02", "roll-03"]
# VM (= node) -> host; inference on every host, training on two
PLACEMENT = {"inf-a-%s" % SUFFIX: "roll-01", "inf-b-%s" % SUFFIX: "roll-02", "inf-c-%s" % SUFFIX: "roll-03",
             "trn-a-%s" % SUFFIX: "roll-01", "trn-b-%s" % SUFFIX: "roll-02"}
# a cluster whose driver comes from its vLCM image: vLCM remediates one host at a time after its drain
VLCM_HOSTS = ["vroll-01", "vroll-02"]
VLCM_PLACEMENT = {"vinf-a-%s" % SUFFIX: "vroll-01", "vinf-b-%s" % SUFFIX: "vroll-02"}
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
TAINT = "gpupool.vcf/roll-test"
INFERENCE = "roll-inference-%s" % SUFFIX
TRAINING = "roll-training-%s" % SUFFIX

FLEET = {
    "clusters": [
        {"name": "roll", "hosts": [
            {"prefix": "roll-", "count": 3, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]},
        {"name": "vroll", "lifecycle": "vlcm", "hosts": [
            {"prefix": "vroll-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]}],
    "vms": [{"name": vm, "host": host, "vgpu": ["nvidia_l40s-48q"]}
            for vm, host in sorted(list(PLACEMENT.items()) + list(VLCM_PLACEMENT.items()))],
}
ALL_NODES = dict(PLACEMENT, **VLCM_PLACEMENT)
# the power bridge's round (its default 0.3 s): a node VM is off for less than a second of a 0.2 s reboot, seen
# in several rounds
BRIDGE_PERIOD = 0.1


def pool_of(vm):
    return {"inf": "inference", "trn": "training", "vinf": "vinference"}[vm.split("-")[0]]


@pytest.fixture(scope="module")
def vsphere():
    """The simulator on FLEET, its hosts rebooting in 0.2 s (the default 1 s): the role waits on a host's boot
    time and the nodes on their VMs' power, neither on how long a reboot takes."""
    with vsphere_sim.start(FLEET, reboot_seconds=0.2) as sim:
        yield sim


@pytest.fixture(scope="module")
def guest(k8s_api):
    """The guest side: a node per VM, the PriorityClasses, a namespace; removed after the module."""
    core, sched = client.CoreV1Api(k8s_api), client.SchedulingV1Api(k8s_api)
    ns = "roll-%s" % SUFFIX
    for vm in ALL_NODES:
        capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"}
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": vm, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": vm, "type": "kwok", "gpupool.vcf/pool": pool_of(vm)}},
            "spec": {"taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": capacity}})
    sched.create_priority_class({"metadata": {"name": INFERENCE}, "value": 1000000, "preemptionPolicy": "PreemptLowerPriority"})
    sched.create_priority_class({"metadata": {"name": TRAINING}, "value": 1000, "preemptionPolicy": "Never"})
    core.create_namespace({"metadata": {"name": ns}})
    for vm in ALL_NODES:
        wait_for("node %s Ready" % vm, lambda vm=vm: ready(core, vm))
    try:
        yield ns
    finally:
        core.delete_namespace(ns)
        for vm in ALL_NODES:
            try:
                core.delete_node(vm)
            except ApiException:
                pass
        for name in (INFERENCE, TRAINING):
            sched.delete_priority_class(name)


def ready(core, node):
    return any(c.type == "Ready" and c.status == "True" for c in core.read_node(node).status.conditions or [])


def workload(k8s_api, ns, name, pool, replicas, priority):
    spec = {"containers": [{"name": "main", "image": "sim/cuda:12",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "terminationGracePeriodSeconds": 0, "priorityClassName": priority,
            "nodeSelector": {"gpupool.vcf/pool": pool},
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]}
    client.AppsV1Api(k8s_api).create_namespaced_deployment(ns, {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})


def running(core, ns, app):
    return [p for p in core.list_namespaced_pod(ns, label_selector="app=%s" % app).items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
            and ready(core, p.spec.node_name)]


def roll(k8s_rig, cluster="roll", **extra):
    role_vars = dict(esxi_gpu_host_guest_kubeconfigs=[str(k8s_rig.kubeconfig)],
                     esxi_gpu_host_protected_priority_classes=[INFERENCE], esxi_gpu_host_drain_timeout=60,
                     esxi_gpu_host_node_ready_timeout=60)
    role_vars.update(extra)
    return play(cluster, **role_vars)


def boots(sim):
    return [sim.host_state(h)["reboot_count"] for h in HOSTS]


def cordoned(core):
    return sorted(vm for vm in PLACEMENT if core.read_node(vm).spec.unschedulable)


def messages(res, part):
    return [r.get("msg") for name, r in res.tasks if part in name and r.get("msg")]


def test_inference_with_nowhere_to_go_stops_the_roll_before_any_change(vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    workload(k8s_api, guest, "llm", "inference", 3, INFERENCE)  # every inference node full: no spare
    wait_for("3 llm pods Running", lambda: len(running(core, guest, "llm")) == 3)
    before = boots(vsphere)
    res = run_playbook(roll(k8s_rig), env=vsphere_env)
    assert res.rc != 0
    msg = failures(res)
    assert "nowhere to go" in msg and "Nothing was changed" in msg, msg
    assert boots(vsphere) == before
    assert cordoned(core) == []
    assert all(state == "poweredOn" for vm, state in vm_power(vsphere).items() if vm in PLACEMENT)
    client.AppsV1Api(k8s_api).patch_namespaced_deployment_scale("llm", guest, {"spec": {"replicas": 2}})
    wait_for("2 llm pods", lambda: len(core.list_namespaced_pod(guest, label_selector="app=llm").items) == 2)


def test_a_budget_that_can_never_allow_an_eviction_stops_the_roll_before_any_change(
        vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core, policy = client.CoreV1Api(k8s_api), client.PolicyV1Api(k8s_api)
    wait_for("2 llm pods Running", lambda: len(running(core, guest, "llm")) == 2)
    policy.create_namespaced_pod_disruption_budget(guest, {
        "metadata": {"name": "llm-strict"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "llm"}}}})
    try:
        wait_for("llm-strict computed", lambda: (policy.read_namespaced_pod_disruption_budget(
            "llm-strict", guest).status.expected_pods or 0) == 2)
        before = boots(vsphere)
        res = run_playbook(roll(k8s_rig), env=vsphere_env)
        assert res.rc != 0
        msg = failures(res)
        assert "PodDisruptionBudget llm-strict wants every pod it covers healthy" in msg, msg
        assert "Nothing was changed" in msg and "host-roll/roll-0" in msg, msg
        assert boots(vsphere) == before and cordoned(core) == []
    finally:
        policy.delete_namespaced_pod_disruption_budget("llm-strict", guest)


def test_check_mode_prints_each_hosts_ordered_plan_and_changes_nothing(vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    pods = sorted(p.metadata.uid for p in core.list_namespaced_pod(guest).items)
    res = run_playbook(roll(k8s_rig), env=vsphere_env, check=True)
    assert res.rc == 0, failures(res)
    plans = messages(res, "Steps of the turn, in order")
    assert len(plans) == 3, plans
    first = plans[0]
    assert first[0].startswith("drain guest nodes"), first
    assert first[1].startswith("power off node VMs") and "inf-a-%s" % SUFFIX in first[1], first
    assert any("driver" in step for step in first), first
    assert first[-2].startswith("power on the node VMs") and first[-1] == "verify before the next host", first
    assert cordoned(core) == []
    assert sorted(p.metadata.uid for p in core.list_namespaced_pod(guest).items) == pods


def test_driver_roll_drains_each_host_and_brings_its_nodes_back(vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    workload(k8s_api, guest, "train", "training", 2, TRAINING)
    wait_for("2 train pods Running", lambda: len(running(core, guest, "train")) == 2)
    wait_for("2 llm pods Running", lambda: len(running(core, guest, "llm")) == 2)
    client.PolicyV1Api(k8s_api).create_namespaced_pod_disruption_budget(guest, {
        "metadata": {"name": "llm"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llm"}}}})
    wait_for("llm budget computed", lambda: client.PolicyV1Api(k8s_api).read_namespaced_pod_disruption_budget(
        "llm", guest).status.disruptions_allowed == 1)
    lowest = [2]
    stop = threading.Event()

    def sample():  # inference serving never drops below the budget while hosts roll
        while not stop.is_set():
            lowest[0] = min(lowest[0], len(running(core, guest, "llm")))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    before = boots(vsphere)
    start = time.monotonic()
    with power_bridge.follow(vsphere, k8s_api, dict((vm, vm) for vm in PLACEMENT), BRIDGE_PERIOD) as bridge:
        sampler.start()
        res = run_playbook(roll(k8s_rig), env=vsphere_env)
        stop.set()
        sampler.join()
    took = time.monotonic() - start
    assert res.rc == 0, failures(res)
    assert bridge.errors == []
    assert [b - a for a, b in zip(before, boots(vsphere))] == [1, 1, 1]
    for host in HOSTS:
        state = vsphere.host_state(host)
        assert state["driver_running"] == NEW and state["maintenance"] is False, state
    # every node VM went off and came back on, once
    assert sorted(bridge.changes) == sorted([(vm, "off") for vm in PLACEMENT] + [(vm, "on") for vm in PLACEMENT])
    assert all(vm_power(vsphere)[vm] == "poweredOn" for vm in PLACEMENT)
    for vm in PLACEMENT:
        node = core.read_node(vm)
        assert not node.spec.unschedulable and CORDONED_BY not in (node.metadata.annotations or {}), vm
    assert lowest[0] >= 1, "inference fell to %d pods Running during the roll" % lowest[0]
    wait_for("2 llm pods Running after the roll", lambda: len(running(core, guest, "llm")) == 2)
    wait_for("2 train pods Running after the roll", lambda: len(running(core, guest, "train")) == 2)
    drains = [r for name, r in res.tasks if "Drain the guest nodes" in name and not r.get("skipped")]
    moved = sum(len(item["evicted"]) for r in drains for item in r["results"] if "evicted" in item)
    preempted = sum(sum(item["preempted"].values()) for r in drains for item in r["results"] if "preempted" in item)
    assert moved >= 4 and preempted >= 2, (moved, preempted)  # each host's pods, training counted as preempted
    summary = messages(res, "Turn done")
    assert len(summary) == 3 and all("pods moved" in m for m in summary), summary
    print("roll of 3 hosts: %.1f s; %s" % (took, " | ".join(summary)))

    again = run_playbook(roll(k8s_rig), env=vsphere_env)
    assert again.rc == 0, failures(again)
    assert [name for name, r in again.tasks if r.get("changed")] == []


def test_a_node_not_back_in_time_stops_the_roll_saying_what_is_left_and_a_rerun_finishes(
        vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    vm = "inf-a-%s" % SUFFIX
    before = boots(vsphere)
    with power_bridge.follow(vsphere, k8s_api, dict((v, v) for v in PLACEMENT), BRIDGE_PERIOD) as bridge:
        bridge.hold(vm)  # its kubelet does not come back after the VM is powered on
        res = run_playbook(roll(k8s_rig, esxi_gpu_host_scheduler={"policy": "equal_share"},
                                esxi_gpu_host_node_ready_timeout=5), env=vsphere_env)
        assert res.rc != 0
        msg = failures(res)
        assert "roll-01" in msg and vm in msg and "Ready" in msg and "rerun" in msg, msg
        assert vm in cordoned(core)
        assert [b - a for a, b in zip(before, boots(vsphere))] == [1, 0, 0]  # the roll stopped at the first host
        bridge.release(vm)
        again = run_playbook(roll(k8s_rig, esxi_gpu_host_scheduler={"policy": "equal_share"}), env=vsphere_env)
        assert again.rc == 0, failures(again)
    assert cordoned(core) == []
    assert [b - a for a, b in zip(before, boots(vsphere))] == [1, 1, 1]


def test_vlcm_cluster_is_remediated_one_drained_host_at_a_time(vsphere, vsphere_env, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    workload(k8s_api, guest, "vllm", "vinference", 1, INFERENCE)
    wait_for("the vllm pod Running", lambda: len(running(core, guest, "vllm")) == 1)
    design = dict(esxi_gpu_host_lifecycle="vlcm", esxi_gpu_host_driver_bundle="", esxi_gpu_host_vlcm_depot_url=DEPOT)
    before = [vsphere.host_state(h)["reboot_count"] for h in VLCM_HOSTS]
    check = run_playbook(roll(k8s_rig, "vroll", **design), env=vsphere_env, check=True)
    assert check.rc == 0, failures(check)
    plans = messages(check, "Steps of the turn, in order")
    assert len(plans) == 2 and all(p[0].startswith("drain guest nodes") for p in plans), plans
    assert [vsphere.host_state(h)["reboot_count"] for h in VLCM_HOSTS] == before
    with power_bridge.follow(vsphere, k8s_api, dict((vm, vm) for vm in VLCM_PLACEMENT), BRIDGE_PERIOD) as bridge:
        res = run_playbook(roll(k8s_rig, "vroll", **design), env=vsphere_env)
    assert res.rc == 0, failures(res)
    for host, old in zip(VLCM_HOSTS, before):
        state = vsphere.host_state(host)
        assert state["driver_running"] == NEW and state["maintenance"] is False, state
        assert state["reboot_count"] == old + 1, state
    # each host alone: its node VM off and on before the next host's went off
    order = list(bridge.changes)
    assert order == [("vinf-a-%s" % SUFFIX, "off"), ("vinf-a-%s" % SUFFIX, "on"),
                     ("vinf-b-%s" % SUFFIX, "off"), ("vinf-b-%s" % SUFFIX, "on")], order
    remediations = [r for name, r in res.tasks if "NVIDIA driver by vLCM, this host alone" in name and r.get("changed")]
    assert len(remediations) == 2, [task[0] for task in res.tasks]
    for vm in VLCM_PLACEMENT:
        node = core.read_node(vm)
        assert not node.spec.unschedulable and CORDONED_BY not in (node.metadata.annotations or {}), vm
    wait_for("the vllm pod Running after the roll", lambda: len(running(core, guest, "vllm")) == 1)
    again = run_playbook(roll(k8s_rig, "vroll", **design), env=vsphere_env)
    assert again.rc == 0, failures(again)
    assert [name for name, r in again.tasks if r.get("changed")] == []
