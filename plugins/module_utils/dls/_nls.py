# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA License System: the client of a DLS appliance's REST API (timeout on every request, bounded
retries, one new login on an expired bearer token) and the connection options of the modules that reach
it. The license state that ``nvidia-smi -q`` prints is parsed by ``pure/_nvidia_smi``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import time

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import ATTEMPTS, TRANSIENT_STATUS, backoff_delay, times
from ansible_collections.gpupool.vcf.plugins.module_utils.transport._http import FAILURES, failure, opener, send


class DlsError(ClientError):
    """A DLS call failed. `status` is the HTTP status when the appliance answered; `kind` is
    `answer`, `timeout`, `refused` (nothing was sent), `reset`, `tls` or `other`."""

    def __init__(self, msg, status=None, kind="answer", attempts=1):
        super(DlsError, self).__init__(msg)
        self.status = status
        self.kind = kind
        self.attempts = attempts

    @property
    def transient(self):
        return self.kind in ("timeout", "refused", "reset") or self.status in TRANSIENT_STATUS


# the errnos of an OSError that say nothing reached the appliance (kind refused: even the token request is tried again)
REFUSED_ERRNOS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def _dls_error(exc, where, timeout):
    """A DlsError for what one request met (one of transport/_http.FAILURES)."""
    met = failure(exc, where, timeout, "give ca_file with the appliance's CA", detail_key="detail",
                  refused_errnos=REFUSED_ERRNOS)
    return DlsError(met.message, status=met.status, kind=met.kind)


class DlsClient(object):
    """The appliance's REST API with a timeout on every request and bounded retries.

    Reads (GET) and the login are retried on timeouts, dropped or refused connections and
    429/5xx answers, `attempts` times in all with exponential backoff and jitter; the token
    request (compose-messenger-token, which mints a token) only when the connection was
    refused, as nothing reached the appliance then. A 401 on an expired bearer token is
    answered by one new login; a second 401 is an error.

    The appliance is always spoken to over https; a redirect to another origin (scheme, host or
    port) is followed without the bearer token, and urllib turns a redirected POST (the login with
    its password) into a GET without its body, so credentials never leave the appliance's origin.
    """

    def __init__(self, host, port, username, password, validate_certs=True, ca_file=None, timeout=30,
                 attempts=ATTEMPTS, sleep=time.sleep):
        self.base = "https://%s:%d" % (host, port)
        self.where = "%s:%d" % (host, port)
        self.username, self.password, self.timeout = username, password, timeout
        self.attempts, self.sleep = max(1, attempts), sleep
        self.opener = opener(validate_certs, ca_file)  # redirects followed, the bearer token only within the origin
        self.bearer = None
        self.logins = 0

    def _once(self, method, path, body=None, auth=True):
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = "Bearer %s" % self.bearer
        try:
            resp = send(self.opener, self.base + path, data, headers, method, self.timeout)
            text = resp.read()
        except FAILURES as exc:  # the boundary: urllib, http.client, ssl and socket errors; anything else is a bug
            raise _dls_error(exc, self.where, self.timeout)
        try:
            return json.loads(text or b"{}")
        except ValueError:
            raise DlsError("%s %s: the answer is not JSON" % (method, path), kind="other")

    def _call(self, method, path, body=None, auth=True, idempotent=True):
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(method, path, body, auth)
            except DlsError as err:
                again = err.transient and (idempotent or err.kind == "refused")
                if again and attempt < self.attempts:
                    self.sleep(backoff_delay(attempt))
                    continue
                if err.kind == "answer":
                    msg = "%s %s: %s%s" % (method, path, err, "" if attempt == 1 else " (%s)" % times(attempt))
                else:
                    msg = "%s %s: %s%s" % (method, path, err, "" if attempt == 1 else " (%d attempts)" % attempt)
                raise DlsError(msg, status=err.status, kind=err.kind, attempts=attempt)

    def login(self):
        """Log in (a repeated login only opens another session: retried like a read). A failure says
        which appliance and why: unreachable, refused credentials of the user named, or the answer."""
        self.logins += 1
        try:
            answer = self._call("POST", "/auth/v1/login", {"username": self.username, "password": self.password}, auth=False)
        except DlsError as err:
            if err.status in (401, 403):
                text = ("login refused for user %s at DLS appliance %s (%s): check the user name and password"
                        % (self.username, self.where, err))
            elif err.kind in ("refused", "timeout", "reset"):
                text = "DLS appliance unreachable at %s (%s)" % (self.where, err)
            elif err.kind == "tls":
                text = "DLS appliance %s: %s" % (self.where, err)
            else:
                text = "login to DLS appliance %s failed (%s)" % (self.where, err)
            raise DlsError(text, status=err.status, kind=err.kind, attempts=err.attempts)
        self.bearer = answer.get("token")
        if not self.bearer:
            raise DlsError("login answered without a token", kind="other")

    def call(self, method, path, body=None, idempotent=True):
        """A call with the bearer token; one new login when the token has expired (401)."""
        if self.bearer is None:
            self.login()
        try:
            return self._call(method, path, body, idempotent=idempotent)
        except DlsError as err:
            if err.status != 401:
                raise
        self.login()
        try:
            return self._call(method, path, body, idempotent=idempotent)
        except DlsError as err:
            if err.status == 401:
                raise DlsError("%s (after a new login: the appliance refuses the bearer token it has just issued)" % err,
                               status=401)
            raise

    def discover(self, address_type):
        """(node selection, scope reference) for the token request."""
        me = self.call("GET", "/auth/v1/user/me")
        scope = me.get("userScope") or {}
        org, vg, ls = me.get("orgName"), scope.get("virtualGroupId"), scope.get("licenseServerId")
        if not (org and vg is not None and ls):
            raise DlsError("the user has no license server in its scope (orgName, virtualGroupId, licenseServerId)",
                           kind="other")
        instance = self.call("GET", "/service_instance_manager/v1/service-instance")
        nodes = (((instance.get("high_availability_config") or {}).get("config") or {}).get("nodeList")) or []
        if not nodes:
            raise DlsError("the service instance lists no node", kind="other")
        node = next((n for n in nodes if (n.get("role") or "").upper() == "PRIMARY"), nodes[0])
        server = self.call("GET", "/admin/v1/org/%s/virtual-groups/%s/license-servers/%s" % (org, vg, ls))
        ref = (server.get("licenseServer") or {}).get("scopeReference")
        if not ref:
            raise DlsError("license server %s has no scope reference (is it installed on the service instance?)" % ls,
                           kind="other")
        address = node.get("fqdn") if address_type == "fqdn" else node.get("network_location")
        if not address:
            raise DlsError("node %s has no %s" % (node.get("node_id"), "FQDN" if address_type == "fqdn" else "IPv4 address"),
                           kind="other")
        sel = {"node_id": node.get("node_id"), "role": node.get("role"),
               "addressType": "FQDN" if address_type == "fqdn" else "IPV4", "address": address}
        return sel, ref

    def compose(self, selection, scope_ref, leasing_port, expiry):
        """A new client configuration token (not idempotent: each call mints one)."""
        ans = self.call("POST", "/service_instance_manager/v1/service-instance/compose-messenger-token", {
            "scopeReferenceList": [scope_ref], "fulfillmentClassReferenceList": [],
            "addressTypeSelections": [selection], "leasingPort": leasing_port, "expiry": expiry}, idempotent=False)
        token = ans.get("messengerToken")
        if not token:
            raise DlsError("compose-messenger-token answered without messengerToken", kind="other")
        return token


