"""Credentials of the Prometheus client go only where its URL points: local test servers on 127.0.0.1
redirect and record the headers they get; a redirect to another origin arrives without Authorization,
and a plain http:// URL with credentials is refused unless allow_plain_http."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromClient, PromError, origin
from tests.lib.recording_server import RecordingServer

VECTOR = {"status": "success", "data": {"resultType": "vector", "result": []}}


class Recorder(RecordingServer):
    """Answers every request on /elsewhere with VECTOR; any other request is redirected (302) to
    ``target`` + /elsewhere; every request is recorded (``seen``)."""

    def __init__(self):
        self.target = None
        super().__init__(lambda method, path: (200, VECTOR) if path.endswith("/elsewhere")
                         else (302, (self.target or "") + "/elsewhere"))


@pytest.fixture
def servers():
    a, b = Recorder(), Recorder()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("auth", [dict(bearer_token="s3cret-token"), dict(username="u", password="s3cret")])
def test_a_redirect_to_another_origin_arrives_without_authorization(servers, auth):
    a, b = servers
    a.target = b.url  # another port of the same host: another origin
    c = PromClient(a.url, allow_plain_http=True, sleep=lambda s: None, **auth)
    assert c.query("up") == []
    assert "Authorization" in a.seen[0][2]
    assert [(m, p) for m, p, _h, _b in b.seen] == [("GET", "/elsewhere")]
    assert "Authorization" not in b.seen[0][2], b.seen[0][2]


def test_a_redirect_within_the_origin_keeps_authorization(servers):
    a, _b = servers
    a.target = a.url
    c = PromClient(a.url, bearer_token="tok", allow_plain_http=True, sleep=lambda s: None)
    assert c.query("up") == []
    assert [p for _m, p, _h, _b in a.seen] == ["/api/v1/query", "/elsewhere"]
    assert a.seen[1][2]["Authorization"] == "Bearer tok"


@pytest.mark.parametrize("auth", [dict(bearer_token="s3cret-tok"), dict(username="u", password="s3cret")])
def test_credentials_over_plain_http_are_refused_before_anything_is_sent(servers, auth):
    a, _b = servers
    c = PromClient(a.url, sleep=lambda s: None, plain_http_option="prometheus_allow_plain_http", **auth)
    with pytest.raises(PromError) as err:
        c.query("up")
    assert err.value.kind == "config" and "plain http" in str(err.value)
    assert "prometheus_allow_plain_http" in str(err.value) and "s3cret" not in str(err.value)
    assert a.seen == []


def test_plain_http_without_credentials_is_fine(servers):
    a, _b = servers
    a.target = a.url
    assert PromClient(a.url, sleep=lambda s: None).query("up") == []


def test_origin_is_scheme_host_and_port():
    assert origin("https://Prom.example:443/x") == origin("https://prom.example/y")
    assert origin("http://prom.example/") != origin("https://prom.example/")
    assert origin("https://prom.example:9090/") != origin("https://prom.example/")
    assert origin("https://prom.example/") != origin("https://evil.example/")
