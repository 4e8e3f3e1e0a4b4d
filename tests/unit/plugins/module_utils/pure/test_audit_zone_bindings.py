"""The vsphere link's zone binding findings: the Supervisor's bindings as read, judged by supervisor_zone_binding's
own plan (_vm_reservations.plan_bindings) with the tenancy role's inputs; a finding exactly where the plan has a
change, none where the bindings were not read (before API 9.0, or no Supervisor)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.unit.plugins.module_utils.pure.test_design_vm_reservations_derive import reserving

CLUSTER = "gpu-h100"


def tenancy():
    return derive(reserving())["roles"]["supervisor_gpu_tenancy"]


def row(zone, **counts):
    return {"zone": zone, "type": "WORKLOAD", "resource_allocation": {"vm_reservations": [
        {"reserved_vm_class": name, "count": n} for name, n in sorted(counts.items())]}}


def good():
    """The bindings as site.yml leaves them: two inference VMs in zone-1, one training VM in zone-2."""
    return [row("zone-1", **{"gpu-inference": 2}), row("zone-2", **{"gpu-training": 1})]


def findings(rows, names=None):
    return _audit_vsphere.zone_binding_findings(tenancy(), names or {}, {CLUSTER: rows})


def planned(rows):
    binding = tenancy()["supervisor_gpu_tenancy_zone_bindings"][0]
    wanted = vr.supervisor_bindings([dict(vm_reservations=binding["reservations"])])
    return list(vr.plan_bindings(CLUSTER, rows, wanted, binding["managed_classes"]))


def test_the_bindings_site_yml_leaves_give_no_finding():
    assert findings(good()) == [] and planned(good()) == []


def test_a_changed_count_is_one_finding_naming_both_counts():
    rows = good()
    rows[0]["resource_allocation"]["vm_reservations"][0]["count"] = 1
    out = findings(rows)
    assert [(f["rule"], f["object"], f["link"], f["severity"]) for f in out] == [
        ("zone_binding_reservations_changed", "zone binding gpu-h100/zone-1", "vsphere", "error")]
    assert "reserves gpu-inference x1; after the role: gpu-inference x2" in out[0]["message"]
    assert out[0]["fix"] == _audit_vsphere.RULES["zone_binding_reservations_changed"][3]


def test_a_zone_the_supervisor_does_not_bind_is_missing():
    out = findings(good()[:1])
    assert [(f["rule"], f["object"]) for f in out] == [("zone_binding_missing", "zone binding gpu-h100/zone-2")]
    assert "where the design reserves gpu-training x1" in out[0]["message"]


def test_another_class_reserved_by_hand_is_not_judged_but_a_managed_one_is():
    rows = good()
    rows[0]["resource_allocation"]["vm_reservations"].append({"reserved_vm_class": "best-effort-small", "count": 3})
    assert findings(rows) == []
    rows[1]["resource_allocation"]["vm_reservations"].append({"reserved_vm_class": "gpu-notebooks", "count": 1})
    out = findings(rows)
    assert [f["object"] for f in out] == ["zone binding gpu-h100/zone-2"]
    assert "reserves gpu-notebooks x1, gpu-training x1; after the role: gpu-training x1" in out[0]["message"]


@pytest.mark.parametrize("rows", [
    [],
    [row("zone-1", **{"gpu-inference": 5})],
    [row("zone-1", **{"gpu-inference": 2, "gpu-training": 1}), row("zone-2")],
    [row("zone-2", **{"gpu-training": 1, "gpu-notebooks": 2}), row("zone-9", **{"gpu-inference": 1})],
], ids=["none-bound", "count-up-zone-missing", "class-moved", "foreign-zone"])
def test_a_finding_exactly_where_the_plan_has_a_change(rows):
    out = findings(rows)
    changes = planned(rows)
    assert len(out) == len(changes) and changes
    assert [f["object"].split("/", 1)[1] for f in out] == [c.object.rsplit(" zone ", 1)[1] for c in changes]


def test_bindings_not_read_are_not_judged():
    rows = good()[:1]
    assert _audit_vsphere.zone_binding_findings(tenancy(), {}, None) == []
    assert _audit_vsphere.zone_binding_findings(tenancy(), {}, {"other-cluster": rows}) == []


def test_a_revision_s_class_is_judged_under_the_name_it_is_used_by():
    names = {"gpu-inference": "gpu-inference-r1a2b3c", "gpu-training": "gpu-training"}
    rows = [row("zone-1", **{"gpu-inference-r1a2b3c": 2}), row("zone-2", **{"gpu-training": 1})]
    assert findings(rows, names) == []
    out = findings(good(), names)
    assert [f["rule"] for f in out] == ["zone_binding_reservations_changed"]


def test_the_link_judge_reports_them_beside_the_other_vsphere_findings():
    derived = derive(reserving())
    rows = good()[:1]
    out = _audit_vsphere.audit_vsphere(derived, {}, {}, zone_bindings={CLUSTER: rows})
    assert [f["object"] for f in out if f["rule"].startswith("zone_binding")] == ["zone binding gpu-h100/zone-2"]
    assert not [f for f in _audit_vsphere.audit_vsphere(derived, {}, {}) if f["rule"].startswith("zone_binding")]