# --- the connection options of a module that reaches the appliance ------------------------------

# the settings of the connection, by the option name they have beside other links (doc fragment gpupool.vcf.dls)
DLS_SETTINGS = ("host", "port", "username", "password", "ca_file", "validate_certs")


def dls_option_names(prefix="dls_"):
    """{setting: option name}: ``prefix`` ``dls_`` where the appliance is one link of several (gpu_pool_audit,
    gpu_pool_preflight), ``""`` where the module talks to the appliance alone (doc fragment
    gpupool.vcf.dls.appliance); the host is ``dls_host`` in both."""
    return dict((k, "dls_host" if k == "host" else prefix + k) for k in DLS_SETTINGS)


def dls_argument_spec(prefix="dls_", required=False):
    """The appliance's connection options of a module (names: :func:`dls_option_names`). ``required``: the
    host, the user and the password must be given (a module that only talks to the appliance); otherwise
    all are optional and the module says when the appliance's link needs them."""
    names = dls_option_names(prefix)
    spec = {names["host"]: dict(type="str"), names["port"]: dict(type="int", default=443),
            names["username"]: dict(type="str"), names["password"]: dict(type="str", no_log=True),
            names["ca_file"]: dict(type="path"), names["validate_certs"]: dict(type="bool", default=True)}
    if required:
        for setting in ("host", "username", "password"):
            spec[names[setting]]["required"] = True
    return spec


def dls_client(params, timeout, prefix="dls_"):
    """The DlsClient of a module's connection options (those of :func:`dls_argument_spec` with ``prefix``)."""
    names = dls_option_names(prefix)
    return DlsClient(params[names["host"]], params[names["port"]], params[names["username"]], params[names["password"]],
                     validate_certs=params[names["validate_certs"]], ca_file=params[names["ca_file"]], timeout=timeout)
