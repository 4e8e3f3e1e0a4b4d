"""The vks_gpu_node_pools role once per VKS cluster in one play, as site.yml runs it: each cluster gets
its own pools and never those of the cluster before it."""
from __future__ import annotations

from kubernetes import dynamic

from tests.lib.ansible_run import run_playbook

CAPI = "cluster.x-k8s.io"
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
CLUSTERS = {
    "vks-inference": [{"name": "inference", "replicas": 2, "vm_class": "vmclass-h100-3-40c",
                       "labels": {"gpupool.vcf/workload": "inference"}}],
    "vks-training": [{"name": "training", "replicas": 1, "vm_class": "vmclass-h100-80c",
                      "labels": {"gpupool.vcf/workload": "training"}},
                     {"name": "system", "replicas": 1, "gpu": False}],
}


def _clusters(api):
    return dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")


def _create(api, ns, name):
    cpu = {"class": "node-pool", "name": "cpu", "replicas": 1,
           "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}}
    _clusters(api).create(namespace=ns, body={
        "apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"topology": {"version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
                              "classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
                              "workers": {"machineDeployments": [cpu]},
                              "variables": [{"name": "vmClass", "value": "best-effort-large"},
                                            {"name": "storageClass", "value": "gold"}]}}})


def _pools(api, ns, name):
    obj = _clusters(api).get(namespace=ns, name=name).to_dict()
    return {m["name"]: m for m in obj["spec"]["topology"]["workers"]["machineDeployments"]}


def _overrides(pool):
    return {o["name"]: o["value"] for o in (pool.get("variables") or {}).get("overrides") or []}


def _play(kubeconfig, ns, purge):
    return [{
        "name": "Node pools of two VKS clusters",
        "hosts": "localhost",
        "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.k8s": {"kubeconfig": str(kubeconfig)}},
        "tasks": [{
            "name": "Node pools of each VKS cluster",
            "ansible.builtin.include_role": {"name": "gpupool.vcf.vks_gpu_node_pools"},
            "vars": {"vks_gpu_node_pools_cluster_name": "{{ item.name }}",
                     "vks_gpu_node_pools_namespace": ns,
                     "vks_gpu_node_pools_node_pools": "{{ item.pools }}",
                     "vks_gpu_node_pools_purge": purge},
            "loop": [{"name": name, "pools": pools} for name, pools in CLUSTERS.items()],
            "loop_control": {"label": "{{ item.name }}"},
        }],
    }]


def _results(res, ns):
    return dict((name, res.result("gpupool.vcf.vks_gpu_node_pools : Node pools of VKS cluster %s/%s" % (ns, name)))
                for name in CLUSTERS)


def test_each_cluster_gets_only_its_own_pools(k8s_rig, k8s_api, k8s_namespace):
    for name in CLUSTERS:
        _create(k8s_api, k8s_namespace, name)

    res = run_playbook(_play(k8s_rig.kubeconfig, k8s_namespace, purge=True), check=True, diff=True)
    assert res.rc == 0, res.stdout[-3000:]
    predicted = _results(res, k8s_namespace)
    for name in CLUSTERS:
        assert predicted[name]["changed"] is True
        assert set(_pools(k8s_api, k8s_namespace, name)) == {"cpu"}  # check mode stored nothing

    res = run_playbook(_play(k8s_rig.kubeconfig, k8s_namespace, purge=True), diff=True)
    assert res.rc == 0, res.stdout[-3000:]
    done = _results(res, k8s_namespace)
    for name in CLUSTERS:
        assert done[name]["machine_deployments"] == predicted[name]["machine_deployments"]

    inference = _pools(k8s_api, k8s_namespace, "vks-inference")
    training = _pools(k8s_api, k8s_namespace, "vks-training")
    # the second cluster does not inherit the first one's pool, and purge of the first one's pools never
    # reaches the second (each Cluster records only what was created in it)
    assert set(inference) == {"cpu", "inference"}
    assert set(training) == {"cpu", "training", "system"}
    assert _overrides(inference["inference"])["vmClass"] == "vmclass-h100-3-40c"
    assert _overrides(inference["inference"])["node"] == {"labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}
    assert _overrides(training["training"])["node"] == {"labels": {"gpupool.vcf/workload": "training"}, "taints": [TAINT]}
    assert "node" not in _overrides(training["system"])  # not a GPU pool: no GPU taint

    res = run_playbook(_play(k8s_rig.kubeconfig, k8s_namespace, purge=True))
    assert res.rc == 0, res.stdout[-3000:]
    assert [name for name, r in _results(res, k8s_namespace).items() if r["changed"]] == []
