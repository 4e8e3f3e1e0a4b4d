#!/usr/bin/env python3
"""A fault-injecting HTTPS reverse proxy in front of the Kubernetes rig's API server.

It terminates TLS with the rig's own API server certificate (signed by the rig's CA, valid for
127.0.0.1 on any port), so a client verifies it exactly as it verifies the API server, and
forwards every request, headers (the bearer token included) and body, to the API server over
a verified TLS connection. Rules, set from the test, make it misbehave for requests whose
method and path match, a given number of times:

    with rig.fault_proxy() as proxy:          # proxy.kubeconfig, proxy.env point clients at it
        proxy.fail("/clusters/gpu$", status=503, times=2)           # answer 503, forward nothing
        proxy.fail("/clusters/gpu$", method="PUT", forward=True)    # forward, then answer 503 anyway
        proxy.stall("/clusters/gpu$", seconds=60, times=3)          # answer that late (or never)
        proxy.reset("/clusters/gpu$")                               # drop the connection, no answer
        proxy.clear()                                               # no rules; stalled requests go on
        proxy.requests                        # [(method, path, what was done)] in order
        proxy.count("GET", "/clusters/gpu$")  # requests that matched

An injected error answer is a Kubernetes Status object (`reason`, `message`, `code`), as the API
server sends. Standard library only; one thread per connection; nothing is streamed (watches
are not supported).
"""
from __future__ import annotations

import http.client
import json
import os
import re
import socket
import ssl
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import yaml

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length", "host"}
REASONS = {429: "TooManyRequests", 500: "InternalError", 502: "BadGateway", 503: "ServiceUnavailable",
           504: "Timeout"}


class Rule:
    """Misbehave `times` times for requests whose method (None: any) and path (re.search) match."""

    def __init__(self, action: str, path: str, times: int, method: str | None, status: int = 503,
                 seconds: float = 0.0, forward: bool = False):
        self.action, self.path, self.times, self.method = action, re.compile(path), times, method
        self.status, self.seconds, self.forward = status, seconds, forward
        self.hits = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.hits < self.times and (self.method is None or self.method == method)
                and bool(self.path.search(path)))


class FaultProxy:
    def __init__(self, upstream: str, ca_file: str | os.PathLike, cert_file: str | os.PathLike,
                 key_file: str | os.PathLike, kubeconfig: str | os.PathLike | None = None,
                 folder: str | os.PathLike | None = None, base_env: dict | None = None):
        up = urlsplit(upstream)
        self.upstream_host, self.upstream_port = up.hostname, up.port or 443
        self.client_ctx = ssl.create_default_context(cafile=str(ca_file))
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(cert_file), str(key_file))
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.proxy = self
        self.httpd.socket = server_ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.kubeconfig = None
        self._base_env = dict(base_env if base_env is not None else os.environ)
        if kubeconfig:
            self.kubeconfig = Path(folder or Path(kubeconfig).parent) / f"kubeconfig-proxy-{self.port}"
            cfg = yaml.safe_load(Path(kubeconfig).read_text())
            for cluster in cfg.get("clusters") or []:
                cluster["cluster"]["server"] = self.url
            fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                yaml.safe_dump(cfg, f)

    @classmethod
    def for_rig(cls, rig) -> "FaultProxy":
        pki = rig.data_dir / "pki"
        return cls(rig.server, pki / "ca.crt", pki / "apiserver.crt", pki / "apiserver.key",
                   kubeconfig=rig.kubeconfig, folder=rig.data_dir, base_env=rig.env)

    @property
    def env(self) -> dict:
        """The environment of the rig, with KUBECONFIG and K8S_AUTH_KUBECONFIG on the proxy."""
        env = dict(self._base_env)
        if self.kubeconfig:
            env.update(KUBECONFIG=str(self.kubeconfig), K8S_AUTH_KUBECONFIG=str(self.kubeconfig))
        return env

    # --- rules, from the test ---------------------------------------------------------------------

    def _add(self, rule: Rule) -> Rule:
        with self.lock:
            self.rules.append(rule)
        return rule

    def fail(self, path: str, status: int = 503, times: int = 1, method: str | None = None,
             forward: bool = False) -> Rule:
        """Answer `status` (a Status object). With `forward`, the request reaches the API server
        first and its answer is replaced: the change is stored, the client sees an error."""
        return self._add(Rule("fail", path, times, method, status=status, forward=forward))

    def stall(self, path: str, seconds: float, times: int = 1, method: str | None = None) -> Rule:
        """Hold the request `seconds` (cut short by clear() or stop()), then forward it."""
        return self._add(Rule("stall", path, times, method, seconds=seconds))

    def reset(self, path: str, times: int = 1, method: str | None = None) -> Rule:
        """Drop the connection (TCP reset) without forwarding or answering."""
        return self._add(Rule("reset", path, times, method))

    def clear(self) -> None:
        """Remove every rule and release stalled requests (they are forwarded)."""
        with self.lock:
            self.rules = []
            self.wake.set()
            self.wake = threading.Event()

    def count(self, method: str | None, path: str) -> int:
        pattern = re.compile(path)
        return sum(1 for m, p, _ in self.requests if (method is None or m == method) and pattern.search(p))

    def take(self, method: str, path: str):
        """The rule that applies to this request (its hit counted), or None; and the wake event."""
        with self.lock:
            for rule in self.rules:
                if rule.matches(method, path):
                    rule.hits += 1
                    return rule, self.wake
            return None, self.wake

    def stop(self) -> None:
        self.clear()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.kubeconfig:
            self.kubeconfig.unlink(missing_ok=True)

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """Clients that give up or are reset on purpose are expected here: no traceback on stderr."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gpupool-fault-proxy"

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        self.handle_any()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    def handle_any(self):
        proxy: FaultProxy = self.server.proxy
        method, path = self.command, self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        rule, wake = proxy.take(method, path)
        action = rule.action if rule else "forward"
        proxy.requests.append((method, path, action if not rule or rule.action != "fail"
                               else f"fail {rule.status}{' after forwarding' if rule.forward else ''}"))
        if action == "reset":
            self.drop()
            return
        if action == "stall":
            wake.wait(rule.seconds)
        if action == "fail" and not rule.forward:
            self.status(rule.status, f"injected fault: {method} {path} answered {rule.status}")
            return
        try:
            status, reason, headers, data = self.forward(proxy, method, body)
        except (OSError, http.client.HTTPException) as exc:
            self.status(502, f"fault proxy: the API server could not be reached: {exc}")
            return
        if action == "fail":
            self.status(rule.status, f"injected fault: {method} {path} was forwarded ({status}), "
                                     f"then answered {rule.status}")
            return
        self.send(status, reason, headers, data)

    def forward(self, proxy: FaultProxy, method: str, body: bytes | None):
        conn = http.client.HTTPSConnection(proxy.upstream_host, proxy.upstream_port, context=proxy.client_ctx,
                                           timeout=120)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if body is not None:
                headers["Content-Length"] = str(len(body))
            conn.request(method, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.reason, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def send(self, status: int, reason: str, headers, data: bytes) -> None:
        try:
            self.send_response(status, reason)
            for key, value in headers:
                if key.lower() not in HOP_BY_HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:  # the client gave up (its timeout) while the answer was held back
            self.close_connection = True

    def status(self, code: int, message: str) -> None:
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": REASONS.get(code, "InternalError"), "code": code}).encode()
        self.send(code, None, [("Content-Type", "application/json")], body)

    def drop(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), so the client sees the connection reset."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass
