"""_guest_reader.read_guest and read_guest_design over a real K8sClient whose HTTP pool answers by path
(tests/lib/k8s_paths.StorePool): each object is read at the path the API server serves it, its fields taken
as the API writes them (camelCase JSON, no typed model in between), a missing object is None and a list that
cannot be read names what could not be read."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s import _guest_reader
from tests.lib.audit_live import DERIVED
from tests.lib.k8s_paths import store_client

QUOTA = {"metadata": {"name": "gpupool-gpu-inference", "namespace": "team-search",
                      "labels": {"app.kubernetes.io/managed-by": "gpupool.vcf"}},
         "spec": {"hard": {"requests.nvidia.com/gpu": "4"},
                  "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                                          "values": ["gpu-inference"]}]}}}
PLAIN_QUOTA = {"metadata": {"name": "gpupool-gpus", "namespace": "team-search"},
               "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
TIME_SLICING = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def items(*objs):
    return {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": list(objs)}


def guest_store():
    return {
        "/api/v1/nodes": items(
            {"metadata": {"name": "inference-0", "labels": {"gpupool.vcf/pool": "inference"}},
             "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                 {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]},
             "status": {"capacity": {"nvidia.com/gpu": "2", "cpu": "16"}, "allocatable": {"nvidia.com/gpu": "2"}}},
            {"metadata": {"name": "joining-0"}}),  # no labels, spec or status yet
        "/api/v1/namespaces": items(*[{"metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}}
                                      for n in ("default", "gpu-operator", "team-search", "kueue-system")]),
        "/api/v1/namespaces/team-search/resourcequotas": items(QUOTA, PLAIN_QUOTA),
        "/api/v1/namespaces/gpu-operator/secrets": items({"metadata": {"name": "licensing-config-0f3a"}}),
        "/apis/nvidia.com/v1/clusterpolicies/cluster-policy": {
            "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"}, "spec": {"mig": {"strategy": "mixed"}}},
        "/apis/nvidia.com/v1/clusterpolicies": items({"metadata": {"name": "cluster-policy"},
                                                      "spec": {"mig": {"strategy": "mixed"}}}),
        "/api/v1/namespaces/gpu-operator/configmaps/gpupool-time-slicing": {
            "metadata": {"name": "gpupool-time-slicing"}, "data": {"notebooks": TIME_SLICING, "broken": "a: ["}},
        "/apis/scheduling.k8s.io/v1/priorityclasses": items(
            {"metadata": {"name": "gpu-inference", "labels": {"app.kubernetes.io/managed-by": "gpupool.vcf"}},
             "value": 1000000, "preemptionPolicy": "Never", "description": "inference"},
            {"metadata": {"name": "system-node-critical"}, "value": 2000001000, "globalDefault": False}),
        "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/gpupool-training": {
            "metadata": {"name": "gpupool-training", "labels": {"team": "ml"}},
            "spec": {"nodeLabels": {"gpupool.vcf/pool": "training"}}},
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues": items({"metadata": {"name": "gpupool-training"},
                                                             "spec": {"cohortName": "gpupool"}}),
        "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config": {
            "data": {"controller_manager_config.yaml": "waitForPodsReady:\n  enable: true\n  timeout: 10m\n"}},
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpupool-notebook-culler": {
            "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "gpupool-notebook-culler"}},
    }


def test_the_guest_link_as_the_api_server_writes_it():
    k8s, pool = store_client(guest_store())
    out = _guest_reader.read_guest(k8s, DERIVED)
    assert out["nodes"] == [
        {"name": "inference-0", "labels": {"gpupool.vcf/pool": "inference"},
         "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/unschedulable", "value": None, "effect": "NoSchedule"}],
         "capacity": {"nvidia.com/gpu": "2", "cpu": "16"}, "allocatable": {"nvidia.com/gpu": "2"}},
        {"name": "joining-0", "labels": {}, "taints": [], "capacity": {}, "allocatable": {}}]
    assert out["namespaces"] == ["default", "gpu-operator", "team-search", "kueue-system"]
    assert out["namespace_labels"]["team-search"] == {"kubernetes.io/metadata.name": "team-search"}
    # only the tenants' namespaces that exist are listed for quotas
    assert out["resource_quotas"] == {"team-search": {"gpupool-gpu-inference": {"requests.nvidia.com/gpu": "4"},
                                                      "gpupool-gpus": {"requests.nvidia.com/gpu": "8"}}}
    assert out["resource_quota_scopes"] == {"team-search": {
        "gpupool-gpu-inference": QUOTA["spec"]["scopeSelector"], "gpupool-gpus": None}}
    assert out["secrets"] == {"gpu-operator": ["licensing-config-0f3a"]}
    assert out["cluster_policy"] == {"exists": True, "spec": {"mig": {"strategy": "mixed"}}}
    assert out["device_plugin_config"] == {"exists": True, "data": {
        "notebooks": {"version": "v1", "sharing": {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 4}]}}}, "broken": "a: ["}}
    assert out["dcgm_metrics_config"] == {"exists": False, "data": {}}
    assert out["priority_classes"] == {
        "gpu-inference": {"value": 1000000, "preemptionPolicy": "Never", "description": "inference",
                          "globalDefault": False},
        "system-node-critical": {"value": 2000001000, "preemptionPolicy": None, "description": None,
                                 "globalDefault": False}}
    assert out["kueue"] == {"served": True, "resource_flavors": {"gpupool-training": {
        "nodeLabels": {"gpupool.vcf/pool": "training"}}}, "cluster_queues": {}, "local_queues": {},
        "configuration": {"waitForPodsReady": {"enable": True, "timeout": "10m"}}}
    ours = {"app.kubernetes.io/managed-by": "gpupool.vcf"}
    assert out["object_labels"] == {
        "resource_quota team-search/gpupool-gpu-inference": ours, "resource_quota team-search/gpupool-gpus": {},
        "priority_class gpu-inference": ours, "priority_class system-node-critical": {},
        "resource_flavor gpupool-training": {"team": "ml"}}
    # the culler: no Kubeflow CRD, so the CronJob's objects; only the ClusterRole is there
    assert out["culling"]["exists"] is False
    assert [o["kind"] for o in out["culling"]["objects"]] == ["ClusterRole"]
    # one request per list or object, all reads; the tenants' namespaces that are not there are not asked for
    assert {r["method"] for r in pool.requests} == {"GET"}
    assert [r["path"] for r in pool.requests] == [
        "/api/v1/nodes", "/api/v1/namespaces", "/api/v1/namespaces/team-search/resourcequotas",
        "/api/v1/namespaces/gpu-operator/secrets", "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
        "/api/v1/namespaces/gpu-operator/configmaps/gpupool-time-slicing",
        "/api/v1/namespaces/gpu-operator/configmaps/gpupool-dcgm-metrics", "/apis/scheduling.k8s.io/v1/priorityclasses",
        "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/gpupool-training",
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/gpupool-training",
        "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/notebooks.kubeflow.org",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpupool-notebook-culler",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpupool-notebook-culler"]


def test_discovery_reads_lists_by_path():
    k8s, _pool = store_client(guest_store())
    out = _guest_reader.read_guest_design(k8s, DERIVED)
    assert out["priority_classes"]["gpu-inference"] == {
        "value": 1000000, "preemptionPolicy": "Never", "description": "inference"}
    assert out["resource_quotas"] == {"team-search": [
        {"name": "gpupool-gpu-inference", "hard": {"requests.nvidia.com/gpu": "4"}, "priority_class": "gpu-inference"},
        {"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": "8"}, "priority_class": None}]}
    assert out["cluster_policy"] == {"mig": {"strategy": "mixed"}}
    assert out["kueue"] == {"gpupool-training": {"cohortName": "gpupool"}}
    assert out["culling"] == {"exists": False}


def test_kueue_not_served_and_no_cluster_policy_are_told_apart_from_a_failure():
    store = guest_store()
    for path in [p for p in store if "kueue.x-k8s.io" in p or "clusterpolicies" in p]:
        del store[path]
    k8s, _pool = store_client(store)
    out = _guest_reader.read_guest_design(k8s, DERIVED)
    assert out["cluster_policy"] is None and out["kueue"] is None


def test_a_list_that_cannot_be_read_names_it():
    store = guest_store()
    del store["/api/v1/namespaces"]
    k8s, _pool = store_client(store)
    with pytest.raises(_guest_reader.LinkError) as raised:
        _guest_reader.read_guest(k8s, DERIVED)
    assert str(raised.value).startswith("could not read the namespaces: the API server at https://guest.example:6443 "
                                        "answered 404")
