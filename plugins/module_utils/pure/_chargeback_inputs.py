# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of gpu_usage: pure, each ``<module>_errors(params)`` returns sentences naming the
option, what it holds and what is accepted; the module passes its function to ``_inputs.enforce`` (the
shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import empty_errors, url_errors


def gpu_usage_errors(params):
    out = empty_errors(params, ("prometheus_url", "bearer_token", "username", "design_file"))
    out += url_errors(params, ("prometheus_url",))
    now = 0
    for key in ("start", "end"):
        if params.get(key) is not None:
            try:
                _chargeback.parse_time(params[key], now)
            except _chargeback.ChargebackError as exc:
                out.append("%s: %s" % (key, exc))
    if params.get("step") is not None:
        try:
            step = _chargeback.parse_duration(params["step"])
            if step < 1 or step != int(step):
                out.append("step must be a whole number of seconds, 1 or more, not %r" % (params["step"],))
        except _chargeback.ChargebackError as exc:
            out.append("step: %s" % exc)
    return out
