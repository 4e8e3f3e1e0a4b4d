"""Cordon, evict, wait and uncordon guest nodes on the rig (``_drain_api`` with ``pure._drain``).

Each test makes its own kwok nodes (tainted so no other test's pods land there) and pods of a
ReplicaSet. The rig's kube-controller-manager runs its default controllers, the disruption
controller among them: PodDisruptionBudget status (``disruptionsAllowed``) is computed by it,
not written by the test; the tests wait for it.
"""
from __future__ import annotations

import time
import uuid

import pytest
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi, DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import drain_plan, drain_refs, nodes_of_vms
from tests.lib.ansible_run import run_module

TAINT = "gpupool.vcf/drain-test"


@pytest.fixture
def rig_nodes(k8s_api):
    """make(name, provider_id=None) creates a Ready kwok node only this test's pods tolerate."""
    core = client.CoreV1Api(k8s_api)
    made = []

    def make(name, provider_id=None):
        capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        spec = {"taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]}
        if provider_id:
            spec["providerID"] = provider_id
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
                                       "annotations": {"kwok.x-k8s.io/node": "fake"}},
                          "spec": spec, "status": {"capacity": capacity, "allocatable": capacity}})
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            core.delete_node(name)
        except ApiException:
            pass


def uid():
    return uuid.uuid4().hex[:6]


def drain_api(k8s_api, budget_poll=0.2):
    return DrainApi(k8s=K8sClient(api=k8s_api), poll=budget_poll)


def replica_set(core_apps, ns, name, replicas, nodes, priority_class=None):
    spec = {"containers": [{"name": "main", "image": "sim/cuda:12"}], "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": nodes}]}]}}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    core_apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})


def pdb(k8s_api, ns, name, min_available, allowed):
    policy = client.PolicyV1Api(k8s_api)
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": name}, "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}}})
    wait_for("PDB %s computed by the disruption controller" % name, lambda: (
        policy.read_namespaced_pod_disruption_budget(name, ns).status.disruptions_allowed == allowed
        and policy.read_namespaced_pod_disruption_budget(name, ns).status.current_healthy >= min_available))


def running_on(core, ns, app, node_names):
    pods = core.list_namespaced_pod(ns, label_selector="app=%s" % app).items
    return [p for p in pods if p.spec.node_name in node_names and p.status.phase == "Running"
            and p.metadata.deletion_timestamp is None]


def two_web_pods_on(core, apps, ns, a, b):
    """Nodes a and b Ready, and the ReplicaSet "web" (2 pods, either node) with both pods Running on a."""
    for n in (a, b):
        wait_for("node %s Ready" % n, lambda n=n: any(
            c.type == "Ready" and c.status == "True" for c in core.read_node(n).status.conditions or []))
    core.patch_node(b, {"spec": {"unschedulable": True}})  # b held back so the pods start on a
    replica_set(apps, ns, "web", 2, [a, b])
    wait_for("2 web pods Running on %s" % a, lambda: len(running_on(core, ns, "web", [a])) == 2)
    core.patch_node(b, {"spec": {"unschedulable": False}})


def test_cordon_evict_wait_uncordon(k8s_api, k8s_namespace, rig_nodes):
    core, apps, ns = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api), k8s_namespace
    a = rig_nodes("drain-a-%s" % uid(), provider_id="vsphere://4215AAAA-0000-1111-2222-%s000000" % uid())
    b = rig_nodes("drain-b-%s" % uid())
    two_web_pods_on(core, apps, ns, a, b)
    pdb(k8s_api, ns, "web", 1, 1)
    api = drain_api(k8s_api)

    node_a = api.read_node(a)
    uuid_a = node_a["spec"]["providerID"][len("vsphere://"):].lower()
    assert nodes_of_vms([{"name": "vm-of-a", "uuid": uuid_a}, b], api.list_nodes()) == {"vm-of-a": a, b: b}

    assert api.cordon(a) == "cordoned"
    node_a = core.read_node(a)
    assert node_a.spec.unschedulable is True and node_a.metadata.annotations[CORDONED_BY] == "gpupool.vcf"
    assert api.cordon(a) == "ours"  # a rerun resumes
    plan = drain_plan([a], api.pods_on(a), api.list_pdbs(), ["inference"])
    assert [p["name"].startswith("web-") for p in plan[a]["evict"]] == [True, True]
    assert plan[a]["blocked"] == [] and plan[a]["preempted"] == {"": 2}

    start = time.monotonic()
    # the budget allows one at a time: the second eviction gets 429 until the first pod's
    # replacement runs on b, and is retried within the bound
    assert [api.evict(p, budget_timeout=60) for p in plan[a]["evict"]] == ["evicted", "evicted"]
    api.wait_gone(plan[a]["evict"], timeout=60)
    took = time.monotonic() - start
    assert took < 60, took
    assert sorted(api.evicted) == sorted("%s/%s" % (ns, p["name"]) for p in plan[a]["evict"])
    wait_for("2 web pods Running on %s" % b, lambda: len(running_on(core, ns, "web", [b])) == 2)
    assert api.evict(plan[a]["evict"][0]) == "gone"  # a rerun finds the pod already gone

    api.wait_ready(a, timeout=10)
    assert api.uncordon(a) == "uncordoned"
    node_a = core.read_node(a)
    assert not node_a.spec.unschedulable and CORDONED_BY not in (node_a.metadata.annotations or {})
    assert api.uncordon(a) == "schedulable"
    apps.delete_namespaced_replica_set("web", ns)


