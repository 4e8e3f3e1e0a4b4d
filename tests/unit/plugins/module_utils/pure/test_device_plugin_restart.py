"""_device_plugin_restart: which nodes advertise a stale GPU count after a sharing change, and their restart order."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._device_plugin_restart import (
    advertised, capacity_findings, expected, gpu_pods_by_node, restart_plan, stale_nodes, wait_failure)

SHARING = {"inference": {"replicas": 4}, "single": {"replicas": 1}}


def node(name, gpus=1, config="inference", allocatable=None):
    labels = {}
    if gpus is not None:
        labels["nvidia.com/gpu.count"] = str(gpus)
    if config:
        labels["nvidia.com/device-plugin.config"] = config
    status = {"allocatable": {"nvidia.com/gpu": str(allocatable)}} if allocatable is not None else {}
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def pod(name, node_name, gpu=1, phase="Running"):
    limits = {"nvidia.com/gpu": str(gpu)} if gpu else {}
    return {"metadata": {"name": name, "namespace": "serve"},
            "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": limits}}]},
            "status": {"phase": phase}}


def test_expected_is_gpus_times_replicas():
    assert expected(node("a", gpus=2), SHARING) == 8
    assert expected(node("a", gpus=2, config="single"), SHARING) == 2
    assert expected(node("a", gpus=2, config=None), SHARING) == 2
    assert expected(node("a", gpus=2, config="unknown"), SHARING) == 2
    assert expected(node("a", gpus=None), SHARING) is None


def test_advertised_reads_allocatable():
    assert advertised(node("a", allocatable=4)) == 4
    assert advertised(node("a")) == 0


def test_stale_nodes_are_those_whose_allocatable_differs_in_name_order():
    nodes = [node("c", allocatable=2), node("a", allocatable=4), node("b", allocatable=2),
             node("cpu", gpus=None, config=None)]
    rows = stale_nodes(nodes, SHARING)
    assert [r["node"] for r in rows] == ["b", "c"]
    assert rows[0]["advertised"] == 2 and rows[0]["expected"] == 4 and rows[0]["config"] == "inference"


def test_gpu_pods_only_running_pods_that_request_gpus():
    pods = [pod("p1", "a"), pod("p2", "a", gpu=0), pod("p3", "b", phase="Succeeded"), pod("p4", "b")]
    assert gpu_pods_by_node(pods) == {"a": ["serve/p1"], "b": ["serve/p4"]}


def test_plan_drains_nodes_with_gpu_pods_and_skips_up_to_date_nodes():
    nodes = [node("n1", allocatable=2), node("n2", allocatable=4), node("n3", allocatable=2)]
    plan = restart_plan(nodes, [pod("web-0", "n1")], SHARING)
    assert [p["node"] for p in plan] == ["n1", "n3"]
    assert plan[0]["steps"] == ["drain", "restart", "wait", "uncordon"] and plan[0]["gpu_pods"] == ["serve/web-0"]
    assert plan[1]["steps"] == ["restart", "wait"] and not plan[1]["drain"]


def test_rerun_after_all_nodes_advertise_the_new_count_is_empty():
    nodes = [node("n1", allocatable=4), node("n2", allocatable=4)]
    assert not restart_plan(nodes, [pod("web-0", "n1")], SHARING)
    assert not capacity_findings(nodes, SHARING)


def test_wait_failure_names_the_node_and_what_it_advertises():
    assert wait_failure("n1", node("n1", allocatable=4), 4) is None
    message = wait_failure("n1", node("n1", allocatable=2), 4)
    assert message.startswith("n1:") and "nvidia.com/gpu=2" in message and "gives 4" in message


def test_capacity_findings_one_per_stale_node():
    findings = capacity_findings([node("n1", allocatable=2), node("n2", config=None, allocatable=4)], SHARING)
    assert [f["object"] for f in findings] == ["Node/n1", "Node/n2"]
    assert "(inference) gives 4" in findings[0]["message"]
    assert "(no time-slicing) gives 1" in findings[1]["message"]


def test_a_renaming_configuration_is_counted_under_gpu_shared():
    sharing = {"inference": {"replicas": 4, "rename_by_default": True}}
    n = node("n1", gpus=2)
    n["status"] = {"allocatable": {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "4"}}
    rows = stale_nodes([n], sharing)
    assert [(r["resource"], r["advertised"], r["expected"]) for r in rows] == [("nvidia.com/gpu.shared", 4, 8)]
    n["status"]["allocatable"]["nvidia.com/gpu.shared"] = "8"
    assert not stale_nodes([n], sharing)
    assert wait_failure("n1", n, 8, "nvidia.com/gpu.shared") is None


def test_pods_on_shared_gpus_hold_their_node():
    shared = pod("chat-0", "n1", gpu=0)
    shared["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu.shared": "1"}
    assert gpu_pods_by_node([shared]) == {"n1": ["serve/chat-0"]}


def test_a_node_that_advertises_mig_devices_by_profile_is_not_judged():
    """The mixed MIG strategy advertises nvidia.com/mig-<profile>: its count is the geometry's (a node of the rig's
    MIG pool, one card, seven 1g.10gb instances and no nvidia.com/gpu, was taken as stale before)."""
    mig = node("mig-0", gpus=1, config=None)
    mig["status"] = {"capacity": {"nvidia.com/mig-1g.10gb": "7"}, "allocatable": {"nvidia.com/mig-1g.10gb": "7"}}
    assert expected(mig, SHARING) is None
    assert stale_nodes([mig, node("a", allocatable=1)], SHARING) == [
        {"node": "a", "resource": "nvidia.com/gpu", "config": "inference", "advertised": 1, "expected": 4}]
