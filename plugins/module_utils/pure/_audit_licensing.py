# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The licensing link of the drift audit: the DLS appliance, the client token and the GPU nodes' licenses, judged against the derived design (pure).

Live state, as the module reads it: ``dls``: the appliance's state as the module reads it; ``token``: the client configuration token's
metadata; ``license_series`` / ``metric``: the GPU nodes' license status from Prometheus.

:data:`RULES` is this link's rule table (severity, link, one line, fix); ``_audit_report`` assembles
every link's table into one. Every finding takes its rule's fix from there (the license metric in the format field of
the fix that names it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._pool_ready import LICENSE_METRIC, LICENSED, license_by_node
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _guest_license


_SITE = ("run site.yml (its licensing link composes a new token with dls_client_token and rotates the licensing "
         "Secret)")
RULES = OrderedDict([
    ("dls_unreachable", ("error", "licensing", "The DLS appliance answers (login, service instance, license "
                                               "server, leases).",
                         "check that the appliance VM runs and its service is up, the network path from the auditing "
                         "host and the credentials (gpupool_dls_*)")),
    ("dls_license_server_missing", ("error", "licensing", "The appliance's service instance has a license server "
                                                          "installed in the user's scope.",
                                    "install the license server file from the NVIDIA Licensing Portal on the "
                                    "appliance (a manual step in the appliance's web interface: the portal has no "
                                    "public API), then run site.yml")),
    ("leases_short", ("error", "licensing", "The appliance holds at least one lease per GPU node.",
                      "check the nodes' license status (nvidia-smi -q in the driver pod), that they reach the "
                      "appliance on its leasing port, and the licenses left on the license server")),
    ("client_token_missing", ("error", "licensing", "The client configuration token dls_client_token keeps "
                                                    "exists with its metadata.", _SITE)),
    ("client_token_expired", ("error", "licensing", "The client configuration token has not expired.", _SITE)),
    ("client_token_expiring", ("warning", "licensing", "The client configuration token is valid beyond the "
                                                       "renewal margin (renew_before_days).", _SITE)),
    ("client_token_other_appliance", ("warning", "licensing", "The client configuration token was made for this "
                                                              "appliance (host and port).", _SITE)),
    ("cls_token_missing", ("error", "licensing", "The client configuration token file of the cloud license service "
                                                 "(cls_token_file) is a non-empty file.",
                           "download a client configuration token for the CLS instance from the NVIDIA Licensing "
                           "Portal to that path (mode 0600), then run site.yml")),
    ("cls_token_open", ("warning", "licensing", "The client configuration token file of the cloud license service is "
                                                "readable and writable by its owner only.",
                        "chmod 600 the token file: it is the credential every guest driver licenses with")),
    ("gpu_node_unlicensed", ("error", "licensing", "Every vGPU of every GPU node is licensed (the DCGM exporter's "
                                                   "vGPU license status is 1).",
                             "check the licensing Secret in the ClusterPolicy, the node's reach to the DLS appliance, "
                             "and nvidia-smi -q in the node's driver pod")),
    ("gpu_node_license_unknown", ("warning", "licensing", "Every GPU node has license status series in "
                                                          "Prometheus.",
                                  "check the DCGM exporter pod on the node (GPU Operator dcgmExporter) and that "
                                  "Prometheus scrapes it")),
    ("gpu_node_unlicensed_guest", ("error", "licensing", "Every vGPU of every GPU node is licensed, as nvidia-smi -q "
                                                         "in the node's GPU Operator driver pod says.",
                                   "check the licensing Secret the ClusterPolicy names (its gridd.conf and client "
                                   "configuration token), the node's reach to the license service, and the driver "
                                   "pod's log (nvidia-gridd)")),
    ("gpu_node_license_unknown_guest", ("warning", "licensing", "Every GPU node runs a GPU Operator driver pod whose "
                                                                "nvidia-smi -q answers with its vGPUs.",
                                        "check the driver DaemonSet's pod on the node (GPU Operator driver), that it "
                                        "is Running, and that the auditing credentials may create pods/exec in the "
                                        "operator's namespace")),
    ("license_sources_disagree", ("warning", "licensing", "The driver pod's nvidia-smi -q and the DCGM exporter's "
                                                          "vGPU license status say the same of each GPU node.",
                                  "trust nvidia-smi -q (the guest driver's own answer); check the DCGM exporter's "
                                  "version and that its series carry the node in their Hostname label")),
    ("license_check_not_made", ("info", "licensing", "Without Prometheus the GPU nodes' licenses are not "
                                                     "checked, and the finding says so.",
                                "give prometheus_url (the Prometheus that scrapes the GPU Operator's DCGM exporter, "
                                "which exports {metric} per vGPU)")),
])


def finding(rule, obj, message, fix=None, severity=None, **fields):
    """A finding of a rule of this link's table: ``fix`` None takes the table's, with ``fields`` in its format fields
    (the license metric)."""
    if fix is None:
        fix = RULES[rule][3].format(**fields)
    return _audit.finding(rule, obj, message, fix, RULES[rule], severity=severity)


def token_state(meta, digest, today, renew_before_days, dls_host=None, port=None):
    """What the kept client token means, the way dls_client_token decides to renew it: ``(state, detail)``.

    ``meta``: the parsed ``<token>.meta.json`` (None: missing or unreadable), ``digest``: the
    sha256 of the token file's stripped content (None: no token file), ``today``: a date.
    States: ``missing`` (no token file), ``unknown`` (no metadata, or metadata of another file),
    ``expired`` (expiry before today), ``expiring`` (days left at most ``renew_before_days``:
    dls_client_token composes a new one on its next run), ``other_appliance`` (made for another
    host or port), ``valid``. ``detail``: {expiry, days_left, dls_host, port} where known."""
    if digest is None:
        return "missing", {}
    if not isinstance(meta, dict) or meta.get("sha256") != digest or not meta.get("expiry"):
        return "unknown", {}
    try:
        expiry = datetime.date.fromisoformat(str(meta["expiry"]))
    except ValueError:
        return "unknown", {}
    detail = dict(expiry=expiry.isoformat(), days_left=(expiry - today).days, dls_host=meta.get("dls_host"),
                  port=meta.get("port"))
    if detail["days_left"] < 0:
        return "expired", detail
    if detail["days_left"] <= renew_before_days:
        return "expiring", detail
    if (dls_host is not None and meta.get("dls_host") != dls_host) or (port is not None and meta.get("port") != port):
        return "other_appliance", detail
    return "valid", detail


def cls_token_state(path, exists, is_file=True, size=0, mode=0o600):
    """What the CLS token file is: {path, state, mode}; ``state``: ``missing`` (no such path, not a regular file,
    or empty), ``open`` (group or others may read or write it), ``ok``."""
    if not exists or not is_file or size <= 0:
        state = "missing"
    elif mode & 0o077:
        state = "open"
    else:
        state = "ok"
    return dict(path=path, state=state, mode="%04o" % (mode & 0o7777), exists=bool(exists), is_file=bool(is_file),
                size=size)


def gpu_node_names(derived, nodes):
    """The guest's GPU nodes (the guest link's test: a node of a GPU pool, or one with an NVIDIA GPU)."""
    pools = _audit.design_pools(derived)
    return sorted(n["name"] for n in nodes or [] if _audit.is_gpu_node(n, pools))


def design_gpu_nodes(derived):
    """How many GPU nodes the design asks for (the node pools' replicas)."""
    return sum(int(p.get("replicas") or 0) for p in _audit.design_pools(derived).values())


def audit_licensing(derived, dls=None, token=None, license_series=None, gpu_nodes=None, metric=None,
                    renew_before_days=30, how_to_check=None, guest_licenses=None, cls_token=None):
    """Findings of the licensing link.

    ``dls``: {"where": "host:port", "error": text or None, "stage": where it failed, "license_server":
    id or None, "leases": [lease] or None}; None - not read. ``token``: {"path", "state", "detail"} (see
    :func:`token_state`); None - not read. ``license_series``: the Prometheus vector of the license
    metric; None - no Prometheus, ``how_to_check`` then says what would make the check.
    ``gpu_nodes``: the guest's GPU node names; None - unknown (the series' nodes are judged and the
    design's replicas are the count of GPU nodes). ``guest_licenses``: {node: reading} of
    ``_guest_license.reading`` (nvidia-smi -q in each GPU node's driver pod); given, it is the source of each node's
    findings and the DCGM series only a second source whose disagreement is named; None - not read.
    ``cls_token``: :func:`cls_token_state` of the cloud license service's token file (no appliance); None - no
    CLS."""
    out = []
    metric = metric or LICENSE_METRIC
    expected = len(gpu_nodes) if gpu_nodes is not None else design_gpu_nodes(derived)
    if dls is not None:
        obj = "dls %s" % dls["where"]
        if dls.get("error") and dls.get("stage") == "license_server":
            out.append(finding("dls_license_server_missing", obj, "the DLS appliance %s has no license server the "
                               "client token can name: %s" % (dls["where"], dls["error"])))
        elif dls.get("error"):
            out.append(finding("dls_unreachable", obj, "the DLS appliance %s does not answer (%s): %s; GPU nodes cannot "
                               "renew their leases and a node that restarts stays unlicensed" % (
                                   dls["where"], dls.get("stage") or "login", dls["error"])))
        elif dls.get("leases") is not None and len(dls["leases"]) < expected:
            out.append(finding("leases_short", obj, "the DLS appliance %s holds %d lease(s) for %d GPU node(s)%s: "
                               "at least %d node(s) hold no license" % (
                                   dls["where"], len(dls["leases"]), expected,
                                   "" if gpu_nodes is not None else " (the design's replicas; no guest cluster given)",
                                   expected - len(dls["leases"]))))
    if cls_token is not None:
        obj = "cls_token %s" % cls_token["path"]
        if cls_token["state"] == "missing":
            why = ("no such file" if not cls_token["exists"] else "not a regular file" if not cls_token["is_file"]
                   else "the file is empty")
            out.append(finding("cls_token_missing", obj, "the CLS client configuration token %s: %s; the licensing "
                               "Secret cannot be made from it" % (cls_token["path"], why)))
        elif cls_token["state"] == "open":
            out.append(finding("cls_token_open", obj, "the CLS client configuration token %s has mode %s: group or "
                               "others may read or change it" % (cls_token["path"], cls_token["mode"])))
    if token is not None:
        state, detail = token.get("state"), token.get("detail") or {}
        obj = "client_token %s" % token["path"]
        if state in ("missing", "unknown"):
            out.append(finding("client_token_missing", obj, "no client configuration token %s at %s" % (
                "with its metadata (%s.meta.json)" % token["path"] if state == "unknown" else "file", token["path"])))
        elif state == "expired":
            out.append(finding("client_token_expired", obj, "the client configuration token at %s expired on %s: "
                               "drivers that start now get no license" % (token["path"], detail["expiry"])))
        elif state == "expiring":
            out.append(finding("client_token_expiring", obj, "the client configuration token at %s expires on %s, "
                               "in %d day(s), within the renewal margin of %d days" % (
                                   token["path"], detail["expiry"], detail["days_left"], renew_before_days)))
        elif state == "other_appliance":
            out.append(finding("client_token_other_appliance", obj, "the client configuration token at %s was made "
                               "for DLS %s:%s, not the audited appliance" % (
                                   token["path"], detail.get("dls_host"), detail.get("port"))))
    if guest_licenses is not None:
        out.extend(_guest_findings(guest_licenses, gpu_nodes, license_series, metric))
        return out
    if license_series is None:
        out.append(finding("license_check_not_made", "gpu_nodes", "the GPU nodes' licenses were not checked: %s" % (
            how_to_check or "no Prometheus given"), metric=metric))
        return out
    values = license_by_node(license_series)
    names = list(gpu_nodes) if gpu_nodes is not None else sorted(n for n in values if n)
    for name in names:
        got = values.get(name)
        if not got:
            out.append(finding("gpu_node_license_unknown", "node %s" % name,
                               "GPU node %s has no %s series in Prometheus: its license status is unknown" % (
                                   name, metric)))
            continue
        bad = [v for v in got if v != LICENSED]
        if bad:
            out.append(finding("gpu_node_unlicensed", "node %s" % name,
                               "GPU node %s: %d of %d vGPU(s) not licensed (%s %s); unlicensed vGPUs run "
                               "degraded" % (name, len(bad), len(got), metric,
                                             ", ".join(sorted(set("%g" % v for v in bad))))))
    return out


def _guest_findings(guest_licenses, gpu_nodes, license_series, metric):
    """The GPU nodes' findings from the driver pods (nvidia-smi -q), the DCGM series the second source."""
    out = []
    values = license_by_node(license_series) if license_series is not None else {}
    names = list(gpu_nodes) if gpu_nodes is not None else sorted(guest_licenses)
    for name in names:
        got = guest_licenses.get(name) or _guest_license.reading(None)
        obj = "node %s" % name
        if got["state"] == "unknown":
            out.append(finding("gpu_node_license_unknown_guest", obj, "GPU node %s: its license state is unknown: %s" % (
                name, got["message"])))
        elif got["state"] == "unlicensed":
            out.append(finding("gpu_node_unlicensed_guest", obj, "GPU node %s: nvidia-smi -q in driver pod %s: %s; "
                               "unlicensed vGPUs run degraded" % (name, got["pod"], got["message"])))
        if license_series is not None:
            other = _guest_license.disagreement(got, values.get(name) or [])
            if other:
                out.append(finding("license_sources_disagree", obj, "GPU node %s: %s (%s)" % (name, other, metric)))
    return out
