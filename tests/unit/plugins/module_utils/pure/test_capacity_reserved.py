"""Reserved-but-idle slots in the capacity report: the design's reservations by VM class, the tenant's
powered-on vGPU VMs in its vSphere Namespace counted against them, VMs elsewhere (node VMs) not."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_reserved as cr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._capacity_live import Pools

DESIGN = {
    "pools": [{"name": "inference", "cluster": "c1", "vgpu_profile": "nvidia_h100-3-40c", "vm_class": {"name": "gpu-inf"}},
              {"name": "notebooks", "cluster": "c2", "vgpu_profile": "nvidia_l40s-8c", "vm_class": {"name": "gpu-nb"}}],
    "tenants": [{"name": "team-a", "namespace": None,
                 "vm_reservations": [{"pool": "inference", "zone": "zone-1", "count": 2},
                                     {"pool": "inference", "zone": "zone-2", "count": 1}]},
                {"name": "team-b", "namespace": "ns-b", "vm_reservations": [{"pool": "notebooks", "zone": "zone-1", "count": 1}]},
                {"name": "team-c"}],
}


def vm(name, profile, namespace, power="poweredOn"):
    return {"name": name, "vgpu_profiles": [profile], "namespace": namespace, "power_state": power}


HOSTS = [
    {"name": "h1", "cluster": "c1", "vgpu_vms": [
        vm("a-1", "nvidia_h100-3-40c", "team-a"), vm("a-2", "nvidia_h100-3-40c", "team-a"),
        vm("a-3", "nvidia_h100-3-40c", "team-a"),            # beyond zone-1's 2: the zone-2 slot
        vm("a-off", "nvidia_h100-3-40c", "team-a", "poweredOff"),
        vm("inference-0", "nvidia_h100-3-40c", None),         # a node VM outside any namespace
        vm("c-1", "nvidia_h100-3-40c", "team-c")]},           # a tenant without reservations
    {"name": "h2", "cluster": "c2", "vgpu_vms": [vm("b-x", "nvidia_l40s-8c", "other-ns")]},
]


def test_reservations_by_class_and_nothing_without_them():
    assert [tuple(r.values()) for r in cr.reservations(DESIGN)] == [
        ("team-a", "gpu-inf", "zone-1", 2), ("team-a", "gpu-inf", "zone-2", 1), ("team-b", "gpu-nb", "zone-1", 1)]
    assert cr.idle_rows({"pools": DESIGN["pools"], "tenants": [{"name": "x"}]}, HOSTS, Pools(DESIGN)) is None
    assert not cr.has_reservations({}) and cr.markdown(None) == ""


def test_tenant_vms_in_their_namespace_use_the_reservations():
    rows = cr.idle_rows(DESIGN, HOSTS, Pools(DESIGN))
    # team-a: three powered-on VMs of gpu-inf in its namespace fill zone-1 (2) and zone-2 (1); team-b: none
    # in ns-b (b-x is in another namespace)
    assert [(r["tenant"], r["vm_class"], r["zone"], r["reserved"], r["used"], r["idle"]) for r in rows] == [
        ("team-a", "gpu-inf", "zone-1", 2, 2, 0), ("team-a", "gpu-inf", "zone-2", 1, 1, 0),
        ("team-b", "gpu-nb", "zone-1", 1, 0, 1)]
    assert "| team-b | gpu-nb | zone-1 | 1 | 0 | 1 |" in cr.markdown(rows)
