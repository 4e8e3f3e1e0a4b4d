# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift audit's catalogue of rules and its report (pure).

:data:`RULES` is the one table of every rule (severity, link, one line), assembled from the
per-link tables in link order, and :data:`FIXES` the fix of each rule whose table row gives one
(the fix its findings carry unless the finding names a more specific one); :func:`sort_findings`
orders findings by the rules and :func:`render` writes the report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_esxi, _audit_guest, _audit_licensing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vks, _audit_vsphere

RULES = OrderedDict()
FIXES = OrderedDict()
for _table in (_audit_esxi.RULES, _audit_vsphere.RULES, _audit_vks.RULES, _audit_guest.RULES, _audit_licensing.RULES,
               _audit.RULES):
    for _rule, _entry in _table.items():
        RULES[_rule] = tuple(_entry[:3])
        if _audit.table_fix(_entry) is not None:
            FIXES[_rule] = _audit.table_fix(_entry)
SEVERITIES = _audit.SEVERITIES


def sort_findings(findings):
    rule_order = dict((r, i) for i, r in enumerate(RULES))
    link_order = dict((l, i) for i, l in enumerate(_audit.LINKS))
    return sorted(findings, key=lambda f: (link_order.get(f["link"], 99), rule_order.get(f["rule"], 999),
                                           f["object"]))


def _md_cell(value):
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _html(value):
    text = "" if value is None else str(value)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


def render(design_name, findings, summary, audited, fmt):
    """The report text in ``json``, ``markdown`` or ``html``; no timestamps, so an unchanged
    state renders the same text."""
    if fmt == "json":
        return json.dumps(OrderedDict([("design", design_name), ("audited", list(audited)),
                                       ("clean", _audit.is_clean(findings)), ("summary", summary),
                                       ("findings", findings)]), indent=2) + "\n"
    sev = summary["severity"]
    counts = ", ".join("%d %s" % (sev[s], s) for s in SEVERITIES)
    status = "clean" if _audit.is_clean(findings) else "drift found"
    if fmt == "markdown":
        lines = ["# GPU pool audit: %s" % _md_cell(design_name), "",
                 "Links audited: %s. Result: %s (%s)." % (", ".join(audited) or "none", status, counts), "",
                 "| link | errors | warnings | info |", "|---|---|---|---|"]
        for link, c in summary["link"].items():
            lines.append("| %s | %d | %d | %d |" % (link, c["error"], c["warning"], c["info"]))
        lines += ["", "## Findings", ""]
        if not findings:
            lines.append("No findings.")
        else:
            lines += ["| rule | severity | link | object | message | fix |", "|---|---|---|---|---|---|"]
            for f in findings:
                lines.append("| %s |" % " | ".join(_md_cell(f[k]) for k in
                                                   ("rule", "severity", "link", "object", "message", "fix")))
        return "\n".join(lines) + "\n"
    if fmt == "html":
        rows = []
        for f in findings:
            rows.append("<tr class=\"%s\">%s</tr>" % (_html(f["severity"]), "".join(
                "<td>%s</td>" % _html(f[k]) for k in ("rule", "severity", "link", "object", "message", "fix"))))
        link_rows = "".join("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td></tr>" % (
            _html(link), c["error"], c["warning"], c["info"]) for link, c in summary["link"].items())
        return "\n".join([
            "<!DOCTYPE html>",
            "<html><head><meta charset=\"utf-8\"><title>GPU pool audit: %s</title>" % _html(design_name),
            "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}"
            "tr.error{background:#fdd}tr.warning{background:#ffd}</style></head><body>",
            "<h1>GPU pool audit: %s</h1>" % _html(design_name),
            "<p>Links audited: %s. Result: %s (%s).</p>" % (_html(", ".join(audited) or "none"), status, counts),
            "<table><tr><th>link</th><th>errors</th><th>warnings</th><th>info</th></tr>%s</table>" % link_rows,
            "<h2>Findings</h2>",
            ("<table><tr><th>rule</th><th>severity</th><th>link</th><th>object</th><th>message</th>"
             "<th>fix</th></tr>\n%s\n</table>" % "\n".join(rows)) if rows else "<p>No findings.</p>",
            "</body></html>", ""])
    raise ValueError("unknown report format %r" % (fmt,))
