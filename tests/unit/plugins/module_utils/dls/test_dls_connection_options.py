"""The DLS appliance's connection options, declared once in the dls room: their names beside other links
(``dls_`` prefix) and alone (no prefix but for ``dls_host``), what ``required`` makes required, the password
never logged, and the client the options make (certificates verified by default, through the shared transport).
A network failure is a DlsError; a bug is not caught."""
import ssl
from urllib.error import URLError

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls import _nls
from ansible_collections.gpupool.vcf.plugins.module_utils.transport import _http

PREFIXED = ["dls_ca_file", "dls_host", "dls_password", "dls_port", "dls_username", "dls_validate_certs"]
ALONE = ["ca_file", "dls_host", "password", "port", "username", "validate_certs"]


def test_beside_other_links_every_option_is_prefixed_and_optional():
    spec = _nls.dls_argument_spec()
    assert sorted(spec) == PREFIXED
    assert [name for name, option in sorted(spec.items()) if option.get("required")] == []
    assert spec["dls_password"]["no_log"] is True
    assert (spec["dls_port"]["default"], spec["dls_validate_certs"]["default"]) == (443, True)
    assert [name for name, option in sorted(spec.items()) if option.get("no_log")] == ["dls_password"]


def test_alone_the_host_keeps_its_name_and_host_user_and_password_are_required():
    spec = _nls.dls_argument_spec(prefix="", required=True)
    assert sorted(spec) == ALONE
    assert sorted(name for name, option in spec.items() if option.get("required")) == ["dls_host", "password", "username"]
    assert spec["password"] == dict(type="str", no_log=True, required=True)
    assert spec["port"] == dict(type="int", default=443) and spec["validate_certs"] == dict(type="bool", default=True)


def test_each_call_gives_a_spec_of_its_own():
    """A module that changes its copy (a default, a description) changes no other module's options."""
    first = _nls.dls_argument_spec(prefix="", required=True)
    first["port"]["default"] = 8443
    assert _nls.dls_argument_spec(prefix="", required=True)["port"]["default"] == 443
    assert "required" not in _nls.dls_argument_spec()["dls_host"]


@pytest.mark.parametrize("prefix", ["dls_", ""])
def test_the_options_make_the_client(prefix):
    names = _nls.dls_option_names(prefix)
    params = {names["host"]: "dls-1.example.com", names["port"]: 8443, names["username"]: "dls_admin",
              names["password"]: "pw", names["ca_file"]: None, names["validate_certs"]: False}
    client = _nls.dls_client(params, 12, prefix=prefix)
    assert isinstance(client, _nls.DlsClient)
    assert (client.base, client.where, client.timeout) == ("https://dls-1.example.com:8443", "dls-1.example.com:8443", 12)
    assert (client.username, client.password) == ("dls_admin", "pw")


def https_context(client):
    [ctx] = [h._context for h in client.opener.handlers if isinstance(h, _http.HTTPSHandler)]  # pylint: disable=protected-access
    return ctx


def test_the_client_verifies_the_appliance_certificate_unless_told_not_to():
    params = dict(dls_host="dls", dls_port=443, dls_username="u", dls_password="p", dls_ca_file=None, dls_validate_certs=True)
    ctx = https_context(_nls.dls_client(params, 5))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname is True
    assert https_context(_nls.dls_client(dict(params, dls_validate_certs=False), 5)).verify_mode == ssl.CERT_NONE
    assert any(isinstance(h, _http.SameOriginAuth) for h in _nls.dls_client(params, 5).opener.handlers)


class Opener:
    def __init__(self, error):
        self.error, self.opened = error, 0

    def open(self, req, timeout=None):
        self.opened += 1
        raise self.error


def test_a_network_failure_is_a_dls_error_and_a_bug_surfaces_unretried():
    client = _nls.DlsClient("dls.example.com", 443, "u", "p", timeout=2, sleep=lambda s: None)
    client.opener = Opener(URLError(ConnectionRefusedError(111, "Connection refused")))
    with pytest.raises(_nls.DlsError) as err:
        client.login()
    assert err.value.kind == "refused" and client.opener.opened == 3
    assert str(err.value).startswith("DLS appliance unreachable at dls.example.com:443")
    client.opener = Opener(TypeError("a bug"))
    with pytest.raises(TypeError):
        client.login()
    assert client.opener.opened == 1
