"""playbooks/host_rebuild.yml against the vSphere simulator: a rebuilt host comes back through the esxi_gpu_host
role on its cluster's driver, graphics and scheduler (from the design when one is given), by the cluster's
lifecycle (a direct install, or vLCM's remediation on an image-managed cluster), its vGPU profiles checked against
the VM classes its cluster's namespaces use, its vGPU VMs pinned, then out of maintenance mode, pool-ready. A
failure leaves the host in maintenance mode and a plain rerun finishes."""
import copy
import subprocess

import pytest
import vsphere_sim
import yaml

from tests.lib.ansible_run import ROOT, run_module, run_playbook

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
OPTS = "NVreg_RegistryDwords=RmPVMRL=0x00030011"  # fixed share, 3 ms
PLAYBOOK = ROOT / "playbooks" / "host_rebuild.yml"
H100 = {"model": "H100-80GB", "count": 2}
SHARED_DIRECT = {"default": "sharedDirect", "policy": "performance"}

FLEET = {
    "clusters": [
        {"name": "gpu", "supervisor": True, "hosts": [
            {"prefix": "esx-g", "count": 3, "gpu": H100, "driver_version": NEW, "graphics": SHARED_DIRECT,
             "nvidia_options": OPTS},
            {"name": "esx-rebuilt", "gpu": H100, "driver_version": OLD, "maintenance": True},
            {"name": "esx-retry", "gpu": H100, "driver_version": OLD, "maintenance": True},
            {"name": "esx-live", "gpu": H100, "driver_version": OLD},
        ]},
        {"name": "image", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-i", "count": 2, "gpu": H100, "driver_version": NEW, "graphics": SHARED_DIRECT},
            {"name": "esx-i-rebuilt", "gpu": H100, "driver_version": OLD, "maintenance": True},
        ]},
        # named as the example design's cluster; its other hosts run a scheduler and policy the design does not
        {"name": "gpu-h100", "hosts": [
            {"prefix": "esx-h100-", "count": 2, "gpu": H100, "driver_version": NEW,
             "graphics": {"default": "sharedDirect", "policy": "consolidation"}, "nvidia_options": OPTS},
            {"name": "esx-h100-rebuilt", "gpu": H100, "driver_version": OLD, "maintenance": True},
        ]},
    ],
    "vms": [
        {"name": "rebuilt-vgpu", "host": "esx-rebuilt", "vgpu": ["nvidia_h100-1-10c"], "power": "off"},
        {"name": "designed-vgpu", "host": "esx-h100-rebuilt", "vgpu": ["nvidia_h100-80c"], "power": "off"},
    ],
}


@pytest.fixture(scope="module")
def vsphere(tmp_path_factory):
    """The simulator with the GPU hosts' SSH on (the MIG mode of a rebuilt host is set over it)."""
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True)
    # a reboot of 0.2 s (the default 1 s): the role waits on the host's boot time, not on a length
    with vsphere_sim.start(FLEET, reboot_seconds=0.2, ssh_authorized_keys=keys / "id.pub") as sim:
        sim.key = str(keys / "id")
        yield sim


def ssh_vars(sim):
    return {"esxi_gpu_host_ssh_private_key_file": sim.key, "esxi_gpu_host_ssh_host_key_checking": False,
            "esxi_gpu_host_ssh_addresses": sim.ssh_addresses()}


def failed(res):
    return [(name, r.get("msg")) for name, r in res.tasks if r.get("failed")]


def run_modules(calls, env):
    """Several module calls, in order, in one ansible-playbook run (each as run_module would make it: its
    failure ignored, so each result is asserted on); `calls`: (module, args) or (module, args, check mode)."""
    tasks = [dict({"name": "run %d" % n, call[0]: call[1], "ignore_errors": True},
                  **({"check_mode": True} if len(call) > 2 and call[2] else {}))
             for n, call in enumerate(calls)]
    res = run_playbook([{"name": "modules under test", "hosts": "localhost", "gather_facts": False, "tasks": tasks}],
                       env=env)
    if res.data is None:
        raise AssertionError("ansible-playbook gave no JSON (rc %s):\n%s\n%s" % (res.rc, res.stdout[-3000:], res.stderr[-3000:]))
    results = [r for name, r in res.tasks if name.startswith("run ")]
    assert len(results) == len(calls), [name for name, _r in res.tasks]
    return results


