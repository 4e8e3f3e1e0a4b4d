"""gpu_pool_discover with the Supervisor's kubeconfig: the node pools of a VKS cluster made on the rig by hand
(not through the collection) - replicas, a name of their own, a label and a taint the collection would not
write - come into the discovered design, which validates and derives those node pools back; the labels the
design derives and the node pool lacks are named (a converge adds them). With the guest cluster's kubeconfig a
tenant's GPU quota is read from its ResourceQuota."""
from kubernetes import client, dynamic

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.integration.test_gpu_pool_discover import CLASSES, FLEET as HAND_BUILT, NAMESPACES, Rest, build_by_hand
from tests.lib.ansible_run import run_module

FLEET = HAND_BUILT  # the vsphere fixture starts the simulator with the module's FLEET
CAPI = "cluster.x-k8s.io"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
OWN_TAINT = {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}


def make_cluster(api, namespace):
    """A VKS Cluster named as its namespace, one GPU node pool on class serve-a100 (v3.4's node variable)."""
    node = {"labels": {"team": "x"}, "taints": [GPU_TAINT, OWN_TAINT]}
    md = {"class": "node-pool", "name": "serving", "replicas": 2,
          "variables": {"overrides": [{"name": "vmClass", "value": "serve-a100"}, {"name": "node", "value": node}]}}
    topo = {"classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
            "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": [md]},
            "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]}
    clusters = dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")
    clusters.create(namespace=namespace, body={"apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster",
                                               "metadata": {"name": namespace}, "spec": {"topology": topo}})


def test_the_node_pools_come_from_the_supervisor(vsphere, vsphere_env, k8s_rig, k8s_api, k8s_namespace, tmp_path):
    build_by_hand(vsphere, platform=k8s_namespace)
    make_cluster(k8s_api, k8s_namespace)
    dest = tmp_path / "design.yml"
    res = run_module("gpupool.vcf.gpu_pool_discover", {
        "dest": str(dest), "name": "hand-built", "supervisor_kubeconfig": str(k8s_rig.kubeconfig)}, env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    pools = dict((p["vm_class"]["name"], p["node_pool"]) for p in res["design"]["pools"])
    assert pools["serve-a100"] == {"replicas": 2, "name": "serving", "vks_cluster": k8s_namespace,
                                   "labels": {"team": "x"}, "taints": [GPU_TAINT, OWN_TAINT]}
    assert pools["lab-l40s"]["replicas"] == 0  # no node pool uses that class: left with its comment
    lacking = [n for n in res["notes"] if "lacks the labels" in n]
    assert len(lacking) == 1 and "nvidia.com/vgpu.profile" in lacking[0]
    [cluster] = derive(res["design"])["vks"]["clusters"].values()
    [serving] = [np for np in cluster["node_pools"] if np["name"] == "serving"]
    assert serving["replicas"] == 2 and serving["labels"]["team"] == "x"
    assert [dict(t) for t in serving["taints"]] == [GPU_TAINT, OWN_TAINT]


def test_the_tenant_quota_comes_from_the_guest(vsphere, vsphere_env, k8s_rig, k8s_api, k8s_namespace, tmp_path):
    # a tenant namespace of its own on both sides (vSphere by REST, the guest by the Kubernetes client) with
    # a ResourceQuota over the GPUs of its one pool: with kubeconfig the design holds that count, not a guess
    rest = Rest(vsphere)
    try:
        if "serve-a100" not in [c.get("id") for c in rest.call("GET", CLASSES)]:
            rest.close()
            build_by_hand(vsphere)  # the module's simulator is shared: the first test may have built it
            rest = Rest(vsphere)
        moid = dict((c["cluster_name"], c["cluster"])
                    for c in rest.call("GET", "/api/vcenter/namespace-management/clusters"))["ai-a100"]
        policy = rest.call("GET", "/api/vcenter/storage/policies")[0]["policy"]
        rest.call("POST", NAMESPACES, {
            "cluster": moid, "namespace": k8s_namespace, "description": "quota team",
            "vm_service_spec": {"vm_classes": ["serve-a100"]}, "storage_specs": [{"policy": policy}],
            "resource_spec": {"cpu_limit": 1000},
            "access_list": [{"subject_type": "GROUP", "domain": "vsphere.local", "subject": "q", "role": "EDIT"}]})
    finally:
        rest.close()
    client.CoreV1Api(k8s_api).create_namespaced_resource_quota(k8s_namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "3"}}})
    res = run_module("gpupool.vcf.gpu_pool_discover", {
        "dest": str(tmp_path / "design.yml"), "name": "hand-built", "kubeconfig": str(k8s_rig.kubeconfig)},
        env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {}
    [tenant] = [t for t in res["design"]["tenants"] if t["name"] == k8s_namespace]
    assert tenant["gpu_quota"] == {"serve-a100": 3} and tenant["description"] == "quota team"
    [i] = [n for n, t in enumerate(res["design"]["tenants"]) if t["name"] == k8s_namespace]
    assert not [n for n in res["notes"] if n.startswith("tenants[%d].gpu_quota" % i)]
