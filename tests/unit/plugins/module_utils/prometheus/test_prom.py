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
