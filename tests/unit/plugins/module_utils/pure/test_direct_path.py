"""The vGPU mode in vSphere 9.1's direct-path-devices API: the one map between its modes and the collection's
words, which vCenters offer it, and the impacts check mode predicts (the rule the simulator documents)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _direct_path as dp

IDLE = {"current_mode": "VGPU_SAME_SIZE", "configurable_modes": ["VGPU_SAME_SIZE", "VGPU_MIXED_SIZE"], "vms": []}


def test_modes_map_both_ways_and_other_modes_pass_in_lower_case():
    assert dp.rest_mode("same_size") == "VGPU_SAME_SIZE" and dp.rest_mode("mixed_size") == "VGPU_MIXED_SIZE"
    assert dp.rest_mode("multi_instance_gpu") is None
    assert dp.mode_word("VGPU_MIXED_SIZE") == "mixed_size" and dp.mode_word("VGPU_SAME_SIZE") == "same_size"
    assert dp.mode_word("DIRECTPATH") == "directpath" and dp.mode_word(None) is None
    assert all(dp.mode_word(dp.rest_mode(w)) == w for w in dp.REST_MODE_BY_WORD)


@pytest.mark.parametrize("version, offered", [
    ("9.1.0.0", True), ("9.1.1.0", True), ("9.2", True), ("10.0.0.0", True),
    ("9.0.0.0", False), ("8.0.3.0", False), ("", False), (None, False), ("x.y", False), ("9", False)])
def test_only_api_9_1_and_later_offer_direct_path_devices(version, offered):
    assert dp.offers_direct_path(version) is offered


def test_prediction_none_for_an_idle_device_nothing_when_already_there():
    assert dp.predict_impacts(IDLE, "mixed_size") == [dp.IMPACT_NONE]
    assert dp.predict_impacts(IDLE, "same_size") == []


def test_prediction_maintenance_mode_while_vms_use_the_device():
    assert dp.predict_impacts(dict(IDLE, vms=["vm-22"]), "mixed_size") == [dp.IMPACT_MAINTENANCE]


def test_prediction_refuses_a_mode_outside_configurable_modes():
    with pytest.raises(dp.DirectPathError, match=r"cannot be configured to VGPU_MIXED_SIZE \(its configurable modes: "
                                                 r"VGPU_SAME_SIZE; current mode DIRECTPATH\)"):
        dp.predict_impacts({"current_mode": "DIRECTPATH", "configurable_modes": ["VGPU_SAME_SIZE"]}, "mixed_size")
    with pytest.raises(dp.DirectPathError, match="configurable modes: none"):
        dp.predict_impacts(None, "mixed_size")  # a device the API does not list
    with pytest.raises(dp.DirectPathError, match="has no direct-path-devices mode"):
        dp.predict_impacts(IDLE, "multi_instance_gpu")


def test_maintenance_refusal_names_host_gpus_and_the_fix():
    impacts = {"0000:5e:00.0": [dp.IMPACT_MAINTENANCE], "0000:3b:00.0": [dp.IMPACT_MAINTENANCE], "0000:86:00.0": ["NONE"]}
    text = dp.maintenance_refusal("esx-01", impacts, in_maintenance=False)
    assert text == ("host esx-01 is not in maintenance mode and the vGPU mode change of GPU 0000:3b:00.0, 0000:5e:00.0 "
                    "needs it (HOST_MAINTENANCE_MODE_REQUIRED): put the host in maintenance mode (or roll it through "
                    "maintenance mode with the esxi_gpu_host role) and rerun")
    assert dp.maintenance_refusal("esx-01", impacts, in_maintenance=True) is None
    assert dp.maintenance_refusal("esx-01", {"0000:3b:00.0": ["NONE"]}, in_maintenance=False) is None


def test_answered_impacts_sorted_and_none_only_alone():
    assert dp.impact_list(["HOST_REBOOT_REQUIRED", "NONE", "HOST_MAINTENANCE_MODE_REQUIRED"]) == \
        ["HOST_MAINTENANCE_MODE_REQUIRED", "HOST_REBOOT_REQUIRED"]
    assert dp.impact_list(["NONE"]) == ["NONE"] and dp.impact_list(None) == []
