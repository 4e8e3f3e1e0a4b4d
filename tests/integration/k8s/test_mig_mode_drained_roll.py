"""MIG mode per GPU and the vGPU scheduler changed on a pool that carries workloads: drained host by host.

A fleet of four H100 hosts, each with GPU 0 in MIG mode holding a VKS inference node VM (inference-0 ..
inference-3, a MIG-backed 3g.40gb vGPU) and a full-card VM on a GPU without MIG. The geometry asks MIG mode on
GPUs 0 and 1 of every host (as the role's esxi_gpu_host_mig_geometry, list per host position) and a new
scheduler. The current MIG mode is read from vCenter (no shell); the vSphere simulator answers nvidia-smi over
SSH on each host (tests/sim/vsphere/mig_ssh.go) only while the host's TSM-SSH service runs, which starts
stopped: the module starts it for the MIG step and stops it again. The Kubernetes rig holds a kwok node per
node VM (matched by provider id) with an inference Deployment and its PodDisruptionBudget;
tests/sim/power_bridge.py makes a node NotReady while its VM is off. The role esxi_gpu_host drains each host's
node, powers its VMs off, enters maintenance mode, writes the scheduler, sets MIG mode with nvidia-smi, reboots,
reads MIG mode back before the host leaves maintenance mode, powers the VMs on, waits for a fresh Ready and
uncordons - host by host.
"""
import pathlib
import threading
import time
import uuid

import power_bridge
import pytest
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient, vim
from tests.integration.test_fault_suite import BUNDLE, NEW
from tests.lib import chain
from tests.lib.ansible_run import failures, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
SUFFIX = uuid.uuid4().hex[:5]
HOSTS = ["esx-h100-01", "esx-h100-02", "esx-h100-03", "esx-h100-04"]
VMS = ["inference-%d" % i for i in range(4)]  # the node VMs, one per host, in host order
NODES = dict((vm, "mig-%s-%s" % (vm, SUFFIX)) for vm in VMS)
POOL = "mig-inference-%s" % SUFFIX
TAINT = "gpupool.vcf/mig-roll-test"
INFERENCE = "mig-inference-%s" % SUFFIX
TRAINING = "mig-training-%s" % SUFFIX
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUE = "mig-training-%s" % SUFFIX
SCHEDULER = {"policy": "equal_share", "time_slice_ms": 2}
GEOMETRY = [[0, 1]] * 4
FLEET = {
    "clusters": [{"name": "gpu-h100", "supervisor": True, "hosts": [
        {"prefix": "esx-h100-", "count": 4, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW,
         "graphics": {"default": "sharedDirect", "policy": "performance"}, "mig": [0]}]}],
    # the node VMs on the MIG GPU of each host; a full card beside each (goes down with the host too)
    "vms": [{"name": vm, "host": host, "vgpu": ["nvidia_h100-3-40c"]} for vm, host in zip(VMS, HOSTS)] +
           [{"name": "llm-training-%d" % i, "host": host, "vgpu": ["nvidia_h100-80c"]} for i, host in enumerate(HOSTS)],
}
PENDING_BOUND = 30  # seconds an inference pod may stay Pending while hosts roll


def messages(res, part):
    return [r.get("msg") for name, r in res.tasks if part in name and r.get("msg")]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with chain.vsphere_with_ssh(FLEET, tmp_path_factory.mktemp("ssh")) as running:
        yield running


def uuids(sim):
    vsphere = VsphereClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)
    try:
        return dict((vm["name"], vm["config.uuid"]) for vm in vsphere.retrieve({vim.VirtualMachine: ["name", "config.uuid"]}))
    finally:
        vsphere.close()


def power(sim):
    vsphere = VsphereClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)
    try:
        return dict((vm["name"], str(vm["runtime.powerState"]))
                    for vm in vsphere.retrieve({vim.VirtualMachine: ["name", "runtime.powerState"]}))
    finally:
        vsphere.close()


def ready(core, node):
    return any(c.type == "Ready" and c.status == "True" for c in core.read_node(node).status.conditions or [])


