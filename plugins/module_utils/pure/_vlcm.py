# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLCM desired image logic for vlcm_component (pure: no I/O, no Ansible imports).

* :func:`depot_versions` - the versions of a component that depot content offers.
* :func:`resolve_version` - the depot's full version for what the user asked (full or short).
* :func:`compliance_view` - per host name: status, current and desired component version,
  from ``GET /api/esx/settings/clusters/{c}/software/compliance``.
* :func:`predict_compliance` - the same after an image change, for check mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi


class VlcmError(ValueError):
    """Bad input or a depot/image state the module refuses to act on."""


def depot_versions(content, component):
    """Versions of ``component`` in one depot's content (``.../depots/offline/{d}/content``)."""
    out = []
    for bundles in ((content or {}).get("metadata_bundles") or {}).values():
        for bundle in bundles or []:
            for key in ("independent_components", "components"):
                comp = (bundle.get(key) or {}).get(component)
                for v in (comp or {}).get("versions") or []:
                    if v.get("version") and v["version"] not in out:
                        out.append(v["version"])
    return out


def resolve_version(asked, offered, component):
    """The offered version that is ``asked``: the same text, else the only one with its numbers."""
    want = _esxi.parse_driver_version(asked)
    if asked in offered:
        return asked
    same = []
    for v in offered:
        try:
            if _esxi.compare_versions(v, want) == 0:
                same.append(v)
        except _esxi.EsxiError:
            continue
    if len(same) == 1:
        return same[0]
    if len(same) > 1:
        raise VlcmError("component %s %s is ambiguous in the depots (%s): give the full version"
                        % (component, asked, ", ".join(sorted(same))))
    raise VlcmError("no imported depot offers component %s at version %s (offered: %s)"
                    % (component, asked, ", ".join(sorted(offered)) or "none"))


def compliance_view(compliance, host_names, component):
    """{host name: {status, current_version, desired_version}} from a cluster compliance answer."""
    out = {}
    for moid, info in sorted(((compliance or {}).get("hosts") or {}).items()):
        comp = ((info or {}).get("components") or {}).get(component) or {}
        out[host_names.get(moid, moid)] = dict(
            status=info.get("status"),
            current_version=comp.get("current_version"),
            desired_version=comp.get("target_version"),
        )
    return out


def predict_compliance(view, desired, remediated=False):
    """The compliance view once the desired image holds ``desired``, and after remediation if asked."""
    out = {}
    for host, entry in view.items():
        status = entry.get("status")
        current = entry.get("current_version")
        if status not in ("UNAVAILABLE", "INCOMPATIBLE"):
            if remediated:
                current = desired
            status = "COMPLIANT" if current == desired else "NON_COMPLIANT"
        out[host] = dict(entry, status=status, current_version=current, desired_version=desired)
    return out
