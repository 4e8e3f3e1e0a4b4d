"""k8s_objects filters of the gpu_operator role's guards: guest driver refusal, mig.strategy change, GPU workloads."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter import k8s_objects as f


def test_guest_driver_refusal_is_text_or_empty():
    assert "Add guest.driver to the design" in f.guest_driver_refusal({})
    assert f.guest_driver_refusal({"gpu_operator_driver_version": "550.90.07"}) == ""
    with pytest.raises(AnsibleFilterError):
        f.guest_driver_refusal("not a mapping")


def test_mig_strategy_change_is_a_list():
    assert f.mig_strategy_change({"gpu_operator_mig_strategy": "single"}, {"mig": {"strategy": "none"}}) == [
        "none", "single"]
    assert f.mig_strategy_change({"gpu_operator_mig_strategy": "single"}, None) == []
    with pytest.raises(AnsibleFilterError):
        f.mig_strategy_change({}, "spec")


def test_gpu_workloads_checks_its_input():
    pod = {"kind": "Pod", "metadata": {"namespace": "a", "name": "p"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
    assert f.gpu_workloads([pod]) == ["Pod a/p (nvidia.com/gpu)"]
    with pytest.raises(AnsibleFilterError):
        f.gpu_workloads("pods")


def test_dcgm_metrics_config_map():
    cm = f.dcgm_metrics_config_map({"gpu_operator_namespace": "ops"})
    assert cm["metadata"]["namespace"] == "ops" and "DCGM_FI_PROF_SM_ACTIVE" in cm["data"]["dcgm-metrics.csv"]
    assert f.dcgm_metrics_config_map({"gpu_operator_dcgm_metrics": []}) is None
