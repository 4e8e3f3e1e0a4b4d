# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The capacity model of the pool design (pure, standard library only): the NVIDIA
catalog read for a design (profiles a model offers, vGPUs per card), the design's
``Context`` shared by the rules and the derivation, and the packing of node VMs on hosts.

Every host of a cluster has ``gpu.per_host`` cards. A node VM of a pool holds
``gpus_per_node`` vGPUs, each on a different card of one host; a card carries vGPUs of one
profile only, up to ``per_card`` of them (default: as many as fit - one for a full card,
memory / framebuffer for a time-sliced profile, the most instances of the MIG profile that
can be placed on one card). Node VMs are packed first-fit, biggest first.

A pool is *protected* (an SLO pool) unless it is *preemptible* (:func:`preemptible`: not
inference, and its PriorityClass is below one whose pods preempt). vGPU VMs keep their cards
whatever the pods' priority, so the spare rule packs every pool of a cluster that carries a
protected pool into all hosts but one, protected pools last, and reports the protected pools
left short. ``cluster_capacity`` failing skips the spare rule for that cluster.

A host roll drains the preemptible pools instead of protecting them: ``min_gpus`` (derived
for the ESXi link, :func:`roll_min_gpus`) is the cards the protected pools use, and
:func:`roll_refusal` says when the role's check (``_esxi.roll_capacity``, the same function)
refuses to take the largest host out without ``force``.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import roll_capacity
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    NvidiaError,
    gpu_model,
    mig_placement,
    parse_profile,
    vgpu_mig_profile,
)


# Time-sliced C-series framebuffer sizes (GB) per model, as the vGPU type lists give them;
# other models: the whole divisors of the memory from 4 GB up. Q series only on the
# graphics models (no MIG): every whole divisor of the memory.
_TIME_SLICED_C = {
    "A100-80GB": (80, 40, 20, 16, 10, 8, 5, 4),
    "H100-80GB": (80, 40, 20, 16, 10, 8, 5, 4),
    "H200-141GB": (141, 70, 47, 35, 28, 23, 17, 14),
    "L40S": (48, 24, 16, 12, 8, 6, 4),
}


def catalog_model(name):
    try:
        return gpu_model(name)
    except NvidiaError:
        return None


def mig_mix_problem(model, mix):
    try:
        mig_placement(model, mix)
    except NvidiaError as exc:
        return str(exc)
    return None


def offered_profiles(model):
    """vGPU profiles (vSphere names) a GPU model offers: time-sliced C (and Q on graphics
    models), then MIG-backed. Names use the model's first vGPU stem."""
    model = gpu_model(model)
    if not model.vgpu_stems:
        return []
    stem = model.vgpu_stems[0].lower()
    sizes = _TIME_SLICED_C.get(model.name) or tuple(
        s for s in range(model.memory_gb, 3, -1) if model.memory_gb % s == 0)
    names = ["%s_%s-%dc" % (model.vgpu_prefix, stem, s) for s in sizes]
    if not model.mig:
        names += ["%s_%s-%dq" % (model.vgpu_prefix, stem, s)
                  for s in range(model.memory_gb, 0, -1) if model.memory_gb % s == 0]
    for mig in model.mig:
        names.append("%s_%s-%d-%dc%s" % (model.vgpu_prefix, stem, mig.compute_slices, mig.framebuffer_gb,
                                         "me" if mig.media_extension else ""))
    return names


def profile_problem(profile_name, model):
    """None when ``model`` offers the profile, else the reason (a sentence)."""
    try:
        profile = parse_profile(profile_name)
    except NvidiaError as exc:
        return str(exc)
    model = gpu_model(model)
    if profile.gpu not in model.vgpu_stems or profile.prefix != model.vgpu_prefix:
        return ("%s is a profile for GPU %s; %s profiles are named %s"
                % (profile_name, profile.gpu,
                   model.name, " or ".join("%s_%s-..." % (model.vgpu_prefix, s.lower()) for s in model.vgpu_stems)
                   or "(none: not a vSphere vGPU model)"))
    if profile.mig_backed:
        try:
            vgpu_mig_profile(profile, model)
        except NvidiaError as exc:
            return str(exc)
        return None
    sizes = _TIME_SLICED_C.get(model.name) or tuple(
        s for s in range(model.memory_gb, 3, -1) if model.memory_gb % s == 0)
    if profile.series == "C":
        if profile.framebuffer_gb not in sizes:
            return "%s offers no %d GB time-sliced C profile (sizes: %s GB)" % (
                model.name, profile.framebuffer_gb, ", ".join(str(s) for s in sizes))
        return None
    if profile.series == "Q" and not model.mig:
        if model.memory_gb % profile.framebuffer_gb:
            return "%s offers no %d GB Q profile" % (model.name, profile.framebuffer_gb)
        return None
    return "%s offers no %s-series profiles here (compute C%s)" % (
        model.name, profile.series, "" if model.mig else " and workstation Q")


