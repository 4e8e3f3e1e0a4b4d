"""The licensing link of the audit (_audit.audit_licensing, token_state): hand-made live states, no I/O."""
import datetime
import pathlib

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_licensing, _audit_report, _guest_license
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
TODAY = datetime.date(2026, 11, 30)
DIGEST = "ab" * 32
NODES = ["gpu-1", "gpu-2"]


def meta(expiry, host="dls.example.com", port=443, digest=DIGEST):
    return {"dls_host": host, "port": port, "address_type": "ipv4", "leasing_port": 443, "expiry": expiry,
            "sha256": digest}


def series(**values):
    return [{"metric": {"__name__": "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "Hostname": node, "gpu": str(i)},
             "value": [1764504000.0, v]} for node, vs in values.items() for i, v in enumerate(vs)]


def rules(findings):
    return [(f["rule"], f["object"]) for f in findings]


def healthy(**kw):
    state = dict(dls=dict(where="dls.example.com:443", error=None, stage=None, license_server="ls-1",
                          leases=[{"id": 1}, {"id": 2}]),
                 token=dict(path="/t/pool.tok", state="valid", detail={}),
                 license_series=series(**{"gpu-1": ["1"], "gpu-2": ["1", "1"]}), gpu_nodes=list(NODES))
    state.update(kw)
    return state


def test_every_licensing_rule_is_documented_with_its_severity():
    docs = (ROOT / "docs" / "audit-rules.md").read_text()
    for name, (severity, link, doc) in _audit_report.RULES.items():
        if link == "licensing":
            assert "| `%s` | licensing | %s |" % (name, severity) in docs, name
            assert doc


def test_token_state_as_dls_client_token_renews():
    assert _audit_licensing.token_state(None, None, TODAY, 30) == ("missing", {})
    assert _audit_licensing.token_state(None, DIGEST, TODAY, 30) == ("unknown", {})
    assert _audit_licensing.token_state(meta("2027-06-01", digest="cd" * 32), DIGEST, TODAY, 30)[0] == "unknown"
    assert _audit_licensing.token_state(meta("not a date"), DIGEST, TODAY, 30)[0] == "unknown"
    state, detail = _audit_licensing.token_state(meta("2027-06-01"), DIGEST, TODAY, 30, "dls.example.com", 443)
    assert state == "valid" and detail["days_left"] == 183 and detail["expiry"] == "2027-06-01"
    # the margin: 30 days left is renewed by dls_client_token (days left <= renew_before_days)
    assert _audit_licensing.token_state(meta("2026-12-30"), DIGEST, TODAY, 30)[0] == "expiring"
    assert _audit_licensing.token_state(meta("2026-12-31"), DIGEST, TODAY, 30)[0] == "valid"
    assert _audit_licensing.token_state(meta("2026-11-30"), DIGEST, TODAY, 0)[0] == "expiring"  # its last day
    assert _audit_licensing.token_state(meta("2026-11-29"), DIGEST, TODAY, 0)[0] == "expired"
    assert _audit_licensing.token_state(meta("2027-06-01"), DIGEST, TODAY, 30, "dls-2.example.com", 443)[0] == "other_appliance"
    assert _audit_licensing.token_state(meta("2027-06-01"), DIGEST, TODAY, 30, "dls.example.com", 8443)[0] == "other_appliance"


def test_healthy_licensing_is_clean():
    assert _audit_licensing.audit_licensing(DERIVED, **healthy()) == []


def test_appliance_unreachable_or_without_license_server():
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(dls=dict(where="dls.example.com:443", error="cannot reach "
                                                                       "dls.example.com:443: connection refused", stage="login")))
    assert rules(out) == [("dls_unreachable", "dls dls.example.com:443")]
    assert out[0]["severity"] == "error" and out[0]["link"] == "licensing"
    assert "connection refused" in out[0]["message"] and "(login)" in out[0]["message"] and out[0]["fix"]
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(dls=dict(where="d:443", error="GET ...: answered 404 License server "
                                                                       "not found", stage="license_server")))
    assert rules(out) == [("dls_license_server_missing", "dls d:443")]
    assert "NVIDIA Licensing Portal" in out[0]["fix"] and "no public API" in out[0]["fix"]


