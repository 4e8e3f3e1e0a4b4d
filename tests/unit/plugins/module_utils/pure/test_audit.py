"""Audit rules of _audit against hand-made live states (no I/O)."""
import copy
import json

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_guest, _audit_report, _audit_vks, _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _namespace, _nvidia, _vm_class
from tests.lib.audit_live import DERIVED, OLD, host, options_for
from tests.lib.paths import ROOT


@pytest.fixture
def derived():
    return copy.deepcopy(DERIVED)


def good_hosts():
    hosts = [host("esx-h100-0%d" % i,
                  vms=[dict(name="vm-%d" % i, moid="vm-%d" % i, vgpu_profiles=["nvidia_h100-3-40c"])])
             for i in range(1, 5)]
    hosts += [host("esx-l40s-0%d" % i, cluster="gpu-l40s") for i in range(1, 4)]
    hosts.append(dict(name="esx-mgmt-01", cluster="mgmt", connection_state="connected", maintenance_mode=False,
                      gpu_count=0, graphics=None, vgpu_vms=[], errors=[]))
    return hosts


def good_drs():
    pinned = dict(("vm-%d" % i, dict(behavior="partiallyAutomated", enabled=True)) for i in range(1, 5))
    return {"gpu-h100": dict(enabled=True, overrides_enabled=True, overrides=pinned),
            "gpu-l40s": dict(enabled=True, overrides_enabled=True, overrides={})}


def rules(findings):
    return sorted((f["rule"], f["object"]) for f in findings)


def test_every_rule_has_severity_and_doc():
    for name, (sev, link, doc) in _audit_report.RULES.items():
        assert sev in _audit.SEVERITIES and (link in _audit.LINKS or name == "link_not_audited") and doc


# --- esxi -----------------------------------------------------------------------------------------


def test_esxi_clean(derived):
    assert _audit_esxi.audit_esxi(derived, good_hosts(), good_drs()) == []


def test_driver_mixed_and_off_design(derived):
    hosts = good_hosts()
    hosts[3]["driver"] = dict(version="550.54.10", full_version=OLD)
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("driver_mixed", "cluster gpu-h100"), ("driver_off_design", "host esx-h100-04")]
    mixed = [f for f in out if f["rule"] == "driver_mixed"][0]
    assert "esx-h100-04" in mixed["message"] and OLD in mixed["message"] and mixed["severity"] == "error"
    assert all(f["link"] == "esxi" and f["fix"] for f in out)


def test_driver_off_design_everywhere_is_not_mixed(derived):
    hosts = [h for h in good_hosts() if h["cluster"] == "gpu-l40s"]
    for h in hosts:
        h["driver"] = dict(version="550.54.10", full_version=OLD)
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert [r for r, obj in rules(out) if r.startswith("driver")] == ["driver_off_design"] * 3


def test_driver_missing_is_off_design(derived):
    hosts = good_hosts()
    hosts[0]["driver"] = dict(version=None, full_version=None, packages=[])
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert ("driver_off_design", "host esx-h100-01") in rules(out)
    assert "none installed" in [f for f in out if f["rule"] == "driver_off_design"][0]["message"]


def test_short_design_version_matches_full_host_version(derived):
    d = copy.deepcopy(derived)
    d["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_driver_version"] = "550.90.05"
    assert _audit_esxi.audit_esxi(d, good_hosts(), good_drs()) == []


def test_graphics_not_shared_direct(derived):
    hosts = good_hosts()
    hosts[0]["graphics"]["default_type"] = "shared"
    hosts[1]["graphics"]["device_types"]["0000:3b:00.0"] = "shared"
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("graphics_not_shared_direct", "host esx-h100-01"),
                          ("graphics_not_shared_direct", "host esx-h100-02")]
    assert "0000:3b:00.0" in out[1]["message"]


def test_assignment_policy_off_design(derived):
    hosts = good_hosts()
    hosts[4]["graphics"]["assignment_policy"] = "spread"
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("assignment_policy_off_design", "host esx-l40s-01")]
    assert out[0]["severity"] == "warning"


def test_scheduler_off_design(derived):
    hosts = good_hosts()
    want = derived["esxi"]["clusters"]["gpu-h100"]["rmpvmrl"]
    hosts[2]["nvidia_module_options"] = "NVreg_RegistryDwords=RmPVMRL=0x00030011"
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("scheduler_off_design", "host esx-h100-03")]
    assert want in out[0]["fix"] and "fixed_share (RmPVMRL 0x00030011)" in out[0]["message"]


def test_scheduler_undecodable_is_off_design(derived):
    hosts = good_hosts()
    hosts[0]["nvidia_module_options"] = "NVreg_RegistryDwords=RmPVMRL=0x12"
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("scheduler_off_design", "host esx-h100-01")]
    assert "0x12" in out[0]["message"]


def test_rmpvmrl_is_read_by_the_nvidia_codec(derived):
    """A decimal RmPVMRL: the old audit read every value as hex, _nvidia (and so the converge) as decimal."""
    d = copy.deepcopy(derived)
    scheduler = dict(policy="fixed_share", time_slice_ms=None)
    d["esxi"]["clusters"]["gpu-l40s"]["scheduler"] = d["roles"]["esxi_gpu_host"]["gpu-l40s"]["esxi_gpu_host_scheduler"] = scheduler
    d["esxi"]["clusters"]["gpu-l40s"]["rmpvmrl"] = "0x00000011"
    hosts = good_hosts()
    l40s = [h for h in hosts if h["cluster"] == "gpu-l40s"]
    for h in l40s:
        # 17 = 0x11, fixed share: what an administrator typing esxcli may leave
        h["nvidia_module_options"] = "NVreg_RegistryDwords=RmPVMRL=17"
        h["scheduler"] = dict(policy="fixed_share", rmpvmrl="17")
    assert int("17", 16) != 0x11  # the old reading: 0x17, not a scheduler value at all
    assert _nvidia.get_scheduler("NVreg_RegistryDwords=RmPVMRL=17")["all"].canonical_value == 0x11
    assert _audit_esxi.audit_esxi(d, hosts, good_drs()) == []
    # the converge plans nothing for them either
    want = _audit_esxi.esxi_role_inputs(d["roles"]["esxi_gpu_host"]["gpu-l40s"])
    assert _esxi.hosts_to_roll(l40s, **want) == {}


@pytest.mark.parametrize("options", ["NVreg_RegistryDwords=RmPVMRL=0x00", "NVreg_RegistryDwords=RmPVMRL=0x00030003"])
def test_scheduler_values_the_converge_rewrites_are_reported(derived, options):
    """The old audit compared canonical values, so it called these clean while the role rewrites them."""
    d = copy.deepcopy(derived)
    if options.endswith("0x00030003"):  # the guide's equal-share 3 ms spelling; the role writes 0x00030001
        scheduler = dict(policy="equal_share", time_slice_ms=3)
        d["esxi"]["clusters"]["gpu-h100"]["scheduler"] = d["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_scheduler"] = scheduler
        d["esxi"]["clusters"]["gpu-h100"]["rmpvmrl"] = "0x00030001"
    hosts = good_hosts()
    for h in hosts:
        if h["cluster"] == "gpu-h100":
            h["nvidia_module_options"] = options if h["name"] == "esx-h100-01" else options_for(
                d["esxi"]["clusters"]["gpu-h100"])
    out = _audit_esxi.audit_esxi(d, hosts, good_drs())
    assert rules(out) == [("scheduler_off_design", "host esx-h100-01")]
    h100 = [h for h in hosts if h["cluster"] == "gpu-h100"]
    assert sorted(_esxi.hosts_to_roll(h100, **_audit_esxi.esxi_role_inputs(d["roles"]["esxi_gpu_host"]["gpu-h100"]))) == [
        "esx-h100-01"]


def test_host_in_maintenance_left_by_a_run_is_a_warning(derived):
    hosts = good_hosts()
    hosts[1]["maintenance_mode"] = True
    hosts[1]["maintenance_by_collection"] = "esxi_host_driver 2026-11-30T02:00:00Z"
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("host_in_maintenance", "host esx-h100-02")]
    assert out[0]["severity"] == "warning" and "esxi_host_driver" in out[0]["message"]


