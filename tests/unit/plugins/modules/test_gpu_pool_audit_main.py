"""gpu_pool_audit through main() on the runner: the arguments parsed by AnsibleModule, the links' readers
replaced by fakes that answer as the platform would (the judges, the report and the verdict are the module's
own). A clean audit, a finding of each severity against fail_on, a link that cannot be read, and check mode
predicting the real run (the report file included)."""
import copy
import json

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _audit_read
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_audit
from tests.lib.module_contract import missing_keys
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.module_utils.pure.test_audit import DERIVED, ROOT, good_drs, good_hosts, good_vsphere

DESIGN = str(ROOT / "examples" / "design.yml")


class Platform:
    """What the fake readers answer: the hosts and DRS of the esxi link, the vSphere objects, the guest's state."""

    def __init__(self):
        classes, namespaces, policies = good_vsphere(copy.deepcopy(DERIVED))
        self.vsphere = dict(vm_classes=classes, namespaces=namespaces, storage_policies=policies)
        self.esxi = (good_hosts(), good_drs())
        self.records = dict((name, set(c["overrides"])) for name, c in good_drs().items())  # every override ours
        self.fail = {}
        self.reads = []

    def read(self, link, answer):
        self.reads.append(link)
        if link in self.fail:
            raise self.fail[link]
        return copy.deepcopy(answer)


@pytest.fixture
def platform(monkeypatch):
    state = Platform()
    monkeypatch.setattr(_audit_read, "read_esxi", lambda client, rest=None: state.read("esxi", state.esxi))
    monkeypatch.setattr(_audit_read, "read_vsphere", lambda module, derived: state.read("vsphere", state.vsphere))
    monkeypatch.setattr(_audit_read, "read_pinning_records", lambda client: state.read("records", state.records))
    monkeypatch.setattr(_audit_read, "k8s_client", lambda *args: "guest session")
    monkeypatch.setattr(_audit_read, "read_guest", lambda k8s, derived: state.read("guest", {}))
    return state


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, design_file=DESIGN)
    args.update(params)
    return run_main(gpu_pool_audit, args, check_mode=check_mode, diff=diff)


def rules(result):
    return [(f["rule"], f["severity"], f["object"]) for f in result["findings"]]


def test_a_clean_audit_reports_no_finding_and_changes_nothing(platform):
    res = run(links=["esxi", "vsphere"])
    assert not res.get("failed"), res
    assert res["findings"] == [] and res["clean"] is True and res["changed"] is False
    assert res["audited"] == ["esxi", "vsphere"] and platform.reads == ["esxi", "records", "vsphere"]
    assert res["summary"]["total"] == 0 and res["summary"]["link"]["vsphere"] == dict(error=0, warning=0, info=0)
    assert missing_keys(res, gpu_pool_audit, "always") == []


def test_every_severity_against_fail_on(platform, tmp_path):
    # info: the links without their connection say they were not audited, and fail nothing
    res = run(fail_on="warning")
    assert not res.get("failed") and res["clean"] is True
    assert rules(res) == [("link_not_audited", "info", link) for link in ("licensing", "vks", "guest")]
    # a warning: limits off the design
    platform.vsphere["namespaces"]["team-vision"]["limits"] = dict(cpu_mhz=1, memory_mib=None, storage_mib=None)
    assert not run(links=["vsphere"], fail_on="error").get("failed")
    res = run(links=["vsphere"], fail_on="warning")
    assert res["failed"] and res["msg"] == "The audit found 0 error(s) and 1 warning(s) (fail_on=warning)"
    assert rules(res) == [("namespace_limits_changed", "warning", "namespace team-vision")] and res["clean"] is False
    # an error besides: a pool's VM class is gone; the report is written before the run fails
    del platform.vsphere["vm_classes"]["gpu-training"]
    report = tmp_path / "audit.json"
    res = run(links=["vsphere"], fail_on="error", report=str(report), report_format="json")
    assert res["failed"] and res["msg"] == "The audit found 1 error(s) and 1 warning(s) (fail_on=error)"
    assert res["changed"] is True and res["report"] == str(report)
    assert ("vm_class_missing", "error", "vm_class gpu-training") in rules(res)
    written = json.loads(report.read_text())
    assert written["findings"] == res["findings"] and written["clean"] is False and written["audited"] == ["vsphere"]
    assert not run(links=["vsphere"], fail_on="none").get("failed")


def test_a_link_that_cannot_be_read_fails_naming_it_and_writes_no_report(platform, tmp_path):
    report = tmp_path / "audit.md"
    platform.fail["vsphere"] = VsphereError("503 Service Unavailable")
    res = run(report=str(report))
    assert res["failed"] and res["msg"] == "Unable to audit link vsphere: 503 Service Unavailable", res
    assert "findings" not in res and not report.exists() and platform.reads == ["esxi", "records", "vsphere"]
    del platform.fail["vsphere"]
    platform.fail["guest"] = LinkError("could not read the nodes: the API server answered 401 Unauthorized")
    res = run(links=["guest"], kubeconfig="/nonexistent/kubeconfig", report=str(report))
    assert res["failed"] and res["msg"] == ("Unable to audit link guest: could not read the nodes: the API server "
                                            "answered 401 Unauthorized; nothing was written"), res
    assert not report.exists()
    res = run(links=["vks"])
    assert res["failed"] and res["msg"].startswith("Unable to audit link(s) vks: no connection; give supervisor_kubeconfig")
    assert platform.reads == ["esxi", "records", "vsphere", "guest"]  # refused before anything was read


def test_check_mode_predicts_the_real_run_and_writes_nothing(platform, tmp_path):
    del platform.vsphere["vm_classes"]["gpu-training"]
    report = tmp_path / "audit.md"
    check = run(check_mode=True, diff=True, links=["esxi", "vsphere"], report=str(report))
    assert not report.exists() and check["changed"] is True
    real = run(diff=True, links=["esxi", "vsphere"], report=str(report))
    assert real == check
    assert real["diff"]["before"] == "" and real["diff"]["after"] == report.read_text()
    assert "| vm_class_missing | error | vsphere | vm_class gpu-training |" in report.read_text()
    again = run(check_mode=True, diff=True, links=["esxi", "vsphere"], report=str(report))
    assert again["changed"] is False and "diff" not in again
    assert dict(again, changed=True) == dict((k, v) for k, v in real.items() if k != "diff")
    assert run(links=["esxi", "vsphere"], report=str(report))["changed"] is False
