"""gpu_host_info against the vSphere simulator, through ansible-playbook, certificates verified."""
from tests.lib.ansible_run import run_module

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"

FLEET = {
    "clusters": [
        {
            "name": "gpu-h100",
            "supervisor": True,
            "hosts": [
                # esx-h100-01 runs the MIG-backed infer VMs: its first card in MIG mode (two 3g.40gb)
                {"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW,
                 "mig": [0]},
                {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW},
                {"name": "esx-h100-03", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW},
                {"name": "esx-h100-old", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": OLD,
                 "nvidia_options": "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00030001"},
            ],
        },
        {
            "name": "gpu-l40s",
            "hosts": [
                {"prefix": "esx-l40s-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW,
                 "graphics": {"default": "sharedDirect", "policy": "consolidation"}},
            ],
        },
        {
            "name": "gpu-mixed",
            "hosts": [
                {"name": "esx-a100-01", "gpu": {"model": "A100-80GB", "count": 2}, "driver_version": NEW},
                {"name": "esx-h200-01", "gpu": {"model": "H200-141GB", "count": 8}, "driver_version": NEW},
                {"name": "esx-nodriver", "gpu": {"model": "H100-80GB", "count": 1}},
            ],
        },
        {"name": "mgmt", "hosts": [{"prefix": "esx-mgmt-", "count": 2}]},
    ],
    "vms": [
        {"name": "infer", "host": "esx-h100-01", "vgpu": ["nvidia_h100-3-40c"], "count": 2},
        {"name": "train-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c", "nvidia_h100-80c"]},
        {"name": "nb-01", "host": "esx-l40s-01", "vgpu": ["nvidia_l40s-8c"], "power": "off"},
        {"name": "plain-01", "host": "esx-h100-01"},
    ],
}


def by_name(result):
    return {h["name"]: h for h in result["hosts"]}


def test_cluster_inventory(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100"}, env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    hosts = by_name(res)
    assert sorted(hosts) == ["esx-h100-01", "esx-h100-02", "esx-h100-03", "esx-h100-old"]
    h = hosts["esx-h100-01"]
    assert h["cluster"] == "gpu-h100"
    assert h["gpu_count"] == 4 and h["gpu_model"] == "H100-80GB"
    assert len({g["pci_id"] for g in h["gpus"]}) == 4
    assert all(g["device_id"] == "0x2331" and g["memory_mb"] == 81920 for g in h["gpus"])
    assert "nvidia_h100-3-40c" in h["vgpu_profiles"] and "nvidia_h100-80c" in h["vgpu_profiles"]
    assert h["driver"]["version"] == "550.90.05" and h["driver"]["full_version"] == NEW
    assert h["scheduler"]["policy"] == "best_effort" and h["scheduler"]["configured"] is False
    assert sorted(v["name"] for v in h["vgpu_vms"]) == ["infer-01", "infer-02"]
    assert h["vgpu_vms"][0]["vgpu_profiles"] == ["nvidia_h100-3-40c"]
    assert hosts["esx-h100-02"]["vgpu_vms"][0]["vgpu_profiles"] == ["nvidia_h100-80c", "nvidia_h100-80c"]
    old = hosts["esx-h100-old"]
    assert old["driver"]["version"] == "550.54.10"
    assert old["scheduler"]["policy"] == "equal_share" and old["scheduler"]["time_slice_ms"] == 3
    assert "NVreg_EnableMSI=1" in old["nvidia_module_options"]
    summary = res["clusters"]["gpu-h100"]
    assert summary["driver_consistent"] is False
    assert summary["driver_versions"] == {"550.90.05": ["esx-h100-01", "esx-h100-02", "esx-h100-03"],
                                          "550.54.10": ["esx-h100-old"]}
    assert summary["models"] == {"H100-80GB": sorted(hosts)}
    assert summary["gpus"] == 16 and summary["vgpu_vms"] == 3


def test_graphics_and_models(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"hosts": ["esx-l40s-01", "esx-a100-01", "esx-h200-01"]},
                     env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    hosts = by_name(res)
    l40s = hosts["esx-l40s-01"]
    assert l40s["graphics"]["default_type"] == "shared_direct"
    assert l40s["graphics"]["assignment_policy"] == "consolidation"
    assert set(l40s["graphics"]["device_types"].values()) == {"shared_direct"}
    assert l40s["gpu_model"] == "L40S" and not any("-1-" in p for p in l40s["vgpu_profiles"])
    assert l40s["vgpu_vms"][0]["power_state"] == "poweredOff"
    a100 = hosts["esx-a100-01"]
    assert a100["gpu_model"] == "A100-80GB" and "grid_a100d-7-80c" in a100["vgpu_profiles"]
    h200 = hosts["esx-h200-01"]
    assert h200["gpu_count"] == 8 and "nvidia_h200x-1-18c" in h200["vgpu_profiles"]
    assert set(res["clusters"]) == {"gpu-l40s", "gpu-mixed"}


def test_host_without_driver_and_non_gpu_hosts(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"hosts": ["esx-nodriver", "esx-mgmt-01"]}, env=vsphere_env)[0]
    hosts = by_name(res)
    nodrv = hosts["esx-nodriver"]
    assert nodrv["gpu_count"] == 1
    assert nodrv["driver"]["version"] is None
    assert nodrv["vgpu_profiles"] == []
    mgmt = hosts["esx-mgmt-01"]
    assert mgmt["gpu_count"] == 0 and "driver" not in mgmt
    assert res["clusters"]["gpu-mixed"]["driver_versions"] == {"none": ["esx-nodriver"]}


