"""The gpu_scheduling_policy role's node labels and taints (nodes.yml: one guest_objects task for every pool) against
the rig, on nodes of this file's own (kwok marks them Ready; the rig's fleet is left alone): check mode predicts the
converge change by change and writes nothing, the converge adds the pools' labels and taints and corrects a taint's
value, keeps the taints of others, a rerun changes nothing, a pool without nodes writes nothing, and drift made
behind the collection's back is planned and repaired the same way."""
from __future__ import annotations

import uuid

import pytest
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_playbook

U = uuid.uuid4().hex[:5]
POOL = f"nl-{U}"
EMPTY = f"nl-empty-{U}"
NODES = [f"nl-{U}-0", f"nl-{U}-1"]
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
OTHERS = {"key": "example.com/dedicated", "value": "ml", "effect": "NoExecute"}
TASK = "gpupool.vcf.gpu_scheduling_policy : Labels and taints on the nodes of every pool"
POOLS = [{"pool": POOL, "labels": {"gpupool.vcf/workload": "inference", "nvidia.com/vgpu.profile": "nvidia_h100-80c"},
          "taints": [GPU, {"key": "gpupool.vcf/pool", "value": POOL, "effect": "NoSchedule"}]},
         {"pool": EMPTY, "labels": {"gpupool.vcf/workload": "training"}}]


def play(pools=None):
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "node labels and taints", "ansible.builtin.import_role": {
            "name": "gpupool.vcf.gpu_scheduling_policy", "tasks_from": "nodes"},
         "vars": {"gpu_scheduling_policy_node_pools": POOLS if pools is None else pools}}]}]


def _node(name, taints):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"gpupool.vcf/pool": POOL, "kubernetes.io/hostname": name,
                                                  "team": "ml-platform"},
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": taints},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1"}}}


def _settled(core, name):
    """Ready, and without the node.kubernetes.io taints admission and the lifecycle controller add and remove."""
    node = core.read_node(name)
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    return ready and not [t for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/")]


def _state(core, name):
    node = core.read_node(name)
    return (dict(node.metadata.labels or {}),
            [dict(key=t.key, value=t.value, effect=t.effect) for t in node.spec.taints or []])


def _failed(run):
    return [(name, res.get("msg")) for name, res in run.tasks if res.get("failed")]


@pytest.fixture(scope="module")
def nodes(k8s_rig, k8s_api):
    core = client.CoreV1Api(k8s_api)
    core.create_node(_node(NODES[0], [OTHERS]))
    core.create_node(_node(NODES[1], [{"key": "nvidia.com/gpu", "value": "absent", "effect": "NoSchedule"}]))
    try:
        wait_for("the test's nodes Ready, without node.kubernetes.io taints",
                 lambda: all(_settled(core, n) for n in NODES), timeout=60)
        yield core
    finally:
        for name in NODES:
            try:
                core.delete_node(name)
            except ApiException:
                pass


def test_check_predicts_the_converge_which_adds_and_corrects_and_a_rerun_changes_nothing(nodes, k8s_rig):
    before = {n: _state(nodes, n) for n in NODES}
    check = run_playbook(play(), env=k8s_rig.env, check=True, diff=True)
    assert check.rc == 0, (_failed(check), check.stdout[-2000:], check.stderr[-2000:])
    predicted = dict(check.tasks)[TASK]
    assert predicted["changed"] and {n: _state(nodes, n) for n in NODES} == before  # check mode writes nothing
    assert sorted((c["object"], c["field"]) for c in predicted["changes"]) == sorted(
        [("node %s" % n, "metadata.labels.%s" % k) for n in NODES for k in POOLS[0]["labels"]]
        + [("node %s" % n, "spec.taints.%s:NoSchedule" % t) for n in NODES for t in ("nvidia.com/gpu", "gpupool.vcf/pool")])
    corrected = [c for c in predicted["changes"] if c["object"] == "node %s" % NODES[1] and c["before"]]
    assert [(c["field"], c["before"]["value"], c["after"]["value"]) for c in corrected] == [
        ("spec.taints.nvidia.com/gpu:NoSchedule", "absent", "present")]
    assert predicted["diff"]["after"]["node %s" % NODES[0]]["taints"][0] == OTHERS

    converge = run_playbook(play(), env=k8s_rig.env, diff=True)
    assert converge.rc == 0, (_failed(converge), converge.stdout[-2000:], converge.stderr[-2000:])
    assert dict(converge.tasks)[TASK]["changes"] == predicted["changes"]
    for name in NODES:
        labels, taints = _state(nodes, name)
        assert labels["team"] == "ml-platform" and labels["gpupool.vcf/workload"] == "inference", labels
        assert labels["nvidia.com/vgpu.profile"] == "nvidia_h100-80c"
        mine = [t for t in taints if not t["key"].startswith("node.kubernetes.io/")]
        assert [t for t in mine if t["key"] != OTHERS["key"]] == [
            GPU, {"key": "gpupool.vcf/pool", "value": POOL, "effect": "NoSchedule"}], taints
    assert OTHERS in _state(nodes, NODES[0])[1]  # another's taint, kept

    again = run_playbook(play(), env=k8s_rig.env)
    assert again.rc == 0 and not dict(again.tasks)[TASK]["changed"], dict(again.tasks)[TASK]
    assert dict(again.tasks)[TASK]["changes"] == []


def test_drift_behind_the_collections_back_is_planned_and_repaired(nodes, k8s_rig):
    run = run_playbook(play(), env=k8s_rig.env)
    assert run.rc == 0, _failed(run)
    node = nodes.read_node(NODES[0])
    node.metadata.labels["gpupool.vcf/workload"] = "notebook"
    node.spec.taints = [t for t in node.spec.taints if t.key != "gpupool.vcf/pool"]
    nodes.replace_node(NODES[0], node)
    check = run_playbook(play(), env=k8s_rig.env, check=True)
    assert sorted((c["object"], c["field"], c["before"]) for c in dict(check.tasks)[TASK]["changes"]) == [
        ("node %s" % NODES[0], "metadata.labels.gpupool.vcf/workload", "notebook"),
        ("node %s" % NODES[0], "spec.taints.gpupool.vcf/pool:NoSchedule", None)]
    run = run_playbook(play(), env=k8s_rig.env)
    assert dict(run.tasks)[TASK]["changes"] == dict(check.tasks)[TASK]["changes"]
    labels, taints = _state(nodes, NODES[0])
    assert labels["gpupool.vcf/workload"] == "inference" and OTHERS in taints
    assert {"key": "gpupool.vcf/pool", "value": POOL, "effect": "NoSchedule"} in taints


def test_only_a_pool_without_nodes_writes_nothing_and_bad_pools_change_nothing(nodes, k8s_rig):
    run = run_playbook(play([POOLS[1]]), env=k8s_rig.env)
    assert run.rc == 0 and dict(run.tasks)[TASK]["changes"] == [] and not dict(run.tasks)[TASK]["changed"]
    before = {n: _state(nodes, n) for n in NODES}
    bad = [dict(POOLS[0], labels={"gpupool.vcf/workload": "notebook", "bad key": "x"})]
    run = run_playbook(play(bad), env=k8s_rig.env)
    res = dict(run.tasks)[TASK]
    assert run.rc != 0 and res.get("failed") and "'bad key'" in res["msg"], res
    assert {n: _state(nodes, n) for n in NODES} == before
