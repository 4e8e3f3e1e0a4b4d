"""A counting reverse proxy in front of the Kubernetes rig's API server, for benchmarks.

It serves TLS with the API server's own certificate (so the rig's CA verifies it under the same name), forwards
every request unchanged to the API server and records it: (time, verb, resource) with the verb as the API server
names it in ``apiserver_request_total`` (get, list, watch, create, update, patch, delete, deletecollection), or
``discovery`` for the paths that are no resource (/api, /apis, /version, /openapi). The rig's own components
(controllers, kwok, Kueue) talk to the API server directly, so only the clients given ``kubeconfig()`` are counted.
"""
import http.client
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
       "content-length"}
BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def api_version(path):
    """The group/version of a resource path (``v1`` for /api/v1/...), or None for a path that names none."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        return parts[1]
    if parts[:1] == ["apis"] and len(parts) >= 4:
        return "%s/%s" % (parts[1], parts[2])
    return None


def classify(method, path, query):
    """(verb, resource) of one request as the API server counts it."""
    parts = [p for p in path.split("/") if p]
    params = urllib.parse.parse_qs(query)
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return "discovery", ""
    if not rest:
        return "discovery", ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + ("/" + rest[2] if len(rest) >= 3 else "")
    collection = len(rest) == 1
    if method == "GET":
        if params.get("watch", ["false"])[0] in ("true", "1"):
            return "watch", resource
        return ("list" if collection else "get"), resource
    if method == "DELETE":
        return ("deletecollection" if collection else "delete"), resource
    return BY_METHOD.get(method, method.lower()), resource


class CountingProxy:
    """``start()``, then ``kubeconfig(path)`` for the clients to count; ``seen``: [(time, verb, resource)]."""

    def __init__(self, server, ca_file, cert_file, key_file):
        up = urllib.parse.urlsplit(server)
        self.seen = []
        self.api_versions = {}  # {resource: group/version} of every resource seen
        self.lock = threading.Lock()
        upstream_ctx = ssl.create_default_context(cafile=str(ca_file))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                split = urllib.parse.urlsplit(self.path)
                verb, resource = classify(self.command, split.path, split.query)
                with outer.lock:
                    outer.seen.append((time.time(), verb, resource))
                    if resource and "/" not in resource:
                        outer.api_versions.setdefault(resource, api_version(split.path))
                conn = http.client.HTTPSConnection(up.hostname, up.port, context=upstream_ctx, timeout=600)
                try:
                    headers = dict((k, v) for k, v in self.headers.items() if k.lower() not in HOP)
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    self.send_response(resp.status, resp.reason)
                    for key, value in resp.getheaders():
                        if key.lower() not in HOP:
                            self.send_header(key, value)
                    if verb == "watch":
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        chunk = resp.read1(65536)
                        while chunk:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                            chunk = resp.read1(65536)
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    data = resp.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = forward

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(cert_file), str(key_file))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = "https://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self):
        with self.lock:
            del self.seen[:]

    def kubeconfig(self, source, path):
        """A copy of the kubeconfig ``source`` whose clusters point at the proxy, written to ``path``."""
        config = yaml.safe_load(open(source).read())
        for cluster in config.get("clusters") or []:
            cluster["cluster"]["server"] = self.url
        with open(path, "w") as out:
            out.write(yaml.safe_dump(config))
        return path

    def between(self, start, end):
        """The requests seen from ``start`` to ``end`` (times of time.time())."""
        with self.lock:
            return [s for s in self.seen if start <= s[0] < end]
