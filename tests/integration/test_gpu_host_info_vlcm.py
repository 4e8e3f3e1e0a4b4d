"""gpu_host_info on clusters managed by a vLCM image: the driver of the hosts that run the image
comes from one compliance read per cluster; every other host is read on its own, truthfully."""
from tests.lib.ansible_run import run_module

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
COMPLIANCE = "/software/compliance"
DRIVER_METHODS = ("fetchSoftwarePackages", "FetchSoftwarePackages")

FLEET = {
    "clusters": [
        # the image starts with NVD-AIE-800 at the driver most hosts have installed: NEW
        {"name": "gpu-img", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-img-", "count": 4, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": NEW,
             "nvidia_options": "NVreg_RegistryDwords=RmPVMRL=0x00030001"},
        ]},
        {"name": "gpu-img2", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-two-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
        ]},
        {"name": "gpu-base", "hosts": [
            {"prefix": "esx-base-", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": NEW},
        ]},
    ],
    "vms": [{"name": "infer", "host": "esx-img-01", "vgpu": ["nvidia_h100-20c"]}],
}


def info(vsphere, vsphere_env, **args):
    vsphere.reset_stats()
    res = run_module("gpupool.vcf.gpu_host_info", args, env=vsphere_env)[0]
    assert not res.get("failed"), res.get("msg")
    stats = vsphere.stats()
    rest_paths = (stats.get("rest") or {}).get("paths") or {}
    counts = dict(
        driver_reads=sum(stats["soap"]["methods"].get(m, 0) for m in DRIVER_METHODS),
        compliance=dict((p, n) for p, n in rest_paths.items() if p.endswith(COMPLIANCE)),
        rest=(stats.get("rest") or {}).get("total", 0),
    )
    return dict((h["name"], h) for h in res["hosts"]), res, counts


def test_compliant_cluster_driver_from_the_image_one_call(vsphere, vsphere_env):
    hosts, res, counts = info(vsphere, vsphere_env, cluster="gpu-img")
    assert sorted(hosts) == ["esx-img-01", "esx-img-02", "esx-img-03", "esx-img-04"]
    assert counts["driver_reads"] == 0
    assert list(counts["compliance"].values()) == [1]
    for name, h in hosts.items():
        assert h["driver"] == dict(version="550.90.05", full_version=NEW, source="image",
                                   packages=[dict(name="NVD-AIE-800", version=NEW, vendor="NVIDIA")]), name
        assert vsphere.host_state(name)["driver_installed"] == NEW
        # the rest of the record is read as before
        assert h["scheduler"]["policy"] == "equal_share" and h["reboot_required"] is False
    assert hosts["esx-img-01"]["vgpu_vms"][0]["name"] == "infer"
    assert res["clusters"]["gpu-img"]["driver_versions"] == {"550.90.05": sorted(hosts)}
    assert res["clusters"]["gpu-img"]["driver_consistent"] is True


def test_every_image_cluster_is_read_once_and_baseline_hosts_as_before(vsphere, vsphere_env):
    hosts, res, counts = info(vsphere, vsphere_env, gather=["driver"])
    assert sorted(counts["compliance"].values()) == [1, 1]
    assert counts["driver_reads"] == 2  # the two hosts of the baseline cluster
    assert {h["driver"]["source"] for n, h in hosts.items() if not n.startswith("esx-base-")} == {"image"}
    assert {hosts[n]["driver"]["source"] for n in ("esx-base-01", "esx-base-02")} == {"host"}
    assert hosts["esx-base-01"]["driver"]["full_version"] == NEW
    # only the baseline cluster: no REST request at all
    _hosts, _res, counts = info(vsphere, vsphere_env, cluster="gpu-base")
    assert counts["rest"] == 0 and counts["driver_reads"] == 2
    # without the driver: no compliance either
    _hosts, _res, counts = info(vsphere, vsphere_env, cluster="gpu-img", gather=["vms", "scheduler"])
    assert counts["rest"] == 0 and counts["driver_reads"] == 0


def test_a_drifted_host_is_read_on_its_own_and_reported_truthfully(vsphere, vsphere_env):
    vsphere.set_driver("esx-img-02", OLD)
    try:
        hosts, res, counts = info(vsphere, vsphere_env, cluster="gpu-img")
    finally:
        vsphere.set_driver("esx-img-02", NEW)
    assert counts["driver_reads"] == 1 and list(counts["compliance"].values()) == [1]
    drifted = hosts["esx-img-02"]
    assert drifted["driver"]["source"] == "host"
    assert drifted["driver"]["version"] == "550.54.10" and drifted["driver"]["full_version"] == OLD
    assert [h["driver"]["source"] for n, h in sorted(hosts.items()) if n != "esx-img-02"] == ["image"] * 3
    summary = res["clusters"]["gpu-img"]
    assert summary["driver_versions"] == {"550.90.05": ["esx-img-01", "esx-img-03", "esx-img-04"],
                                          "550.54.10": ["esx-img-02"]}
    assert summary["driver_consistent"] is False


def test_a_host_without_driver_is_not_given_the_image_one(vsphere, vsphere_env):
    vsphere.set_driver("esx-img-03", "")
    try:
        hosts, _res, counts = info(vsphere, vsphere_env, cluster="gpu-img", gather=["driver"])
    finally:
        vsphere.set_driver("esx-img-03", NEW)
    assert counts["driver_reads"] == 1
    assert hosts["esx-img-03"]["driver"]["version"] is None and hosts["esx-img-03"]["driver"]["source"] == "host"


def test_a_host_that_owes_a_reboot_is_read_on_its_own(vsphere, vsphere_env):
    # esx-img-04 runs OLD; the image's NEW is installed but the reboot is refused: the image's
    # compliance counts the installed software, the host does not run it yet
    vsphere.set_driver("esx-img-04", OLD)
    vsphere.inject_fault("esx-img-04", "reboot", "injected: reboot refused")
    try:
        res = run_module("gpupool.vcf.esxi_host_driver", dict(host="esx-img-04", version="550.90.05", bundle=BUNDLE),
                         env=vsphere_env)[0]
        assert res.get("failed") and "left in maintenance mode" in res["msg"]
        state = vsphere.host_state("esx-img-04")
        assert (state["driver_installed"], state["driver_running"], state["reboot_required"]) == (NEW, OLD, True)
        hosts, _res, counts = info(vsphere, vsphere_env, cluster="gpu-img", gather=["driver"])
    finally:
        vsphere.clear_faults()
        vsphere.set_driver("esx-img-04", NEW)
        run_module("gpupool.vcf.esxi_host_driver", dict(host="esx-img-04", version="550.90.05", bundle=BUNDLE),
                   env=vsphere_env)
    staged = hosts["esx-img-04"]
    assert counts["driver_reads"] == 1
    assert staged["driver"]["source"] == "host" and staged["reboot_required"] is True and staged["reboot_pending"]


def test_unreadable_compliance_falls_back_to_every_host(vsphere, vsphere_env):
    vsphere.add_rest_fault(COMPLIANCE, status=400, times=0)
    try:
        hosts, _res, counts = info(vsphere, vsphere_env, cluster="gpu-img", gather=["driver"])
    finally:
        vsphere.clear_rest_faults()
    assert counts["driver_reads"] == 4
    assert {h["driver"]["source"] for h in hosts.values()} == {"host"}
    assert {h["driver"]["full_version"] for h in hosts.values()} == {NEW}
