# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of gpu_what_if: pure, ``gpu_what_if_errors(params)`` returns sentences naming the option,
what it holds and what is accepted; the module passes it to ``_inputs.enforce``."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import url_errors


def gpu_what_if_errors(params):
    out = url_errors(params, ("prometheus_url",))
    factor = params.get("compression")
    if factor is not None and not 1 <= factor <= 100000:
        out.append("compression must be from 1 to 100000 simulated seconds per wall second, not %r" % (factor,))
    poll = params.get("poll_interval")
    if poll is not None and not 0.01 <= poll <= 10:
        out.append("poll_interval must be from 0.01 to 10 seconds, not %r" % (poll,))
    hours = params.get("record_hours")
    if hours is not None and not 0 < hours <= 24 * 90:
        out.append("record_hours must be more than 0 and at most 2160 (90 days), not %r" % (hours,))
    has_record = any(params.get(k) is not None for k in ("record", "record_file", "generate"))
    if not has_record and not params.get("prometheus_url"):
        out.append("give the workload record: record, record_file, generate, or prometheus_url (the pool's history)")
    if params.get("replay", True):
        if params.get("design") is None and not params.get("design_file"):
            out.append("give design or design_file (the current design) to replay")
        if not (params.get("kubeconfig") or params.get("host")):
            out.append("give kubeconfig (or host): the replay cluster, a sandbox with Kueue and kwok")
    return out
