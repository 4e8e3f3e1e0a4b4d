"""gpu_pool_audit's licensing link against the DLS contract double (tests/sim/dls): the appliance,
its license server and leases, and the client token dls_client_token keeps, without a guest cluster
(the design's replicas are the GPU nodes) and without Prometheus (the check is said not made)."""
import datetime
import json

import pytest
import yaml

import dls_double
from tests.lib.ansible_run import ROOT, run_module, run_playbook

DESIGN_FILE = ROOT / "examples" / "design.yml"
DESIGN = yaml.safe_load(DESIGN_FILE.read_text())
REPLICAS = sum(p["node_pool"]["replicas"] for p in DESIGN["pools"])
NO_ENV = {"K8S_AUTH_KUBECONFIG": "", "K8S_AUTH_CONTEXT": "", "VMWARE_HOST": "", "PROMETHEUS_URL": ""}


@pytest.fixture(scope="module")
def appliance():
    with dls_double.start() as dls:
        yield dls


@pytest.fixture
def token_dir(tmp_path):
    return tmp_path


def dls_args(dls, **kw):
    a = {"dls_host": dls.host, "dls_port": dls.port, "dls_username": dls_double.USERNAME,
         "dls_password": dls_double.PASSWORD, "dls_ca_file": dls.ca_file}
    a.update(kw)
    return a


def make_token(dls, token_dir, **kw):
    """The token as site.yml's licensing link makes it: <token_dir>/<design name>.tok."""
    args = {"dls_host": dls.host, "port": dls.port, "username": dls_double.USERNAME, "password": dls_double.PASSWORD,
            "ca_file": dls.ca_file, "dest": str(token_dir / ("%s.tok" % DESIGN["name"]))}
    args.update(kw)
    res = run_module("gpupool.vcf.dls_client_token", args)[0]
    assert not res.get("failed"), res.get("msg")
    return res


def audit(dls, token_dir, **kw):
    args = dict(design_file=str(DESIGN_FILE), links=["licensing"], token_dir=str(token_dir), **dls_args(dls))
    args.update(kw)
    res, run = run_module("gpupool.vcf.gpu_pool_audit", args, env=NO_ENV)
    assert dls_double.PASSWORD not in run.stdout
    return res


def rules(res):
    return [(f["rule"], f["object"]) for f in res["findings"]]


def test_healthy_appliance_and_token(appliance, token_dir):
    appliance.set_leases(REPLICAS)
    make_token(appliance, token_dir, expiry_days=200)
    res = audit(appliance, token_dir)
    assert not res.get("failed"), res.get("msg")
    assert res["audited"] == ["licensing"]
    assert rules(res) == [("license_check_not_made", "gpu_nodes")]
    assert res["clean"] is True and res["summary"]["link"]["licensing"]["info"] == 1
    assert "prometheus_url" in res["findings"][0]["fix"]
    leases = [p for m, p in appliance.state.requests if p.endswith("/leases/all")]
    assert leases, "the leases were read"


def test_leases_short_of_the_design_nodes(appliance, token_dir):
    make_token(appliance, token_dir, expiry_days=200)
    appliance.set_leases(REPLICAS - 2)
    try:
        res = audit(appliance, token_dir)
    finally:
        appliance.set_leases(REPLICAS)
    where = "dls %s:%d" % (appliance.host, appliance.port)
    assert rules(res) == [("leases_short", where), ("license_check_not_made", "gpu_nodes")]
    assert "%d lease(s) for %d GPU node(s)" % (REPLICAS - 2, REPLICAS) in res["findings"][0]["message"]
    assert res["findings"][0]["severity"] == "error" and res["clean"] is False


