# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a host's cluster takes the NVIDIA driver through its vLCM image only (client layer: knows nothing of Ansible).

On a vCenter with ``image_only_driver`` (``pure._api_capabilities``: API 9.0 and later) a direct driver
install on a host of an image-managed cluster is refused. Read here only on such a vCenter: the API
version from the session (About.apiVersion), the host's cluster (one retrieval of the clusters' names and
hosts) and the cluster's image enablement (GET /api/esx/settings/clusters/{cluster}/enablement/software,
``com.vmware.esx.settings.clusters.enablement_client.Software.get``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _api_capabilities as caps
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vlcm_api import VlcmApi


class ImageClusters:
    """``client``: a ``VsphereClient``; ``rest``: a callable giving the REST session (opened only when needed)."""

    def __init__(self, client, rest):
        self.client = client
        self.rest = rest

    def api_version(self):
        return self.client.content.about.apiVersion

    def cluster_of(self, host_moid):
        """The ObjectProps (name, host) of the cluster holding the host, or None (a standalone host)."""
        for cluster in self.client.clusters_by_name().values():
            if host_moid in [h._moId for h in cluster.get("host") or []]:
                return cluster
        return None

    def install_refusal(self, host, host_name, version):
        """Why a direct install of driver ``version`` on ``host`` (its ObjectProps) is refused, or None."""
        api_version = self.api_version()
        if not caps.supports(api_version, "image_only_driver"):
            return None
        cluster = self.cluster_of(host.moid)
        if cluster is None:
            return None
        managed = VlcmApi(self.rest(), cluster.moid).image_managed()
        return caps.direct_install_refusal(api_version, host_name, cluster["name"], managed, version)


__all__ = ["ImageClusters"]
