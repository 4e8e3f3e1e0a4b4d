# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vLCM desired image logic for vlcm_component (pure: no I/O, no Ansible imports).

* :func:`depot_versions` - the versions of a component that depot content offers.
* :func:`resolve_version` - the depot's full version for what the user asked (full or short).
* :func:`compliance_view` - per host name: status, current and desired component version,
  from ``GET /api/esx/settings/clusters/{c}/software/compliance``.
* :func:`predict_compliance` - the same after an image change, for check mode.
* :func:`image_driver` - for one host of the compliance answer, the NVIDIA host driver of the
  image when the host runs it (used by gpu_host_info instead of reading the host), else None.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from datetime import datetime, timedelta

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi

_TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$")


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


def component_version(comp, side):
    """The version on one ``side`` (``current`` or ``target``) of a ComponentCompliance, or None.

    The API gives each side as a ComponentInfo (``{"version": ..., "details": {...}}``), absent
    where the host or the image has no such component."""
    return (((comp or {}).get(side)) or {}).get("version")


def compliance_view(compliance, host_names, component):
    """{host name: {status, current_version, desired_version}} from a cluster compliance answer."""
    out = {}
    for moid, info in sorted(((compliance or {}).get("hosts") or {}).items()):
        comp = ((info or {}).get("components") or {}).get(component) or {}
        out[host_names.get(moid, moid)] = dict(
            status=info.get("status"),
            current_version=component_version(comp, "current"),
            desired_version=component_version(comp, "target"),
        )
    return out


def predict_compliance(view, desired, remediated=False, hosts=None):
    """The compliance view once the desired image holds ``desired``, and after remediation if asked
    (of the ``hosts`` named, when given: a remediation of some hosts leaves the others as they are)."""
    out = {}
    for host, entry in view.items():
        status = entry.get("status")
        current = entry.get("current_version")
        if status not in ("UNAVAILABLE", "INCOMPATIBLE"):
            if remediated and (hosts is None or host in hosts):
                current = desired
            status = "COMPLIANT" if current == desired else "NON_COMPLIANT"
        out[host] = dict(entry, status=status, current_version=current, desired_version=desired)
    return out


def is_driver_component(name):
    """Whether a component name is NVIDIA's host driver (``NVD-AIE-800``, ``NVD-VGPU-800``), not
    its GPU management daemon or another vendor's component."""
    upper = (name or "").upper()
    return upper.startswith("NVD") and "DAEMON" not in upper and "MGMT" not in upper


def parse_time(text):
    """A date-time of the vSphere Automation API (``2026-11-30T13:22:55.123Z``) as naive UTC, or None."""
    m = _TIME_RE.match((text or "").strip()) if isinstance(text, str) else None
    if not m:
        return None
    fraction = (m.group(7) or "0")[:6].ljust(6, "0")
    when = datetime(*[int(g) for g in m.groups()[:6]], microsecond=int(fraction))
    zone = m.group(8)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        when -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return when


def _naive_utc(when):
    if when is None or when.tzinfo is None:
        return when
    return (when - when.utcoffset()).replace(tzinfo=None)


def image_driver(compliance, moid, reboot_required=False, boot_time=None):
    """(component, version) of the NVIDIA host driver the image holds, when host ``moid`` runs it; else None.

    ``compliance`` is the cluster's answer (``GET .../software/compliance``); ``version`` is an
    ``_esxi.DriverVersion``. The image's version is the host's only when everything says so:

    * the host is ``COMPLIANT`` and its compliance has no impact (a host that needs maintenance
      mode or a reboot to comply is not running the image; the impact is the host's, a
      component's compliance has none);
    * the image has exactly one NVIDIA host driver component, ``COMPLIANT`` on the host, whose
      current version is its target version and reads as a driver version;
    * the host does not owe a reboot (``summary.rebootRequired``, read with the host: software
      staged but not running);
    * the compliance was computed after the host last booted (a host that booted since may run
      something else), when ``boot_time`` is known: without a scan time it is not trusted.

    None means: read the host itself.
    """
    if reboot_required:
        return None
    answer = compliance or {}
    host = (answer.get("hosts") or {}).get(moid) or {}
    if host.get("status") != "COMPLIANT" or host.get("impact") not in (None, "NO_IMPACT"):
        return None
    drivers = [(name, comp or {}) for name, comp in sorted((host.get("components") or {}).items())
               if is_driver_component(name)]
    if len(drivers) != 1:
        return None
    name, comp = drivers[0]
    target = component_version(comp, "target")
    if comp.get("status") != "COMPLIANT" or not target or component_version(comp, "current") != target:
        return None
    booted = _naive_utc(boot_time)
    if booted is not None:
        scanned = parse_time(host.get("scan_time") or answer.get("scan_time"))
        if scanned is None or scanned < booted:
            return None
    try:
        return name, _esxi.parse_driver_version(target)
    except _esxi.EsxiError:
        return None