def test_the_module_diff_shows_the_cordon_and_the_pods_that_leave_as_check_mode_predicts(
        k8s_rig, k8s_api, k8s_namespace, rig_nodes):
    core, apps, ns = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api), k8s_namespace
    a, b = rig_nodes("diff-a-%s" % uid()), rig_nodes("diff-b-%s" % uid())
    two_web_pods_on(core, apps, ns, a, b)
    on_a = sorted("%s/%s" % (ns, p.metadata.name) for p in running_on(core, ns, "web", [a]))
    args = dict(kubeconfig=str(k8s_rig.kubeconfig), vms=[dict(name=a)], owner="host-roll/diff", timeout=60)
    predicted = run_module("gpupool.vcf.guest_node_drain", args, env=k8s_rig.env, check=True, diff=True)[0]
    assert not predicted.get("failed"), predicted.get("msg")
    assert predicted["diff"] == dict(
        before=dict(nodes={a: dict(unschedulable=False, cordoned_by=None, pods=on_a)}, workloads={}),
        after=dict(nodes={a: dict(unschedulable=True, cordoned_by="host-roll/diff", pods=[])}, workloads={}))
    assert not core.read_node(a).spec.unschedulable  # check mode changes nothing
    drained = run_module("gpupool.vcf.guest_node_drain", args, env=k8s_rig.env, diff=True)[0]
    assert not drained.get("failed"), drained.get("msg")
    assert drained["changed"] is True and drained["diff"] == predicted["diff"]
    node_a = core.read_node(a)
    assert node_a.spec.unschedulable is True and node_a.metadata.annotations[CORDONED_BY] == "host-roll/diff"
    assert running_on(core, ns, "web", [a]) == []
    restored = run_module("gpupool.vcf.guest_node_drain", dict(args, state="restored"), env=k8s_rig.env, diff=True)[0]
    assert not restored.get("failed"), restored.get("msg")
    assert restored["diff"] == dict(before=dict(nodes={a: dict(unschedulable=True, cordoned_by="host-roll/diff")}),
                                    after=dict(nodes={a: dict(unschedulable=False, cordoned_by=None)}))
    assert not core.read_node(a).spec.unschedulable
    apps.delete_namespaced_replica_set("web", ns)


def test_budget_allowing_no_disruption_blocks_and_is_named(k8s_api, k8s_namespace, rig_nodes):
    core, apps, sched, ns = (client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api), client.SchedulingV1Api(k8s_api),
                             k8s_namespace)
    c = rig_nodes("drain-c-%s" % uid())
    prio = "drain-inference-%s" % uid()
    sched.create_priority_class({"metadata": {"name": prio}, "value": 100000})
    try:
        replica_set(apps, ns, "llm", 2, [c], priority_class=prio)
        wait_for("2 llm pods Running on %s" % c, lambda: len(running_on(core, ns, "llm", [c])) == 2)
        pdb(k8s_api, ns, "llm", 2, 0)
        api = drain_api(k8s_api)
        assert api.cordon(c) == "cordoned"
        plan = drain_plan([c], api.pods_on(c), api.list_pdbs(), [prio])
        assert plan[c]["evict"] == []
        assert [(p["pdb"], p["reason"]) for p in plan[c]["blocked"]] == [
            (["llm"], "PodDisruptionBudget llm allows no disruption")] * 2

        pods = drain_refs(plan)
        start = time.monotonic()
        with pytest.raises(DrainError) as err:
            api.evict_all(pods, api.deadline(3), 3)
        took = time.monotonic() - start
        assert 3 <= took < 6, took  # one deadline for both pods, not 3 s each
        msg = str(err.value)
        first, second = ("%s/%s" % (ns, p["name"]) for p in pods)
        assert msg.startswith("the drain's deadline (3 s) passed before every pod was evicted; still in the way: "
                              "on node %s: %s (PodDisruptionBudget llm allows no disruption), %s (PodDisruptionBudget "
                              "llm allows no disruption)" % (c, first, second)), msg
        assert msg.endswith("(left: nodes left cordoned: %s; pods evicted so far: none; a plain rerun resumes from "
                            "there)" % c), msg
        assert len(running_on(core, ns, "llm", [c])) == 2  # the pods were not touched
        assert api.uncordon(c) == "uncordoned"
    finally:
        sched.delete_priority_class(prio)


def test_administrator_cordon_is_left_alone(k8s_api, rig_nodes):
    core = client.CoreV1Api(k8s_api)
    d = rig_nodes("drain-d-%s" % uid())
    core.patch_node(d, {"spec": {"unschedulable": True}})  # an administrator's cordon
    api = drain_api(k8s_api)
    assert api.cordon(d) == "administrator"
    assert api.cordoned == []
    assert api.uncordon(d) == "not_ours"
    node = core.read_node(d)
    assert node.spec.unschedulable is True and CORDONED_BY not in (node.metadata.annotations or {})
