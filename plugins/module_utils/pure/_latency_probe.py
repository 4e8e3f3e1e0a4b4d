# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The latency probe's objects in the guest cluster (pure: no I/O).

The probe (playbooks/files/gpupool_latency_probe.py) sends one streaming completion to each pool's
inference endpoint every interval and serves the histograms the rules of ``_prom_rules`` read.
Which endpoint a pool has is not part of the design (the design describes the GPUs; the serving
stack that puts a model behind a URL is the tenants'), so the endpoints are given: a mapping of
pool name (a pool of the design) to ``{"url": ..., "model": ...}`` or to the URL alone.

``manifests()`` returns, each labelled as the collection's guest objects are
(``app.kubernetes.io/managed-by: gpupool.vcf``, ``gpupool.vcf/design``): a ConfigMap holding the
program, the first-chunk definition it shares with pool_ready (``_first_token.py``) and its
configuration; a Deployment of one replica running it; a Service in front of it; and, where the
Prometheus Operator is there, a ServiceMonitor, else the Service's ``prometheus.io/*``
annotations that a Prometheus with the usual annotation-based scrape config follows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import MANAGED_BY
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError

NAME = "gpupool-latency-probe"
APP_LABEL = "app.kubernetes.io/name"
DESIGN_LABEL = "gpupool.vcf/design"
CONFIG_ANNOTATION = "gpupool.vcf/config-sha256"  # on the pod template: a new configuration rolls the pod
PROGRAM = "gpupool_latency_probe.py"
FIRST_TOKEN = "_first_token.py"
CONFIG = "config.json"
PORT = 9108
DEFAULT_IMAGE = "python:3.12-slim"
SCRAPES = ("ServiceMonitor", "annotations")
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class LatencyProbeError(ClientError):
    """Endpoints or options the probe cannot be made from."""


def endpoints_of(design, endpoints):
    """{pool: {"url", "model"}} of ``endpoints`` (pool -> URL or {url, model}), each pool one of the design's,
    sorted by pool; LatencyProbeError names what is wrong."""
    d = _prom_rules._design(design)  # pylint: disable=protected-access
    pools = set(p["name"] for p in d["pools"])
    if not isinstance(endpoints, dict) or not endpoints:
        raise LatencyProbeError("the latency probe needs endpoints: a mapping of pool name to the URL of its "
                                "OpenAI-compatible completions endpoint (or to {url, model})")
    out = OrderedDict()
    for pool in sorted(endpoints):
        spec = endpoints[pool]
        if pool not in pools:
            raise LatencyProbeError("endpoints: no pool %s in design %s (pools: %s)" % (pool, d["name"], ", ".join(sorted(pools))))
        if isinstance(spec, str):
            spec = {"url": spec}
        if not isinstance(spec, dict):
            raise LatencyProbeError("endpoints.%s: give a URL or {url, model}, not %r" % (pool, type(spec).__name__))
        unknown = sorted(set(spec) - {"url", "model"})
        if unknown:
            raise LatencyProbeError("endpoints.%s: unknown key(s) %s; known: url, model" % (pool, ", ".join(unknown)))
        url = spec.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+(/\S*)?$", url):
            raise LatencyProbeError("endpoints.%s.url: %r is not an http(s) URL" % (pool, url))
        model = spec.get("model")
        if model is not None and (not isinstance(model, str) or not model):
            raise LatencyProbeError("endpoints.%s.model: %r is not a model name" % (pool, model))
        out[pool] = OrderedDict([("url", url), ("model", model)])
    return out


def _seconds(what, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise LatencyProbeError("%s: %r is not a number of seconds from %s to %s" % (what, value, low, high))
    return value


def probe_config(design, endpoints, interval_seconds=30, timeout_seconds=30):
    """The probe's configuration (config.json): the pools' endpoints, the interval and the timeout."""
    _seconds("interval_seconds", interval_seconds, 1, 3600)
    _seconds("timeout_seconds", timeout_seconds, 1, 600)
    return OrderedDict([("interval_seconds", interval_seconds), ("timeout_seconds", timeout_seconds),
                        ("pools", endpoints_of(design, endpoints))])


def _labels(design_name):
    labels = OrderedDict(MANAGED_BY)
    labels[DESIGN_LABEL] = design_name
    labels[APP_LABEL] = NAME
    return labels


def _object(api_version, kind, namespace, labels, **fields):
    out = OrderedDict([("apiVersion", api_version), ("kind", kind),
                       ("metadata", OrderedDict([("name", NAME), ("namespace", namespace), ("labels", OrderedDict(labels))]))])
    out.update(fields)
    return out


def manifests(design, endpoints, program, first_token, namespace="monitoring", image=DEFAULT_IMAGE,
              interval_seconds=30, timeout_seconds=30, scrape="annotations"):
    """The probe's objects: ConfigMap, Deployment, Service and (``scrape=ServiceMonitor``) a ServiceMonitor.
    ``program`` and ``first_token`` are the texts of the probe and of pure/_first_token.py."""
    if not isinstance(namespace, str) or not K8S_NAME.match(namespace):
        raise LatencyProbeError("namespace %r is not a Kubernetes namespace name" % (namespace,))
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise LatencyProbeError("image %r is not a container image reference" % (image,))
    if scrape not in SCRAPES:
        raise LatencyProbeError("scrape %r is neither %s" % (scrape, " nor ".join(SCRAPES)))
    for what, text in (("program", program), ("first_token", first_token)):
        if not isinstance(text, str) or not text.strip():
            raise LatencyProbeError("the probe's %s is empty" % what)
    config = probe_config(design, endpoints, interval_seconds, timeout_seconds)
    name = _prom_rules._design(design)["name"]  # pylint: disable=protected-access
    labels = _labels(name)
    config_text = json.dumps(config, indent=2) + "\n"
    data = OrderedDict([(PROGRAM, program if program.endswith("\n") else program + "\n"),
                        (FIRST_TOKEN, first_token if first_token.endswith("\n") else first_token + "\n"),
                        (CONFIG, config_text)])
    digest = hashlib.sha256("".join(data.values()).encode("utf-8")).hexdigest()
    selector = OrderedDict([(APP_LABEL, NAME), (DESIGN_LABEL, name)])
    container = OrderedDict([
        ("name", "probe"), ("image", image),
        ("command", ["python3", "/probe/%s" % PROGRAM, "--config", "/probe/%s" % CONFIG, "--port", str(PORT)]),
        ("env", [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}, {"name": "PYTHONUNBUFFERED", "value": "1"}]),
        ("ports", [{"name": "metrics", "containerPort": PORT, "protocol": "TCP"}]),
        ("readinessProbe", {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10}),
        ("livenessProbe", {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 30}),
        ("resources", {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}),
        ("securityContext", {"runAsNonRoot": True, "runAsUser": 65534, "allowPrivilegeEscalation": False,
                             "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}),
        ("volumeMounts", [{"name": "probe", "mountPath": "/probe", "readOnly": True}]),
    ])
    pod_labels = OrderedDict(labels)
    deployment = _object("apps/v1", "Deployment", namespace, labels, spec=OrderedDict([
        ("replicas", 1),
        ("selector", {"matchLabels": OrderedDict(selector)}),
        ("template", OrderedDict([
            ("metadata", OrderedDict([("labels", pod_labels), ("annotations", {CONFIG_ANNOTATION: digest})])),
            ("spec", OrderedDict([("automountServiceAccountToken", False), ("containers", [container]),
                                  ("volumes", [{"name": "probe", "configMap": {"name": NAME}}])])),
        ])),
    ]))
    service = _object("v1", "Service", namespace, labels, spec=OrderedDict([
        ("selector", OrderedDict(selector)),
        ("ports", [{"name": "metrics", "port": PORT, "targetPort": "metrics", "protocol": "TCP"}]),
    ]))
    out = [_object("v1", "ConfigMap", namespace, labels, data=data), deployment, service]
    if scrape == "ServiceMonitor":
        out.append(_object("monitoring.coreos.com/v1", "ServiceMonitor", namespace, labels, spec=OrderedDict([
            ("selector", {"matchLabels": OrderedDict(selector)}),
            ("namespaceSelector", {"matchNames": [namespace]}),
            ("endpoints", [{"port": "metrics", "path": "/metrics", "interval": "%ds" % min(int(interval_seconds), 60)}]),
        ])))
    else:
        service["metadata"]["annotations"] = OrderedDict([
            ("prometheus.io/scrape", "true"), ("prometheus.io/port", str(PORT)), ("prometheus.io/path", "/metrics")])
    return out


__all__ = ["DEFAULT_IMAGE", "LatencyProbeError", "NAME", "PORT", "SCRAPES", "endpoints_of", "manifests", "probe_config"]
