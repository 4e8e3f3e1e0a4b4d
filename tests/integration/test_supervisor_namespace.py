"""supervisor_namespace against the vSphere simulator, through ansible-playbook."""
import pytest

from tests.lib.ansible_run import run_module
from tests.lib.vsphere_api import h100_supervisor, logged_in, read_or_none

FLEET = {"clusters": [h100_supervisor(), {"name": "mgmt", "hosts": [{"prefix": "esx-mgmt-", "count": 1}]}]}
M = "gpupool.vcf.supervisor_namespace"
NS = "/api/vcenter/namespaces/instances"
VSAN = "aa6d5a82-1c88-45da-85d3-3d74b91a5bad"


@pytest.fixture(scope="module")
def seeded(vsphere):
    """Two VM classes and a content library, made directly through the API."""
    with logged_in(vsphere) as c:
        for cid in ("gpu-small", "gpu-large"):
            c.post("/api/vcenter/namespace-management/virtual-machine-classes",
                   {"id": cid, "cpu_count": 4, "memory_MB": 8192})
        lib = c.post("/api/content/local-library", {"name": "vm-images", "type": "LOCAL"})
    return dict(library=lib)


def raw(sim, name):
    return read_or_none(sim, "%s/%s" % (NS, name))


FULL = {
    "name": "team-a", "cluster": "gpu-h100", "description": "Team A inference",
    "vm_classes": ["gpu-small"], "content_libraries": ["vm-images"],
    "storage_policies": [{"policy": "vSAN Default Storage Policy", "limit_mib": 102400}],
    "limits": {"memory_mib": 65536},
    "access": [{"subject": "team-a", "domain": "example.com", "type": "GROUP", "role": "EDIT"}],
}


