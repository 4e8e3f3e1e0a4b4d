# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one run of the drift audit covers, and its verdict (pure: no I/O, no Ansible).

``gpu_pool_audit`` is a read-only resource on the runner: it reads every link it covers, then
:func:`judge` hands each link's live state to that link's judge (``_audit_<link>.audit_<link>``).
This file decides which links a run covers (:func:`links_to_audit`), narrows the design to one
vCenter (:func:`vcenter_scope`), merges the results of the per-vCenter runs
(:func:`merged_vcenter_results`) and says when the findings fail the run (:func:`fail_on_message`).
Refused input raises ``_plan.Failure`` with the whole message; nothing has been read then.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_guest, _audit_licensing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_ownership, _audit_report, _audit_vks
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import for_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import url_errors

VSPHERE_LINKS = ("esxi", "vsphere")
# what gives each link its connection, for the link_not_audited finding and the refusal
HOW = dict(esxi="give the vSphere connection (hostname, username, password or VMWARE_HOST...)",
           vsphere="give the vSphere connection (hostname, username, password or VMWARE_HOST...)",
           licensing="give dls_host, dls_username and dls_password (site.yml's gpupool_dls_* variables), or "
                     "cls_token_file for the cloud license service (gpupool_cls_token_file)",
           vks="give supervisor_kubeconfig (the Supervisor's kubeconfig)",
           guest="give kubeconfig (the guest cluster's kubeconfig, or K8S_AUTH_KUBECONFIG)")


def audit_esxi(derived, hosts, drs=None, records=None, ha=None):
    """The esxi link's findings: the hosts and DRS pinning, and the pinning overrides not the collection's own
    (``records``: each cluster's pinning record, None when not read), and the HA settings (``ha``, None when not read)."""
    return (_audit_esxi.audit_esxi(derived, hosts, drs)
            + _audit_ownership.drs_not_owned_findings(derived, hosts, drs, records)
            + _audit_esxi.ha_findings(derived, hosts, ha))


# each link's judge: findings from the derived design and the link's live state (the reader's keywords)
JUDGES = dict(esxi=audit_esxi, vsphere=_audit_vsphere.audit_vsphere, licensing=_audit_licensing.audit_licensing,
              vks=_audit_vks.audit_vks, guest=_audit_guest.audit_guest)


def _invalid(text):
    return Failure("Invalid input for gpu_pool_audit: %s. Nothing was read." % text)


def licensing_input_errors(p):
    """Bad licensing options, before anything is read."""
    out = []
    if not 1 <= p["dls_port"] <= 65535:
        out.append("dls_port must be from 1 to 65535, not %s" % p["dls_port"])
    if p["renew_before_days"] < 0:
        out.append("renew_before_days must be 0 or more, not %s" % p["renew_before_days"])
    out += url_errors(p, ("prometheus_url",))
    if p["dls_host"] and not (p["dls_username"] and p["dls_password"]):
        out.append("dls_host needs dls_username and dls_password")
    if p["dls_host"] and p.get("cls_token_file"):
        out.append("dls_host and cls_token_file are two license services; give one (a client licenses from a DLS "
                   "appliance or from the cloud license service, not both)")
    return out


def vcenter_scope(p, derived):
    """(derived, links asked) for the options ``p``: ``derived`` narrowed to the vCenter ``p["vcenter"]``
    names (the whole design without it) and, with it, the links defaulting to that vCenter's own (the
    ``vsphere`` link only where the Supervisor is). An unknown name, or links beyond that vCenter's,
    are refused before anything is read."""
    if p["vcenter"] is not None and p["vcenter_results"] is not None:
        raise Failure("Invalid input for gpu_pool_audit: vcenter and vcenter_results are mutually exclusive "
                      "(one task per vCenter, then one that merges them). Nothing was read.")
    if p["vcenter"] is None:
        return derived, p["links"]
    names = list(derived["vcenters"])
    if p["vcenter"] not in names:
        raise _invalid("vCenter %r is not in the design (its vCenters: %s)" % (p["vcenter"], ", ".join(names)))
    own = VSPHERE_LINKS if derived["vcenters"][p["vcenter"]]["supervisor"] else VSPHERE_LINKS[:1]
    beyond = [link for link in p["links"] or [] if link not in VSPHERE_LINKS]
    if beyond:
        raise _invalid("with vcenter, links may name only esxi and vsphere, not %s (audit them in the task that "
                       "merges vcenter_results)" % ", ".join(beyond))
    return for_vcenter(derived, p["vcenter"]), list(own) if p["links"] is None else p["links"]