def rebuild(env, host, check=False, **extra):
    extra_vars = {"host": host, "esxi_gpu_host_reboot_timeout": 120}
    extra_vars.update(extra)
    return run_playbook(PLAYBOOK, env=env, extra_vars=extra_vars, check=check)


def assert_pool_ready(sim, host, reboots_before):
    state = sim.host_state(host)
    assert state["driver_installed"] == NEW and state["driver_running"] == NEW, state
    assert state["maintenance"] is False and state["reboot_required"] is False, state
    assert state["connection_state"] == "connected" and state["vgpu_profiles"], state
    return state["reboot_count"] - reboots_before


def installs(sim):
    return sim.stats()["soap"]["methods"].get("InstallHostPatchV2_Task", 0)


@pytest.fixture(scope="module")
def vm_classes(vsphere):
    """VM classes of the namespaces on cluster gpu, written by the collection's own modules: one of an H100
    profile, one of an L40S profile (not the H100 hosts' business), one without vGPU."""
    calls = [("gpupool.vcf.vm_class", args) for args in (
        {"name": "gpu-small", "cpu_count": 4, "memory_mb": 16384, "vgpu_profiles": ["nvidia_h100-3-40c"]},
        {"name": "gpu-notebook", "cpu_count": 4, "memory_mb": 16384, "vgpu_profiles": ["nvidia_l40s-8c"],
         "api_form": "devices"},
        {"name": "cpu-only", "cpu_count": 2, "memory_mb": 4096})]
    calls.append(("gpupool.vcf.supervisor_namespace",
                  {"name": "team-a", "cluster": "gpu", "vm_classes": ["gpu-small", "gpu-notebook", "cpu-only"]}))
    for res in run_modules(calls, dict(vsphere.env)):
        assert not res.get("failed"), res.get("msg")
    return ["nvidia_h100-3-40c"]


