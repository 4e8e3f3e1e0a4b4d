"""dls_client_token against the DLS contract double (tests/sim/dls)."""
import datetime
import json
import os
import socket
import stat
from pathlib import Path

from tests.lib.ansible_run import run_module

import dls_double


def args(dls, dest, **kw):
    a = {"dls_host": dls.host, "port": dls.port, "username": dls_double.USERNAME,
         "password": dls_double.PASSWORD, "dest": str(dest), "ca_file": dls.ca_file}
    a.update(kw)
    return a


COMPOSE = "/service_instance_manager/v1/service-instance/compose-messenger-token"


def test_token_lifecycle(dls, tmp_path):
    dest = tmp_path / "client_configuration_token.tok"
    res, run = run_module("gpupool.vcf.dls_client_token", args(dls, dest), check=True, diff=True)
    assert res["changed"] is True and res["reason"] == "missing", res
    assert not dest.exists() and dls.state.count("POST", COMPOSE) == 0
    res, run = run_module("gpupool.vcf.dls_client_token", args(dls, dest, expiry_days=200), diff=True)
    assert res["changed"] is True, res
    assert res["address"] == dls.state.node["fqdn"]
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    meta_file = Path(res["meta_file"])
    assert stat.S_IMODE(meta_file.stat().st_mode) == 0o600
    token = dest.read_text().strip()
    want = datetime.date.today() + datetime.timedelta(days=200)
    assert dls_double.token_expiry(token).date() == want
    assert json.loads(meta_file.read_text())["expiry"] == want.isoformat() == res["expiry"]
    sent = dls.state.composed[-1]
    assert sent["scopeReferenceList"] == [dls.state.scope_reference] and sent["leasingPort"] == 443
    assert sent["addressTypeSelections"][0]["addressType"] == "FQDN"
    # secrets never in the output
    assert dls_double.PASSWORD not in run.stdout and token not in run.stdout
    assert "diff" in res and token not in json.dumps(res["diff"])
    # still valid: nothing to do, no request at all
    before = len(dls.state.requests)
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest, expiry_days=200))[0]
    assert res["changed"] is False and res["reason"] == "valid"
    assert len(dls.state.requests) == before
    # force makes a new one
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest, expiry_days=200, force=True))[0]
    assert res["changed"] is True and res["reason"] == "force" and dest.read_text().strip() != token
    # another address type is another token
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest, expiry_days=200, address_type="ipv4"))[0]
    assert res["changed"] is True and res["reason"] == "settings"
    assert res["address"] == dls.state.node["network_location"]
    # a token file that no longer matches its metadata is replaced
    dest.write_text("edited by hand\n")
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest, expiry_days=200, address_type="ipv4"))[0]
    assert res["changed"] is True and res["reason"] == "unknown"


def test_renews_inside_the_margin(dls, tmp_path):
    dest = tmp_path / "t.tok"
    a = args(dls, dest, expiry_days=20, renew_before_days=30)
    res = run_module("gpupool.vcf.dls_client_token", a)[0]
    assert res.get("failed") and "renew_before_days" in res["msg"]
    a["renew_before_days"] = 5
    assert run_module("gpupool.vcf.dls_client_token", a)[0]["changed"] is True
    a.update(renew_before_days=19)
    res = run_module("gpupool.vcf.dls_client_token", a)[0]
    assert res["changed"] is False
    a.update(renew_before_days=19, expiry_days=40)  # 20 days left <= 19? no; 40-day setting does not matter
    assert run_module("gpupool.vcf.dls_client_token", a)[0]["changed"] is False
    meta = Path(str(dest) + ".meta.json")
    m = json.loads(meta.read_text())
    m["expiry"] = (datetime.date.today() + datetime.timedelta(days=3)).isoformat()
    meta.write_text(json.dumps(m))
    res = run_module("gpupool.vcf.dls_client_token", a)[0]
    assert res["changed"] is True and res["reason"] == "expiring"


def test_expired_bearer_token_logs_in_again(dls, tmp_path):
    dls.state.expire_next_bearer = 1
    res = run_module("gpupool.vcf.dls_client_token", args(dls, tmp_path / "t.tok"))[0]
    assert res["changed"] is True, res
    assert dls.state.count("POST", "/auth/v1/login") == 2


def test_errors_fail_clearly_and_write_nothing(dls, tmp_path):
    dest = tmp_path / "t.tok"
    res, run = run_module("gpupool.vcf.dls_client_token", args(dls, dest, password="wrong"))
    assert res.get("failed") and "401" in res["msg"] and "/auth/v1/login" in res["msg"], res
    assert "wrong" not in run.stdout.replace('"password": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"', "")
    dls.state.service_instance = None
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest))[0]
    assert res.get("failed") and "404" in res["msg"] and "Service instance not found" in res["msg"], res
    assert not dest.exists()


def test_certificate_and_appliance_down(dls, tmp_path):
    dest = tmp_path / "t.tok"
    a = args(dls, dest)
    del a["ca_file"]
    res = run_module("gpupool.vcf.dls_client_token", a, env={"SSL_CERT_FILE": os.devnull})[0]
    assert res.get("failed") and "TLS" in res["msg"], res
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    res = run_module("gpupool.vcf.dls_client_token", args(dls, dest, port=free))[0]
    assert res.get("failed") and "refused" in res["msg"].lower(), res
    assert not dest.exists()
