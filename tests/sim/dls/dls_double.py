"""Contract test double of an NVIDIA DLS appliance's REST API (stdlib http.server over TLS).

It answers exactly the requests the collection makes (login, user/me, service instance,
license server, leases, compose-messenger-token) with the documented shapes, and their errors: a
missing or expired bearer token gives 401, an unknown service instance / license server /
node 404, a malformed token request 400. Stopping it leaves the port closed (connection
refused), as an appliance that is down.

Faults (see README.md beside this file), from the Python handle or the admin endpoint:

    dls.down()                      # the port refuses connections; the state is kept
    dls.up()                        # listening again on the same port, same state
    dls.fail_next(2, status=503)    # the next 2 requests answer 503 (any 4xx/5xx)
    dls.fail_next(1, path="compose")  # only requests whose path matches (re.search) count
    dls.slow_next(1, seconds=5)     # the next request is answered 5 s late (path= as well)
    dls.clear_faults()              # no more injected failures or delays
    dls.state.expire_next_bearer = 1  # the next login issues a bearer token that is already expired
    dls.set_leases(3)               # the license server holds 3 leases (one per licensed client)
    dls.state.license_server_installed = False  # the license server is not installed (404)
    dls.add_node("dls-2.example.com", "10.20.30.41")  # a second (SECONDARY) node: the HA pair
    dls.set_node_status(1, "OFFLINE")  # node 1 of the node list reports itself down (assumed field `status`)

    POST /_sim/faults {"fail": 2, "status": 503, "path": "..."} | {"slow": 1, "seconds": 5, "path": "..."};
    DELETE /_sim/faults;
    GET /_sim/faults. Admin requests are neither counted nor subject to faults.

The real client configuration token's format is not documented. The double returns a
JWT-shaped token (base64url header.payload.signature) whose payload carries `exp` (epoch
seconds, end of the requested expiry day, UTC) so tests can check what was asked for; the
module does not rely on it (it keeps a metadata file next to the token).

    from dls_double import start
    with start() as dls:    # dls.host, dls.port, dls.ca_file, dls.state (counters and switches)
        ...
"""
from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

