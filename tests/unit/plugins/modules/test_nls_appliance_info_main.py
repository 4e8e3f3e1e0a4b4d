"""nls_appliance_info through main(): the arguments parsed by AnsibleModule, the DLS appliance's REST client
replaced by a fake that answers its endpoints (the staged read of dls/_appliance.py runs as it is). An
info module: check mode gives the same result, nothing is ever changed, bad input is refused before the
appliance is asked, an appliance that refuses or fails a step is reported (not a failed task), the
password is never in the result."""
import datetime
import hashlib
import json
import re

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls import _nls
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from ansible_collections.gpupool.vcf.plugins.modules import nls_appliance_info
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import run_main

PASSWORD = "dls-pw-never-shown"
ORG, VG, LS = "org-1", 7, "ls-42"
ME = "/auth/v1/user/me"
INSTANCE = "/service_instance_manager/v1/service-instance"
SERVER = "/admin/v1/org/%s/virtual-groups/%s/license-servers/%s" % (ORG, VG, LS)
LEASES = "/admin/v1/org/%s/virtual-groups/%s/leases/all?license_server_ids=%s" % (ORG, VG, LS)


def node(node_id, fqdn, role, status="ONLINE"):
    return dict(node_id=node_id, fqdn=fqdn, network_location="10.0.0.%d" % len(fqdn), role=role, status=status)


class Appliance:
    """DlsClient over a table of answers (an exception is raised); ``made`` and ``calls`` record the use."""

    answers = {}
    login_error = None
    made = []
    calls = []

    def __init__(self, host, port, username, password, validate_certs=True, ca_file=None, timeout=30):
        Appliance.made.append((host, port, username))

    def login(self):
        Appliance.calls.append("login")
        if Appliance.login_error is not None:
            raise Appliance.login_error

    def call(self, method, path, body=None, idempotent=True):
        assert method == "GET"
        Appliance.calls.append(path)
        answer = Appliance.answers[path]
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def appliance(monkeypatch):
    Appliance.made, Appliance.calls, Appliance.login_error = [], [], None
    Appliance.answers = {
        ME: dict(name="dls_admin", orgName=ORG, userScope=dict(virtualGroupId=VG, licenseServerId=LS)),
        INSTANCE: dict(high_availability_config=dict(config=dict(nodeList=[
            node("n-1", "dls-1.example.com", "PRIMARY"), node("n-2", "dls-2.example.com", "SECONDARY")]))),
        SERVER: dict(licenseServer=dict(scopeReference="scope-ref-1")),
        LEASES: [dict(id="lease-1"), dict(id="lease-2"), dict(id="lease-3")],
    }
    monkeypatch.setattr(_nls, "DlsClient", Appliance)
    return Appliance


def run(check_mode=False, **params):
    args = dict(dls_host="dls.example.com", username="dls_admin", password=PASSWORD, wait_seconds=0, expect_nodes=2)
    args.update(params)
    return run_main(nls_appliance_info, args, check_mode=check_mode)


def token_file(tmp_path, days_left):
    path = tmp_path / "client.tok"
    path.write_text("TOKEN\n")
    expiry = datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=days_left)
    meta = dict(sha256=hashlib.sha256(b"TOKEN").hexdigest(), expiry=expiry.isoformat(), dls_host="dls.example.com",
                port=443)
    (tmp_path / "client.tok.meta.json").write_text(json.dumps(meta))
    return str(path), expiry.isoformat()


def test_a_ready_appliance_is_reported_the_same_in_check_mode(appliance, tmp_path):
    path, expiry = token_file(tmp_path, 200)
    check = run(check_mode=True, token_path=path)
    real = run(token_path=path)
    assert real == check and real["changed"] is False and "failed" not in real
    assert appliance.calls == ["login", ME, INSTANCE, SERVER, LEASES] * 2
    assert real["answered"] is True and real["ready"] is True and real["problems"] == [] and real["next_step"] is None
    assert real["license_server_installed"] is True and real["license_server"] == LS and real["leases"] == 3
    assert [(n["fqdn"], n["role"], n["health"]) for n in real["nodes"]] == [
        ("dls-1.example.com", "PRIMARY", "healthy"), ("dls-2.example.com", "SECONDARY", "healthy")]
    assert real["token"] == dict(path=path, state="valid", expiry=expiry, days_left=200)
    assert real["waited_seconds"] == 0 and real["findings"] == []
    assert missing_keys(real, nls_appliance_info, "always", "when token_path is given") == []
    assert shows([check, real], PASSWORD) == []


def test_an_unhealthy_node_an_expiring_token_and_a_missing_license_server_are_problems(appliance, tmp_path):
    path = token_file(tmp_path, 10)[0]
    appliance.answers[INSTANCE]["high_availability_config"]["config"]["nodeList"][1]["status"] = "DEGRADED"
    res = run(token_path=path)
    assert res["ready"] is False and res["problems"] == ["HA node dls-2.example.com (SECONDARY, n-2) is DEGRADED"]
    assert res["token"]["state"] == "expiring" and res["token"]["days_left"] == 10
    assert res["findings"] and all(f["rule"] for f in res["findings"])
    appliance.answers[SERVER] = dict(licenseServer={})
    res = run(expect_nodes=1)
    assert res["license_server_installed"] is False and res["license_server"] is None and res["leases"] is None
    assert "the service instance lists 2 node(s), 1 expected" in res["problems"]
    assert res["next_step"] and "changed" in res and res["changed"] is False


def test_bad_input_is_refused_before_the_appliance_is_asked(appliance):
    res = run(wait_seconds=-1, expect_nodes=3)
    assert res["failed"] is True and len(res["invalid_input"]) == 2
    assert res["msg"].startswith("Invalid input for nls_appliance_info: wait_seconds must be")
    assert "expect_nodes" in res["msg"]
    res = run(port="https")
    # ansible-core before 2.19 names the type as "<class 'str'>"
    assert res["failed"] is True
    assert re.search(r"argument 'port' is of type (str|<class 'str'>) and we were unable to convert to int", res["msg"])
    res = run(password="")
    assert res["failed"] is True and "password must not be empty" in res["msg"]
    assert appliance.made == [] and appliance.calls == []
    assert shows(res, PASSWORD) == []


def test_an_appliance_that_refuses_or_fails_a_step_is_reported(appliance):
    appliance.login_error = DlsError("dls.example.com:443 answered 401 Invalid username or password", status=401)
    res = run()
    assert "failed" not in res and res["answered"] is False and res["ready"] is False
    assert res["problems"] == ["the appliance dls.example.com:443 does not answer at login: dls.example.com:443 "
                               "answered 401 Invalid username or password"]
    assert res["next_step"].startswith("check that the appliance VM runs") and appliance.calls == ["login"]
    appliance.login_error, appliance.calls = None, []
    appliance.answers[LEASES] = DlsError("answered 503 Service Unavailable", status=503)
    res = run()  # a transient answer: the appliance is not answering (yet)
    assert res["answered"] is True and res["ready"] is False and res["license_server_installed"] is None
    assert res["problems"] == ["the appliance dls.example.com:443 does not answer at leases: answered 503 Service Unavailable"]
    appliance.answers[LEASES] = dict(unexpected=True)  # an answer without the list of leases
    res = run()
    assert res["ready"] is False and res["license_server_installed"] is True and res["leases"] is None
    assert res["problems"] == ["the leases of license server ls-42 cannot be read: leases/all answered without a list "
                               "of leases"]
    assert shows(res, PASSWORD) == []
