# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of pool_ready: pure, each ``<module>_errors(params)`` returns sentences naming the
option, what it holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the
shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _pool_ready
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    empty_errors,
    is_int,
    labels_errors,
    list_item_errors,
    range_errors,
    url_errors,
)


def pool_ready_errors(params):
    out = list_item_errors(params, "nodes") + empty_errors(params, (
        "gpu_resource", "validator_selector", "validator_namespace", "probe_namespace", "probe_image", "license_metric",
        "inference_model"))
    for index, vm in enumerate(params.get("vms") or []):
        out += ["vms[%d].%s" % (index, e) for e in empty_errors(vm, ("name",))]
    out += labels_errors(params.get("node_selector"), "node_selector") + range_errors(params, "min_nodes", 1, what=" nodes")
    out += url_errors(params, ("prometheus_url", "inference_url"))
    poll = params.get("poll_interval")
    if poll is not None and not poll > 0:
        out.append("poll_interval must be more than 0 seconds, not %r" % (poll,))
    for step, value in sorted((params.get("step_timeouts") or {}).items()):
        if step not in _pool_ready.STEPS:
            out.append("step_timeouts names %r, not a step (%s)" % (step, ", ".join(_pool_ready.STEPS)))
        elif not (is_int(value) and value > 0):
            out.append("step_timeouts.%s must be a whole number of seconds, 1 or more, not %r" % (step, value))
    return out
