"""A rule table's row may give the rule's fix as a 4th element: a finding made without a fix takes it, a
finding that names its own keeps that one, and a row of three elements (severity, link, line) still works."""
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_licensing, _audit_report
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vks, _audit_vsphere
from tests.unit.plugins.module_utils.pure.test_audit import DERIVED, good_vsphere

TABLE = OrderedDict([("with_fix", ("error", "vsphere", "A row with its fix.", "do the usual")),
                     ("without_fix", ("warning", "vks", "A row of three."))])


def test_a_finding_without_a_fix_takes_the_rows_and_one_with_a_fix_keeps_its_own():
    assert _audit.finding("with_fix", "vm_class a", "m", None, TABLE["with_fix"])["fix"] == "do the usual"
    assert _audit.finding("with_fix", "vm_class a", "m", "recreate a", TABLE["with_fix"])["fix"] == "recreate a"
    three = _audit.finding("without_fix", "node_pool b", "m", "set b back", TABLE["without_fix"], severity="info")
    assert list(three.items()) == [("rule", "without_fix"), ("severity", "info"), ("link", "vks"),
                                   ("object", "node_pool b"), ("message", "m"), ("fix", "set b back")]
    assert _audit.finding("without_fix", "node_pool b", "m", None, TABLE["without_fix"])["fix"] is None


def test_the_catalogue_keeps_three_elements_and_the_fixes_apart():
    assert all(len(entry) == 3 for entry in _audit_report.RULES.values())
    for table in (_audit_vsphere.RULES, _audit_vks.RULES, _audit_licensing.RULES):
        for rule, entry in table.items():
            assert _audit_report.RULES[rule] == entry[:3] and _audit_report.FIXES[rule] == entry[3]


def test_findings_of_the_converted_links_carry_their_tables_fix():
    classes, namespaces, policies = good_vsphere(DERIVED)
    del classes["gpu-training"]
    namespaces["team-vision"]["limits"] = dict(cpu_mhz=1, memory_mib=None, storage_mib=None)
    found = dict((f["rule"], f["fix"]) for f in _audit_vsphere.audit_vsphere(DERIVED, classes, namespaces, policies))
    assert found == {"vm_class_missing": _audit_vsphere.RULES["vm_class_missing"][3],
                     "namespace_limits_changed": _audit_vsphere.RULES["namespace_limits_changed"][3]}
    vks = [f for f in _audit_vks.audit_vks(DERIVED, {}) if f["rule"] == "vks_cluster_missing"]
    assert vks and all(f["fix"] == "create the cluster, or fix vks_clusters in the design" for f in vks)
    token = dict(path="/t/x.tok", state="expired", detail=dict(expiry="2020-01-01"))
    [expired] = [f for f in _audit_licensing.audit_licensing(DERIVED, token=token, license_series=[])
                 if f["rule"] == "client_token_expired"]
    assert expired["fix"].startswith("run site.yml (its licensing link composes a new token")
    [not_made] = [f for f in _audit_licensing.audit_licensing(DERIVED) if f["rule"] == "license_check_not_made"]
    # the table's fix, the metric in its format field
    assert not_made["fix"] == _audit_licensing.RULES["license_check_not_made"][3].format(metric="DCGM_FI_DEV_VGPU_LICENSE_STATUS")
    assert "DCGM_FI_DEV_VGPU_LICENSE_STATUS" in not_made["fix"]


def test_object_not_owned_takes_the_tables_fix_with_the_key_that_adopts():
    fix = _audit_vsphere.RULES["object_not_owned"][3]
    assert "{key}" in fix
    [found] = _audit_vsphere.not_owned_findings("vm_class", "gpu-x", {"description": "made by hand"}, "pools[].adopt", True)
    assert found["fix"] == fix.format(key="pools[].adopt") and "(pools[].adopt)" in found["fix"]
    assert _audit_vsphere.not_owned_findings("vm_class", "gpu-x", {"description": "made by hand"}, "pools[].adopt", False) == []
