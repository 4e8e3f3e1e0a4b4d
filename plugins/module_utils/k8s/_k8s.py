# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What kubernetes.core does not offer: an API client from the shared auth options with a
request timeout, bounded retries and one error type (the fault boundary). The node pool logic
of ClusterClass variables is pure/_cluster_class.py; its names stay importable from here."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import time

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import (
    ATTEMPTS, TRANSIENT_STATUS, backoff_delay, seconds, times,
)

try:
    from ansible.module_utils.basic import env_fallback
except ImportError:  # pure use outside Ansible (unit tests import only the logic)
    env_fallback = None
try:  # a warning returned with the result of whichever module runs the client
    from ansible.module_utils.common.warnings import warn as ansible_warn
except ImportError:
    ansible_warn = None


def auth_argument_spec():
    """The connection options (names and environment variables of kubernetes.core)."""
    def env(*names):
        return dict(fallback=(env_fallback, list(names))) if env_fallback else {}
    return dict(
        kubeconfig=dict(type="path", **env("K8S_AUTH_KUBECONFIG")),
        context=dict(type="str", **env("K8S_AUTH_CONTEXT")),
        host=dict(type="str", **env("K8S_AUTH_HOST")),
        api_key=dict(type="str", no_log=True, **env("K8S_AUTH_API_KEY")),
        ca_cert=dict(type="path", aliases=["ssl_ca_cert"], **env("K8S_AUTH_SSL_CA_CERT")),
        client_cert=dict(type="path", aliases=["cert_file"], **env("K8S_AUTH_CERT_FILE")),
        client_key=dict(type="path", aliases=["key_file"], no_log=False, **env("K8S_AUTH_KEY_FILE")),
        validate_certs=dict(type="bool", aliases=["verify_ssl"], **env("K8S_AUTH_VERIFY_SSL")),
    )


DEFAULT_REQUEST_TIMEOUT = 30
# urllib3 / http.client / socket exception names, by what they mean for a retry
REFUSED = ("NewConnectionError", "ConnectionRefusedError", "NameResolutionError", "gaierror")
TIMED_OUT = ("ReadTimeoutError", "ConnectTimeoutError", "TimeoutError", "timeout")
DROPPED = ("ProtocolError", "ConnectionResetError", "RemoteDisconnected", "BrokenPipeError",
           "ConnectionAbortedError", "IncompleteRead")
TLS = ("SSLError", "SSLCertVerificationError", "CertificateError")
# answers that say the request was not processed and when to ask again: with a Retry-After header,
# a change is repeated after them (the API server's priority and fairness and its max-in-flight
# limit refuse a request before it is read)
NOT_NOW = (429, 503)
TLS_OFF = ("%s: the server's TLS certificate is not verified, so anyone on the network path can pose as the server and "
           "read the credentials and data of this connection; name its CA instead (%s)")


def request_argument_spec():
    """The `request_timeout` option of every module that talks to a Kubernetes API."""
    return dict(request_timeout=dict(type="int", default=DEFAULT_REQUEST_TIMEOUT))


def request_timeout_error(value):
    """The message for a request_timeout that is not a positive number of seconds, else None."""
    if value is None or value <= 0:
        return "request_timeout must be more than 0 seconds, got %s" % value
    return None


class K8sError(ClientError):
    """An API call failed.

    `status` is the HTTP status when the server answered; `kind` is `answer`, `timeout`,
    `refused` (nothing was sent), `reset`, `tls`, `config` (the kubeconfig is unusable),
    `not_served` (the API server does not serve that group, version or kind) or `other`;
    `attempts` is how many times the call was made.
    """

    def __init__(self, msg, status=None, kind="answer", attempts=1, reason=None, retry_after=None,
                 outcome_unknown=False):
        super(K8sError, self).__init__(msg)
        self.status = status
        self.kind = kind
        self.attempts = attempts
        self.reason = reason or msg
        self.retry_after = retry_after
        # a change sent once whose answer was lost (call_once): the caller reads the object again
        self.outcome_unknown = outcome_unknown

    @property
    def transient(self):
        return self.kind in ("timeout", "refused", "reset") or self.status in TRANSIENT_STATUS


