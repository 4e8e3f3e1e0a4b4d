# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Live capacity of the pool (pure, standard library only): vGPU slots per cluster and
profile, the spare rule on the live fleet, pending GPU pods and Kueue admission waits.

Inputs are plain data: the host records of ``_gpu_inventory`` (GPUs, offered profiles, the
vGPU VMs with their profiles and power state), the normalized design (optional), and the
pods, Workloads and LocalQueues of a guest cluster (optional).

Cards. Where the host record has gpu_host_info's per-GPU view (each GPU's ``vgpu_mode`` and the
``vms`` vSphere placed on it, ``config.graphicsInfo[]``), a card follows its mode and carries what it
really carries: a GPU in MIG mode (``multiInstanceGpu``) takes only MIG-backed vGPUs whose GPU
instances fit together (``_nvidia.mig_fits``); a GPU without MIG takes only time-sliced and full-card
vGPUs - in ``sameSize`` mode (or ``none``) of one profile, up to ``_design_capacity.per_card`` of them
(memory / framebuffer), in ``mixedSize`` mode of several sizes as long as their framebuffer fits the
card. The vGPUs vSphere lists on a card are put there first. What the record does not place (a GPU
whose mode is not reported, before vSphere API 8.0.3; the VMs not read; a powered-on vGPU no card
lists) is placed here, the way a card of unknown mode can hold it: its first vGPU sets the card's
mode; the vGPUs of one VM go to different cards of its host; the placement is the tightest one
(partly used cards first, biggest VMs first, a greedy placement), so the free slots there are
optimistic: a real host whose vGPUs are spread over more cards holds fewer.

Slots of a profile P on a cluster: ``total`` - what the available hosts' cards would hold of
P alone (a card whose mode cannot take P counts none); ``used`` - powered-on vGPUs of P; ``free`` -
more vGPUs of P the cards take now (an empty card of a mode that takes P ``per_card``; a sameSize
card of P its room; a mixedSize card the P that fit in its free framebuffer; a MIG card as many more P
instances as still fit; any other card none); ``blocked`` - ``total - used - free``: slots that other
profiles hold.

