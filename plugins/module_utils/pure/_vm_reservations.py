# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reserved VM classes (pure, standard library only): a tenant keeps a count of VMs of a pool's
VM class in a vSphere zone (design ``tenants[].vm_reservations``).

vSphere keeps them in two places, both added in vSphere API 9.0.0.0: the Supervisor's zone
binding (``namespace_management.supervisors.zones.Bindings``: ``{zone, type,
resource_allocation{vm_reservations[{reserved_vm_class, count}]}}``), which holds the slots for
the whole Supervisor, and the namespace's zone (``namespaces.Instances.ZoneSpec``: ``{name,
vm_reservations[...], disallow_unreserved_direct_path_usage}``), which gives them to the tenant.

This module holds what both writers and the audit share:

- :func:`refusal`: the words of the refusal on a vCenter older than API 9.0 (None on 9.0 and later);
- :func:`reservation_shortfalls`: the reservations of a cluster's pools that do not fit its cards
  with one host kept spare, after its node VMs (the design rule ``vm_reservations_fit``);
- :func:`supervisor_bindings` / :func:`namespace_zones`: the wanted Supervisor and namespace sides;
- :func:`plan_bindings` / :func:`plan_namespace_zones`: the one plan per object the converge, check
  mode and the audit share. Ownership is by VM class: only the classes the design manages are set or
  removed in a zone; reservations of other classes, and zones the design does not name, stay as they are;
- :func:`reserved_idle`: reserved-but-idle slots per tenant, class and zone, for capacity and chargeback.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    capacity_ok,
    node_vms,
    per_card,
    place,
    sorted_node_vms,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, UPDATE, Plan

MIN_API = (9, 0)
WORKLOAD = "WORKLOAD"


class ReservationError(ValueError):
    """Bad reservations, or a vCenter without reserved VM classes: refused before any change."""


def check_reservations(reservations):
    """The module's ``reservations`` (``[{zone, vm_class, count}]``): a zone and a class each, a count of 0 or
    more, one entry per zone and class; raises :class:`ReservationError` naming the entry."""
    seen = set()
    for i, r in enumerate(reservations or []):
        where = "reservations[%d]" % i
        if not r.get("zone") or not r.get("vm_class"):
            raise ReservationError("%s needs a zone and a vm_class" % where)
        if not isinstance(r.get("count"), int) or r["count"] < 0:
            raise ReservationError("%s (%s in zone %s): count must be 0 or more, not %s"
                                   % (where, r["vm_class"], r["zone"], r.get("count")))
        if (r["zone"], r["vm_class"]) in seen:
            raise ReservationError("%s: %s in zone %s is given twice; give one entry with the sum"
                                   % (where, r["vm_class"], r["zone"]))
        seen.add((r["zone"], r["vm_class"]))