def _status_message(exc):
    """The `message` of a Kubernetes Status body, else the start of the body."""
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        msg = json.loads(body).get("message")
    except (ValueError, TypeError, AttributeError):
        msg = None
    if msg:
        return msg
    return body.strip()[:200] if isinstance(body, str) and body.strip() else None


def _retry_after(exc):
    headers = getattr(exc, "headers", None) or {}
    try:
        return float(headers.get("Retry-After"))
    except (TypeError, ValueError, AttributeError):
        return None


def _chain(exc):
    """The exception and what it wraps (urllib3's MaxRetryError.reason, __cause__, __context__)."""
    seen = []
    while exc is not None and exc not in seen and len(seen) < 6:
        seen.append(exc)
        wrapped = getattr(exc, "reason", None)
        exc = wrapped if isinstance(wrapped, BaseException) else (exc.__cause__ or exc.__context__)
    return seen


def _tried(attempts):
    return "" if attempts == 1 else " (%d attempts)" % attempts


def to_k8s_error(exc, server, timeout=None, attempts=1):
    """One K8sError for whatever the kubernetes client raised."""
    if isinstance(exc, K8sError):
        exc.attempts = attempts
        return exc
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    status = getattr(exc, "status", None)
    text = str(exc).strip()
    if isinstance(status, int) and status >= 100:
        answer = ("%s %s" % (status, getattr(exc, "reason", None) or "")).strip()
        detail = _status_message(exc)
        msg = "the API server at %s answered %s%s" % (server, answer, "" if attempts == 1 else " " + times(attempts))
        if detail:
            msg += " (%s)" % detail
        return K8sError(msg, status=status, attempts=attempts, reason=detail or answer, retry_after=_retry_after(exc))
    if "ResourceNotFoundError" in names:
        return K8sError("the API server at %s does not serve it (%s)" % (server, text), kind="not_served",
                        attempts=attempts)
    if any(n in TLS for n in names) or (status == 0 and "SSL" in text):
        return K8sError("TLS with the API server at %s failed: %s (check ca_cert or the kubeconfig's "
                        "certificate-authority)" % (server, text.splitlines()[-1] if text else type(exc).__name__),
                        kind="tls", attempts=attempts)
    if any(n in REFUSED for n in names):
        return K8sError("cannot connect to the API server at %s: connection refused%s" % (server, _tried(attempts)),
                        kind="refused", attempts=attempts)
    if any(n in TIMED_OUT for n in names) or any(isinstance(e, socket.timeout) for e in chain):
        return K8sError("the API server at %s did not answer within %s s%s" % (server, seconds(timeout), _tried(attempts)),
                        kind="timeout", attempts=attempts)
    if any(n in DROPPED for n in names):
        return K8sError("the API server at %s dropped the connection%s: %s" % (server, _tried(attempts), text),
                        kind="reset", attempts=attempts)
    return K8sError("%s: %s" % (type(exc).__name__, text), kind="other", attempts=attempts)


def _timeout_api_client(cfg, request_timeout):
    """An ApiClient that gives every request `request_timeout` unless the call sets its own."""
    from kubernetes import client

    class TimeoutApiClient(client.ApiClient):
        def call_api(self, *args, **kwargs):
            if kwargs.get("_request_timeout") is None and len(args) < 6:
                kwargs["_request_timeout"] = request_timeout
            return super(TimeoutApiClient, self).call_api(*args, **kwargs)

    return TimeoutApiClient(cfg)