Spare rule: the powered-on vGPU VMs of the largest host (most GPUs; of equal hosts the one
whose loss leaves the most protected VMs short) are restarted on the other available hosts'
free cards, protected pools first (they restart first), each VM's vGPUs on one host. The
others stay where they are (vGPU VMs do not migrate to make room). The pools whose VMs find
no room are named; the rule fails when a protected pool is among them.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import time
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    per_card,
    preemptible,
    profile_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback import (
    GPU_RESOURCES,
    ChargebackError,
    allocation,
    ksm_label,
    node_pools,
    parse_duration,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import POOL_LABEL
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import gang_scheduled
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import url_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._rfc3339 import epoch_seconds
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._queueing import (
    MODEL,
    MODEL_MGC,
    QueueingError,
    cv_from_durations,
    cv_from_waits,
    fit_service,
    knee,
    service_from_load,
    wait_rms,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    NvidiaError,
    gpu_model,
    mig_fits,
    parse_profile,
    vgpu_mig_profile,
)

POWERED_ON = "poweredOn"
UNMAPPED = "(profile %s)"
NO_POOL = "(none)"
GPU_RESOURCE_PREFIX = "nvidia.com/"

# the knee section when no Prometheus was given
KNEE_NOT_COMPUTED = "not computed: give prometheus_url (the guest cluster's Prometheus with kube-state-metrics)"


class CapacityError(ValueError):
    """Input the arithmetic cannot use."""


# ---------------------------------------------------------------------------------------
# profiles on cards
# ---------------------------------------------------------------------------------------

_CAP_CACHE = {}
_FIT_CACHE = {}


def _model(name):
    try:
        return gpu_model(name)
    except NvidiaError:
        return None


def profile_cap(profile, model):
    """(kind, per card, MIG profile name) of a vGPU profile on a model, or None when the model does not offer it."""
    key = (profile, model.name)
    if key not in _CAP_CACHE:
        value = None
        if profile_problem(profile, model) is None:
            parsed = parse_profile(profile)
            cap = per_card({"vgpu_profile": profile}, model)
            if parsed.mig_backed:
                value = ("mig", cap, vgpu_mig_profile(parsed, model).name)
            else:
                value = ("time_sliced", cap, None)
        _CAP_CACHE[key] = value
    return _CAP_CACHE[key]


def _mix_fits(model, mix):
    key = (model.name, tuple(sorted(mix.items())))
    if key not in _FIT_CACHE:
        _FIT_CACHE[key] = mig_fits(model, dict(mix))
    return _FIT_CACHE[key]


MIG = "mig"
TIME_SLICED = "time_sliced"
# gpu_host_info's vgpu_mode of a GPU -> (the kind of vGPU the card takes, several sizes at once)
CARD_MODES = {"multiInstanceGpu": (MIG, False), "sameSize": (TIME_SLICED, False),
              "mixedSize": (TIME_SLICED, True), "none": (TIME_SLICED, False)}


def _framebuffer(profile):
    try:
        return parse_profile(profile).framebuffer_gb
    except NvidiaError:
        return 0


class Card:
    """One GPU: empty, time-sliced with one profile (or several sizes in mixedSize mode), or in MIG mode
    with a mix of instances. ``lock``: the kind of vGPU the GPU's mode takes (``mig`` or ``time_sliced``;
    None when its mode is unknown: its first vGPU sets it)."""

    __slots__ = ("model", "mode", "profile", "count", "mix", "lock", "mixed", "fb")

    def __init__(self, model, lock=None, mixed=False):
        self.model = model
        self.mode = None
        self.profile = None
        self.count = 0
        self.mix = {}
        self.lock = lock
        self.mixed = mixed
        self.fb = 0

    @classmethod
    def of_gpu(cls, gpu):
        """The card of one GPU of a host record, in its mode when gpu_host_info reports it."""
        lock, mixed = CARD_MODES.get(gpu.get("vgpu_mode"), (None, False))
        return cls(_model(gpu.get("model")), lock, mixed)

    def copy(self):
        other = Card(self.model, self.lock, self.mixed)
        other.mode, other.profile, other.count, other.mix, other.fb = (
            self.mode, self.profile, self.count, dict(self.mix), self.fb)
        return other

    def takes(self, profile):
        """Whether the card's mode takes vGPUs of ``profile`` at all (empty or not)."""
        if self.model is None:
            return False
        cap = profile_cap(profile, self.model)
        return cap is not None and (self.lock is None or cap[0] == self.lock)

    def room(self, profile):
        """How many more vGPUs of ``profile`` this card takes now."""
        if not self.takes(profile):
            return 0
        kind, per, mig = profile_cap(profile, self.model)
        if self.mode is None:
            return per
        if kind != self.mode:
            return 0
        if kind == TIME_SLICED:
            if self.mixed:
                fb = _framebuffer(profile)
                return min(per, max(0, (self.model.memory_gb - self.fb) // fb)) if fb else 0
            return per - self.count if self.profile == profile else 0
        room = 0
        mix = dict(self.mix)
        while room < per:
            mix[mig] = mix.get(mig, 0) + 1
            if not _mix_fits(self.model, mix):
                break
            room += 1
        return room

    def add(self, profile):
        kind, _per, mig = profile_cap(profile, self.model)
        self.mode = kind
        self.count += 1
        if kind == TIME_SLICED:
            self.fb += _framebuffer(profile)
            self.profile = profile if self.profile in (None, profile) else "(mixed)"
        else:
            self.mix[mig] = self.mix.get(mig, 0) + 1


def _vgpus(vm):
    return [p.lower() for p in vm.get("vgpu_profiles") or []]


def _size(vm):
    """Sort key, biggest first: vGPUs, then framebuffer."""
    fb = 0
    for p in _vgpus(vm):
        try:
            fb += parse_profile(p).framebuffer_gb
        except NvidiaError:
            pass
    return (-len(_vgpus(vm)), -fb, vm.get("name") or "")


def place_vm(cards, vm):
    """Put the VM's vGPUs on distinct cards of one host (partly used cards first); whether it fit."""
    chosen = []
    for profile in sorted(_vgpus(vm)):
        best = None
        for index, card in enumerate(cards):
            if index in chosen or card.room(profile) < 1:
                continue
            if card.mode is not None:  # partly used: take it
                best = index
                break
            if best is None:
                best = index
        if best is None:
            return False
        chosen.append(best)
    for profile, index in zip(sorted(_vgpus(vm)), chosen):
        cards[index].add(profile)
    return True


def host_cards(host):
    """Cards of a host record (one per GPU, its catalog model - None for a model the catalog lacks - and
    its mode where gpu_host_info reports it)."""
    return [Card.of_gpu(g) for g in host.get("gpus") or []]


def available(host):
    return host.get("connection_state") == "connected" and not host.get("maintenance_mode") and bool(host.get("gpus"))


def powered_on(host):
    return [vm for vm in host.get("vgpu_vms") or [] if vm.get("power_state") == POWERED_ON and _vgpus(vm)]


def _vm_key(vm):
    return vm.get("moid") or vm.get("name")


def placed_by_vsphere(host):
    """{VM key: [(card index, profile)]} of the vGPUs the host record places on its cards (each GPU's
    ``vms``, gpu_host_info's per-GPU view); GPUs without that view place nothing."""
    out = OrderedDict()
    for index, g in enumerate(host.get("gpus") or []):
        for vm in g.get("vms") or []:
            key = vm.get("moid") or vm.get("name")
            for profile in vm.get("profiles") or []:
                out.setdefault(key, []).append((index, str(profile).lower()))
    return out


def pack_host(host):
    """(cards, VMs that do not fit) for the host's powered-on vGPU VMs: the vGPUs each card really
    carries first (a VM whose vGPUs its cards cannot hold - an inconsistent read - does not fit), then
    the others, biggest first, placed as a card of their mode can hold them."""
    cards = host_cards(host)
    unplaced = []
    real = placed_by_vsphere(host)
    rest = []
    for vm in powered_on(host):
        where = real.get(_vm_key(vm))
        if not where:
            rest.append(vm)
            continue
        fits = True
        for index, profile in where:
            if cards[index].room(profile) >= 1:
                cards[index].add(profile)
            else:
                fits = False
        if not fits:
            unplaced.append(vm)
    for vm in sorted(rest, key=_size):
        if not place_vm(cards, vm):
            unplaced.append(vm)
    return cards, unplaced


def _offered(host, profile):
    offered = [p.lower() for p in host.get("vgpu_profiles") or []]
    return profile in offered


# ---------------------------------------------------------------------------------------
# design pools
# ---------------------------------------------------------------------------------------


class Pools:
    """Which design pool a vGPU VM or a pod belongs to (the design optional)."""

    def __init__(self, design=None):
        self.design = design or {}
        self.pools = [p for p in self.design.get("pools") or [] if isinstance(p, dict) and p.get("name")]
        self.priorities = self.design.get("priorities") or {}

    def by_name(self, name):
        for pool in self.pools:
            if pool["name"] == name:
                return pool
        return None

    def of_vm(self, cluster, vm):
        """The pool name of a VM (its cluster's pool with the VM's profile; of several, the one whose node
        pool or VM class the VM's name holds), or None."""
        profiles = sorted(set(_vgpus(vm)))
        if len(profiles) != 1:
            return None
        found = [p for p in self.pools if p.get("cluster") == cluster
                 and str(p.get("vgpu_profile") or "").lower() == profiles[0]]
        if len(found) > 1:
            name = vm.get("name") or ""
            found = [p for p in found if (p.get("node_pool") or {}).get("name", p["name"]) in name
                     or (p.get("vm_class") or {}).get("name", "\0") in name]
        return found[0]["name"] if len(found) == 1 else None

    def group(self, cluster, vm):
        """The pool name, or ``(profile <p>)`` for a VM no pool claims."""
        return self.of_vm(cluster, vm) or UNMAPPED % ",".join(sorted(set(_vgpus(vm))))

    def protected(self, group):
        """A pool is protected unless the design makes it preemptible; a VM of no pool is protected."""
        pool = self.by_name(group)
        return pool is None or not preemptible(pool, self.priorities)

    def profiles_of(self, cluster):
        return [str(p["vgpu_profile"]).lower() for p in self.pools if p.get("cluster") == cluster and p.get("vgpu_profile")]

    def of_pod(self, pod_spec, resources):
        """Pool of a pod: node selector or required node affinity on the pool label, a toleration of
        the pool taint, or the only pool whose MIG profile the pod requests (mixed strategy)."""
        selector = pod_spec.get("nodeSelector") or {}
        if selector.get(POOL_LABEL):
            return selector[POOL_LABEL]
        affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        for term in required.get("nodeSelectorTerms") or []:
            for expr in term.get("matchExpressions") or []:
                if expr.get("key") == POOL_LABEL and expr.get("operator") == "In" and expr.get("values"):
                    return expr["values"][0]
        for tol in pod_spec.get("tolerations") or []:
            if tol.get("key") == POOL_LABEL and tol.get("value"):
                return tol["value"]
        for resource in resources:
            if resource.startswith("nvidia.com/mig-"):
                mig = resource[len("nvidia.com/mig-"):]
                found = []
                for pool in self.pools:
                    try:
                        if parse_profile(pool.get("vgpu_profile")).mig_profile == mig:
                            found.append(pool["name"])
                    except NvidiaError:
                        continue
                if len(found) == 1:
                    return found[0]
        return NO_POOL


# ---------------------------------------------------------------------------------------
# slots
# ---------------------------------------------------------------------------------------


def _clusters(hosts):
    out = OrderedDict()
    for host in sorted(hosts, key=lambda h: ((h.get("cluster") or ""), h.get("name") or "")):
        out.setdefault(host.get("cluster") or "", []).append(host)
    return out


def slots(hosts, pools=None, profiles=None):
    """Per cluster: the slots of every profile in use, of the design's pools and of ``profiles``."""
    pools = pools or Pools()
    out = OrderedDict()
    for cluster, members in _clusters(hosts).items():
        gpu_hosts = [h for h in members if h.get("gpus")]
        if not gpu_hosts:
            continue
        packed = dict((h["name"], pack_host(h)) for h in gpu_hosts)
        names = []
        for h in gpu_hosts:
            for vm in h.get("vgpu_vms") or []:
                names.extend(_vgpus(vm))
        names.extend(pools.profiles_of(cluster))
        names.extend(p.lower() for p in profiles or [])
        table = OrderedDict()
        for profile in sorted(set(names)):
            row = OrderedDict([("total", 0), ("used", 0), ("free", 0), ("blocked", 0), ("powered_off", 0),
                               ("per_card", None), ("hosts_with_room", 0)])
            for h in gpu_hosts:
                cards, _unplaced = packed[h["name"]]
                used = sum(_vgpus(vm).count(profile) for vm in powered_on(h))
                row["used"] += used
                row["powered_off"] += sum(_vgpus(vm).count(profile) for vm in h.get("vgpu_vms") or []
                                          if vm.get("power_state") != POWERED_ON)
                if not available(h) or not _offered(h, profile):
                    continue
                total = 0
                free = 0
                for card in cards:
                    cap = profile_cap(profile, card.model) if card.model is not None else None
                    if cap is None:
                        continue
                    row["per_card"] = cap[1]
                    if not card.takes(profile):  # a card whose mode cannot take the profile holds none of it
                        continue
                    total += cap[1]
                    free += card.room(profile)
                row["total"] += total
                row["free"] += free
                if free:
                    row["hosts_with_room"] += 1
            row["blocked"] = max(0, row["total"] - row["used"] - row["free"])
            table[profile] = row
        unplaced = [dict(host=h["name"], vm=vm["name"], vgpu_profiles=_vgpus(vm))
                    for h in gpu_hosts for vm in packed[h["name"]][1]]
        # after a host failure: the vGPU VMs vSphere HA did not restart stay off on the failed host
        stranded = [dict(host=h["name"], vm=vm["name"], vgpu_profiles=_vgpus(vm))
                    for h in gpu_hosts if not available(h) for vm in h.get("vgpu_vms") or []
                    if vm.get("power_state") != POWERED_ON and _vgpus(vm)]
        out[cluster] = OrderedDict([
            ("hosts", len(members)),
            ("gpu_hosts", len(gpu_hosts)),
            ("available_hosts", sorted(h["name"] for h in gpu_hosts if available(h))),
            ("unavailable_hosts", sorted(h["name"] for h in gpu_hosts if not available(h))),
            ("gpus", sum(len(h.get("gpus") or []) for h in gpu_hosts)),
            ("gpus_in_use", sum(1 for h in gpu_hosts for c in packed[h["name"]][0] if c.mode is not None)),
            ("profiles", table),
            ("overcommitted", unplaced),
            ("off_on_unavailable_hosts", stranded),
        ])
    return out


# ---------------------------------------------------------------------------------------
# spare rule
# ---------------------------------------------------------------------------------------


def _restart(down, others, pools, cluster):
    """Place the powered-on VMs of ``down`` on copies of the other hosts' cards; the VMs left over."""
    targets = [[c.copy() for c in cards] for _name, cards in others]
    order = sorted(powered_on(down), key=lambda vm: (not pools.protected(pools.group(cluster, vm)),) + _size(vm))
    short = []
    for vm in order:
        if not any(place_vm(cards, vm) for cards in targets):
            short.append(vm)
    return order, short


def spare(hosts, pools=None):
    """Per cluster with vGPU VMs: whether the powered-on vGPU VMs fit with its largest host down."""
    pools = pools or Pools()
    out = OrderedDict()
    for cluster, members in _clusters(hosts).items():
        up = [h for h in members if available(h)]
        if not any(powered_on(h) for h in up):
            continue
        packed = dict((h["name"], pack_host(h)[0]) for h in up)
        most = max(len(h["gpus"]) for h in up)
        worst = None
        for down in [h for h in up if len(h["gpus"]) == most]:
            others = [(h["name"], packed[h["name"]]) for h in up if h is not down]
            moved, short = _restart(down, others, pools, cluster)
            protected_short = sum(1 for vm in short if pools.protected(pools.group(cluster, vm)))
            key = (protected_short, len(short), len(moved))
            if worst is None or key > worst[0]:
                worst = (key, down, moved, short)
        _key, down, moved, short = worst
        groups = OrderedDict()
        for vm in short:
            group = pools.group(cluster, vm)
            entry = groups.setdefault(group, OrderedDict([
                ("pool", group), ("protected", pools.protected(group)),
                ("vgpu_profiles", []), ("vms", [])]))
            for p in _vgpus(vm):
                if p not in entry["vgpu_profiles"]:
                    entry["vgpu_profiles"].append(p)
            entry["vms"].append(vm["name"])
        failing = [g for g in groups.values() if g["protected"]]
        out[cluster] = OrderedDict([
            ("ok", not failing),
            ("host_down", down["name"]),
            ("host_gpus", most),
            ("hosts_left", len(up) - 1),
            ("vms_to_restart", len(moved)),
            ("vms_short", len(short)),
            ("short", list(groups.values())),
            ("message", spare_message(cluster, down["name"], most, len(moved), list(groups.values()))),
        ])
    return out


def spare_message(cluster, host, gpus, moved, groups):
    if not groups:
        return ("%s: with %s (%d GPUs) down, its %d powered-on vGPU VMs restart on the other hosts"
                % (cluster, host, gpus, moved))
    parts = ["%s%s %d VM%s (%s)" % (g["pool"], "" if g["protected"] else " [preemptible]", len(g["vms"]),
                                    "" if len(g["vms"]) == 1 else "s", ", ".join(g["vgpu_profiles"]))
             for g in groups]
    return ("%s: with %s (%d GPUs) down, %d of its %d powered-on vGPU VMs find no free card: %s"
            % (cluster, host, gpus, sum(len(g["vms"]) for g in groups), moved, "; ".join(parts)))


# ---------------------------------------------------------------------------------------
# guest cluster: pending GPU pods, Kueue
# ---------------------------------------------------------------------------------------


def parse_k8s_time(text):
    """Whole seconds since the epoch of a Kubernetes RFC 3339 time (``2026-11-30T16:00:00Z``) or of the
    client's datetime, or None (``pure/_rfc3339``)."""
    return epoch_seconds(text)


def gpu_requests(pod_spec):
    """{resource: count} of the GPU resources (``nvidia.com/...``) the pod's containers request."""
    out = OrderedDict()
    for container in pod_spec.get("containers") or []:
        res = container.get("resources") or {}
        wanted = dict(res.get("limits") or {})
        wanted.update(res.get("requests") or {})
        for name, value in sorted(wanted.items()):
            if name.startswith(GPU_RESOURCE_PREFIX):
                try:
                    count = int(str(value))
                except ValueError:
                    continue
                out[name] = out.get(name, 0) + count
    return out


def _pending_reason(pod):
    status = pod.get("status") or {}
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    if gates:
        return "SchedulingGated (%s)" % ", ".join(g.get("name", "?") for g in gates)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return cond.get("reason") or "NotScheduled"
    return "NotScheduled" if not (pod.get("spec") or {}).get("nodeName") else "ContainersNotStarted"


def pending_pods(pods, now, pools=None):
    """Per pool: the Pending pods that request GPUs, their GPUs, the longest wait and the reasons."""
    pools = pools or Pools()
    out = OrderedDict()
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Pending":
            continue
        spec = pod.get("spec") or {}
        wanted = gpu_requests(spec)
        if not wanted:
            continue
        pool = pools.of_pod(spec, wanted)
        meta = pod.get("metadata") or {}
        created = parse_k8s_time(meta.get("creationTimestamp"))
        wait = max(0.0, now - created) if created is not None else None
        entry = out.setdefault(pool, OrderedDict([("pool", pool), ("pods", 0), ("gpus", OrderedDict()),
                                                  ("oldest_wait_s", None), ("reasons", OrderedDict()),
                                                  ("examples", [])]))
        entry["pods"] += 1
        for name, count in wanted.items():
            entry["gpus"][name] = entry["gpus"].get(name, 0) + count
        if wait is not None and (entry["oldest_wait_s"] is None or wait > entry["oldest_wait_s"]):
            entry["oldest_wait_s"] = round(wait, 1)
        reason = _pending_reason(pod)
        entry["reasons"][reason] = entry["reasons"].get(reason, 0) + 1
        if len(entry["examples"]) < 5:
            entry["examples"].append("%s/%s" % (meta.get("namespace"), meta.get("name")))
    return list(sorted(out.values(), key=lambda e: e["pool"]))


def _condition(obj, kind):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def _is_true(obj, kind):
    cond = _condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def _wait_stats(waits):
    if not waits:
        return None
    ordered = sorted(waits)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    return OrderedDict([("count", len(ordered)), ("mean_s", round(sum(ordered) / len(ordered), 1)),
                        ("median_s", round(median, 1)), ("max_s", round(ordered[-1], 1))])


def kueue_waits(workloads, local_queues, now):
    """Per LocalQueue and per ClusterQueue: pending Workloads with their longest wait, and the
    admission wait (creation to the Admitted condition's lastTransitionTime) of admitted ones."""
    lq_cq = {}
    for lq in local_queues:
        meta = lq.get("metadata") or {}
        lq_cq[(meta.get("namespace"), meta.get("name"))] = (lq.get("spec") or {}).get("clusterQueue")
    per_lq = OrderedDict()
    per_cq = OrderedDict()
    for wl in workloads:
        meta = wl.get("metadata") or {}
        if _is_true(wl, "Finished"):
            continue
        queue = (wl.get("spec") or {}).get("queueName")
        created = parse_k8s_time(meta.get("creationTimestamp"))
        admitted = _is_true(wl, "Admitted")
        admission = (wl.get("status") or {}).get("admission") or {}
        cq = admission.get("clusterQueue") or lq_cq.get((meta.get("namespace"), queue))
        wait = None
        if admitted:
            at = parse_k8s_time(_condition(wl, "Admitted").get("lastTransitionTime"))
            if at is not None and created is not None:
                wait = max(0.0, at - created)
        elif created is not None:
            wait = max(0.0, now - created)
        for table, key, extra in ((per_lq, "%s/%s" % (meta.get("namespace"), queue), dict(cluster_queue=cq)),
                                  (per_cq, cq or NO_POOL, {})):
            entry = table.setdefault(key, OrderedDict([("queue", key)] + list(extra.items()) + [
                ("pending", 0), ("admitted", 0), ("oldest_pending_s", None), ("_waits", [])]))
            if admitted:
                entry["admitted"] += 1
                if wait is not None:
                    entry["_waits"].append(wait)
            else:
                entry["pending"] += 1
                if wait is not None and (entry["oldest_pending_s"] is None or wait > entry["oldest_pending_s"]):
                    entry["oldest_pending_s"] = round(wait, 1)
    for table in (per_lq, per_cq):
        for entry in table.values():
            entry["admission_wait"] = _wait_stats(entry.pop("_waits"))
    return OrderedDict([("local_queues", list(per_lq.values())), ("cluster_queues", list(per_cq.values()))])


# ---------------------------------------------------------------------------------------
# the queueing knee, from Prometheus samples
# ---------------------------------------------------------------------------------------

KNEE_DEFAULTS = OrderedDict([("knee_range", "7d"), ("knee_window", "15m"), ("knee_step", "30s")])
# the knee queries read as range queries (one point per window); the others are instant queries
KNEE_RANGE_QUERIES = ("allocated", "capacity", "kueue_wait_sum", "kueue_wait_count")
# Kueue's admission wait histogram (kueue_admission_wait_time_seconds, label cluster_queue) and the
# ClusterQueue the design derives for a gang-scheduled pool (_design_derive)
KUEUE_WAIT = "kueue_admission_wait_time_seconds"
KUEUE_CLUSTER_QUEUE = "gpupool-%s"


def knee_settings(params):
    """(range, window, step) in seconds from the module's ``knee_range``, ``knee_window`` and
    ``knee_step``; raises CapacityError naming the option that is wrong."""
    out = []
    for key, default in KNEE_DEFAULTS.items():
        given = params.get(key)
        given = default if given is None else given
        try:
            value = parse_duration(given)
        except ChargebackError as exc:
            raise CapacityError("%s: %s" % (key, exc))
        if value < 1 or value != int(value):
            raise CapacityError("%s must be a whole number of seconds, 1 or more, not %r" % (key, given))
        out.append(int(value))
    span, window, step = out
    if window > span:
        raise CapacityError("knee_window (%d s) is longer than knee_range (%d s)" % (window, span))
    if step > window:
        raise CapacityError("knee_step (%d s) is longer than knee_window (%d s)" % (step, window))
    return span, window, step


def knee_input_errors(params):
    """The input errors of the knee options (for _inputs)."""
    out = url_errors(params, ("prometheus_url",))
    try:
        knee_settings(params)
    except CapacityError as exc:
        out.append(str(exc))
    return out


def _last_node_pools(span):
    """Every node seen in the last ``span`` seconds with its pool label (from kube_node_labels)."""
    return ('max by (node, pool) (label_replace(last_over_time(kube_node_labels[%ds]), "pool", "$1", "%s", "(.+)"))'
            % (span, ksm_label(POOL_LABEL)))


def knee_queries(span, window, step):
    """The PromQL of the knee. Instant queries (at the end of the range): ``scheduled`` and
    ``created`` per pod (kube-state-metrics' ``kube_pod_status_scheduled_time`` and
    ``kube_pod_created``, last value in the range: pods gone since still count), ``pod_pools``
    the GPUs each pod requested on the node it was bound to, with the node's pool. Range queries
    (one point per window): ``allocated`` (GPUs requested by Running pods, the chargeback's
    allocation) and ``capacity`` (GPUs the pool's nodes offer), each averaged over the window
    from samples ``step`` apart. ``durations`` (instant): per pod the seconds it was Running in the
    range (the steps ``step`` apart at which its phase was Running, times ``step``), leaving out the
    pods still Running at the end (their duration is not known yet): the job durations whose
    coefficient of variation the M/G/c model takes. ``kueue_wait_sum`` and ``kueue_wait_count``
    (range, per window): the increase of Kueue's admission wait histogram's ``_sum`` and ``_count``
    per ClusterQueue, the admission waits of the Kueue-gated pools."""
    pods = "namespace, pod, uid"
    capacity = ('sum by (pool) (kube_node_status_allocatable{resource=~"%s"} * on (node) group_left (pool) %s)'
                % (GPU_RESOURCES, node_pools()))
    allocated = "(%s) or (%s * 0)" % (allocation(by=("pool",)), capacity)
    return OrderedDict([
        ("scheduled", "max by (%s) (last_over_time(kube_pod_status_scheduled_time[%ds]))" % (pods, span)),
        ("created", "max by (%s) (last_over_time(kube_pod_created[%ds]))" % (pods, span)),
        ("pod_pools", 'sum by (%s, pool) (last_over_time(kube_pod_container_resource_requests{resource=~"%s", '
                      'node!=""}[%ds]) * on (node) group_left (pool) %s)' % (pods, GPU_RESOURCES, span,
                                                                             _last_node_pools(span))),
        ("allocated", "avg_over_time((%s)[%ds:%ds])" % (allocated, window, step)),
        ("capacity", "avg_over_time((%s)[%ds:%ds])" % (capacity, window, step)),
        ("durations", 'sum by (%s) (count_over_time((kube_pod_status_phase{phase="Running"} == 1)[%ds:%ds])) * %d '
                      'unless on (%s) (kube_pod_status_phase{phase="Running"} == 1)' % (pods, span, step, step, pods)),
        ("kueue_wait_sum", "sum by (cluster_queue) (increase(%s_sum[%ds]))" % (KUEUE_WAIT, window)),
        ("kueue_wait_count", "sum by (cluster_queue) (increase(%s_count[%ds]))" % (KUEUE_WAIT, window)),
    ])


def _pod_key(metric):
    return (metric.get("namespace"), metric.get("pod"), metric.get("uid"))


def _vector(result):
    out = {}
    for row in result or []:
        try:
            out[_pod_key(row["metric"])] = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
    return out


def _matrix(result, label="pool"):
    """{pool: {timestamp: value}} of a range query by pool (or by ``label``)."""
    out = OrderedDict()
    for row in result or []:
        pool = (row.get("metric") or {}).get(label)
        if not pool:
            continue
        series = out.setdefault(pool, OrderedDict())
        for t, v in row.get("values") or []:
            try:
                series[int(round(float(t)))] = float(v)
            except (TypeError, ValueError):
                continue
    return out


def pod_waits(scheduled, created, pod_pools_result, start, end):
    """{pool: [(created, wait seconds, GPUs)]} of the GPU pods created in [start, end] and
    scheduled; ``pending``: {pool: count} is not known here (an unscheduled pod has no node)."""
    sched, made = _vector(scheduled), _vector(created)
    out = OrderedDict()
    for row in pod_pools_result or []:
        metric = row.get("metric") or {}
        key = _pod_key(metric)
        pool = metric.get("pool")
        if not pool or key not in sched or key not in made:
            continue
        if not start <= made[key] <= end:
            continue
        try:
            gpus = float(row["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            gpus = 0.0
        out.setdefault(pool, []).append((made[key], max(0.0, sched[key] - made[key]), gpus))
    for waits in out.values():
        waits.sort()
    return out


def pod_durations(durations, created, pod_pools_result, start, end):
    """{pool: [seconds Running]} of the GPU pods created in [start, end] whose duration is known
    (the ``durations`` query: done, not Running at the end)."""
    held, made = _vector(durations), _vector(created)
    out = OrderedDict()
    for row in pod_pools_result or []:
        metric = row.get("metric") or {}
        key = _pod_key(metric)
        pool = metric.get("pool")
        if pool and key in held and key in made and start <= made[key] <= end:
            out.setdefault(pool, []).append(held[key])
    return out


def knee_samples(waits, allocated, capacity, window):
    """[(window end, utilization, mean wait, pods)] of one pool: one sample per window of the
    range queries, the waits of the pods created in it (``(end - window, end]``)."""
    out = []
    for end, cap in capacity.items():
        if cap <= 0:
            continue
        rho = allocated.get(end, 0.0) / cap
        inside = [w for t, w, _g in waits if end - window < t <= end]
        out.append((end, rho, sum(inside) / len(inside) if inside else None, len(inside)))
    return out


def kueue_samples(wait_sum, wait_count, allocated, capacity):
    """[(window end, utilization, mean admission wait, workloads)] of one Kueue-gated pool from the
    increase of its ClusterQueue's admission wait histogram per window (``_sum`` over ``_count``;
    the count rounded: Prometheus extrapolates an increase to the window's edges); None when the
    histogram admitted nothing in the range (Kueue's metrics not scraped, or no workload)."""
    if not any(wait_count.get(end, 0.0) >= 0.5 for end in capacity):
        return None
    out = []
    for end, cap in capacity.items():
        if cap <= 0:
            continue
        rho = allocated.get(end, 0.0) / cap
        count = int(round(wait_count.get(end, 0.0)))
        out.append((end, rho, max(0.0, wait_sum.get(end, 0.0)) / wait_count[end] if count else None, count))
    return out


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _mgc(cv=None, source=None, count=0):
    return OrderedDict([("model", MODEL_MGC), ("cv", None if cv is None else round(cv, 3)), ("cv_source", source),
                        ("durations", count), ("wait_fit_service_s", None), ("fit_rms_s", None),
                        ("knee_utilization", None), ("past_knee", None)])


def _pick_cv(durations, service, wait_fit):
    """(cv, source, durations counted): the CV of the pods' durations when two or more are known,
    else the one the waits imply (``cv_from_waits``), else None."""
    cv, _mean, count = cv_from_durations(durations or [])
    if cv is not None:
        return cv, "durations", count
    cv = cv_from_waits(service, wait_fit)
    return cv, (None if cv is None else "waits"), count


def _knee_text(percentile, target, value, planned):
    return "the p%s wait reaches %s s at %.1f %% utilization%s" % (
        ("%g" % percentile), ("%g" % target), value * 100,
        "" if planned is None else ", planned %.0f %%: %s" % (
            planned * 100, "PAST THE KNEE" if planned > value else "below it"))


def pool_knee(name, samples, gpus_now, gpus_per_job, window, slo=None, durations=None, waits="pod scheduling"):
    """The knee of one pool (M/M/c, ``_queueing``) with ``c`` = the GPUs its nodes offer now over
    the GPUs of one job: the service time measured from the samples (Little's law), the model's
    waits against the measured ones, and, with ``slo`` (the design's pool ``slo`` block), the
    utilization at which the modelled wait at the SLO percentile reaches the target. ``mgc``: the
    same under M/G/c (Allen-Cunneen) with the coefficient of variation of ``durations`` (the pods'
    seconds Running), or, with fewer than two, the one the waits imply. ``waits``: what the samples'
    waits are (``pod scheduling``, or ``Kueue admission`` from Kueue's histogram)."""
    slo = slo or {}
    gpus_now = int(gpus_now) if float(gpus_now or 0).is_integer() else round(gpus_now, 2)
    servers = int(gpus_now // gpus_per_job) if gpus_now else 0
    busy = [(rho, n) for _t, rho, _w, n in samples]
    mean_rho = sum(r for r, _n in busy) / len(busy) if busy else None
    entry = OrderedDict([
        ("pool", name), ("model", MODEL), ("waits", waits), ("gpus", gpus_now), ("gpus_per_job", gpus_per_job), ("servers", servers),
        ("windows", len(samples)), ("pods", sum(n for _t, _r, _w, n in samples)),
        ("mean_utilization", None if mean_rho is None else round(mean_rho, 4)),
        ("service_s", None), ("wait_fit_service_s", None), ("fit_rms_s", None), ("windows_used", 0),
        ("windows_left_out", 0),
        ("slo_wait_s", slo.get("wait_seconds")), ("slo_percentile", slo.get("percentile")),
        ("knee_utilization", None), ("planned_utilization", slo.get("planned_utilization")), ("past_knee", None),
        ("mgc", _mgc()),
        ("samples", [OrderedDict([("end", _iso(t)), ("utilization", round(rho, 4)),
                                  ("mean_wait_s", None if w is None else round(w, 2)), ("pods", n)])
                     for t, rho, w, n in samples]),
        ("message", ""),
    ])
    if servers < 1:
        entry["message"] = "%s: no GPUs on the pool's nodes (%s), so no model" % (name, gpus_now)
        return entry
    # the samples as the module reports them (rounded), so the result can be checked from its own data
    rows = [(s["utilization"], s["mean_wait_s"], s["pods"]) for s in entry["samples"]]
    service = service_from_load(servers, window, [(rho, n) for rho, _w, n in rows])
    fit = fit_service(servers, rows)
    entry.update(windows_used=fit["used"], windows_left_out=fit["left_out"])
    if fit["service_s"] is not None:
        entry["wait_fit_service_s"] = round(fit["service_s"], 3)
    if not service:
        entry["message"] = ("%s: no GPU pod came and held its GPUs in the %d windows, so no service time to "
                            "model" % (name, len(samples)))
        return entry
    entry["service_s"] = round(service, 3)
    rms = wait_rms(servers, rows, service)
    if rms is not None:
        entry["fit_rms_s"] = round(rms, 3)
    used = fit["used"]
    cv, source, count = _pick_cv(durations, service, fit["service_s"])
    mgc = entry["mgc"] = _mgc(cv, source, count)
    if cv is not None:
        mgc_fit = fit_service(servers, rows, cv=cv)
        if mgc_fit["service_s"] is not None:
            mgc["wait_fit_service_s"] = round(mgc_fit["service_s"], 3)
        mgc_rms = wait_rms(servers, rows, service, cv=cv)
        mgc["fit_rms_s"] = None if mgc_rms is None else round(mgc_rms, 3)
    text = "%s: M/M/%d, service time %.1f s measured (the waits fit %s; RMS error of the modelled waits %s)" % (
        name, servers, service, "%.1f s" % fit["service_s"] if fit["service_s"] is not None else "no service time",
        "%.1f s over %d windows" % (entry["fit_rms_s"], used) if used else "not known: no window below "
        "saturation with pods")
    mgc_text = "; M/G/%d (Allen-Cunneen): %s" % (servers, "no CV of the durations: fewer than two pods done and "
                                                          "no wait to fit" if cv is None else
                                                 "CV %.2f from %s, RMS error %s" % (
                                                     cv, "%d pod durations" % count if source == "durations"
                                                     else "the waits", "-" if mgc["fit_rms_s"] is None
                                                     else "%.1f s" % mgc["fit_rms_s"]))
    target, percentile = slo.get("wait_seconds"), slo.get("percentile") or 95.0
    if target is None:
        entry["message"] = text + mgc_text + "; no slo.wait_seconds in the design, so no knee"
        return entry
    planned = slo.get("planned_utilization")
    try:
        value = knee(servers, service, target, percentile)
    except QueueingError as exc:
        entry["message"] = text + mgc_text + "; no knee: %s" % exc
        return entry
    entry["knee_utilization"] = round(value, 4)
    entry["past_knee"] = None if planned is None else planned > value
    text += "; " + _knee_text(percentile, target, value, planned) + mgc_text
    if cv is not None:
        value = knee(servers, service, target, percentile, cv=cv)
        mgc["knee_utilization"] = round(value, 4)
        mgc["past_knee"] = None if planned is None else planned > value
        text += ": " + _knee_text(percentile, target, value, planned)
    entry["message"] = text
    return entry


def knees(results, start, end, window, pools=None):
    """Per pool (those with GPU capacity in the range), its knee (``pool_knee``) from the knee
    queries' ``results``. ``pools``: the design's pools (``Pools``), for each pool's
    ``training.gpus_per_job`` and ``slo``. A Kueue-gated pool (gang-scheduled) takes its waits from
    Kueue's admission wait histogram of its ClusterQueue where that admitted workloads in the range,
    the others (and it, without the histogram) the pods' scheduling waits."""
    waits = pod_waits(results["scheduled"], results["created"], results["pod_pools"], start, end)
    held = pod_durations(results.get("durations"), results["created"], results["pod_pools"], start, end)
    allocated, capacity = _matrix(results["allocated"]), _matrix(results["capacity"])
    kueue_sum = _matrix(results.get("kueue_wait_sum"), "cluster_queue")
    kueue_count = _matrix(results.get("kueue_wait_count"), "cluster_queue")
    out = OrderedDict()
    for name in sorted(capacity):
        design = pools.by_name(name) if pools is not None else None
        gpus_per_job = ((design or {}).get("training") or {}).get("gpus_per_job") or 1
        series = capacity[name]
        gpus_now = series[max(series)] if series else 0
        samples, source = None, "pod scheduling"
        if design is not None and gang_scheduled(design):
            queue = KUEUE_CLUSTER_QUEUE % name
            samples = kueue_samples(kueue_sum.get(queue, {}), kueue_count.get(queue, {}), allocated.get(name, {}),
                                    series)
            source = "Kueue admission"
        if samples is None:
            samples, source = knee_samples(waits.get(name, []), allocated.get(name, {}), series, window), "pod scheduling"
        out[name] = pool_knee(name, samples, gpus_now, gpus_per_job, window, (design or {}).get("slo"),
                              held.get(name), source)
    return out


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------


def _cell(value):
    return "-" if value is None else str(value)


def _percent(value):
    return "-" if value is None else "%.1f %%" % (value * 100)


def markdown(report):
    """The capacity report as Markdown."""
    lines = ["# GPU capacity", ""]
    if report.get("generated"):
        lines += ["Read at %s." % report["generated"], ""]
    lines += ["## vGPU slots", "",
              "Each card's slots follow its mode (MIG-backed vGPUs only on MIG GPUs, time-sliced and full-card "
              "ones only on the others) and start from the vGPUs vSphere places on it; where a host does not "
              "say, its vGPUs are placed as tightly as they go, so free slots there are optimistic.", ""]
    for cluster, entry in (report.get("clusters") or {}).items():
        lines += ["### %s" % cluster, "",
                  "%d GPU hosts (%d available), %d GPUs, %d in use." % (
                      entry["gpu_hosts"], len(entry["available_hosts"]), entry["gpus"], entry["gpus_in_use"]), "",
                  "| profile | per card | total | used | free | blocked by other profiles | powered off |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for profile, row in entry["profiles"].items():
            lines.append("| %s | %s | %d | %d | %d | %d | %d |" % (
                profile, _cell(row["per_card"]), row["total"], row["used"], row["free"], row["blocked"],
                row["powered_off"]))
        if entry["unavailable_hosts"]:
            lines += ["", "Not counted (maintenance mode or not connected): %s." % ", ".join(entry["unavailable_hosts"])]
        if entry["overcommitted"]:
            lines += ["", "vGPUs that no card of their host can hold: %s." % ", ".join(
                "%s on %s" % (o["vm"], o["host"]) for o in entry["overcommitted"])]
        if entry.get("off_on_unavailable_hosts"):
            lines += ["", "Powered-off vGPU VMs on hosts not counted (after a host failure, those HA did not restart): %s." % (
                ", ".join("%s on %s" % (o["vm"], o["host"]) for o in entry["off_on_unavailable_hosts"]))]
        lines.append("")
    lines += ["## Spare rule (largest host down)", ""]
    spares = report.get("spare") or {}
    if not spares:
        lines += ["No cluster runs powered-on vGPU VMs.", ""]
    for cluster, entry in spares.items():
        lines += ["- **%s**: %s. %s" % (cluster, "holds" if entry["ok"] else "FAILS", entry["message"])]
    lines.append("")
    guest = report.get("guest")
    if guest is not None:
        lines += ["## Pending GPU pods", ""]
        if not guest.get("pending_pods"):
            lines += ["None.", ""]
        else:
            lines += ["| pool | pods | GPUs | oldest wait (s) | reasons |", "|---|---:|---|---:|---|"]
            for e in guest["pending_pods"]:
                lines.append("| %s | %d | %s | %s | %s |" % (
                    e["pool"], e["pods"], ", ".join("%s: %d" % kv for kv in e["gpus"].items()),
                    _cell(e["oldest_wait_s"]), ", ".join("%s: %d" % kv for kv in e["reasons"].items())))
            lines.append("")
        kueue = guest.get("kueue")
        lines += ["## Kueue admission", ""]
        if kueue is None:
            lines += ["Kueue is not installed in the guest cluster.", ""]
        else:
            lines += ["| ClusterQueue | pending | oldest pending (s) | admitted | admission wait mean / max (s) |",
                      "|---|---:|---:|---:|---|"]
            for e in kueue["cluster_queues"]:
                stats = e["admission_wait"]
                lines.append("| %s | %d | %s | %d | %s |" % (
                    e["queue"], e["pending"], _cell(e["oldest_pending_s"]), e["admitted"],
                    "%s / %s" % (stats["mean_s"], stats["max_s"]) if stats else "-"))
            lines += ["", "| LocalQueue | ClusterQueue | pending | oldest pending (s) | admitted |",
                      "|---|---|---:|---:|---:|"]
            for e in kueue["local_queues"]:
                lines.append("| %s | %s | %d | %s | %d |" % (
                    e["queue"], _cell(e["cluster_queue"]), e["pending"], _cell(e["oldest_pending_s"]), e["admitted"]))
            lines.append("")
    lines += ["## Queueing knee", ""]
    knee_report = report.get("knee")
    if knee_report is None:
        lines += [KNEE_NOT_COMPUTED + ".", ""]
    elif not knee_report:
        lines += ["No pool with GPU nodes in Prometheus over the range.", ""]
    else:
        lines += ["%s, its service time measured from the pool's utilization and GPU pods per window, its "
                  "waits set against the pods' scheduling waits; beside it %s with the coefficient of variation "
                  "of the pods' durations (or, without two of them, the one the waits imply) "
                  "(docs/capacity.md)." % (MODEL, MODEL_MGC), "",
                  "| pool | servers (GPUs / job) | windows used | service time (s) | SLO | knee | planned "
                  "| RMS error (s) | CV of durations | M/G/c knee | M/G/c RMS error (s) |",
                  "|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|"]
        for e in knee_report.values():
            mgc = e.get("mgc") or {}
            lines.append("| %s | %d (%s / %s) | %d of %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                e["pool"], e["servers"], _cell(e["gpus"]), e["gpus_per_job"], e["windows_used"], e["windows"],
                _cell(e["service_s"]),
                "p%g <= %g s" % (e["slo_percentile"] or 95, e["slo_wait_s"]) if e["slo_wait_s"] is not None else "-",
                _percent(e["knee_utilization"]),
                "-" if e["planned_utilization"] is None else "%.0f %%%s" % (
                    e["planned_utilization"] * 100, " (past the knee)" if e["past_knee"] else ""),
                _cell(e["fit_rms_s"]),
                "-" if mgc.get("cv") is None else "%.2f (%s)" % (mgc["cv"], mgc["cv_source"]),
                _percent(mgc.get("knee_utilization")), _cell(mgc.get("fit_rms_s"))))
        lines.append("")
        lines += ["- %s" % e["message"] for e in knee_report.values()]
        lines.append("")
    return "\n".join(lines)


__all__ = ["CapacityError", "Card", "CARD_MODES", "placed_by_vsphere", "KNEE_NOT_COMPUTED", "Pools", "gpu_requests", "knee_input_errors", "knee_queries",
           "knee_samples", "kueue_samples", "pod_durations", "knee_settings", "knees", "kueue_waits", "markdown", "pack_host", "pending_pods",
           "place_vm", "pod_waits", "pool_knee", "slots", "spare"]
