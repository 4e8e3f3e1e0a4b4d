"""dls_client_token through main(): the arguments parsed by AnsibleModule (the timeout alias, the leasing
port's choices), the DLS appliance's REST client replaced by a fake. Check mode predicts the real run, a
rerun keeps the token (changed false, the appliance not asked), --diff shows the token's settings before
and after, bad input is refused before the appliance is asked, a failed request names the step and says
what was left; neither the password nor the token is in the result."""
import json
import os

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls import _nls
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from ansible_collections.gpupool.vcf.plugins.modules import dls_client_token
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import run_main
from tests.unit.plugins.modules.test_runner_modules import FakeDls

PASSWORD = "dls-pw-never-shown"


class Appliance(FakeDls):
    """The fake appliance; ``made`` counts the clients, ``fail`` names the request that raises."""

    made = 0
    fail = None
    timeouts = []

    def __init__(self, host, port, username, password, validate_certs=True, ca_file=None, timeout=30):
        Appliance.made += 1
        Appliance.timeouts.append(timeout)
        FakeDls.__init__(self, host, port, username, password, validate_certs, ca_file, timeout)

    def discover(self, address_type):
        if Appliance.fail == "discover":
            raise DlsError("dls.example.com:443 answered 401 Invalid username or password", status=401)
        return FakeDls.discover(self, address_type)

    def compose(self, selection, scope_ref, leasing_port, expiry):
        if Appliance.fail == "compose":
            raise DlsError("dls.example.com:443 answered 500 Internal Server Error", status=500)
        return FakeDls.compose(self, selection, scope_ref, leasing_port, expiry)


@pytest.fixture
def dls(monkeypatch):
    FakeDls.composed = []
    Appliance.made, Appliance.fail, Appliance.timeouts = 0, None, []
    monkeypatch.setattr(_nls, "DlsClient", Appliance)
    return Appliance


def run(tmp_path, check_mode=False, diff=False, **params):
    args = dict(dls_host="dls.example.com", username="dls_admin", password=PASSWORD, dest=str(tmp_path / "client.tok"))
    args.update(params)
    return run_main(dls_client_token, args, check_mode=check_mode, diff=diff)


def secrets():
    return [PASSWORD] + ["TOKEN-%d" % (n + 1) for n in range(len(FakeDls.composed) + 1)]


def test_check_mode_predicts_the_token_and_the_rerun_keeps_it(tmp_path, dls):
    dest = tmp_path / "client.tok"
    check = run(tmp_path, check_mode=True, diff=True)
    assert dls.composed == [] and not dest.exists() and not os.path.exists(str(dest) + ".meta.json")
    real = run(tmp_path, diff=True)
    assert real == check and real["changed"] is True and real["reason"] == "missing"
    assert real["dest"] == str(dest) and real["meta_file"] == str(dest) + ".meta.json" and real["address"] == "dls.example.com"
    assert real["diff"] == dict(before={}, after=dict(dls_host="dls.example.com", port=443, address_type="fqdn",
                                                      leasing_port=443, expiry=real["expiry"], address="dls.example.com"))
    assert dest.read_text() == "TOKEN-1\n" and oct(dest.stat().st_mode & 0o777) == "0o600"
    assert json.loads((tmp_path / "client.tok.meta.json").read_text())["expiry"] == real["expiry"]
    assert missing_keys(real, dls_client_token, "always", "success", "when a token was made") == []
    made = dls.made
    again = run(tmp_path, diff=True)
    assert again == dict(changed=False, dest=str(dest), meta_file=real["meta_file"], reason="valid", expiry=real["expiry"])
    assert dls.made == made and dls.composed == [real["expiry"]]  # the appliance was not asked again
    assert shows([check, real, again], *secrets()) == []


def test_other_settings_make_a_new_token_and_the_diff_shows_them(tmp_path, dls):
    first = run(tmp_path)
    check = run(tmp_path, check_mode=True, diff=True, leasing_port=8082)
    assert (tmp_path / "client.tok").read_text() == "TOKEN-1\n"
    real = run(tmp_path, diff=True, leasing_port=8082)
    assert real == check and real["reason"] == "settings"
    before, after = real["diff"]["before"], real["diff"]["after"]
    assert (before["leasing_port"], after["leasing_port"]) == (443, 8082) and before["expiry"] == first["expiry"]
    assert (tmp_path / "client.tok").read_text() == "TOKEN-2\n"
    assert run(tmp_path, leasing_port=8082)["changed"] is False
    assert run(tmp_path, leasing_port=8082, timeout=5, force=True)["reason"] == "force" and dls.timeouts[-1] == 5


def test_bad_input_is_refused_before_the_appliance_is_asked(tmp_path, dls):
    res = run(tmp_path, expiry_days=30, renew_before_days=30)
    assert res["failed"] is True
    assert res["invalid_input"] == ["renew_before_days must be from 0 to 29 days (below expiry_days), not 30"]
    res = run(tmp_path, leasing_port=8443)
    assert res["failed"] is True and "value of leasing_port must be one of: 443, 8082, got: 8443" in res["msg"]
    res = run(tmp_path, password="")
    assert res["failed"] is True and "password must not be empty" in res["msg"]
    res = run(tmp_path, dest=str(tmp_path / "no-such-folder" / "client.tok"))
    assert res["failed"] is True and res["msg"].endswith("must be a file path in an existing folder")
    assert dls.made == 0 and dls.composed == [] and os.listdir(str(tmp_path)) == []
    assert shows(res, PASSWORD) == []


def test_a_failed_request_names_the_step_and_what_was_left(tmp_path, dls):
    dls.fail = "discover"
    res = run(tmp_path)
    assert res["failed"] is True and "changed" not in res and res["written"] is False
    assert res["msg"] == ("Unable to get a client configuration token from DLS dls.example.com:443: dls.example.com:443 "
                          "answered 401 Invalid username or password; no token was written, a rerun makes it")
    dls.fail = None
    run(tmp_path)
    dls.fail = "compose"
    res = run(tmp_path, force=True)
    assert res["failed"] is True and res["reason"] == "force" and res["written"] is False
    assert res["msg"].endswith("answered 500 Internal Server Error; the token in %s was left as it was, a rerun makes it"
                               % (tmp_path / "client.tok"))
    assert (tmp_path / "client.tok").read_text() == "TOKEN-1\n"
    assert shows(res, *secrets()) == []
