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


def pack(nodes, hosts, gpus_per_host):
    """First-fit placement of node VMs on hosts; returns (cards used, unplaced nodes).

    ``nodes`` is ``[(pool, vgpus, per_card)]`` in the order to place them; every vGPU of a
    node goes to a different card of one host; a card holds one profile (one pool's
    ``per_card`` vGPUs).
    """
    cards = [[None] * gpus_per_host for _host in range(hosts)]   # None or [pool name, used, cap]
    unplaced = []
    for pool, vgpus, cap in nodes:
        placed = False
        for host in cards:
            partial = [c for c in host if c is not None and c[0] == pool["name"] and c[1] < cap]
            free = [i for i, c in enumerate(host) if c is None]
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
    used = sum(1 for host in cards for c in host if c is not None)
    return used, unplaced


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
