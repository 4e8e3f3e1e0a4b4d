# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""VM classes of the Supervisor in the vSphere API (client layer: knows nothing of Ansible).

The REST resource ``/api/vcenter/namespace-management/virtual-machine-classes`` through a
``VsphereRestClient``, and what vm_class reads over SOAP (the vGPU profiles a cluster's hosts
offer, the API version that decides the request form). Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound, vim

PATH = "/api/vcenter/namespace-management/virtual-machine-classes"


class VmClassApi:
    """Read, create, update and delete VM classes through one REST session."""

    def __init__(self, rest):
        self.rest = rest

    def list(self):
        """Every VM class as the API lists it (one GET)."""
        return self.rest.get(PATH) or []

    def get(self, name):
        """The class's Info as the API answers it, or None when there is no such class."""
        try:
            return self.rest.get("%s/%s" % (PATH, name))
        except VsphereNotFound:
            return None

    def create(self, body):
        self.rest.post(PATH, body)

    def update(self, name, body):
        self.rest.patch("%s/%s" % (PATH, name), body)

    def delete(self, name):
        self.rest.delete("%s/%s" % (PATH, name))


def offered_profiles(client, cluster):
    """vGPU profiles offered by any host of the cluster (host.config.sharedGpuCapabilities), lower case."""
    root = client.cluster_named(cluster, client.clusters_by_name()).obj
    hosts = client.retrieve({vim.HostSystem: ["config.sharedGpuCapabilities"]}, root=root)
    offered = set()
    for host in hosts:
        for cap in host.get("config.sharedGpuCapabilities") or []:
            offered.add(cap.vgpu.lower())
    return offered


def api_version(client):
    """The vCenter API version ('8.0.3.0'), which decides the form vGPU devices are written in."""
    return client.content.about.apiVersion


__all__ = ["PATH", "VmClassApi", "api_version", "offered_profiles"]
