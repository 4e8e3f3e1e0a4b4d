# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which vSphere API a call goes through, by the vCenter's negotiated API version (pure: no I/O).

The one table the clients read to choose between the cluster-keyed APIs of vSphere 8 and the
per-Supervisor APIs of vSphere 9, instead of each module testing version numbers. Each row names
the calls of VMware's published bindings (vmware-vcenter 9.1.1.0) it is about:

- ``supervisor_summaries``: the Supervisors are listed with
  ``com.vmware.vcenter.namespace_management.supervisors_client.Summary.list``
  (GET /api/vcenter/namespace-management/supervisors/summaries) and their clusters read with
  ``supervisors_client.Topology.get`` (GET .../supervisors/{supervisor}/topology), the
  replacement the bindings name for ``namespace_management_client.Clusters.list``
  (GET /api/vcenter/namespace-management/clusters), deprecated as of API 9.1.0.0. Before 9.0 the
  collection keeps ``Clusters.list``, which every 8.x vCenter serves.
- ``image_only_driver``: on vSphere 9 a cluster managed by a vLCM image takes the NVIDIA host driver
  through its image only (vlcm_component); esxi_host_driver's direct install (InstallHostPatchV2) is
  refused there before any change, as it would leave the host out of compliance with the image.
- ``vcenter_capacity``: vCenter's own vGPU capacity per profile, cluster and host,
  ``DirectPathProfileManagerQueryCapacity`` (pyVmomi ``vim.DirectPathProfileManager``,
  ``QueryDirectPathProfileCapacity``), read by gpu_capacity beside its own slots; before 9.0 the
  ServiceContent names no DirectPathProfileManager and nothing is called.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vm_class import api_version_tuple

# (capability, first API version, what it means)
CAPABILITIES = (
    ("supervisor_summaries", (9, 0),
     "Supervisors through supervisors/summaries and supervisors/{supervisor}/topology (Summary.list, Topology.get); "
     "before it namespace-management/clusters (Clusters.list, deprecated as of API 9.1.0.0)"),
    ("image_only_driver", (9, 0),
     "a cluster managed by a vLCM image takes the NVIDIA driver through its image only (vlcm_component); "
     "esxi_host_driver refuses a direct install there"),
    ("vcenter_capacity", (9, 0),
     "gpu_capacity reads vCenter's own vGPU capacity (DirectPathProfileManagerQueryCapacity) beside its slots; "
     "before it none is read"),
)

SINCE = dict((name, since) for name, since, _what in CAPABILITIES)


def supports(api_version, capability):
    """Whether a vCenter of ``api_version`` (About.apiVersion, '9.1.0.0') has ``capability``; an unknown or
    unread version has none (the 8.x calls, which 9.x still serves, are used)."""
    if capability not in SINCE:
        raise KeyError("unknown vSphere API capability %r (known: %s)" % (capability, ", ".join(sorted(SINCE))))
    have = api_version_tuple(api_version) if api_version else ()
    return bool(have) and have[0] > 0 and have >= SINCE[capability]


def table(api_version):
    """{capability: {supported, since, what}} for ``api_version``, as preflight reports it."""
    return dict((name, dict(supported=supports(api_version, name), since=".".join(str(n) for n in since), what=what))
                for name, since, what in CAPABILITIES)


def supervisor_rows(items, topologies, cluster_names):
    """The rows ``Clusters.list`` gives on 8.x, made from 9.x's answers: ``items`` the
    ``Summary.ListResult.items`` ([{supervisor, info: {name, config_status, kubernetes_status, stats}}]),
    ``topologies`` {supervisor: ``Topology.get`` answer [{zone, clusters: [cluster ids]}]},
    ``cluster_names`` {cluster id: name}. One row per cluster of a Supervisor (a Supervisor over
    several zones gives several), each {cluster, cluster_name, config_status, kubernetes_status, stats,
    supervisor, supervisor_name}; a Supervisor whose topology names no cluster gives none."""
    rows = []
    for item in items:
        sid, info = item.get("supervisor"), item.get("info") or {}
        seen = []
        for zone in topologies.get(sid) or []:
            for cluster in zone.get("clusters") or []:
                if cluster in seen:
                    continue
                seen.append(cluster)
                rows.append(dict(cluster=cluster, cluster_name=cluster_names.get(cluster), supervisor=sid,
                                 supervisor_name=info.get("name"), config_status=info.get("config_status"),
                                 kubernetes_status=info.get("kubernetes_status"), stats=info.get("stats")))
    return rows


def direct_install_refusal(api_version, host, cluster, image_managed, version):
    """Why a direct install of the NVIDIA driver ``version`` on ``host`` is refused, or None: on a vCenter with
    ``image_only_driver`` where the host's ``cluster`` is managed by a vLCM image (``image_managed``)."""
    if not (image_managed and cluster and supports(api_version, "image_only_driver")):
        return None
    return ("host %s is in cluster %s, which is managed by a vLCM image on vCenter API %s: its NVIDIA driver is "
            "installed through the cluster's image only, and a direct install would leave the host out of compliance "
            "with it. Use gpupool.vcf.vlcm_component (cluster: %s, version: %s) instead, or the esxi_gpu_host role "
            "with the cluster's lifecycle vlcm. Nothing was changed." % (host, cluster, api_version, cluster, version))


__all__ = ["CAPABILITIES", "direct_install_refusal", "supervisor_rows", "supports", "table"]
