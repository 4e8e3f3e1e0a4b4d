# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of gpu_pool_lease: pure, each ``<module>_errors(params)`` returns sentences naming the
option, what it holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the
shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _lease
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import list_item_errors, range_errors


def gpu_pool_lease_errors(params):
    out = list_item_errors(params, "clusters")
    if params.get("clusters") == []:
        out.append("clusters must name at least one cluster")
    out += range_errors(params, "wait", 0, what=" seconds")
    if params.get("state", _lease.ACQUIRED) == _lease.ACQUIRED:
        out += range_errors(params, "ttl", _lease.MIN_TTL, what=" seconds")
    if params.get("holder") is not None:
        try:
            _lease.validate_holder(params["holder"])
        except _lease.LeaseError as exc:
            out.append("holder: %s" % exc)
    return out