@pytest.fixture(scope="module")
def guest(sim, k8s_api):
    """A node per node VM (named otherwise: matched by provider id), the inference Deployment and its budget."""
    core, sched = client.CoreV1Api(k8s_api), client.SchedulingV1Api(k8s_api)
    ns = "mig-roll-%s" % SUFFIX
    by_uuid = uuids(sim)
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"}
    for vm, name in NODES.items():
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok", "gpupool.vcf/pool": POOL}},
            "spec": {"providerID": "vsphere://%s" % by_uuid[vm],
                     "taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": capacity}})
    sched.create_priority_class({"metadata": {"name": INFERENCE}, "value": 1000000})
    sched.create_priority_class({"metadata": {"name": TRAINING}, "value": 1000, "preemptionPolicy": "Never"})
    core.create_namespace({"metadata": {"name": ns}})
    # a training Job admitted by Kueue on the same nodes: a drain requeues it through Kueue
    custom = client.CustomObjectsApi(k8s_api)
    custom.create_cluster_custom_object(*KUEUE, "resourceflavors", {
        "apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": QUEUE}})
    quota = {"name": QUEUE, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", {
        "apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": QUEUE},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [quota]}]}})
    custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", {
        "apiVersion": "/".join(KUEUE), "kind": "LocalQueue", "metadata": {"name": "training"},
        "spec": {"clusterQueue": QUEUE}})
    spec = {"containers": [{"name": "main", "image": "sim/cuda:12", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            "terminationGracePeriodSeconds": 0, "priorityClassName": INFERENCE, "nodeSelector": {"gpupool.vcf/pool": POOL},
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]}
    client.AppsV1Api(k8s_api).create_namespaced_deployment(ns, {"metadata": {"name": "llm"}, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": "llm"}},
        "template": {"metadata": {"labels": {"app": "llm"}}, "spec": spec}}})
    client.PolicyV1Api(k8s_api).create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "llm"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "llm"}}}})
    client.BatchV1Api(k8s_api).create_namespaced_job(ns, {
        "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "training"}},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 6, "template": {"spec": dict(
            spec, restartPolicy="Never", priorityClassName=TRAINING)}}})
    try:
        wait_for("3 llm pods Running", lambda: len(running(core, ns)) == 3)
        wait_for("the training pod Running", lambda: len(running(core, ns, "batch.kubernetes.io/job-name=train")) == 1)
        yield ns
    finally:
        core.delete_namespace(ns)
        for plural, name in (("clusterqueues", QUEUE), ("resourceflavors", QUEUE)):
            try:
                custom.delete_cluster_custom_object(*KUEUE, plural, name)
            except ApiException:
                pass
        sched.delete_priority_class(TRAINING)
        for name in NODES.values():
            try:
                core.delete_node(name)
            except ApiException:
                pass
        sched.delete_priority_class(INFERENCE)