def test_leases_against_gpu_nodes():
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(dls=dict(healthy()["dls"], leases=[{"id": 1}])))
    assert rules(out) == [("leases_short", "dls dls.example.com:443")]
    assert "1 lease(s) for 2 GPU node(s)" in out[0]["message"]
    # more leases than nodes (other clients share the appliance) is not drift
    assert _audit_licensing.audit_licensing(DERIVED, **healthy(dls=dict(healthy()["dls"], leases=[{}] * 5))) == []
    # no guest cluster: the design's replicas are the GPU nodes, the series' nodes are judged
    replicas = _audit_licensing.design_gpu_nodes(DERIVED)
    assert replicas == sum(p["replicas"] for c in DERIVED["vks"]["clusters"].values() for p in c["node_pools"])
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(gpu_nodes=None))
    assert rules(out) == [("leases_short", "dls dls.example.com:443")]
    assert "%d GPU node(s) (the design's replicas" % replicas in out[0]["message"]


def test_token_findings():
    for state, rule, sev in (("missing", "client_token_missing", "error"), ("unknown", "client_token_missing", "error"),
                             ("expired", "client_token_expired", "error"),
                             ("expiring", "client_token_expiring", "warning"),
                             ("other_appliance", "client_token_other_appliance", "warning")):
        detail = dict(expiry="2026-12-01", days_left=1 if state != "expired" else -1, dls_host="x", port=443)
        out = _audit_licensing.audit_licensing(DERIVED, renew_before_days=30,
                                               **healthy(token=dict(path="/t/pool.tok", state=state, detail=detail)))
        assert rules(out) == [(rule, "client_token /t/pool.tok")], state
        assert out[0]["severity"] == sev and "site.yml" in out[0]["fix"]
    out = _audit_licensing.audit_licensing(DERIVED, renew_before_days=30, **healthy(token=dict(
        path="/t/pool.tok", state="expiring", detail=dict(expiry="2026-12-10", days_left=10))))
    assert "in 10 day(s), within the renewal margin of 30 days" in out[0]["message"]


def test_node_license_status():
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(license_series=series(**{"gpu-1": ["1", "0"], "gpu-2": ["1"]})))
    assert rules(out) == [("gpu_node_unlicensed", "node gpu-1")]
    assert "1 of 2 vGPU(s) not licensed (DCGM_FI_DEV_VGPU_LICENSE_STATUS 0)" in out[0]["message"]
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(license_series=series(**{"gpu-1": ["1"]})))
    assert rules(out) == [("gpu_node_license_unknown", "node gpu-2")] and out[0]["severity"] == "warning"
    # a value that does not parse is not licensed
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(license_series=series(**{"gpu-1": ["x"], "gpu-2": ["1"]})))
    assert rules(out) == [("gpu_node_unlicensed", "node gpu-1")]
    # without the guest's nodes, the series' nodes are judged
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(gpu_nodes=None, dls=None,
                                                              license_series=series(**{"gpu-7": ["0"], "gpu-8": ["1"]})))
    assert rules(out) == [("gpu_node_unlicensed", "node gpu-7")]


def test_without_prometheus_the_check_was_not_made():
    out = _audit_licensing.audit_licensing(DERIVED, **healthy(license_series=None, how_to_check="no prometheus_url given"))
    assert rules(out) == [("license_check_not_made", "gpu_nodes")]
    f = out[0]
    assert f["severity"] == "info" and "no prometheus_url given" in f["message"]
    assert "prometheus_url" in f["fix"] and "DCGM_FI_DEV_VGPU_LICENSE_STATUS" in f["fix"]
    assert _audit.is_clean(out)


