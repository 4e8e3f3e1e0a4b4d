# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift audit of a GPU pool: what every link's judge shares (pure).

The module ``gpu_pool_audit`` reads each link once and hands plain data to one judge per link,
each in its own file beside this one with its rule table: ``_audit_esxi``, ``_audit_vsphere``,
``_audit_vks``, ``_audit_guest`` and ``_audit_licensing``. ``_audit_report`` assembles their
tables into the one catalogue ``RULES``, orders the findings and renders the report. Nothing
here does I/O, so every rule is unit-tested with hand-made states.

A finding is a dict: ``rule``, ``severity`` (error | warning | info), ``link``, ``object``,
``message``, ``fix``. A rule table maps each rule to ``(severity, link, one line)`` or
``(severity, link, one line, fix)``: the fix a finding of the rule gets when its call gives none (a
call gives its own where the fix names the object or depends on what was found).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

LINKS = ("esxi", "vsphere", "licensing", "vks", "guest")
SEVERITIES = ("error", "warning", "info")
POOL_LABEL = "gpupool.vcf/pool"

# the rules of no one link
RULES = OrderedDict([
    ("link_not_audited", ("info", None, "A link that was not audited says so.",
                          "give the link's connection options")),
])


def finding(rule, obj, message, fix, entry, severity=None, link=None):
    """A finding of ``rule``, whose row of its link's rule table is ``entry`` (severity, link, line[, fix]);
    ``fix`` None takes the row's fix."""
    sev, rule_link = entry[0], entry[1]
    if fix is None:
        fix = table_fix(entry)
    return OrderedDict([("rule", rule), ("severity", severity or sev), ("link", link or rule_link),
                        ("object", obj), ("message", message), ("fix", fix)])


def table_fix(entry):
    """The fix of a rule table's row, None for a row without one."""
    return entry[3] if len(entry) > 3 else None


def not_audited(link, reason, fix):
    return finding("link_not_audited", link, "link %s not audited: %s" % (link, reason), fix,
                   RULES["link_not_audited"], link=link)


def role_inputs(derived, role):
    """The variables derive() gives a role (``derived["roles"][role]``): what site.yml passes it."""
    return (derived.get("roles") or {}).get(role) or {}


def is_gpu_node(node, pools=()):
    """A node of a GPU pool of the design, or one with an NVIDIA GPU (label or capacity)."""
    labels = node.get("labels") or {}
    if labels.get(POOL_LABEL) in pools or labels.get("nvidia.com/gpu.present") == "true":
        return True
    return any(k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-") for k in (node.get("capacity") or {}))


def taint_text(t):
    """A taint as ``key=value:effect``."""
    return "%s=%s:%s" % (t["key"], t.get("value") or "", t["effect"])


def design_pools(derived):
    """The design's GPU node pools by their pool label (the pool's name where it has none)."""
    out = OrderedDict()
    for cluster in ((derived.get("vks") or {}).get("clusters") or {}).values():
        for pool in cluster.get("node_pools") or []:
            out[pool["labels"].get(POOL_LABEL, pool["name"])] = pool
    return out


def summarize(findings):
    """Counts per severity and per link (each link: counts per severity)."""
    by_severity = OrderedDict((s, 0) for s in SEVERITIES)
    by_link = OrderedDict((l, OrderedDict((s, 0) for s in SEVERITIES)) for l in LINKS)
    for f in findings:
        by_severity[f["severity"]] += 1
        by_link.setdefault(f["link"], OrderedDict((s, 0) for s in SEVERITIES))[f["severity"]] += 1
    return OrderedDict([("total", len(findings)), ("severity", by_severity), ("link", by_link)])


def is_clean(findings):
    """No error and no warning (info findings, such as a link not audited, do not count)."""
    return not any(f["severity"] in ("error", "warning") for f in findings)


def should_fail(findings, fail_on):
    if fail_on == "error":
        return any(f["severity"] == "error" for f in findings)
    if fail_on == "warning":
        return any(f["severity"] in ("error", "warning") for f in findings)
    return False
