# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vCenter's own vGPU capacity figures (client layer: knows nothing of Ansible).

vSphere API 9.0 added ``ServiceContent.directPathProfileManager`` and its
``DirectPathProfileManagerQueryCapacity(target, querySpec[])`` (pyVmomi:
``vim.DirectPathProfileManager.QueryDirectPathProfileCapacity``). Each query spec here is a
``CapacityQueryByDeviceConfig`` with a ``VmiopDirectPathConfig{vgpuProfile}``; the answer holds one
result per spec, in order: ``CapacityInfo{profile, consumed, remaining, max, unusedReservation}`` or
``CapacityUnknown{querySpec, faultList}`` (kept as the reason, never as a number).

Requests for one read:

* none when the session's API version (About.apiVersion, read at login) is before 9.0, when the
  ServiceContent names no DirectPathProfileManager or when pyVmomi lacks the 9.0 types: the result
  says why;
* else one retrieval of the clusters (names and moids), then one QueryCapacity per cluster carrying
  every profile asked for that cluster, and with ``hosts`` one more QueryCapacity per host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import fault_message, vim

METHOD = "DirectPathProfileManagerQueryCapacity"


def _types():
    """pyVmomi's DirectPathProfileManager types, or None (a pyVmomi older than 9.0)."""
    return getattr(vim, "DirectPathProfileManager", None) if vim is not None else None


def unknown_reason(result):
    """The reason of a CapacityUnknown answer: its faults' messages (pyVmomi gives a LocalizedMethodFault of
    the list as the fault itself, its message in ``msg``)."""
    words = []
    for item in getattr(result, "faultList", None) or []:
        inner = getattr(item, "fault", None)
        text = (getattr(item, "localizedMessage", None) or getattr(item, "msg", None)
                or fault_message(inner if inner is not None else item))
        if text and text not in words:
            words.append(str(text).strip())
    return "; ".join(words) or "vCenter answered CapacityUnknown without a reason"


def figures(result, types):
    """One QueryCapacity result as a dict: {max, consumed, remaining, unused_reservation} or {unknown: reason}."""
    if isinstance(result, types.CapacityInfo):
        return OrderedDict([("max", result.max), ("consumed", result.consumed), ("remaining", result.remaining),
                            ("unused_reservation", result.unusedReservation)])
    return OrderedDict([("unknown", unknown_reason(result))])


class VcenterCapacity:
    """``client``: a ``VsphereClient`` (logged in)."""

    def __init__(self, client):
        self.client = client
        self.calls = 0

    def api_version(self):
        return self.client.content.about.apiVersion

    def why_not(self):
        """Why QueryCapacity is not called on this vCenter, or None."""
        version = self.api_version()
        if not _capacity_vcenter.available(version):
            return _capacity_vcenter.not_available_message(version)
        if getattr(self.client.content, "directPathProfileManager", None) is None:
            return ("vCenter (API %s) names no DirectPathProfileManager in its ServiceContent: its vGPU capacity "
                    "figures cannot be read" % version)
        if _types() is None:
            return ("the pyVmomi in use lacks the vSphere API 9.0 types (DirectPathProfileManager): "
                    "install pyvmomi 9.0 or later to read vCenter's vGPU capacity figures")
        return None

    def query(self, target, profiles):
        """{profile: figures} of one target for ``profiles`` (one call)."""
        types = _types()
        specs = [types.CapacityQueryByDeviceConfig(deviceConfig=types.VmiopDirectPathConfig(vgpuProfile=p))
                 for p in profiles]
        self.calls += 1
        answer = self.client.content.directPathProfileManager.QueryDirectPathProfileCapacity(
            target=target, querySpec=specs) or []
        out = OrderedDict()
        for profile, result in zip(profiles, answer):
            out[profile] = figures(result, types)
        for profile in profiles[len(answer):]:
            out[profile] = OrderedDict([("unknown", "vCenter answered no result for the profile")])
        return out

    def read(self, profiles, hosts=None):
        """vCenter's figures: ``profiles`` {cluster name: [vGPU profile]}; ``hosts`` {host name: (host moid,
        [vGPU profile])} or None (no per-host call).

        Returns {api_version, read (bool), reason (None when read), calls, clusters {cluster: {profile:
        figures}}, hosts {host: {profile: figures}} or None}."""
        version = self.api_version()
        out = OrderedDict([("api_version", version), ("read", False), ("reason", self.why_not()), ("calls", 0),
                           ("clusters", OrderedDict()), ("hosts", None)])
        if out["reason"] is not None:
            return out
        types = _types()
        wanted = OrderedDict((c, sorted(set(p))) for c, p in sorted(profiles.items()) if p)
        if wanted:
            clusters = self.client.clusters_by_name()
            for name, asked in wanted.items():
                if name not in clusters:
                    continue
                target = types.TargetCluster(cluster=clusters[name].obj)
                out["clusters"][name] = self.query(target, asked)
        if hosts is not None:
            out["hosts"] = OrderedDict()
            for name, (moid, asked) in sorted(hosts.items()):
                if not asked:
                    continue
                ref = vim.HostSystem(moid, self.client.si._stub)  # pylint: disable=protected-access
                out["hosts"][name] = self.query(types.TargetHost(host=ref), sorted(set(asked)))
        out["read"] = True
        out["calls"] = self.calls
        return out


__all__ = ["METHOD", "VcenterCapacity", "figures", "unknown_reason"]
