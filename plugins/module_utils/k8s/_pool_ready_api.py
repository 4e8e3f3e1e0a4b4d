# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest cluster reads, the probe pod and the inference probe of pool_ready (client layer: knows
nothing of Ansible).

Every Kubernetes call goes through the fault boundary of ``_k8s.K8sClient`` (request timeout,
bounded retries, one K8sError). Objects come back as plain dicts for ``pure._pool_ready``.

:class:`InferenceProbe` sends one streaming completion to the pool's OpenAI-compatible endpoint
(served from the guest cluster) and times its first streamed chunk, through the collection's one HTTP request
path (``transport/_http``: certificates verified by default, redirects not followed); a network or HTTP failure
that keeps the chunk from coming is one :class:`InferenceError`, which ``pool_ready`` retries within the step's
bound. Any other exception is a bug and is not turned into a retry.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from urllib.error import HTTPError, URLError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError, api_path
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._pool_ready import stream_chunk
from ansible_collections.gpupool.vcf.plugins.module_utils.transport._http import FAILURES, opener, send


class PoolReadyApi(object):
    """Nodes, the validator pods and the probe pod. `params`: the auth options (or `k8s`, a K8sClient)."""

    def __init__(self, params=None, k8s=None):
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self._uids = {}  # (namespace, name) -> uid of the pods this object created

    def list_nodes(self):
        return self.k8s.items(api_path("v1", "nodes"))

    def list_pods(self, label_selector, namespace=None):
        return self.k8s.items(api_path("v1", "pods", namespace or None), label_selector=label_selector)

    def create_pod(self, manifest):
        """Create the pod (not repeated unless nothing reached the server); its uid is kept for the delete."""
        ns = manifest["metadata"]["namespace"]
        made = self.k8s.request("POST", api_path("v1", "pods", ns), body=manifest, once=True)
        uid = ((made or {}).get("metadata") or {}).get("uid")
        if uid:
            self._uids[(ns, manifest["metadata"]["name"])] = uid
        return made

    def read_pod(self, namespace, name):
        """The pod as a dict, None when it is gone."""
        try:
            return self.k8s.request("GET", api_path("v1", "pods", namespace, name))
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_pod(self, namespace, name, uid=None):
        """Delete the pod at once, with its uid as precondition; True when it was there.

        `uid`: the pod's uid; default the one its create answered, else the pod read now (a create whose
        answer was lost). The precondition makes a repeated delete - its first answer lost, the pod gone -
        refuse (409) a new pod made under the same name instead of deleting it; False then, as when the pod
        is gone (404).
        """
        uid = uid or self._uids.get((namespace, name))
        if uid is None:
            found = self.read_pod(namespace, name)
            if found is None:
                return False
            uid = (found.get("metadata") or {}).get("uid")
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        try:
            self.k8s.request("DELETE", api_path("v1", "pods", namespace, name), body=body)
        except K8sError as exc:
            if exc.status in (404, 409):  # gone, or a new pod under that name (the uid precondition)
                return False
            raise
        self._uids.pop((namespace, name), None)
        return True


class InferenceError(ClientError):
    """No streamed chunk came: the endpoint refused or did not answer, answered an HTTP error (503
    while the model loads), redirected, or its stream ended or broke off before a chunk."""


class InferenceProbe(object):
    """One OpenAI-compatible completions endpoint (``url``: ``.../v1/completions`` or
    ``.../v1/chat/completions``), with a bearer ``token`` when given; ``timeout`` bounds the connect
    and each read of the stream. ``clock`` times the first chunk."""

    def __init__(self, url, token=None, validate_certs=True, ca_path=None, timeout=30, clock=time.monotonic):
        self.url = url
        self.timeout = timeout
        self.clock = clock
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if token:
            self.headers["Authorization"] = "Bearer %s" % token
        # a redirect is an answer, not followed: the bearer token stays with the URL it was given for
        self.opener = opener(validate_certs, ca_path, follow_redirects=False)
        self.requests = 0

    def _open(self, body):
        self.requests += 1
        try:
            return send(self.opener, self.url, body, self.headers, "POST", self.timeout)
        except HTTPError as exc:
            raise InferenceError("%s: answered %s %s" % (self.url, exc.code, exc.reason))
        except URLError as exc:
            raise InferenceError("%s: %s" % (self.url, exc.reason))
        except FAILURES as exc:  # the boundary: http.client, ssl and socket errors; anything else is a bug
            raise InferenceError("%s: %s" % (self.url, exc or type(exc).__name__))

    def first_chunk(self, body):
        """Seconds from sending ``body`` (one streaming request, ``pure._pool_ready.completion_request``)
        to the first streamed chunk of the answer; InferenceError when none comes."""
        sent = self.clock()
        resp = self._open(body)
        try:
            while True:
                line = resp.readline()
                if not line:
                    raise InferenceError("%s: the stream ended without a chunk" % self.url)
                if stream_chunk(line):
                    return self.clock() - sent
        except FAILURES as exc:  # the stream broke off (a timeout, a reset, an incomplete chunk); anything else is a bug
            raise InferenceError("%s: the stream broke off: %s" % (self.url, exc or type(exc).__name__))
        finally:
            resp.close()
