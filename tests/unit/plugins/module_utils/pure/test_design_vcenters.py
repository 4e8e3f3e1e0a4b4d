"""Several vCenters in one design: each GPU cluster names its vCenter, the single vcenter block stays
valid, a bad reference is a schema error before anything is derived, and derive() gives each vCenter
its clusters and the inputs of the roles that run once per vCenter."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive, for_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize, vcenter_env_prefix

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def two_vcenters():
    """The example's clusters (and the Supervisor) in vc-east, one more L40S cluster without pools in vc-west."""
    d = copy.deepcopy(EXAMPLE)
    del d["vcenter"]
    d["vcenters"] = {"vc-east": {"hostname": "vc-east.example.com", "datacenter": "DC0"},
                     "vc-west": {"port": 8443}}
    for cluster in d["clusters"]:
        cluster["vcenter"] = "vc-east"
    west = copy.deepcopy(d["clusters"][1])
    west.update(name="gpu-l40s-west", vcenter="vc-west")
    d["clusters"].append(west)
    return d


def schema_errors(design):
    return [(f.object, f.message) for f in normalize(design)[1]]


def test_single_vcenter_block_is_the_default_vcenter():
    derived = derive(EXAMPLE)
    assert list(derived["vcenters"]) == ["default"]
    vc = derived["vcenters"]["default"]
    assert vc["clusters"] == ["gpu-h100", "gpu-l40s"] and vc["supervisor"] is True
    assert vc["datacenter"] == "DC0" and vc["env_prefix"] == "GPUPOOL_VCENTER_DEFAULT_"
    assert derived["vcenter"] == {"hostname": None, "datacenter": "DC0"}
    # one vCenter: narrowing changes nothing
    assert for_vcenter(derived, "default") == derived


def test_each_cluster_in_its_vcenter():
    derived = derive(two_vcenters())
    east, west = derived["vcenters"]["vc-east"], derived["vcenters"]["vc-west"]
    assert (east["clusters"], west["clusters"]) == (["gpu-h100", "gpu-l40s"], ["gpu-l40s-west"])
    # the Supervisor's cluster is gpu-h100: its VM classes and namespaces go to vc-east
    assert (east["supervisor"], west["supervisor"]) == (True, False)
    assert derived["vcenter"]["hostname"] == "vc-east.example.com"
    assert west["port"] == 8443 and west["hostname"] is None
    assert [c["name"] for c in east["roles"]["drs_gpu_pinning"]["drs_gpu_pinning_clusters"]] == \
        ["gpu-h100", "gpu-l40s"]
    assert [c["name"] for c in west["roles"]["drs_gpu_pinning"]["drs_gpu_pinning_clusters"]] == ["gpu-l40s-west"]
    assert west["env_prefix"] == "GPUPOOL_VCENTER_VC_WEST_"


def test_for_vcenter_narrows_the_vsphere_links():
    derived = derive(two_vcenters())
    west = for_vcenter(derived, "vc-west")
    assert list(west["roles"]["esxi_gpu_host"]) == ["gpu-l40s-west"]
    assert list(west["esxi"]["clusters"]) == ["gpu-l40s-west"]
    assert west["roles"]["supervisor_gpu_tenancy"] == {
        "supervisor_gpu_tenancy_vm_classes": [], "supervisor_gpu_tenancy_namespaces": [],
        "supervisor_gpu_tenancy_class_revisions": False, "supervisor_gpu_tenancy_zone_bindings": []}
    assert west["vsphere"]["vm_classes"] == [] and west["vks"] == derived["vks"]
    east = for_vcenter(derived, "vc-east")
    assert east["roles"]["supervisor_gpu_tenancy"] == derived["roles"]["supervisor_gpu_tenancy"]
    assert list(east["roles"]["esxi_gpu_host"]) == ["gpu-h100", "gpu-l40s"]
    # the whole derived stays as it was
    assert list(derived["roles"]["esxi_gpu_host"]) == ["gpu-h100", "gpu-l40s", "gpu-l40s-west"]
    with pytest.raises(KeyError):
        for_vcenter(derived, "vc-north")


def test_unknown_vcenter_is_a_schema_error_naming_the_choices():
    d = two_vcenters()
    d["clusters"][2]["vcenter"] = "vc-wset"
    errors = schema_errors(d)
    assert ("clusters.gpu-l40s-west.vcenter", "unknown vCenter 'vc-wset': the design's vCenters are vc-east, vc-west") \
        in errors, errors
    with pytest.raises(DesignError) as exc:
        derive(d)
    assert "vc-wset" in str(exc.value) and "vc-west" in str(exc.value)


def test_several_vcenters_need_each_cluster_to_say_which():
    d = two_vcenters()
    del d["clusters"][2]["vcenter"]
    assert ("clusters.gpu-l40s-west.vcenter", "required field is missing: the design names several vCenters") \
        in schema_errors(d)


def test_unknown_supervisor_vcenter_and_both_blocks_and_bad_names():
    d = two_vcenters()
    d["supervisor"]["vcenter"] = "vc-south"
    assert any(o == "supervisor.vcenter" and "vc-south" in m for o, m in schema_errors(d))
    d = two_vcenters()
    d["vcenter"] = {"hostname": "vc.example.com"}
    assert any(o == "vcenter" and "both" in m for o, m in schema_errors(d))
    d = two_vcenters()
    d["vcenters"]["VC_North"] = {}
    d["clusters"][2]["vcenter"] = "VC_North"
    assert any(o == "vcenters.VC_North" for o, _m in schema_errors(d))


def test_supervisor_on_a_cluster_outside_the_design():
    d = two_vcenters()
    d["supervisor"]["cluster"] = "mgmt"
    assert any(o == "supervisor.vcenter" for o, _m in schema_errors(d))
    d["supervisor"]["vcenter"] = "vc-east"
    derived = derive(d)
    assert derived["vcenters"]["vc-east"]["supervisor"] and not derived["vcenters"]["vc-west"]["supervisor"]


def test_a_pool_on_a_cluster_outside_the_supervisors_vcenter_is_refused():
    d = two_vcenters()
    d["pools"][2]["cluster"] = "gpu-l40s-west"
    assert ("pools.notebooks.cluster", "cluster gpu-l40s-west is in vCenter vc-west, the Supervisor in vCenter "
            "vc-east: its node VMs cannot be placed there") in schema_errors(d)


def test_env_prefix():
    assert vcenter_env_prefix("vc-east-2") == "GPUPOOL_VCENTER_VC_EAST_2_"
