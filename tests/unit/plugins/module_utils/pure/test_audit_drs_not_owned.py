"""object_not_owned for DRS pinning overrides: a GPU VM pinned as designed whose override the cluster's
record (gpupool.vcf.drs-pinned) does not hold is, where the design adopts the cluster, an info finding on the
esxi link saying site.yml records it; a cluster not adopted, a recorded override, an override the plan changes
(its own finding) and an unread record give none."""
import copy

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_ownership, _audit_scope
from tests.unit.plugins.module_utils.pure.test_audit import DERIVED, good_drs, good_hosts


def not_owned(findings):
    return sorted(f["object"] for f in findings if f["rule"] == "object_not_owned")


def test_a_pinned_vm_the_record_lacks_is_named_with_the_way_to_adopt_it():
    hosts, drs = good_hosts(), good_drs()
    records = {"gpu-h100": {"vm-2", "vm-3", "vm-4"}, "gpu-l40s": set()}
    assert _audit_ownership.drs_not_owned_findings(DERIVED, hosts, drs, records) == []  # not adopted
    derived = copy.deepcopy(DERIVED)
    derived["roles"]["drs_gpu_pinning"]["drs_gpu_pinning_clusters"][0]["adopt"] = True
    [f] = _audit_ownership.drs_not_owned_findings(derived, hosts, drs, records)
    assert f["link"] == "esxi" and f["severity"] == "info" and "gpu-h100" in f["message"]
    assert f["fix"].startswith("run site.yml: the design sets adopt: true (clusters[].adopt)")
    # the esxi link's judge carries it; the audit stays clean (info)
    found = _audit_scope.audit_esxi(derived, hosts, drs, records)
    assert not_owned(found) == [f["object"]] and _audit.is_clean(found)


def test_recorded_changed_and_unread_give_none():
    hosts, drs = good_hosts(), good_drs()
    derived = copy.deepcopy(DERIVED)
    derived["roles"]["drs_gpu_pinning"]["drs_gpu_pinning_clusters"][0]["adopt"] = True
    every = {"gpu-h100": set(drs["gpu-h100"]["overrides"]), "gpu-l40s": set()}
    assert _audit_ownership.drs_not_owned_findings(derived, hosts, drs, every) == []
    assert _audit_ownership.drs_not_owned_findings(derived, hosts, drs, None) == []
    drs["gpu-h100"]["overrides"]["vm-1"] = dict(behavior="manual", enabled=True)  # the plan edits it
    records = {"gpu-h100": {"vm-2", "vm-3", "vm-4"}, "gpu-l40s": set()}
    assert _audit_ownership.drs_not_owned_findings(derived, hosts, drs, records) == []
    assert _audit_scope.audit_esxi(DERIVED, hosts, good_drs()) == _audit_scope.audit_esxi(DERIVED, hosts, good_drs(), None)
