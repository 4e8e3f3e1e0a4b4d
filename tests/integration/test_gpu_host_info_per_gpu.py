"""gpu_host_info's per-GPU view (index, vGPU and MIG mode, the VMs on each GPU) and the hosts' SSH service and
lockdown mode, against the vSphere simulator's stored placement; in the host retrieval it makes anyway."""
from tests.lib.ansible_run import run_module

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
H100 = {"model": "H100-80GB", "count": 4}
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "hosts": [
            # GPUs 2 and 3 in MIG mode, SSH left running, lockdown normal
            {"name": "esx-h100-01", "gpu": H100, "driver_version": DRIVER, "mig": [2, 3], "ssh": "running",
             "lockdown": "normal"},
            {"name": "esx-h100-02", "gpu": H100, "driver_version": DRIVER,
             "graphics": {"default": "sharedDirect", "policy": "performance"}},
        ]},
        {"name": "mgmt", "hosts": [{"name": "esx-mgmt-01"}]},
    ],
    "vms": [
        {"name": "infer", "host": "esx-h100-01", "vgpu": ["nvidia_h100-3-40c"], "count": 3},
        {"name": "train-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c", "nvidia_h100-80c"]},
        {"name": "nb-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-20c"]},
    ],
}
PER_HOST = ("fetchSoftwarePackages", "FetchSoftwarePackages", "QueryConfiguredModuleOptionString")


def read(env, **args):
    res = run_module("gpupool.vcf.gpu_host_info", dict(cluster="gpu-h100", **args), env=env)[0]
    assert not res.get("failed"), res.get("msg")
    return dict((h["name"], h) for h in res["hosts"])


def placed(gpu):
    """{VM name: [profiles]} of one GPU of the module's result."""
    return dict((vm["name"], sorted(vm["profiles"])) for vm in gpu["vms"])


def sim_placed(gpu):
    """The same from the simulator's own view of the GPU."""
    out = {}
    for vm in gpu["vms"]:
        out.setdefault(vm["name"], []).append(vm["profile"])
    return dict((k, sorted(v)) for k, v in out.items())


def test_each_gpu_as_the_simulator_holds_it(vsphere, vsphere_env):
    hosts = read(vsphere_env)
    for name in ("esx-h100-01", "esx-h100-02"):
        mine, sims = hosts[name]["gpus"], vsphere.gpus(name)
        # numbered as nvidia-smi numbers them: the NVIDIA GPUs in PCI order
        assert [g["index"] for g in mine] == [0, 1, 2, 3]
        assert [g["pci_id"] for g in mine] == sorted(g["pci_id"] for g in mine) == [g["pci_id"] for g in sims]
        assert [g["vgpu_mode"] for g in mine] == [g["vgpu_mode"] for g in sims]
        assert [g["mig"] == "enabled" for g in mine] == [g["mig_current"] for g in sims]
        assert [placed(g) for g in mine] == [sim_placed(g) for g in sims]
    h1 = hosts["esx-h100-01"]["gpus"]
    assert [g["vgpu_mode"] for g in h1] == ["sameSize", "sameSize", "multiInstanceGpu", "multiInstanceGpu"]
    assert [g["mig"] for g in h1] == ["disabled", "disabled", "enabled", "enabled"]
    # the three 3g.40gb vGPUs sit on the two MIG GPUs, none on the others
    assert sorted(vm for g in h1[2:] for vm in placed(g)) == ["infer-01", "infer-02", "infer-03"]
    assert not any(g["vms"] for g in h1[:2])
    # train-01's two full cards are on two GPUs, one each; nb-01's 20c on a third
    h2 = hosts["esx-h100-02"]["gpus"]
    assert [placed(g)["train-01"] for g in h2 if "train-01" in placed(g)] == [["nvidia_h100-80c"]] * 2
    assert sum(1 for g in h2 if placed(g) == {"nb-01": ["nvidia_h100-20c"]}) == 1


def test_ssh_service_and_lockdown_mode(vsphere, vsphere_env):
    hosts = read(vsphere_env, gather=[])
    assert (hosts["esx-h100-01"]["ssh_service"], hosts["esx-h100-01"]["lockdown_mode"]) == ("running", "lockdownNormal")
    assert (hosts["esx-h100-02"]["ssh_service"], hosts["esx-h100-02"]["lockdown_mode"]) == ("stopped", "lockdownDisabled")
    assert vsphere.ssh_service("esx-h100-01") == "running" and vsphere.ssh_service("esx-h100-02") == "stopped"
    # without the VMs gathered the GPUs' VMs are not known
    assert all(g["vms"] is None for h in hosts.values() for g in h["gpus"])


def test_a_gpu_flipped_behind_the_back_is_read_as_it_is(vsphere, vsphere_env):
    idle = [g["index"] for g in vsphere.gpus("esx-h100-02") if not g["vms"]]
    assert idle, vsphere.gpus("esx-h100-02")
    vsphere.set_gpu("esx-h100-02", idle[0], mig=True)
    try:
        gpu = read(vsphere_env, gather=[])["esx-h100-02"]["gpus"][idle[0]]
        assert (gpu["vgpu_mode"], gpu["mig"]) == ("multiInstanceGpu", "enabled")
    finally:
        vsphere.set_gpu("esx-h100-02", idle[0], mig=False)
    gpu = read(vsphere_env, gather=[])["esx-h100-02"]["gpus"][idle[0]]
    assert (gpu["vgpu_mode"], gpu["mig"]) == ("sameSize", "disabled")


def test_the_per_gpu_view_adds_no_request(vsphere, vsphere_env):
    """The same requests as before the view: the retrievals of GpuInventory, the two per-host methods per GPU
    host, nothing per GPU, no call to the hosts' service or access managers."""
    vsphere.reset_stats()
    read(vsphere_env)
    methods = vsphere.stats()["soap"]["methods"]
    assert methods.get("RetrievePropertiesEx") == 3, methods
    assert sum(methods.get(m, 0) for m in PER_HOST) == 2 * 2, methods
    assert not [m for m in methods if "Service" in m and m != "RetrieveServiceContent" or "Lockdown" in m], methods
    vsphere.reset_stats()
    read(vsphere_env, gather=["vms"])
    methods = vsphere.stats()["soap"]["methods"]
    assert methods.get("RetrievePropertiesEx") == 3 and not any(m in methods for m in PER_HOST), methods
