"""_k8s_objects: the objects the guest roles write, whole, as the roles' filters hand them over."""
import json

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs

MANAGED = {"app.kubernetes.io/managed-by": "gpupool.vcf"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize("value,want", [
    (True, True), (False, False), ("yes", True), ("On", True), ("true", True), ("1", True), (1, True),
    ("no", False), ("false", False), ("0", False), (0, False), (None, False), ("", False), (2, False), (1.0, True)])
def test_flag_reads_a_boolean_as_the_bool_filter(value, want):
    assert objs.flag(value) is want


def test_node_pools_gpu_flag_as_the_role_reads_it():
    inputs = objs.role_inputs("vks_gpu_node_pools", {"vks_gpu_node_pools_node_pools": [
        {"name": "a", "gpu": "no"}, {"name": "b", "gpu": "yes", "taints": []},
        {"name": "c", "gpu": None, "taints": None}]})
    assert objs.node_pools(inputs) == [{"name": "a"}, {"name": "b", "taints": [GPU_TAINT]},
                                       {"name": "c", "taints": None}]


def test_nested():
    assert objs.nested([(("a", "b"), 1), (("a", "c", "d"), "x"), (("e",), [])]) == {
        "a": {"b": 1, "c": {"d": "x"}}, "e": []}


# the role's default upgrade policy (one node at a time, drained, PDBs honoured) as the CRD names it
UPGRADE = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1,
           "podDeletion": {"force": False, "timeoutSeconds": 300},
           "drain": {"enable": True, "force": False, "timeoutSeconds": 300}}


def op(**given):
    # the DCGM exporter fields are held by test_cluster_policy_objects
    return objs.role_inputs("gpu_operator", dict({"gpu_operator_dcgm_metrics": [], "gpu_operator_dcgm_pod_labels": False},
                                                 **given))


def test_cluster_policy_spec_defaults():
    assert objs.cluster_policy_spec(op()) == {
        "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver",
                   "licensingConfig": {"nlsEnabled": True, "secretName": ""}, "upgradePolicy": UPGRADE},
        "mig": {"strategy": "single"}}


def test_cluster_policy_spec_holds_the_audited_fields():
    given = op(gpu_operator_driver_version="550.90.05", gpu_operator_driver_enabled="no",
               gpu_operator_licensing_secret_name="licensing-config-abc", gpu_operator_mig_strategy="mixed",
               gpu_operator_time_slicing={"ts": {"replicas": 4}})
    assert objs.cluster_policy_spec(given) == {
        "driver": {"enabled": False, "repository": "nvcr.io/nvidia", "image": "driver", "version": "550.90.05",
                   "licensingConfig": {"nlsEnabled": True, "secretName": "licensing-config-abc"},
                   "upgradePolicy": UPGRADE},
        "mig": {"strategy": "mixed"},
        "devicePlugin": {"config": {"name": "gpupool-device-plugin-config", "default": "default"}}}
    # the audit's fields (no Secret: it is judged apart) are in the spec the role writes
    spec = objs.cluster_policy_spec(given)
    for path, value in objs.cluster_policy_fields(given):
        node = spec
        for key in path:
            node = node[key]
        assert node == value, path
    assert (("driver", "licensingConfig", "secretName"), "s") in objs.cluster_policy_fields(given, "s")
    assert not [p for p, _v in objs.cluster_policy_fields(given) if p[-1] == "secretName"]


def test_cluster_policy_spec_extra_values_win_for_its_fields_only():
    extra = {"driver": {"repository": "registry.example.com/nvidia", "imagePullSecrets": ["pull"],
                        "licensingConfig": {"configMapName": "gridd"}},
             "mig": {"strategy": "mixed", "other": 1},
             "devicePlugin": {"config": {"name": "theirs", "create": True}},
             "node-feature-discovery": {"enabled": False}}
    assert objs.cluster_policy_spec(op(gpu_operator_extra_values=extra, gpu_operator_licensing_secret_name="s",
                                       gpu_operator_time_slicing={"ts": {"replicas": 2}})) == {
        "driver": {"enabled": True, "repository": "registry.example.com/nvidia", "image": "driver",
                   "imagePullSecrets": ["pull"],
                   "licensingConfig": {"nlsEnabled": True, "secretName": "s", "configMapName": "gridd"},
                   "upgradePolicy": UPGRADE},
        "mig": {"strategy": "mixed", "other": 1},
        "devicePlugin": {"config": {"name": "theirs", "default": "default"}}}
    # no time-slicing: no devicePlugin field, whatever the extra values say
    assert "devicePlugin" not in objs.cluster_policy_spec(op(gpu_operator_extra_values=extra))
    assert extra["driver"]["licensingConfig"] == {"configMapName": "gridd"}  # not changed in place


