# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of gpu_capacity: pure, each ``<module>_errors(params)`` returns sentences naming the
option, what it holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the
shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live, _nvidia
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import empty_errors, list_item_errors


def gpu_capacity_errors(params):
    out = empty_errors(params, ("cluster", "design_file", "kubeconfig", "context")) + list_item_errors(params, "profiles")
    for name in params.get("profiles") or []:
        if name and str(name).strip():
            try:
                _nvidia.parse_profile(name)
            except _nvidia.NvidiaError as exc:
                out.append("profiles: %s" % exc)
    return out + empty_errors(params, ("prometheus_url", "prometheus_token")) + _capacity_live.knee_input_errors(params)
