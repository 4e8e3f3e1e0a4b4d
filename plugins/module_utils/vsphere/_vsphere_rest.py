# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere Automation REST client (``/api``) of gpupool.vcf: VM classes, namespaces, vLCM.

Knows nothing of Ansible. One session per client: ``POST /api/session`` with basic auth,
then the ``vmware-api-session-id`` header on every call, ``DELETE /api/session`` on close.
Certificates are verified like the SOAP client (``_vsphere.ssl_context`` rules). Errors
come back as :class:`VsphereRestError` with the API's ``error_type`` and messages, 404 as
:class:`VsphereNotFound`.

The same fault boundary as the SOAP client: a 401 (the session expired, was logged out or was
ended through ``SessionManager.TerminateSession``) logs in again once and repeats the call; a
401 again right after that re-login (the session lost twice in a row) raises
:class:`VsphereSessionLost`, which ends a wait at once instead of being taken for a task that
is not done yet. A refused or dropped connection, a timeout or a 5xx is retried with bounded
exponential backoff and jitter for GET and HEAD; a 503 with ``Retry-After`` is repeated after
the delay the header asks for (seconds or an HTTP-date), within the call's deadline (the
client's ``timeout`` from the first attempt), not after the usual backoff. Tasks are waited
for with the one waiter of ``_vsphere``, which outlasts a vCenter restart.

A change (POST, PATCH, PUT, DELETE) is sent once, and repeated only where it provably did not
reach vCenter:

* the connection was refused, or could not be opened in time (``ConnectTimeout``): nothing
  was sent;
