"""_drain: which guest nodes a host's node VMs are, and what draining them evicts, skips and blocks."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import (
    blocked_pods, drain_plan, nodes_of_vms, pdbs_of_pod, preempted_total, selector_matches, skip_reason)

RS = ({"kind": "ReplicaSet", "name": "web-1", "controller": True},)
DS = [{"kind": "DaemonSet", "name": "gpu-feature-discovery", "controller": True}]


def node(name, provider=None):
    return {"metadata": {"name": name}, "spec": {"providerID": provider} if provider else {}}


def pod(name, node_name, ns="apps", labels=None, owners=RS, priority=None, phase="Running", annotations=None,
        deleting=False, volumes=None):
    meta = {"name": name, "namespace": ns, "uid": "uid-" + name, "labels": labels or {},
            "ownerReferences": list(owners), "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    spec = {"nodeName": node_name, "volumes": volumes or []}
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def pdb(name, allowed, ns="apps", selector=None):
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"selector": selector if selector is not None else {"matchLabels": {"app": name}}},
            "status": {"disruptionsAllowed": allowed}}


def names(refs):
    return [r["name"] for r in refs]


def test_nodes_by_name_and_by_provider_id():
    nodes = [node("pool-a-7x2k"), node("pool-b-node-1", "vsphere://4215A1B2-0000-1111-2222-333344445555"),
             node("other", "aws:///i-1")]
    vms = [{"name": "pool-a-7x2k", "uuid": "x"},
           {"name": "pool-b-vm", "uuid": "4215a1b2-0000-1111-2222-333344445555"},
           {"name": "not-a-node", "uuid": "ffff"}, "other"]
    assert nodes_of_vms(vms, nodes) == {"pool-a-7x2k": "pool-a-7x2k", "pool-b-vm": "pool-b-node-1",
                                        "not-a-node": None, "other": "other"}


def test_name_wins_over_provider_id_and_plain_names_need_a_name_match():
    nodes = [node("vm-1", "vsphere://aaaa"), node("vm-2", "vsphere://bbbb")]
    assert nodes_of_vms([{"name": "vm-1", "uuid": "bbbb"}], nodes) == {"vm-1": "vm-1"}
    assert nodes_of_vms(["aaaa"], nodes) == {"aaaa": None}
    assert nodes_of_vms([], nodes) == {}


def test_selector_forms():
    labels = {"app": "web", "tier": "gpu"}
    assert selector_matches({}, labels)
    assert not selector_matches(None, labels)
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]},
                                labels)
    assert selector_matches({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, labels)


def test_pdb_must_share_the_namespace():
    p = pod("web-1", "n1", labels={"app": "web"})
    assert [b["metadata"]["namespace"] for b in pdbs_of_pod(p, [pdb("web", 1, ns="other"), pdb("web", 1)])] == ["apps"]


def test_daemonset_and_mirror_pods_are_skipped_emptydir_is_evicted():
    pods = [pod("gfd-x", "n1", owners=DS),
            pod("kube-proxy-n1", "n1", owners=[{"kind": "Node", "name": "n1", "controller": True}],
                annotations={"kubernetes.io/config.mirror": "abc"}),
            pod("scratch", "n1", volumes=[{"name": "tmp", "emptyDir": {}}]),
            pod("elsewhere", "n2")]
    plan = drain_plan(["n1"], pods, [], ["inference"])
    assert list(plan) == ["n1"]
    assert names(plan["n1"]["evict"]) == ["scratch"]
    assert [(r["name"], r["reason"]) for r in plan["n1"]["skipped"]] == [("gfd-x", "daemonset"),
                                                                         ("kube-proxy-n1", "mirror")]
    assert skip_reason(pod("x", "n1", owners=[{"kind": "DaemonSet", "name": "d", "controller": False}])) is None


def test_protected_pod_under_exhausted_budget_blocks_and_is_named():
    pods = [pod("llm-0", "n1", labels={"app": "llm"}, priority="inference"),
            pod("train-0", "n1", labels={"app": "train"}, priority="training")]
    plan = drain_plan(["n1"], pods, [pdb("llm", 0), pdb("train", 0)], ["inference"])
    entry = plan["n1"]
    assert names(entry["evict"]) == ["train-0"]  # a preemptible pod is still evicted (the API retries it)
    assert [(r["name"], r["pdb"], r["reason"]) for r in entry["blocked"]] == [
        ("llm-0", ["llm"], "PodDisruptionBudget llm allows no disruption")]
    assert entry["preempted"] == {"training": 1}
    assert [(n, r["name"]) for n, r in blocked_pods(plan)] == [("n1", "llm-0")]


def test_budget_is_consumed_across_the_nodes_of_the_plan():
    pods = [pod("llm-0", "n1", labels={"app": "llm"}, priority="inference"),
            pod("llm-1", "n2", labels={"app": "llm"}, priority="inference"),
            pod("llm-2", "n3", labels={"app": "llm"}, priority="inference")]
    plan = drain_plan(["n1", "n2"], pods, [pdb("llm", 1)], ["inference"])
    assert names(plan["n1"]["evict"]) == ["llm-0"]
    assert names(plan["n2"]["evict"]) == [] and names(plan["n2"]["blocked"]) == ["llm-1"]
    assert preempted_total(plan) == {}


def test_two_budgets_on_one_protected_pod_block():
    pods = [pod("llm-0", "n1", labels={"app": "llm", "tier": "gpu"}, priority="inference")]
    plan = drain_plan(["n1"], pods, [pdb("llm", 3), pdb("gpu", 3, selector={"matchLabels": {"tier": "gpu"}})],
                      ["inference"])
    assert plan["n1"]["blocked"][0]["pdb"] == ["gpu", "llm"]
    assert plan["n1"]["blocked"][0]["reason"] == "more than one PodDisruptionBudget covers it"


def test_preempted_counts_per_class_terminating_finished_and_unmanaged():
    pods = [pod("t1", "n1", priority="training"), pod("t2", "n1", priority="training"),
            pod("nb", "n1", priority="notebook"), pod("plain", "n2", owners=[]),
            pod("going", "n1", priority="training", deleting=True),
            pod("done", "n2", phase="Succeeded", labels={"app": "llm"}, priority="inference")]
    plan = drain_plan(["n1", "n2"], pods, [pdb("llm", 0)], ["inference"])
    assert plan["n1"]["preempted"] == {"training": 2, "notebook": 1}
    assert names(plan["n1"]["terminating"]) == ["going"]
    assert names(plan["n2"]["evict"]) == ["done", "plain"]  # a finished pod is never held by its budget
    assert names(plan["n2"]["unmanaged"]) == ["plain"]
    assert plan["n2"]["preempted"] == {"": 1}
    assert preempted_total(plan) == {"training": 2, "notebook": 1, "": 1}


def test_node_without_pods_has_an_empty_entry():
    empty = {"evict": [], "blocked": [], "skipped": [], "terminating": [], "unmanaged": [], "preempted": {}}
    assert drain_plan(["n9"], [], [], []) == {"n9": empty}


# --- the spare rule on the live fleet

def gpu_node(name, gpus=1, pool="inference", ready=True, cordoned=False, taints=None, resource="nvidia.com/gpu"):
    return {"metadata": {"name": name, "labels": {"gpupool.vcf/pool": pool}},
            "spec": dict({"unschedulable": True} if cordoned else {}, taints=taints or []),
            "status": {"allocatable": {resource: str(gpus), "cpu": "16"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def gpu_pod(name, node_name, gpus=1, priority="inference", pool="inference", tolerations=None,
            resource="nvidia.com/gpu", phase="Running"):
    p = pod(name, node_name, priority=priority, phase=phase)
    p["spec"].update(containers=[{"name": "main", "resources": {"limits": {resource: str(gpus)}, "requests": {"cpu": "1"}}}],
                     nodeSelector={"gpupool.vcf/pool": pool}, tolerations=tolerations or [])
    return p


def test_gpu_requests_sum_containers_and_take_the_largest_init_container():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import gpu_requests
    p = gpu_pod("a", "n1", gpus=2)
    p["spec"]["containers"].append({"name": "side", "resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}}})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]
    assert gpu_requests(p) == {"nvidia.com/gpu": 3, "nvidia.com/mig-1g.10gb": 1}
    assert gpu_requests(pod("plain", "n1")) == {}


def test_protected_pod_with_a_free_node_of_its_pool_is_placed():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import unplaceable
    nodes = [gpu_node("inf-a"), gpu_node("inf-b"), gpu_node("inf-c")]
    pods = [gpu_pod("llm-1", "inf-a"), gpu_pod("llm-2", "inf-b")]
    plan = drain_plan(["inf-a"], pods, [], ["inference"])
    assert unplaceable(plan, pods, nodes, ["inference"]) == []


def test_no_free_gpu_elsewhere_is_named_with_each_reason():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import unplaceable
    nodes = [gpu_node("inf-a"), gpu_node("inf-b"), gpu_node("inf-c", cordoned=True), gpu_node("inf-d", ready=False),
             gpu_node("trn-a", pool="training"), gpu_node("inf-e", taints=[{"key": "dedicated", "effect": "NoSchedule"}])]
    pods = [gpu_pod("llm-1", "inf-a"), gpu_pod("llm-2", "inf-b")]
    plan = drain_plan(["inf-a"], pods, [], ["inference"])
    left = unplaceable(plan, pods, nodes, ["inference"])
    assert [(u["name"], u["node"], u["gpus"]) for u in left] == [("llm-1", "inf-a", {"nvidia.com/gpu": 1})]
    assert left[0]["reason"].startswith("no other node can take it (")
    for part in ("1 cordoned", "1 no free nvidia.com/gpu", "1 not Ready", "1 nodeSelector gpupool.vcf/pool=inference",
                 "1 taint dedicated"):
        assert part in left[0]["reason"], left[0]["reason"]
    # a toleration of the taint makes room
    pods[0]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    assert unplaceable(drain_plan(["inf-a"], pods, [], ["inference"]), pods, nodes, ["inference"]) == []


def test_placed_pods_use_up_the_free_gpus_and_preemptible_or_finished_pods_are_not_judged():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import unplaceable
    nodes = [gpu_node("inf-a", gpus=2), gpu_node("inf-b", gpus=1)]
    pods = [gpu_pod("llm-1", "inf-a"), gpu_pod("llm-2", "inf-a"), gpu_pod("batch", "inf-a", priority="training"),
            gpu_pod("done", "inf-a", phase="Succeeded")]
    plan = drain_plan(["inf-a"], pods, [], ["inference"])
    left = unplaceable(plan, pods, nodes, ["inference"])
    assert [u["name"] for u in left] == ["llm-2"]  # llm-1 took inf-b's one free GPU
    # the pods of the node being drained do not count against another node
    assert unplaceable(plan, pods, nodes + [gpu_node("inf-c", gpus=1)], ["inference"]) == []


def test_mig_resources_are_matched_by_name():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import unplaceable
    mig = "nvidia.com/mig-1g.10gb"
    nodes = [gpu_node("a", gpus=7, resource=mig), gpu_node("b", gpus=2, resource=mig), gpu_node("c", gpus=4)]
    pods = [gpu_pod("m-%d" % i, "a", resource=mig) for i in range(3)]
    left = unplaceable(drain_plan(["a"], pods, [], ["inference"]), pods, nodes, ["inference"])
    assert [u["name"] for u in left] == ["m-2"]


def test_budgets_that_never_allow():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import budgets_that_never_allow

    def budget(name, expected, desired, healthy):
        return {"metadata": {"name": name, "namespace": "apps"},
                "status": {"expectedPods": expected, "desiredHealthy": desired, "currentHealthy": healthy,
                           "disruptionsAllowed": max(0, healthy - desired)}}
    assert budgets_that_never_allow([budget("all", 2, 2, 2), budget("one-short-now", 2, 1, 1),
                                     budget("spare", 3, 2, 3), budget("empty", 0, 0, 0)]) == ["apps/all"]
