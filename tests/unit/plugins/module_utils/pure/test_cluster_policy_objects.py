"""_k8s_objects, the gpu_operator role's ClusterPolicy helpers: the guest driver it needs in a vGPU
guest, the pull Secrets it sets, and the mig.strategy change it makes only on purpose."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs


def op(**given):
    return objs.role_inputs("gpu_operator", given)


def test_a_vgpu_guest_needs_a_guest_driver_version():
    refusal = objs.missing_guest_driver(op(gpu_operator_namespace="ops"))
    assert "gpu_operator_driver_version is empty" in refusal and "does not load in a vGPU VM" in refusal
    assert "Add guest.driver to the design" in refusal and "pull_secret" in refusal and "namespace ops" in refusal
    assert objs.missing_guest_driver(op(gpu_operator_driver_version="550.90.07")) is None
    # not a vGPU guest, or the driver not managed by the operator: nothing to refuse
    assert objs.missing_guest_driver(op(gpu_operator_vgpu_guest="false")) is None
    assert objs.missing_guest_driver(op(gpu_operator_driver_enabled=False)) is None


def test_pull_secrets_are_a_field_the_role_sets_and_the_audit_checks():
    given = op(gpu_operator_driver_pull_secrets=["nvaie-registry"], gpu_operator_driver_version="550.90.07",
               gpu_operator_driver_repository="registry.example.com/nvaie", gpu_operator_driver_image="vgpu-guest-driver")
    spec = objs.cluster_policy_spec(given)
    assert spec["driver"] == {"enabled": True, "repository": "registry.example.com/nvaie", "image": "vgpu-guest-driver",
                              "version": "550.90.07", "imagePullSecrets": ["nvaie-registry"],
                              "licensingConfig": {"nlsEnabled": True, "secretName": ""},
                              "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1,
                                                "podDeletion": {"force": False, "timeoutSeconds": 300},
                                                "drain": {"enable": True, "force": False, "timeoutSeconds": 300}}}
    assert (("driver", "imagePullSecrets"), ["nvaie-registry"]) in objs.cluster_policy_fields(given)
    # none given: the chart leaves the field out, so neither the role nor the audit names it
    assert "imagePullSecrets" not in objs.cluster_policy_spec(op())["driver"]


def _pod_spec(resources, init=False):
    container = {"name": "c", "resources": resources}
    return {"containers": [{"name": "plain"}], "initContainers": [container]} if init else {"containers": [container]}


def test_gpu_workloads_lists_what_requests_gpus():
    objects = [
        {"kind": "Deployment", "metadata": {"namespace": "serve", "name": "llm"},
         "spec": {"template": {"spec": _pod_spec({"limits": {"nvidia.com/gpu": 1}})}}},
        {"kind": "Job", "metadata": {"namespace": "train", "name": "j"},
         "spec": {"template": {"spec": _pod_spec({"requests": {"nvidia.com/mig-1g.10gb": 1}}, init=True)}}},
        {"kind": "CronJob", "metadata": {"namespace": "nb", "name": "cj"},
         "spec": {"jobTemplate": {"spec": {"template": {"spec": _pod_spec({"limits": {"nvidia.com/gpu.shared": 1}})}}}}},
        {"kind": "Pod", "metadata": {"namespace": "nb", "name": "bare"}, "spec": _pod_spec({"limits": {"nvidia.com/gpu": 1}})},
        # a Pod a controller owns is its controller's line
        {"kind": "Pod", "metadata": {"namespace": "serve", "name": "llm-abc", "ownerReferences": [
            {"kind": "ReplicaSet", "name": "llm-1", "controller": True}]},
         "spec": _pod_spec({"limits": {"nvidia.com/gpu": 1}})},
        {"kind": "Deployment", "metadata": {"namespace": "web", "name": "cpu"},
         "spec": {"template": {"spec": _pod_spec({"limits": {"cpu": "1"}})}}},
        {"kind": "StatefulSet", "metadata": {"namespace": "web", "name": "empty"}, "spec": {}},
    ]
    assert objs.gpu_workloads(objects) == [
        "CronJob nb/cj (nvidia.com/gpu.shared)", "Deployment serve/llm (nvidia.com/gpu)",
        "Job train/j (nvidia.com/mig-1g.10gb)", "Pod nb/bare (nvidia.com/gpu)"]
    assert objs.gpu_workloads([]) == []


def test_mig_strategy_change_only_on_purpose():
    live = {"mig": {"strategy": "none"}}
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="single"), live) == ("none", "single")
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="none"), live) is None
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="single", gpu_operator_allow_mig_strategy_change="yes"),
                                    live) is None
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="single"), None) is None  # first install
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="single"), {"mig": {}}) is None
    # chart values given last win, as in the release the role would install
    assert objs.mig_strategy_change(op(gpu_operator_mig_strategy="single",
                                       gpu_operator_extra_values={"mig": {"strategy": "none"}}), live) is None


def test_dcgm_exporter_metrics_config_map_has_the_profiling_counters():
    cm = objs.dcgm_metrics_config_map(op(gpu_operator_namespace="ops"))
    assert (cm["kind"], cm["metadata"]["namespace"], cm["metadata"]["name"]) == ("ConfigMap", "ops", "gpupool-dcgm-metrics")
    assert cm["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf"}
    fields = [f for f, _t in objs.dcgm_metrics_fields(cm["data"]["dcgm-metrics.csv"])]
    for counter in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
                    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_VGPU_LICENSE_STATUS"):
        assert counter in fields
    # one line per metric, three comma-separated columns (a comma in a help text would add a fourth)
    lines = [line for line in cm["data"]["dcgm-metrics.csv"].splitlines() if not line.startswith("#")]
    assert len(lines) == len(fields) and all(line.count(",") == 2 for line in lines)
    custom = op(gpu_operator_dcgm_metrics=[{"field": "DCGM_FI_DEV_FB_USED", "help": "used, MiB"}])
    assert objs.dcgm_metrics_csv(custom).splitlines()[1] == "DCGM_FI_DEV_FB_USED, gauge, used; MiB"
    assert objs.dcgm_metrics_config_map(op(gpu_operator_dcgm_metrics=[])) is None
    assert objs.dcgm_metrics_fields("# c\n\nA, gauge, x\nB\n") == [("A", "gauge"), ("B", "")]


def test_dcgm_exporter_fields_of_the_cluster_policy():
    spec = objs.cluster_policy_spec(op())
    assert spec["dcgmExporter"] == {
        "config": {"name": "gpupool-dcgm-metrics"}, "enablePodLabels": True,
        "podLabelAllowlistRegex": ["^app$", "^app\\.kubernetes\\.io/name$", "^gpupool\\.vcf/.*$",
                                   "^kueue\\.x-k8s\\.io/queue-name$"]}
    spec = objs.cluster_policy_spec(op(gpu_operator_dcgm_metrics=[], gpu_operator_dcgm_pod_label_allowlist=[]))
    assert spec["dcgmExporter"] == {"enablePodLabels": True}
    assert "dcgmExporter" not in objs.cluster_policy_spec(op(gpu_operator_dcgm_metrics=[],
                                                             gpu_operator_dcgm_pod_labels="no"))
    # chart values given last win for these fields, as in the release
    spec = objs.cluster_policy_spec(op(gpu_operator_extra_values={"dcgmExporter": {
        "enablePodLabels": False, "config": {"name": "theirs"}, "serviceMonitor": {"interval": "30s"}}}))
    assert spec["dcgmExporter"]["enablePodLabels"] is False and spec["dcgmExporter"]["config"] == {"name": "theirs"}
    assert "serviceMonitor" not in spec["dcgmExporter"]