def in_vcenter(name, findings):
    """The findings of one vCenter, each naming it."""
    return [dict(f, object="vcenter %s: %s" % (name, f["object"]), vcenter=name) for f in findings]


def merged_vcenter_results(results):
    """(findings, audited links) of the registered results of the per-vCenter tasks (``vcenter_results``);
    a skipped one is left out, a failed one or one that is no such result is refused."""
    findings, audited = [], []
    for i, res in enumerate(results or []):
        if res.get("skipped"):
            continue
        if res.get("failed"):
            raise Failure("Unable to merge the audit of every vCenter: vcenter_results[%d] failed: %s; "
                          "nothing was written" % (i, res.get("msg") or "no message"))
        if not isinstance(res.get("findings"), list) or not res.get("vcenter"):
            raise _invalid("vcenter_results[%d] is not the result of a gpu_pool_audit task with vcenter (%s)"
                           % (i, res.get("msg") or "no findings and no vcenter"))
        findings += res["findings"]
        audited += [link for link in res.get("audited") or [] if link not in audited]
    return findings, audited


def connections(p):
    """{link: whether its connection is given} of the options ``p``."""
    return dict(esxi=bool(p["hostname"]), vsphere=bool(p["hostname"]),
                licensing=bool(p["dls_host"]) or bool(p.get("cls_token_file")),
                vks=bool(p["supervisor_kubeconfig"]), guest=bool(p["kubeconfig"]))


def links_to_audit(p, asked):
    """[(link, connected)] of the links ``asked`` (None: all) in link order; a link asked for without its
    connection is refused. With ``vcenter_results`` the vSphere links are left to the vCenters' tasks and
    ``[]`` asks for none."""
    connection = connections(p)
    lacking = [link for link in asked or [] if not connection[link]]
    if p["vcenter_results"] is not None:
        lacking = [link for link in lacking if link not in VSPHERE_LINKS]
        asked = [link for link in (_audit.LINKS if asked is None else asked) if link not in VSPHERE_LINKS]
    if lacking:
        raise Failure("Unable to audit link(s) %s: no connection; %s" % (
            ", ".join(lacking), "; ".join(HOW[link] for link in lacking)))
    if p["vcenter_results"] is not None:
        return [(link, connection[link]) for link in _audit.LINKS if link in asked]
    return [(link, connection[link]) for link in _audit.LINKS if (link in asked if asked else True)]


def judge(derived, live, links, vcenter=None, merged=((), ())):
    """(findings, audited links) of one run: each link of ``links`` ([(link, connected)]) judged from its
    live state ``live[link]`` (the reader's keywords for the link's judge), a link without its connection
    a ``link_not_audited`` finding. ``vcenter``: the vCenter of a run over one of several (its findings
    name it); ``merged``: the (findings, audited) of the vCenters' runs, merged in."""
    findings, audited = list(merged[0]), list(merged[1])
    own = []
    for link, connected in links:
        if not connected:
            own.append(_audit.not_audited(link, "no connection given", HOW[link]))
            continue
        own += JUDGES[link](derived, **live[link])
        if link not in audited:
            audited.append(link)
    if vcenter is not None and len(derived["vcenters"]) > 1:
        own = in_vcenter(vcenter, own)
    return _audit_report.sort_findings(findings + own), [link for link in _audit.LINKS if link in audited]


def fail_on_message(findings, fail_on):
    """The failure's message when a finding of ``fail_on``'s severity or worse was found, else None."""
    if not _audit.should_fail(findings, fail_on):
        return None
    counts = _audit.summarize(findings)["severity"]
    return "The audit found %d error(s) and %d warning(s) (fail_on=%s)" % (counts["error"], counts["warning"], fail_on)


__all__ = ["HOW", "JUDGES", "VSPHERE_LINKS", "audit_esxi", "connections", "fail_on_message", "in_vcenter", "judge",
           "licensing_input_errors", "links_to_audit", "merged_vcenter_results", "vcenter_scope"]