def test_host_in_maintenance_by_an_administrator_is_information(derived):
    hosts = good_hosts()
    hosts[1]["maintenance_mode"] = True
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("host_in_maintenance_by_admin", "host esx-h100-02")]
    assert out[0]["severity"] == "info" and _audit.is_clean(out)


def test_host_unreachable(derived):
    hosts = good_hosts()
    hosts[0]["connection_state"] = "notResponding"
    del hosts[0]["driver"]
    del hosts[0]["scheduler"]
    assert rules(_audit_esxi.audit_esxi(derived, hosts, good_drs())) == [("host_unreachable", "host esx-h100-01")]


# one drift per (field, action) of the ESXi plan: (how to make it on host esx-h100-01, design change)
ESXI_DRIFTS = [
    ("connection", "unreachable", dict(connection_state="notResponding"), None),
    ("read", "unreadable", dict(errors=["software packages: timed out"]), None),
    ("driver", "install", dict(driver=dict(version=None, full_version=None)), None),
    ("driver", "upgrade", dict(driver=dict(version="550.54.10", full_version=OLD)), None),
    ("driver", "refused", dict(driver=dict(version="560.28.03", full_version="560.28.03-1OEM.800.1.0.20613240")), None),
    ("vgpu_profiles", "reboot", dict(vgpu_profiles=[]), None),
    ("graphics", "unread", dict(graphics=None), None),
    ("graphics.default_type", "set", dict(graphics=dict(default_type="shared", assignment_policy="performance",
                                                        device_types={"0000:3b:00.0": "shared_direct"})), None),
    ("graphics.device_type", "set", dict(graphics=dict(default_type="shared_direct", assignment_policy="performance",
                                                       device_types={"0000:3b:00.0": "shared"})), None),
    ("graphics.assignment_policy", "set", dict(graphics=dict(default_type="shared_direct",
                                                             assignment_policy="consolidation",
                                                             device_types={"0000:3b:00.0": "shared_direct"})), None),
    ("graphics.vgpu_mode", "set", dict(gpus=[dict(pci_id="0000:3b:00.0", vgpu_mode="sameSize")]),
     dict(vgpu_mode="mixed_size")),
    ("nvidia_module_options", "set", dict(nvidia_module_options="NVreg_RegistryDwords=RmPVMRL=0x11"), None),
    ("nvidia_module_options", "refused", dict(nvidia_module_options="NVreg_RegistryDwords=RmPVMRL=0x12"), None),
    ("scheduler", "refused", dict(vgpu_vms=[dict(name="vm-1", moid="vm-1", power_state="poweredOn",
                                                 vgpu_profiles=["nvidia_h100-3-40c"])]),
     dict(scheduler=dict(policy="fixed_share", time_slice_ms=None), rmpvmrl="0x00000011")),
    ("reboot", "reboot", dict(reboot_pending=["reboot pending on the host (staged software not running)"]), None),
    ("maintenance_mode", "exit", dict(maintenance_mode=True, maintenance_by_collection="esxi_host_driver at 02:00"),
     None),
    ("vms_powered_off", "power_on", dict(vms_powered_off_by_collection=["vm-1"]), None),
    ("mig_mode", "set", dict(gpus=[dict(index=0, pci_id="0000:3b:00.0", model="H100-80GB", vgpu_mode="multiInstanceGpu",
                                        mig="enabled", vms=[])]), dict(mig_geometry=[[], [], [], []])),
    ("plan", "refused", {}, dict(graphics_type="vsga")),
]


def test_every_esxi_plan_field_has_a_rule_and_every_rule_a_source():
    fields = dict(_esxi.HOST_PLAN)
    for field in fields:
        assert (field in _audit_esxi.ESXI_RULE_BY_FIELD) != (field in _audit_esxi.ESXI_FIELDS_NOT_AUDITED), field
    for field, rule in _audit_esxi.ESXI_RULE_BY_FIELD.items():
        assert field in fields and _audit_report.RULES[rule][1] == "esxi" and _audit_report.RULES[rule][0] != "info", (field, rule)
    esxi_rules = set(r for r, (sev, link, doc) in _audit_report.RULES.items() if link == "esxi")
    assert esxi_rules == (set(_audit_esxi.ESXI_RULE_BY_FIELD.values()) | set(_audit_esxi.ESXI_RULES_BESIDES_THE_PLAN)
                          | set(_audit_esxi.PINNING_RULE_BY_CHANGE) | set(_audit_esxi.HA_RULE_BY_CHANGE))
    # every field the audit reports is made by a drift below, with each action the audit's inputs can reach
    assert set(f for f, act, drift, design in ESXI_DRIFTS) == set(_audit_esxi.ESXI_RULE_BY_FIELD)
    for field, action, drift, design in ESXI_DRIFTS:
        assert action in fields[field]


@pytest.mark.parametrize("field,action,drift,design", ESXI_DRIFTS, ids=["%s-%s" % (d[0], d[1]) for d in ESXI_DRIFTS])
def test_each_esxi_plan_item_is_reported_by_its_rule(derived, field, action, drift, design):
    """The role's plan (hosts_to_roll, as the esxi_gpu_host role calls it) and the audit agree on the drift."""
    d = copy.deepcopy(derived)
    summary, want = d["esxi"]["clusters"]["gpu-h100"], d["roles"]["esxi_gpu_host"]["gpu-h100"]
    summary.update(design or {})
    want.update(("esxi_gpu_host_" + k, v) for k, v in (design or {}).items() if k != "rmpvmrl")
    hosts = good_hosts()
    if design and "scheduler" in design:
        for h in hosts[:4]:
            h["nvidia_module_options"] = options_for(summary)
    hosts[0].update(drift)
    h100 = [h for h in hosts if h["cluster"] == "gpu-h100"]
    found, geometry = _audit_esxi.design_mig_geometry(d, "gpu-h100", want)
    mig = _audit_esxi.mig_changes(geometry, h100) if found else None
    plan = _esxi.hosts_to_roll(h100, mig=mig, **_audit_esxi.esxi_role_inputs(want))
    assert [(i.field, i.action) for i in plan["esx-h100-01"]] == [(field, action)]
    out = _audit_esxi.audit_esxi(d, hosts, good_drs())
    mine = [f for f in out if f["object"] == "host esx-h100-01"]
    assert [f["rule"] for f in mine] == [_audit_esxi.ESXI_RULE_BY_FIELD[field]]
    assert mine[0]["message"] and mine[0]["fix"]
    # the hosts the role would roll are the hosts the audit names, the others are clean on both sides
    named = sorted(set(f["object"][5:] for f in out if f["object"].startswith("host ") and f["severity"] != "info"))
    assert named == sorted(plan)
    if field != "plan":  # a setting no host can take is refused on every host
        assert sorted(plan) == ["esx-h100-01"]


# --- per GPU: MIG mode against the geometry, vGPUs on GPUs of their kind, SSH ------------------------

GEOMETRY = [[], [], [0, 1], [0, 1]]  # examples/design.yml gpu-h100: the last two hosts run MIG on GPUs 0 and 1


def gpu(index, mode, vms=(), model="H100-80GB"):
    return dict(index=index, pci_id="0000:%02x:00.0" % (0x3b + index), model=model, vgpu_mode=mode,
                mig="enabled" if mode == "multiInstanceGpu" else "disabled",
                vms=[dict(name=n, moid=n, profiles=list(p)) for n, p in vms])


def per_gpu_hosts(geometry=None):
    """good_hosts() with gpu_host_info's per-GPU view: each H100 host's GPUs in the geometry's modes."""
    geometry = GEOMETRY if geometry is None else geometry
    hosts = good_hosts()
    for position, h in enumerate(h for h in hosts if h["cluster"] == "gpu-h100"):
        mig = geometry[position]
        h["gpus"] = [gpu(i, "multiInstanceGpu" if i in mig else "sameSize") for i in range(4)]
    for h in hosts:
        if h["cluster"] == "gpu-l40s":
            h["gpus"] = [gpu(i, "sameSize", model="L40S") for i in range(2)]
    return hosts


