"""A pool's vGPU profile changes: a revisioned VM class, the namespace gets it, the node pool rolls
to it (the rollout double replaces the kwok nodes), the old class leaves the namespace and is
deleted once no node uses it. vcsim (tests/sim/vsphere) for the classes and namespaces, the rig
for the Cluster and the nodes; the roles in the order site.yml runs them."""
from __future__ import annotations

import sys

import pytest
from k8s_fixtures import wait_for
from kubernetes import client, dynamic

from tests.integration import test_supervisor_namespace
from tests.integration.test_supervisor_namespace import raw
from tests.lib.helpers import rest
from tests.lib.ansible_run import ROOT, run_playbook

sys.path.insert(0, str(ROOT / "tests" / "sim" / "k8s"))
import rollout_double  # noqa: E402

FLEET = test_supervisor_namespace.FLEET
CAPI = "cluster.x-k8s.io/v1beta2"
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
BASE = "gpu-roll"
POOL = "roll-inf"
LABELS = {"gpupool.vcf/pool": POOL}
ADOPT = rollout_double.ADOPT


def vm_class(profile):
    return {"name": BASE, "cpu_count": 8, "memory_mb": 65536, "vgpu_profiles": [profile],
            "description": "gpupool %s: inference, 1 x %s" % (POOL, profile)}


def play(ns, kubeconfig, profile, timeout):
    """site.yml's order: classes and namespaces, node pools (waiting for the rollout), retirement."""
    tenancy = {"supervisor_gpu_tenancy_cluster": "gpu-h100", "supervisor_gpu_tenancy_class_revisions": True,
               "supervisor_gpu_tenancy_vm_classes": [vm_class(profile)],
               "supervisor_gpu_tenancy_namespaces": [{"name": "roll-team", "vm_classes": [BASE],
                                                      "purge_gpu_vm_classes": True}]}
    return [{
        "name": "profile change", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.vsphere": {}, "group/gpupool.vcf.k8s": {"kubeconfig": str(kubeconfig)}},
        "tasks": [
            {"name": "vSphere link", "ansible.builtin.include_role": {"name": "gpupool.vcf.supervisor_gpu_tenancy"},
             "vars": tenancy},
            {"name": "VKS link", "ansible.builtin.include_role": {"name": "gpupool.vcf.vks_gpu_node_pools"},
             "vars": {"vks_gpu_node_pools_cluster_name": "roll", "vks_gpu_node_pools_namespace": ns,
                      "vks_gpu_node_pools_vm_class_names": "{{ supervisor_gpu_tenancy_class_names }}",
                      "vks_gpu_node_pools_wait_rollout": True, "vks_gpu_node_pools_rollout_timeout": timeout,
                      "vks_gpu_node_pools_node_pools": [
                          {"name": POOL, "replicas": 2, "vm_class": BASE, "labels": LABELS}]}},
            {"name": "Retire superseded classes", "ansible.builtin.include_role":
                {"name": "gpupool.vcf.supervisor_gpu_tenancy"},
             "vars": dict(tenancy, supervisor_gpu_tenancy_classes_in_use="{{ vks_gpu_node_pools_result.classes_in_use }}")},
        ]}]


def classes(sim):
    c = rest(sim)
    try:
        return {x["id"]: x for x in c.get(CLASSES)}
    finally:
        c.close()


def pool_nodes(api):
    out = {}
    for n in client.CoreV1Api(api).list_node(label_selector="gpupool.vcf/pool=%s" % POOL).items:
        out[n.metadata.name] = n.metadata.labels.get("node.kubernetes.io/instance-type")
    return out


def md_class(api, ns):
    obj = dynamic.DynamicClient(api).resources.get(api_version=CAPI, kind="Cluster").get(namespace=ns, name="roll")
    md = [m for m in obj.to_dict()["spec"]["topology"]["workers"]["machineDeployments"] if m["name"] == POOL][0]
    return {o["name"]: o["value"] for o in md["variables"]["overrides"]}["vmClass"]


@pytest.fixture
def cluster(k8s_api, k8s_namespace):
    """A Cluster with a CPU pool, and the two kwok nodes Cluster API made for the GPU pool (on BASE)."""
    dynamic.DynamicClient(k8s_api).resources.get(api_version=CAPI, kind="Cluster").create(namespace=k8s_namespace, body={
        "apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "roll"},
        "spec": {"topology": {
            "classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
            "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": []},
            "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]}}})
    core = client.CoreV1Api(k8s_api)
    for i in range(2):
        name = "%s-seed-%d" % (POOL, i)
        core.create_node({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": dict(LABELS, **{
                              "node.kubernetes.io/instance-type": BASE, "kubernetes.io/hostname": name, "type": "kwok"}),
                              "annotations": {"kwok.x-k8s.io/node": "fake", ADOPT: "%s/roll/%s" % (k8s_namespace, POOL)}},
                          "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                          "status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"},
                                     "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110",
                                                     "nvidia.com/gpu": "1"}}})
    wait_for("seed nodes Ready", lambda: len(client.CoreV1Api(k8s_api).list_node(
        label_selector="gpupool.vcf/pool=%s" % POOL).items) == 2, timeout=30)
    try:
        yield k8s_namespace
    finally:
        for name in pool_nodes(k8s_api):
            core.delete_node(name)