def test_rebuilt_host_on_a_direct_cluster(vsphere, vsphere_env, vm_classes):
    before = vsphere.host_state("esx-rebuilt")
    # a class of the cluster's namespace asks for a profile the host cannot offer: the check holds the host back
    for res in run_modules([("gpupool.vcf.vm_class", {"name": "gpu-odd", "cpu_count": 2, "memory_mb": 4096,
                                                      "vgpu_profiles": ["nvidia_h100-3c"]}),
                            ("gpupool.vcf.supervisor_namespace", {"name": "team-a", "vm_classes": ["gpu-odd"]})],
                           vsphere_env):
        assert not res.get("failed"), res.get("msg")

    held = rebuild(vsphere_env, "esx-rebuilt", esxi_gpu_host_driver_bundle=BUNDLE)
    assert held.rc != 0
    msg = " ".join(str(m) for _name, m in failed(held))
    assert "esx-rebuilt stays in maintenance mode" in msg and "nvidia_h100-3c" in msg, msg
    assert "the namespaces of cluster gpu" in msg, msg
    state = vsphere.host_state("esx-rebuilt")
    assert state["maintenance"] is True and state["driver_running"] == NEW  # the turn itself was done

    res = run_module("gpupool.vcf.supervisor_namespace",
                     {"name": "team-a", "vm_classes": ["gpu-small", "gpu-notebook", "cpu-only"], "purge_lists": True},
                     env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    vsphere.reset_stats()
    res = rebuild(vsphere_env, "esx-rebuilt", esxi_gpu_host_driver_bundle=BUNDLE)
    assert res.rc == 0, failed(res)
    assert installs(vsphere) == 0  # the rerun did not install again
    reboots = assert_pool_ready(vsphere, "esx-rebuilt", before["reboot_count"])
    assert reboots == 1  # the options the other hosts run are written first, so the driver's reboot loads them
    state = vsphere.host_state("esx-rebuilt")
    assert state["graphics"]["default"] == "sharedDirect" and state["nvidia_options_loaded"] == OPTS

    summary = res.result("Host back in its pool")["msg"]
    assert summary["lifecycle"] == "direct" and summary["driver"] == "550.90.05"
    assert summary["profiles_checked"] == vm_classes  # the L40S class is left out for an H100 host
    assert summary["profiles_from"] == "the VM classes of the namespaces of cluster gpu"
    assert summary["vgpu_vms_pinned"] == ["rebuilt-vgpu"]
    pin = res.result("gpupool.vcf.drs_gpu_pinning : Pin the vGPU VMs of each cluster with per-VM DRS overrides")
    assert pin["results"][0]["pinned"] == ["rebuilt-vgpu"] and pin["results"][0]["added"] == ["rebuilt-vgpu"]
    steps = res.result("Time each step took")["msg"]
    assert [s["step"] for s in steps] == ["read", "host_turn", "checks", "pin_vgpu_vms", "exit_maintenance_mode"]


def test_refuses_a_host_not_in_maintenance(vsphere, vsphere_env):
    vsphere.reset_stats()
    res = rebuild(vsphere_env, "esx-live", esxi_gpu_host_driver_bundle=BUNDLE)
    assert res.rc != 0
    assert "esx-live is not in maintenance mode" in " ".join(str(m) for _name, m in failed(res))
    assert vsphere.host_state("esx-live")["driver_installed"] == OLD
    assert installs(vsphere) == 0


def test_rebuilt_host_on_a_vlcm_cluster_goes_through_the_image(vsphere, vsphere_env):
    before = vsphere.host_state("esx-i-rebuilt")
    # the lifecycle is read from the cluster: a direct install asked for is refused, nothing changed
    vsphere.reset_stats()
    refused = rebuild(vsphere_env, "esx-i-rebuilt", esxi_gpu_host_lifecycle="direct", esxi_gpu_host_driver_bundle=BUNDLE)
    assert refused.rc != 0
    msg = " ".join(str(m) for _name, m in failed(refused))
    assert "managed by a vLCM image" in msg and "not from a direct install" in msg, msg
    assert installs(vsphere) == 0 and vsphere.host_state("esx-i-rebuilt") == before

    # another host off the image: the remediation would take it through maintenance mode too, refused
    vsphere.set_driver("esx-i02", OLD)
    try:
        refused = rebuild(vsphere_env, "esx-i-rebuilt", esxi_gpu_host_driver_version="550.90.05")
    finally:
        vsphere.set_driver("esx-i02", NEW)
    assert refused.rc != 0
    msg = " ".join(str(m) for _name, m in failed(refused))
    assert "the remediation would also take esx-i02" in msg, msg
    assert installs(vsphere) == 0 and vsphere.host_state("esx-i-rebuilt") == before

    # check mode predicts the turn (the remediation, leaving maintenance mode) and changes nothing
    check = rebuild(vsphere_env, "esx-i-rebuilt", check=True)
    assert check.rc == 0, failed(check)
    assert vsphere.host_state("esx-i-rebuilt") == before
    predicted = [name for name, r in check.tasks if r.get("changed")]
    assert any("NVIDIA driver in the vLCM desired image" in name for name in predicted), predicted
    assert "Out of maintenance mode" in predicted, predicted

    vsphere.reset_stats()
    res = rebuild(vsphere_env, "esx-i-rebuilt")
    assert res.rc == 0, failed(res)
    stats = vsphere.stats()
    # the playbook never installed directly: the driver came from vLCM's remediation (its own calls are not
    # counted), which the playbook asked for once
    assert stats["soap"]["methods"].get("InstallHostPatchV2_Task", 0) == 0, stats["soap"]["methods"]
    applies = [p for p in stats["rest"]["paths"] if p.startswith("POST /api/esx/settings/clusters/") and p.endswith("/software")]
    assert len(applies) == 1 and stats["rest"]["paths"][applies[0]] == 1, stats["rest"]["paths"]
    assert assert_pool_ready(vsphere, "esx-i-rebuilt", before["reboot_count"]) == 1  # the remediation's reboot
    for other in ("esx-i01", "esx-i02"):
        assert vsphere.host_state(other)["reboot_count"] == 0  # no other host taken through the remediation
    summary = res.result("Host back in its pool")["msg"]
    assert summary["lifecycle"] == "vlcm", summary
    # no VM class of the vCenter is used on this cluster's GPU model by its namespaces: the namespaces of every
    # cluster are read, or the other hosts of the model when none asks for an H100 profile
    assert summary["profiles_from"] in ("the VM classes of every namespace of the vCenter",
                                        "the other hosts of its GPU model"), summary


def test_rebuilt_host_with_a_design(vsphere, vsphere_env, tmp_path):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design = copy.deepcopy(design)
    h100 = next(c for c in design["clusters"] if c["name"] == "gpu-h100")
    h100["drs"] = {"pinning": True, "behavior": "manual"}
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(design, sort_keys=False))
    before = vsphere.host_state("esx-h100-rebuilt")
    vsphere.reset_stats()
    check = rebuild(vsphere_env, "esx-h100-rebuilt", check=True, gpupool_design_file=str(path))
    assert check.rc == 0, failed(check)
    assert vsphere.host_state("esx-h100-rebuilt") == before and installs(vsphere) == 0
    predicted = [name for name, r in check.tasks if r.get("changed")]
    assert any(name.endswith("NVIDIA driver on esx-h100-rebuilt") for name in predicted), predicted

    # the rebuilt host comes back with MIG mode off; the design's cluster runs MIG-backed inference
    assert [g["current"] for g in vsphere.mig("esx-h100-rebuilt")] == [False, False]
    res = rebuild(vsphere_env, "esx-h100-rebuilt", gpupool_design_file=str(path), **ssh_vars(vsphere))
    assert res.rc == 0, failed(res)
    assert assert_pool_ready(vsphere, "esx-h100-rebuilt", before["reboot_count"]) >= 1
    assert [(g["current"], g["pending"]) for g in vsphere.mig("esx-h100-rebuilt")] == [(True, True), (True, True)]
    state = vsphere.host_state("esx-h100-rebuilt")
    # the design's graphics and scheduler, not what the other hosts of the cluster run
    assert state["graphics"]["default"] == "sharedDirect" and state["graphics"]["policy"] == "performance", state
    # read back, and at the design's behavior asking for manual again changes nothing (check mode)
    info, again = run_modules([
        ("gpupool.vcf.gpu_host_info", {"hosts": ["esx-h100-rebuilt"], "gather": ["scheduler"]}),
        ("gpupool.vcf.drs_gpu_pinning", {"cluster": "gpu-h100", "vms": ["designed-vgpu"], "behavior": "manual"}, True)],
        vsphere_env)
    assert not info.get("failed"), info.get("msg")
    assert info["hosts"][0]["scheduler"]["policy"] == "best_effort", info["hosts"][0]["scheduler"]

    summary = res.result("Host back in its pool")["msg"]
    assert summary["design"] == str(path) and summary["lifecycle"] == "direct"
    # the design's VM classes of cluster gpu-h100 that its namespaces use: inference and training
    assert summary["profiles_checked"] == ["nvidia_h100-3-40c", "nvidia_h100-80c"]
    assert summary["profiles_from"] == "the VM classes of the design"
    pin = res.result("gpupool.vcf.drs_gpu_pinning : Pin the vGPU VMs of each cluster with per-VM DRS overrides")
    assert pin["results"][0]["pinned"] == ["designed-vgpu"]
    assert not again.get("failed") and again.get("changed") is False, again


def test_failure_in_the_middle_then_a_plain_rerun_finishes(vsphere, vsphere_env):
    before = vsphere.host_state("esx-retry")
    vsphere.inject_fault("esx-retry", "reboot", "host busy")
    res = rebuild(vsphere_env, "esx-retry", esxi_gpu_host_driver_bundle=BUNDLE)
    assert res.rc != 0
    msg = " ".join(str(m) for _name, m in failed(res))
    assert "esx-retry was not handed back" in msg and "rerun this playbook as it is" in msg, msg
    state = vsphere.host_state("esx-retry")
    assert state["maintenance"] is True and state["driver_installed"] == NEW and state["driver_running"] == OLD

    vsphere.reset_stats()
    res = rebuild(vsphere_env, "esx-retry", esxi_gpu_host_driver_bundle=BUNDLE)
    assert res.rc == 0, failed(res)
    assert installs(vsphere) == 0  # the staged driver is rebooted into, not installed again
    assert assert_pool_ready(vsphere, "esx-retry", before["reboot_count"]) >= 1
