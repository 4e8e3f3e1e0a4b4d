"""esxi_host_driver and esxi_gpu_config against the vSphere simulator: bad input fails before any change,
check mode predicts, --diff, rerun unchanged, vGPU VMs that cannot move."""
from tests.lib.ansible_run import run_module

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW

FLEET = {
    "clusters": [
        {"name": "gpu", "hosts": [
            {"name": "esx-a", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD,
             "nvidia_options": "NVreg_EnableMSI=1"},
            # small (20 GB) and big (40 GB) share esx-b's one GPU: different sizes need mixed-size mode
            {"name": "esx-b", "gpu": {"model": "H100-80GB", "count": 1}, "driver_version": NEW,
             "graphics": {"default": "sharedDirect", "policy": "consolidation"}, "vgpu_mode": "mixed_size"},
            {"name": "esx-vm", "gpu": {"model": "H100-80GB", "count": 1}, "driver_version": OLD},
        ]},
    ],
    "vms": [
        {"name": "small", "host": "esx-b", "vgpu": ["nvidia_h100-20c"]},
        {"name": "big", "host": "esx-b", "vgpu": ["nvidia_h100-40c"]},
        {"name": "busy", "host": "esx-vm", "vgpu": ["nvidia_h100-20c"]},
    ],
}


def drv(vsphere_env, check=False, diff=False, **args):
    return run_module("gpupool.vcf.esxi_host_driver", args, env=vsphere_env, check=check, diff=diff)[0]


def cfg(vsphere_env, check=False, diff=False, **args):
    return run_module("gpupool.vcf.esxi_gpu_config", args, env=vsphere_env, check=check, diff=diff)[0]


def test_driver_bad_input_changes_nothing(vsphere, vsphere_env):
    before = vsphere.host_state("esx-a")
    cases = [
        (dict(host="ghost", version="550.90.05", bundle=BUNDLE), "host ghost not found"),
        (dict(host="esx-a", version="latest", bundle=BUNDLE), "Invalid NVIDIA driver version"),
        (dict(host="esx-a", version="550.90.05"), "no driver bundle given"),
        (dict(host="esx-a", version="550.90.05", bundle=BUNDLE.replace(NEW, OLD)), "holds NVIDIA driver 550.54.10"),
        (dict(host="esx-b", version="550.54.10", bundle=BUNDLE), "allow_downgrade"),
    ]
    for args, expected in cases:
        res = drv(vsphere_env, **args)
        assert res.get("failed") and expected in res["msg"], (args, res.get("msg"))
    after = vsphere.host_state("esx-a")
    assert after == before


def test_driver_vgpu_vms_block_before_any_change(vsphere, vsphere_env):
    res = drv(vsphere_env, host="esx-vm", version="550.90.05", bundle=BUNDLE)
    assert res.get("failed") and "busy" in res["msg"] and "Nothing was changed" in res["msg"]
    state = vsphere.host_state("esx-vm")
    assert state["maintenance"] is False and state["driver_installed"] == OLD


def test_driver_check_diff_then_install_then_unchanged(vsphere, vsphere_env):
    args = dict(host="esx-a", version="550.90.05", bundle=BUNDLE)
    check = drv(vsphere_env, check=True, diff=True, **args)
    assert check["changed"] and check["rebooted"] and check["plan"] == "upgrade"
    assert check["diff"]["before"]["version"] == "550.54.10" and check["diff"]["after"]["version"] == "550.90.05"
    assert vsphere.host_state("esx-a")["driver_installed"] == OLD
    real = drv(vsphere_env, diff=True, **args)
    assert not real.get("failed"), real.get("msg")
    for key in ("changed", "rebooted", "plan", "version", "previous_version", "maintenance_mode", "diff"):
        assert real[key] == check[key], key
    assert real["full_version"] == NEW
    assert [s["step"] for s in real["steps"]] == ["enter_maintenance_mode", "install", "reboot", "verify",
                                                  "exit_maintenance_mode"]
    state = vsphere.host_state("esx-a")
    assert state["driver_running"] == NEW and state["maintenance"] is False and state["reboot_count"] == 1
    again = drv(vsphere_env, **args)
    assert again["changed"] is False and again["rebooted"] is False