def running(core, ns, selector="app=llm"):
    return [p for p in core.list_namespaced_pod(ns, label_selector=selector).items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def roll(sim, k8s_rig):
    role_vars = {"esxi_gpu_host_cluster": "gpu-h100", "esxi_gpu_host_driver_version": "550.90.05",
                 "esxi_gpu_host_driver_bundle": BUNDLE, "esxi_gpu_host_scheduler": SCHEDULER,
                 "esxi_gpu_host_mig_geometry": GEOMETRY,
                 "esxi_gpu_host_reboot_timeout": 60, "esxi_gpu_host_install_timeout": 60,
                 # the VMs that are not guest nodes (llm-inference-*, embedding, training) go down too
                 "esxi_gpu_host_power_off_vgpu_vms": True,
                 "esxi_gpu_host_guest_kubeconfigs": [str(k8s_rig.kubeconfig)],
                 "esxi_gpu_host_protected_priority_classes": [INFERENCE],
                 "esxi_gpu_host_drain_timeout": 60, "esxi_gpu_host_node_ready_timeout": 60,
                 "esxi_gpu_host_ssh_private_key_file": sim.key, "esxi_gpu_host_ssh_host_key_checking": False,
                 "esxi_gpu_host_ssh_addresses": sim.ssh_addresses()}
    return [{"name": "roll", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": role_vars}]}]


def mig_current(sim, host):
    return [g["current"] for g in sorted(sim.mig(host), key=lambda g: g["pci_bus_id"])]


START, DESIGNED = [True, False, False, False], [True, True, False, False]


def ssh_stopped(sim):
    return all(sim.host_state(h)["ssh_service"] == "stopped" for h in HOSTS)


def cordoned(core):
    return sorted(vm for vm, name in NODES.items() if core.read_node(name).spec.unschedulable)


class PendingWatch(object):
    """The longest time any inference pod stayed Pending, sampled while the roll runs."""

    def __init__(self, core, ns):
        self.core, self.ns, self.since, self.longest = core, ns, {}, 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            now = time.monotonic()
            pending = set(p.metadata.name for p in self.core.list_namespaced_pod(self.ns, label_selector="app=llm").items
                          if p.status.phase == "Pending" and p.metadata.deletion_timestamp is None)
            self.since = dict((name, self.since.get(name, now)) for name in pending)
            self.longest = max([self.longest] + [now - t for t in self.since.values()])
            self.stop.wait(0.3)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def test_check_mode_prints_each_hosts_ordered_plan_and_changes_nothing(sim, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    boots = [sim.host_state(h)["reboot_count"] for h in HOSTS]
    res = run_playbook(roll(sim, k8s_rig), env=dict(sim.env), check=True)
    assert res.rc == 0, failures(res)
    plans = messages(res, "Steps of the turn, in order")
    assert len(plans) == 4, plans
    for vm, plan in zip(VMS, plans):
        assert plan[0].startswith("drain guest nodes %s" % NODES[vm]), plan
        assert plan[1].startswith("power off node VMs") and vm in plan[1], plan
        assert any(step.startswith("nvidia module options") for step in plan), plan
        mig = [step for step in plan if step.startswith("MIG mode disabled -> enabled on GPU 1:")]
        assert mig and "maintenance mode, nvidia-smi" in mig[0] and "read back before" in mig[0], plan
        assert plan[-2].startswith("power on the node VMs") and plan[-1] == "verify before the next host", plan
    assert [sim.host_state(h)["reboot_count"] for h in HOSTS] == boots
    assert all(mig_current(sim, h) == START and [g["pending"] for g in sim.mig(h)] == [g["current"] for g in sim.mig(h)]
               for h in HOSTS)
    assert cordoned(core) == [] and ssh_stopped(sim)  # check mode opened no shell


def test_nvidia_smi_failing_on_the_second_host_leaves_a_stated_state_and_a_rerun_finishes(sim, k8s_rig, k8s_api, guest):
    core = client.CoreV1Api(k8s_api)
    boots = [sim.host_state(h)["reboot_count"] for h in HOSTS]
    sim.inject_fault("esx-h100-02", "nvidia_smi", "Unable to enable MIG Mode for GPU 00000000:3B:00.0: Unknown Error")
    start = time.monotonic()
    with power_bridge.follow(sim, k8s_api, NODES) as bridge, PendingWatch(core, guest) as watch:
        first = run_playbook(roll(sim, k8s_rig), env=dict(sim.env))
        assert first.rc != 0
        msg = failures(first)
        # the stated state: the second host in maintenance mode, its VMs off, its node cordoned; the first done
        assert "esx-h100-02" in msg and "set MIG mode with nvidia-smi" in msg and "Unknown Error" in msg, msg
        assert "left in maintenance mode" in msg and "VMs left powered off: " in msg and "inference-1" in msg, msg
        assert "rerun" in msg and "SSH service TSM-SSH: started and stopped" in msg, msg
        assert sim.host_state("esx-h100-02")["maintenance"] is True
        assert power(sim)["inference-1"] == "poweredOff"
        assert cordoned(core) == ["inference-1"]
        assert mig_current(sim, "esx-h100-01") == DESIGNED and sim.host_state("esx-h100-01")["maintenance"] is False
        assert mig_current(sim, "esx-h100-02") == START
        assert all(mig_current(sim, h) == START for h in HOSTS[2:])
        assert ssh_stopped(sim)  # stopped again on the failed host too
        assert [sim.host_state(h)["reboot_count"] - b for h, b in zip(HOSTS, boots)] == [1, 0, 0, 0]

        again = run_playbook(roll(sim, k8s_rig), env=dict(sim.env))
        took = time.monotonic() - start
        assert again.rc == 0, failures(again)
    assert bridge.errors == []
    for host in HOSTS:
        state = sim.host_state(host)
        assert mig_current(sim, host) == DESIGNED, host
        assert state["maintenance"] is False and "RmPVMRL" in state["nvidia_options_loaded"], state
    assert [sim.host_state(h)["reboot_count"] - b for h, b in zip(HOSTS, boots)] == [1, 1, 1, 1]
    assert ssh_stopped(sim)
    # every node VM went off and came back on once, every node drained and back, a fresh Ready each
    assert sorted(bridge.changes) == sorted([(vm, "off") for vm in VMS] + [(vm, "on") for vm in VMS])
    assert all(state == "poweredOn" for vm, state in power(sim).items() if vm in VMS)
    for vm in VMS:
        node = core.read_node(NODES[vm])
        assert not node.spec.unschedulable and CORDONED_BY not in (node.metadata.annotations or {}), vm
    assert watch.longest <= PENDING_BOUND, "an inference pod was Pending %.1f s" % watch.longest
    wait_for("3 llm pods Running after the roll", lambda: len(running(core, guest)) == 3)
    # the training Job's pods left through Kueue: its workload deactivated, then requeued and admitted again
    drains = [item for res in (first, again) for name, r in res.tasks if "Drain the guest nodes" in name
              for item in r.get("results") or [] if "requeued" in item]
    requeued = [key for item in drains for key in item["requeued"]]
    assert requeued and all(key.startswith("%s/job-train-" % guest) for key in requeued), drains
    workload = client.CustomObjectsApi(k8s_api).get_namespaced_custom_object(*KUEUE, guest, "workloads",
                                                                             requeued[0].split("/")[1])
    assert workload["spec"].get("active", True) is True, workload
    assert "gpupool.vcf/deactivated-by" not in (workload["metadata"].get("annotations") or {}), workload
    wait_for("the training pod Running again", lambda: len(running(core, guest, "batch.kubernetes.io/job-name=train")) == 1)
    turns = messages(first, "Turn done") + messages(again, "Turn done")
    assert len(turns) == 4 and all("pods moved" in t for t in turns), turns
    print("MIG mode and scheduler on 4 hosts, nvidia-smi failing once: %.1f s; longest Pending %.1f s; requeued "
          "through Kueue: %s; %s" % (took, watch.longest, ", ".join(requeued), " | ".join(turns)))

    settled = run_playbook(roll(sim, k8s_rig), env=dict(sim.env))
    assert settled.rc == 0, failures(settled)
    assert [name for name, r in settled.tasks if r.get("changed")] == []
