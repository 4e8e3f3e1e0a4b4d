# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's ownership judge for DRS pinning overrides (pure): ``object_not_owned`` on the esxi link.

A GPU VM whose DRS override is as the design wants it (the drs_gpu_pinning plan neither adds nor edits
it) but that the cluster's record (custom attribute ``gpupool.vcf.drs-pinned``, read by
``vsphere/_drs_records``) does not hold was pinned by hand: no purge of the collection touches it until
``adopt: true`` records it. As for VM classes and namespaces, judged only where the design adopts (the
findings name what site.yml will record).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_vsphere, _drs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _ownership


def _adopting(derived):
    role = _audit.role_inputs(derived, "drs_gpu_pinning")
    return dict((e["name"], bool(e.get("adopt", role.get("drs_gpu_pinning_adopt", False))))
                for e in role.get("drs_gpu_pinning_clusters") or [])


def drs_not_owned_findings(derived, hosts, drs=None, records=None):
    """``object_not_owned`` (info, esxi link) per GPU VM pinned as designed whose override the record of a
    cluster the design adopts does not hold. ``records``: {cluster: set of VM moids} (None: not read, nothing judged)."""
    if records is None:
        return []
    out = []
    adopting = _adopting(derived)
    for name, inputs in _audit_esxi.pinning_inputs(derived).items():
        state = (drs or {}).get(name)
        if state is None or name not in records or not adopting.get(name):
            continue
        gpu_hosts = [h for h in hosts or [] if h.get("cluster") == name and h.get("gpu_count")]
        try:
            plan = _audit_esxi.pinning_plan(gpu_hosts, state, inputs)
        except _drs.DrsPlanError:  # the esxi judge reports it
            continue
        changed = set(x["moid"] for x in plan.add + plan.edit)
        as_designed = [m for m in plan.pinned_moids if m not in changed]
        how = "run site.yml: the design sets adopt: true (clusters[].adopt), which records it as the collection's"
        for moid in _ownership.not_owned(as_designed, records[name]):
            vm = plan.names.get(moid, moid)
            out.append(_audit.finding(
                "object_not_owned", "vm %s" % vm,
                "the DRS override of GPU VM %s in cluster %s is as designed but not the collection's own (the "
                "cluster's %s record does not hold it): until it is adopted no purge touches it" % (
                    vm, name, _drs.RECORD_FIELD), how, _audit_vsphere.RULES["object_not_owned"], link="esxi"))
    return out


__all__ = ["drs_not_owned_findings"]
