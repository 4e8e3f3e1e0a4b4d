# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest cluster's nodes, read while a node pool rolls (client layer: knows nothing of Ansible).

One list of the nodes per poll through the fault boundary of ``_k8s.K8sClient``. Errors are ``K8sError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, api_path


class GuestNodes:
    """The nodes of one guest cluster (the client is made from the auth options, or given)."""

    def __init__(self, params=None, k8s=None):
        self.k8s = k8s if k8s is not None else K8sClient(params)

    def list(self, label_selector=None):
        return self.k8s.items(api_path("v1", "nodes"), label_selector=label_selector or None)


__all__ = ["GuestNodes"]
