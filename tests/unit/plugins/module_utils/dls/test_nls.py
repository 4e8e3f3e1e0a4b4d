"""The DLS client's retries and the classification of its transport errors."""
import http.client as http_client
import io
import socket
import ssl
from urllib.error import HTTPError, URLError

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsClient, DlsError, _dls_error


# --- the DLS client's fault boundary (no network: one request is replaced by a script) ----------

class ScriptedDls(DlsClient):
    """A DlsClient whose requests answer from a script: {(method, path): [DlsError or dict, ...]}."""

    def __init__(self, script):
        super().__init__("dls.example.com", 443, "u", "p", timeout=2, sleep=self.slept_for)
        self.script = script
        self.sent = []
        self.slept = []

    def slept_for(self, seconds):
        self.slept.append(seconds)

    def _once(self, method, path, body=None, auth=True):
        self.sent.append((method, path))
        queue = self.script.get((method, path)) or [{}]
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item


LOGIN = ("POST", "/auth/v1/login")
ME = ("GET", "/auth/v1/user/me")
COMPOSE = ("POST", "/service_instance_manager/v1/service-instance/compose-messenger-token")


def unavailable():
    return DlsError("answered 503 Service Unavailable", status=503)


def test_dls_reads_survive_two_5xx():
    dls = ScriptedDls({LOGIN: [{"token": "b"}], ME: [unavailable(), unavailable(), {"orgName": "o"}]})
    assert dls.call("GET", "/auth/v1/user/me") == {"orgName": "o"}
    assert dls.sent.count(ME) == 3 and len(dls.slept) == 2


def test_dls_gives_up_after_three_attempts_naming_the_request():
    dls = ScriptedDls({LOGIN: [{"token": "b"}], ME: [unavailable()]})
    with pytest.raises(DlsError) as err:
        dls.call("GET", "/auth/v1/user/me")
    assert str(err.value) == "GET /auth/v1/user/me: answered 503 Service Unavailable (three times)"
    assert dls.sent.count(ME) == 3


def test_dls_token_request_is_not_repeated_blindly():
    dls = ScriptedDls({LOGIN: [{"token": "b"}], COMPOSE: [unavailable(), {"messengerToken": "t"}]})
    with pytest.raises(DlsError):
        dls.compose({}, "ref", 443, "2030-01-01")
    assert dls.sent.count(COMPOSE) == 1
    refused = DlsError("cannot reach dls.example.com:443: connection refused", kind="refused")
    dls = ScriptedDls({LOGIN: [{"token": "b"}], COMPOSE: [refused, {"messengerToken": "t"}]})
    assert dls.compose({}, "ref", 443, "2030-01-01") == "t" and dls.sent.count(COMPOSE) == 2


def test_dls_expired_bearer_logs_in_once_more_then_fails_clearly():
    expired = DlsError("answered 401 Authentication credentials expired", status=401)
    dls = ScriptedDls({LOGIN: [{"token": "b"}], ME: [expired, {"orgName": "o"}]})
    assert dls.call("GET", "/auth/v1/user/me") == {"orgName": "o"} and dls.logins == 2
    dls = ScriptedDls({LOGIN: [{"token": "b"}], ME: [expired]})
    with pytest.raises(DlsError) as err:
        dls.call("GET", "/auth/v1/user/me")
    assert dls.logins == 2 and err.value.status == 401 and "after a new login" in str(err.value)


def test_dls_transport_errors_are_classified():
    where = "dls.example.com:443"
    assert _dls_error(URLError(ConnectionRefusedError(111, "Connection refused")), where, 2).kind == "refused"
    timed_out = _dls_error(socket.timeout("timed out"), where, 2)
    assert timed_out.kind == "timeout" and str(timed_out) == "dls.example.com:443 did not answer within 2 s"
    assert _dls_error(http_client.RemoteDisconnected("closed"), where, 2).kind == "reset"
    assert _dls_error(URLError(ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED")), where, 2).kind == "tls"
    body = io.BytesIO(b'{"detail": "Service temporarily unavailable"}')
    err = _dls_error(HTTPError("https://x/", 503, "Service Unavailable", {}, body), where, 2)
    assert err.status == 503 and err.transient and str(err) == "answered 503 Service temporarily unavailable"
