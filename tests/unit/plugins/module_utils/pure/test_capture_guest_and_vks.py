"""What a capture keeps of the guest objects and of a VKS Cluster (pure/_capture). Guest objects: the tenant
namespaces with their labels, the PriorityClasses but the system ones, the quotas and LocalQueues of the tenant
namespaces, the Kueue objects; the API server's metadata and the status left out, the kind and version said, in the
order they can be made again. A Cluster: its ClusterClass, release, control plane replicas and variables."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capture as cap

MINE = {"app.kubernetes.io/managed-by": "gpupool.vcf"}
SERVER = {"uid": "0a1b", "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 3,
          "managedFields": [{"manager": "x"}]}


def obj(name, namespace=None, **fields):
    meta = dict(SERVER, name=name, labels=dict(MINE))
    if namespace:
        meta["namespace"] = namespace
    return dict(fields, metadata=meta, status={"phase": "Active"})


LIVE = {
    ("Namespace", "", "team-a"): obj("team-a", spec={"finalizers": ["kubernetes"]}),
    ("Namespace", "", "kube-system"): obj("kube-system"),
    ("PriorityClass", "", "gpu-training"): obj("gpu-training", value=50000),
    ("PriorityClass", "", "system-node-critical"): obj("system-node-critical", value=2000001000),
    ("ResourceQuota", "team-a", "gpupool-gpus"): obj("gpupool-gpus", "team-a",
                                                     spec={"hard": {"requests.nvidia.com/gpu": "4"}}),
    ("ResourceQuota", "kube-system", "pods"): obj("pods", "kube-system", spec={"hard": {"pods": "10"}}),
    ("ClusterQueue", "", "gpupool-training"): obj("gpupool-training", spec={"cohortName": "gpupool"},
                                                  apiVersion="kueue.x-k8s.io/v1beta2"),
    ("LocalQueue", "team-a", "training"): obj("training", "team-a", spec={"clusterQueue": "gpupool-training"}),
    ("LocalQueue", "elsewhere", "training"): obj("training", "elsewhere", spec={"clusterQueue": "gpupool-training"}),
    ("ResourceFlavor", "", "gpupool-training"): obj("gpupool-training", spec={}),
}


def test_what_is_kept_and_in_which_order():
    versions = {"ResourceFlavor": "kueue.x-k8s.io/v1beta2", "LocalQueue": "kueue.x-k8s.io/v1beta2"}
    out = cap.guest_objects(LIVE, ["team-a"], versions)
    assert [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in out] == [
        ("Namespace", None, "team-a"), ("PriorityClass", None, "gpu-training"),
        ("ResourceQuota", "team-a", "gpupool-gpus"), ("ResourceFlavor", None, "gpupool-training"),
        ("ClusterQueue", None, "gpupool-training"), ("LocalQueue", "team-a", "training")]
    assert [o["apiVersion"] for o in out] == ["v1", "scheduling.k8s.io/v1", "v1"] + ["kueue.x-k8s.io/v1beta2"] * 3
    for o in out:
        assert "status" not in o and not set(SERVER) & set(o["metadata"])
        assert o["metadata"]["labels"] == MINE  # the ownership mark travels
    assert out[0]["spec"] == {"finalizers": ["kubernetes"]} and out[1]["value"] == 50000


def test_the_live_answer_is_left_as_it_was():
    before = repr(LIVE)
    cap.guest_objects(LIVE, ["team-a"])
    assert repr(LIVE) == before


def test_topology_of_a_cluster():
    cluster = {"metadata": dict(SERVER, name="gpu-workloads"), "spec": {"topology": {
        "classRef": {"name": "builtin-generic-v3.4.0"}, "version": "v1.35.5+vmware.1-vkr.1",
        "controlPlane": {"replicas": 3}, "workers": {"machineDeployments": [{"name": "inference"}]},
        "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "node", "value": {"labels": {}}}]}}}
    ref = {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"}
    assert cap.topology_of("v1beta2", cluster, ref) == {
        "api_version": "v1beta2", "cluster_class": "vmware-system-vks-public/builtin-generic-v3.4.0",
        "version": "v1.35.5+vmware.1-vkr.1", "control_plane_replicas": 3,
        "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "node", "value": {"labels": {}}}]}
    assert cap.topology_of(None, None, None) is None and cap.topology_of("v1beta2", cluster, None) is None
