"""The one HTTP request path of the HTTP clients (transport/_http) against small local servers: certificates
verified by default, redirects followed with the Authorization header only within the origin or not followed at
all, and every way a request fails classified as the clients report it; an exception that is no request failure
is not one of FAILURES, so a bug in a client surfaces instead of turning into a retry."""
import errno
import http.client as http_client
import io
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.error import HTTPError, URLError

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.transport import _http


class Server:
    """Answers every request with ``answer(path) -> (status, headers, body)``; ``seen``: (path, headers)."""

    def __init__(self, answer):
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.seen.append((self.path, dict(self.headers)))
                status, headers, body = answer(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []
    yield lambda answer: made.append(Server(answer)) or made[-1]
    for server in made:
        server.close()


def https_contexts(built):
    return [h._context for h in built.handlers if isinstance(h, _http.HTTPSHandler)]  # pylint: disable=protected-access


def test_certificates_and_names_are_verified_unless_the_caller_says_not():
    [ctx] = https_contexts(_http.opener())
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname is True
    [off] = https_contexts(_http.opener(validate_certs=False))
    assert off.verify_mode == ssl.CERT_NONE and off.check_hostname is False


def test_a_ca_file_that_cannot_be_read_fails_before_anything_is_sent(tmp_path):
    with pytest.raises(_http.FAILURES):
        _http.opener(ca_path=str(tmp_path / "missing.pem"))


def test_a_redirect_within_the_origin_keeps_the_token_and_one_to_another_origin_drops_it(servers):
    other = servers(lambda path: (200, {}, b"other"))
    first = servers(lambda path: (302, {"Location": "/here" if path == "/same" else
                                        "http://127.0.0.1:%d/there" % other.port}, b"")
                    if path in ("/same", "/away") else (200, {}, b"first"))
    built = _http.opener()
    headers = {"Authorization": "Bearer t-1"}
    assert _http.send(built, "http://127.0.0.1:%d/same" % first.port, headers=headers).read() == b"first"
    assert first.seen[-1][0] == "/here" and first.seen[-1][1]["Authorization"] == "Bearer t-1"
    assert _http.send(built, "http://127.0.0.1:%d/away" % first.port, headers=headers).read() == b"other"
    assert other.seen == [("/there", other.seen[0][1])] and "Authorization" not in other.seen[0][1]


def test_without_following_a_redirect_is_the_answer(servers):
    other = servers(lambda path: (200, {}, b"other"))
    first = servers(lambda path: (307, {"Location": "http://127.0.0.1:%d/there" % other.port}, b""))
    with pytest.raises(HTTPError) as err:
        _http.send(_http.opener(follow_redirects=False), "http://127.0.0.1:%d/x" % first.port,
                   headers={"Authorization": "Bearer t-1"})
    assert err.value.code == 307 and other.seen == []
    assert isinstance(err.value, _http.FAILURES)


def test_an_http_error_says_its_status_and_the_detail_of_its_json_body():
    body = io.BytesIO(json.dumps({"detail": "Service temporarily unavailable", "errorType": "x"}).encode())
    met = _http.failure(HTTPError("https://x/", 503, "Service Unavailable", {}, body), "x:443", 2, "give ca", "detail")
    assert (met.message, met.kind, met.status, met.body["errorType"]) == (
        "answered 503 Service temporarily unavailable", "answer", 503, "x")
    plain = _http.failure(HTTPError("https://x/", 404, "Not Found", {}, io.BytesIO(b"<html>")), "x:443", 2, "give ca")
    assert (plain.message, plain.body) == ("answered 404 Not Found", None)


@pytest.mark.parametrize("exc, kind, message", [
    (URLError(ConnectionRefusedError(111, "Connection refused")), "refused", "cannot reach x:443: connection refused"),
    (socket.timeout("timed out"), "timeout", "x:443 did not answer within 2 s"),
    (URLError(socket.timeout("timed out")), "timeout", "x:443 did not answer within 2 s"),
    (http_client.RemoteDisconnected("closed"), "reset", "x:443 dropped the connection: closed"),
    (ConnectionResetError(104, "Connection reset by peer"), "reset",
     "x:443 dropped the connection: [Errno 104] Connection reset by peer"),
    (URLError(ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED")), "tls",
     "TLS with x:443 failed: CERTIFICATE_VERIFY_FAILED (give ca)"),
    (URLError(socket.gaierror(-2, "Name or service not known")), "refused", "cannot reach x:443: Name or service not known"),
    (UnicodeError("label empty or too long"), "other", "UnicodeError: label empty or too long"),
])
def test_every_request_failure_is_classified(exc, kind, message):
    assert isinstance(exc, _http.FAILURES)
    met = _http.failure(exc, "x:443", 2, "give ca")
    assert (met.kind, met.message) == (kind, message)


def test_another_os_error_is_refused_only_for_the_errnos_the_client_names():
    unreachable = URLError(OSError(errno.EHOSTUNREACH, "No route to host"))
    named = (errno.ECONNREFUSED, errno.EHOSTUNREACH)
    assert _http.failure(unreachable, "x", 2, "", refused_errnos=named).kind == "refused"
    assert _http.failure(URLError(socket.gaierror(-2, "unknown")), "x", 2, "", refused_errnos=named).kind == "other"


@pytest.mark.parametrize("bug", [KeyError("token"), TypeError("bad operand"), AttributeError("x"), ValueError("y")])
def test_a_bug_is_no_request_failure(bug):
    assert not isinstance(bug, _http.FAILURES)


def test_origin_fills_in_the_port_of_the_scheme():
    assert _http.origin("https://Prom.example:443/x") == ("https", "prom.example", 443)
    assert _http.origin("http://prom.example/") == ("http", "prom.example", 80)
    assert _http.origin("https://prom.example:9090/") != _http.origin("https://prom.example/")
