"""The Prometheus client against a small local HTTP server: forms, answers, retries, one error type."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromClient, PromError


class Server:
    def __init__(self, answers):
        self.answers = list(answers)  # (status, body) per request, the last one repeats
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                form = parse_qs(self.rfile.read(length).decode())
                outer.seen.append((self.path, {k: v[0] for k, v in form.items()}, dict(self.headers)))
                status, body = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/prom" % self.httpd.server_port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    s = Server(request.param)
    yield s
    s.close()


VECTOR = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"a": "b"}, "value": [1, "2"]}]}}
MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "2"]]}]}}
BAD = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}


@pytest.mark.parametrize("server", [[(200, VECTOR)]], indirect=True)
def test_query_posts_a_form_with_the_token(server):
    c = PromClient(server.url, bearer_token="tok", sleep=lambda s: None, allow_plain_http=True)
    assert c.query("up", at=100) == VECTOR["data"]["result"]
    path, form, headers = server.seen[0]
    assert path == "/prom/api/v1/query"
    assert form == {"query": "up", "time": "100.000"}
    assert headers["Authorization"] == "Bearer tok"


@pytest.mark.parametrize("server", [[(200, MATRIX)]], indirect=True)
def test_query_range_sends_start_end_step(server):
    c = PromClient(server.url, username="u", password="p", allow_plain_http=True)
    assert c.query_range("up", 10, 70, 30) == MATRIX["data"]["result"]
    path, form, headers = server.seen[0]
    assert path == "/prom/api/v1/query_range"
    assert form == {"query": "up", "start": "10.000", "end": "70.000", "step": "30s"}
    assert headers["Authorization"].startswith("Basic ")


@pytest.mark.parametrize("server", [[(503, {"status": "error", "error": "busy"}), (200, VECTOR)]], indirect=True)
def test_a_503_is_retried(server):
    slept = []
    c = PromClient(server.url, attempts=3, sleep=slept.append)
    assert c.query("up") == VECTOR["data"]["result"]
    assert len(server.seen) == 2 and len(slept) == 1


@pytest.mark.parametrize("server", [[(503, {"status": "error", "error": "busy"})]], indirect=True)
def test_retries_are_bounded(server):
    c = PromClient(server.url, attempts=3, sleep=lambda s: None)
    with pytest.raises(PromError) as e:
        c.query("up")
    assert len(server.seen) == 3
    assert e.value.status == 503 and e.value.attempts == 3
    assert "busy" in str(e.value) and "three times" in str(e.value)


@pytest.mark.parametrize("server", [[(400, BAD)]], indirect=True)
def test_a_query_error_is_not_retried_and_says_why(server):
    c = PromClient(server.url, attempts=3, sleep=lambda s: None)
    with pytest.raises(PromError) as e:
        c.query("sum(")
    assert len(server.seen) == 1
    assert e.value.error_type == "bad_data" and "parse error at char 3" in str(e.value)


def test_refused_connection_is_a_prom_error():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = PromClient("http://127.0.0.1:%d" % port, attempts=2, sleep=lambda s: None)
    with pytest.raises(PromError) as e:
        c.query("up")
    assert e.value.kind == "refused" and e.value.attempts == 2


def test_the_connection_options_make_the_client_under_either_set_of_names(monkeypatch):
    from ansible.module_utils.basic import env_fallback
    from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom

    spec = _prom.prometheus_argument_spec()
    assert sorted(spec) == ["prometheus_allow_plain_http", "prometheus_bearer_token", "prometheus_ca_path",
                            "prometheus_url", "prometheus_validate_certs"]
    assert spec["prometheus_bearer_token"]["no_log"] is True and "fallback" not in spec["prometheus_url"]
    with_env = _prom.prometheus_argument_spec(token="prometheus_token", env_fallback=env_fallback)
    assert with_env["prometheus_token"] == dict(type="str", no_log=True, fallback=(env_fallback, ["PROMETHEUS_TOKEN"]))
    assert with_env["prometheus_url"]["fallback"] == (env_fallback, ["PROMETHEUS_URL"])

    params = dict(prometheus_url="http://prom:9090", prometheus_bearer_token="t-1", prometheus_validate_certs=True,
                  prometheus_ca_path=None, prometheus_allow_plain_http=False)
    client = _prom.prom_client(params, 7)
    assert client.base == "http://prom:9090" and client.timeout == 7 and client.headers["Authorization"] == "Bearer t-1"
    with pytest.raises(PromError) as err:  # the token over plain http, refused naming this module's option
        client.query("up")
    assert err.value.kind == "config" and "prometheus_allow_plain_http" in str(err.value)

    plain = dict(prometheus_url="https://prom", username="u", password="p", validate_certs=True, ca_path=None,
                 allow_plain_http=False, bearer_token=None)
    names = dict((k, k) for k in ("bearer_token", "username", "password", "validate_certs", "ca_path",
                                  "allow_plain_http"))
    basic = _prom.prom_client(plain, 60, attempts=3, **names)
    assert basic.headers["Authorization"].startswith("Basic ") and basic.attempts == 3 and basic.refusal is None


class Opener:
    """An opener whose request raises ``error``; ``opened`` counts the requests."""

    def __init__(self, error):
        self.error, self.opened = error, 0

    def open(self, req, timeout=None):
        self.opened += 1
        raise self.error


def test_a_network_failure_is_a_prom_error_and_a_bug_surfaces_unretried():
    c = PromClient("https://prom.example", sleep=lambda s: None, attempts=3)
    c.opener = Opener(ConnectionResetError(104, "Connection reset by peer"))
    with pytest.raises(PromError) as err:
        c.query("up")
    assert err.value.kind == "reset" and err.value.attempts == 3 and c.opener.opened == 3
    c.opener = Opener(KeyError("a bug"))
    with pytest.raises(KeyError):
        c.query("up")
    assert c.opener.opened == 1
