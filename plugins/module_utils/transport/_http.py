# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one HTTP request path of the collection's HTTP clients (the DLS appliance, Prometheus, pool_ready's
inference probe), knowing nothing of Ansible: the TLS context (certificates verified unless the caller
says otherwise), the redirect policy, one request with a timeout, the failures a request can meet
(:data:`FAILURES`) and what each means (:func:`failure`).

Redirects are followed within one origin only with the ``Authorization`` header
(:class:`SameOriginAuth`), or not at all (:class:`NoRedirect`: the redirect is the answer, so a token
goes only to the URL it was given for). Each client turns a failure into its own error under
``pure/_errors.ClientError``; an exception that is none of :data:`FAILURES` is a bug and is not caught."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client as http_client
import json
import socket
import ssl
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPHandler, HTTPRedirectHandler, HTTPSHandler, Request, build_opener

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import seconds

# what a request and the read of its answer can meet on the way: urllib's URLError and HTTPError, socket
# timeouts, refused and dropped connections and TLS errors (all OSError), a broken or malformed HTTP exchange
# (http.client.HTTPException: IncompleteRead, RemoteDisconnected, InvalidURL), and an address that cannot be
# encoded as a host name (UnicodeError, from the IDNA codec)
FAILURES = (OSError, http_client.HTTPException, UnicodeError)


def tls_context(validate_certs=True, ca_path=None):
    """The TLS context of a client: the server's certificate and name verified (against ``ca_path``, default the
    system trust store) unless ``validate_certs`` is false."""
    if validate_certs:
        return ssl.create_default_context(cafile=ca_path)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def origin(url):
    """(scheme, host, port) of a URL, the port filled in from the scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


class SameOriginAuth(HTTPRedirectHandler):
    """urllib's redirects, without ``Authorization`` where the redirect leaves the origin (another scheme, host or
    port: a token never follows a redirect to plain http). urllib turns a redirected POST into a GET without its
    body, so a password in a body does not follow either."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = HTTPRedirectHandler.redirect_request(self, req, fp, code, msg, headers, newurl)
        if new is not None and origin(new.full_url) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


class NoRedirect(HTTPRedirectHandler):
    """A redirect is an answer (an HTTPError with its 3xx status), not followed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def opener(validate_certs=True, ca_path=None, follow_redirects=True):
    """The urllib opener of a client: :func:`tls_context` for https, and redirects followed within the origin
    (:class:`SameOriginAuth`) or, with ``follow_redirects`` false, not at all (:class:`NoRedirect`)."""
    return build_opener(HTTPHandler(), HTTPSHandler(context=tls_context(validate_certs, ca_path)),
                        SameOriginAuth() if follow_redirects else NoRedirect())


def send(client_opener, url, data=None, headers=None, method="GET", timeout=30):
    """Open one request; the response (the caller reads and closes it). Raises one of :data:`FAILURES`."""
    req = Request(url, data=data, headers=dict(headers or {}), method=method)
    return client_opener.open(req, timeout=timeout)


class Failure(object):
    """What went wrong on one request: ``message`` (without the request's name), ``kind`` (``answer``: an HTTP
    error, ``status`` its code and ``body`` its JSON object when it has one; ``tls``, ``refused``, ``timeout``,
    ``reset`` or ``other``)."""

    def __init__(self, message, kind, status=None, body=None):
        self.message, self.kind, self.status, self.body = message, kind, status, body


def _json_body(exc):
    try:
        body = json.loads(exc.read())
    except (ValueError, AttributeError, TypeError, OSError, http_client.HTTPException):
        return None
    return body if isinstance(body, dict) else None


def failure(exc, where, timeout, tls_hint, detail_key=None, refused_errnos=None):
    """The :class:`Failure` of ``exc`` (one of :data:`FAILURES`) on a request to ``where`` (``host:port`` or the
    base URL). ``tls_hint``: what to do about a TLS failure (the CA option to give); ``detail_key``: the key of
    an HTTP error's JSON body that says why, shown instead of the reason phrase; ``refused_errnos``: the errnos
    of another OSError that count as ``refused`` (default every one; else ``other``)."""
    if isinstance(exc, HTTPError):
        body = _json_body(exc)
        detail = body.get(detail_key) if body is not None and detail_key else None
        return Failure("answered %s %s" % (exc.code, detail or exc.reason), "answer", status=exc.code, body=body)
    reason = getattr(exc, "reason", None) if isinstance(exc, URLError) else exc
    if isinstance(reason, ssl.SSLError) or isinstance(exc, ssl.SSLError):
        return Failure("TLS with %s failed: %s (%s)" % (where, reason, tls_hint), "tls")
    if isinstance(reason, ConnectionRefusedError):
        return Failure("cannot reach %s: connection refused" % where, "refused")
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return Failure("%s did not answer within %s s" % (where, seconds(timeout)), "timeout")
    if isinstance(reason, (ConnectionError, http_client.HTTPException)):
        return Failure("%s dropped the connection: %s" % (where, reason or type(reason).__name__), "reset")
    if isinstance(reason, OSError):
        refused = refused_errnos is None or getattr(reason, "errno", None) in refused_errnos
        return Failure("cannot reach %s: %s" % (where, getattr(reason, "strerror", None) or reason),
                       "refused" if refused else "other")
    return Failure("%s: %s" % (type(exc).__name__, exc), "other")


__all__ = ["FAILURES", "Failure", "NoRedirect", "SameOriginAuth", "failure", "opener", "origin", "send", "tls_context"]
