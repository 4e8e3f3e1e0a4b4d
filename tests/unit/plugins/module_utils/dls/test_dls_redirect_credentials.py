"""The DLS client's bearer token and password stay with the appliance: two local TLS test servers on
127.0.0.1 (a certificate made for the test), the appliance redirecting to the other one, which records
the headers and bodies it gets."""
import subprocess

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsClient
from tests.lib.recording_server import RecordingServer


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tls")
    key, crt = tmp / "key.pem", tmp / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(crt), str(key)


class Appliance(RecordingServer):
    """Logs in (token ``s3cret-bearer``); every other request is redirected (302) to ``target`` with the
    same path. ``seen``: (method, path, headers, body) of every request."""

    def __init__(self, cert, redirect=True):
        self.target = None
        super().__init__(lambda method, path: (
            (200, {"token": "s3cret-bearer", "name": "admin"})
            if path == "/auth/v1/login" and method == "POST" or not redirect else (302, self.target + path)), cert)


@pytest.fixture
def pair(cert):
    appliance, other = Appliance(cert), Appliance(cert, redirect=False)
    appliance.target = "https://127.0.0.1:%d" % other.port
    yield appliance, other
    appliance.close()
    other.close()


def client(appliance, cert):
    return DlsClient("127.0.0.1", appliance.port, "admin", "s3cret-password", ca_file=cert[0], attempts=1,
                     sleep=lambda s: None)


def test_a_redirect_to_another_origin_gets_no_bearer_token(pair, cert):
    appliance, other = pair
    me = client(appliance, cert).call("GET", "/auth/v1/user/me")
    assert me["name"] == "admin"  # the other server answered
    assert appliance.seen[1][2]["Authorization"] == "Bearer s3cret-bearer"
    assert [(m, p) for m, p, _h, _b in other.seen] == [("GET", "/auth/v1/user/me")]
    assert "Authorization" not in other.seen[0][2], other.seen[0][2]


def test_a_redirected_post_sends_neither_password_nor_token_elsewhere(pair, cert):
    appliance, other = pair
    c = client(appliance, cert)
    c.bearer = "s3cret-bearer"
    # urllib follows a redirected POST (302) as a GET without its body
    c._once("POST", "/auth/v1/login-elsewhere", {"username": "admin", "password": "s3cret-password"})
    assert appliance.seen[0][3] and b"s3cret-password" in appliance.seen[0][3]
    assert [(m, p, b) for m, p, _h, b in other.seen] == [("GET", "/auth/v1/login-elsewhere", b"")]
    assert "Authorization" not in other.seen[0][2]