def suggest_profiles(model, sharing):
    """Profiles of the model that suit a sharing mode, for fix messages."""
    names = []
    for name in offered_profiles(model):
        profile = parse_profile(name)
        if profile.series != "C" or profile.media_extension:
            continue
        full = not profile.mig_backed and profile.framebuffer_gb >= model.memory_gb
        kind = "mig" if profile.mig_backed else "full_card" if full else "time_sliced"
        if kind == sharing:
            names.append(name)
    return ", ".join(names) or "none on %s" % model.name


def per_card(pool, model):
    """vGPUs of the pool's profile one card carries (the pool's ``per_card`` or as many as fit)."""
    if pool.get("per_card"):
        return pool["per_card"]
    profile = parse_profile(pool["vgpu_profile"])
    if profile.mig_backed:
        mig = vgpu_mig_profile(profile, model)
        best = 1
        for count in range(1, mig.max_instances + 1):
            try:
                mig_placement(model, {mig.name: count})
                best = count
            except NvidiaError:
                break
        return best
    return max(1, model.memory_gb // profile.framebuffer_gb)


class Context:
    def __init__(self, d):
        self.d = d
        self.clusters = OrderedDict((c["name"], c) for c in d["clusters"] if c.get("name"))
        self.pools = OrderedDict((p["name"], p) for p in d["pools"] if p.get("name"))
        self.vks = OrderedDict((v["name"], v) for v in d["vks_clusters"] if v.get("name"))
        self.models = {}
        for cluster in d["clusters"]:
            gpu = cluster.get("gpu") or {}
            self.models[cluster.get("name")] = catalog_model(gpu.get("model")) if gpu.get("model") else None
        self.geometries = {}   # cluster name -> its derived MIG geometry (derived_mig_geometry)
        self.profiles = {}
        for pool in d["pools"]:
            try:
                self.profiles[pool.get("name")] = parse_profile(pool.get("vgpu_profile"))
            except NvidiaError:
                self.profiles[pool.get("name")] = None

    def model_of(self, pool):
        cluster = self.clusters.get(pool.get("cluster"))
        return self.models.get(cluster["name"]) if cluster else None

    def usable(self, pool):
        """The pool's profile, when it is offered by a known model of a known cluster (else None)."""
        model = self.model_of(pool)
        profile = self.profiles.get(pool.get("name"))
        if model is None or profile is None or profile_problem(profile.name, model):
            return None
        return profile


def pool_gpus(pool):
    """GPUs a pool offers to pods: replicas x vGPUs per node x guest time-slicing replicas."""
    node_pool = pool.get("node_pool") or {}
    replicas = (pool.get("guest_time_slicing") or {}).get("replicas") or 1
    return (node_pool.get("replicas") or 0) * (pool.get("gpus_per_node") or 1) * replicas


def node_vms(ctx, cluster):
    """[(pool, vgpus per node, per card)] for every node VM of the cluster's usable pools."""
    model = ctx.models.get(cluster["name"])
    nodes = []
    for pool in ctx.d["pools"]:
        if pool.get("cluster") != cluster["name"] or ctx.usable(pool) is None:
            continue
        if not isinstance(pool.get("node_pool"), dict):
            continue
        if pool.get("per_card") and ctx.usable(pool).mig_backed and \
                mig_mix_problem(model, {ctx.usable(pool).mig_profile: pool["per_card"]}):
            continue
        cap = per_card(pool, model)
        for _replica in range(pool["node_pool"].get("replicas") or 0):
            nodes.append((pool, pool.get("gpus_per_node") or 1, cap))
    return nodes


def mig_backed(pool):
    """Whether the pool's vGPU profile is MIG-backed (its vGPUs need a GPU in MIG mode)."""
    try:
        return parse_profile(pool.get("vgpu_profile")).mig_backed
    except NvidiaError:
        return False


def place(nodes, hosts, gpus_per_host, geometry=None):
    """First-fit placement of node VMs on hosts; returns ``(cards, unplaced)``.

    ``nodes`` is ``[(pool, vgpus, per_card)]`` in the order to place them; every vGPU of a
    node goes to a different card of one host; a card holds one profile (one pool's
    ``per_card`` vGPUs). A node takes the first host with room, on that host the cards of
    its pool with room first, then free cards from GPU 0 up.

    ``geometry`` (None: any card takes any pool) is one list of MIG GPU indexes per host
    position (:func:`geometry_positions`; positions it lacks run no MIG): a MIG-backed pool's
    vGPUs go only on MIG cards, every other pool's only on cards with MIG off.

    ``cards[host][gpu]`` is None (free) or ``[pool name, vGPUs placed, per_card]``.
    """
    mig = [set(geometry[h]) if geometry is not None and h < len(geometry) else set() for h in range(hosts)]
    cards = [[None] * gpus_per_host for _host in range(hosts)]
    unplaced = []
    for pool, vgpus, cap in nodes:
        wants_mig = mig_backed(pool)
        placed = False
        for h, host in enumerate(cards):
            partial = [c for c in host if c is not None and c[0] == pool["name"] and c[1] < cap]
            free = [i for i, c in enumerate(host)
                    if c is None and (geometry is None or (i in mig[h]) == wants_mig)]
            if len(partial) + len(free) < vgpus:
                continue
            for card in partial[:vgpus]:
                card[1] += 1
            for index in free[:max(0, vgpus - len(partial))]:
                host[index] = [pool["name"], 1, cap]
            placed = True
            break
        if not placed:
            unplaced.append(pool)
    return cards, unplaced


def pack(nodes, hosts, gpus_per_host, geometry=None):
    """:func:`place`, counted: ``(cards used, unplaced nodes)``."""
    cards, unplaced = place(nodes, hosts, gpus_per_host, geometry)
    return sum(1 for host in cards for c in host if c is not None), unplaced


def sorted_node_vms(nodes, last=None):
    """Biggest first; with ``last`` (a test on the pool), the pools it holds true for after the others."""
    def key(node):
        pool, vgpus, cap = node
        return (bool(last(pool)) if last else 0, -vgpus, cap, pool["name"])
    return sorted(nodes, key=key)


PREEMPTS = "PreemptLowerPriority"


def preemptible(pool, priorities):
    """Whether a host roll may drain the pool instead of keeping its capacity.

    Inference is never preemptible. Another pool is when its PriorityClass (``priorities``:
    the design's, normalized) has a lower value than a class whose pods preempt
    (``preemption_policy: PreemptLowerPriority``): its pods are the ones the scheduler (and
    Kueue) evicts for those. ``preemption_policy`` says what a class's pods do to others, not
    whether they can be preempted: notebooks on ``gpu-notebook`` (``Never``) are preemptible.
    A pool on an unknown class, or on the highest preempting class, is protected.
    """
    if pool.get("shape") == "inference":
        return False
    mine = priorities.get(pool.get("priority"))
    if not isinstance(mine, dict) or not isinstance(mine.get("value"), int):
        return False
    return any(isinstance(p, dict) and p.get("preemption_policy") == PREEMPTS and isinstance(p.get("value"), int)
               and p["value"] > mine["value"] for p in priorities.values())


def protected(ctx):
    """The test :func:`sorted_node_vms` takes: whether a pool is protected (not preemptible) in this design."""
    return lambda pool: not preemptible(pool, ctx.d.get("priorities") or {})


def roll_min_gpus(ctx, cluster):
    """The cards the cluster's protected pools use, packed on all its hosts (``min_gpus`` of the ESXi link)."""
    keep = protected(ctx)
    nodes = [n for n in node_vms(ctx, cluster) if keep(n[0])]
    used, _unplaced = pack(sorted_node_vms(nodes), cluster["hosts"], cluster["gpu"]["per_host"])
    return used


def roll_refusal(ctx, cluster):
    """None when the ESXi role may take the cluster's largest host out, else (need, left, total):
    the GPUs the protected pools need, those left with one host out, and all of them. Judged by
    ``_esxi.roll_capacity``, the check the role makes on the live hosts, on the design's hosts."""
    need = roll_min_gpus(ctx, cluster)
    if not need:
        return None
    per_host = cluster["gpu"]["per_host"]
    allowed, _message = roll_capacity(dict(("host %d" % i, per_host) for i in range(cluster["hosts"])), need)
    if allowed:
        return None
    return need, (cluster["hosts"] - 1) * per_host, cluster["hosts"] * per_host


def capacity_ok(cluster):
    gpu = cluster.get("gpu") or {}
    return isinstance(cluster.get("hosts"), int) and isinstance(gpu.get("per_host"), int)


# ---------------------------------------------------------------------------------------
# MIG geometry: which cards of which host run MIG mode
# ---------------------------------------------------------------------------------------

def geometry_positions(geometry, hosts):
    """A geometry (the design's list or mapping form, or a derived one) as ``hosts`` sorted lists of
    MIG GPU indexes, one per host position.

    The list form is one entry per position (the cluster's GPU hosts in name order); positions it
    lacks run no MIG, positions beyond ``hosts`` are dropped. The mapping form names hosts, which
    the design knows only by number: its hosts, in name order, take the first positions and the
    hosts it does not name run no MIG (the capacity model does not depend on which host is which).
    """
    if isinstance(geometry, dict):
        entries = [geometry[name] for name in sorted(geometry)]
    else:
        entries = list(geometry or [])
    out = [sorted(set(entry or [])) for entry in entries[:hosts]]
    return out + [[] for _position in range(hosts - len(out))]


def geometry_problems(cluster, model):
    """What is wrong with a cluster's explicit ``mig_geometry`` against its hosts and GPU model:
    ``[(message, fix)]``, empty when it is absent or fine. Its form (a list of index lists or a
    mapping of host names to index lists) is the schema's."""
    geometry = cluster.get("mig_geometry")
    if geometry is None or not capacity_ok(cluster):
        return []
    hosts, per_host = cluster["hosts"], cluster["gpu"]["per_host"]
    problems = []
    if isinstance(geometry, dict):
        entries = [(name, geometry[name]) for name in sorted(geometry)]
        if len(entries) > hosts:
            problems.append(("mig_geometry names %d hosts (%s), the cluster has %d" % (
                len(entries), ", ".join(name for name, _i in entries), hosts),
                "name at most %d hosts, or set hosts to the cluster's GPU hosts" % hosts))
    else:
        entries = [("position %d" % (i + 1), indexes) for i, indexes in enumerate(geometry)]
        if len(entries) > hosts:
            problems.append(("mig_geometry gives %d host positions, the cluster has %d hosts" % (len(entries), hosts),
                             "give at most %d positions (one per GPU host, in name order)" % hosts))
    for where, indexes in entries:
        bad = sorted(set(i for i in indexes or [] if not 0 <= i < per_host))
        if bad:
            problems.append(("mig_geometry %s: GPU index %s is not one of the host's %d GPUs (0-%d)" % (
                where, ", ".join(str(i) for i in bad), per_host, per_host - 1),
                "use GPU indexes 0 to %d (gpu.per_host %d)" % (per_host - 1, per_host)))
        twice = sorted(set(i for i in indexes or [] if list(indexes).count(i) > 1))
        if twice:
            problems.append(("mig_geometry %s lists GPU %s more than once" % (where, ", ".join(str(i) for i in twice)),
                             "list each MIG GPU of a host once"))
    if model is not None and not model.mig and any(indexes for _where, indexes in entries):
        problems.append(("mig_geometry puts MIG on %s GPUs, which have no MIG mode" % model.name,
                         "remove mig_geometry (or give every host []): %s runs full-card and time-sliced vGPUs only"
                         % model.name))
    return problems


def derived_mig_geometry(ctx, cluster):
    """The MIG geometry a cluster gets when the design gives none: one sorted list of MIG GPU
    indexes per host position (``hosts`` lists, empty where a host runs no MIG).

    The cluster's node VMs (:func:`node_vms`, protected pools last) are placed (:func:`place`,
    first fit, no mode asked of a card) on its hosts in position order, so they fill every host
    but the last first; the cards that get a MIG-backed pool run MIG. The last position, the spare
    host, gets besides its own MIG cards, from GPU 0 up, free cards in MIG mode until it has as
    many as the most cards the protected MIG-backed pools use on any one other host: a host lost,
    its protected MIG node VMs restart there; and one more at a time while the spare rule
    (:func:`host_loss`, which places preemptible pools first, so they may take the MIG cards first)
    leaves fewer protected node VMs short with it. Every other card runs MIG off. With one host
    there is no spare. When the protected-last order leaves node VMs out and biggest-first does not, the
    biggest-first placement is used (``cluster_capacity`` reports what fits neither way).
    """
    hosts, per_host = cluster["hosts"], cluster["gpu"]["per_host"]
    keep = protected(ctx)
    nodes = node_vms(ctx, cluster)
    cards, unplaced = place(sorted_node_vms(nodes, last=keep), hosts, per_host)
    if unplaced:
        other, left = place(sorted_node_vms(nodes), hosts, per_host)
        if len(left) < len(unplaced):
            cards = other
    by_name = dict((pool["name"], pool) for pool, _vgpus, _cap in nodes)

    def mig_card(card, protected_only=False):
        return card is not None and mig_backed(by_name[card[0]]) and (not protected_only or keep(by_name[card[0]]))

    geometry = [[i for i, card in enumerate(host) if mig_card(card)] for host in cards]
    if hosts == 1:
        return geometry
    reserve = max(sum(1 for card in host if mig_card(card, protected_only=True)) for host in cards[:-1])
    own, free = geometry[-1], [i for i, card in enumerate(cards[-1]) if card is None]
    best = None
    # the spare rule packs preemptible pools first: where they take MIG cards the protected pools
    # counted on, more free cards of the spare host go to MIG while that leaves fewer protected
    # node VMs short over all host losses (and not when it would leave more, on cards with MIG off)
    for extra in range(min(len(free), max(0, reserve - len(own))), len(free) + 1):
        candidate = geometry[:-1] + [sorted(own + free[:extra])]
        short = sum(len(left) for loss in host_loss(ctx, cluster, candidate) for left in loss[3].values())
        if best is None or short < best[0]:
            best = (short, candidate)
        if short == 0:
            break
    return best[1]


def cluster_mig_geometry(ctx, cluster):
    """``(geometry, positions, explicit)``: the cluster's MIG geometry as derive() gives it (the
    design's ``mig_geometry`` as given, else :func:`derived_mig_geometry`), the same as one list of
    MIG GPU indexes per host position (:func:`geometry_positions`), and whether the design gave it."""
    given = cluster.get("mig_geometry")
    if given is not None:
        return given, geometry_positions(given, cluster["hosts"]), True
    if cluster["name"] not in ctx.geometries:
        ctx.geometries[cluster["name"]] = derived_mig_geometry(ctx, cluster)
    derived = copy.deepcopy(ctx.geometries[cluster["name"]])
    return derived, derived, False


def geometry_fit(ctx, cluster, positions):
    """``(cards, unplaced)`` of the cluster's node VMs placed under ``positions``: biggest first, or
    protected pools last when that places more (the order the geometry may have been derived in)."""
    nodes = node_vms(ctx, cluster)
    hosts, per_host = cluster["hosts"], cluster["gpu"]["per_host"]
    best = None
    for order in (sorted_node_vms(nodes), sorted_node_vms(nodes, last=protected(ctx))):
        cards, unplaced = place(order, hosts, per_host, positions)
        if best is None or len(unplaced) < len(best[1]):
            best = (cards, unplaced)
    return best


def cards_needed(nodes, gpus_per_host):
    """The cards ``nodes`` take placed alone on empty hosts of ``gpus_per_host`` cards (one card
    mode asked of all of them): what a shortfall of those nodes costs in GPUs."""
    if not nodes:
        return 0
    used, _unplaced = pack(nodes, len(nodes), gpus_per_host)
    return used


def free_cards(cards, positions, mig):
    """Free cards in MIG mode (``mig`` true) or with MIG off on the placed hosts ``cards``."""
    return sum(1 for h, host in enumerate(cards) for i, card in enumerate(host)
               if card is None and (i in positions[h]) == mig)


def host_loss(ctx, cluster, positions):
    """For each host position lost, what the protected pools lack on the other hosts, every card
    keeping its mode (``positions``): ``[(position, cards, rest, short)]``, the node VMs placed
    again on the other hosts (preemptible pools first, protected last, as :func:`place` gives
    ``cards`` under ``rest``, the other hosts' positions), ``short`` ``{pool name: [node VMs left
    out]}`` (each ``(pool, vgpus, per_card)``) for the protected pools."""
    keep = protected(ctx)
    nodes = sorted_node_vms(node_vms(ctx, cluster), last=keep)
    node_of = dict((node[0]["name"], node) for node in nodes)
    hosts, per_host = cluster["hosts"], cluster["gpu"]["per_host"]
    out = []
    for lost in range(hosts):
        rest = positions[:lost] + positions[lost + 1:]
        cards, unplaced = place(nodes, hosts - 1, per_host, rest)
        short = OrderedDict()
        for pool in unplaced:
            if keep(pool):
                short.setdefault(pool["name"], []).append(node_of[pool["name"]])
        out.append((lost, cards, rest, short))
    return out
