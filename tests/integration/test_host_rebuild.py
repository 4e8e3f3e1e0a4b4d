"""playbooks/host_rebuild.yml against the vSphere simulator: a rebuilt host on an old image comes back on its
cluster's driver, graphics and scheduler, checked, then out of maintenance mode."""
from tests.lib.ansible_run import ROOT, run_playbook

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
OPTS = "NVreg_RegistryDwords=RmPVMRL=0x00030011"

FLEET = {
    "clusters": [{"name": "gpu", "hosts": [
        {"prefix": "esx-g", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": NEW,
         "graphics": {"default": "sharedDirect", "policy": "performance"}, "nvidia_options": OPTS},
        {"name": "esx-rebuilt", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD, "maintenance": True},
        {"name": "esx-live", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD},
    ]}],
}


def test_rebuilt_host_comes_back_as_designed(vsphere, vsphere_env):
    res = run_playbook(ROOT / "playbooks" / "host_rebuild.yml", env=vsphere_env,
                       extra_vars={"host": "esx-rebuilt", "esxi_gpu_host_driver_bundle": BUNDLE,
                                   "esxi_gpu_host_reboot_timeout": 120})
    assert res.rc == 0, [(n, r.get("msg")) for n, r in res.tasks if r.get("failed")]
    state = vsphere.host_state("esx-rebuilt")
    assert state["driver_installed"] == NEW and state["driver_running"] == NEW
    assert state["graphics"]["default"] == "sharedDirect" and state["nvidia_options"] == OPTS
    assert state["maintenance"] is False
    assert state["reboot_count"] == 2  # driver install, then the new scheduler options
    steps = res.result("Time each step took")["msg"]
    assert [s["step"] for s in steps] == ["read", "driver", "graphics_scheduler", "checks", "exit_maintenance_mode"]


def test_refuses_a_host_not_in_maintenance(vsphere, vsphere_env):
    res = run_playbook(ROOT / "playbooks" / "host_rebuild.yml", env=vsphere_env,
                       extra_vars={"host": "esx-live", "esxi_gpu_host_driver_bundle": BUNDLE})
    assert res.rc != 0
    assert vsphere.host_state("esx-live")["driver_installed"] == OLD
