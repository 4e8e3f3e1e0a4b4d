"""The vGPU mode per GPU (same size / mixed size): one comparator for esxi_gpu_config, the roll and the
audit, the design field, its derived role input and the rule against fixed share with mixed sizes."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_esxi, _audit_report
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import EsxiError
from tests.lib.design_edit import cluster, example

A, B, C = "0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0"
GRAPHICS = dict(default_type="shared_direct", assignment_policy="performance",
                device_types={A: "shared_direct", B: "shared_direct", C: "shared_direct"})


def current(**modes):
    return dict(GRAPHICS, vgpu_modes=dict(modes))


@pytest.mark.parametrize("api,word", [("sameSize", "same_size"), ("mixedSize", "mixed_size"),
                                      ("multiInstanceGpu", "multi_instance_gpu"), ("none", "none"), (None, None),
                                      ("somethingNew", "somethingNew")])
def test_vgpu_mode_words(api, word):
    assert _esxi.vgpu_mode_word(api) == word


def test_only_same_and_mixed_size_are_written():
    assert _esxi.vim_vgpu_mode("same_size") == "sameSize"
    assert _esxi.vim_vgpu_mode("mixed_size") == "mixedSize"
    assert _esxi.vim_vgpu_mode("multi_instance_gpu") is None
    assert _esxi.vim_vgpu_mode(None) is None


def test_mixed_size_asked_changes_the_same_size_gpus_and_leaves_mig_alone():
    cur = current(**{A: "same_size", B: "mixed_size", C: "multi_instance_gpu"})
    desired, items = _esxi.graphics_changes(cur, [A, B, C], vgpu_mode="mixed_size")
    assert desired["vgpu_modes"] == {A: "mixed_size", B: "mixed_size", C: "multi_instance_gpu"}
    assert [(i.field, i.detail("gpu"), i.before, i.after, i.action) for i in items] == \
        [("graphics.vgpu_mode", A, "same_size", "mixed_size", "set")]
    assert items[0].reason == "GPU %s vGPU mode same_size -> mixed_size" % A
    # the other graphics settings are untouched
    assert desired["device_types"] == GRAPHICS["device_types"]
    assert desired["default_type"] == "shared_direct" and desired["assignment_policy"] == "performance"


def test_same_size_asked():
    desired, items = _esxi.graphics_changes(current(**{A: "mixed_size", B: "same_size"}), [A, B],
                                            vgpu_mode="same_size")
    assert desired["vgpu_modes"] == {A: "same_size", B: "same_size"}
    assert [i.detail("gpu") for i in items] == [A]


def test_at_the_mode_nothing_changes():
    cur = current(**{A: "mixed_size", B: "mixed_size", C: "multi_instance_gpu"})
    desired, items = _esxi.graphics_changes(cur, [A, B, C], vgpu_mode="mixed_size")
    assert items == [] and desired["vgpu_modes"] == cur["vgpu_modes"]


def test_not_asked_is_left_alone():
    desired, items = _esxi.graphics_changes(current(**{A: "same_size"}), [A])
    assert items == [] and "vgpu_modes" not in desired


def test_a_gpu_without_a_reported_mode_is_not_judged():
    # before API 8.0.3 graphicsInfo has no vgpuMode: the GPU is not in vgpu_modes
    desired, items = _esxi.graphics_changes(current(**{A: "same_size"}), [A, B], vgpu_mode="mixed_size")
    assert [i.detail("gpu") for i in items] == [A]
    assert B not in desired["vgpu_modes"]


def test_only_the_given_gpus_are_compared():
    _desired, items = _esxi.graphics_changes(current(**{A: "same_size", B: "same_size"}), [B],
                                             vgpu_mode="mixed_size")
    assert [i.detail("gpu") for i in items] == [B]


def test_invalid_mode_is_refused():
    with pytest.raises(EsxiError, match="Invalid vgpu_mode 'mixed'.*mixed_size, same_size"):
        _esxi.graphics_changes(current(**{A: "same_size"}), [A], vgpu_mode="mixed")


def test_graphics_plan_words():
    _desired, reasons = _esxi.graphics_plan(current(**{A: "same_size"}), [A], None, None, "mixed_size")
    assert reasons == ["GPU %s vGPU mode same_size -> mixed_size" % A]


def test_vgpu_modes_of_the_host_record():
    gpus = [dict(pci_id=A, vgpu_mode="sameSize"), dict(pci_id=B, vgpu_mode="multiInstanceGpu"),
            dict(pci_id=C, vgpu_mode=None)]
    assert _esxi.vgpu_modes_of(gpus) == {A: "same_size", B: "multi_instance_gpu"}


def host_record(*modes):
    gpus = [dict(pci_id=pci, vgpu_mode=mode) for pci, mode in zip((A, B, C), modes)]
    return dict(name="esx-l40s-01", connection_state="connected", errors=[], gpu_count=len(gpus),
                vgpu_profiles=["nvidia_l40s-4q"], gpus=gpus,
                graphics=dict(default_type="shared_direct", assignment_policy="performance",
                              device_types=dict((g["pci_id"], "shared_direct") for g in gpus)))


def test_the_roll_plans_the_same_items_as_the_module():
    host = host_record("sameSize", "mixedSize", "multiInstanceGpu")
    items = _esxi.host_changes(host, "550.90.05", driver=False, vgpu_mode="mixed_size")
    _desired, module_items = _esxi.graphics_changes(
        dict(host["graphics"], vgpu_modes={A: "same_size", B: "mixed_size", C: "multi_instance_gpu"}),
        [A, B, C], vgpu_mode="mixed_size", obj=_esxi.host_object(host["name"]))
    # the roll's changes are the module's, with the VMs on each GPU (not listed in this read: None)
    assert [Change(i.object, i.field, i.before, i.after, i.action, i.reason, gpu=i.detail("gpu"))
            for i in items] == module_items
    assert [(i.field, i.detail("gpu"), i.detail("vms")) for i in items] == [("graphics.vgpu_mode", A, None)]


def test_hosts_to_roll_names_the_host_off_the_mode_only():
    hosts = [host_record("sameSize", "sameSize"), dict(host_record("mixedSize", "mixedSize"), name="esx-l40s-02")]
    todo = _esxi.hosts_to_roll(hosts, "550.90.05", driver=False, vgpu_mode="mixed_size")
    assert sorted(todo) == ["esx-l40s-01"]
    assert [i.detail("gpu") for i in todo["esx-l40s-01"]] == [A, B]
    assert _esxi.hosts_to_roll(hosts, "550.90.05", driver=False) == {}


def test_a_vgpu_mode_change_of_an_empty_gpu_takes_no_maintenance():
    # the host changes the mode of a GPU no powered-on VM sits on in place; the roll does not reboot for it
    host = host_record("sameSize")
    host["gpus"][0]["vms"] = []
    items = _esxi.host_changes(host, "550.90.05", driver=False, vgpu_mode="mixed_size")
    assert [i.detail("gpu") for i in items] == [A]
    assert not _esxi.needs_maintenance(items)


# --- the design, derive and the audit ------------------------------------------------------------

def test_design_vgpu_mode_is_optional_and_derived():
    d = derive(example())
    assert d["esxi"]["clusters"]["gpu-l40s"]["vgpu_mode"] == ""
    assert d["roles"]["esxi_gpu_host"]["gpu-l40s"]["esxi_gpu_host_vgpu_mode"] == ""
    design = example()
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed_size"
    assert not [f for f in validate(design) if f.severity == "error"]
    d = derive(design)
    assert d["esxi"]["clusters"]["gpu-l40s"]["vgpu_mode"] == "mixed_size"
    assert d["roles"]["esxi_gpu_host"]["gpu-l40s"]["esxi_gpu_host_vgpu_mode"] == "mixed_size"
    assert d["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_vgpu_mode"] == ""


def test_design_vgpu_mode_bad_choice():
    design = example()
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed"
    found = [f for f in validate(design) if f.rule == "schema"]
    assert [f.object for f in found] == ["clusters.gpu-l40s.graphics.vgpu_mode"]
    assert "mixed_size" in found[0].fix or "mixed_size" in found[0].message


def test_mixed_size_with_fixed_share_is_refused():
    design = example()
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed_size"
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "fixed_share", "time_slice_ms": 3}
    found = [f for f in validate(design) if f.rule == "mixed_size_fixed_share"]
    assert [(f.object, f.severity) for f in found] == [("clusters.gpu-l40s", "error")]
    assert "fixed share" in found[0].message and "equal_share" in found[0].fix
    # same size with fixed share, and mixed size with equal share, are fine
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "same_size"
    assert not [f for f in validate(design) if f.rule == "mixed_size_fixed_share"]
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed_size"
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "equal_share", "time_slice_ms": 3}
    assert not [f for f in validate(design) if f.rule == "mixed_size_fixed_share"]


def test_audit_names_the_gpu_off_the_design_mode_with_the_rule():
    design = example()
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed_size"
    want = copy.deepcopy(derive(design)["roles"]["esxi_gpu_host"]["gpu-l40s"])
    h = host_record("mixedSize", "sameSize", "multiInstanceGpu")
    h["graphics"]["assignment_policy"] = want["esxi_gpu_host_assignment_policy"]
    h.update(cluster="gpu-l40s", maintenance_mode=False, vgpu_vms=[],
             driver=dict(version=want["esxi_gpu_host_driver_version"].split("-")[0],
                         full_version=want["esxi_gpu_host_driver_version"]))
    want["esxi_gpu_host_scheduler"] = None
    found = _audit_esxi.host_findings(h, want)
    assert [f["rule"] for f in found] == ["gpu_vgpu_mode_off_design"]
    assert B in found[0]["message"] and "same_size" in found[0]["message"] and A not in found[0]["message"]
    assert "vgpu_mode=mixed_size" in found[0]["fix"] and "powered-on" in found[0]["fix"]
    rule = _audit_report.RULES["gpu_vgpu_mode_off_design"]
    assert rule[0] == "error" and rule[1] == "esxi"
    # at the mode: clean; not managed by the design: not judged
    h["gpus"][1]["vgpu_mode"] = "mixedSize"
    assert _audit_esxi.host_findings(h, want) == []
    h["gpus"][1]["vgpu_mode"] = "sameSize"
    want["esxi_gpu_host_vgpu_mode"] = ""
    assert _audit_esxi.host_findings(h, want) == []
