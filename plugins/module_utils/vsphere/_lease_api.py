# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run lease of GPU clusters in the vSphere API (client layer: knows nothing of Ansible).

What gpu_pool_lease reads and writes: one PropertyCollector retrieval of every cluster's name and
``customValue`` together with the custom attribute definitions (CustomFieldsManager ``field``), and
one ``SetField`` per cluster whose record changes (the attribute ``gpupool.vcf.run-lease`` is
defined for clusters on first use). Errors are ``VsphereError``; the record is parsed by
``pure._lease``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._lease import LEASE_FIELD
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereNotFound, vim, vmodl


class ClusterLeases:
    """Reads and writes the lease record of a set of clusters of one vCenter."""

    def __init__(self, client, clusters, field=LEASE_FIELD):
        self.client = client
        self.clusters = list(clusters)
        self.field = field
        self.refs = {}
        self.reads = 0
        self.writes = 0

    def read(self):
        """{cluster: record text ("" when none)} of the clusters, in one retrieval (the attribute
        definitions come with it, so a definition another run made meanwhile is found)."""
        content = self.client.content
        # one retrieval: the clusters through the host folders (no container view), the definitions beside them
        obj_specs = self.client.host_tree()
        specs = {vim.ClusterComputeResource: ["name", "customValue"]}
        if content.customFieldsManager is not None:
            obj_specs.append(vmodl.query.PropertyCollector.ObjectSpec(obj=content.customFieldsManager, skip=False))
            specs[vim.CustomFieldsManager] = ["field"]
        objects = self.client.collect(obj_spec_list=obj_specs, specs=specs)
        self.reads += 1
        values = {}
        for item in objects:
            if isinstance(item.obj, vim.CustomFieldsManager):
                self.client.know_custom_fields(item.get("field"))
            elif isinstance(item.obj, vim.ClusterComputeResource):
                self.refs[item.get("name")] = item.obj
                values[item.get("name")] = item.get("customValue") or []
        missing = sorted(c for c in self.clusters if c not in self.refs)
        if missing:
            raise VsphereNotFound("cluster %s not found; clusters: %s"
                                  % (", ".join(missing), ", ".join(sorted(self.refs)) or "none"))
        key = self.client.custom_field_key(self.field, vim.ClusterComputeResource)
        return dict((c, self.client.custom_value(values[c], key)) for c in self.clusters)

    def write(self, cluster, text):
        """Write the record of ``cluster`` ("" clears it): one SetField."""
        try:
            self.client.set_custom_field(self.refs[cluster], self.field, text)
        except VsphereError as exc:
            raise VsphereError("custom attribute %s of cluster %s: %s" % (self.field, cluster, exc))
        self.writes += 1


__all__ = ["ClusterLeases"]