def test_parts_not_read_are_not_judged():
    assert rules(_audit_licensing.audit_licensing(DERIVED, license_series=[], gpu_nodes=[])) == []


def test_licensing_is_a_link_of_its_own():
    assert _audit.LINKS == ("esxi", "vsphere", "licensing", "vks", "guest")
    f = _audit_licensing.audit_licensing(DERIVED, **healthy(license_series=None))
    assert _audit.summarize(f)["link"]["licensing"]["info"] == 1
    assert _audit_licensing.gpu_node_names(DERIVED, [
        dict(name="gpu-1", labels={"gpupool.vcf/pool": "inference"}), dict(name="cpu-1", labels={}),
        dict(name="gpu-9", labels={}, capacity={"nvidia.com/gpu": "1"})]) == ["gpu-1", "gpu-9"]


def test_every_licensing_finding_carries_its_tables_fix():
    token = dict(path="/t/pool.tok", detail=dict(expiry="2026-12-01", days_left=1, dls_host="other", port=443))
    states = [healthy(dls=dict(where="dls.example.com:443", error="refused", stage="login")),
              healthy(dls=dict(where="dls.example.com:443", error="none in scope", stage="license_server")),
              healthy(dls=dict(where="dls.example.com:443", error=None, stage=None, license_server="ls-1", leases=[])),
              healthy(license_series=series(**{"gpu-1": ["0"]})), healthy(license_series=None, metric="MY_METRIC")]
    states += [healthy(token=dict(token, state=state)) for state in ("missing", "expired", "expiring", "other_appliance")]
    unlicensed = _guest_license.reading({"metadata": {"name": "d"}}, output="GPU 00000000:02:00.0\n"
                                        "    vGPU Software Licensed Product\n        License Status : Unlicensed\n")
    states.append(healthy(guest_licenses={"gpu-1": unlicensed}))  # gpu-2 runs no driver pod; DCGM disagrees on gpu-1
    states += [healthy(dls=None, token=None, cls_token=_audit_licensing.cls_token_state("/t/cls.tok", *stat))
               for stat in ((False,), (True, True, 300, 0o644))]
    seen = set()
    for state in states:
        for f in _audit_licensing.audit_licensing(DERIVED, **state):
            seen.add(f["rule"])
            assert f["fix"] == _audit_licensing.RULES[f["rule"]][3].format(metric=state.get("metric") or "DCGM_FI_DEV_VGPU_LICENSE_STATUS")
    assert seen == set(_audit_licensing.RULES)
    [not_made] = _audit_licensing.audit_licensing(DERIVED, **dict(states[4], dls=None, token=None))
    assert "which exports MY_METRIC per vGPU" in not_made["fix"]


def test_the_cls_token_file_is_judged_by_its_metadata():
    state = _audit_licensing.cls_token_state
    assert [state("/t/c.tok", *a)["state"] for a in ((False,), (True, False, 10, 0o600), (True, True, 0, 0o600),
                                                     (True, True, 10, 0o640), (True, True, 10, 0o602),
                                                     (True, True, 10, 0o600), (True, True, 10, 0o400))] == [
        "missing", "missing", "missing", "open", "open", "ok", "ok"]
    got = _audit_licensing.audit_licensing(DERIVED, cls_token=state("/t/c.tok", True, True, 0, 0o600), gpu_nodes=[])
    assert rules(got) == [("cls_token_missing", "cls_token /t/c.tok"), ("license_check_not_made", "gpu_nodes")]
    assert "the file is empty" in got[0]["message"]
    [open_] = _audit_licensing.audit_licensing(DERIVED, cls_token=state("/t/c.tok", True, True, 9, 0o644),
                                               license_series=[], gpu_nodes=[])
    assert open_["rule"] == "cls_token_open" and "mode 0644" in open_["message"]
