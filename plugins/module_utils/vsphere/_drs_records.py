# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRS pinning records of every cluster, as the audit reads them (client layer: knows nothing of Ansible).

drs_gpu_pinning records the VMs whose DRS override it set in the cluster's custom attribute
``gpupool.vcf.drs-pinned`` (``_drs.RECORD_FIELD``); :func:`read_pinning_records` reads that value of
every cluster in one retrieval (plus the attribute definitions, once per session).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import RECORD_FIELD, parse_record
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import vim


def read_pinning_records(client):
    """{cluster name: set of VM moids its record holds}; every record is empty where the attribute was
    never defined (no run of drs_gpu_pinning recorded anything)."""
    clusters = client.retrieve({vim.ClusterComputeResource: ["name", "customValue"]})
    key = client.custom_field_key(RECORD_FIELD, vim.ClusterComputeResource)
    return dict((c.get("name"), parse_record(client.custom_value(c.get("customValue"), key)) if key is not None else set())
                for c in clusters)


__all__ = ["read_pinning_records"]