def test_driver_reboot_failure_leaves_host_in_maintenance(vsphere, vsphere_env):
    vsphere.inject_fault("esx-vm", "reboot", "injected: reboot refused")
    try:
        res = drv(vsphere_env, host="esx-vm", version="550.90.05", bundle=BUNDLE, power_off_vgpu_vms=True)
    finally:
        vsphere.clear_faults()
    assert res.get("failed") and "left in maintenance mode" in res["msg"] and res["host_left_in_maintenance"]
    assert vsphere.host_state("esx-vm")["maintenance"] is True


def test_config_bad_input_changes_nothing(vsphere, vsphere_env):
    before = vsphere.host_state("esx-b")
    cases = [
        (dict(cluster="nope", graphics_type="shared_direct"), "cluster nope not found"),
        (dict(host="ghost", graphics_type="shared_direct"), "host ghost not found"),
        (dict(host="esx-b", scheduler={"policy": "equal_share", "time_slice_ms": 31}), "outside 1-30"),
        (dict(host="esx-b", scheduler={"policy": "fixed_share"}), "mixed sizes"),
        (dict(cluster="gpu", graphics_type="shared_direct", scheduler={"policy": "fixed_share"}), "Nothing was changed"),
        (dict(host="esx-b", scheduler={"per_gpu": [{"pci_id": "0000:99:00.0", "policy": "equal_share"}]}),
         "no NVIDIA GPU at PCI address"),
    ]
    for args, expected in cases:
        res = cfg(vsphere_env, **args)
        assert res.get("failed") and expected in res["msg"], (args, res.get("msg"))
    assert vsphere.host_state("esx-b") == before
    assert vsphere.host_state("esx-a")["graphics"]["default"] == "shared"


def test_config_check_diff_apply_rerun(vsphere, vsphere_env):
    args = dict(cluster="gpu", graphics_type="shared_direct", assignment_policy="performance",
                scheduler={"policy": "equal_share", "time_slice_ms": 2})
    check = cfg(vsphere_env, check=True, diff=True, **args)
    assert check["changed"] and check["reboot_required"]
    assert check["diff"]["before"]["esx-a"]["nvidia_module_options"] == "NVreg_EnableMSI=1"
    assert check["diff"]["after"]["esx-a"]["nvidia_module_options"] == \
        "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00020001"
    assert vsphere.host_state("esx-a")["graphics"]["default"] == "shared"
    real = cfg(vsphere_env, diff=True, **args)
    assert not real.get("failed"), real.get("msg")
    assert real["hosts"] == check["hosts"] and real["diff"] == check["diff"]
    a = vsphere.host_state("esx-a")
    assert a["graphics"]["default"] == "sharedDirect" and set(a["graphics"]["devices"].values()) == {"sharedDirect"}
    assert a["nvidia_options"] == "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00020001"
    assert vsphere.host_state("esx-b")["graphics"]["policy"] == "performance"
    again = cfg(vsphere_env, **args)
    # nothing left to change, but the reboot the options need is remembered, not forgotten
    assert again["changed"] is False and again["reboot_required"] is True
    assert again["hosts"]["esx-a"]["pending"] == ["nvidia module options changed since the last boot (not loaded until a reboot)"]


def test_config_owed_reboot_is_finished_by_a_rerun_with_reboot(vsphere, vsphere_env):
    """The options changed above without a reboot: a later run with reboot=true still reboots the host."""
    args = dict(host="esx-a", graphics_type="shared_direct", scheduler={"policy": "equal_share", "time_slice_ms": 2})
    boots = vsphere.host_state("esx-a")["reboot_count"]
    check = cfg(vsphere_env, check=True, reboot=True, **args)
    assert check["changed"] and check["hosts"]["esx-a"]["rebooted"], check
    assert vsphere.host_state("esx-a")["reboot_count"] == boots
    real = cfg(vsphere_env, reboot=True, **args)
    assert not real.get("failed"), real.get("msg")
    state = vsphere.host_state("esx-a")
    assert state["reboot_count"] == boots + 1 and state["maintenance"] is False
    again = cfg(vsphere_env, reboot=True, **args)
    assert again["changed"] is False and again["reboot_required"] is False