def api_tuple(version):
    """``"9.0.0.0"`` -> ``(9, 0)``; None when the version is missing or not dotted numbers."""
    match = re.match(r"^\s*(\d+)\.(\d+)", str(version or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def refusal(version):
    """None when the vCenter's API version has reserved VM classes (9.0 and later), else the refusal in words."""
    got = api_tuple(version)
    if got is not None and got >= MIN_API:
        return None
    return ("reserved VM classes need vSphere API 9.0 or later (Supervisor zone bindings and namespace zones "
            "with vm_reservations); this vCenter negotiates API %s: nothing was changed. Remove the tenants' "
            "vm_reservations or upgrade vCenter" % (version or "unknown"))


# ---------------------------------------------------------------------------------------
# the design rule's capacity: node VMs first, then the reservations, one host kept spare
# ---------------------------------------------------------------------------------------

def reservation_shortfalls(ctx, cluster):
    """``[(tenant, reservation, fits, vm_class)]`` for each reservation of a pool of ``cluster`` that does
    not fit: ``fits`` is how many of its VMs do. The cluster's node VMs are placed first (biggest first),
    then every reservation's VMs in design order, on all the cluster's hosts but one (the spare; a
    one-host cluster has none). A reserved VM of a pool is one node VM of that pool: its ``gpus_per_node``
    vGPUs on different cards of one host, sharing cards with the pool's node VMs up to ``per_card``."""
    if ctx.models.get(cluster.get("name")) is None or not capacity_ok(cluster):
        return []
    model = ctx.models[cluster["name"]]
    wanted = []   # (tenant, reservation, pool)
    for tenant in ctx.d["tenants"]:
        for reservation in tenant.get("vm_reservations") or []:
            pool = ctx.pools.get(reservation.get("pool"))
            if pool is None or pool.get("cluster") != cluster["name"] or ctx.usable(pool) is None:
                continue
            if isinstance(reservation.get("count"), int) and reservation["count"] > 0:
                wanted.append((tenant, reservation, pool))
    if not wanted:
        return []
    nodes = list(sorted_node_vms(node_vms(ctx, cluster)))
    tags = []
    for tenant, reservation, pool in wanted:
        for _vm in range(reservation["count"]):
            tag = dict(pool)   # the pool's name (cards shared with its node VMs), one identity per reservation
            tags.append((tag, reservation))
            nodes.append((tag, pool.get("gpus_per_node") or 1, per_card(pool, model)))
    hosts = cluster["hosts"] - 1 if cluster["hosts"] > 1 else cluster["hosts"]
    _cards, unplaced = place(nodes, hosts, cluster["gpu"]["per_host"])
    left = set(id(p) for p in unplaced)
    short = []
    for tenant, reservation, pool in wanted:
        mine = [tag for tag, r in tags if r is reservation]
        fits = sum(1 for tag in mine if id(tag) not in left)
        if fits < reservation["count"]:
            short.append((tenant, reservation, fits, pool["vm_class"]["name"]))
    return short


# ---------------------------------------------------------------------------------------
# wanted state
# ---------------------------------------------------------------------------------------

def _sorted_reservations(counts):
    return [OrderedDict([("reserved_vm_class", name), ("count", counts[name])]) for name in sorted(counts)]


def supervisor_bindings(tenants):
    """The Supervisor side: one ``{zone, type, resource_allocation{vm_reservations}}`` per zone the
    reservations name, the counts of each class summed over the tenants (``tenants``: ``[{vm_reservations:
    [{vm_class, zone, count}]}]``, zero counts left out of the list but their zone kept), zones and classes
    sorted."""
    zones = OrderedDict()
    for tenant in tenants:
        for r in tenant.get("vm_reservations") or []:
            counts = zones.setdefault(r["zone"], {})   # a zone named with count 0: its managed classes are removed
            if r["count"] > 0:
                counts[r["vm_class"]] = counts.get(r["vm_class"], 0) + r["count"]
    return [OrderedDict([("zone", zone), ("type", WORKLOAD),
                         ("resource_allocation", OrderedDict([("vm_reservations", _sorted_reservations(zones[zone]))]))])
            for zone in sorted(zones)]


def namespace_zones(reservations, disallow_unreserved=False):
    """The namespace side: one ZoneSpec ``{name, vm_reservations, disallow_unreserved_direct_path_usage}``
    per zone of the tenant's reservations (``[{vm_class, zone, count}]``), zones sorted."""
    zones = OrderedDict()
    for r in reservations or []:
        counts = zones.setdefault(r["zone"], {})
        if r["count"] > 0:
            counts[r["vm_class"]] = counts.get(r["vm_class"], 0) + r["count"]
    return [OrderedDict([("name", zone), ("vm_reservations", _sorted_reservations(zones[zone])),
                         ("disallow_unreserved_direct_path_usage", bool(disallow_unreserved))])
            for zone in sorted(zones)]


# ---------------------------------------------------------------------------------------
# plans
# ---------------------------------------------------------------------------------------

def _as_counts(items):
    return dict((i["reserved_vm_class"], i["count"]) for i in items or [])


def _merged(live_items, wanted_items, managed):
    """The live reservations with the managed classes replaced by the wanted ones (sorted by class)."""
    counts = dict((k, v) for k, v in _as_counts(live_items).items() if k not in managed)
    counts.update(_as_counts(wanted_items))
    return _sorted_reservations(counts)


def plan_bindings(supervisor, live, wanted, managed):
    """Plan of the Supervisor's zone bindings. ``live``: Bindings.Info rows ``{zone, type,
    resource_allocation{vm_reservations}}`` (None: not read); ``wanted``: :func:`supervisor_bindings`;
    ``managed``: the VM classes the design owns (their reservations in a named zone are set to the
    wanted counts, absent ones removed). A zone without a binding is created (type WORKLOAD)."""
    managed = set(managed)
    by_zone = dict((b["zone"], b) for b in live or [])
    plan = Plan(before=[], after=[])
    for want in wanted:
        zone = want["zone"]
        obj = "supervisor %s zone %s" % (supervisor, zone)
        items = want["resource_allocation"]["vm_reservations"]
        have = by_zone.get(zone)
        if have is None:
            if not items:
                continue   # nothing to reserve in a zone the Supervisor does not bind: no binding made
            plan.add(obj, "binding", None, items, CREATE)
            plan.after.append(OrderedDict([("zone", zone), ("vm_reservations", items)]))
            continue
        before = _sorted_reservations(_as_counts((have.get("resource_allocation") or {}).get("vm_reservations")))
        after = _merged(before, items, managed)
        plan.before.append(OrderedDict([("zone", zone), ("vm_reservations", before)]))
        plan.after.append(OrderedDict([("zone", zone), ("vm_reservations", after)]))
        if before != after:
            plan.add(obj, "vm_reservations", before, after, UPDATE)
    return plan


def plan_namespace_zones(namespace, live, wanted, managed):
    """Plan of a namespace's zones. ``live``: the namespace's zones as read ``[{name, vm_reservations,
    disallow_unreserved_direct_path_usage}]``; ``wanted``: :func:`namespace_zones`. A zone the namespace
    lacks is added with the reservations; in a zone it has, the managed classes' reservations and the
    DirectPath flag are set. Zones the design does not name stay as they are."""
    managed = set(managed)
    by_name = dict((z["name"], z) for z in live or [])
    plan = Plan(before=[], after=[])
    for want in wanted:
        name = want["name"]
        obj = "namespace %s zone %s" % (namespace, name)
        have = by_name.get(name)
        if have is None:
            plan.add(obj, "zone", None, want, CREATE)
            plan.after.append(want)
            continue
        before_items = _sorted_reservations(_as_counts(have.get("vm_reservations")))
        after_items = _merged(before_items, want["vm_reservations"], managed)
        before_flag = bool(have.get("disallow_unreserved_direct_path_usage"))
        plan.before.append(OrderedDict([("name", name), ("vm_reservations", before_items),
                                        ("disallow_unreserved_direct_path_usage", before_flag)]))
        plan.after.append(OrderedDict([("name", name), ("vm_reservations", after_items),
                                       ("disallow_unreserved_direct_path_usage",
                                        want["disallow_unreserved_direct_path_usage"])]))
        if before_items != after_items:
            plan.add(obj, "vm_reservations", before_items, after_items, UPDATE)
        if before_flag != want["disallow_unreserved_direct_path_usage"]:
            plan.add(obj, "disallow_unreserved_direct_path_usage", before_flag,
                     want["disallow_unreserved_direct_path_usage"], UPDATE)
    return plan


# ---------------------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------------------

def reserved_idle(reservations, running):
    """Reserved-but-idle slots: ``reservations`` ``[{tenant, vm_class, zone, count}]``; ``running``
    ``[{namespace or tenant, vm_class, zone}]`` (one per powered-on VM; ``zone`` None: counted in the
    tenant's first zone of that class with room). Returns one row per tenant, class and zone (in that
    order): ``{tenant, vm_class, zone, reserved, used, idle}``; ``used`` is at most ``reserved`` (VMs beyond
    the reservation run unreserved)."""
    rows = OrderedDict()
    for r in reservations or []:
        key = (r["tenant"], r["vm_class"], r["zone"])
        row = rows.setdefault(key, OrderedDict([("tenant", key[0]), ("vm_class", key[1]), ("zone", key[2]),
                                                ("reserved", 0), ("used", 0), ("idle", 0)]))
        row["reserved"] += r["count"]
    unzoned = []
    for vm in running or []:
        tenant = vm.get("tenant", vm.get("namespace"))
        if vm.get("zone") is None:
            unzoned.append((tenant, vm.get("vm_class")))
            continue
        row = rows.get((tenant, vm.get("vm_class"), vm["zone"]))
        if row is not None and row["used"] < row["reserved"]:
            row["used"] += 1
    for tenant, vm_class in unzoned:
        for key in sorted(rows):
            row = rows[key]
            if key[0] == tenant and key[1] == vm_class and row["used"] < row["reserved"]:
                row["used"] += 1
                break
    for row in rows.values():
        row["idle"] = row["reserved"] - row["used"]
    return [rows[key] for key in sorted(rows)]
