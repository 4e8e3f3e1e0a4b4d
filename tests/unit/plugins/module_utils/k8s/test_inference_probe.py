"""pool_ready's inference probe against a small local HTTP server: the request it sends, the time to the
first streamed chunk, and one InferenceError (under ClientError) for every network or HTTP failure that keeps the
chunk from coming; a bug is not one (pool_ready would retry it)."""
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._pool_ready_api import InferenceError, InferenceProbe
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._pool_ready import completion_request
from ansible_collections.gpupool.vcf.plugins.module_utils.transport import _http

CHUNK = b'data: {"choices": [{"text": "Hello"}]}\n'


class Endpoint:
    """One answer per request (the last repeats): ``(status, lines, headers)``; ``lines`` None sends a
    keep-alive line, then nothing for longer than the client waits for a read (a stream that stalls)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.seen.append((self.path, json.loads(body), dict(self.headers)))
                status, lines, headers = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if lines is None:
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    self.wfile.write(b": keep-alive\n")
                    self.wfile.flush()
                    time.sleep(1.5)
                    return
                data = b"".join(lines)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/v1/completions" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint():
    made = []

    def make(*answers):
        made.append(Endpoint(answers))
        return made[-1]

    yield make
    for server in made:
        server.close()


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        self.now += 0.25
        return self.now


def test_the_first_chunk_is_timed_and_the_request_is_one_streaming_completion(endpoint):
    server = endpoint((200, [b": keep-alive\n", b"\n", CHUNK, b"data: [DONE]\n"], {}))
    probe = InferenceProbe(server.url, token="tok-1", timeout=5, clock=Clock())
    assert probe.first_chunk(completion_request(server.url, "tiny", "Say hello.")) == pytest.approx(0.25)
    [(path, body, headers)] = server.seen
    assert path == "/v1/completions" and body["stream"] is True and body["model"] == "tiny"
    assert headers["Authorization"] == "Bearer tok-1" and headers["Accept"] == "text/event-stream"
    assert probe.requests == 1


@pytest.mark.parametrize("answer, says", [
    ((503, [b"loading\n"], {}), "answered 503 Service Unavailable"),
    ((200, [b": keep-alive\n", b"data: [DONE]\n"], {}), "the stream ended without a chunk"),
    ((200, None, {}), "the stream broke off"),
    ((307, [b""], {"Location": "http://127.0.0.2:9/v1/completions"}), "answered 307"),
])
def test_every_way_the_chunk_does_not_come_is_one_inference_error(endpoint, answer, says):
    server = endpoint(answer)
    probe = InferenceProbe(server.url, token="tok-1", timeout=0.5)
    with pytest.raises(InferenceError) as err:
        probe.first_chunk(completion_request(server.url, None, "x"))
    assert isinstance(err.value, ClientError) and str(err.value).startswith(server.url + ": ")
    assert says in str(err.value)
    assert len(server.seen) == 1  # a redirect is not followed: the token goes nowhere else


def test_a_refused_connection_is_an_inference_error(endpoint):
    server = endpoint((200, [CHUNK], {}))
    url = server.url
    server.close()
    with pytest.raises(InferenceError) as err:
        InferenceProbe(url, timeout=2).first_chunk(b"{}")
    assert "refused" in str(err.value).lower()


def test_the_endpoint_serving_after_a_503_is_reached_on_the_next_try(endpoint):
    server = endpoint((503, [b""], {}), (200, [CHUNK], {}))
    probe = InferenceProbe(server.url, timeout=5)
    with pytest.raises(InferenceError):
        probe.first_chunk(b"{}")
    assert probe.first_chunk(b"{}") >= 0 and probe.requests == 2


class Answer:
    """An open answer whose stream yields ``lines`` and then raises ``then``; ``closed`` records the close."""

    def __init__(self, lines, then=None):
        self.lines, self.then, self.closed = list(lines), then, False

    def readline(self):
        if self.lines:
            return self.lines.pop(0)
        if self.then is not None:
            raise self.then
        return b""

    def close(self):
        self.closed = True


class Opener:
    def __init__(self, answer=None, error=None):
        self.answer, self.error = answer, error

    def open(self, req, timeout=None):
        if self.error is not None:
            raise self.error
        return self.answer


@pytest.mark.parametrize("broke", [ConnectionResetError(104, "Connection reset by peer"), TimeoutError("timed out")])
def test_a_stream_that_breaks_off_on_the_network_is_an_inference_error(broke):
    answer = Answer([b": keep-alive\n"], then=broke)
    probe = InferenceProbe("https://llm.example/v1/completions", timeout=1)
    probe.opener = Opener(answer)
    with pytest.raises(InferenceError) as err:
        probe.first_chunk(b"{}")
    assert "the stream broke off" in str(err.value) and answer.closed


@pytest.mark.parametrize("bug", [KeyError("choices"), TypeError("unsupported operand"), AttributeError("decode")])
def test_a_bug_is_not_turned_into_an_inference_error_that_pool_ready_would_retry(bug):
    """Only network and HTTP failures are InferenceErrors; a bug in the stream's handling or the request surfaces."""
    answer = Answer([b": keep-alive\n"], then=bug)
    probe = InferenceProbe("https://llm.example/v1/completions", timeout=1)
    probe.opener = Opener(answer)
    with pytest.raises(type(bug)):
        probe.first_chunk(b"{}")
    assert answer.closed
    probe.opener = Opener(error=bug)
    with pytest.raises(type(bug)):
        probe.first_chunk(b"{}")


def test_the_probe_verifies_certificates_by_default_and_follows_no_redirect():
    handlers = InferenceProbe("https://llm.example/v1/completions").opener.handlers
    [ctx] = [h._context for h in handlers if isinstance(h, _http.HTTPSHandler)]  # pylint: disable=protected-access
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert any(isinstance(h, _http.NoRedirect) for h in handlers)
    assert not any(isinstance(h, _http.SameOriginAuth) for h in handlers)