def test_token_missing_expiring_and_for_another_appliance(appliance, token_dir):
    appliance.set_leases(REPLICAS)
    obj = "client_token %s" % (token_dir / ("%s.tok" % DESIGN["name"]))
    res = audit(appliance, token_dir)
    assert (("client_token_missing", obj)) in rules(res)
    # a token of 20 days, made with a renewal margin of 10: the audit's margin of 30 reports it
    make_token(appliance, token_dir, expiry_days=20, renew_before_days=10)
    res = audit(appliance, token_dir)
    assert ("client_token_expiring", obj) in rules(res)
    f = [x for x in res["findings"] if x["rule"] == "client_token_expiring"][0]
    want = (datetime.date.today() + datetime.timedelta(days=20)).isoformat()
    assert want in f["message"] and "renewal margin of 30 days" in f["message"] and f["severity"] == "warning"
    assert ("client_token_expiring", obj) not in rules(audit(appliance, token_dir, renew_before_days=10))
    # the metadata says it was made for another appliance
    meta = token_dir / ("%s.tok.meta.json" % DESIGN["name"])
    data = json.loads(meta.read_text())
    data.update(expiry=(datetime.date.today() + datetime.timedelta(days=200)).isoformat(), dls_host="dls-old.example.com")
    meta.write_text(json.dumps(data))
    assert ("client_token_other_appliance", obj) in rules(audit(appliance, token_dir))
    # expired yesterday
    data.update(expiry=(datetime.date.today() - datetime.timedelta(days=1)).isoformat(), dls_host=appliance.host)
    meta.write_text(json.dumps(data))
    assert ("client_token_expired", obj) in rules(audit(appliance, token_dir))
    # a token file edited by hand no longer matches its metadata
    (token_dir / ("%s.tok" % DESIGN["name"])).write_text("edited\n")
    assert ("client_token_missing", obj) in rules(audit(appliance, token_dir))


def test_appliance_down_or_without_license_server(appliance, token_dir):
    make_token(appliance, token_dir, expiry_days=200)
    where = "dls %s:%d" % (appliance.host, appliance.port)
    appliance.down()
    try:
        res = audit(appliance, token_dir, request_timeout=5)
    finally:
        appliance.up()
    assert not res.get("failed"), res.get("msg")
    assert rules(res)[0] == ("dls_unreachable", where)
    assert "connection refused" in res["findings"][0]["message"] and "(login)" in res["findings"][0]["message"]
    appliance.fail_next(5, status=503, path="service-instance$")
    try:
        res = audit(appliance, token_dir)
    finally:
        appliance.clear_faults()
    assert rules(res)[0] == ("dls_unreachable", where) and "(service_instance)" in res["findings"][0]["message"]
    appliance.state.license_server_installed = False
    try:
        res = audit(appliance, token_dir)
    finally:
        appliance.state.license_server_installed = True
    assert rules(res)[0] == ("dls_license_server_missing", where)
    assert "License server not found" in res["findings"][0]["message"]


def test_bad_input_before_any_request(appliance, token_dir):
    before = len(appliance.state.requests)
    res = audit(appliance, token_dir, dls_port=70000, renew_before_days=-1, prometheus_url="prom:9090")
    assert res["failed"] and "Nothing was read" in res["msg"]
    for part in ("dls_port must be from 1 to 65535", "renew_before_days must be 0 or more",
                 "prometheus_url must be an http"):
        assert part in res["msg"]
    res = audit(appliance, token_dir, dls_password=None)
    assert res["failed"] and "dls_host needs dls_username and dls_password" in res["msg"]
    assert len(appliance.state.requests) == before


def test_audit_playbook_takes_the_appliance_as_site_yml(appliance, token_dir, tmp_path):
    appliance.set_leases(REPLICAS)
    make_token(appliance, token_dir, expiry_days=200)
    report = tmp_path / "audit.json"
    res = run_playbook(ROOT / "playbooks" / "audit.yml", env=NO_ENV, extra_vars=dict(
        gpupool_dls_host=appliance.host, gpupool_dls_port=appliance.port, gpupool_dls_username=dls_double.USERNAME,
        gpupool_dls_password=dls_double.PASSWORD, gpupool_dls_ca_file=appliance.ca_file,
        gpupool_token_dir=str(token_dir), audit_links=["licensing"], audit_report=str(report),
        audit_report_format="json"))
    assert res.rc == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert dls_double.PASSWORD not in res.stdout
    data = json.loads(report.read_text())
    found = [(f["rule"], f["object"]) for f in data["findings"]]
    assert found == [("license_check_not_made", "gpu_nodes")], found
