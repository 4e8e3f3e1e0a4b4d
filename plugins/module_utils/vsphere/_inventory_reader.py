# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vCenter's inventory as gpu_pool_preflight judges it (client layer: knows nothing of Ansible).

One retrieval per kind over the whole inventory: the clusters with their hosts, the hosts' names, the
datastores' names. Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import vim


def read_inventory(client):
    """dict(clusters {name: the cluster's ObjectProps}, hosts {cluster name: [(host name, host ref)] sorted by
    name}, datastores [names]). A host whose name was not read is named by its moid."""
    clusters = dict((c["name"], c) for c in client.retrieve({vim.ClusterComputeResource: ["name", "host"]}))
    host_names = dict((h.moid, h["name"]) for h in client.retrieve({vim.HostSystem: ["name"]}))
    hosts = dict((name, sorted(((host_names.get(ref._moId, ref._moId), ref) for ref in c.get("host") or []),
                               key=lambda pair: pair[0]))
                 for name, c in clusters.items())
    datastores = [d["name"] for d in client.retrieve({vim.Datastore: ["name"]})]
    return dict(clusters=clusters, hosts=hosts, datastores=datastores)


__all__ = ["read_inventory"]