def api_client(params, request_timeout=None):
    """A kubernetes.client.ApiClient from the auth options (kubeconfig unless `host` is given).

    Every request it makes has `request_timeout` (default the `request_timeout` option, else
    30 s); urllib3's own retries are off (K8sClient retries, bounded, with backoff). A
    kubeconfig that cannot be used raises K8sError (kind `config`).
    """
    from kubernetes import client, config
    if request_timeout is None:
        request_timeout = params.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT
    cfg = client.Configuration()
    if params.get("host"):
        cfg.host = params["host"]
        if params.get("api_key"):
            cfg.api_key = {"authorization": "Bearer " + params["api_key"]}
        if params.get("ca_cert"):
            cfg.ssl_ca_cert = params["ca_cert"]
        if params.get("client_cert"):
            cfg.cert_file = params["client_cert"]
        if params.get("client_key"):
            cfg.key_file = params["client_key"]
        if params.get("validate_certs") is not None:
            cfg.verify_ssl = params["validate_certs"]
    else:
        path = params.get("kubeconfig") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
        try:
            config.load_kube_config(config_file=path, context=params.get("context"), client_configuration=cfg,
                                    persist_config=False)
        except Exception as exc:  # ConfigException, YAML and file errors: this kubeconfig is unusable
            raise K8sError("cannot use kubeconfig %s%s: %s" % (
                path or "~/.kube/config", " (context %s)" % params["context"] if params.get("context") else "",
                str(exc).strip() or type(exc).__name__), kind="config")
        if params.get("validate_certs") is False:
            cfg.verify_ssl = False
        if params.get("ca_cert"):
            cfg.ssl_ca_cert = params["ca_cert"]
    cfg.retries = False
    return _timeout_api_client(cfg, request_timeout)


def tls_off_warning(configuration, params=None):
    """The warning for a client whose certificate verification is off, else None: ``validate_certs``
    set false (the same sentence the other clients' connection options get), or the kubeconfig's
    ``insecure-skip-tls-verify: true``."""
    if configuration is None or getattr(configuration, "verify_ssl", True) is not False:
        return None
    params = params or {}
    if params.get("validate_certs") is False:
        return TLS_OFF % ("validate_certs is false", "the ca_file, ca_path or ca_cert option of this connection")
    where = params.get("kubeconfig") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    return TLS_OFF % ("kubeconfig %s%s sets insecure-skip-tls-verify" % (
        where, " (context %s)" % params["context"] if params.get("context") else ""),
        "the cluster's certificate-authority in the kubeconfig, or the ca_cert option")