def test_gather_subset_skips_per_host_calls(vsphere, vsphere_env):
    vsphere.reset_stats()
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100", "gather": ["vms"]}, env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    methods = vsphere.stats()["soap"]["methods"]
    assert "fetchSoftwarePackages" not in methods and "FetchSoftwarePackages" not in methods
    assert "QueryConfiguredModuleOptionString" not in methods
    assert all("driver" not in h for h in res["hosts"])


def test_check_mode_reads_the_same(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100"}, env=vsphere_env, check=True)[0]
    assert not res.get("failed") and res["changed"] is False
    assert len(res["hosts"]) == 4


def test_unknown_cluster_fails_clearly(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "nope"}, env=vsphere_env)[0]
    assert res["failed"]
    assert "cluster nope not found" in res["msg"] and "gpu-h100" in res["msg"]


def test_unknown_host_fails_clearly(vsphere_env):
    res = run_module("gpupool.vcf.gpu_host_info", {"hosts": ["esx-h100-01", "ghost"]}, env=vsphere_env)[0]
    assert res["failed"] and "ghost" in res["msg"] and "not found" in res["msg"]


def test_wrong_password_fails_clearly(vsphere_env):
    env = dict(vsphere_env, VMWARE_PASSWORD="wrong")
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100"}, env=env)[0]
    assert res["failed"]
    assert "invalid user name or password" in res["msg"]
    assert "wrong" not in res["msg"]


def test_untrusted_certificate_fails_clearly(vsphere_env):
    env = dict(vsphere_env)
    env.pop("VMWARE_CA_FILE")  # the system trust store does not know the rig's CA
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100"}, env=env)[0]
    assert res["failed"]
    assert "certificate" in res["msg"] and "not trusted" in res["msg"]


def test_ca_bundle_from_standard_variable(vsphere_env):
    env = dict(vsphere_env)
    ca = env.pop("VMWARE_CA_FILE")
    env["REQUESTS_CA_BUNDLE"] = ca
    res = run_module("gpupool.vcf.gpu_host_info", {"hosts": ["esx-h100-01"], "gather": []}, env=env)[0]
    assert not res.get("failed"), res.get("msg")


def test_validate_certs_is_on_by_default(vsphere_env):
    env = dict(vsphere_env)
    env.pop("VMWARE_VALIDATE_CERTS", None)
    env.pop("VMWARE_CA_FILE")
    res = run_module("gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100", "gather": []}, env=env)[0]
    assert res["failed"] and "not trusted" in res["msg"]
