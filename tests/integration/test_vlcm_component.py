"""vlcm_component against the vSphere simulator's vLCM image API: bad input changes nothing, check mode
predicts, the desired image converges and reruns unchanged, compliance per host, remediation."""
from tests.lib.ansible_run import run_module

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW

FLEET = {
    "clusters": [
        {"name": "img", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-v", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD},
            {"name": "esx-v03", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": NEW},
        ]},
        {"name": "stuck", "lifecycle": "vlcm", "hosts": [
            {"prefix": "esx-s", "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": OLD},
        ]},
        {"name": "bl", "lifecycle": "baseline", "hosts": [
            {"name": "esx-b01", "gpu": {"model": "L40S", "count": 1}, "driver_version": OLD},
        ]},
    ],
    "vms": [{"name": "busy", "host": "esx-s02", "vgpu": ["nvidia_l40s-8c"]}],
}


def vlcm(env, check=False, diff=False, **args):
    return run_module("gpupool.vcf.vlcm_component", args, env=env, check=check, diff=diff)[0]


def states(vsphere, names):
    return {n: vsphere.host_state(n) for n in names}


def test_bad_input_changes_nothing(vsphere, vsphere_env):
    cases = [
        (dict(cluster="ghost", version=NEW), "Unable to find cluster ghost"),
        (dict(cluster="img", version="latest"), "Invalid version"),
        (dict(cluster="bl", version=NEW, depot_url=DEPOT), "not managed by a vLCM image"),
        (dict(cluster="img", version=NEW, depot_url=DEPOT.replace(NEW, OLD)), "holds NVIDIA driver 550.54.10"),
        (dict(cluster="img", version="560.28.03"), "no imported depot offers component NVD-AIE-800 at version 560.28.03"),
        (dict(cluster="img", version=NEW, depot_url="https://depot.example.com/vendor-addon.zip"),
         "does not offer component NVD-AIE-800; it was removed again"),
    ]
    cases.append(cases[-1])  # imported again the second time: the first run left no depot behind
    for args, expected in cases:
        res = vlcm(vsphere_env, **args)
        assert res.get("failed") and expected in res["msg"], (args, res.get("msg"))
    # the image is untouched
    res = vlcm(vsphere_env, check=True, cluster="img", version=OLD)
    assert not res.get("failed") and res["changed"] is False and res["desired_before"] == OLD, res


def test_check_mode_predicts_then_converges_then_unchanged(vsphere, vsphere_env):
    hosts = ["esx-v01", "esx-v02", "esx-v03"]
    before = states(vsphere, hosts)
    check = vlcm(vsphere_env, check=True, diff=True, cluster="img", version="550.90.05", depot_url=DEPOT)
    assert not check.get("failed"), check
    assert check["changed"] is True and check["depot_imported"] is True and check["remediated"] is False
    assert check["diff"] == {"before": {"component": "NVD-AIE-800", "version": OLD},
                             "after": {"component": "NVD-AIE-800", "version": NEW}}

    real = vlcm(vsphere_env, diff=True, cluster="img", version="550.90.05", depot_url=DEPOT)
    assert not real.get("failed"), real
    for key in ("changed", "desired_before", "desired_after", "depot_imported", "remediated", "compliance", "diff"):
        assert real[key] == check[key], key
    assert real["desired_after"] == NEW and real["depot"]
    assert real["compliance"] == {
        "esx-v01": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": NEW},
        "esx-v02": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": NEW},
        "esx-v03": {"status": "COMPLIANT", "current_version": NEW, "desired_version": NEW},
    }
    assert states(vsphere, hosts) == before  # the image changed, the hosts did not

    again = vlcm(vsphere_env, cluster="img", version=NEW, depot_url=DEPOT)
    assert again["changed"] is False and again["depot_imported"] is False and again["depot"] == real["depot"], again


def test_remediation_brings_every_host_to_the_version(vsphere, vsphere_env):
    hosts = ["esx-v01", "esx-v02", "esx-v03"]
    before = states(vsphere, hosts)
    check = vlcm(vsphere_env, check=True, cluster="img", version=NEW, depot_url=DEPOT, remediate=True)
    assert check["changed"] is True and check["remediated"] is True, check
    assert {h: c["status"] for h, c in check["compliance"].items()} == dict.fromkeys(hosts, "COMPLIANT")
    assert states(vsphere, hosts) == before

    real = vlcm(vsphere_env, cluster="img", version=NEW, depot_url=DEPOT, remediate=True, remediate_timeout=300)
    assert not real.get("failed"), real
    assert real["changed"] is True and real["remediated"] is True
    assert real["compliance"] == check["compliance"]
    after = states(vsphere, hosts)
    for name, state in after.items():
        assert state["driver_installed"] == NEW and state["driver_running"] == NEW, name
        assert state["maintenance"] is False and state["connection_state"] == "connected", name
    assert [after[h]["reboot_count"] - before[h]["reboot_count"] for h in hosts] == [1, 1, 0]

    again = vlcm(vsphere_env, cluster="img", version=NEW, depot_url=DEPOT, remediate=True)
    assert again["changed"] is False and again["remediated"] is False, again


def test_remediation_fails_when_a_host_cannot_enter_maintenance_mode(vsphere, vsphere_env):
    res = vlcm(vsphere_env, cluster="stuck", version=NEW, depot_url=DEPOT, remediate=True, remediate_timeout=300)
    assert res.get("failed"), res
    assert "esx-s02" in res["msg"] and "maintenance mode" in res["msg"] and "busy" in res["msg"], res["msg"]
    s1, s2 = vsphere.host_state("esx-s01"), vsphere.host_state("esx-s02")
    assert s1["driver_installed"] == NEW and s1["maintenance"] is False
    assert s2["driver_installed"] == OLD and s2["maintenance"] is False
    assert res["compliance"]["esx-s02"]["status"] == "NON_COMPLIANT"
