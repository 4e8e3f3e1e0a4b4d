# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of the ESXi link's modules (esxi_host_driver, esxi_gpu_config, vlcm_component): pure,
each ``<module>_errors(params)`` returns sentences naming the option, what it holds and what is
accepted; the module passes its function to ``_inputs.enforce`` (the shared checks and the failure
message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import empty_errors


def driver_version_errors(params, key="version", form="%(key)s: %(reason)s"):
    value = params.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    try:
        _esxi.parse_driver_version(value)
    except _esxi.EsxiError as exc:
        return [form % dict(key=key, reason=exc, params=params)]
    return []


def esxi_host_driver_errors(params):
    return empty_errors(params, ("host", "version", "bundle", "component")) + driver_version_errors(params)


def esxi_gpu_config_errors(params):
    out = empty_errors(params, ("host", "cluster"))
    sched = params.get("scheduler")
    if sched:
        if sched.get("time_slice_ms") is not None and sched.get("policy") is None:
            out.append("scheduler.time_slice_ms needs scheduler.policy (equal_share or fixed_share)")
        else:
            try:
                _esxi.validate_scheduler(sched)
            except _esxi.EsxiError as exc:
                out.append(str(exc))
    if params.get("reboot") and not params.get("host"):
        out.append("reboot is only allowed with host (the hosts of a cluster are rebooted one at a time by the "
                   "esxi_gpu_host role)")
    geometry = params.get("mig_geometry")
    if geometry is not None and not isinstance(geometry, (list, tuple, dict)):
        out.append("mig_geometry must be a list per host position or a mapping of host names, each to a list of GPU "
                   "indexes, not %r" % (geometry,))
    indexes = params.get("mig_gpu_indexes") or []
    if indexes and not params.get("mig_mode"):
        out.append("mig_gpu_indexes needs mig_mode")
    out.extend("mig_gpu_indexes: %r is not a GPU index from 0 to 63" % (i,) for i in indexes if not 0 <= i < 64)
    ssh = params.get("ssh") or {}
    if ssh.get("port") is not None and not 1 <= ssh["port"] <= 65535:
        out.append("ssh.port must be from 1 to 65535, not %s" % ssh["port"])
    if ssh.get("timeout") is not None and ssh["timeout"] < 1:
        out.append("ssh.timeout must be 1 or more seconds, not %s" % ssh["timeout"])
    return out


def vlcm_component_errors(params):
    form = "Invalid version for component %s (option %%(key)s): %%(reason)s" % params.get("component")
    return empty_errors(params, ("cluster", "component", "version", "depot_url")) + driver_version_errors(params, form=form)
