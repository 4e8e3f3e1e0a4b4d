# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client of Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``), knowing
nothing of Ansible: a timeout on every request, bounded retries with the collection's backoff
(pure/_retry.py) on timeouts, dropped or refused connections and 429/5xx answers (every call is
a read), and one error type, ``PromError``.

Credentials (a bearer token, basic credentials) go only where ``url`` points: a redirect to another
origin (scheme, host or port) is followed without the ``Authorization`` header, and a plain
``http://`` URL with credentials is refused unless ``allow_plain_http`` says the token may travel
unencrypted (a Prometheus on the same host, a lab)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import time
from urllib.parse import urlencode

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import ATTEMPTS, TRANSIENT_STATUS, backoff_delay, times
from ansible_collections.gpupool.vcf.plugins.module_utils.transport._http import FAILURES, failure, opener, origin, send


class PromError(ClientError):
    """A Prometheus call failed. ``status`` is the HTTP status when Prometheus answered; ``kind``
    is ``answer`` (an HTTP error or a query error), ``timeout``, ``refused``, ``reset``, ``tls``,
    ``config`` (the client refused its options) or ``other``; ``error_type`` is Prometheus's ``errorType`` (``bad_data``, ``timeout``, ...)."""

    def __init__(self, msg, status=None, kind="answer", error_type=None, attempts=1):
        super(PromError, self).__init__(msg)
        self.status = status
        self.kind = kind
        self.error_type = error_type
        self.attempts = attempts

    @property
    def transient(self):
        return self.kind in ("timeout", "refused", "reset") or self.status in TRANSIENT_STATUS


def _error(exc, where, timeout):
    """A PromError for what one request met (one of transport/_http.FAILURES)."""
    met = failure(exc, where, timeout, "give ca_path with Prometheus's CA", detail_key="error")
    return PromError(met.message, status=met.status, kind=met.kind,
                     error_type=met.body.get("errorType") if met.body is not None else None)


class PromClient(object):
    """Prometheus's query API. ``url`` is the server's base URL (``https://prometheus:9090``, a
    path prefix is kept); a bearer token or basic credentials authenticate when given. Queries
    are sent as POST forms (long PromQL fits) and retried ``attempts`` times in all. Credentials over
    plain ``http://`` are refused (``PromError`` of kind ``config``, raised by the first query, before
    anything is sent) unless ``allow_plain_http``."""

    def __init__(self, url, bearer_token=None, username=None, password=None, validate_certs=True, ca_path=None,
                 timeout=30, attempts=ATTEMPTS, sleep=time.sleep, allow_plain_http=False,
                 plain_http_option="allow_plain_http"):
        self.refusal = None  # raised by the first call (inside the module's error boundary), nothing sent
        if (bearer_token or username) and origin(url)[0] == "http" and not allow_plain_http:
            self.refusal = PromError(
                "refusing to send %s to %s over plain http, where anyone on the path can read it: use an "
                "https:// URL, or allow plain http explicitly (option %s)"
                % ("the bearer token" if bearer_token else "the credentials", url.rstrip("/"), plain_http_option),
                kind="config")
        self.base = url.rstrip("/")
        self.where = self.base
        self.timeout = timeout
        self.attempts, self.sleep = max(1, attempts), sleep
        self.headers = {"Accept": "application/json"}
        if bearer_token:
            self.headers["Authorization"] = "Bearer %s" % bearer_token
        elif username:
            pair = ("%s:%s" % (username, password or "")).encode()
            self.headers["Authorization"] = "Basic %s" % base64.b64encode(pair).decode()
        self.opener = opener(validate_certs, ca_path)  # redirects followed, Authorization only within the origin
        self.requests = 0

    def _once(self, path, form):
        headers = dict(self.headers, **{"Content-Type": "application/x-www-form-urlencoded"})
        self.requests += 1
        try:
            resp = send(self.opener, self.base + path, urlencode(form).encode(), headers, "POST", self.timeout)
            text = resp.read()
        except FAILURES as exc:  # the boundary: urllib, http.client, ssl and socket errors; anything else is a bug
            raise _error(exc, self.where, self.timeout)
        try:
            body = json.loads(text)
        except ValueError:
            raise PromError("%s: the answer is not JSON (is %s Prometheus?)" % (path, self.base), kind="other")
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PromError("%s" % (body.get("error") if isinstance(body, dict) else body),
                            error_type=body.get("errorType") if isinstance(body, dict) else None)
        return body.get("data") or {}

    def _call(self, path, form):
        if self.refusal is not None:
            raise self.refusal
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(path, form)
            except PromError as err:
                if err.transient and attempt < self.attempts:
                    self.sleep(backoff_delay(attempt))
                    continue
                tail = "" if attempt == 1 else " (%s)" % times(attempt)
                raise PromError("%s %s: %s%s" % (path, form.get("query", "")[:200], err, tail), status=err.status,
                                kind=err.kind, error_type=err.error_type, attempts=attempt)

    def query(self, expr, at=None):
        """An instant query: the ``result`` list (vector: ``[{metric, value: [t, "v"]}]``)."""
        form = {"query": expr}
        if at is not None:
            form["time"] = "%.3f" % at
        return self._call("/api/v1/query", form).get("result") or []

    def query_range(self, expr, start, end, step):
        """A range query: the ``result`` list (matrix: ``[{metric, values: [[t, "v"], ...]}]``)."""
        form = {"query": expr, "start": "%.3f" % start, "end": "%.3f" % end, "step": "%gs" % step}
        return self._call("/api/v1/query_range", form).get("result") or []


