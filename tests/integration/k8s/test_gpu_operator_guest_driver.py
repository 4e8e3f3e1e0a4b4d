"""gpu_operator on the rig with the real GPU Operator chart: the vGPU guest driver the design gives
(image, version, pull Secret) ends in the chart's ClusterPolicy and the audit finds it as designed
from the same role inputs; without a guest driver the role refuses before any change; a
mig.strategy change stops and lists the workloads that request GPUs unless it is allowed."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from tests.lib.ansible_run import run_playbook
from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing

ROOT = Path(__file__).resolve().parents[3]
CHART = gpu_operator_chart() or ROOT.parent / "shared" / "charts" / "gpu-operator"
U = uuid.uuid4().hex[:5]
NS = f"gpu-op-gd-{U}"
WORK = f"serving-{U}"
DRIVER = {"gpu_operator_driver_repository": "registry.example.com/nvaie",
          "gpu_operator_driver_image": "vgpu-guest-driver",
          "gpu_operator_driver_version": "550.90.07",
          "gpu_operator_driver_pull_secrets": ["nvaie-registry"]}


def inputs(**given):
    """The gpu_operator inputs as derive() gives them for a design with a guest driver."""
    out = {"gpu_operator_namespace": NS, "gpu_operator_vgpu_guest": True, "gpu_operator_mig_strategy": "single",
           "gpu_operator_allow_mig_strategy_change": False, "gpu_operator_mig_manager_enabled": False,
           "gpu_operator_licensing_secret_name": "licensing-config", "gpu_operator_time_slicing": {},
           "gpu_operator_device_plugin_config_name": "gpupool-time-slicing"}
    out.update(DRIVER)
    out.update(given)
    return out


def play(role_inputs):
    run_vars = dict(role_inputs, gpu_operator_chart_ref=str(CHART), gpu_operator_upgrade_crd=False,
                    # templated with a filter, as site.yml passes it (the licensing link may name another)
                    gpu_operator_licensing_secret_name="{{ gpupool_licensing_secret | default('%s') }}" % (
                        role_inputs["gpu_operator_licensing_secret_name"]),
                    gpu_operator_extra_values={"node-feature-discovery": {"master": {"serviceAccount": {
                        "name": f"nfd-master-{U}"}}}})
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "gpu_operator", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_operator"},
         "vars": run_vars}]}]


def cluster_policy(api):
    res = dynamic.DynamicClient(api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    return res.get(name="cluster-policy").to_dict()


def failed(run):
    return [res.get("msg") for _name, res in run.tasks if res.get("failed")]


@pytest.fixture(scope="module")
def installed(k8s_rig, k8s_api):
    if not (CHART / "Chart.yaml").is_file():
        pytest.fail(gpu_operator_chart_missing(), pytrace=False)
    core = client.CoreV1Api(k8s_api)
    # without a guest driver: refused before any change (no namespace, no release)
    refused = run_playbook(play(inputs(gpu_operator_driver_version="")), env=k8s_rig.env)
    namespaces_after_refusal = [n.metadata.name for n in core.list_namespace().items]
    converged = run_playbook(play(inputs()), env=k8s_rig.env)
    try:
        yield {"refused": refused, "namespaces_after_refusal": namespaces_after_refusal, "converged": converged}
    finally:
        k8s_rig.helm("uninstall", "gpu-operator", "--namespace", NS, "--no-hooks", check=False)
        for name in (NS, WORK):
            try:
                core.delete_namespace(name)
            except ApiException:
                pass


def test_without_guest_driver_the_role_refuses_before_any_change(installed):
    run = installed["refused"]
    assert run.rc != 0
    msg = " ".join(failed(run))
    assert "no vGPU guest driver is given" in msg and "Add guest.driver to the design" in msg
    assert "Nothing was changed" in msg
    assert NS not in installed["namespaces_after_refusal"]
    assert not [n for n, r in run.tasks if r.get("changed")]


def test_chart_cluster_policy_runs_the_designed_guest_driver_and_the_audit_agrees(installed, k8s_api):
    run = installed["converged"]
    assert run.rc == 0, (failed(run), run.stdout[-2000:])
    spec = cluster_policy(k8s_api)["spec"]
    driver = spec["driver"]
    assert (driver["repository"], driver["image"], driver["version"]) == (
        "registry.example.com/nvaie", "vgpu-guest-driver", "550.90.07")
    assert driver["imagePullSecrets"] == ["nvaie-registry"]
    assert spec["mig"]["strategy"] == "single" and spec["migManager"]["enabled"] is False
    # the DCGM exporter reads the role's metrics ConfigMap, with pod labels bounded by the allowlist
    assert spec["dcgmExporter"]["config"]["name"] == "gpupool-dcgm-metrics"
    assert spec["dcgmExporter"]["enablePodLabels"] is True and "^gpupool\\.vcf/.*$" in spec["dcgmExporter"][
        "podLabelAllowlistRegex"]
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is False  # no Prometheus operator CRDs on the rig
    cm = client.CoreV1Api(k8s_api).read_namespaced_config_map("gpupool-dcgm-metrics", NS)
    for counter in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
                    "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_VGPU_LICENSE_STATUS"):
        assert "\n%s, gauge," % counter in cm.data["dcgm-metrics.csv"]
    metrics = {"exists": True, "data": dict(cm.data)}
    # the audit expects the ClusterPolicy and the ConfigMap from the same role inputs derive() would give
    derived = {"roles": {"gpu_operator": inputs()}}
    assert _audit_guest.audit_guest(derived, cluster_policy={"exists": True, "spec": spec},
                                    dcgm_metrics_config=metrics) == []
    other = inputs(gpu_operator_driver_version="550.54.14")
    out = _audit_guest.audit_guest({"roles": {"gpu_operator": other}}, cluster_policy={"exists": True, "spec": spec})
    assert [f["rule"] for f in out] == ["cluster_policy_changed"]
    assert "driver.version 550.90.07 (design 550.54.14)" in out[0]["message"]


def test_mig_strategy_change_stops_and_lists_gpu_workloads_unless_allowed(installed, k8s_rig, k8s_api):
    assert installed["converged"].rc == 0
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    core.create_namespace({"metadata": {"name": WORK}})
    gpu = {"name": "llm", "image": "registry.example.com/llm:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    apps.create_namespaced_deployment(WORK, {
        "metadata": {"name": "llm"}, "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "llm"}},
                                              "template": {"metadata": {"labels": {"app": "llm"}},
                                                           "spec": {"containers": [gpu]}}}})
    core.create_namespaced_pod(WORK, {"metadata": {"name": "cpu-only"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}], "nodeName": "no-such-node"}})
    before = cluster_policy(k8s_api)["metadata"]["generation"]
    run = run_playbook(play(inputs(gpu_operator_mig_strategy="none")), env=k8s_rig.env)
    assert run.rc != 0
    msg = " ".join(failed(run))
    assert "mig.strategy is single; the design says none" in msg
    assert f"Deployment {WORK}/llm (nvidia.com/gpu)" in msg and "cpu-only" not in msg
    assert "guest.allow_mig_strategy_change" in msg
    cp = cluster_policy(k8s_api)
    assert cp["spec"]["mig"]["strategy"] == "single" and cp["metadata"]["generation"] == before
    # the audit names the same pending change
    out = _audit_guest.audit_guest({"roles": {"gpu_operator": inputs(gpu_operator_mig_strategy="none")}},
                                   cluster_policy={"exists": True, "spec": cp["spec"]})
    assert [f["rule"] for f in out] == ["mig_strategy_changed"]
    # on purpose: changed, and the audit is clean again
    allowed = inputs(gpu_operator_mig_strategy="none", gpu_operator_allow_mig_strategy_change=True)
    run = run_playbook(play(allowed), env=k8s_rig.env)
    assert run.rc == 0, (failed(run), run.stdout[-2000:])
    spec = cluster_policy(k8s_api)["spec"]
    assert spec["mig"]["strategy"] == "none"
    assert _audit_guest.audit_guest({"roles": {"gpu_operator": allowed}}, cluster_policy={"exists": True, "spec": spec}) == []