def with_geometry(derived, geometry=None, cluster="gpu-h100"):
    geometry = GEOMETRY if geometry is None else geometry
    d = copy.deepcopy(derived)
    d["esxi"]["clusters"][cluster]["mig_geometry"] = geometry
    d["roles"]["esxi_gpu_host"][cluster]["esxi_gpu_host_mig_geometry"] = geometry
    return d


def test_gpus_in_the_geometry_modes_are_clean(derived):
    assert _audit_esxi.audit_esxi(with_geometry(derived), per_gpu_hosts(), good_drs()) == []


def test_a_gpu_off_the_geometry_is_named_by_host_and_index(derived):
    hosts = per_gpu_hosts()
    hosts[0]["gpus"][3] = gpu(3, "multiInstanceGpu")      # esx-h100-01 GPU 3 in MIG mode, the design has none
    hosts[2]["gpus"][1] = gpu(1, "sameSize")              # esx-h100-03 GPU 1 without MIG, the design has it
    out = _audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs())
    assert rules(out) == [("gpu_mig_off_design", "host esx-h100-01"), ("gpu_mig_off_design", "host esx-h100-03")]
    by = dict((f["object"], f) for f in out)
    assert "GPU 3 runs in MIG mode" in by["host esx-h100-01"]["message"]
    assert "GPU 1 runs without MIG" in by["host esx-h100-03"]["message"]
    assert "MIG GPUs wanted: 0, 1" in by["host esx-h100-03"]["message"]
    assert all(f["severity"] == "error" and "esxi_gpu_host" in f["fix"] for f in out)
    # the same comparator as the role: the hosts it would roll for MIG are the hosts named
    h100 = [h for h in hosts if h["cluster"] == "gpu-h100"]
    changes = _audit_esxi.mig_changes(GEOMETRY, h100)
    assert changes["esx-h100-01"]["before"] == {3: "enabled"} and changes["esx-h100-01"]["after"] == {3: "disabled"}
    assert changes["esx-h100-03"]["after"] == {1: "enabled"}
    want = _audit_esxi.esxi_role_inputs(derived["roles"]["esxi_gpu_host"]["gpu-h100"])
    assert sorted(_esxi.hosts_to_roll(h100, mig=changes, **want)) == ["esx-h100-01", "esx-h100-03"]


def test_the_mig_rule_takes_a_mapping_geometry(derived):
    geometry = {"esx-h100-04": [0, 1, 2, 3]}
    out = _audit_esxi.audit_esxi(with_geometry(derived, geometry), per_gpu_hosts(), good_drs())
    assert rules(out) == [("gpu_mig_off_design", "host esx-h100-03"), ("gpu_mig_off_design", "host esx-h100-04")]


def test_the_mig_rule_skips_without_a_geometry_or_a_vgpu_mode(derived):
    hosts = per_gpu_hosts([[0, 1, 2, 3]] * 4)  # every GPU in MIG mode
    d = copy.deepcopy(derived)
    for c in d["esxi"]["clusters"].values():
        c.pop("mig_geometry", None)
    for want in d["roles"]["esxi_gpu_host"].values():
        want.pop("esxi_gpu_host_mig_geometry", None)
    assert _audit_esxi.audit_esxi(d, hosts, good_drs()) == []
    # a host on an API without vgpuMode (before 8.0.3) cannot be judged: only an info finding names it
    for h in hosts[:4]:
        h["gpus"][0]["vgpu_mode"] = None
    out = _audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs())
    assert rules(out) == [("gpu_mig_not_read", "cluster gpu-h100")] and _audit.is_clean(out)
    assert "esx-h100-01, esx-h100-02, esx-h100-03, esx-h100-04" in out[0]["message"] and out[0]["severity"] == "info"
    # without a geometry there is nothing to judge, so nothing to say
    assert _audit_esxi.audit_esxi(d, hosts, good_drs()) == []
    # nor is a host that is not connected (host_unreachable names it)
    hosts = per_gpu_hosts([[0, 1, 2, 3]] * 4)
    hosts[0]["connection_state"] = "notResponding"
    assert ("gpu_mig_off_design", "host esx-h100-01") not in rules(_audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs()))


def test_a_geometry_the_hosts_cannot_take_is_not_plannable(derived):
    out = _audit_esxi.audit_esxi(with_geometry(derived, [[0]], cluster="gpu-l40s"), per_gpu_hosts(), good_drs())
    assert rules(out) == [("host_not_plannable", "host esx-l40s-01")]
    assert "cannot run MIG" in out[0]["message"]
    out = _audit_esxi.audit_esxi(with_geometry(derived, {"esx-h100-09": [0]}), per_gpu_hosts(), good_drs())
    assert rules(out) == [("host_not_plannable", "cluster gpu-h100")] and "esx-h100-09" in out[0]["message"]
    out = _audit_esxi.audit_esxi(with_geometry(derived, [[], [], [0, 7], [0, 1]]), per_gpu_hosts(), good_drs())
    assert rules(out) == [("host_not_plannable", "host esx-h100-03")] and "no GPU with index 7" in out[0]["message"]


def test_mig_rows_are_the_per_gpu_view():
    h = dict(gpus=[gpu(0, "multiInstanceGpu"), gpu(1, "mixedSize"), gpu(2, "none", model="L40S")])
    assert _audit_esxi.mig_rows(h) == [dict(index=0, pci_id="0000:3b:00.0", current=True, pending=True, supported=True),
                                       dict(index=1, pci_id="0000:3c:00.0", current=False, pending=False, supported=True),
                                       dict(index=2, pci_id="0000:3d:00.0", current=False, pending=False, supported=False)]
    h["gpus"][1]["vgpu_mode"] = None
    assert _audit_esxi.mig_rows(h) is None


@pytest.mark.parametrize("mode,vms,why", [
    ("sameSize", [("infer-01", ["nvidia_h100-3-40c"])], "a MIG-backed vGPU on a GPU without MIG (vGPU mode sameSize)"),
    ("mixedSize", [("infer-01", ["nvidia_h100-3-40c"])], "a MIG-backed vGPU on a GPU without MIG (vGPU mode mixedSize)"),
    ("multiInstanceGpu", [("train-01", ["nvidia_h100-80c"])], "a time-sliced vGPU on a GPU in MIG mode"),
    ("sameSize", [("a", ["nvidia_h100-20c"]), ("b", ["nvidia_h100-40c"])], "vGPUs of 2 sizes on a sameSize GPU"),
])
def test_a_vgpu_on_a_gpu_of_the_wrong_kind_is_named(derived, mode, vms, why):
    # GPU 2 of esx-h100-02 runs without MIG in the geometry, GPU 0 of esx-h100-03 with: each mode stays the design's
    hosts = per_gpu_hosts()
    host, index = (1, 2) if mode != "multiInstanceGpu" else (2, 0)
    hosts[host]["gpus"][index] = gpu(index, mode, vms)
    out = _audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs())
    assert rules(out) == [("gpu_vgpu_mode_mismatch", "host %s gpu %d" % (hosts[host]["name"], index))]
    assert why in out[0]["message"] and "behind its back" in out[0]["message"]
    assert out[0]["severity"] == "error" and "nvidia-smi -i %d" % index in out[0]["fix"]
    if vms[0][0] == "infer-01":
        assert "VM infer-01 holds nvidia_h100-3-40c" in out[0]["message"]