def test_profile_change_rolls_the_pool_to_a_revisioned_class(vsphere, vsphere_env, k8s_rig, k8s_api, cluster, tmp_path):
    ns = cluster
    env = dict(vsphere_env, **k8s_rig.env)
    kube = k8s_rig.kubeconfig
    # the pool as it is: class BASE (1g.10gb), nodes on it; converging changes nothing on the nodes
    r = run_playbook(play(ns, kube, "nvidia_h100-1-10c", 30), env=env)
    assert r.rc == 0, r.stdout[-3000:]
    assert set(classes(vsphere)) >= {BASE} and md_class(k8s_api, ns) == BASE
    assert raw(vsphere, "roll-team")["vm_service_spec"]["vm_classes"] == [BASE]

    # a workload on an old node: the rollout drains it (eviction), it does not vanish with the node unasked
    client.CoreV1Api(k8s_api).create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer-0"},
        "spec": {"nodeName": "%s-seed-0" % POOL, "containers": [{"name": "c", "image": "infer"}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}})
    with rollout_double.running(kube, tmp_path / "double.log", namespace=ns, step=2.5):
        # check mode: the ordered steps, nothing changed
        r = run_playbook(play(ns, kube, "nvidia_h100-2-20c", 30), env=env, check=True)
        assert r.rc == 0, r.stdout[-3000:]
        steps = r.result("gpupool.vcf.supervisor_gpu_tenancy : Profile changes, in the order they are made")["msg"]
        (new, ordered), = steps.items()
        assert new.startswith(BASE + "-r") and len(new) == len(BASE) + 7
        assert [s.split(" ")[0] for s in ordered] == ["create", "add", "move", "wait", "remove", "delete"]
        assert new not in classes(vsphere) and md_class(k8s_api, ns) == BASE
        assert set(pool_nodes(k8s_api).values()) == {BASE}

        # converge with a bound the rollout cannot meet (each step of the double is 2.5 s apart)
        r = run_playbook(play(ns, kube, "nvidia_h100-2-20c", 3), env=env)
        assert r.rc != 0
        failed = r.result("gpupool.vcf.vks_gpu_node_pools : Node pools of VKS cluster %s/roll" % ns)
        assert "did not finish in 3 s" in failed["msg"] and "node pool %s" % POOL in failed["msg"], failed["msg"]
        assert "A rerun waits again" in failed["msg"]
        # the stated state: the new class made and offered, the pool moved, the old class kept and offered
        live = classes(vsphere)
        assert {BASE, new} <= set(live) and md_class(k8s_api, ns) == new
        assert sorted(raw(vsphere, "roll-team")["vm_service_spec"]["vm_classes"]) == sorted([new, BASE])

        # a plain rerun (with a bound it can meet) finishes: the pool on the new class, the old one retired
        r = run_playbook(play(ns, kube, "nvidia_h100-2-20c", 60), env=env)
        assert r.rc == 0, r.stdout[-3000:]
    rolled = r.result("gpupool.vcf.vks_gpu_node_pools : Node pools of VKS cluster %s/roll" % ns)
    assert rolled["rollout"][0]["done"] and BASE not in rolled["classes_in_use"]
    nodes = pool_nodes(k8s_api)
    assert len(nodes) == 2 and set(nodes.values()) == {new} and not any("seed" in n for n in nodes)
    # every pod of the old nodes was evicted: none is left that is not already being deleted (a pod may still be
    # in its 30 s grace period when the run ends, on a loaded machine)
    left = [p.metadata.name for p in client.CoreV1Api(k8s_api).list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp]
    assert not left, left
    log = (tmp_path / "double.log").read_text()
    assert log.count("created node") == 2 and "drained and deleted node %s-seed-0" % POOL in log, log
    live = classes(vsphere)
    assert new in live and BASE not in live
    assert live[new]["description"].endswith("nvidia_h100-2-20c")
    assert raw(vsphere, "roll-team")["vm_service_spec"]["vm_classes"] == [new]

    # a rerun changes nothing
    r = run_playbook(play(ns, kube, "nvidia_h100-2-20c", 60), env=env)
    assert r.rc == 0 and r.stats.get("changed") == 0, r.stdout[-3000:]
