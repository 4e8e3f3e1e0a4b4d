"""The vm_class_vgpu_profiles filter over VM classes exactly as the vm_class module writes them and the
simulator's namespace-management API lists them.

The list read here is the unit test's fixture (tests/unit/plugins/filter/vm_classes_api.json): this test
fails when the fixture is no longer what a real module run produces, so the unit test cannot drift from
the module. Rewrite the fixture with GPUPOOL_UPDATE_FIXTURES=1.
"""
import json
import os
import sys

from tests.lib.ansible_run import COLLECTIONS, ROOT, run_module, run_playbook

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True,
         "hosts": [{"prefix": "esx-h100-", "count": 1, "gpu": {"model": "H100-80GB", "count": 2},
                    "driver_version": DRIVER}]},
        {"name": "gpu-l40s", "hosts": [{"prefix": "esx-l40s-", "count": 1, "gpu": {"model": "L40S", "count": 2},
                                        "driver_version": DRIVER}]},
    ],
}
FIXTURE = ROOT / "tests" / "unit" / "plugins" / "filter" / "vm_classes_api.json"
PATH = "/api/vcenter/namespace-management/virtual-machine-classes"
# what the module is asked for; the fixture holds what the simulator keeps of it
CLASSES = [
    {"name": "gpu-inference", "cpu_count": 8, "memory_mb": 65536, "vgpu_profiles": ["nvidia_h100-3-40c"],
     "cluster": "gpu-h100", "api_form": "config_spec"},
    {"name": "gpu-training", "cpu_count": 32, "memory_mb": 393216,
     "vgpu_profiles": ["nvidia_h100-80c", "nvidia_h100-80c"], "cluster": "gpu-h100", "api_form": "config_spec"},
    {"name": "gpu-notebooks", "cpu_count": 4, "memory_mb": 32768, "vgpu_profiles": ["nvidia_l40s-8c"],
     "cluster": "gpu-l40s", "api_form": "devices"},
    {"name": "cpu-small", "cpu_count": 2, "memory_mb": 8192, "description": "no GPU"},
]
NAMESPACES = [
    {"name": "team-search", "cluster": "gpu-h100", "vm_classes": ["gpu-inference"]},
    {"name": "research", "cluster": "gpu-h100", "vm_classes": ["gpu-notebooks", "cpu-small"]},
]


def _list(sim):
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient
    client = VsphereRestClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)
    try:
        return client.get(PATH)
    finally:
        client.close()


def _filtered(env, classes, **args):
    """The filter as a playbook calls it (templated by Ansible, not imported)."""
    call = "classes | gpupool.vcf.vm_class_vgpu_profiles(%s)" % ", ".join("%s=%s" % (k, json.dumps(v)) for k, v in args.items())
    play = [{"hosts": "localhost", "gather_facts": False, "vars": {"classes": classes},
             "tasks": [{"name": "profiles", "ansible.builtin.debug": {"msg": "{{ %s }}" % call}}]}]
    res = run_playbook(play, env=env)
    assert res.rc == 0, res.stdout[-2000:]
    return res.result("profiles")["msg"]


def test_filter_reads_what_the_module_writes(vsphere, vsphere_env):
    written = {}
    for args in CLASSES:
        res = run_module("gpupool.vcf.vm_class", args, env=vsphere_env)[0]
        assert res.get("changed") is True, res.get("msg")
        written[args["name"]] = res["vm_class"]
    for args in NAMESPACES:
        res = run_module("gpupool.vcf.supervisor_namespace", args, env=vsphere_env)[0]
        assert res.get("changed") is True, res.get("msg")

    listed = _list(vsphere)
    # the config_spec form really is what was written: deviceChange, not device_change
    by_id = dict((c["id"], c) for c in listed)
    assert [c["device"]["backing"]["vgpu"] for c in by_id["gpu-training"]["config_spec"]["deviceChange"]] == \
        ["nvidia_h100-80c", "nvidia_h100-80c"]
    assert by_id["gpu-notebooks"]["devices"] == {"vgpu_devices": [{"profile_name": "nvidia_l40s-8c"}]}

    if os.environ.get("GPUPOOL_UPDATE_FIXTURES") == "1":
        FIXTURE.write_text(json.dumps(listed, indent=1, sort_keys=True) + "\n")
    assert json.loads(FIXTURE.read_text()) == listed, (
        "%s is not what vm_class and the simulator produce now; rerun with GPUPOOL_UPDATE_FIXTURES=1" % FIXTURE.name)

    assert _filtered(vsphere_env, listed) == ["nvidia_h100-3-40c", "nvidia_h100-80c", "nvidia_l40s-8c"]
    assert _filtered(vsphere_env, listed, namespaces=["research"]) == ["nvidia_l40s-8c"]
    assert _filtered(vsphere_env, listed, namespaces=["team-search", "research"], gpu_models="H100-80GB") == \
        ["nvidia_h100-3-40c"]
    # the module's own result (normal form) names the same profiles as the API's Info
    assert _filtered(vsphere_env, list(written.values())) == _filtered(vsphere_env, listed)
