# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of the vCenter link's modules (esxi_maintenance_mode, gpu_host_info, vm_class,
supervisor_namespace, drs_gpu_pinning): pure, each ``<module>_errors(params)`` returns sentences naming
the option, what it holds and what is accepted; the module passes its function to ``_inputs.enforce``
(the shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _ha
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    dns_label_errors,
    empty_errors,
    list_item_errors,
    percent_errors,
    range_errors,
)


def esxi_maintenance_mode_errors(params):
    return empty_errors(params, ("host",))


def gpu_host_info_errors(params):
    return empty_errors(params, ("cluster",)) + list_item_errors(params, "hosts")


def vm_class_errors(params):
    out = dns_label_errors(params.get("name"), "name", "VM class name")
    out += range_errors(params, "cpu_count", 1) + range_errors(params, "memory_mb", 1, what=" MiB")
    out += percent_errors(params, "cpu_reservation") + percent_errors(params, "memory_reservation")
    out += list_item_errors(params, "vgpu_profiles") + empty_errors(params, ("cluster",))
    return out


def supervisor_namespace_errors(params):
    out = dns_label_errors(params.get("name"), "name", "vSphere namespace name")
    out += empty_errors(params, ("cluster", "supervisor"))
    for name in params.get("vm_classes") or []:
        out += dns_label_errors(name, "vm_classes item", "VM class name")
    out += list_item_errors(params, "content_libraries")
    for index, policy in enumerate(params.get("storage_policies") or []):
        out += ["storage_policies[%d].%s" % (index, e) for e in empty_errors(policy, ("policy",))]
        out += ["storage_policies[%d].%s" % (index, e) for e in range_errors(policy, "limit_mib", 0, what=" MiB")]
    limits = params.get("limits") or {}
    for key in ("cpu_mhz", "memory_mib", "storage_mib"):
        out += ["limits.%s" % e for e in range_errors(limits, key, 0)]
    for index, entry in enumerate(params.get("access") or []):
        out += ["access[%d].%s" % (index, e) for e in empty_errors(entry, ("subject", "domain"))]
    for index, entry in enumerate(params.get("vm_reservations") or []):
        out += ["vm_reservations[%d].%s" % (index, e) for e in empty_errors(entry, ("zone", "vm_class"))]
        out += ["vm_reservations[%d].%s" % (index, e) for e in range_errors(entry, "count", 0)]
    return out


def supervisor_zone_binding_errors(params):
    out = empty_errors(params, ("supervisor", "cluster")) + list_item_errors(params, "managed_classes")
    for index, entry in enumerate(params.get("reservations") or []):
        out += ["reservations[%d].%s" % (index, e) for e in empty_errors(entry, ("zone", "vm_class"))]
        out += ["reservations[%d].%s" % (index, e) for e in range_errors(entry, "count", 0)]
    seen = {}
    for index, entry in enumerate(params.get("reservations") or []):
        key = (entry.get("zone"), entry.get("vm_class"))
        if key in seen:
            out.append("reservations[%d]: %s in zone %s is given twice (also reservations[%d]); give one entry with the sum"
                       % (index, key[1], key[0], seen[key]))
        seen.setdefault(key, index)
    return out


def drs_gpu_pinning_errors(params):
    out = empty_errors(params, ("cluster",)) + list_item_errors(params, "vms") + list_item_errors(params, "exclude")
    rule = params.get("vm_host_rule")
    if rule:
        out += ["vm_host_rule.%s" % e for e in empty_errors(rule, ("name", "vm_group", "host_group"))]
    return out


def ha_gpu_restart_errors(params):
    """The module's own input checks: names set, each pool once, a policy vSphere takes."""
    out = empty_errors(params, ("cluster",)) + list_item_errors(params, "exclude")
    names = []
    for index, pool in enumerate(params.get("pools") or []):
        out += ["pools[%d].%s" % (index, e) for e in empty_errors(pool, ("name", "vgpu_profile"))]
        names.append(pool.get("name"))
    twice = sorted(set(n for n in names if n and names.count(n) > 1))
    if twice:
        out.append("pools: %s named more than once" % ", ".join(twice))
    if params.get("admission_control") is not None:
        out += _ha.policy_errors(params["admission_control"])
    return out