def test_vgpus_on_gpus_of_their_kind_are_clean(derived):
    hosts = per_gpu_hosts()
    hosts[2]["gpus"][0] = gpu(0, "multiInstanceGpu", [("i-1", ["nvidia_h100-3-40c"]), ("i-2", ["nvidia_h100-1-10c"])])
    hosts[1]["gpus"][1] = gpu(1, "sameSize", [("t-1", ["nvidia_h100-80c"])])
    hosts[1]["gpus"][2] = gpu(2, "mixedSize", [("a", ["nvidia_h100-20c"]), ("b", ["nvidia_h100-40c"])])
    hosts[1]["gpus"][3] = gpu(3, "sameSize", [("c", ["nvidia_h100-20c"]), ("d", ["nvidia_h100-20c"])])
    hosts[0]["gpus"][0]["vms"] = None  # VMs not read: nothing to judge
    assert _audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs()) == []
    # a host not connected: what vCenter keeps of it is stale, only host_unreachable names it
    hosts[1]["gpus"][0] = gpu(0, "sameSize", [("i-3", ["nvidia_h100-3-40c"])])
    hosts[1]["connection_state"] = "notResponding"
    assert rules(_audit_esxi.audit_esxi(with_geometry(derived), hosts, good_drs())) == [("host_unreachable", "host esx-h100-02")]


def test_gpu_hosts_left_with_ssh_running_are_one_warning_naming_them(derived):
    hosts = good_hosts()
    hosts[1]["ssh_service"] = "running"
    hosts[3]["ssh_service"] = "running"
    hosts[0]["ssh_service"] = "stopped"
    hosts[4]["ssh_service"] = "unknown"
    hosts[-1]["ssh_service"] = "running"  # a management host without GPUs is not the GPU pool's
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("host_ssh_running", "cluster gpu-h100")]
    assert out[0]["severity"] == "warning" and "esx-h100-02, esx-h100-04" in out[0]["message"]
    assert "TSM-SSH" in out[0]["message"] + out[0]["fix"]


def test_cluster_missing_and_hosts_short(derived):
    hosts = [h for h in good_hosts() if h["cluster"] != "gpu-l40s"][:3]
    out = _audit_esxi.audit_esxi(derived, hosts, good_drs())
    assert rules(out) == [("cluster_missing", "cluster gpu-l40s"), ("gpu_hosts_short", "cluster gpu-h100")]


def test_gpu_vm_not_pinned(derived):
    drs = good_drs()
    del drs["gpu-h100"]["overrides"]["vm-1"]
    drs["gpu-h100"]["overrides"]["vm-2"]["enabled"] = False
    drs["gpu-h100"]["overrides"]["vm-3"]["behavior"] = "fullyAutomated"
    drs["gpu-h100"]["overrides"]["vm-4"]["behavior"] = "manual"
    out = _audit_esxi.audit_esxi(derived, good_hosts(), drs)
    assert rules(out) == [("gpu_vm_not_pinned", "vm vm-1"), ("gpu_vm_not_pinned", "vm vm-2"),
                          ("gpu_vm_not_pinned", "vm vm-3"), ("gpu_vm_pin_behavior", "vm vm-4")]
    by = dict((f["object"], f) for f in out)
    assert "no DRS override" in by["vm vm-1"]["message"] and "disabled" in by["vm vm-2"]["message"]
    assert "cluster=gpu-h100" in by["vm vm-1"]["fix"]


def test_drs_overrides_disabled(derived):
    drs = good_drs()
    drs["gpu-l40s"]["overrides_enabled"] = False
    assert rules(_audit_esxi.audit_esxi(derived, good_hosts(), drs)) == [("drs_overrides_disabled", "cluster gpu-l40s")]


def test_no_pinning_in_design_means_no_pinning_findings(derived):
    d = copy.deepcopy(derived)
    d["roles"]["drs_gpu_pinning"]["drs_gpu_pinning_clusters"] = []
    assert _audit_esxi.audit_esxi(d, good_hosts(), {}) == []


# --- vsphere ---------------------------------------------------------------------------------------


POLICIES = {"pol-vsan": "vSAN Default Storage Policy", "pol-gold": "Gold"}


def namespace_info(n, extra_classes=("best-effort-small",)):
    """A namespace's Info as the vSphere API returns it, with what the role gave it from the design."""
    ids = dict((name, i) for i, name in POLICIES.items())
    limits = dict((api, n["limits"][k]) for k, api in _namespace.LIMITS if n["limits"][k] is not None)
    specs = []
    for spec in n["storage_policies"]:
        specs.append(dict(policy=ids[spec["policy"]], limit=spec["limit_mib"]) if spec["limit_mib"] else
                     dict(policy=ids[spec["policy"]]))
    return {"cluster": "domain-c9", "description": n["description"],
            "vm_service_spec": {"vm_classes": list(n["vm_classes"]) + list(extra_classes), "content_libraries": []},
            "storage_specs": specs,
            "resource_spec": limits,
            "access_list": [{"subject_type": e["type"], "domain": e["domain"], "subject": e["subject"],
                             "role": e["role"]} for e in n["access"]]}


def good_vsphere(derived):
    """(VM classes, namespaces, storage policies) as gpu_pool_audit reads them when the role has run."""
    classes = dict((c["name"], _vm_class.normalize(dict(
        cpu_count=c["cpu_count"], memory_MB=c["memory_mb"], memory_reservation=100, cpu_reservation=0,
        description=c["description"], config_spec=_vm_class.vgpu_config_spec(c))))
        for c in derived["vsphere"]["vm_classes"])
    classes["best-effort-small"] = _vm_class.normalize(dict(cpu_count=2, memory_MB=4096))
    namespaces = dict((n["name"], _namespace.normalize(namespace_info(n))) for n in derived["vsphere"]["namespaces"])
    return classes, namespaces, dict(POLICIES)


def test_vsphere_clean(derived):
    assert _audit_vsphere.audit_vsphere(derived, *good_vsphere(derived)) == []


def test_vm_class_missing(derived):
    classes, namespaces, policies = good_vsphere(derived)
    del classes["gpu-training"]
    assert rules(_audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)) == [("vm_class_missing", "vm_class gpu-training")]


def test_vm_class_profiling_missing(derived):
    """A class whose vGPU lost pciPassthru0.cfg.enable_profiling is found; one set where the design has it off too."""
    classes, namespaces, policies = good_vsphere(derived)
    on = [c for c in derived["vsphere"]["vm_classes"] if c["profiling"]]
    off = [c for c in derived["vsphere"]["vm_classes"] if c["vgpu_profiles"] and not c["profiling"]]
    assert on and off
    classes[on[0]["name"]] = _vm_class.normalize(dict(
        cpu_count=on[0]["cpu_count"], memory_MB=on[0]["memory_mb"], memory_reservation=100, cpu_reservation=0,
        description=on[0]["description"], config_spec=_vm_class.vgpu_config_spec(dict(on[0], profiling=False))))
    classes[off[0]["name"]]["profiling"] = True
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == sorted([("vm_class_profiling_missing", "vm_class %s" % on[0]["name"]),
                                 ("vm_class_profiling_missing", "vm_class %s" % off[0]["name"])])
    assert "profiling off" in [f for f in out if on[0]["name"] in f["object"]][0]["message"]


def test_vm_class_profile_changed(derived):
    classes, namespaces, policies = good_vsphere(derived)
    classes["gpu-inference"]["vgpu_profiles"] = ["nvidia_h100-2-20c"]
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == [("vm_class_profile_changed", "vm_class gpu-inference")]
    assert "nvidia_h100-2-20c" in out[0]["message"] and "nvidia_h100-3-40c" in out[0]["message"]


def test_vm_class_profile_compared_without_case_or_order(derived):
    classes, namespaces, policies = good_vsphere(derived)
    classes["gpu-inference"] = _vm_class.normalize(dict(
        cpu_count=8, memory_MB=65536, memory_reservation=100, description=classes["gpu-inference"]["description"],
        devices={"vgpu_devices": [{"profile_name": "NVIDIA_H100-3-40C"}]}))
    classes["gpu-inference"]["profiling"] = [c for c in derived["vsphere"]["vm_classes"] if c["name"] == "gpu-inference"][0]["profiling"]
    assert _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) == []


def test_vm_class_size_changed(derived):
    classes, namespaces, policies = good_vsphere(derived)
    classes["gpu-notebooks"]["cpu_count"] = 2
    classes["gpu-notebooks"]["memory_reservation"] = 50
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == [("vm_class_size_changed", "vm_class gpu-notebooks")]
    assert out[0]["severity"] == "warning" and "vCPUs 2" in out[0]["message"]
    assert "memory reservation % 50 (design 100)" in out[0]["message"]


