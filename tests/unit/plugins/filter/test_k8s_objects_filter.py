"""k8s_objects filters: the guest roles' objects from the roles' inputs, with the roles' defaults."""
import pathlib

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter import k8s_objects as f

FILTER_DIR = pathlib.Path(f.__file__).resolve().parent
MANAGED = {"app.kubernetes.io/managed-by": "gpupool.vcf"}


def test_every_filter_has_its_documentation():
    for name in f.FilterModule().filters():
        doc = yaml.safe_load((FILTER_DIR / ("%s.yml" % name)).read_text())
        assert doc["DOCUMENTATION"]["name"] == name


def test_vks_node_pools_role_default_taint():
    pools = [{"name": "a", "replicas": 1}, {"name": "cpu", "gpu": False}]
    assert f.vks_node_pools({"vks_gpu_node_pools_node_pools": pools}) == [
        {"name": "a", "replicas": 1, "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {"name": "cpu"}]


def test_device_plugin_config_map_data_is_yaml_text():
    cm = f.device_plugin_config_map({"gpu_operator_time_slicing": {"ts": {"replicas": 4}}})
    assert cm["data"]["default"] == "flags:\n  migStrategy: single\nversion: v1\n"
    assert cm["data"]["ts"] == (
        "flags:\n  migStrategy: single\nsharing:\n  timeSlicing:\n    failRequestsGreaterThanOne: false\n"
        "    renameByDefault: false\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\nversion: v1\n")
    assert f.device_plugin_config_map({}) is None


def test_cluster_policy_spec():
    assert f.cluster_policy_spec({"gpu_operator_licensing_secret_name": "lic", "gpu_operator_driver_version": "1",
                                  "gpu_operator_dcgm_metrics": [], "gpu_operator_dcgm_pod_labels": False}) == {
        "driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "1",
                   "licensingConfig": {"nlsEnabled": True, "secretName": "lic"},
                   "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1,
                                     "podDeletion": {"force": False, "timeoutSeconds": 300},
                                     "drain": {"enable": True, "force": False, "timeoutSeconds": 300}}},
        "mig": {"strategy": "single"}}


def test_driver_upgrade_values_in_the_charts_names():
    values = f.driver_upgrade_values({"gpu_operator_driver_upgrade": {"max_parallel": 0, "honour_pdbs": False}})
    assert values["maxParallelUpgrades"] == 0 and values["maxUnavailable"] == "100%"
    assert values["gpuPodDeletion"] == {"force": True, "timeoutSeconds": 300, "deleteEmptyDir": False}
    assert values["drain"]["force"] is True and "podDeletion" not in values


def test_tenant_namespace():
    assert f.tenant_namespace({"namespace": "a", "training": True}, True) == {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": dict(
            {"gpupool.vcf/tenant": "true", "gpupool.vcf/training": "true"}, **MANAGED)}}
    assert "app.kubernetes.io/managed-by" not in f.tenant_namespace({"namespace": "a"})["metadata"]["labels"]
    with pytest.raises(AnsibleFilterError, match="namespace"):
        f.tenant_namespace({"name": "a"})


def test_kueue_manifests():
    out = f.kueue_manifests({"gpu_scheduling_policy_training_resources": {"nvidia.com/gpu": 2},
                             "gpu_scheduling_policy_tenants": [{"namespace": "t", "training": True}]})
    assert out["local_queues"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                    "metadata": {"name": "training", "namespace": "t", "labels": MANAGED},
                                    "spec": {"clusterQueue": "gpu-training"}}]
    assert out["cluster_queues"][0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "2"}]
    assert f.kueue_manifests({}) is None


def test_notebook_culler_manifests():
    out = f.notebook_culler_manifests({"gpu_scheduling_policy_culling": "cronjob",
                                       "gpu_scheduling_policy_culling_namespace": "ops"}, "print(1)")
    assert [o["kind"] for o in out] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob"]
    assert out[3]["metadata"] == {"name": "gpupool-notebook-culler", "namespace": "ops", "labels": MANAGED}
    assert out[3]["data"] == {"culler.py": "print(1)\n"}


@pytest.mark.parametrize("call", [
    lambda: f.kueue_manifests(["not", "a", "mapping"]),
    lambda: f.vks_node_pools({"vks_gpu_node_pools_node_pools": [{"name": "a", "taints": 5}]}),
    lambda: f.device_plugin_config_map({"gpu_operator_time_slicing": {"ts": {}}}),
])
def test_bad_inputs_are_filter_errors(call):
    with pytest.raises(AnsibleFilterError):
        call()
