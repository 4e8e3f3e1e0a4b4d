"""VM class validation, normal form, merge and request bodies (pure)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc


def params(**kw):
    base = dict(name="gpu-small", cpu_count=None, memory_mb=None, cpu_reservation=None, memory_reservation=None,
                description=None, vgpu_profiles=None)
    base.update(kw)
    return base


@pytest.mark.parametrize("version,form", [("8.0.3.0", "config_spec"), ("8.0.2.0", "config_spec"),
                                          ("8.0.1.0", "devices"), ("7.0.3.1", "devices"), ("9.0.0.0", "config_spec"),
                                          (None, "devices")])
def test_choose_form_by_api_version(version, form):
    assert vmc.choose_form("auto", version) == form


def test_choose_form_explicit():
    assert vmc.choose_form("devices", "8.0.3.0") == "devices"
    with pytest.raises(vmc.VmClassError):
        vmc.choose_form("soap")


@pytest.mark.parametrize("name", ["Gpu", "gpu_small", "-gpu", "gpu-", "a" * 64, ""])
def test_names_must_be_dns_labels(name):
    with pytest.raises(vmc.VmClassError, match="DNS label"):
        vmc.desired(params(name=name))


def test_profiles_parsed_and_checked_against_offer():
    assert vmc.check_profiles(["NVIDIA_H100-1-10C"]) == ["nvidia_h100-1-10c"]
    with pytest.raises(vmc.VmClassError, match="vGPU profile h100-10c"):
        vmc.check_profiles(["h100-10c"])
    with pytest.raises(vmc.VmClassError, match="not offered .* offered: nvidia_h100-1-10c, nvidia_h100-80c"):
        vmc.check_profiles(["nvidia_l40s-48q"], {"nvidia_h100-80c", "nvidia_h100-1-10c"}, "gpu-h100")


def test_normalize_both_forms_and_memory_spellings():
    legacy = {"id": "x", "cpu_count": 2, "memory_MB": 2048, "memory_reservation": 100,
              "devices": {"vgpu_devices": [{"profile_name": "grid_a100-4c"}]}}
    new = {"id": "x", "cpu_count": 2, "memory_mb": 2048, "memory_reservation": 100, "description": "d",
           "config_spec": vmc.vgpu_config_spec({"cpu_count": 2, "memory_mb": 2048, "vgpu_profiles": ["grid_a100-4c"]})}
    a, b = vmc.normalize(legacy), vmc.normalize(new)
    assert a["memory_mb"] == b["memory_mb"] == 2048
    assert a["vgpu_profiles"] == b["vgpu_profiles"] == ["grid_a100-4c"]
    assert a["description"] == "" and a["cpu_reservation"] == 0
    assert vmc.normalize(None) is None


def test_merge_sets_reservation_100_with_vgpu():
    want = vmc.desired(params(cpu_count=4, memory_mb=8192, vgpu_profiles=["nvidia_h100-1-10c"]))
    after = vmc.merge(None, want)
    assert after["memory_reservation"] == 100 and after["cpu_reservation"] == 0 and after["description"] == ""


def test_merge_rejects_low_reservation_with_vgpu_even_from_current():
    current = vmc.normalize({"cpu_count": 4, "memory_mb": 8192, "memory_reservation": 100,
                             "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]}})
    with pytest.raises(vmc.VmClassError, match="memory_reservation 50%"):
        vmc.merge(current, vmc.desired(params(memory_reservation=50)))


def test_merge_leaves_unset_fields_alone_and_diff_only_changed():
    current = vmc.normalize({"cpu_count": 4, "memory_mb": 8192, "memory_reservation": 100, "description": "a",
                             "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]}})
    after = vmc.merge(current, vmc.desired(params(description="b")))
    assert vmc.differs(current, after) == ["description"]
    assert after["vgpu_profiles"] == ["nvidia_h100-1-10c"] and after["cpu_count"] == 4


def test_profiles_compared_as_multiset():
    current = dict(cpu_count=1, memory_mb=1, cpu_reservation=0, memory_reservation=100, description="",
                   vgpu_profiles=["b", "a"])
    assert vmc.differs(current, dict(current, vgpu_profiles=["a", "b"])) == []
    assert vmc.differs(current, dict(current, vgpu_profiles=["a", "b", "b"])) == ["vgpu_profiles"]


def test_removing_vgpus_keeps_reservation_unless_set():
    current = vmc.normalize({"cpu_count": 4, "memory_mb": 8192, "memory_reservation": 100,
                             "devices": {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]}})
    after = vmc.merge(current, vmc.desired(params(vgpu_profiles=[], memory_reservation=0)))
    assert after["vgpu_profiles"] == [] and after["memory_reservation"] == 0


def test_create_needs_cpu_and_memory():
    with pytest.raises(vmc.VmClassError, match="cpu_count and memory_mb required"):
        vmc.merge(None, vmc.desired(params(description="x")))


@pytest.mark.parametrize("kw", [dict(cpu_reservation=101), dict(memory_reservation=-1), dict(cpu_count=0)])
def test_ranges(kw):
    with pytest.raises(vmc.VmClassError):
        vmc.desired(params(**kw))


def test_request_bodies():
    after = dict(cpu_count=4, memory_mb=8192, cpu_reservation=0, memory_reservation=100, description="d",
                 vgpu_profiles=["nvidia_h100-1-10c"])
    body = vmc.request_body("gpu-small", after, "config_spec", create=True)
    assert body["id"] == "gpu-small" and body["memory_MB"] == 8192 and "devices" not in body
    cs = body["config_spec"]
    assert cs["_typeName"] == "VirtualMachineConfigSpec" and cs["numCPUs"] == 4 and cs["memoryMB"] == 8192
    dev = cs["deviceChange"][0]
    assert dev["operation"] == "add" and dev["device"]["_typeName"] == "VirtualPCIPassthrough"
    assert dev["device"]["backing"] == {"_typeName": "VirtualPCIPassthroughVmiopBackingInfo", "vgpu": "nvidia_h100-1-10c"}
    assert cs["memoryReservationLockedToMax"] is True
    legacy = vmc.request_body("gpu-small", after, "devices", create=False)
    assert "id" not in legacy and legacy["devices"] == {"vgpu_devices": [{"profile_name": "nvidia_h100-1-10c"}]}
    assert vmc.request_body("x", after, "config_spec", create=False, clear_devices=True)["devices"] == {}


def test_with_vgpu_names_the_gpu_classes():
    classes = {"gpu-a": vmc.normalize({"cpu_count": 2, "devices": {"vgpu_devices": [{"profile_name": "nvidia_l40s-8c"}]}}),
               "best-effort-small": vmc.normalize({"cpu_count": 2}), "gone": None}
    assert vmc.with_vgpu(classes) == ["gpu-a"]
    assert vmc.with_vgpu(None) == []
