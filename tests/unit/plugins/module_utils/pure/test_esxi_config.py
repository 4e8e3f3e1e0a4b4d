"""What esxi_gpu_config decides about a host, as pure functions (_esxi_config): the MIG plan from the geometry or
the mig_mode options, the vGPU mode refusals, the plan's changes of one host."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi_config as cfg
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import EsxiError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure

A, B = "0000:3b:00.0", "0000:5e:00.0"


def rows(*modes):
    """nvidia-smi rows: (current, pending) per GPU index."""
    return [dict(index=i, pci_id="pci-%d" % i, current=c, pending=p, supported=True) for i, (c, p) in enumerate(modes)]


def test_host_mig_plan_from_the_geometry_names_every_gpu_that_changes_by_direction():
    mig = cfg.host_mig_plan(rows((False, False), (True, True), (False, True)), geometry_indexes=[0])
    assert (mig["enable"], mig["disable"], mig["set"]) == ([0], [1, 2], [0, 1, 2])
    assert mig["reset"] == [0, 1] and (mig["enable_all"], mig["disable_all"]) == ([0], [1, 2])
    assert mig["after"] == {0: True, 1: False, 2: False}
    assert cfg.mig_change(mig) == "disabled -> enabled on GPU 0 and enabled -> disabled on GPU 1, 2"


def test_host_mig_plan_from_the_mig_mode_options():
    mig = cfg.host_mig_plan(rows((False, False), (False, False)), enabled=True, gpu_indexes=[1])
    assert (mig["enable"], mig["disable"], mig["enable_all"]) == ([1], [], [1]) and mig["after"] == {1: True}
    # set earlier and pending: only a reset (a reboot) is owed
    pending = cfg.host_mig_plan(rows((False, True)), enabled=True)
    assert pending["set"] == [] and pending["reset"] == [0] and cfg.mig_change(pending) == "disabled -> enabled on GPU 0"
    with pytest.raises(EsxiError, match="no GPU with index 4"):
        cfg.host_mig_plan(rows((False, False)), geometry_indexes=[4])


def test_a_vgpu_mode_change_on_a_gpu_with_powered_on_vms_is_refused():
    item = dict(name="esx-01", current=dict(vgpu_modes={A: "same_size", B: "same_size"}), vms_on_gpu={B: ["nb-0"]})
    cfg.busy_gpus(item, dict(vgpu_modes={A: "mixed_size", B: "same_size"}))  # B does not change: accepted
    with pytest.raises(EsxiError, match=r"GPU 0000:5e:00.0 \(VMs nb-0; left same_size, asked mixed_size\)"):
        cfg.busy_gpus(item, dict(vgpu_modes={A: "mixed_size", B: "mixed_size"}))
    assert cfg.rest_modes(item["current"], dict(vgpu_modes={A: "mixed_size", B: "same_size"})) == {A: "mixed_size"}


def test_the_scheduler_option_is_checked_before_any_host():
    assert cfg.scheduler_option(None) is None and cfg.scheduler_option(dict(policy=None, per_gpu=[])) is None
    with pytest.raises(Failure, match="scheduler.time_slice_ms needs scheduler.policy"):
        cfg.scheduler_option(dict(policy=None, time_slice_ms=3))
    assert cfg.needs_profiles(dict(policy="equal_share", per_gpu=[dict(pci_id=A, policy="fixed_share")])) is True


def test_host_changes_are_changes_of_the_one_plan_type():
    host = dict(graphics_changed=True, current={"default_type": "shared"}, desired={"default_type": "shared_direct"},
                opt_changed=True, options="", new_options="NVreg_RegistryDwords=RmPVMRL=0x00030001",
                reboot_owed=False, pending=[], mig_changed=False, mig=None, left_off=[dict(name="vm-a")])
    out = cfg.host_changes("host esx-01", host)
    assert [(c.field, c.action) for c in out] == [("graphics", "update"), ("nvidia_module_options", "update"),
                                                  ("vms_powered_off", "power_on")]
    assert out[2] == Change("host esx-01", "vms_powered_off", ["vm-a"], [], "power_on")


def test_smi_rows_numbers_the_gpus_as_vcenter_does_and_keeps_nvidia_smis_own_for_its_commands():
    vsphere = [dict(index=0, pci_id="0000:3b:00.0"), dict(index=1, pci_id="0000:5e:00.0")]
    smi = [dict(index=0, pci_id="00000000:5E:00.0", current=True, pending=True),
           dict(index=1, pci_id="00000000:3B:00.0", current=False, pending=False)]
    rows, commands = cfg.smi_rows(smi, vsphere)
    assert [(r["index"], r["current"]) for r in rows] == [(0, False), (1, True)] and commands == {0: 1, 1: 0}
    # a GPU vCenter does not list: nvidia-smi's own numbers
    rows, commands = cfg.smi_rows(smi, vsphere[:1])
    assert rows == smi and commands == {0: 0, 1: 1}


def test_lockdown_refusal_names_the_mode_the_users_and_the_way_out():
    item = dict(name="esx-01", lockdown="lockdownNormal", lockdown_exceptions=["svc"])
    assert cfg.lockdown_refusal(item, "svc") is None
    assert cfg.lockdown_refusal(dict(item, lockdown="lockdownDisabled"), "root") is None
    words = cfg.lockdown_refusal(item, "root")
    assert "lockdown mode lockdownNormal" in words and "(svc), not root" in words and "ssh.user" in words
    unread = cfg.lockdown_refusal(dict(item, lockdown_error="NoPermission"), "svc")
    assert "could not be read (NoPermission)" in unread


def test_what_a_host_goes_down_for_and_what_a_failed_mig_step_left():
    assert cfg.turn_what(dict(options_changed=True, pending=[], mig_changed=True)) == "the new scheduler and MIG mode"
    assert cfg.turn_what(dict(options_changed=False, pending=[], mig_changed=True)) == "MIG mode"
    item = dict(ssh_service="started and left running", mig_set=[(1, True)])
    assert cfg.mig_left(item) == dict(ssh_service="started and left running", mig_set={"1": "enabled"})
    assert cfg.mig_left_words(item, "TSM-SSH") == ("; SSH service TSM-SSH: started and left running; MIG mode set "
                                                   "so far: GPU 1 enabled (a plain rerun resumes)")
    assert cfg.ssh_prediction(dict(mig_changed=True, ssh_running=None)) == "not listed by the host"
    assert cfg.ssh_prediction(dict(mig_changed=False, ssh_running=True)) == "not used"
