"""gpu_pool_audit's vCenter handling without a vCenter: one vCenter's task narrows the design to its
clusters and fails on a name or a link that is not its own before anything is read; the merging task
takes the vCenters' findings, skips the vCenters that were not asked, and refuses a failed one."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_scope as audit
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure

ROOT = pathlib.Path(__file__).resolve().parents[4]


def derived_two():
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    del d["vcenter"]
    d["vcenters"] = {"vc-east": {}, "vc-west": {}}
    for cluster in d["clusters"]:
        cluster["vcenter"] = "vc-east"
    west = copy.deepcopy(d["clusters"][1])
    west.update(name="gpu-l40s-west", vcenter="vc-west")
    d["clusters"].append(west)
    return derive(d)


def params(**kw):
    out = dict(vcenter=None, vcenter_results=None, links=None, hostname=None, dls_host=None,
               supervisor_kubeconfig=None, kubeconfig=None)
    out.update(kw)
    return out


def failure(fn, *args):
    with pytest.raises(Failure) as exc:
        fn(*args)
    return exc.value.msg


def test_one_vcenter_narrows_the_design_and_picks_its_links():
    derived = derived_two()
    west, links = audit.vcenter_scope(params(vcenter="vc-west"), derived)
    assert list(west["roles"]["esxi_gpu_host"]) == ["gpu-l40s-west"]
    assert links == ["esxi"]  # no Supervisor there: no vsphere link
    east, links = audit.vcenter_scope(params(vcenter="vc-east"), derived)
    assert list(east["roles"]["esxi_gpu_host"]) == ["gpu-h100", "gpu-l40s"]
    assert links == ["esxi", "vsphere"]
    assert audit.vcenter_scope(params(vcenter="vc-east", links=["esxi"]), derived)[1] == ["esxi"]
    assert audit.vcenter_scope(params(), derived) == (derived, None)


def test_bad_vcenter_inputs_fail_before_anything_is_read():
    derived = derived_two()
    msg = failure(audit.vcenter_scope, params(vcenter="vc-wset"), derived)
    assert "vCenter 'vc-wset' is not in the design (its vCenters: vc-east, vc-west)" in msg and "Nothing was read" in msg
    msg = failure(audit.vcenter_scope, params(vcenter="vc-east", links=["esxi", "guest"]), derived)
    assert "links may name only esxi and vsphere, not guest" in msg
    msg = failure(audit.vcenter_scope, params(vcenter="vc-east", vcenter_results=[]), derived)
    assert "mutually exclusive" in msg


def test_findings_of_a_vcenter_name_it():
    found = [{"rule": "driver_off_design", "severity": "error", "link": "esxi", "object": "host esx-1",
              "message": "m", "fix": "f"}]
    named = audit.in_vcenter("vc-west", found)
    assert named[0]["object"] == "vcenter vc-west: host esx-1" and named[0]["vcenter"] == "vc-west"
    assert found[0]["object"] == "host esx-1"


def test_merge_takes_findings_skips_the_unasked_and_refuses_a_failed_vcenter():
    east = {"vcenter": "vc-east", "audited": ["esxi", "vsphere"], "findings": [{"object": "a"}]}
    west = {"vcenter": "vc-west", "audited": ["esxi"], "findings": [{"object": "b"}]}
    results = [east, {"skipped": True}, west]
    assert audit.merged_vcenter_results(results) == ([{"object": "a"}, {"object": "b"}], ["esxi", "vsphere"])
    refused = {"failed": True, "msg": "Unable to audit link esxi of vCenter vc-west: refused"}
    msg = failure(audit.merged_vcenter_results, [east, refused])
    assert "vcenter_results[1] failed: Unable to audit link esxi of vCenter vc-west: refused" in msg
    msg = failure(audit.merged_vcenter_results, [{"changed": False}])
    assert "is not the result of a gpu_pool_audit task with vcenter" in msg


def test_merging_task_reads_no_vsphere_link_and_an_empty_list_asks_for_none():
    p = params(vcenter_results=[], links=[], hostname="vc.example.com", kubeconfig="/k")
    assert audit.links_to_audit(p, p["links"]) == []
    p = params(vcenter_results=[], hostname="vc.example.com", kubeconfig="/k")
    assert audit.links_to_audit(p, None) == [("licensing", False), ("vks", False), ("guest", True)]
    p = params(vcenter_results=[], links=["esxi", "guest"])
    assert "Unable to audit link(s) guest: no connection" in failure(audit.links_to_audit, p, p["links"])
