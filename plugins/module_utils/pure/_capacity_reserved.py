# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reserved-but-idle VM slots in the capacity report (pure, standard library only).

The design's ``tenants[].vm_reservations`` keep VMs of a pool's VM class for a tenant in a vSphere zone
(``_vm_reservations``). A reservation is in use by the tenant's powered-on VMs of that class: a vGPU VM
whose resource pool is the tenant's vSphere Namespace (``gpu_host_info``'s VM read with namespaces: the
pool under ``Namespaces``), of the class of the pool its profile maps it to (``_capacity_live.Pools``).
The VM read gives no zone: a VM counts in the tenant's first zone of its class with room
(``_vm_reservations.reserved_idle``).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vm_reservations import reserved_idle

POWERED_ON = "poweredOn"


def _namespace(tenant):
    return tenant.get("namespace") or tenant.get("name")


def reservations(design):
    """``[{tenant, vm_class, zone, count}]`` of the design's tenants (the pool named by its VM class name)."""
    pools = dict((p.get("name"), p) for p in (design or {}).get("pools") or [] if isinstance(p, dict))
    out = []
    for tenant in (design or {}).get("tenants") or []:
        for r in tenant.get("vm_reservations") or []:
            vm_class = ((pools.get(r.get("pool")) or {}).get("vm_class") or {}).get("name")
            if vm_class and isinstance(r.get("count"), int):
                out.append(OrderedDict([("tenant", tenant["name"]), ("vm_class", vm_class), ("zone", r["zone"]),
                                        ("count", r["count"])]))
    return out


def running(hosts, pools, design):
    """``[{tenant, vm_class, zone: None}]``, one per powered-on vGPU VM in a tenant's vSphere Namespace whose
    profile maps it to a pool (``pools``: ``_capacity_live.Pools``)."""
    by_namespace = dict((_namespace(t), t["name"]) for t in (design or {}).get("tenants") or [])
    out = []
    for host in hosts:
        for vm in host.get("vgpu_vms") or []:
            tenant = by_namespace.get(vm.get("namespace"))
            if tenant is None or vm.get("power_state") != POWERED_ON:
                continue
            pool = pools.by_name(pools.of_vm(host.get("cluster"), vm) or "")
            vm_class = ((pool or {}).get("vm_class") or {}).get("name")
            if vm_class:
                out.append(OrderedDict([("tenant", tenant), ("vm_class", vm_class), ("zone", None)]))
    return out


def idle_rows(design, hosts, pools):
    """The report's ``reserved_idle``: one row per tenant, class and zone ``{tenant, vm_class, zone, reserved,
    used, idle}``, or None when the design reserves nothing."""
    wanted = reservations(design)
    if not wanted:
        return None
    return reserved_idle(wanted, running(hosts, pools, design))


def has_reservations(design):
    return bool(reservations(design))


def markdown(rows):
    """The report's section on reserved VM classes (Markdown); empty without reservations."""
    if rows is None:
        return ""
    lines = ["## Reserved VM classes", "",
             "Per tenant, VM class and zone: the VMs the design reserves, the tenant's powered-on VMs of the class "
             "(in its vSphere Namespace) and the reserved slots left idle.", "",
             "| tenant | VM class | zone | reserved | used | idle |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %s | %s | %d | %d | %d |" % (r["tenant"], r["vm_class"], r["zone"], r["reserved"],
                                                          r["used"], r["idle"]))
    return "\n".join(lines + [""]) + "\n"


__all__ = ["has_reservations", "idle_rows", "markdown", "reservations", "running"]
