# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pure._pool_ready: each step's check from what the API answered, the timeline and the report."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _pool_ready as pr


def node(name, ready=None, labels=None, allocatable=None, reason="KubeletNotReady", provider=None):
    obj = {"metadata": {"name": name, "labels": labels or {}}, "spec": {}, "status": {}}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                       {"type": "Ready", "status": "True" if ready else "False", "reason": reason,
                                        "message": "" if ready else "container runtime down"}]
    if allocatable is not None:
        obj["status"]["allocatable"] = allocatable
    if provider:
        obj["spec"]["providerID"] = provider
    return obj


def pod(name, node_name, phase="Running", ready=True, deleting=False, scheduled=None):
    obj = {"metadata": {"name": name}, "spec": {"nodeName": node_name} if node_name else {},
           "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    if scheduled is not None:
        obj["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": scheduled})
    return obj


def test_target_nodes_named_of_vms_or_of_the_pool():
    nodes = [node("a", labels={"pool": "inf"}), node("b", labels={"pool": "train"}), node("c", labels={"pool": "inf"})]
    assert pr.target_nodes(nodes, names=["x", "a"]) == ["x", "a"]
    assert pr.target_nodes(nodes, vms=[{"name": "vm-1"}, {"name": "vm-2"}], node_of_vm={"vm-1": "a", "vm-2": None}) == [
        "a", "vm-2"]  # vm-2's node is not registered yet: it is waited for under the VM's name
    assert pr.target_nodes(nodes, node_selector={"pool": "inf"}) == ["a", "c"]
    assert pr.target_nodes(nodes, node_selector={"pool": "none"}) == []


def test_ready_waits_for_registration_and_the_ready_condition():
    assert pr.ready_check([], ["a"]) == (False, "a not registered")
    assert pr.ready_check([node("a")], ["a"]) == (False, "a no Ready condition yet")
    assert pr.ready_check([node("a", ready=False)], ["a"]) == (
        False, "a Ready False (KubeletNotReady: container runtime down)")
    assert pr.ready_check([node("a", ready=True), node("b", ready=False)], ["a", "b"])[0] is False
    assert pr.ready_check([node("a", ready=True), node("b", ready=True)], ["a", "b"]) == (True, "2 nodes Ready: a, b")
    # a pool: at least min_nodes must be there
    assert pr.ready_check([node("a", ready=True)], ["a"], min_nodes=2) == (False, "1 of the 2 nodes wanted exist (a)")
    assert pr.ready_check([], [], min_nodes=1) == (False, "0 of the 1 nodes wanted exist (none)")


def test_validated_needs_a_ready_validator_pod_on_each_node():
    names = ["a", "b"]
    assert pr.validated_check([], names) == (False, "a: no validator pod; b: no validator pod")
    pods = [pod("v-a", "a"), pod("v-b", "b", phase="Pending", ready=False)]
    assert pr.validated_check(pods, names) == (False, "b: validator pod v-b Pending, not Ready")
    pods = [pod("v-a", "a"), pod("v-b-old", "b", deleting=True), pod("v-x", "x")]
    assert pr.validated_check(pods, names) == (False, "b: no validator pod")  # a terminating pod does not count
    pods = [pod("v-a", "a"), pod("v-b", "b")]
    assert pr.validated_check(pods, names) == (True, "validator pod Ready on a, b")
    # Running but not Ready (an init container passed, the main one not Ready): not validated
    assert pr.validated_check([pod("v-a", "a", ready=False)], ["a"])[0] is False


@pytest.mark.parametrize("text, value", [("2", 2), ("0", 0), (None, 0), ("1k", 1000), ("x", 0), ("500m", 0.5),
                                         ("1Ki", 1024)])
def test_quantity(text, value):
    assert pr.quantity(text) == value


