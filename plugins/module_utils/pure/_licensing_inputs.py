# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of the licensing modules (dls_client_token, nls_appliance_deploy, nls_appliance_info,
nvidia_license_info): pure, each ``<module>_errors(params)`` returns sentences naming the option, what
it holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the shared checks
and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    empty_errors,
    is_int,
    list_item_errors,
    range_errors,
)


def dls_client_token_errors(params):
    out = empty_errors(params, ("dls_host", "username", "password", "dest"))
    out += range_errors(params, "expiry_days", 1, what=" days")
    expiry = params.get("expiry_days")
    high = expiry - 1 if is_int(expiry) and expiry >= 1 else None
    out += range_errors(params, "renew_before_days", 0, high, " days (below expiry_days)")
    return out


def nls_appliance_deploy_errors(params):
    out = empty_errors(params, ("ovf", "cluster", "datastore", "network", "datacenter", "anti_affinity_rule"))
    nodes = params.get("nodes")
    if nodes is not None and not 1 <= len(nodes) <= 2:
        out.append("nodes must list 1 node or 2 (the HA pair), not %d" % len(nodes))
    names = []
    for index, node in enumerate(nodes or []):
        out += ["nodes[%d].%s" % (index, e) for e in empty_errors(node, ("name",))]
        if node.get("name") in names:
            out.append("nodes[%d].name %r is given twice; the nodes need two names" % (index, node.get("name")))
        names.append(node.get("name"))
        for key in sorted(node.get("ovf_properties") or {}):
            if not str(key).strip():
                out.append("nodes[%d].ovf_properties has an empty key" % index)
    return out


def nls_appliance_info_errors(params):
    out = empty_errors(params, ("dls_host", "username", "password", "token_path"))
    out += range_errors(params, "wait_seconds", 0, what=" seconds") + range_errors(params, "expect_nodes", 1, 2)
    out += range_errors(params, "renew_before_days", 0, what=" days") + list_item_errors(params, "gpu_nodes")
    return out


def nvidia_license_info_errors(params):
    return empty_errors(params, ("nvidia_smi", "chroot"))