# the option names of the Prometheus connection (doc fragment gpupool.vcf.prometheus with BEARER_TOKEN)
OPTIONS = dict(url="prometheus_url", bearer_token="prometheus_bearer_token", validate_certs="prometheus_validate_certs",
               ca_path="prometheus_ca_path", allow_plain_http="prometheus_allow_plain_http")


def prometheus_argument_spec(token=OPTIONS["bearer_token"], env_fallback=None):
    """The Prometheus connection options of a module (doc fragment gpupool.vcf.prometheus; ``token``: the
    name of the bearer token option, its BEARER_TOKEN or TOKEN part). ``env_fallback``: the module's
    ``env_fallback`` (this client knows nothing of Ansible), to read PROMETHEUS_URL and PROMETHEUS_TOKEN."""
    spec = dict((OPTIONS[k], dict(type=t)) for k, t in (("url", "str"), ("ca_path", "path")))
    spec[token] = dict(type="str", no_log=True)
    spec[OPTIONS["validate_certs"]] = dict(type="bool", default=True)
    spec[OPTIONS["allow_plain_http"]] = dict(type="bool", default=False)
    if env_fallback is not None:
        spec[OPTIONS["url"]]["fallback"] = (env_fallback, ["PROMETHEUS_URL"])
        spec[token]["fallback"] = (env_fallback, ["PROMETHEUS_TOKEN"])
    return spec


def prom_client(params, timeout, attempts=ATTEMPTS, **names):
    """The PromClient of a module's connection options. ``names`` maps the client's settings (``url``,
    ``bearer_token``, ``validate_certs``, ``ca_path``, ``allow_plain_http``, and ``username`` and
    ``password`` where a module takes basic credentials) to the module's option names, where they differ
    from :data:`OPTIONS`."""
    opts = dict(OPTIONS, **names)
    return PromClient(params[opts["url"]], bearer_token=params.get(opts["bearer_token"]),
                      username=params.get(opts.get("username", "")), password=params.get(opts.get("password", "")),
                      validate_certs=params[opts["validate_certs"]], ca_path=params[opts["ca_path"]],
                      allow_plain_http=params[opts["allow_plain_http"]],
                      plain_http_option=opts["allow_plain_http"], timeout=timeout, attempts=attempts)
