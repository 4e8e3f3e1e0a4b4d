"""gpu_pool_audit's per-GPU rules against the vSphere simulator: the example fleet runs the example design's
MIG geometry (gpu-h100: GPUs 0 and 1 of hosts 03 and 04), a GPU flipped to MIG behind the collection's back
is named, GPU hosts left with SSH running are named."""
import pathlib
import sys

import pytest
import yaml

from tests.lib.ansible_run import ROOT, run_module

_SIM = str(ROOT / "tests" / "sim")
if _SIM not in sys.path:
    sys.path.insert(0, _SIM)

from vsphere_sim import SimulatorError  # noqa: E402

DESIGN_FILE = str(ROOT / "examples" / "design.yml")


def example_fleet():
    """examples/fleet.yml with SSH left running on esx-h100-04, the L40S hosts and a management host."""
    fleet = yaml.safe_load(pathlib.Path(ROOT / "examples" / "fleet.yml").read_text())
    for vm in fleet["vms"]:
        if isinstance(vm.get("power"), bool):  # YAML 1.1 reads off as false; the simulator wants the word
            vm["power"] = "on" if vm["power"] else "off"
    for cluster in fleet["clusters"]:
        for h in cluster["hosts"]:
            if h.get("name") == "esx-h100-04" or cluster["name"] in ("gpu-l40s", "mgmt"):
                h["ssh"] = "running"
    return fleet


FLEET = example_fleet()


def audit(env):
    res = run_module("gpupool.vcf.gpu_pool_audit", {"design_file": DESIGN_FILE, "links": ["esxi"]},
                     env=dict(env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))[0]
    assert not res.get("failed"), res.get("msg")
    return res


def found(res, *names):
    return dict((f["object"], f) for f in res["findings"] if f["rule"] in names)


def test_the_fleet_runs_the_designs_geometry_and_ssh_left_running_is_named(vsphere, vsphere_env):
    res = audit(vsphere_env)
    assert found(res, "gpu_mig_off_design", "gpu_vgpu_mode_mismatch", "host_not_plannable") == {}
    ssh = found(res, "host_ssh_running")
    assert sorted(ssh) == ["cluster gpu-h100", "cluster gpu-l40s"]  # mgmt is no GPU cluster of the design
    assert "esx-h100-04" in ssh["cluster gpu-h100"]["message"] and "esx-h100-03" not in ssh["cluster gpu-h100"]["message"]
    assert "esx-l40s-01, esx-l40s-02, esx-l40s-03" in ssh["cluster gpu-l40s"]["message"]
    assert all(f["severity"] == "warning" and f["fix"] for f in ssh.values())


def test_a_gpu_flipped_to_mig_behind_the_back_is_named(vsphere, vsphere_env):
    # esx-h100-04 runs MIG on GPUs 0 and 1 (the geometry); GPU 3 is idle, so the host lets it be flipped
    assert [g["vms"] for g in vsphere.gpus("esx-h100-04")][3] == []
    vsphere.set_gpu("esx-h100-04", 3, mig=True)
    vsphere.set_gpu("esx-h100-03", 3, mig=True)
    try:
        res = audit(vsphere_env)
    finally:
        vsphere.set_gpu("esx-h100-04", 3, mig=False)
        vsphere.set_gpu("esx-h100-03", 3, mig=False)
    mig = found(res, "gpu_mig_off_design")
    assert sorted(mig) == ["host esx-h100-03", "host esx-h100-04"]
    text = mig["host esx-h100-04"]["message"]
    assert "GPU 3 runs in MIG mode" in text and "MIG GPUs wanted: 0, 1" in text
    assert mig["host esx-h100-04"]["severity"] == "error" and "esxi_gpu_host" in mig["host esx-h100-04"]["fix"]
    # a GPU carrying a powered-on vGPU cannot be flipped (the host refuses), so no vGPU sits on a GPU of the
    # wrong kind here: gpu_vgpu_mode_mismatch is left to the unit tests' views
    with pytest.raises(SimulatorError):
        vsphere.set_gpu("esx-h100-04", 0, mig=False)
    assert found(audit(vsphere_env), "gpu_mig_off_design", "gpu_vgpu_mode_mismatch") == {}
