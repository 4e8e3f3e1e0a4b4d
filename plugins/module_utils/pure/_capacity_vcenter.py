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

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vm_class import api_version_tuple

SINCE = (9, 0)
# (the collection's field, vCenter's field)
FIELDS = (("total", "max"), ("used", "consumed"), ("free", "remaining"))


def available(api_version):
    """Whether a vCenter of ``api_version`` (About.apiVersion, '9.0.0.0') serves QueryCapacity."""
    have = api_version_tuple(api_version) if api_version else ()
    return bool(have) and have >= SINCE


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


__all__ = ["FIELDS", "SINCE", "available", "compare", "not_available_message"]