def test_namespace_missing_and_class_missing(derived):
    classes, namespaces, policies = good_vsphere(derived)
    del namespaces["research"]
    namespaces["team-vision"]["vm_classes"] = ["gpu-inference"]
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == [("namespace_class_missing", "namespace team-vision"),
                          ("namespace_missing", "namespace research")]
    msg = [f for f in out if f["rule"] == "namespace_class_missing"][0]["message"]
    assert "gpu-training" in msg and "gpu-notebooks" in msg


def test_namespace_limits_storage_access_description(derived):
    """Drift the converge repairs that the old audit did not see."""
    classes, namespaces, policies = good_vsphere(derived)
    ns = namespaces["team-search"]
    ns["limits"]["memory_mib"] = 1024
    ns["storage_policies"] = {"pol-vsan": 1024}
    ns["access"] = [e for e in ns["access"] if e["subject"] != "search-leads"]
    ns["access"][0]["role"] = "VIEW"
    ns["description"] = "somebody's namespace"
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert rules(out) == [("namespace_access_changed", "namespace team-search"),
                          ("namespace_description_changed", "namespace team-search"),
                          ("namespace_limits_changed", "namespace team-search"),
                          ("namespace_storage_changed", "namespace team-search")]
    by = dict((f["rule"], f) for f in out)
    assert "search-leads" in by["namespace_access_changed"]["message"]
    assert "vSAN Default Storage Policy: 1024" in by["namespace_storage_changed"]["message"]
    assert "524288" in by["namespace_limits_changed"]["message"]
    # an entry the design does not list, a policy it does not name: left alone without the purge options
    namespaces = good_vsphere(derived)[1]
    namespaces["team-search"]["access"].append(dict(type="USER", domain="vsphere.local", subject="eve", role="EDIT"))
    namespaces["team-search"]["storage_policies"]["pol-gold"] = None
    assert _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies) == []


def test_namespace_purge_options_are_the_role_inputs(derived):
    d = copy.deepcopy(derived)
    classes, namespaces, policies = good_vsphere(d)
    namespaces["team-search"]["access"].append(dict(type="USER", domain="vsphere.local", subject="eve", role="EDIT"))
    namespaces["team-search"]["vm_classes"].append("gpu-training")
    ns = [n for n in d["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_namespaces"]
          if n["name"] == "team-search"][0]
    # derive() has the role purge the GPU classes the design does not give a namespace
    assert ns["purge_gpu_vm_classes"] is True
    ns.update(purge_gpu_vm_classes=False)
    assert _audit_vsphere.audit_vsphere(d, classes, namespaces, policies) == []
    ns.update(purge_access=True, purge_gpu_vm_classes=True)
    out = _audit_vsphere.audit_vsphere(d, classes, namespaces, policies)
    assert rules(out) == [("namespace_access_changed", "namespace team-search"),
                          ("namespace_class_extra", "namespace team-search")]
    extra = [f for f in out if f["rule"] == "namespace_class_extra"][0]
    # the GPU class is removed, the non-GPU class the control plane may use stays
    assert "gpu-training" in extra["message"] and "best-effort-small" not in extra["message"]


def test_storage_policies_not_judged_without_their_names(derived):
    classes, namespaces, policies = good_vsphere(derived)
    namespaces["team-search"]["storage_policies"] = {"pol-vsan": 1}
    assert _audit_vsphere.audit_vsphere(derived, classes, namespaces) == []
    assert rules(_audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)) == [
        ("namespace_storage_changed", "namespace team-search")]
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, {"pol-other": "Other"})
    assert set(rules(out)) == set(("namespace_storage_changed", "namespace %s" % n["name"])
                                  for n in derived["vsphere"]["namespaces"])
    assert "unknown storage policy vSAN Default Storage Policy" in out[0]["message"]


# one drift per field the vm_class / supervisor_namespace modules compare: (field, change to the live object)
VM_CLASS_DRIFTS = [
    ("cpu_count", dict(cpu_count=1)),
    ("memory_mb", dict(memory_mb=1024)),
    ("cpu_reservation", dict(cpu_reservation=50)),  # the design leaves it alone: no plan, no finding
    ("memory_reservation", dict(memory_reservation=0)),
    ("description", dict(description="gpupool edited by hand")),  # still marked: the collection's, set back
    ("vgpu_profiles", dict(vgpu_profiles=["nvidia_h100-1-10c"])),
    ("profiling", dict(profiling=False)),
]
NAMESPACE_DRIFTS = [
    ("description", dict(description="")),
    ("vm_classes", dict(vm_classes=["best-effort-small"])),
    ("content_libraries", dict(content_libraries=["lib-1"])),  # the design leaves it alone
    ("storage_policies", dict(storage_policies={"pol-vsan": 1})),
    ("limits", dict(limits=dict(cpu_mhz=1, memory_mib=1, storage_mib=1))),
    ("access", dict(access=[])),
]


def test_every_vsphere_field_has_a_rule_and_every_rule_a_field():
    assert set(_audit_vsphere.VM_CLASS_RULE_BY_FIELD) == set(_vm_class.FIELDS)
    assert set(_audit_vsphere.NAMESPACE_RULE_BY_FIELD) == set(_namespace.FIELDS)
    assert set(_namespace.FIELDS) == set(_namespace.empty("c")) - {"cluster"}
    vsphere_rules = set(r for r, (sev, link, doc) in _audit_report.RULES.items() if link == "vsphere")
    mapped = set(_audit_vsphere.VM_CLASS_RULE_BY_FIELD.values()) | set(_audit_vsphere.NAMESPACE_RULE_BY_FIELD.values())
    assert vsphere_rules == mapped | {"vm_class_missing", "namespace_missing", "namespace_class_extra", "object_not_owned",
                                      "zone_binding_missing", "zone_binding_reservations_changed"}
    assert set(f for f, drift in VM_CLASS_DRIFTS) == set(_vm_class.FIELDS)
    assert set(f for f, drift in NAMESPACE_DRIFTS) == set(_namespace.FIELDS)


def _module_vm_class_fields(want, have):
    """What vm_class plans with the role's options (its own calls: desired, merge, differs)."""
    options = dict((k, want.get(k)) for k in _vm_class.FIELDS)
    options["name"] = want["name"]
    return _vm_class.differs(have, _vm_class.merge(have, _vm_class.desired(options)))


@pytest.mark.parametrize("field,drift", VM_CLASS_DRIFTS, ids=[d[0] for d in VM_CLASS_DRIFTS])
def test_each_vm_class_drift_is_planned_and_reported_alike(derived, field, drift):
    classes, namespaces, policies = good_vsphere(derived)
    classes["gpu-inference"].update(drift)
    want = [c for c in derived["vsphere"]["vm_classes"] if c["name"] == "gpu-inference"][0]
    planned = _module_vm_class_fields(want, classes["gpu-inference"])
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert [f["rule"] for f in out] == [_audit_vsphere.VM_CLASS_RULE_BY_FIELD[f] for f in planned]
    assert all(f["object"] == "vm_class gpu-inference" and f["fix"] for f in out)
    if field != "cpu_reservation":
        assert planned == [field]


def _module_namespace_fields(want, have, policies):
    """What supervisor_namespace plans with the role's options (resolve, merge, differs)."""
    storage = want["storage_policies"]
    ids = _namespace.resolve([p["policy"] for p in storage], policies, "storage policy", "storage policies")
    options = dict(description=want["description"], vm_classes=want["vm_classes"],
                   limits=_namespace.check_limits(want["limits"]), access=_namespace.check_access(want["access"]),
                   storage_policies=[dict(policy=i, limit_mib=p["limit_mib"]) for i, p in zip(ids, storage)])
    after = _namespace.merge(have, options, purge_lists=want.get("purge_lists", False),
                             purge_access=want.get("purge_access", False))
    return _namespace.differs(have, after)


