"""The design's tenants[].vm_reservations as the tenancy role takes them: the Supervisor's zone bindings (the
reservations summed per zone and VM class, the pools' classes managed) and each tenant namespace's own
reservations (the pool named by its VM class) with its DirectPath flag; nothing when no tenant reserves."""
import copy
import pathlib

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive, for_vcenter

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def reserving():
    """The example with team-search and team-vision reserving inference VMs in one zone, training in another."""
    d = copy.deepcopy(EXAMPLE)
    [c for c in d["clusters"] if c["name"] == "gpu-h100"][0]["hosts"] = 5   # room for a reserved training VM
    tenants = dict((t["name"], t) for t in d["tenants"])
    tenants["team-search"]["vm_reservations"] = [{"pool": "inference", "zone": "zone-1", "count": 1}]
    tenants["team-vision"]["vm_reservations"] = [{"pool": "inference", "zone": "zone-1", "count": 1},
                                                 {"pool": "training", "zone": "zone-2", "count": 1}]
    tenants["team-vision"]["disallow_unreserved_direct_path_usage"] = True
    return d


def test_the_bindings_sum_the_tenants_per_zone_and_class():
    tenancy = derive(reserving())["roles"]["supervisor_gpu_tenancy"]
    assert tenancy["supervisor_gpu_tenancy_zone_bindings"] == [{
        "cluster": "gpu-h100",
        "reservations": [{"zone": "zone-1", "vm_class": "gpu-inference", "count": 2},
                         {"zone": "zone-2", "vm_class": "gpu-training", "count": 1}],
        # every pool's class: a class the design stops reserving in a named zone is removed there
        "managed_classes": ["gpu-inference", "gpu-notebooks", "gpu-training"],
    }]


def test_each_tenant_namespace_carries_its_own_reservations():
    namespaces = dict((n["name"], n) for n in derive(reserving())["roles"]["supervisor_gpu_tenancy"]
                      ["supervisor_gpu_tenancy_namespaces"])
    assert namespaces["team-search"]["vm_reservations"] == [{"zone": "zone-1", "vm_class": "gpu-inference", "count": 1}]
    assert namespaces["team-search"]["disallow_unreserved_direct_path_usage"] is False
    assert namespaces["team-vision"]["vm_reservations"] == [{"zone": "zone-1", "vm_class": "gpu-inference", "count": 1},
                                                            {"zone": "zone-2", "vm_class": "gpu-training", "count": 1}]
    assert namespaces["team-vision"]["disallow_unreserved_direct_path_usage"] is True
    # a tenant without reservations, and the platform namespace, have no zone keys: their zones are not touched
    for name in ("research", "gpu-platform"):
        assert "vm_reservations" not in namespaces[name] and "disallow_unreserved_direct_path_usage" not in namespaces[name]


def test_no_reservation_no_binding():
    assert derive(copy.deepcopy(EXAMPLE))["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_zone_bindings"] == []


def test_a_vcenter_without_the_supervisor_writes_no_binding():
    d = reserving()
    del d["vcenter"]
    d["vcenters"] = {"vc-east": {"hostname": "vc-east.example.com", "datacenter": "DC0"}, "vc-west": {}}
    for cluster in d["clusters"]:
        cluster["vcenter"] = "vc-east"
    west = copy.deepcopy(d["clusters"][1])
    west.update(name="gpu-l40s-west", vcenter="vc-west")
    d["clusters"].append(west)
    derived = derive(d)
    assert for_vcenter(derived, "vc-west")["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_zone_bindings"] == []
    assert len(for_vcenter(derived, "vc-east")["roles"]["supervisor_gpu_tenancy"]["supervisor_gpu_tenancy_zone_bindings"]) == 1
