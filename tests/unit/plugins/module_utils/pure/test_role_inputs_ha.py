"""The design's HA keys (clusters[].ha, pools[].ha_restart_priority) and the ha_gpu_restart role's input checks:
defaults by shape, a cluster of one host refused with the fix, bad priorities and policies named before any
change."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._role_inputs import role_errors
from tests.lib.design_edit import cluster, example, pool


def managed(d, name="gpu-h100", **ha):
    cluster(d, name)["ha"] = dict(ha, manage=True)
    return d


def test_a_pool_names_its_priority_or_gets_its_shapes_and_admission_control_can_be_left():
    d = managed(example(), admission_control=False)
    pool(d, "training")["ha_restart_priority"] = "disabled"
    entry = derive(d)["roles"]["ha_gpu_restart"]["ha_gpu_restart_clusters"][0]
    assert entry["admission_control"] is None
    assert dict((p["name"], p["restart_priority"]) for p in entry["pools"]) == {"inference": "highest",
                                                                                "training": "disabled"}
    assert role_errors("ha_gpu_restart", derive(d)["roles"]["ha_gpu_restart"]) == []


def test_a_managed_cluster_of_one_host_keeps_no_spare():
    d = managed(example())
    cluster(d, "gpu-h100")["hosts"] = 1
    found = [f for f in validate(d) if f.object == "clusters.gpu-h100.ha.admission_control"]
    assert len(found) == 1 and found[0].severity == "error" and "keeps one host of the cluster spare" in found[0].message
    assert "ha.admission_control: false" in found[0].fix
    cluster(d, "gpu-h100")["ha"]["admission_control"] = False
    assert not [f for f in validate(d) if f.object.startswith("clusters.gpu-h100.ha")]


def test_a_priority_vsphere_lacks_is_a_schema_error():
    d = example()
    pool(d, "inference")["ha_restart_priority"] = "urgent"
    found = [f for f in validate(d) if "ha_restart_priority" in f.object]
    assert len(found) == 1 and found[0].rule == "schema" and "highest" in found[0].message


def test_the_role_names_bad_entries_before_any_change():
    errors = role_errors("ha_gpu_restart", {"ha_gpu_restart_clusters": [
        {"name": "gpu-h100", "pools": [{"name": "inference", "vgpu_profile": "", "restart_priority": "urgent"}],
         "admission_control": {"failover_level": 1, "cpu_percent": 0, "memory_percent": 25}},
        {"name": "gpu-h100", "pools": "inference"}]})
    assert "ha_gpu_restart_clusters[0].pools[0].vgpu_profile is not set" in errors
    assert any(e.startswith("ha_gpu_restart_clusters[0].pools[0].restart_priority ") for e in errors)
    assert "ha_gpu_restart_clusters[0].admission_control.cpu_percent must be from 1 to 100, not 0" in errors
    assert "ha_gpu_restart_clusters[1].pools must be a list of pools" in errors
    assert any("gpu-h100" in e and "ha_gpu_restart_clusters" in e for e in errors[-1:]), errors