@pytest.mark.parametrize("field,drift", NAMESPACE_DRIFTS, ids=[d[0] for d in NAMESPACE_DRIFTS])
def test_each_namespace_drift_is_planned_and_reported_alike(derived, field, drift):
    classes, namespaces, policies = good_vsphere(derived)
    namespaces["team-search"].update(copy.deepcopy(drift))
    want = [n for n in derived["vsphere"]["namespaces"] if n["name"] == "team-search"][0]
    planned = _module_namespace_fields(want, namespaces["team-search"], policies)
    out = _audit_vsphere.audit_vsphere(derived, classes, namespaces, policies)
    assert [f["rule"] for f in out] == [_audit_vsphere.NAMESPACE_RULE_BY_FIELD[f] for f in planned]
    assert all(f["object"] == "namespace team-search" and f["fix"] for f in out)
    if field != "content_libraries":
        assert planned == [field]


# --- vks -------------------------------------------------------------------------------------------


def good_vks(derived):
    out = {}
    for name, c in derived["vks"]["clusters"].items():
        out[name] = dict(namespace=c["namespace"], machine_deployments=dict(
            (p["name"], dict(replicas=p["replicas"], vm_class=p["vm_class"])) for p in c["node_pools"]))
    return out


def test_vks_clean_and_rules(derived):
    assert _audit_vks.audit_vks(derived, good_vks(derived)) == []
    live = good_vks(derived)
    mds = live["gpu-workloads"]["machine_deployments"]
    del mds["notebooks"]
    mds["training"]["replicas"] = 1
    assert rules(_audit_vks.audit_vks(derived, live)) == [("node_pool_changed", "node_pool gpu-workloads/training"),
                                                          ("node_pool_missing", "node_pool gpu-workloads/notebooks")]
    assert rules(_audit_vks.audit_vks(derived, {})) == [("vks_cluster_missing", "vks_cluster gpu-workloads")]


# --- guest -----------------------------------------------------------------------------------------


def node(name, pool, derived, **kw):
    np = [p for c in derived["vks"]["clusters"].values() for p in c["node_pools"] if p["name"] == pool][0]
    n = dict(name=name, labels=dict(np["labels"]), taints=[dict(t) for t in np["taints"]],
             capacity={"nvidia.com/gpu": "1"})
    n.update(kw)
    return n


def good_guest(derived):
    """The guest cluster as the roles leave it, with the inputs derive() gives them."""
    policy = derived["roles"]["gpu_scheduling_policy"]
    tenants = policy["gpu_scheduling_policy_tenants"]
    quotas = dict((t["namespace"], dict((q["name"], dict(q["hard"])) for q in t["quotas"])) for t in tenants)
    return dict(
        nodes=[node("inference-0", "inference", derived), node("training-0", "training", derived),
               node("notebooks-0", "notebooks", derived),
               dict(name="cpu-0", labels={"gpupool.vcf/pool": "cpu"}, taints=[], capacity={"cpu": "8"})],
        namespaces=["default", "gpu-operator"] + [t["namespace"] for t in tenants],
        resource_quotas=quotas,
        secrets={"gpu-operator": ["licensing-config"]},
        priority_classes=dict((p["name"], dict(value=p["value"], preemptionPolicy=p["preemption_policy"]))
                              for p in policy["gpu_scheduling_policy_priority_classes"]))


def test_guest_clean(derived):
    assert _audit_guest.audit_guest(derived, **good_guest(derived)) == []


def test_gpu_node_untainted(derived):
    live = good_guest(derived)
    live["nodes"][0]["taints"] = [t for t in live["nodes"][0]["taints"] if t["key"] != "nvidia.com/gpu"]
    live["nodes"].append(dict(name="stray-gpu", labels={"nvidia.com/gpu.present": "true"}, taints=[],
                              capacity={"nvidia.com/gpu": "1"}))
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("gpu_node_untainted", "node inference-0"), ("gpu_node_untainted", "node stray-gpu")]
    assert "nvidia.com/gpu=present:NoSchedule" in out[0]["message"] and "(pool inference)" in out[0]["message"]


def test_gpu_node_by_mig_capacity_only(derived):
    live = good_guest(derived)
    live["nodes"].append(dict(name="mig-0", labels={}, taints=[], capacity={"nvidia.com/mig-1g.10gb": "7"}))
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("gpu_node_untainted", "node mig-0")]


def test_pool_taint_missing_is_untainted(derived):
    live = good_guest(derived)
    live["nodes"][1]["taints"] = [t for t in live["nodes"][1]["taints"] if t["key"] != "gpupool.vcf/pool"]
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("gpu_node_untainted", "node training-0")]
    assert "gpupool.vcf/pool=training:NoSchedule" in out[0]["message"]


def test_gpu_node_profile_label_missing(derived):
    live = good_guest(derived)
    del live["nodes"][2]["labels"]["nvidia.com/vgpu.profile"]
    live["nodes"][0]["labels"]["nvidia.com/vgpu.profile"] = "nvidia_h100-1-10c"
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("gpu_node_profile_label_missing", "node inference-0"),
                          ("gpu_node_profile_label_missing", "node notebooks-0")]


def test_node_pool_no_nodes(derived):
    live = good_guest(derived)
    live["nodes"] = [n for n in live["nodes"] if n["name"] != "training-0"]
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("node_pool_no_nodes", "node_pool training")]


def test_gpu_quota_missing_and_changed(derived):
    live = good_guest(derived)
    del live["resource_quotas"]["team-search"]["gpupool-gpus"]
    live["resource_quotas"]["research"]["gpupool-gpus"]["requests.nvidia.com/gpu"] = "99"
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("gpu_quota_changed", "resource_quota research/gpupool-gpus"),
                          ("gpu_quota_missing", "resource_quota team-search/gpupool-gpus")]


def test_guest_namespace_missing_reports_once(derived):
    live = good_guest(derived)
    live["namespaces"].remove("research")
    del live["resource_quotas"]["research"]
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("guest_namespace_missing", "namespace research")]


def test_priority_class_missing_and_changed(derived):
    live = good_guest(derived)
    del live["priority_classes"]["gpu-training"]
    live["priority_classes"]["gpu-notebook"]["preemptionPolicy"] = "PreemptLowerPriority"
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("priority_class_changed", "priority_class gpu-notebook"),
                                                                ("priority_class_missing", "priority_class gpu-training")]


def test_licensing_secret_missing(derived):
    live = good_guest(derived)
    live["secrets"] = {"gpu-operator": []}
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("licensing_secret_missing", "secret gpu-operator/licensing-config")]
    assert out[0]["link"] == "guest"


def test_licensing_not_checked_when_nls_off(derived):
    d = copy.deepcopy(derived)
    d["roles"]["gpu_operator"]["gpu_operator_licensing_secret_name"] = ""
    live = good_guest(d)
    live["secrets"] = {}
    assert _audit_guest.audit_guest(d, **live) == []


def test_parts_not_read_are_not_judged(derived):
    assert _audit_guest.audit_guest(derived) == []


# --- results and reports ---------------------------------------------------------------------------


def sample():
    return _audit_report.sort_findings([
        _audit.not_audited("guest", "no connection given", "give kubeconfig"),
        _audit_vsphere.finding("vm_class_missing", "vm_class x", "missing | <b>&", "create it"),
        _audit_esxi.finding("host_in_maintenance", "host h", "in maintenance\nmode", "exit"),
    ])


def test_sort_summary_clean_fail_on():
    f = sample()
    assert [x["rule"] for x in f] == ["host_in_maintenance", "vm_class_missing", "link_not_audited"]
    s = _audit.summarize(f)
    assert s["total"] == 3 and s["severity"] == {"error": 1, "warning": 1, "info": 1}
    assert s["link"]["guest"]["info"] == 1 and s["link"]["esxi"]["warning"] == 1
    assert not _audit.is_clean(f) and _audit.is_clean([f[2]])
    assert _audit.should_fail(f, "error") and _audit.should_fail(f, "warning") and not _audit.should_fail(f, "none")
    assert not _audit.should_fail([f[0]], "error") and _audit.should_fail([f[0]], "warning")