class K8sClient(object):
    """The fault boundary of the collection's Kubernetes calls.

    `call(fn, *args, **kwargs)` runs an idempotent call - a read, or a write that carries a
    precondition (the object's resourceVersion or uid) so that a repeat cannot apply twice:
    timeouts, dropped or refused connections and 429/5xx answers are retried, `attempts` times in
    all, with exponential backoff and jitter. `call_once` runs a change that is not idempotent
    (a POST, PUT, PATCH or DELETE without a precondition): it is repeated only when the request
    provably did not reach the server - the connection was refused, or the server answered 429 or
    503 with a Retry-After header (it did not process it and said when to ask again). After a
    timeout, a dropped connection or any other 5xx (a gateway's 502 or 504 may come after the server
    carried it out) it is not repeated, and the error says the outcome is unknown
    (``outcome_unknown``). The last failure, and every other one, is raised as one K8sError.

    A 429 or 503 with Retry-After is repeated after the header's delay (seconds), not the backoff's;
    no wait goes past the call's deadline: ``deadline`` (a time of `clock`, such as a drain's one
    deadline) when set, and never more than ``attempts`` request timeouts from the call's start.

    A client whose TLS verification is off (``validate_certs`` false, or the kubeconfig's
    ``insecure-skip-tls-verify: true``) says so once through `warn` (default: the warning of the
    module that runs it); the sentence is kept in ``tls_warning``.
    """

    def __init__(self, params=None, request_timeout=None, attempts=ATTEMPTS, sleep=time.sleep, api=None,
                 clock=time.monotonic, warn=None):
        params = params or {}
        self.timeout = request_timeout or params.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT
        self.attempts = max(1, attempts)
        self.sleep = sleep
        self.clock = clock
        self.deadline = None
        self.api = api if api is not None else api_client(params, self.timeout)
        self.server = getattr(getattr(self.api, "configuration", None), "host", None) or "?"
        self._dynamic = None
        self._paths = None
        self.tls_warning = tls_off_warning(getattr(self.api, "configuration", None), params)
        warn = warn if warn is not None else ansible_warn
        if self.tls_warning and warn is not None:
            warn(self.tls_warning)

    def call(self, fn, *args, **kwargs):
        return self._run(True, fn, args, kwargs)

    def call_once(self, fn, *args, **kwargs):
        return self._run(False, fn, args, kwargs)

    def _end(self, start):
        """The clock time no wait of a call that started at `start` goes past."""
        end = start + self.attempts * self.timeout
        return end if self.deadline is None else min(end, self.deadline)

    def _run(self, idempotent, fn, args, kwargs):
        end = self._end(self.clock())
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # the boundary: every failure becomes one K8sError
                err = to_k8s_error(exc, self.server, self.timeout, attempt)
                not_now = err.status in NOT_NOW and err.retry_after is not None
                if not idempotent and err.transient and not (err.kind == "refused" or not_now):
                    # a 5xx, a timeout or a reset after sending: the server may have carried it out
                    raise K8sError("%s; the request may or may not have been carried out, so it was not repeated: "
                                   "a rerun reads the state and resumes" % err, status=err.status, kind=err.kind,
                                   attempts=err.attempts, reason=err.reason, outcome_unknown=True)
                if not err.transient or attempt >= self.attempts:
                    raise err
                # the server's own delay when it gave one, else the backoff; never past the call's deadline
                delay = max(0.0, err.retry_after) if not_now else backoff_delay(attempt, err.retry_after)
                left = end - self.clock()
                if left <= 0:
                    raise err
                self.sleep(min(delay, left))

    def dynamic(self):
        """A DynamicClient; its discovery requests go through the boundary too."""
        if self._dynamic is None:
            from kubernetes import dynamic
            self._dynamic = self.call(dynamic.DynamicClient, self.api)
        return self._dynamic

    def resource(self, api_version, kind):
        """The dynamic resource api_version/kind; K8sError of kind `not_served` when the server lacks it."""
        return self.call(self.dynamic().resources.get, api_version=api_version, kind=kind)

    def request(self, method, path, body=None, once=False, **params):
        """One request to `path` of the API server (``/api/v1/namespaces``; `params` as the dynamic client takes
        them: ``label_selector``, ``field_selector``, ``content_type``, ...); the answer's JSON as plain dicts and
        lists. `once`: a change that is not idempotent (``call_once``), else ``call``.

        Through the dynamic client's request, with no discovery and no typed models: importing the kubernetes
        client's typed API classes and their models costs about half a second in each module process, where this
        request costs what its HTTP round trip costs."""
        return (self.call_once if once else self.call)(self.send, method, path, body=body, **params)

    def send(self, method, path, body=None, **params):
        """`request` without the fault boundary: the request once, and what the kubernetes client raises (for a
        caller that judges an answer itself before the boundary does, as an eviction's 429)."""
        if self._paths is None:
            from kubernetes import dynamic
            self._paths = dynamic.DynamicClient(self.api, discoverer=_NoDiscovery)
        return self._paths.request(method, path, body=body, serializer=_as_data, **params)

    def items(self, path, **params):
        """The items of one list request (`request`)."""
        return (self.request("GET", path, **params) or {}).get("items") or []


# the patch of a built-in kind as the typed client sent it: the strategic merge the API server defines for the kind
# (a Node's labels merged, its taint list replaced by the one of the body)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def api_path(api_version, plural, namespace=None, name=None):
    """The path of a collection (or, with `name`, one object) of the API: ``/api/v1/...`` for the core group,
    ``/apis/<group>/<version>/...`` for the others."""
    parts = ["/api" if "/" not in api_version else "/apis", api_version]
    if namespace:
        parts += ["namespaces", namespace]
    parts.append(plural)
    if name:
        parts.append(name)
    return "/".join(parts)


class _NoDiscovery(object):
    """The discoverer of K8sClient.request's dynamic client: requests by path need no discovery, so none is made."""

    def __init__(self, client, cache_file=None):
        self.client = client


def _as_data(_client, data):
    """The dynamic client's serializer that keeps the answer as the JSON it was."""
    return data
