"""esxi filters over gpu_host_info results."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter import esxi


def host(name, version, gpus=2, policy=None, slice_ms=None, state="connected"):
    return dict(name=name, gpu_count=gpus, connection_state=state, driver=dict(version=version),
                scheduler=dict(policy=policy, time_slice_ms=slice_ms))


HOSTS = [host("a", "550.90.05", policy="equal_share", slice_ms=3), host("b", "550.90.05", policy="equal_share", slice_ms=3),
         host("c", "550.54.10", policy="best_effort"), host("mgmt", None, gpus=0)]


def test_gate_and_design_version():
    with pytest.raises(AnsibleFilterError, match="550.54.10 on c; 550.90.05 on a, b"):
        esxi.driver_version_gate(HOSTS)
    assert esxi.driver_version_gate(HOSTS, "550.90.05") == "550.90.05"
    assert esxi.design_driver_version(HOSTS, "c") == "550.90.05"


def test_common_scheduler_is_the_majority_of_the_others():
    assert esxi.common_scheduler(HOSTS, "c") == {"policy": "equal_share", "time_slice_ms": 3}
    assert esxi.common_scheduler(HOSTS[1:3], "x") == {}


def test_roll_capacity_skips_disconnected_hosts():
    assert esxi.roll_capacity(HOSTS, 4)["allowed"]
    hosts = HOSTS[:2] + [host("c", "550.54.10", state="notResponding")]
    assert not esxi.roll_capacity(hosts, 4)["allowed"]


def test_vm_class_profiles_both_forms():
    classes = [{"devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-20c"}]}},
               {"config_spec": {"devices": [{"backing": {"vgpu": "nvidia_h100-3-40c"}}]}}, {"id": "best-effort-small"}]
    assert esxi.vm_class_vgpu_profiles(classes) == ["nvidia_h100-20c", "nvidia_h100-3-40c"]


def test_mig_commands_filter():
    assert esxi.mig_mode_commands(True, [1]) == ["nvidia-smi -i 1 -mig 1"]
    with pytest.raises(AnsibleFilterError):
        esxi.mig_mode_commands(True, ["x"])
