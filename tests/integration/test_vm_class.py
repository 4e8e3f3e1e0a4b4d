"""vm_class against the vSphere simulator (REST VM classes, SOAP vGPU profiles), through ansible-playbook."""
from tests.lib.ansible_run import run_module
from tests.lib.helpers import rest

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True,
         "hosts": [{"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 2},
                    "driver_version": DRIVER}]},
        {"name": "gpu-l40s", "hosts": [{"prefix": "esx-l40s-", "count": 1, "gpu": {"model": "L40S", "count": 2},
                                        "driver_version": DRIVER}]},
    ],
}
M = "gpupool.vcf.vm_class"
PATH = "/api/vcenter/namespace-management/virtual-machine-classes"


def raw(sim, name):
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound
    client = rest(sim)
    try:
        return client.get("%s/%s" % (PATH, name))
    except VsphereNotFound:
        return None
    finally:
        client.close()


BASE = {"name": "gpu-small", "cpu_count": 4, "memory_mb": 16384, "vgpu_profiles": ["nvidia_h100-1-10c"],
        "cluster": "gpu-h100", "description": "inference"}


def test_create_rerun_check_diff_update_delete(vsphere, vsphere_env):
    res, _playbook = run_module(M, BASE, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["diff"]["before"] is None
    assert res["diff"]["after"]["memory_reservation"] == 100
    assert raw(vsphere, "gpu-small") is None

    res, _playbook = run_module(M, BASE, env=vsphere_env)
    assert res["changed"] is True and res["api_form"] == "config_spec"
    info = raw(vsphere, "gpu-small")
    assert info["cpu_count"] == 4 and info["memory_MB"] == 16384 and info["memory_reservation"] == 100
    assert info["description"] == "inference"
    change = info["config_spec"]["deviceChange"][0]
    assert change["device"]["backing"]["vgpu"] == "nvidia_h100-1-10c"
    assert info["config_spec"]["numCPUs"] == 4 and info["config_spec"]["memoryMB"] == 16384

    res, _playbook = run_module(M, BASE, env=vsphere_env)
    assert res["changed"] is False, res["changed_fields"]

    # one field: the others stay
    res, _playbook = run_module(M, {"name": "gpu-small", "cpu_count": 8}, env=vsphere_env, diff=True)
    assert res["changed"] is True and res["changed_fields"] == ["cpu_count"]
    assert res["diff"]["before"]["cpu_count"] == 4 and res["diff"]["after"]["cpu_count"] == 8
    info = raw(vsphere, "gpu-small")
    assert info["cpu_count"] == 8 and info["memory_MB"] == 16384 and info["description"] == "inference"
    assert info["config_spec"]["deviceChange"][0]["device"]["backing"]["vgpu"] == "nvidia_h100-1-10c"

    res, _playbook = run_module(M, {"name": "gpu-small", "state": "absent"}, env=vsphere_env, check=True)
    assert res["changed"] is True and raw(vsphere, "gpu-small") is not None
    res, _playbook = run_module(M, {"name": "gpu-small", "state": "absent"}, env=vsphere_env)
    assert res["changed"] is True and raw(vsphere, "gpu-small") is None
    res, _playbook = run_module(M, {"name": "gpu-small", "state": "absent"}, env=vsphere_env)
    assert res["changed"] is False


def test_legacy_devices_form(vsphere, vsphere_env):
    args = dict(BASE, name="gpu-legacy", api_form="devices", vgpu_profiles=["nvidia_h100-80c", "nvidia_h100-80c"])
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is True and res["api_form"] == "devices"
    info = raw(vsphere, "gpu-legacy")
    assert info["devices"]["vgpu_devices"] == [{"profile_name": "nvidia_h100-80c"}] * 2
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False
    # read in the legacy form, rewritten in the config_spec form without counting profiles twice
    res, _playbook = run_module(M, dict(args, api_form="config_spec", description="moved"), env=vsphere_env)
    assert res["changed"] is True and res["changed_fields"] == ["description"]
    res, _playbook = run_module(M, dict(args, api_form="config_spec", description="moved"), env=vsphere_env)
    assert res["changed"] is False


def test_bad_input_changes_nothing(vsphere, vsphere_env):
    cases = [
        (dict(BASE, name="bad1", vgpu_profiles=["nvidia_l40s-48q"]), "not offered by the hosts of cluster gpu-h100"),
        (dict(BASE, name="bad2", vgpu_profiles=["h100-10c"]), "vGPU profile h100-10c"),
        (dict(BASE, name="bad3", memory_reservation=50), "memory_reservation 50% with a vGPU"),
        (dict(BASE, name="Not_A_Label"), "is not a DNS label"),
        (dict(name="bad4", cpu_count=2), "memory_mb required"),
        (dict(BASE, name="bad5", cpu_reservation=150), "cpu_reservation must be a percentage"),
    ]
    for args, msg in cases:
        res, _playbook = run_module(M, args, env=vsphere_env)
        assert res.get("failed"), args
        assert msg in res["msg"], res["msg"]
        if "offered" in msg:
            assert "offered: " in res["msg"] and "nvidia_h100-1-10c" in res["msg"]
        if args["name"].islower():
            assert raw(vsphere, args["name"]) is None
    client = rest(vsphere)
    try:
        assert [c["id"] for c in client.get(PATH)] in ([], ["gpu-legacy"])
    finally:
        client.close()


def test_reservation_forced_to_100_on_existing_class(vsphere, vsphere_env):
    res, _playbook = run_module(M, {"name": "cpu-only", "cpu_count": 2, "memory_mb": 4096, "memory_reservation": 20},
                                env=vsphere_env)
    assert res["changed"] is True and raw(vsphere, "cpu-only")["memory_reservation"] == 20
    res, _playbook = run_module(M, {"name": "cpu-only", "vgpu_profiles": ["nvidia_h100-2-20c"]}, env=vsphere_env)
    assert res["changed"] is True and sorted(res["changed_fields"]) == ["memory_reservation", "vgpu_profiles"]
    assert raw(vsphere, "cpu-only")["memory_reservation"] == 100
    res, _playbook = run_module(M, {"name": "cpu-only", "memory_reservation": 20}, env=vsphere_env)
    assert res.get("failed") and "memory_reservation 20%" in res["msg"]


def test_profiling_parameter_written_checked_and_taken_off(vsphere, vsphere_env):
    args = dict(BASE, name="gpu-prof", vgpu_profiles=["nvidia_h100-1-10c", "nvidia_h100-1-10c"], profiling=True)
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["api_form"] == "config_spec"
    extra = raw(vsphere, "gpu-prof")["config_spec"]["extraConfig"]
    assert sorted((o["key"], o["value"]) for o in extra) == [("pciPassthru0.cfg.enable_profiling", "1"),
                                                             ("pciPassthru1.cfg.enable_profiling", "1")]
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False, res.get("changed_fields")
    # unset keeps it; false is shown by --check and then taken off
    res, _playbook = run_module(M, dict(args, profiling=None), env=vsphere_env)
    assert res["changed"] is False, res.get("changed_fields")
    res, _playbook = run_module(M, dict(args, profiling=False), env=vsphere_env, check=True, diff=True)
    assert res["changed"] is True and res["changed_fields"] == ["profiling"]
    assert res["diff"]["before"]["profiling"] is True and res["diff"]["after"]["profiling"] is False
    assert raw(vsphere, "gpu-prof")["config_spec"].get("extraConfig")
    res, _playbook = run_module(M, dict(args, profiling=False), env=vsphere_env)
    assert res["changed"] is True and not raw(vsphere, "gpu-prof")["config_spec"].get("extraConfig")
    res, _playbook = run_module(M, dict(args, api_form="devices", profiling=True, name="gpu-prof-legacy"), env=vsphere_env)
    assert res.get("failed") and "needs the config_spec form" in res["msg"]
    assert raw(vsphere, "gpu-prof-legacy") is None
