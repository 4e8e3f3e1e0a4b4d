"""A local HTTP(S) test server on 127.0.0.1 that records every request and answers with a JSON body or a
redirect: for tests of where a client sends its credentials (redirects to another origin, plain http)."""
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RecordingServer:
    """``respond(method, path)`` returns ``(200, <JSON-serialisable body>)`` or ``(302, <Location>)``.
    ``seen``: (method, path, headers, body) of every request, in order. With ``cert`` ((certificate file,
    key file)) it serves TLS. ``url``: its base URL; ``port``: its port."""

    def __init__(self, respond, cert=None):
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length", 0) or 0)
                body = self.rfile.read(length) if length else b""
                outer.seen.append((self.command, self.path, dict(self.headers), body))
                status, value = respond(self.command, self.path)
                self.send_response(status)
                if status == 302:
                    self.send_header("Location", value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps(value).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = answer

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*cert)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_port
        self.url = "%s://127.0.0.1:%d" % ("https" if cert else "http", self.port)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