USERNAME = "dls_admin"
PASSWORD = "Dls-Secret-1!"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _pki(folder: Path) -> tuple[Path, Path, Path]:
    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=dls-double-ca")
    ossl("req", *curve, "-keyout", "dls.key", "-out", "dls.csr", "-subj", "/CN=localhost")
    (folder / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ossl("x509", "-req", "-in", "dls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "dls.crt", "-days", "30", "-extfile", "ext.cnf")
    return folder / "ca.crt", folder / "dls.crt", folder / "dls.key"


class State:
    """What the appliance holds, counters, and switches for error cases."""

    def __init__(self):
        self.org = "org-" + uuid.uuid4().hex[:8]
        self.virtual_group = 3
        self.license_server = str(uuid.uuid4())
        self.scope_reference = str(uuid.uuid4())
        self.node = {"node_id": str(uuid.uuid4()), "network_location": "10.20.30.40",
                     "fqdn": "dls-1.example.com", "role": "PRIMARY", "status": "ONLINE"}
        self.service_instance = {"xid": str(uuid.uuid4()), "name": "DEFAULT_2024-01-01_00-00-00",
                                 "high_availability_config": {"config": {"nodeList": [self.node]}}}
        self.license_server_installed = True
        self.leases: list[dict] = []
        self.bearers: dict[str, datetime.datetime] = {}
        self.expire_next_bearer = 0
        self.requests: list[tuple[str, str]] = []
        self.composed: list[dict] = []
        self.key = os.urandom(32)
        self.lock = threading.Lock()
        # injected faults: the next `fail_count` requests answer `fail_status`; the next
        # `slow_count` requests wait `slow_seconds` first (cut short by clear_faults)
        self.fail_count = 0
        self.fail_status = 503
        self.fail_path: str | None = None
        self.slow_count = 0
        self.slow_seconds = 0.0
        self.slow_path: str | None = None
        self.faulted: list[tuple[str, str, str]] = []
        self.wake = threading.Event()

    def faults(self):
        return {"fail": self.fail_count, "status": self.fail_status, "fail_path": self.fail_path,
                "slow": self.slow_count, "seconds": self.slow_seconds, "slow_path": self.slow_path}

    def clear_faults(self):
        with self.lock:
            self.fail_count = self.slow_count = 0
            self.wake.set()
            self.wake = threading.Event()

    def take_fault(self, path):
        """(status to answer or None, seconds to wait, event that cuts the wait) for a request."""
        with self.lock:
            status = delay = None
            if self.slow_count > 0 and (not self.slow_path or re.search(self.slow_path, path)):
                self.slow_count -= 1
                delay = self.slow_seconds
            if self.fail_count > 0 and (not self.fail_path or re.search(self.fail_path, path)):
                self.fail_count -= 1
                status = self.fail_status
            return status, delay, self.wake

    def count(self, method, path):
        return sum(1 for m, p in self.requests if m == method and p == path)


class Handler(BaseHTTPRequestHandler):
    server_version = "dls-double"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    @property
    def state(self) -> State:
        return self.server.state

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return None

    def admin(self, method, path):
        """/_sim/faults: set (POST), read (GET) or clear (DELETE) the injected faults."""
        if path != "/_sim/faults":
            return False
        st = self.state
        if method == "POST":
            body = self.body() or {}
            with st.lock:
                if "fail" in body:
                    st.fail_count, st.fail_status = int(body["fail"]), int(body.get("status", 503))
                    st.fail_path = body.get("path")
                if "slow" in body:
                    st.slow_count, st.slow_seconds = int(body["slow"]), float(body.get("seconds", 5))
                    st.slow_path = body.get("path")
        elif method == "DELETE":
            st.clear_faults()
        self.reply(200, st.faults())
        return True

    def fault(self, method, path):
        """Serve an injected fault: True when the request was answered with it."""
        status, delay, wake = self.state.take_fault(path)
        if delay:
            wake.wait(delay)
        if status:
            self.state.faulted.append((method, path, str(status)))
            self.reply(status, {"detail": "Service temporarily unavailable (injected fault)"})
            return True
        return False

    def authorized(self):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        exp = self.state.bearers.get(token) if token else None
        if exp is None or exp <= datetime.datetime.now(datetime.timezone.utc):
            self.reply(401, {"detail": "Authentication credentials expired or not provided"})
            return False
        return True

    def do_POST(self):  # noqa: N802
        path = self.path.split("?")[0]
        if self.admin("POST", path):
            return None
        self.state.requests.append(("POST", path))
        body = self.body()
        if self.fault("POST", path):
            return None
        if body is None:
            return self.reply(400, {"detail": "malformed JSON"})
        if path == "/auth/v1/login":
            if body.get("username") != USERNAME or body.get("password") != PASSWORD:
                return self.reply(401, {"detail": "Invalid username or password"})
            token = _b64(os.urandom(24))
            now = datetime.datetime.now(datetime.timezone.utc)
            with self.state.lock:
                expired = self.state.expire_next_bearer > 0
                if expired:
                    self.state.expire_next_bearer -= 1
            self.state.bearers[token] = now - datetime.timedelta(seconds=1) if expired \
                else now + datetime.timedelta(hours=1)
            return self.reply(200, {"token": token, "expires": 3600})
        if path == "/service_instance_manager/v1/service-instance/compose-messenger-token":
            if not self.authorized():
                return None
            return self.compose(body)
        return self.reply(404, {"detail": "Not found"})

    def compose(self, body):
        st = self.state
        if st.service_instance is None:
            return self.reply(404, {"detail": "Service instance not found"})
        try:
            scopes = body["scopeReferenceList"]
            sel = body["addressTypeSelections"]
            port = body["leasingPort"]
            expiry = datetime.date.fromisoformat(body["expiry"])
        except (KeyError, TypeError, ValueError) as e:
            return self.reply(400, {"detail": "invalid request: %s" % e})
        if not isinstance(scopes, list) or st.scope_reference not in scopes:
            return self.reply(404, {"detail": "Scope reference not found"})
        if port not in (443, 8082) or expiry <= datetime.date.today():
            return self.reply(400, {"detail": "leasingPort must be 443 or 8082 and expiry in the future"})
        if not sel or not isinstance(sel, list):
            return self.reply(400, {"detail": "addressTypeSelections required"})
        for s in sel:
            if s.get("node_id") != st.node["node_id"]:
                return self.reply(404, {"detail": "Node not found"})
            want = st.node["fqdn"] if s.get("addressType") == "FQDN" else st.node["network_location"]
            if s.get("addressType") not in ("FQDN", "IPV4") or s.get("address") != want:
                return self.reply(400, {"detail": "address does not match the node"})
        exp = datetime.datetime.combine(expiry, datetime.time(23, 59, 59), datetime.timezone.utc)
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        payload = _b64(json.dumps({"iss": "dls-double", "jti": str(uuid.uuid4()), "exp": int(exp.timestamp()),
                                   "iat": int(datetime.datetime.now(datetime.timezone.utc).timestamp()),
                                   "scope": scopes, "address": sel[0]["address"], "port": port}).encode())
        sig = _b64(hmac.new(st.key, ("%s.%s" % (header, payload)).encode(), hashlib.sha256).digest())
        st.composed.append(body)
        return self.reply(200, {"messengerToken": "%s.%s.%s" % (header, payload, sig)})

    def do_DELETE(self):  # noqa: N802
        if not self.admin("DELETE", self.path.split("?")[0]):
            self.reply(405, {"detail": "Method not allowed"})

    def do_GET(self):  # noqa: N802
        path = self.path.split("?")[0]
        if self.admin("GET", path):
            return None
        st = self.state
        st.requests.append(("GET", path))
        if self.fault("GET", path):
            return None
        if not self.authorized():
            return None
        if path == "/auth/v1/user/me":
            return self.reply(200, {"name": USERNAME, "orgName": st.org, "userScope": {
                "virtualGroupId": st.virtual_group, "licenseServerId": st.license_server}})
        if path == "/service_instance_manager/v1/service-instance":
            if st.service_instance is None:
                return self.reply(404, {"detail": "Service instance not found"})
            return self.reply(200, st.service_instance)
        m = re.fullmatch(r"/admin/v1/org/([^/]+)/virtual-groups/([^/]+)/leases/all", path)
        if m:
            return self.leases(m.group(1), m.group(2))
        m = re.fullmatch(r"/admin/v1/org/([^/]+)/virtual-groups/([^/]+)/license-servers/([^/]+)", path)
        if m:
            if (m.group(1), m.group(2), m.group(3)) != (st.org, str(st.virtual_group), st.license_server) \
                    or not st.license_server_installed:
                return self.reply(404, {"detail": "License server not found"})
            return self.reply(200, {"licenseServer": {"id": st.license_server, "name": "gpu-pool",
                                                      "scopeReference": st.scope_reference}})
        return self.reply(404, {"detail": "Not found"})


    def leases(self, org, virtual_group):
        """The leases of the license servers named in ``license_server_ids`` (comma-separated)."""
        st = self.state
        if (org, virtual_group) != (st.org, str(st.virtual_group)):
            return self.reply(404, {"detail": "Virtual group not found"})
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        ids = [i for v in query.get("license_server_ids", []) for i in v.split(",") if i]
        if not ids:
            return self.reply(400, {"detail": "license_server_ids required"})
        return self.reply(200, {"leases": [lease for lease in st.leases if lease["license_server_id"] in ids]})


class Double:
    def __init__(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="dls-double."))
        ca, crt, key = _pki(self.tmp)
        self.ca_file = str(ca)
        self.state = State()
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(str(crt), str(key))
        self.host = "localhost"
        self.port = 0
        self.httpd = None
        self.up()

    def up(self):
        """Listen (again) on the same port with the same state."""
        if self.httpd is not None:
            return
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        httpd.state = self.state
        httpd.socket = self.ctx.wrap_socket(httpd.socket, server_side=True)
        self.port = httpd.server_address[1]
        self.httpd = httpd
        self.thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self.thread.start()

    def down(self):
        """Close the port: connections are refused until up(); the state is kept."""
        if self.httpd is None:
            return
        with self.state.lock:  # wake requests waiting on a slow fault, keep the fault counts
            self.state.wake.set()
            self.state.wake = threading.Event()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.httpd = None

    def fail_next(self, count: int, status: int = 503, path: str | None = None):
        """The next `count` requests (whose path matches the regular expression `path`, if given)
        answer `status` with a JSON `detail`."""
        with self.state.lock:
            self.state.fail_count, self.state.fail_status, self.state.fail_path = count, status, path

    def slow_next(self, count: int, seconds: float, path: str | None = None):
        """The next `count` requests (whose path matches `path`, if given) are answered `seconds` late."""
        with self.state.lock:
            self.state.slow_count, self.state.slow_seconds, self.state.slow_path = count, seconds, path

    def clear_faults(self):
        self.state.clear_faults()

    def add_node(self, fqdn: str, address: str, role: str = "SECONDARY", status: str = "ONLINE") -> dict:
        """A further node in the service instance's HA node list (the second DLS node of an HA pair)."""
        node = {"node_id": str(uuid.uuid4()), "network_location": address, "fqdn": fqdn, "role": role,
                "status": status}
        self.state.service_instance["high_availability_config"]["config"]["nodeList"].append(node)
        return node

    def set_node_status(self, index: int, status: str):
        """The status node ``index`` of the node list reports (ONLINE, OFFLINE, ...; the field is assumed)."""
        self.state.service_instance["high_availability_config"]["config"]["nodeList"][index]["status"] = status

    def set_leases(self, count: int):
        """The license server holds ``count`` leases, one per licensed client (replacing any)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        self.state.leases = [{"id": str(uuid.uuid4()), "license_server_id": self.state.license_server,
                              "client_id": "client-%d" % i, "feature": "NVIDIA Virtual Compute Server",
                              "created": now.isoformat(), "expires": (now + datetime.timedelta(days=1)).isoformat()}
                             for i in range(count)]

    def stop(self):
        self.state.clear_faults()
        self.down()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start() -> Double:
    return Double()


def token_expiry(token: str) -> datetime.datetime:
    """The `exp` of a token this double issued."""
    payload = token.split(".")[1]
    payload += "=" * (-len(payload) % 4)
    return datetime.datetime.fromtimestamp(json.loads(base64.urlsafe_b64decode(payload))["exp"],
                                           datetime.timezone.utc)
