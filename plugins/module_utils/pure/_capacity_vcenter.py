# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""vCenter's own vGPU capacity figures beside the collection's (pure, standard library only).

On vSphere API 9.0 and later ``DirectPathProfileManagerQueryCapacity`` answers, per vGPU profile and
cluster, ``max`` (the capacity with no VM running), ``consumed`` (units of powered-on VMs), ``remaining``
(neither assigned nor reserved) and ``unusedReservation``. The collection's slots of
``_capacity_live.slots`` map onto them: ``total`` - ``max``, ``used`` - ``consumed``, ``free`` -
``remaining``. Every field where the two differ is a finding (profile, cluster, field, ours, vCenter's);
vCenter's figure never replaces the collection's.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _api_capabilities as caps

SINCE = caps.SINCE["vcenter_capacity"]
# (the collection's field, vCenter's field)
FIELDS = (("total", "max"), ("used", "consumed"), ("free", "remaining"))


def available(api_version):
    """Whether a vCenter of ``api_version`` (About.apiVersion, '9.0.0.0') serves QueryCapacity (the
    capability table's ``vcenter_capacity``)."""
    return caps.supports(api_version, "vcenter_capacity")


def not_available_message(api_version):
    return ("vCenter's vGPU capacity figures (DirectPathProfileManagerQueryCapacity) are not available on vSphere API %s: "
            "they come with API 9.0" % (api_version or "(unknown)"))


def compare(ours, theirs):
    """Findings where vCenter's figures differ from ours.

    ``ours``: {cluster: {"profiles": {profile: {total, used, free, ...}}}} (``_capacity_live.slots``);
    ``theirs``: {cluster: {profile: {max, consumed, remaining, unused_reservation}, or {unknown: reason}}}.
    A profile vCenter does not know, or one only one side reports, is a finding too."""
    findings = []
    for cluster in sorted(set(ours) | set(theirs)):
        mine = (ours.get(cluster) or {}).get("profiles") or {}
        vc = theirs.get(cluster) or {}
        for profile in sorted(set(mine) | set(vc)):
            row, other = mine.get(profile), vc.get(profile)
            if row is None or other is None:
                continue  # not asked on one side: nothing to compare
            if other.get("unknown"):
                if not row.get("total") and not row.get("used"):
                    continue  # neither side has a slot of the profile: they agree
                findings.append(OrderedDict([
                    ("cluster", cluster), ("profile", profile), ("field", "unknown"), ("ours", row.get("total")),
                    ("vcenter", None),
                    ("message", "%s %s: vCenter has no capacity for the profile (%s); ours: %s slots"
                     % (cluster, profile, other["unknown"], row.get("total")))]))
                continue
            for field, theirs_field in FIELDS:
                if row.get(field) != other.get(theirs_field):
                    findings.append(OrderedDict([
                        ("cluster", cluster), ("profile", profile), ("field", "%s/%s" % (field, theirs_field)),
                        ("ours", row.get(field)), ("vcenter", other.get(theirs_field)),
                        ("message", "%s %s: our %s is %s, vCenter's %s is %s"
                         % (cluster, profile, field, row.get(field), theirs_field, other.get(theirs_field)))]))
    return findings


OURS = ("total", "used", "free")


def asked(clusters):
    """{cluster: [profile]} to ask vCenter about: every profile of ``_capacity_live.slots`` per cluster (those in
    use, the design's pools' and the ones the module was given)."""
    return OrderedDict((name, list(entry.get("profiles") or {})) for name, entry in clusters.items())


def beside(ours, theirs):
    """Per cluster (or host) and profile, ours beside vCenter's: {name: {profile: {ours: {total, used, free},
    vcenter: {max, consumed, remaining, unused_reservation} or None, unknown: vCenter's reason or None}}}."""
    out = OrderedDict()
    for name in ours:
        mine = (ours.get(name) or {}).get("profiles") or {}
        vc = theirs.get(name)
        if vc is None:
            continue
        rows = OrderedDict()
        for profile in mine:
            other = vc.get(profile)
            unknown = (other or {}).get("unknown")
            rows[profile] = OrderedDict([
                ("ours", OrderedDict((k, mine[profile].get(k)) for k in OURS)),
                ("vcenter", None if other is None or unknown else OrderedDict(
                    (k, other.get(k)) for k in ("max", "consumed", "remaining", "unused_reservation"))),
                ("unknown", unknown)])
        out[name] = rows
    return out


def host_findings(ours, theirs, cluster_of):
    """:func:`compare` per host: ``ours`` {host: {"profiles": ...}} (the slots of that host alone), ``theirs``
    {host: {profile: figures}}; each finding names the host and its cluster (``cluster_of``)."""
    out = []
    for f in compare(ours, theirs):
        host = f["cluster"]
        row = OrderedDict([("cluster", cluster_of.get(host)), ("host", host)])
        row.update((k, v) for k, v in f.items() if k != "cluster")
        row["message"] = "host " + f["message"]
        out.append(row)
    return out


def _cell(value):
    return "-" if value is None else str(value)


def markdown(vcenter, findings):
    """The report's section on vCenter's own figures (Markdown)."""
    lines = ["## vCenter's own figures", ""]
    if not vcenter.get("read"):
        lines += ["Not read: %s." % vcenter.get("reason"), ""]
        return "\n".join(lines) + "\n"
    lines += ["DirectPathProfileManagerQueryCapacity on vCenter API %s (%d call(s)); each differing figure is a "
              "finding, ours are kept." % (vcenter.get("api_version"), vcenter.get("calls") or 0), ""]
    tables = list((vcenter.get("clusters") or {}).items())
    tables += [("host %s" % h, rows) for h, rows in (vcenter.get("hosts") or {}).items()]
    for title, rows in tables:
        lines += ["### %s" % title, "",
                  "| profile | total / max | used / consumed | free / remaining | unused reservation |",
                  "|---|---:|---:|---:|---:|"]
        for profile, row in rows.items():
            ours, vc = row["ours"], row["vcenter"]
            if vc is None:
                lines.append("| %s | %s / - | %s / - | %s / - | - (vCenter: %s) |" % (
                    profile, _cell(ours["total"]), _cell(ours["used"]), _cell(ours["free"]), str(row["unknown"]).replace("|", "/")))
                continue
            lines.append("| %s | %s / %s | %s / %s | %s / %s | %s |" % (
                profile, _cell(ours["total"]), _cell(vc["max"]), _cell(ours["used"]), _cell(vc["consumed"]),
                _cell(ours["free"]), _cell(vc["remaining"]), _cell(vc["unused_reservation"])))
        lines.append("")
    if findings:
        lines += ["Disagreements:", ""] + ["- %s" % f["message"] for f in findings] + [""]
    else:
        lines += ["vCenter's figures agree with ours.", ""]
    return "\n".join(lines) + "\n"


__all__ = ["FIELDS", "SINCE", "asked", "available", "beside", "compare", "host_findings", "markdown",
           "not_available_message"]