* a 503 carrying a readable ``Retry-After``: the server's own word that it is not taking requests now
  (vCenter's reverse proxy while a service starts). requests sends the whole body before it
  reads the answer, so the client cannot see whether the server read the body; the
  ``Retry-After`` is what tells this refusal from a gateway's failure after forwarding.

Any other failure of a change - 502 or 504 (a gateway that may have forwarded the request and
timed out waiting for vCenter), a 503 without ``Retry-After``, a 5xx without vCenter's own error
body, a reset or a read timeout after the request was sent - may come after vCenter carried it
out: a second vLCM remediation
reboots the hosts again, a second create makes a second object. It raises
:class:`VsphereOutcomeUnknown` ("may or may not have been carried out"), and the module reads
the object again and reports what it found (``runner._runner``). A 401 is vCenter refusing
the session before it looks at the request: logged in again and repeated.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from datetime import datetime

try:
    import requests

    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - reported by the module layer
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = exc

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereConnectionError,
    VsphereError,
    VsphereNotFound,
    VsphereOutcomeUnknown,
    VsphereSessionLost,
    VsphereTaskError,
    RetryPolicy,
    ca_bundle,
    wait,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import (
    UTC,
    change_may_repeat,
    retry_after_delay,
    retry_after_seconds,
)

# the statuses a change is repeated after: a 503 with Retry-After only (see the module docstring)
REFUSED_STATUS = 503

SESSION_HEADER = "vmware-api-session-id"


class VsphereRestError(VsphereError):
    """A REST call answered with an error status."""

    def __init__(self, message, status=None, error_type=None, messages=None):
        super(VsphereRestError, self).__init__(message)
        self.status = status
        self.error_type = error_type
        self.messages = messages or []


def error_text(body):
    """(error_type, [messages]) of a vSphere Automation API error body (both API styles)."""
    if not isinstance(body, dict):
        return None, [str(body)] if body else []
    value = body.get("value") if isinstance(body.get("value"), dict) else body
    error_type = value.get("error_type") or value.get("type")
    messages = []
    for msg in value.get("messages") or []:
        if isinstance(msg, dict):
            messages.append(msg.get("default_message") or msg.get("id") or str(msg))
        else:
            messages.append(str(msg))
    return error_type, messages


def _reason(exc):
    """The innermost reason of a requests exception (not the retry wrapper text)."""
    inner = exc
    seen = set()
    while getattr(inner, "__context__", None) is not None and id(inner) not in seen:
        seen.add(id(inner))
        inner = inner.__context__
    return getattr(inner, "verify_message", None) or str(inner)


MAYBE = ("; the request may or may not have been carried out, so it was not repeated: "
         "a rerun reads the state and resumes")


def _unsent(exc):
    """Whether a requests exception proves the request was not sent: a refused connection, or one
    that could not be opened in time."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    return isinstance(exc, requests.exceptions.ConnectionError) and "refused" in _reason(exc).lower()


def _retry_after(resp):
    """Seconds the Retry-After of a 503 asks for, None for any other answer or an unreadable header."""
    if resp.status_code != REFUSED_STATUS:
        return None
    return retry_after_seconds(resp.headers.get("Retry-After"), datetime.now(UTC))


def _vapi_error(resp):
    """Whether a 5xx answer is vCenter's own error (a vAPI error body with its type): vCenter says the
    operation failed, which is an answer (raised as VsphereRestError), not a lost one."""
    if resp.status_code in (502, 503, 504) or "json" not in (resp.headers.get("Content-Type") or ""):
        return False
    try:
        error_type, _messages = error_text(resp.json())
    except ValueError:
        return False
    return bool(error_type)


class VsphereRestClient:
    """A logged-in vSphere Automation API session."""

    def __init__(self, hostname, username, password, port=443, validate_certs=True, ca_file=None,
                 timeout=60, session=None, retries=5, retry_delay=1.0, max_retry_delay=30.0, sleep=time.sleep,
                 clock=time.monotonic):
        if not HAS_REQUESTS:
            raise VsphereConnectionError("the requests library is required: %s" % REQUESTS_IMPORT_ERROR)
        if not hostname:
            raise VsphereConnectionError("no vCenter host name given (option hostname or VMWARE_HOST)")
        self.base = "https://%s:%d" % (hostname, int(port or 443))
        self.timeout = timeout
        self.requests = 0
        self.retry = RetryPolicy(retries, retry_delay, max_retry_delay, sleep)
        self.clock = clock
        self.relogins = 0
        self._credentials = (username or "", password or "")
        self._closed = False
        self.http = session or requests.Session()
        # passed on every request: a Session-level verify loses to REQUESTS_CA_BUNDLE in requests
        self.verify = (ca_bundle(ca_file) or True) if validate_certs else False
        self.http.headers.update({"Accept": "application/json"})
        self._login()

    def _login(self):
        """POST /api/session; retried while vCenter refuses connections or answers 503."""
        attempts = self.retry.start()
        self.http.headers.pop(SESSION_HEADER, None)
        while True:
            try:
                resp = self.http.post(self.base + "/api/session", auth=self._credentials,
                                      timeout=self.timeout, verify=self.verify)
            except requests.exceptions.SSLError as exc:
                raise VsphereConnectionError(
                    "TLS certificate of %s not trusted (%s); name its CA with ca_file, VMWARE_CA_FILE, "
                    "REQUESTS_CA_BUNDLE or SSL_CERT_FILE" % (self.base, _reason(exc)))
            except requests.exceptions.RequestException as exc:
                if not attempts.left():
                    raise VsphereConnectionError("cannot reach %s: %s (%d attempts)" % (self.base, _reason(exc), attempts.count + 1))
                resp = None
            if resp is not None:
                self.requests += 1
                if resp.status_code == 401:
                    raise VsphereConnectionError(
                        "login to %s refused: invalid user name or password for %s" % (self.base, self._credentials[0]))
                if resp.status_code < 400:
                    break
                if resp.status_code < 500 or not attempts.left():
                    raise VsphereConnectionError("login to %s failed: HTTP %s" % (self.base, resp.status_code))
            attempts.pause()
        token = resp.json()
        if isinstance(token, dict):  # older /rest style {"value": token}
            token = token.get("value")
        self.http.headers[SESSION_HEADER] = token

    def close(self):
        self._closed = True  # no re-login after this
        if SESSION_HEADER in self.http.headers:
            try:
                self.http.delete(self.base + "/api/session", timeout=self.timeout, verify=self.verify)
            except requests.exceptions.RequestException:
                pass
            del self.http.headers[SESSION_HEADER]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _relogin(self, method, path):
        """A new session after a 401; a refused login is the session lost (not transient)."""
        self.relogins += 1
        try:
            self._login()
        except VsphereConnectionError as exc:
            if not str(exc).startswith("login to %s refused" % self.base):
                raise  # vCenter unreachable or restarting: a waiter goes on
            raise VsphereSessionLost("%s %s: re-login after HTTP 401 failed: %s" % (method, path, exc))

    def _send(self, method, path, body, params):
        """One request through the fault boundary: (response, data)."""
        url = self.base + path
        repeatable = method in ("GET", "HEAD")
        attempts = self.retry.start()
        deadline = self.clock() + self.timeout
        relogged = False
        while True:
            try:
                resp = self.http.request(method, url, json=body, params=params, timeout=self.timeout,
                                         verify=self.verify)
            except requests.exceptions.RequestException as exc:
                unsent = _unsent(exc)
                if not attempts.left() or not (repeatable or change_may_repeat(unsent=unsent)):
                    text = "%s %s: connection to %s failed (%s)" % (method, path, self.base, _reason(exc))
                    if attempts.count:
                        text += " after %d attempts" % (attempts.count + 1)
                    if not (repeatable or unsent):
                        raise VsphereOutcomeUnknown(text + MAYBE)
                    raise VsphereConnectionError(text)
                attempts.pause()
                continue
            self.requests += 1
            if resp.status_code == 401 and self.retry.retries and not self._closed:
                if relogged:  # refused right after a re-login: lost twice in a row
                    raise VsphereSessionLost("%s %s: vCenter refused the session (HTTP 401) again right after a "
                                             "re-login to %s" % (method, path, self.base))
                relogged = True
                self._relogin(method, path)
                continue
            if resp.status_code < 500:
                break
            after = _retry_after(resp)
            if not repeatable and not change_may_repeat(resp.status_code, after) and not _vapi_error(resp):
                # a gateway's answer (or one without vCenter's error): whether the change was made is not known
                raise VsphereOutcomeUnknown("%s %s: %s answered HTTP %s %s%s%s" % (
                    method, path, self.base, resp.status_code, resp.reason or "",
                    " after %d attempts" % (attempts.count + 1) if attempts.count else "", MAYBE))
            if not attempts.left():
                break
            if after is not None:
                delay = retry_after_delay(after, deadline - self.clock())
                if delay is None:
                    break  # the call's deadline leaves no time for the repeat the server asked for
                attempts.pause_for(delay)
                continue
            if repeatable:
                attempts.pause()
                continue
            break
        data = None
        if resp.content:
            try:
                data = resp.json()
            except ValueError:
                data = resp.text
        return resp, data

    def request(self, method, path, body=None, params=None):
        resp, data = self._send(method, path, body, params)
        if resp.status_code == 404:
            error_type, messages = error_text(data)
            raise VsphereNotFound("%s not found%s" % (path, (": " + "; ".join(messages)) if messages else ""))
        if resp.status_code >= 400:
            error_type, messages = error_text(data)
            detail = "; ".join(messages) or (data if isinstance(data, str) else "") or resp.reason
            raise VsphereRestError("%s %s: HTTP %s %s%s" % (method, path, resp.status_code,
                                                            error_type or "", (": " + detail) if detail else ""),
                                   status=resp.status_code, error_type=error_type, messages=messages)
        return data

    def get(self, path, params=None):
        return self.request("GET", path, params=params)

    def post(self, path, body=None, params=None):
        return self.request("POST", path, body=body, params=params)

    def patch(self, path, body=None, params=None):
        return self.request("PATCH", path, body=body, params=params)

    def put(self, path, body=None, params=None):
        return self.request("PUT", path, body=body, params=params)

    def delete(self, path, params=None):
        return self.request("DELETE", path, params=params)

    def wait_for_task(self, task_id, timeout=600, what="task", initial_delay=0.2, max_delay=5.0,
                      sleep=time.sleep, clock=time.monotonic):
        """Wait for a ``?vmw-task=true`` task (``/api/cis/tasks/{id}``); return its result.

        Connection failures and 5xx while waiting (vCenter restarting during a two-hour
        remediation) do not end the wait before ``timeout``; the task goes on in vCenter.
        """
        def check():
            try:
                info = self.get("/api/cis/tasks/%s" % task_id) or {}
            except VsphereNotFound:
                raise VsphereTaskError("%s: vCenter no longer knows task %s; a rerun reads the state and resumes"
                                       % (what, task_id))
            except VsphereRestError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
                raise VsphereConnectionError(str(exc))
            status = info.get("status")
            if status == "SUCCEEDED":
                return True, info.get("result")
            if status == "FAILED":
                error_type, messages = error_text(info.get("error") or {})
                raise VsphereTaskError("%s failed: %s" % (what, "; ".join(messages) or error_type or "no reason given"))
            progress = (info.get("progress") or {}).get("completed")
            return False, "%s%s" % (status, (", %s done" % progress) if progress is not None else "")

        return wait(check, timeout, what, transient=(VsphereConnectionError,), initial_delay=initial_delay,
                    max_delay=max_delay, sleep=sleep, clock=clock)