def test_create_rerun_check_diff_update_delete(vsphere, vsphere_env, seeded):
    res, _playbook = run_module(M, FULL, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["diff"]["before"] is None
    assert res["diff"]["after"]["storage_policies"] == {VSAN: 102400}
    assert raw(vsphere, "team-a") is None

    res, _playbook = run_module(M, FULL, env=vsphere_env)
    assert res["changed"] is True
    info = raw(vsphere, "team-a")
    assert info["description"] == "Team A inference"
    assert info["vm_service_spec"] == {"vm_classes": ["gpu-small"], "content_libraries": [seeded["library"]]}
    assert info["storage_specs"] == [{"policy": VSAN, "limit": 102400}]
    assert info["resource_spec"] == {"memory_limit": 65536}
    assert info["access_list"] == [{"subject_type": "GROUP", "domain": "example.com", "subject": "team-a",
                                    "role": "EDIT"}]

    vsphere.reset_stats()
    res, _playbook = run_module(M, FULL, env=vsphere_env)
    assert res["changed"] is False, res["changed_fields"]
    # on 8.x the Supervisors' call needs the API version alone: read without a SOAP session (no Login, Logout)
    soap = dict((m, n) for m, n in vsphere.stats()["soap"]["methods"].items() if n)
    assert soap == {"RetrieveServiceContent": 1}, soap

    # one VM class added: the library, policies, limits and access stay
    res, _playbook = run_module(M, {"name": "team-a", "vm_classes": ["gpu-large"]}, env=vsphere_env, diff=True)
    assert res["changed"] is True and res["changed_fields"] == ["vm_classes"]
    assert res["diff"]["before"]["vm_classes"] == ["gpu-small"]
    assert res["diff"]["after"]["vm_classes"] == ["gpu-large", "gpu-small"]
    info = raw(vsphere, "team-a")
    assert sorted(info["vm_service_spec"]["vm_classes"]) == ["gpu-large", "gpu-small"]
    assert info["vm_service_spec"]["content_libraries"] == [seeded["library"]]
    assert info["storage_specs"] == [{"policy": VSAN, "limit": 102400}]
    assert info["resource_spec"] == {"memory_limit": 65536}

    # exact list with purge_lists
    res, _playbook = run_module(M, {"name": "team-a", "vm_classes": ["gpu-large"], "purge_lists": True}, env=vsphere_env)
    assert res["changed"] is True and raw(vsphere, "team-a")["vm_service_spec"]["vm_classes"] == ["gpu-large"]

    # access: add one and change a role through the access endpoints; purge drops the rest
    vsphere.reset_stats()
    res, _playbook = run_module(M, {"name": "team-a", "access": [
        {"subject": "team-a", "domain": "example.com", "type": "GROUP", "role": "VIEW"},
        {"subject": "alice", "domain": "vsphere.local", "role": "OWNER"}]}, env=vsphere_env)
    assert res["changed"] is True and res["changed_fields"] == ["access"]
    paths = vsphere.stats()["rest"]["paths"]
    assert paths.get("POST %s/team-a/access/vsphere.local/alice" % NS) == 1
    assert paths.get("PUT %s/team-a/access/example.com/team-a" % NS) == 1
    assert not any(k.startswith("PATCH") for k in paths)
    res, _playbook = run_module(M, {"name": "team-a", "purge_access": True,
                                    "access": [{"subject": "alice", "domain": "vsphere.local", "role": "OWNER"}]},
                                env=vsphere_env)
    assert res["changed"] is True
    assert raw(vsphere, "team-a")["access_list"] == [{"subject_type": "USER", "domain": "vsphere.local",
                                                      "subject": "alice", "role": "OWNER"}]

    res, _playbook = run_module(M, {"name": "team-a", "state": "absent"}, env=vsphere_env, check=True)
    assert res["changed"] is True and raw(vsphere, "team-a") is not None
    res, _playbook = run_module(M, {"name": "team-a", "state": "absent"}, env=vsphere_env)
    assert res["changed"] is True and raw(vsphere, "team-a") is None
    res, _playbook = run_module(M, {"name": "team-a", "state": "absent"}, env=vsphere_env)
    assert res["changed"] is False


def test_bad_input_changes_nothing(vsphere, vsphere_env, seeded):
    cases = [
        (dict(FULL, name="bad-policy", storage_policies=[{"policy": "gold"}]),
         "unknown storage policy gold; storage policies: "),
        (dict(FULL, name="bad-lib", content_libraries=["nope"]), "unknown content library nope; content libraries: vm-images"),
        (dict(FULL, name="Team_B"), "is not a DNS label"),
        (dict(FULL, name="bad-role", access=[{"subject": "x", "domain": "d", "role": "ADMIN"}]), "OWNER, EDIT, VIEW"),
        (dict(FULL, name="not-sup", cluster="mgmt"), "cluster mgmt is not a Supervisor"),
        (dict(FULL, name="no-cluster", cluster="nope"), "cluster nope not found"),
        ({"name": "orphan", "description": "x"}, "cluster or supervisor is required"),
    ]
    for args, msg in cases:
        res, _playbook = run_module(M, args, env=vsphere_env)
        assert res.get("failed"), args
        assert msg in res["msg"], res["msg"]
    with logged_in(vsphere) as c:
        assert [n["namespace"] for n in c.get(NS)] == []


def test_create_by_supervisor_id(vsphere, vsphere_env, seeded):
    with logged_in(vsphere) as c:
        sup = [s["cluster"] for s in c.get("/api/vcenter/namespace-management/clusters")
               if s["cluster_name"] == "gpu-h100"][0]
    args = {"name": "team-v2", "supervisor": sup, "vm_classes": ["gpu-small"]}
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is True, res.get("msg")
    assert raw(vsphere, "team-v2")["vm_service_spec"]["vm_classes"] == ["gpu-small"]
    assert vsphere.stats()["rest"]["paths"].get("POST %s/v2" % NS) == 1
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False
    res, _playbook = run_module(M, {"name": "team-v2", "state": "absent"}, env=vsphere_env)
    assert res["changed"] is True and raw(vsphere, "team-v2") is None


def test_purge_gpu_vm_classes_keeps_the_plain_ones(vsphere, vsphere_env, seeded):
    """Only the VM classes with a vGPU that the namespace is not given go; a plain class stays."""
    for name, profile in (("gpu-keep", "nvidia_h100-1-10c"), ("gpu-extra", "nvidia_h100-20c")):
        res, _run = run_module("gpupool.vcf.vm_class", {"name": name, "cpu_count": 4, "memory_mb": 16384,
                                                        "vgpu_profiles": [profile], "cluster": "gpu-h100"}, env=vsphere_env)
        assert not res.get("failed"), res.get("msg")
    args = {"name": "team-p", "cluster": "gpu-h100", "vm_classes": ["gpu-keep", "gpu-extra", "gpu-small"]}
    res, _run = run_module(M, args, env=vsphere_env)
    assert not res.get("failed"), res.get("msg")
    args = dict(args, vm_classes=["gpu-keep"], purge_gpu_vm_classes=True)
    check, _run = run_module(M, args, env=vsphere_env, check=True, diff=True)
    assert check["changed"] and check["changed_fields"] == ["vm_classes"], check
    assert sorted(check["diff"]["after"]["vm_classes"]) == ["gpu-keep", "gpu-small"]
    assert sorted(raw(vsphere, "team-p")["vm_service_spec"]["vm_classes"]) == ["gpu-extra", "gpu-keep", "gpu-small"]
    real, _run = run_module(M, args, env=vsphere_env)
    assert not real.get("failed"), real.get("msg")
    assert sorted(raw(vsphere, "team-p")["vm_service_spec"]["vm_classes"]) == ["gpu-keep", "gpu-small"]
    again, _run = run_module(M, args, env=vsphere_env)
    assert again["changed"] is False