def test_device_plugin_config_map():
    given = op(gpu_operator_mig_strategy="mixed", gpu_operator_time_slicing={
        "shared-4": {"replicas": "4"},
        "mig": {"replicas": 2, "resources": ["nvidia.com/mig-1g.10gb"], "rename_by_default": "yes",
                "fail_requests_greater_than_one": True},
        "none": {"replicas": 3, "resources": []}})
    cm = objs.device_plugin_config_map(given, lambda c: json.dumps(c, sort_keys=True))
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {"name": "gpupool-device-plugin-config", "namespace": "gpu-operator", "labels": MANAGED}
    assert list(cm["data"]) == ["default", "shared-4", "mig", "none"]
    assert json.loads(cm["data"]["default"]) == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    assert json.loads(cm["data"]["shared-4"])["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": False,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
    assert json.loads(cm["data"]["mig"])["sharing"]["timeSlicing"] == {
        "renameByDefault": True, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}
    assert json.loads(cm["data"]["none"])["sharing"]["timeSlicing"]["resources"] == []
    assert objs.device_plugin_config_map(op(), json.dumps) is None


@pytest.mark.parametrize("tenant,created,labels", [
    ({"namespace": "t1"}, False, {"gpupool.vcf/tenant": "true", "gpupool.vcf/training": "false"}),
    ({"namespace": "t2", "training": "yes", "labels": {"team": "a", "n": 1}}, True,
     {"team": "a", "n": "1", "gpupool.vcf/tenant": "true", "gpupool.vcf/training": "true",
      "app.kubernetes.io/managed-by": "gpupool.vcf"}),
    ({"namespace": "t3", "training": False, "labels": {"gpupool.vcf/training": "true"}}, False,
     {"gpupool.vcf/training": "false", "gpupool.vcf/tenant": "true"}),
])
def test_tenant_namespace(tenant, created, labels):
    ns = objs.tenant_namespace(tenant, created)
    assert ns == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant["namespace"], "labels": labels}}
    assert list(ns["metadata"]["labels"]) == list(labels)


def policy(**given):
    return objs.role_inputs("gpu_scheduling_policy", given)


def test_kueue_manifests():
    m = objs.kueue_manifests(policy(
        gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 8, "memory": "768Gi"},
        gpu_scheduling_policy_training_node_labels={"gpupool.vcf/pool": "training"},
        gpu_scheduling_policy_tenants=[{"namespace": "a", "training": True}, {"namespace": "b"},
                                       {"namespace": "c", "training": False}, {"namespace": "d", "training": 1}]))
    assert m["resource_flavors"] == [{
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "gpu-training", "labels": MANAGED},
        "spec": {"nodeLabels": {"gpupool.vcf/pool": "training"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}]
    assert m["cluster_queues"] == [{
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "gpu-training", "labels": MANAGED},
        "spec": {"namespaceSelector": {"matchLabels": {"gpupool.vcf/training": "true"}},
                 "queueingStrategy": "StrictFIFO", "stopPolicy": "None",
                 "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                                "borrowWithinCohort": {"policy": "Never"}},
                 "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                 "resourceGroups": [{"coveredResources": ["nvidia.com/gpu", "memory"], "flavors": [{
                     "name": "gpu-training", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"},
                                                           {"name": "memory", "nominalQuota": "768Gi"}]}]}]}}]
    assert m["local_queues"] == [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "training", "namespace": ns, "labels": MANAGED},
         "spec": {"clusterQueue": "gpu-training"}} for ns in ("a", "d")]
    # what the audit compares is what the role writes
    want = objs.kueue_objects(policy(gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 8}))
    m = objs.kueue_manifests(policy(gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 8}))
    assert m["cluster_queues"][0]["spec"] == want["cluster_queues"][0][1]
    assert m["resource_flavors"][0]["spec"] == want["resource_flavors"][0][1]


def test_kueue_v1beta1_fungibility_and_none():
    m = objs.kueue_manifests(policy(gpu_scheduling_policy_kueue_api_version="kueue.x-k8s.io/v1beta1",
                                    gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 1}))
    fungibility = m["cluster_queues"][0]["spec"]["flavorFungibility"]
    assert fungibility == {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}
    assert m["cluster_queues"][0]["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert objs.kueue_manifests(policy()) is None
    assert objs.kueue_manifests(policy(gpu_scheduling_policy_kueue="false",
                                       gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 1})) is None


def test_culling_manifests():
    out = objs.culling_manifests(policy(gpu_scheduling_policy_culling="cronjob",
                                        gpu_scheduling_policy_culling_check_minutes=5), "print('idle')")
    assert [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in out] == [
        ("ServiceAccount", "gpupool-notebook-culler", "gpupool-system"),
        ("ClusterRole", "gpupool-notebook-culler", None),
        ("ClusterRoleBinding", "gpupool-notebook-culler", None),
        ("ConfigMap", "gpupool-notebook-culler", "gpupool-system"),
        ("CronJob", "gpupool-notebook-culler", "gpupool-system")]
    assert all(o["metadata"]["labels"] == MANAGED for o in out)
    assert out[2]["subjects"] == [{"kind": "ServiceAccount", "name": "gpupool-notebook-culler",
                                   "namespace": "gpupool-system"}]
    assert out[3]["data"] == {"culler.py": "print('idle')\n"}
    spec = out[4]["spec"]
    assert spec["schedule"] == "*/5 * * * *" and spec["concurrencyPolicy"] == "Forbid"
    container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "python:3.12-alpine"
    assert container["env"] == [{"name": "CULL_IDLE_MINUTES", "value": "240"},
                                {"name": "NOTEBOOK_SELECTOR", "value": "gpupool.vcf/workload=notebook"},
                                {"name": "NOTEBOOK_PORT", "value": "8888"}]
    # the audit's CronJob fields are the ones written
    job = objs.culling_cronjob(policy(gpu_scheduling_policy_culling="cronjob",
                                      gpu_scheduling_policy_culling_check_minutes=5))
    assert (job["schedule"], job["image"]) == (spec["schedule"], container["image"])
    assert dict((e["name"], e["value"]) for e in container["env"]) == job["env"]


@pytest.mark.parametrize("culling", ["none", "kubeflow"])
def test_no_culling_manifests(culling):
    assert objs.culling_manifests(policy(gpu_scheduling_policy_culling=culling), "x\n") == []