def test_advertised_needs_the_pool_resource_allocatable():
    nodes = [node("a", allocatable={"nvidia.com/gpu": "2"}), node("b", allocatable={"cpu": "8"})]
    assert pr.advertised_check(nodes, ["a", "b"], "nvidia.com/gpu") == (False, "b: nvidia.com/gpu allocatable absent")
    nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    assert pr.advertised_check(nodes, ["b"], "nvidia.com/gpu") == (False, "b: nvidia.com/gpu allocatable 0")
    nodes[1]["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    assert pr.advertised_check(nodes, ["a", "b"], "nvidia.com/gpu") == (True, "nvidia.com/gpu allocatable: a 2, b 1")
    # a MIG pool advertises its profile resource, not nvidia.com/gpu
    assert pr.advertised_check(nodes, ["a"], "nvidia.com/mig-1g.10gb")[0] is False


def test_license_query_and_check():
    assert pr.license_query(["gpu-1.example", "gpu-2"]) == (
        'DCGM_FI_DEV_VGPU_LICENSE_STATUS{Hostname=~"gpu-1\\\\.example|gpu-2"}')
    series = [{"metric": {"Hostname": "a", "gpu": "0"}, "value": [1, "1"]},
              {"metric": {"Hostname": "a", "gpu": "1"}, "value": [1, "0"]},
              {"metric": {"Hostname": "b", "gpu": "0"}, "value": [1, "1"]}]
    assert pr.licensed_check(series, ["a", "b", "c"]) == (
        False, "a: 1 of 2 GPUs not licensed; c: no license series yet")
    series[1]["value"] = [2, "1"]
    assert pr.licensed_check(series, ["a", "b"]) == (True, "licensed: a (2 GPUs), b (1 GPUs)")
    assert pr.licensed_check([{"metric": {"Hostname": "a"}, "value": [1, "NaN"]}], ["a"])[0] is False


def test_probe_pod_has_the_pool_selector_tolerations_one_gpu_and_the_nodes():
    manifest = pr.probe_pod("p", "default", "nvidia.com/gpu", "busybox:1.36", {"pool": "inf"},
                            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule", "value": None}],
                            ["a", "b"])
    spec = manifest["spec"]
    assert spec["nodeSelector"] == {"pool": "inf"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}]}]
    assert manifest["metadata"]["labels"][pr.MANAGED_BY] == "gpupool.vcf"
    bare = pr.probe_pod("p", "ns", "nvidia.com/gpu", "img")["spec"]
    assert "nodeSelector" not in bare and "affinity" not in bare and "tolerations" not in bare


def test_probe_check():
    assert pr.probe_check(None) == (False, "probe pod not found")
    pending = pod("p", None, phase="Pending", ready=False, scheduled="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    assert pr.probe_check(pending) == (
        False, "probe pod p not scheduled (Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.)")
    assert pr.probe_check(pod("p", "a", phase="Pending", ready=False)) == (False, "probe pod p Pending on a")
    assert pr.probe_check(pod("p", "a")) == (True, "probe pod p Running on a")
    with pytest.raises(pr.PoolReadyError, match="probe pod p ended Failed on a"):
        pr.probe_check(pod("p", "a", phase="Failed", ready=False))


def test_completion_request_and_stream_chunks():
    body = json.loads(pr.completion_request("http://llm/v1/completions", "m", "hi"))
    assert body == {"stream": True, "max_tokens": 16, "model": "m", "prompt": "hi"}
    body = json.loads(pr.completion_request("http://llm/v1/chat/completions", None, "hi"))
    assert body == {"stream": True, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    assert pr.stream_chunk(b'data: {"choices": [{"text": "Hel"}]}\n') is True
    assert pr.stream_chunk(b"data: [DONE]\n") is False
    assert pr.stream_chunk(b": keep-alive\n") is False
    assert pr.stream_chunk(b"\n") is False
    assert pr.stream_chunk(b'data: {"choices": []}\n') is False
    assert pr.stream_chunk("data: not json") is False


def test_timeline_times_each_step_and_names_the_first_not_reached():
    line = pr.Timeline(start=100.0, wall=1700000000.0)
    line.reached("ready", 102.5, "1 nodes Ready: a")
    line.reached("validated", 106.0, "validator pod Ready on a")
    line.reached("advertised", 106.5, "nvidia.com/gpu allocatable: a 1")
    line.skipped("licensed", 106.5, "no prometheus_url")
    line.not_reached("probe_pod", 136.5, "probe pod p not scheduled")
    assert [(s["name"], s["state"], s["seconds"], s["at"]) for s in line.steps] == [
        ("ready", "reached", 2.5, 2.5), ("validated", "reached", 3.5, 6.0), ("advertised", "reached", 0.5, 6.5),
        ("licensed", "skipped", 0.0, 6.5), ("probe_pod", "not_reached", 30.0, 36.5),
        ("first_token", "not_started", None, None)]
    assert line.steps[0]["reached_at"] == 1700000002.5 and line.steps[4]["reached_at"] is None
    assert line.seconds() == {"ready": 2.5, "validated": 3.5, "advertised": 0.5}
    assert line.total() == 6.5
    assert line.failure("probe_pod", 30, "probe pod p not scheduled", "nodes a") == (
        "Unable to bring nodes a into service: step probe_pod not reached within 30 s (probe pod p not scheduled); "
        "reached: ready after 2.5 s, validated after 6.0 s, advertised after 6.5 s, licensed skipped")
    report = pr.markdown("nodes a", line.steps, line.total(), ["a"])
    assert "| probe_pod | not reached | 30.00 | 36.50 | probe pod p not scheduled |" in report
    assert report.rstrip().endswith("Not in service: probe_pod.")


def test_markdown_of_a_run_in_service():
    line = pr.Timeline(start=0.0, wall=0.0)
    for i, name in enumerate(pr.STEPS):
        line.reached(name, float(i + 1), "ok | done")
    report = pr.markdown("the pool pool=inf", line.steps, line.total(), ["a", "b"])
    assert report.startswith("# Pool ready: the pool pool=inf\n\nNodes: a, b\n")
    assert "| first_token | reached | 1.00 | 6.00 | ok \\| done |" in report
    assert report.rstrip().endswith("In service after 6.00 s.")
