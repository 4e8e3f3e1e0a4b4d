# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of the design modules (gpu_pool_design, gpu_pool_audit, gpu_pool_discover,
gpu_pool_preflight): pure, each ``<module>_errors(params)`` returns sentences naming the option, what it
holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the shared checks and
the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    empty_errors,
    list_item_errors,
    range_errors,
    url_errors,
)


def gpu_pool_design_errors(params):
    return empty_errors(params, ("design_file",))


def gpu_pool_audit_errors(params):
    return empty_errors(params, ("design_file",))


def gpu_pool_discover_errors(params):
    return empty_errors(params, ("dest", "name", "supervisor_kubeconfig")) + list_item_errors(params, "clusters")


def gpu_pool_preflight_errors(params):
    out = empty_errors(params, ("design_file", "supervisor_kubeconfig", "dls_host"))
    out += range_errors(params, "dls_port", 1, 65535)
    return out + url_errors(params, ("prometheus_url",))