def test_render_markdown_escapes_cells():
    f = sample()
    text = _audit_report.render("pool", f, _audit.summarize(f), ["esxi", "vsphere"], "markdown")
    assert "| rule | severity | link | object | message | fix |" in text
    assert "missing \\| <b>&" in text and "in maintenance mode" in text
    row = [line for line in text.splitlines() if line.startswith("| vm_class_missing")][0]
    assert row.replace("\\|", "").count("|") == 7


def test_render_html_escapes():
    f = sample()
    text = _audit_report.render("<pool>", f, _audit.summarize(f), ["esxi"], "html")
    assert "&lt;pool&gt;" in text and "missing | &lt;b&gt;&amp;" in text and "<b>" not in text


def test_render_json_and_stable():
    f = sample()
    one = _audit_report.render("pool", f, _audit.summarize(f), ["esxi"], "json")
    assert json.loads(one)["findings"][1]["rule"] == "vm_class_missing"
    assert one == _audit_report.render("pool", f, _audit.summarize(f), ["esxi"], "json")
    assert "No findings." in _audit_report.render("pool", [], _audit.summarize([]), [], "markdown")
    with pytest.raises(ValueError):
        _audit_report.render("pool", f, _audit.summarize(f), [], "pdf")


def test_licensing_secret_rotated_by_name_is_accepted(derived):
    live = good_guest(derived)
    live["secrets"] = {"gpu-operator": ["licensing-config-0123456789"]}
    assert _audit_guest.audit_guest(derived, **live) == []
    live["secrets"] = {"gpu-operator": ["licensing-config-old", "other"]}
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("licensing_secret_missing", "secret gpu-operator/licensing-config")]


def test_licensing_secret_named_by_cluster_policy(derived):
    live = good_guest(derived)
    live["secrets"] = {"gpu-operator": ["licensing-config-0123456789"]}
    live["licensing_secret_in_use"] = "licensing-config-0123456789"
    assert _audit_guest.audit_guest(derived, **live) == []
    live["licensing_secret_in_use"] = "licensing-config-abcdefabcd"
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("licensing_secret_missing", "secret gpu-operator/licensing-config-abcdefabcd")]
    assert "ClusterPolicy" in out[0]["message"]


# --- Kubernetes: what the roles write, from the inputs derive() gives them ---------------------------

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _cluster_class  # noqa: E402
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs  # noqa: E402


@pytest.mark.parametrize("role", sorted(objs.ROLE_DEFAULTS))
def test_role_defaults_are_the_roles_own(role):
    """The audit expects the roles' defaults for what derive() does not set: the same values."""
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    for key, value in objs.ROLE_DEFAULTS[role].items():
        assert key in defaults, key
        assert defaults[key] == value, key


@pytest.mark.parametrize("role", sorted(objs.ROLE_DEFAULTS))
def test_derived_role_inputs_are_the_roles_options(role):
    """The audit builds on the inputs derive() gives a role: each is an option the role declares."""
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    given = DERIVED["roles"][role]
    for entry in given if isinstance(given, list) else [given]:
        for key in entry:
            assert key in options, key
    for key in objs.ROLE_DEFAULTS[role]:
        assert key in options, key


