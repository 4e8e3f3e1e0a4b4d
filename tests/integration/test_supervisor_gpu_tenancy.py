"""Role supervisor_gpu_tenancy against the vSphere simulator: classes, namespaces, rerun, removal."""
from tests.integration import test_supervisor_namespace
from tests.integration.test_supervisor_namespace import raw
from tests.lib.helpers import rest
from tests.lib.ansible_run import run_playbook

# conftest.py starts the simulator on the module's FLEET: the same fleet as test_supervisor_namespace
FLEET = test_supervisor_namespace.FLEET

CLASSES = [
    {"name": "gpu-h100-1g10", "cpu_count": 8, "memory_mb": 65536, "vgpu_profiles": ["nvidia_h100-1-10c"]},
    {"name": "gpu-h100-full", "cpu_count": 32, "memory_mb": 262144, "vgpu_profiles": ["nvidia_h100-80c"],
     "description": "training"},
]
NAMESPACES = [
    {"name": "team-a", "vm_classes": ["gpu-h100-1g10"],
     "storage_policies": [{"policy": "vSAN Default Storage Policy", "limit_mib": 512000}],
     "access": [{"subject": "team-a", "domain": "example.com", "type": "GROUP", "role": "EDIT"}]},
    {"name": "team-b", "vm_classes": ["gpu-h100-full"], "limits": {"memory_mib": 524288}},
]


def play(classes, namespaces):
    return [{
        "name": "tenancy", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.vsphere": {}},
        "roles": [{"role": "gpupool.vcf.supervisor_gpu_tenancy",
                   "supervisor_gpu_tenancy_cluster": "gpu-h100",
                   "supervisor_gpu_tenancy_vm_classes": classes,
                   "supervisor_gpu_tenancy_namespaces": namespaces}],
    }]


def test_role_converges_and_reruns_unchanged(vsphere, vsphere_env):
    res = run_playbook(play(CLASSES, NAMESPACES), env=vsphere_env)
    assert res.rc == 0, res.stdout[-3000:]
    c = rest(vsphere)
    try:
        cls = dict((x["id"], x) for x in c.get("/api/vcenter/namespace-management/virtual-machine-classes"))
    finally:
        c.close()
    assert sorted(cls) == ["gpu-h100-1g10", "gpu-h100-full"]
    assert cls["gpu-h100-full"]["memory_reservation"] == 100
    assert raw(vsphere, "team-a")["vm_service_spec"]["vm_classes"] == ["gpu-h100-1g10"]
    assert raw(vsphere, "team-b")["resource_spec"] == {"memory_limit": 524288}

    res = run_playbook(play(CLASSES, NAMESPACES), env=vsphere_env)
    assert res.rc == 0 and res.stats.get("changed") == 0, res.stdout[-3000:]

    res = run_playbook(play(CLASSES, NAMESPACES), env=vsphere_env, check=True)
    assert res.rc == 0 and res.stats.get("changed") == 0

    # retire the full-card pool: namespace first (exact lists), then the class
    gone = [CLASSES[0], dict(CLASSES[1], state="absent")]
    tenants = [NAMESPACES[0], {"name": "team-b", "vm_classes": ["gpu-h100-1g10"], "purge_lists": True}]
    res = run_playbook(play(gone, tenants), env=vsphere_env)
    assert res.rc == 0, res.stdout[-3000:]
    assert raw(vsphere, "team-b")["vm_service_spec"]["vm_classes"] == ["gpu-h100-1g10"]
    c = rest(vsphere)
    try:
        assert [x["id"] for x in c.get("/api/vcenter/namespace-management/virtual-machine-classes")] == ["gpu-h100-1g10"]
    finally:
        c.close()


def test_role_rejects_bad_input(vsphere, vsphere_env):
    res = run_playbook(play([{"name": "bad", "cpu_count": 2, "memory_mb": 1024, "vgpu_profiles": ["nvidia_l40s-48q"]}],
                            []), env=vsphere_env)
    assert res.rc != 0
    assert "not offered by the hosts of cluster gpu-h100" in res.stdout
