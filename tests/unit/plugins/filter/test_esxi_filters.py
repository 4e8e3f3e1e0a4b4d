"""esxi filters over gpu_host_info results."""
import json
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter import esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class


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


def _api_classes():
    """VM classes as the simulator lists them after real vm_class and supervisor_namespace runs
    (captured and kept current by tests/integration/test_vm_class_profiles_filter.py)."""
    return json.loads((pathlib.Path(__file__).parent / "vm_classes_api.json").read_text())


def test_vm_class_profiles_as_the_api_lists_them():
    classes = _api_classes()
    assert {c["id"] for c in classes} == {"cpu-small", "gpu-inference", "gpu-notebooks", "gpu-training"}
    assert "deviceChange" in next(c for c in classes if c["id"] == "gpu-inference")["config_spec"]
    assert esxi.vm_class_vgpu_profiles(classes) == ["nvidia_h100-3-40c", "nvidia_h100-80c", "nvidia_l40s-8c"]
    assert esxi.vm_class_vgpu_profiles(classes, namespaces=["research"]) == ["nvidia_l40s-8c"]
    assert esxi.vm_class_vgpu_profiles(classes, namespaces="team-search") == ["nvidia_h100-3-40c"]
    assert esxi.vm_class_vgpu_profiles(classes, namespaces=[]) == []
    assert esxi.vm_class_vgpu_profiles(classes, gpu_models="L40S") == ["nvidia_l40s-8c"]
    assert esxi.vm_class_vgpu_profiles(classes, gpu_models=["H100-80GB"]) == ["nvidia_h100-3-40c", "nvidia_h100-80c"]
    assert esxi.vm_class_vgpu_profiles(classes, gpu_models="H100-80GB, L40S") == \
        ["nvidia_h100-3-40c", "nvidia_h100-80c", "nvidia_l40s-8c"]
    # a model outside the catalog: nothing can be judged, nothing is left out
    assert esxi.vm_class_vgpu_profiles(classes, gpu_models="NVIDIA RTX 9000") == esxi.vm_class_vgpu_profiles(classes)


@pytest.mark.parametrize("form", ["config_spec", "devices"])
def test_vm_class_profiles_of_the_bodies_the_module_writes(form):
    after = _vm_class.merge(None, _vm_class.desired({"name": "gpu-x", "cpu_count": 8, "memory_mb": 65536,
                                                     "vgpu_profiles": ["nvidia_h100-80c", "NVIDIA_H100-80C"]}))
    body = _vm_class.request_body("gpu-x", after, form, create=True)
    assert esxi.vm_class_vgpu_profiles([body]) == ["nvidia_h100-80c"]
    # an update to config_spec that empties the legacy devices
    update = _vm_class.request_body("gpu-x", after, form, create=False, clear_devices=True)
    assert esxi.vm_class_vgpu_profiles([update]) == ["nvidia_h100-80c"]


def test_vm_class_profiles_in_normal_form_and_bad_input():
    assert esxi.vm_class_vgpu_profiles([{"name": "gpu-x", "vgpu_profiles": ["nvidia_l40s-8c"]}, {"name": "cpu"}]) == \
        ["nvidia_l40s-8c"]
    # a removal in a config spec is not a profile of the class
    removed = {"id": "gpu-y", "config_spec": {"deviceChange": [
        {"operation": "remove", "device": {"backing": {"vgpu": "nvidia_h100-80c"}}}]}}
    assert esxi.vm_class_vgpu_profiles([removed]) == []
    with pytest.raises(AnsibleFilterError, match="VM class gpu-z: .*nvidia_h100-81x"):
        esxi.vm_class_vgpu_profiles([{"id": "gpu-z", "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-81x"}]}}])
    with pytest.raises(AnsibleFilterError, match="must be a mapping"):
        esxi.vm_class_vgpu_profiles(["gpu-x"])


def test_mig_commands_filter():
    assert esxi.mig_mode_commands(True, [1]) == ["nvidia-smi -i 1 -mig 1"]
    with pytest.raises(AnsibleFilterError):
        esxi.mig_mode_commands(True, ["x"])


def test_esxi_host_drain_vms():
    from ansible_collections.gpupool.vcf.plugins.filter.esxi import esxi_host_drain_vms
    info = {"vgpu_hotmigrate": False, "hosts": [
        {"name": "esx-1", "vgpu_vms": [{"name": "node-1", "uuid": "u1", "power_state": "poweredOn"}]}]}
    upgrade = [{"field": "driver", "action": "upgrade"}]
    assert esxi_host_drain_vms(info, "esx-1", upgrade) == [{"name": "node-1", "uuid": "u1"}]
    assert esxi_host_drain_vms(info, "esx-1", [{"field": "graphics.device_type", "action": "set"}]) == []
    assert esxi_host_drain_vms(dict(info, vgpu_hotmigrate=True), "esx-1", upgrade) == []
    with pytest.raises(AnsibleFilterError, match="esx-9 is not in the gpu_host_info result"):
        esxi_host_drain_vms(info, "esx-9", upgrade)


def test_esxi_host_turns_takes_one_mapping():
    from ansible_collections.gpupool.vcf.plugins.filter.esxi import esxi_host_turns
    rec = dict(name="esx-1", gpu_count=1, connection_state="connected", errors=[], gpus=[dict(pci_id="0000:3b:00.0")],
               driver=dict(version="535.183.04", full_version="535.183.04-1OEM.800.1.0.20613240"),
               vgpu_profiles=["nvidia_l40s-8c"], vgpu_vms=[dict(name="node-1", uuid="u1", power_state="poweredOn")])
    spec = {"vars": {"esxi_gpu_host_driver_version": "550.90.05",
                     "esxi_gpu_host_driver_bundle": "https://depot.example.com/NVD-AIE-800_550.90.05-1OEM.800.1.0.1_2.zip"}}
    turns = esxi_host_turns(dict(hosts=[rec]), spec)
    assert list(turns) == ["esx-1"]
    assert turns["esx-1"]["driver"]["action"] == "upgrade"
    assert turns["esx-1"]["drain_vms"] == [{"name": "node-1", "uuid": "u1"}]
    assert esxi_host_turns(dict(hosts=[rec]), dict(spec, hosts=["esx-2"])) == {}
    with pytest.raises(AnsibleFilterError, match="one mapping"):
        esxi_host_turns(dict(hosts=[rec]), "550.90.05")
    with pytest.raises(AnsibleFilterError, match="gpu_host_info"):
        esxi_host_turns([rec], spec)
    # a target no plan can reach is a refusal of that host's driver step, not an error of the filter
    refused = esxi_host_turns(dict(hosts=[rec]), {"vars": {"esxi_gpu_host_driver_version": "latest"}})
    assert refused["esx-1"]["driver"]["action"] == "refused"