def test_node_pools_as_the_role_hands_them_over():
    inputs = objs.role_inputs("vks_gpu_node_pools", {"vks_gpu_node_pools_node_pools": [
        {"name": "a", "taints": [{"key": "x", "value": "1", "effect": "NoSchedule"},
                                 {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        {"name": "cpu", "gpu": False}]})
    pools = objs.node_pools(inputs)
    assert pools[0]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                  {"key": "x", "value": "1", "effect": "NoSchedule"}]
    assert pools[1] == {"name": "cpu"} and "gpu" not in pools[0]


def vks_live(derived):
    out = {}
    for name, c in derived["vks"]["clusters"].items():
        mds = {}
        for p in c["node_pools"]:
            mds[p["name"]] = dict(replicas=p["replicas"], vm_class=p["vm_class"], labels=dict(p["labels"]),
                                  taints=[dict(t) for t in p["taints"]])
        out[name] = dict(namespace=c["namespace"], machine_deployments=mds)
    return out


def test_vks_labels_and_taints(derived):
    live = vks_live(derived)
    assert _audit_vks.audit_vks(derived, live) == []
    mds = live["gpu-workloads"]["machine_deployments"]
    mds["inference"]["taints"] = [t for t in mds["inference"]["taints"] if t["key"] != "nvidia.com/gpu"]
    del mds["notebooks"]["labels"]["nvidia.com/device-plugin.config"]
    mds["training"]["labels"]["extra"] = "x"
    mds["training"]["vm_class"] = "best-effort-large"
    out = _audit_vks.audit_vks(derived, live)
    assert rules(out) == [("node_pool_changed", "node_pool gpu-workloads/training"),
                          ("node_pool_labels_changed", "node_pool gpu-workloads/notebooks"),
                          ("node_pool_labels_changed", "node_pool gpu-workloads/training"),
                          ("node_pool_taints_changed", "node_pool gpu-workloads/inference")]
    taint = [f for f in out if f["rule"] == "node_pool_taints_changed"][0]
    assert "nvidia.com/gpu=present:NoSchedule" in taint["message"] and taint["fix"]
    # a field the class has no variable for is read as None: not judged
    for md in mds.values():
        md["labels"] = md["taints"] = None
    assert rules(_audit_vks.audit_vks(derived, live)) == [("node_pool_changed", "node_pool gpu-workloads/training")]


CLASS_VARS = [
    {"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
    {"name": "node", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "taints": {"type": "array", "items": {"type": "object", "properties": {
            "key": {}, "value": {}, "effect": {}}}}}}}},
]
LEGACY_VARS = [
    {"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
    {"name": "nodePoolLabels", "schema": {"openAPIV3Schema": {"type": "array", "items": {
        "type": "object", "properties": {"key": {}, "value": {}}}}}},
]


@pytest.mark.parametrize("variables", [CLASS_VARS, LEGACY_VARS], ids=["node-object", "legacy-kv-list"])
def test_read_pool_is_the_inverse_of_apply_pool(variables):
    """The audit reads a pool through the same variable plan vks_node_pool writes by."""
    plan = _cluster_class.variable_plan(variables)
    pool = {"name": "gpu", "replicas": 2, "vm_class": "gpu-inference", "labels": {"a": "1", "b": "2"}}
    if plan["taints"]:
        pool["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    md = _cluster_class.apply_pool(None, pool, plan, "node-pool")
    got = _cluster_class.read_pool(md, {"vmClass": "best-effort-large"}, plan)
    assert got["replicas"] == 2 and got["vm_class"] == "gpu-inference" and got["labels"] == pool["labels"]
    assert got["taints"] == (pool["taints"] if plan["taints"] else None)
    # without an override the Cluster's own variable applies
    md["variables"]["overrides"] = [o for o in md["variables"]["overrides"] if o["name"] != "vmClass"]
    assert _cluster_class.read_pool(md, {"vmClass": "best-effort-large"}, plan)["vm_class"] == "best-effort-large"


def test_class_ref_per_version():
    assert _cluster_class.class_ref({"spec": {"topology": {"classRef": {"name": "c", "namespace": "n"}}}}, "v1beta2", "x") == \
        {"name": "c", "namespace": "n"}
    assert _cluster_class.class_ref({"spec": {"topology": {"class": "c"}}}, "v1beta1", "x") == {"name": "c", "namespace": "x"}
    assert _cluster_class.class_ref({"spec": {"topology": {"class": "c"}}}, "v1beta2", "x") is None
    assert _cluster_class.class_ref({"spec": {}}, "v1beta1", "x") is None


def full_guest(derived, secret="licensing-config-0123456789"):
    """A guest cluster as site.yml leaves it: what the roles write from derive()'s inputs."""
    live = good_guest(derived)
    op, policy = _audit_guest.guest_inputs(derived)
    live["secrets"] = {"gpu-operator": [secret]}
    live["namespace_labels"] = dict((t["namespace"], objs.tenant_namespace_labels(t))
                                    for t in policy["gpu_scheduling_policy_tenants"])
    spec = {}
    for path, value in objs.cluster_policy_fields(op, secret):
        node_ = spec
        for key in path[:-1]:
            node_ = node_.setdefault(key, {})
        node_[path[-1]] = value
    if "version" not in spec["driver"]:
        spec["driver"]["version"] = "570.124.06"  # the chart's default: the role sets none
    live["cluster_policy"] = dict(exists=True, spec=spec)
    live["device_plugin_config"] = dict(exists=True, data=copy.deepcopy(objs.device_plugin_configs(op)))
    k = objs.kueue_objects(policy)
    live["kueue"] = dict(served=True, resource_flavors=dict((n, copy.deepcopy(sp)) for n, sp in k["resource_flavors"]),
                         cluster_queues=dict((n, dict(copy.deepcopy(sp), fairSharing=None))
                                             for n, sp in k["cluster_queues"]),
                         local_queues={},
                         configuration={"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                        "waitForPodsReady": {"timeout": "600s", "blockAdmission": True}})
    for ns, name, spec_ in k["local_queues"]:
        live["kueue"]["local_queues"].setdefault(ns, {})[name] = dict(spec_)
    cj = objs.culling_cronjob(policy)
    live["culling"] = dict(exists=True, schedule=cj["schedule"], image=cj["image"], env=dict(cj["env"]))
    return live


def test_guest_full_clean(derived):
    assert _audit_guest.audit_guest(derived, **full_guest(derived)) == []


def test_time_slicing_config_as_the_role_writes_it(derived):
    op, _policy = _audit_guest.guest_inputs(derived)
    data = objs.device_plugin_configs(op)
    # a default entry besides the pools, the MIG strategy in each, replicas of the design's pool
    assert sorted(data) == ["default", "notebooks"]
    assert data["notebooks"]["flags"] == {"migStrategy": "single"}
    assert data["notebooks"]["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    live = full_guest(derived)
    live["device_plugin_config"]["data"]["notebooks"]["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 2
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("time_slicing_config_changed", "config_map gpu-operator/gpupool-time-slicing")]
    assert "replicas 2 (design 4)" in out[0]["message"]
    live["device_plugin_config"] = dict(exists=False, data={})
    assert rules(_audit_guest.audit_guest(derived, **live)) == [
        ("time_slicing_config_missing", "config_map gpu-operator/gpupool-time-slicing")]


def test_cluster_policy_changed_and_missing(derived):
    live = full_guest(derived)
    spec = live["cluster_policy"]["spec"]
    spec["mig"]["strategy"] = "mixed"
    spec["driver"]["repository"] = "registry.example.com/other"
    spec["devicePlugin"]["config"]["name"] = "someone-elses"
    spec["driver"]["licensingConfig"]["nlsEnabled"] = False
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("cluster_policy_changed", "cluster_policy cluster-policy"),
                          ("mig_strategy_changed", "cluster_policy cluster-policy")]
    assert "mig.strategy mixed (design single)" in [f for f in out if f["rule"] == "mig_strategy_changed"][0]["message"]
    out = [f for f in out if f["rule"] == "cluster_policy_changed"]
    for text in ("driver.repository registry.example.com/other",
                 "devicePlugin.config.name someone-elses (design gpupool-time-slicing)",
                 "driver.licensingConfig.nlsEnabled False (design True)"):
        assert text in out[0]["message"]
    live = full_guest(derived)
    live["cluster_policy"]["spec"]["driver"]["licensingConfig"]["secretName"] = "hand-made"
    live["secrets"]["gpu-operator"].append("hand-made")
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("cluster_policy_changed", "cluster_policy cluster-policy")]
    assert "secretName hand-made (design licensing-config-<hash>)" in out[0]["message"]
    live["cluster_policy"] = dict(exists=False, spec={})
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("cluster_policy_missing", "cluster_policy cluster-policy")]


def test_kueue_objects_as_the_role_writes_them(derived):
    _op, policy = _audit_guest.guest_inputs(derived)
    k = objs.kueue_objects(policy)
    name, cq = k["cluster_queues"][0]
    # the pool's tenants, the design's cohort and preemption
    assert name == "gpupool-training"
    assert cq["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-vision", "research"]}]}
    assert cq["cohortName"] == "gpupool"
    assert cq["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                "borrowWithinCohort": {"policy": "Never"}}
    assert [ns for ns, _n, _s in k["local_queues"]] == ["team-vision", "research"]
    live = full_guest(derived)
    live["kueue"]["cluster_queues"]["gpupool-training"]["resourceGroups"][0]["flavors"][0]["resources"][2][
        "nominalQuota"] = "2"
    live["kueue"]["resource_flavors"]["gpupool-training"]["tolerations"] = []
    del live["kueue"]["local_queues"]["research"]
    live["kueue"]["local_queues"]["team-vision"]["training"]["clusterQueue"] = "other"
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("cluster_queue_changed", "cluster_queue gpupool-training"),
                          ("local_queue_changed", "local_queue team-vision/training"),
                          ("local_queue_missing", "local_queue research/training"),
                          ("resource_flavor_changed", "resource_flavor gpupool-training")]
    assert "nominalQuota 2 (design 8)" in [f for f in out if f["rule"] == "cluster_queue_changed"][0]["message"]
    live["kueue"] = dict(served=False)
    assert rules(_audit_guest.audit_guest(derived, **live)) == [("kueue_missing", "kueue kueue.x-k8s.io/v1beta2")]


def test_namespace_labels_culling_and_priority_description(derived):
    live = full_guest(derived)
    del live["namespace_labels"]["research"]["gpupool.vcf/training"]
    live["culling"]["schedule"] = "0 * * * *"
    live["culling"]["env"]["CULL_IDLE_MINUTES"] = "9999"
    live["priority_classes"]["gpu-training"]["description"] = "changed by hand"
    out = _audit_guest.audit_guest(derived, **live)
    assert rules(out) == [("guest_namespace_labels_changed", "namespace research"),
                          ("notebook_culling_changed", "cronjob gpupool-system/gpupool-notebook-culler"),
                          ("priority_class_changed", "priority_class gpu-training")]
    assert "Kueue" in out[0]["message"]
    pc = [f for f in out if f["rule"] == "priority_class_changed"][0]
    assert "set it back" in pc["fix"]
    live["culling"] = dict(exists=False)
    assert ("notebook_culling_missing", "cronjob gpupool-system/gpupool-notebook-culler") in rules(
        _audit_guest.audit_guest(derived, **live))


def test_differences_looks_only_at_what_is_wanted():
    assert objs.differences({"a": {"b": "1"}}, {"a": {"b": 1, "c": 2}, "d": 3}) == []
    assert objs.differences({"a": [{"x": "1"}]}, {"a": [{"x": "2"}]}) == [("a[0].x", "2", "1")]
    assert objs.differences({"a": [1, 2]}, {"a": [1]}) == [("a", [1], [1, 2])]
    assert objs.differences({"e": True}, {"e": "true"}) == []
    assert objs.differences({"e": True}, {}) == [("e", None, True)]


def test_vks_node_pools_are_judged_by_vks_node_pools_plan(derived):
    """Where the hand comparison and vks_node_pool's plan would differ, the plan decides: taints in another
    order are written back (a finding), and a pool its class cannot hold is refused whole (that alone)."""
    live = vks_live(derived)
    mds = live["gpu-workloads"]["machine_deployments"]
    mds["inference"]["taints"] = mds["inference"]["taints"][::-1]
    mds["training"].update(replicas=7, taints=None, lacks={"taints": "ClusterClass c has no variable for node taints"})
    out = _audit_vks.audit_vks(derived, live)
    assert rules(out) == [("node_pool_class_lacks", "node_pool gpu-workloads/training"),
                          ("node_pool_taints_changed", "node_pool gpu-workloads/inference")]
    assert "another order" in [f for f in out if f["rule"] == "node_pool_taints_changed"][0]["message"]
    assert "no variable for node taints" in [f for f in out if f["rule"] == "node_pool_class_lacks"][0]["message"]
