# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rules of the pool design (pure, standard library only).

``validate(design) -> [Finding]``: every violation at once, schema and design rules, in a
stable order (rule order of ``RULES``, then object). ``RULES`` (in ``_design_findings``)
names each rule with its severity and one line of documentation; the capacity rules use
the model of ``_design_capacity``.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import math
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    capacity_ok,
    cards_needed,
    cluster_mig_geometry,
    derived_mig_geometry,
    free_cards,
    geometry_fit,
    geometry_problems,
    host_loss,
    mig_backed,
    mig_mix_problem,
    node_vms,
    offered_profiles,
    pack,
    per_card,
    pool_gpus,
    preemptible,
    profile_problem,
    protected,
    roll_refusal,
    sorted_node_vms,
    suggest_profiles,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _profiling
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import RULES, WARNING, Finding
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_LABEL_FORM,
    DNS_LABEL_MAX,
    GPU_TAINT_KEY,
    LICENSING_HASH_SUFFIX,
    PROFILE_LABEL,
    dns_label_problem,
    dns_label_suggestion,
    file_name_problem,
    file_name_suggestion,
    label_key_problem,
    label_value_problem,
    node_pool_labels,
    node_pool_taints,
    priority_name_problem,
    shown,
    system_namespace_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import DEFAULT_PRIORITIES, normalize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import (
    EsxiError,
    parse_driver_version,
    version_from_bundle,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    NvidiaError,
    encode_scheduler,
    gpu_models,
    parse_profile,
    vgpu_mig_profile,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._queueing import MODEL, knee, wait_percentile
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vgpu_releases import (
    guest_supported,
    matching_guest,
    version_numbers,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vm_reservations import reservation_shortfalls


SYSTEM_PRIORITY_MIN = 1000000000


def _driver_version(version):
    """The design's driver version read as the ESXi link reads it (_esxi), or None when it is not one."""
    if not isinstance(version, str):
        return None
    try:
        return parse_driver_version(version)
    except EsxiError:
        return None


def _pool_object(pool):
    return "pools.%s" % pool.get("name")


def _name_finding(obj, what, name, where, limit=DNS_LABEL_MAX, derived=None, fix=None):
    """A dns_label finding for ``name`` (None when it is fine)."""
    problem = dns_label_problem(name, limit)
    if problem is None:
        return None
    origin = "derived from %s as %s" % (where, derived) if derived else where
    if fix is None:
        fix = "use %r (%s)" % (dns_label_suggestion(name, limit), DNS_LABEL_FORM % limit)
    return Finding("dns_label", obj, "%s %s (%s) is not a name vCenter and Kubernetes accept: %s"
                   % (what, shown(name), origin, problem), fix)


def _design_names(ctx):
    """Every finding of the dns_label rule: the names the design gives, then those derive() makes of them."""
    d = ctx.d
    found = []

    def check(obj, what, name, where, **kwargs):
        if isinstance(name, str):
            found.append(_name_finding(obj, what, name, where, **kwargs))

    def derived_name(obj, what, template, source, where, alternative):
        """A name made of a valid ``source``: only its length can be wrong."""
        if not isinstance(source, str) or dns_label_problem(source) is not None:
            return
        name = template % source
        if len(name) > DNS_LABEL_MAX:
            room = DNS_LABEL_MAX - len(template % "")
            found.append(_name_finding(obj, what, name, where, derived=template % ("<%s>" % where),
                                       fix="shorten %s to at most %d characters (e.g. %r)%s"
                                       % (where, room, dns_label_suggestion(source, room), alternative)))

    for index, vks in enumerate(d["vks_clusters"]):
        obj = "vks_clusters.%s" % vks.get("name")
        check(obj, "VKS cluster name", vks.get("name"), "vks_clusters[%d].name" % index)
        check(obj, "vSphere namespace", vks.get("namespace"), "vks_clusters[%d].namespace" % index)
    for index, pool in enumerate(d["pools"]):
        obj, where = _pool_object(pool), "pools[%d].name" % index
        name = pool.get("name")
        check(obj, "pool name", name, where)
        vm_class = (pool.get("vm_class") or {}).get("name")
        if isinstance(name, str) and vm_class == "gpu-%s" % name:
            derived_name(obj, "VM class name", "gpu-%s", name, where, ", or set pools[%d].vm_class.name" % index)
        else:
            check(obj, "VM class name", vm_class, "pools[%d].vm_class.name" % index)
        node_pool = (pool.get("node_pool") or {}).get("name")
        if node_pool != name:
            check(obj, "VKS node pool name", node_pool, "pools[%d].node_pool.name" % index)
        if gang_scheduled(pool):
            derived_name(obj, "Kueue ClusterQueue and ResourceFlavor name", "gpupool-%s", name, where, "")
    used = set(p.get("priority") for p in d["pools"])
    for name in d["priorities"]:
        obj = "priorities.%s" % name
        check(obj, "PriorityClass name", name, "priorities.%s" % name)
        if name in used:
            derived_name(obj, "ResourceQuota name", "gpupool-%s", name, "priorities.%s" % name, "")
    for index, tenant in enumerate(d["tenants"]):
        obj = "tenants.%s" % tenant.get("name")
        check(obj, "tenant name", tenant.get("name"), "tenants[%d].name" % index)
        if tenant.get("namespace") != tenant.get("name"):
            check(obj, "tenant namespace", tenant.get("namespace"), "tenants[%d].namespace" % index)
    guest = d.get("guest") or {}
    check("guest", "GPU Operator namespace", guest.get("operator_namespace"), "guest.operator_namespace")
    check("guest", "time-slicing ConfigMap name", guest.get("time_slicing_config"), "guest.time_slicing_config")
    check("guest", "Kueue cohort", (guest.get("kueue") or {}).get("cohort"), "guest.kueue.cohort")
    check("guest", "image pull Secret name", (guest.get("driver") or {}).get("pull_secret"),
          "guest.driver.pull_secret")
    secret = (guest.get("licensing") or {}).get("secret_name")
    check("guest", "licensing Secret name", secret, "guest.licensing.secret_name",
          limit=DNS_LABEL_MAX - LICENSING_HASH_SUFFIX,
          fix="use %r (%s; the licensing role appends '-' and a 10-character content hash)"
          % (dns_label_suggestion(secret, DNS_LABEL_MAX - LICENSING_HASH_SUFFIX),
             DNS_LABEL_FORM % (DNS_LABEL_MAX - LICENSING_HASH_SUFFIX)))
    return [f for f in found if f is not None]


def _rule_design_name_safe(ctx):
    name = ctx.d.get("name")
    if not isinstance(name, str):
        return
    problem = file_name_problem(name)
    if problem:
        yield Finding("design_name_safe", "name", "design name %r is not a safe file name: %s; it names the "
                      "client token file and labels every object the design makes" % (name, problem),
                      "use %r (letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at "
                      "most %d characters)" % (file_name_suggestion(name), DNS_LABEL_MAX))


def _rule_dns_label(ctx):
    return _design_names(ctx)


def _rule_reserved_name(ctx):
    d = ctx.d
    for index, tenant in enumerate(d["tenants"]):
        namespace = tenant.get("namespace")
        problem = system_namespace_problem(namespace)
        if problem:
            where = "tenants[%d].%s" % (index, "namespace" if namespace != tenant.get("name") else "name")
            yield Finding("reserved_name", "tenants.%s" % tenant.get("name"),
                          "tenant namespace %s (%s) is not a tenant's: %s" % (namespace, where, problem),
                          "give the tenant a namespace of its own (tenants[%d].namespace, e.g. %r)"
                          % (index, "team-%s" % dns_label_suggestion(tenant.get("name"), DNS_LABEL_MAX - 5)))
    for index, vks in enumerate(d["vks_clusters"]):
        problem = system_namespace_problem(vks.get("namespace"))
        if problem:
            yield Finding("reserved_name", "vks_clusters.%s" % vks.get("name"),
                          "vSphere namespace %s (vks_clusters[%d].namespace): %s"
                          % (vks.get("namespace"), index, problem),
                          "put the VKS cluster in a namespace of its own")
    for name in d["priorities"]:
        problem = priority_name_problem(name)
        if problem:
            yield Finding("reserved_name", "priorities.%s" % name,
                          "PriorityClass name %s (priorities.%s): %s" % (name, name, problem),
                          "rename it, e.g. %r" % ("gpu-%s" % name[len("system-"):]))


def _rule_label_syntax(ctx):
    for index, pool in enumerate(ctx.d["pools"]):
        node_pool = pool.get("node_pool")
        if not isinstance(node_pool, dict):
            continue
        obj = _pool_object(pool)
        for key, value in (node_pool.get("labels") or {}).items():
            problem = label_key_problem(key)
            if problem:
                yield Finding("label_syntax", obj, "node label key %r (pools[%d].node_pool.labels) is not a "
                              "Kubernetes label key: %s" % (key, index, problem),
                              "use [<DNS subdomain>/]<name>, e.g. %r" % _label_key_suggestion(key))
            problem = None if value is None else label_value_problem(value)
            if problem:
                yield Finding("label_syntax", obj, "node label %s value %r (pools[%d].node_pool.labels) is not a "
                              "Kubernetes label value: %s" % (key, value, index, problem),
                              "use %r (at most 63 alphanumerics, '-', '_' and '.', starting and ending with an "
                              "alphanumeric)" % file_name_suggestion(value))
        for taint in node_pool.get("taints") or []:
            key, value = taint.get("key"), taint.get("value")
            problem = label_key_problem(key) if isinstance(key, str) else None
            if problem:
                yield Finding("label_syntax", obj, "taint key %r (pools[%d].node_pool.taints) is not a valid key: %s"
                              % (key, index, problem), "use [<DNS subdomain>/]<name>, e.g. %r"
                              % _label_key_suggestion(key))
            problem = None if value is None else label_value_problem(value)
            if problem:
                yield Finding("label_syntax", obj, "taint %s value %r (pools[%d].node_pool.taints) is not valid: %s"
                              % (key, value, index, problem), "use %r" % file_name_suggestion(value))


def _label_key_suggestion(key):
    prefix, slash, name = str(key).rpartition("/")
    name = file_name_suggestion(name)
    if slash:
        prefix = ".".join(dns_label_suggestion(part) for part in prefix.split(".") if dns_label_suggestion(part))
        return "%s/%s" % (prefix, name) if prefix else name
    return name


def _rule_unique_names(ctx):
    d = ctx.d
    groups = (
        ("clusters", "clusters", [c.get("name") for c in d["clusters"]]),
        ("pools", "pools", [p.get("name") for p in d["pools"]]),
        ("tenants", "tenants", [t.get("name") for t in d["tenants"]]),
        ("vks_clusters", "vks_clusters", [v.get("name") for v in d["vks_clusters"]]),
        ("tenants", "tenant namespaces", [t.get("namespace") for t in d["tenants"]]),
        ("vm_classes", "VM classes", [(p.get("vm_class") or {}).get("name") for p in d["pools"]]),
        ("node_pools", "node pools", [((p.get("node_pool") or {}).get("vks_cluster"),
                                       (p.get("node_pool") or {}).get("name")) for p in d["pools"]]),
    )
    for section, what, names in groups:
        seen = set()
        for name in names:
            if name is None or (isinstance(name, tuple) and None in name):
                continue
            if name in seen:
                shown = "/".join(name) if isinstance(name, tuple) else name
                yield Finding("unique_names", "%s.%s" % (section, shown), "%s %s appears more than once"
                              % (what, shown), "give every entry of %s its own name" % what)
            seen.add(name)
    platform = set(v.get("namespace") for v in d["vks_clusters"])
    for tenant in d["tenants"]:
        if tenant.get("namespace") in platform:
            yield Finding("unique_names", "tenants.%s" % tenant.get("name"),
                          "namespace %s is also the namespace of a VKS cluster" % tenant.get("namespace"),
                          "give the tenant its own namespace")


def _rule_unknown_reference(ctx):
    d = ctx.d
    for pool in d["pools"]:
        obj = _pool_object(pool)
        if pool.get("cluster") and pool["cluster"] not in ctx.clusters:
            yield Finding("unknown_reference", obj, "cluster %s is not in clusters" % pool["cluster"],
                          "use one of %s" % ", ".join(ctx.clusters))
        node_pool = pool.get("node_pool") or {}
        if node_pool and node_pool.get("vks_cluster") is None and len(ctx.vks) > 1:
            yield Finding("unknown_reference", obj, "node_pool.vks_cluster is not set and there are %d VKS "
                          "clusters" % len(ctx.vks), "set node_pool.vks_cluster to one of %s" % ", ".join(ctx.vks))
        elif node_pool.get("vks_cluster") and node_pool["vks_cluster"] not in ctx.vks:
            yield Finding("unknown_reference", obj, "VKS cluster %s is not in vks_clusters"
                          % node_pool["vks_cluster"], "use one of %s" % ", ".join(ctx.vks))
        if pool.get("priority") and pool["priority"] not in d["priorities"]:
            yield Finding("unknown_reference", obj, "priority %s is not a PriorityClass of the design"
                          % pool["priority"], "use one of %s or add it to priorities" % ", ".join(d["priorities"]))
    for tenant in d["tenants"]:
        for pool in (tenant.get("gpu_quota") or {}):
            if pool not in ctx.pools:
                yield Finding("unknown_reference", "tenants.%s" % tenant.get("name"),
                              "gpu_quota names pool %s, which is not in pools" % pool,
                              "use one of %s" % ", ".join(ctx.pools))
        for reservation in tenant.get("vm_reservations") or []:
            if reservation.get("pool") and reservation["pool"] not in ctx.pools:
                yield Finding("unknown_reference", "tenants.%s" % tenant.get("name"),
                              "vm_reservations names pool %s, which is not in pools" % reservation["pool"],
                              "use one of %s" % ", ".join(ctx.pools))
    for cluster in d["clusters"]:
        for profile in (cluster.get("mig_mix") or {}):
            if not any(p.get("cluster") == cluster.get("name") and p.get("vgpu_profile") == profile
                       for p in d["pools"]):
                yield Finding("unknown_reference", "clusters.%s" % cluster.get("name"),
                              "mig_mix names %s, which no pool of the cluster uses" % profile,
                              "remove it from mig_mix or add a pool that uses it")


def _rule_gpu_model_known(ctx):
    for cluster in ctx.d["clusters"]:
        model_name = (cluster.get("gpu") or {}).get("model")
        if model_name and ctx.models.get(cluster.get("name")) is None:
            yield Finding("gpu_model_known", "clusters.%s" % cluster.get("name"),
                          "GPU model %s is not in the NVIDIA catalog" % model_name,
                          "use one of %s" % ", ".join(m.name for m in gpu_models()))


def _rule_profile_offered(ctx):
    for pool in ctx.d["pools"]:
        model = ctx.model_of(pool)
        if model is None or not pool.get("vgpu_profile"):
            continue
        problem = profile_problem(pool["vgpu_profile"], model)
        if problem:
            yield Finding("profile_offered", _pool_object(pool),
                          "vGPU profile %s is not offered by %s on cluster %s: %s"
                          % (pool["vgpu_profile"], model.name, pool["cluster"], problem),
                          "use a profile %s offers: %s" % (model.name, ", ".join(offered_profiles(model))))


def _rule_profiling_supported(ctx):
    for pool in ctx.d["pools"]:
        why = _profiling.problem(pool)
        if why:
            yield Finding("profiling_supported", _pool_object(pool), why,
                          "set profiling false or null, or use a MIG-backed or full-card pool")


def _rule_sharing_matches_profile(ctx):
    for pool in ctx.d["pools"]:
        profile = ctx.usable(pool)
        sharing = pool.get("sharing")
        if profile is None or sharing is None:
            continue
        model = ctx.model_of(pool)
        full = not profile.mig_backed and profile.framebuffer_gb >= model.memory_gb
        obj = _pool_object(pool)
        if sharing == "mig" and not profile.mig_backed:
            yield Finding("sharing_matches_profile", obj, "sharing is mig but %s is not MIG-backed" % profile.name,
                          "use a MIG-backed profile (%s) or change sharing" % suggest_profiles(model, "mig"))
        elif sharing == "full_card" and not full:
            yield Finding("sharing_matches_profile", obj, "sharing is full_card but %s is %s"
                          % (profile.name, "MIG-backed" if profile.mig_backed else
                             "%d GB of a %d GB card" % (profile.framebuffer_gb, model.memory_gb)),
                          "use the full-card profile %s or change sharing" % suggest_profiles(model, "full_card"))
        elif sharing == "time_sliced" and (profile.mig_backed or full):
            yield Finding("sharing_matches_profile", obj, "sharing is time_sliced but %s is %s"
                          % (profile.name, "MIG-backed" if profile.mig_backed else "a full card"),
                          "use a time-sliced fraction of the card (%s) or change sharing"
                          % suggest_profiles(model, "time_sliced"))
        if sharing != "mig" and pool.get("per_card") not in (None, 1) and full:
            yield Finding("sharing_matches_profile", obj, "per_card %s with a full-card profile"
                          % pool["per_card"], "remove per_card (a full card holds one vGPU)")


def _rule_mig_mix_fits(ctx):
    for pool in ctx.d["pools"]:
        profile = ctx.usable(pool)
        if profile is None or not profile.mig_backed or not pool.get("per_card"):
            continue
        model = ctx.model_of(pool)
        problem = mig_mix_problem(model, {profile.mig_profile: pool["per_card"]})
        if problem:
            yield Finding("mig_mix_fits", _pool_object(pool),
                          "%d x %s (%s) per card: %s" % (pool["per_card"], profile.name, profile.mig_profile, problem),
                          "set per_card to at most %d or use a smaller MIG profile"
                          % per_card(dict(pool, per_card=None), model))
    for cluster in ctx.d["clusters"]:
        mix = cluster.get("mig_mix")
        model = ctx.models.get(cluster.get("name"))
        if not mix or model is None:
            continue
        obj = "clusters.%s" % cluster["name"]
        counts = OrderedDict()
        bad = False
        for name, count in mix.items():
            try:
                counts[vgpu_mig_profile(name, model).name] = counts.get(vgpu_mig_profile(name, model).name, 0) + count
            except NvidiaError as exc:
                bad = True
                yield Finding("mig_mix_fits", obj, "mig_mix entry %s: %s" % (name, exc),
                              "list MIG-backed profiles of %s: %s" % (model.name, ", ".join(
                                  n for n in offered_profiles(model) if n.count("-") == 2)))
        if bad:
            continue
        problem = mig_mix_problem(model, counts)
        if problem:
            yield Finding("mig_mix_fits", obj, "mig_mix %s: %s" % (
                ", ".join("%d x %s" % (c, n) for n, c in mix.items()), problem),
                "remove instances until the mix fits one card (7 compute slices, 8 memory slots)")


def _rule_inference_not_time_sliced(ctx):
    for pool in ctx.d["pools"]:
        if pool.get("shape") == "inference" and pool.get("sharing") == "time_sliced":
            yield Finding("inference_not_time_sliced", _pool_object(pool),
                          "inference on time-sliced vGPUs shares the card's engines with its neighbours, so "
                          "latency depends on them", "use sharing mig with a MIG-backed profile (isolated "
                          "engines and memory) or full_card")


def _rule_training_multi_gpu(ctx):
    for pool in ctx.d["pools"]:
        training = pool.get("training") or {}
        gpus = training.get("gpus_per_job") or 1
        if pool.get("shape") != "training" or gpus <= 1:
            continue
        problems, fixes = [], []
        if pool.get("sharing") != "full_card":
            problems.append("sharing is %s, not full_card" % pool.get("sharing"))
            fixes.append("set sharing full_card with the full-card profile")
        if not training.get("gang_scheduling"):
            problems.append("gang_scheduling is off")
            fixes.append("set training.gang_scheduling true (Kueue admits all pods of a job together)")
        if problems:
            yield Finding("training_multi_gpu", _pool_object(pool),
                          "%d-GPU training jobs: %s" % (gpus, "; ".join(problems)), "; ".join(fixes))


def _rule_notebook_preemptible(ctx):
    d = ctx.d
    priorities = d["priorities"]
    others = [p for p in d["pools"] if p.get("shape") in ("inference", "training")
              and p.get("priority") in priorities]
    for pool in d["pools"]:
        name = pool.get("priority")
        if pool.get("shape") != "notebooks" or name not in priorities:
            continue
        value = priorities[name]["value"]
        if others:
            blockers = sorted(set(p["priority"] for p in others
                                  if not (priorities[p["priority"]]["value"] > value and
                                          priorities[p["priority"]]["preemption_policy"] == "PreemptLowerPriority")))
            reason = "pools of priority %s cannot preempt it" % ", ".join(blockers) if blockers else None
        else:
            higher = [k for k, v in priorities.items() if v["value"] > value
                      and v["preemption_policy"] == "PreemptLowerPriority"]
            reason = None if higher else "no PriorityClass above it preempts"
        if value >= SYSTEM_PRIORITY_MIN:
            reason = "value %d is in the system range" % value
        if reason:
            yield Finding("notebook_preemptible", _pool_object(pool),
                          "notebooks run on priority %s (value %d) and are not preemptible: %s"
                          % (name, value, reason),
                          "give the notebooks a lower priority (gpu-notebook, value %d) than inference and "
                          "training, whose classes use preemption_policy PreemptLowerPriority"
                          % DEFAULT_PRIORITIES["gpu-notebook"]["value"])


def priority_inversions(pools, priorities):
    """[(inference pool, preemptible pool)] where an inference pool does not rank above a
    preemptible one (``_design_capacity.preemptible``): under contention the scheduler would not
    evict the preemptible pods for it. ``priorities`` maps class names to ``{"value",
    "preemption_policy"}``: the design's, or the live PriorityClasses.

    Only inference pools can be inverted: any other pool is either preemptible itself, or
    protected, and then no preemptible pool ranks as high (a class that preempts above the
    preemptible pool would rank above it too, making it preemptible)."""
    def value(pool):
        entry = priorities.get(pool.get("priority"))
        return entry.get("value") if isinstance(entry, dict) and isinstance(entry.get("value"), int) else None

    cheap = [p for p in pools if value(p) is not None and preemptible(p, priorities)]
    out = []
    for pool in pools:
        mine = value(pool)
        if mine is None or pool.get("shape") != "inference":
            continue
        out.extend((pool, other) for other in cheap if other is not pool and value(other) >= mine)
    return out


def _rule_inference_above_preemptible(ctx):
    priorities = ctx.d["priorities"]
    for pool, other in priority_inversions(ctx.d["pools"], priorities):
        mine, theirs = priorities[pool["priority"]]["value"], priorities[other["priority"]]["value"]
        yield Finding("inference_above_preemptible", _pool_object(pool),
                      "inference pool %s runs on priority %s (value %d), not above the preemptible pool %s on %s "
                      "(value %d): when GPUs run short the scheduler and Kueue would not evict %s's pods for it"
                      % (pool["name"], pool["priority"],
                         mine, other["name"], other["priority"], theirs, other["name"]),
                      "give %s a class above %d (priorities.%s.value, e.g. %d, with preemption_policy "
                      "PreemptLowerPriority), or move %s to a lower class"
                      % (pool["name"], theirs, pool["priority"], max(theirs + 1, DEFAULT_PRIORITIES["gpu-inference"]
                                                                     ["value"]), other["name"]))


def _waived(obj, rule):
    """Whether the cluster (or pool) waives ``rule`` with a reason (``waivers.<rule>``)."""
    reason = (obj.get("waivers") or {}).get(rule)
    return isinstance(reason, str) and bool(reason.strip())


RESUME_CHECKS = ("annotation", "condition", "command")


def _rule_checkpoint_declared(ctx):
    """A preemptible training pool is evicted by Kueue whenever inference (or a higher class) needs its
    quota: without a checkpoint its jobs start over, and a game day has nothing to check. A declared
    checkpoint names one volume (a claim, or a claim per job) and one resume check."""
    priorities = ctx.d["priorities"]
    for pool in ctx.d["pools"]:
        ckpt = pool.get("checkpoint")
        if ckpt is None:
            if pool.get("shape") == "training" and preemptible(pool, priorities) \
                    and not _waived(pool, "checkpoint_declared"):
                yield Finding("checkpoint_declared", _pool_object(pool),
                              "training pool %s is preemptible (priority %s) and declares no checkpoint: a job "
                              "Kueue evicts for a higher class starts over, and nothing says how to check that "
                              "it resumed" % (pool.get("name"), pool.get("priority")),
                              "declare pools.%s.checkpoint (claim or claim_template, and resume_check), or say "
                              "why not in pools.%s.waivers.checkpoint_declared" % (pool.get("name"), pool.get("name")))
            continue
        problems, fixes = [], []
        volumes = [k for k in ("claim", "claim_template") if ckpt.get(k)]
        if len(volumes) != 1:
            problems.append("names %s" % (" and ".join(volumes) if volumes else "no volume"))
            fixes.append("give exactly one of claim and claim_template")
        elif volumes == ["claim_template"] and "{job}" not in ckpt["claim_template"]:
            problems.append("claim_template %s has no {job}: every job would share one claim" % ckpt["claim_template"])
            fixes.append("put {job} in claim_template (ckpt-{job}), or give the shared claim as claim")
        checks = [k for k in RESUME_CHECKS if (ckpt.get("resume_check") or {}).get(k)]
        if len(checks) != 1:
            none = "none of annotation, condition, command"
            problems.append("resume_check has %s" % (" and ".join(checks) if checks else none))
            fixes.append("give exactly one of resume_check.annotation, condition and command")
        if problems:
            yield Finding("checkpoint_declared", "%s.checkpoint" % _pool_object(pool),
                          "the checkpoint of pool %s %s" % (pool.get("name"), "; ".join(problems)), "; ".join(fixes))


def _rule_gpu_vms_pinned(ctx):
    for cluster in ctx.d["clusters"]:
        drs = cluster.get("drs") or {}
        if drs.get("pinning") is False and not _waived(cluster, "gpu_vms_pinned"):
            pools = [p.get("name") for p in ctx.d["pools"] if p.get("cluster") == cluster.get("name")]
            yield Finding("gpu_vms_pinned", "clusters.%s" % cluster.get("name"),
                          "DRS pinning of the vGPU VMs is off without a reason: DRS may vMotion them, which stuns "
                          "a vGPU VM for as long as its framebuffer takes to copy, and a host roll or HA cannot "
                          "count on where they run%s" % (" (pools %s)" % ", ".join(pools) if pools else ""),
                          "set drs.pinning true, or keep it false and say why in waivers.gpu_vms_pinned")


def _rule_notebooks_best_effort(ctx):
    for pool in ctx.d["pools"]:
        if pool.get("shape") != "notebooks" or pool.get("sharing") != "time_sliced":
            continue
        cluster = ctx.clusters.get(pool.get("cluster"))
        scheduler = (cluster or {}).get("scheduler") or {}
        policy = scheduler.get("policy")
        if cluster is None or policy in (None, "best_effort") or _waived(cluster, "notebooks_best_effort"):
            continue
        yield Finding("notebooks_best_effort", _pool_object(pool),
                      "time-sliced notebooks on cluster %s, whose vGPU scheduler is %s: a fixed or equal share "
                      "keeps an idle notebook's time slice from its busy neighbours, and notebooks are idle "
                      "most of the time" % (cluster["name"], policy),
                      "set clusters.%s.scheduler.policy best_effort, or say why not in waivers.notebooks_best_effort"
                      % cluster["name"])


def gang_scheduled(pool):
    """Whether Kueue admits the pool's jobs as gangs (a queue is derived for it)."""
    return pool.get("shape") == "training" and bool((pool.get("training") or {}).get("gang_scheduling"))


def _rule_multi_gpu_gang_scheduled(ctx):
    """Multi-GPU jobs on a pool without a Kueue gang queue, or on one whose gangs can never be admitted."""
    for pool in ctx.d["pools"]:
        gpus = (pool.get("training") or {}).get("gpus_per_job") or 1
        obj = _pool_object(pool)
        if gpus > 1 and pool.get("shape") != "training":
            yield Finding("multi_gpu_gang_scheduled", obj,
                          "%d-GPU jobs on a %s pool: only training pools get a Kueue queue, so their pods would "
                          "be scheduled one by one and a job could hold part of its GPUs while it waits for the "
                          "rest" % (gpus, pool.get("shape")),
                          "make the pool shape training with training.gang_scheduling true, or drop "
                          "training.gpus_per_job")
            continue
        if not gang_scheduled(pool) or not isinstance(pool.get("node_pool"), dict):
            continue
        size = pool_gpus(pool)
        if gpus > size:
            yield Finding("multi_gpu_gang_scheduled", obj,
                          "a job takes %d GPUs and the pool has %d: Kueue would never admit its gang" % (gpus, size),
                          "grow node_pool.replicas to at least %d, or lower training.gpus_per_job"
                          % -(-gpus // ((pool.get("gpus_per_node") or 1) *
                                        ((pool.get("guest_time_slicing") or {}).get("replicas") or 1))))
        if not any((t.get("gpu_quota") or {}).get(pool.get("name"), 0) > 0 for t in ctx.d["tenants"]):
            yield Finding("multi_gpu_gang_scheduled", obj,
                          "no tenant has quota on the gang-scheduled pool, so no namespace gets its LocalQueue "
                          "and no job can reach its ClusterQueue",
                          "give the tenants that train on it gpu_quota.%s" % pool.get("name"))


def _rule_slo_knee(ctx):
    for pool in ctx.d["pools"]:
        slo = pool.get("slo") or {}
        planned, target = slo.get("planned_utilization"), slo.get("wait_seconds")
        # a percentile the schema refused (out of its bound) is reported there, not here again
        if planned is None or target is None or slo.get("percentile") is None \
                or not isinstance(pool.get("node_pool"), dict):
            continue
        obj = _pool_object(pool)
        result = design_knee(pool)
        if result.get("problem"):
            yield Finding("slo_knee", obj, "cannot place the knee of %s: %s" % (pool.get("name"), result["problem"]),
                          result["fix"])
            continue
        if planned > result["knee"]:
            grow = result.get("replicas_needed")
            yield Finding("slo_knee", obj,
                          "planned at %.0f %% utilization, past the knee at %.1f %%: with %d servers of %d GPU(s) "
                          "and %s s jobs, the %s wait (%s) reaches the %s s target at %.1f %% (%s)"
                          % (planned * 100, result["knee"] * 100, result["servers"], result["gpus_per_job"],
                             _num(slo["job_seconds"]), _pct_name(slo["percentile"]),
                             "%s s at the plan" % _num(result["planned_wait_s"])
                             if result["planned_wait_s"] is not None else "unbounded at the plan",
                             _num(target), result["knee"] * 100, MODEL),
                          "plan the pool at most at %.0f %%%s, or relax slo.wait_seconds"
                          % (math.floor(result["knee"] * 100), ", or carry the planned load on %d replicas"
                             % grow if grow else ""))


def _num(value):
    return ("%.1f" % value).rstrip("0").rstrip(".")


def _pct_name(percentile):
    return "p%s" % _num(percentile)


def design_knee(pool):
    """The knee of a pool from the design's numbers (M/M/c, ``_queueing``): ``servers`` (the
    pool's GPU slots over the GPUs of one job), ``knee``, ``planned_wait_s`` (the percentile wait
    at the planned utilization, None when unbounded or not planned), ``replicas_needed`` (the
    node pool replicas that carry the planned load below the knee, None when not past it); or
    ``problem`` and ``fix`` when the design lacks a number."""
    slo = pool.get("slo") or {}
    gpus = (pool.get("training") or {}).get("gpus_per_job") or 1
    percentile, service, target = slo.get("percentile"), slo.get("job_seconds"), slo.get("wait_seconds")
    if service is None or service <= 0:
        return dict(problem="slo.job_seconds (the mean time a job holds its GPUs) is not given",
                    fix="set slo.job_seconds (gpu_capacity fits it from the pool's Prometheus samples as "
                        "knee.<pool>.service_s)")
    if percentile is None or not 0 < percentile < 100:
        return dict(problem="slo.percentile %r is not above 0 and below 100" % (percentile,),
                    fix="set slo.percentile, e.g. 95")
    if target is None or target < 0:
        return dict(problem="slo.wait_seconds %r is negative" % (target,), fix="give the target wait in seconds")

    def servers(pool_now):
        return pool_gpus(pool_now) // gpus

    count = servers(pool)
    if count < 1:
        return dict(problem="the pool has %d GPUs, fewer than one job's %d" % (pool_gpus(pool), gpus),
                    fix="grow node_pool.replicas")
    value = knee(count, service, target, percentile)
    planned = slo.get("planned_utilization")
    planned_wait = None
    if planned is not None and 0 <= planned < 1:
        planned_wait = wait_percentile(count, planned, service, percentile)
    need = None
    if planned is not None and planned > value:
        load = planned * count  # Erlangs the plan offers
        replicas = pool["node_pool"].get("replicas") or 0
        for more in range(replicas + 1, replicas * 4 + 65):
            bigger = dict(pool, node_pool=dict(pool["node_pool"], replicas=more))
            c = servers(bigger)
            if c > load and load / c <= knee(c, service, target, percentile):
                need = more
                break
    return dict(servers=count, gpus_per_job=gpus, knee=value, planned_wait_s=planned_wait, replicas_needed=need)


def _rule_node_pool_gpu_taint(ctx):
    for pool in ctx.d["pools"]:
        if not pool.get("name") or not isinstance(pool.get("node_pool"), dict):
            continue
        taints = node_pool_taints(pool)
        if not any(t["key"] == GPU_TAINT_KEY and t["effect"] in ("NoSchedule", "NoExecute") for t in taints):
            yield Finding("node_pool_gpu_taint", _pool_object(pool),
                          "node pool %s has no %s NoSchedule taint, so any pod can land on its GPU nodes"
                          % (pool["node_pool"].get("name"), GPU_TAINT_KEY),
                          "add the taint {key: %s, value: present, effect: NoSchedule} to node_pool.taints "
                          "(or leave taints out for the derived ones)" % GPU_TAINT_KEY)


def _rule_node_pool_profile_label(ctx):
    for pool in ctx.d["pools"]:
        if not all(pool.get(k) for k in ("name", "vgpu_profile", "shape", "sharing")) or \
                not isinstance(pool.get("node_pool"), dict):
            continue
        value = node_pool_labels(pool).get(PROFILE_LABEL)
        if value != pool["vgpu_profile"]:
            yield Finding("node_pool_profile_label", _pool_object(pool),
                          "node pool %s is labelled %s=%s, not with its profile %s"
                          % (pool["node_pool"].get("name"), PROFILE_LABEL, value, pool["vgpu_profile"]),
                          "remove %s from node_pool.labels (it is derived from vgpu_profile)" % PROFILE_LABEL)


def _rule_tenant_gpu_quota(ctx):
    for tenant in ctx.d["tenants"]:
        quota = tenant.get("gpu_quota") or {}
        if not quota or not any(v > 0 for v in quota.values()):
            yield Finding("tenant_gpu_quota", "tenants.%s" % tenant.get("name"),
                          "namespace %s has no GPU quota, so it could take every GPU of every pool"
                          % tenant.get("namespace"),
                          "set gpu_quota: {<pool>: <GPUs>} for the pools the tenant uses (pools: %s)"
                          % ", ".join(ctx.pools))


def _rule_quota_exceeds_pool(ctx):
    for tenant in ctx.d["tenants"]:
        for name, gpus in (tenant.get("gpu_quota") or {}).items():
            pool = ctx.pools.get(name)
            if pool is None or not isinstance(pool.get("node_pool"), dict):
                continue
            size = pool_gpus(pool)
            if gpus > size:
                yield Finding("quota_exceeds_pool", "tenants.%s" % tenant.get("name"),
                              "quota of %d GPUs on pool %s, which has %d" % (gpus, name, size),
                              "lower gpu_quota.%s to %d or grow the pool's replicas" % (name, size))


def _rule_driver_version_pinned(ctx):
    for cluster in ctx.d["clusters"]:
        version = (cluster.get("driver") or {}).get("version")
        if _driver_version(version) is None:
            yield Finding("driver_version_pinned", "clusters.%s" % cluster.get("name"),
                          "no pinned NVIDIA driver version%s" % ("" if version is None else " (%r)" % version),
                          "set driver.version to the full component version every host must run, e.g. "
                          "550.90.05-1OEM.800.1.0.20613240")


def _rule_driver_source(ctx):
    for cluster in ctx.d["clusters"]:
        driver = cluster.get("driver") or {}
        obj = "clusters.%s" % cluster.get("name")
        if driver.get("lifecycle") == "direct" and not driver.get("bundle"):
            yield Finding("driver_source", obj, "lifecycle direct without driver.bundle",
                          "set driver.bundle to the offline bundle, e.g. [datastore] drivers/NVD-AIE-800_<version>"
                          "_<build>.zip, or use lifecycle vlcm with a depot")
        if driver.get("lifecycle") == "vlcm" and not driver.get("depot"):
            yield Finding("driver_source", obj, "lifecycle vlcm without driver.depot",
                          "set driver.depot to the offline depot URL holding the NVIDIA component")
        bundle, version = driver.get("bundle"), _driver_version(driver.get("version"))
        named = _driver_version(version_from_bundle(bundle)) if bundle and version else None
        # the check esxi_host_driver makes before it installs (_esxi.check_bundle_matches)
        if named is not None and named.numbers != version.numbers:
            yield Finding("driver_source", obj, "driver.bundle %s is not for version %s (it holds %s)"
                          % (bundle, version.text, named.text), "point driver.bundle at the bundle of %s" % version.text)


def _rule_driver_versions_mixed(ctx):
    branches = OrderedDict()
    for cluster in ctx.d["clusters"]:
        version = _driver_version((cluster.get("driver") or {}).get("version"))
        if version is not None:
            branches.setdefault(str(version.numbers[0]), []).append(cluster["name"])
    if len(branches) > 1:
        yield Finding("driver_versions_mixed", "clusters",
                      "GPU clusters pin different driver branches (%s); the guest driver of the GPU Operator "
                      "must match every host branch" % "; ".join("%s: %s" % (b, ", ".join(c))
                                                                 for b, c in branches.items()),
                      "pin one branch everywhere, or keep each VKS cluster's node pools on one branch")


def _rule_guest_driver_set(ctx):
    if ctx.d["pools"] and (ctx.d.get("guest") or {}).get("driver") is None:
        host = next((c["driver"]["version"] for c in ctx.d["clusters"]
                     if _driver_version((c.get("driver") or {}).get("version")) is not None), None)
        guest = matching_guest(host) if host else None
        yield Finding("guest_driver_set", "guest",
                      "no vGPU guest driver: the GPU Operator would deploy its data-center driver, which does not "
                      "run on a vGPU, so the gpu_operator role refuses to install the operator",
                      "add guest.driver {repository: <private registry path>, image: vgpu-guest-driver, "
                      "version: <Linux guest driver of the host driver's vGPU release%s>, pull_secret: <image "
                      "pull Secret>}" % (", %s for %s" % (guest, host.split("-")[0]) if guest else ""))


def _rule_driver_upgrade_keeps_pools(ctx):
    parallel = ((ctx.d.get("guest") or {}).get("driver_upgrade") or {}).get("max_parallel")
    if not isinstance(parallel, int):
        return
    for pool in ctx.d["pools"]:
        nodes = (pool.get("node_pool") or {}).get("replicas")
        if not isinstance(nodes, int) or nodes < 2 or 0 < parallel < nodes:
            continue
        yield Finding("driver_upgrade_keeps_pools", _pool_object(pool),
                      "guest.driver_upgrade.max_parallel %s lets a guest driver upgrade drain all %d nodes of pool "
                      "%s at once: its pods have nowhere to run until a node is done" % (
                          parallel if parallel else "0 (no limit)", nodes, pool.get("name")),
                      "set guest.driver_upgrade.max_parallel below %d (1, the default, upgrades one node at a "
                      "time)" % nodes)


def _rule_guest_driver_matches_host(ctx):
    driver = (ctx.d.get("guest") or {}).get("driver")
    guest = (driver or {}).get("version")
    if not isinstance(guest, str):
        return
    if version_numbers(guest) is None:
        yield Finding("guest_driver_matches_host", "guest.driver",
                      "guest driver version %r is not a driver version" % guest,
                      "give the Linux guest driver version, e.g. 550.90.07 (without the image's OS suffix)")
        return
    for cluster in ctx.d["clusters"]:
        host = (cluster.get("driver") or {}).get("version")
        if _driver_version(host) is None:
            continue  # driver_version_pinned reports it
        verdict, reason = guest_supported(host, guest)
        if verdict:
            continue
        known = matching_guest(host)
        obj = "clusters.%s" % cluster.get("name")
        if verdict is None:
            yield Finding("guest_driver_matches_host", obj,
                          "cannot tell whether guest driver %s runs on host driver %s: %s" % (guest, host, reason),
                          "check NVIDIA's vGPU release notes of the host driver's release for its Linux guest "
                          "driver", severity=WARNING)
            continue
        yield Finding("guest_driver_matches_host", obj,
                      "guest driver %s does not run on cluster %s's host driver %s: %s; the vGPU would not load "
                      "in the node VMs" % (guest, cluster.get("name"), host, reason),
                      "set guest.driver.version to %s" % (
                          "%s, the Linux guest driver of the host driver's release" % known if known else
                          "a Linux guest driver of the host driver's release branch R%s (its vGPU release notes "
                          "name it)" % host.split(".")[0]))


def _rule_mig_strategy_vgpu(ctx):
    guest = ctx.d.get("guest") or {}
    if guest.get("mig_strategy") == "mixed":
        mig = [p.get("name") for p in ctx.d["pools"] if p.get("sharing") == "mig"]
        yield Finding("mig_strategy_vgpu", "guest.mig_strategy",
                      "mig_strategy mixed advertises nvidia.com/mig-<profile> resources, but inside a vGPU VM a "
                      "MIG-backed or fractional vGPU is a plain nvidia.com/gpu (the ESXi host owns the MIG "
                      "partition), so %s would advertise nothing" % (
                          "the MIG pools (%s)" % ", ".join(mig) if mig else "the node VMs"),
                      "set guest.mig_strategy auto (single where a pool is MIG-backed, else none)")


def _rule_graphics_shared_direct(ctx):
    for cluster in ctx.d["clusters"]:
        if (cluster.get("graphics") or {}).get("type") == "shared":
            yield Finding("graphics_shared_direct", "clusters.%s" % cluster.get("name"),
                          "graphics type shared (vSGA) cannot run vGPU profiles",
                          "set graphics.type shared_direct")


def _rule_scheduler_valid(ctx):
    for cluster in ctx.d["clusters"]:
        scheduler = cluster.get("scheduler") or {}
        if not scheduler.get("policy"):
            continue
        try:
            encode_scheduler(scheduler["policy"], scheduler.get("time_slice_ms"))
        except NvidiaError as exc:
            yield Finding("scheduler_valid", "clusters.%s" % cluster.get("name"), str(exc),
                          "time_slice_ms 1-30 with equal_share or fixed_share; none with best_effort")


def _rule_mixed_size_fixed_share(ctx):
    for cluster in ctx.d["clusters"]:
        if (cluster.get("graphics") or {}).get("vgpu_mode") == "mixed_size" and \
                (cluster.get("scheduler") or {}).get("policy") == "fixed_share":
            yield Finding("mixed_size_fixed_share", "clusters.%s" % cluster.get("name"),
                          "graphics.vgpu_mode mixed_size with the fixed_share scheduler: NVIDIA does not support "
                          "fixed share for time-sliced vGPUs of mixed sizes on one GPU",
                          "set scheduler.policy equal_share or best_effort, or graphics.vgpu_mode same_size")


def _rule_cluster_capacity(ctx):
    for cluster in ctx.d["clusters"]:
        if ctx.models.get(cluster.get("name")) is None or not capacity_ok(cluster):
            continue
        nodes = node_vms(ctx, cluster)
        _cards, unplaced = pack(sorted_node_vms(nodes), cluster["hosts"], cluster["gpu"]["per_host"])
        if unplaced:
            short = OrderedDict()
            for pool in unplaced:
                short[pool["name"]] = short.get(pool["name"], 0) + 1
            yield Finding("cluster_capacity", "clusters.%s" % cluster["name"],
                          "%d of %d node VMs do not fit on %d hosts x %d GPUs (%s)"
                          % (len(unplaced), len(nodes), cluster["hosts"], cluster["gpu"]["per_host"],
                             ", ".join("%s: %d short" % kv for kv in short.items())),
                          "lower the pools' replicas or gpus_per_node, or add hosts to the cluster")


def _geometry_words(positions):
    """A geometry for messages: ``[[], [0, 1]]``, or ``no GPU in MIG mode``."""
    if not any(positions):
        return "no GPU in MIG mode"
    return "[%s]" % ", ".join("[%s]" % ", ".join(str(i) for i in p) for p in positions)


def _gpus(count):
    return "%d GPU%s" % (count, "" if count == 1 else "s")


def _mig_on(indexes):
    if not indexes:
        return "MIG off"
    return "MIG on GPU%s %s" % ("" if len(indexes) == 1 else "s", ", ".join(str(i) for i in indexes))


def _mode(mig):
    return "in MIG mode" if mig else "with MIG off"


def _free_words(cards, positions, mig, nodes):
    """``N free``, and on how many of one host at most when a node VM needs more than that."""
    total = free_cards(cards, positions, mig)
    most = max([free_cards([host], [positions[h]], mig) for h, host in enumerate(cards)] or [0])
    widest = max(vgpus for _pool, vgpus, _cap in nodes)
    if total and most < widest:
        return "%d free, at most %d on one host" % (total, most)
    return "%d free" % total


def _geometry_checked(ctx, cluster):
    """The cluster's ``(geometry, positions, explicit)`` when its pools fit its cards and its MIG
    geometry is valid and holds them; None when ``cluster_capacity``, ``mig_geometry_valid`` or
    ``mig_geometry_fits`` reports (or the capacity model cannot judge the cluster)."""
    model = ctx.models.get(cluster.get("name"))
    if model is None or not capacity_ok(cluster) or geometry_problems(cluster, model):
        return None
    nodes = node_vms(ctx, cluster)
    if pack(sorted_node_vms(nodes), cluster["hosts"], cluster["gpu"]["per_host"])[1]:
        return None
    geometry = cluster_mig_geometry(ctx, cluster)
    if geometry_fit(ctx, cluster, geometry[1])[1]:
        return None
    return geometry


def _rule_mig_geometry_valid(ctx):
    for cluster in ctx.d["clusters"]:
        for message, fix in geometry_problems(cluster, ctx.models.get(cluster.get("name"))):
            yield Finding("mig_geometry_valid", "clusters.%s" % cluster.get("name"), message, fix)


def _rule_mig_geometry_fits(ctx):
    """The cluster's pools fit its cards (``cluster_capacity``) but not under its MIG geometry: a
    MIG-backed vGPU needs a GPU in MIG mode, every other vGPU one with MIG off."""
    for cluster in ctx.d["clusters"]:
        model = ctx.models.get(cluster.get("name"))
        if model is None or not capacity_ok(cluster) or geometry_problems(cluster, model):
            continue
        nodes = node_vms(ctx, cluster)
        hosts, per_host = cluster["hosts"], cluster["gpu"]["per_host"]
        if pack(sorted_node_vms(nodes), hosts, per_host)[1]:
            continue  # cluster_capacity reports it
        _geometry, positions, explicit = cluster_mig_geometry(ctx, cluster)
        cards, unplaced = geometry_fit(ctx, cluster, positions)
        if not unplaced:
            continue
        node_of = dict((node[0]["name"], node) for node in nodes)
        short = OrderedDict()
        for pool in unplaced:
            short.setdefault(pool["name"], []).append(node_of[pool["name"]])
        parts, fixes = [], []
        for mig in (True, False):
            left = [n for name, ns in short.items() for n in ns if mig_backed(node_of[name][0]) == mig]
            if not left:
                continue
            need = cards_needed(left, per_host)
            parts.append("%s (they need %s %s, %s)" % (
                ", ".join("%s: %d node VMs short" % (name, len(ns)) for name, ns in short.items()
                          if mig_backed(node_of[name][0]) == mig), _gpus(need), _mode(mig),
                _free_words(cards, positions, mig, left)))
            fixes.append("%s %d more GPU%s" % ("put MIG on" if mig else "turn MIG off on", need, "" if need == 1 else "s"))
        derived = derived_mig_geometry(ctx, cluster)
        fit = not geometry_fit(ctx, cluster, derived)[1]
        yield Finding("mig_geometry_fits", "clusters.%s" % cluster["name"],
                      "under the %s MIG geometry %s of %s, %d of %d node VMs find no card of their mode: %s"
                      % ("given" if explicit else "derived", _geometry_words(positions), cluster["name"],
                         len(unplaced), len(nodes), "; ".join(parts)),
                      "%s in clusters.%s.mig_geometry%s" % (
                          " and ".join(fixes), cluster["name"],
                          ", or remove it to have it derived (%s)" % _geometry_words(derived)
                          if explicit and fit else ", add hosts, or lower the pools' replicas"))


def _rule_spare_capacity(ctx):
    """Protected pools short with any one host out (every card keeping its MIG mode, every node VM
    placed again, preemptible pools first); and, on the same finding, whether the ESXi role refuses
    to roll the cluster one host at a time."""
    keep = protected(ctx)
    for cluster in ctx.d["clusters"]:
        checked = _geometry_checked(ctx, cluster)
        if checked is None or not any(keep(p) for p, _gpus, _cap in node_vms(ctx, cluster)):
            continue
        _geometry, positions, explicit = checked
        per_host = cluster["gpu"]["per_host"]
        uniform = all(p == positions[0] for p in positions)
        worst = OrderedDict()   # pool name -> (node VMs short, loss)
        for loss in host_loss(ctx, cluster, positions):
            for name, left in loss[3].items():
                if name not in worst or len(left) > len(worst[name][0]):
                    worst[name] = (left, loss)
        for name, (left, (lost, cards, rest, _short)) in worst.items():
            pool = ctx.pools[name]
            mig = mig_backed(pool)
            where = ("the largest host of %s (%d GPUs)" % (cluster["name"], per_host) if uniform else
                     "host %d of %s (in name order; %d GPUs, %s)" % (
                         lost + 1, cluster["name"], per_host, _mig_on(positions[lost])))
            message = "losing %s leaves %d of its %d node VMs without a GPU" % (
                where, len(left), pool["node_pool"]["replicas"])
            if any(positions):
                message += " %s (they need %s %s; the other hosts have %s)" % (
                    _mode(mig), _gpus(cards_needed(left, per_host)), _mode(mig), _free_words(cards, rest, mig, left))
            if mig and explicit:
                fix = ("keep as many GPUs in MIG mode free on %s as %s uses on one host (clusters.%s.mig_geometry: "
                       "MIG on more GPUs of the spare host), add a host, or lower the replicas of this or the "
                       "cluster's other pools" % (cluster["name"], name, cluster["name"]))
            else:
                fix = ("keep one host's worth of GPUs %sfree on %s: add a host, or lower the replicas of this "
                       "or the cluster's other pools" % ("in MIG mode " if mig and any(positions) else "",
                                                         cluster["name"]))
            yield Finding("spare_capacity", "pools.%s" % name, message, fix)
        refusal = roll_refusal(ctx, cluster)
        if refusal is not None:
            yield Finding("spare_capacity", "clusters.%s" % cluster["name"],
                          "the esxi_gpu_host role refuses to roll %s one host at a time without esxi_gpu_host_force: "
                          "its protected pools need %d GPUs, %d of %d stay with the largest host out"
                          % ((cluster["name"],) + refusal),
                          "add a host to %s, or lower the replicas of its protected pools (preemptible pools are "
                          "drained by a roll, not counted)" % cluster["name"])


def _rule_vm_reservations_fit(ctx):
    """Reserved VM classes: each reserved class is one the tenant's namespace offers (a gpu_quota on its
    pool), a zone names a class once, and the reservations fit the cluster's cards after its node VMs with
    one host kept spare (``_vm_reservations.reservation_shortfalls``)."""
    for tenant in ctx.d["tenants"]:
        seen = set()
        for reservation in tenant.get("vm_reservations") or []:
            name, zone = reservation.get("pool"), reservation.get("zone")
            if name not in ctx.pools:
                continue
            if (name, zone) in seen:
                yield Finding("vm_reservations_fit", "tenants.%s" % tenant.get("name"),
                              "vm_reservations names pool %s in zone %s twice" % (name, zone),
                              "keep one entry per pool and zone, with the sum of the counts")
            seen.add((name, zone))
            if not (tenant.get("gpu_quota") or {}).get(name):
                yield Finding("vm_reservations_fit", "tenants.%s" % tenant.get("name"),
                              "reserves VM class %s of pool %s in zone %s, which namespace %s does not offer "
                              "(no gpu_quota on %s)" % (ctx.pools[name]["vm_class"].get("name"), name, zone,
                                                        tenant.get("namespace"), name),
                              "set gpu_quota.%s above 0 or remove the reservation" % name)
    for cluster in ctx.d["clusters"]:
        for tenant, reservation, fits, vm_class in reservation_shortfalls(ctx, cluster):
            spare = "one host kept spare, " if cluster["hosts"] > 1 else ""
            yield Finding("vm_reservations_fit", "tenants.%s" % tenant.get("name"),
                          "tenant %s reserves %d VMs of class %s (pool %s) in zone %s; %d fit on %s (%s%d hosts x "
                          "%d GPUs, after the node VMs and the reservations before it)"
                          % (tenant.get("name"), reservation["count"], vm_class, reservation["pool"],
                             reservation["zone"], fits, cluster["name"], spare, cluster["hosts"],
                             cluster["gpu"]["per_host"]),
                          "lower the count to %d, lower the replicas of %s's pools, or add a host" % (
                              fits, cluster["name"]))


def _rule_model_fits_framebuffer(ctx):
    for pool in ctx.d["pools"]:
        model_size = pool.get("model") or {}
        profile = ctx.usable(pool)
        if profile is None or model_size.get("weights_gb") is None:
            continue
        need = model_size["weights_gb"] + (model_size.get("kv_cache_gb") or 0.0)
        if need > profile.framebuffer_gb:
            gpu = ctx.model_of(pool)
            bigger = [n for n in offered_profiles(gpu)
                      if parse_profile(n).mig_backed == profile.mig_backed and parse_profile(n).series == "C"
                      and not parse_profile(n).media_extension and parse_profile(n).framebuffer_gb >= need]
            bigger.sort(key=lambda n: parse_profile(n).framebuffer_gb)
            yield Finding("model_fits_framebuffer", _pool_object(pool),
                          "model %.1f GB + KV cache %.1f GB = %.1f GB does not fit the %d GB of %s"
                          % (model_size["weights_gb"], model_size.get("kv_cache_gb") or 0.0, need,
                             profile.framebuffer_gb, profile.name),
                          "use %s, or shrink the KV cache or quantize the model" %
                          ("the larger profile %s" % bigger[0] if bigger else "full cards with more GPUs per node"))


_RULE_FUNCS = OrderedDict([
    ("design_name_safe", _rule_design_name_safe),
    ("dns_label", _rule_dns_label),
    ("label_syntax", _rule_label_syntax),
    ("reserved_name", _rule_reserved_name),
    ("unique_names", _rule_unique_names),
    ("unknown_reference", _rule_unknown_reference),
    ("gpu_model_known", _rule_gpu_model_known),
    ("profile_offered", _rule_profile_offered),
    ("sharing_matches_profile", _rule_sharing_matches_profile),
    ("profiling_supported", _rule_profiling_supported),
    ("mig_mix_fits", _rule_mig_mix_fits),
    ("mig_geometry_valid", _rule_mig_geometry_valid),
    ("inference_not_time_sliced", _rule_inference_not_time_sliced),
    ("training_multi_gpu", _rule_training_multi_gpu),
    ("notebook_preemptible", _rule_notebook_preemptible),
    ("inference_above_preemptible", _rule_inference_above_preemptible),
    ("checkpoint_declared", _rule_checkpoint_declared),
    ("multi_gpu_gang_scheduled", _rule_multi_gpu_gang_scheduled),
    ("notebooks_best_effort", _rule_notebooks_best_effort),
    ("node_pool_gpu_taint", _rule_node_pool_gpu_taint),
    ("node_pool_profile_label", _rule_node_pool_profile_label),
    ("tenant_gpu_quota", _rule_tenant_gpu_quota),
    ("quota_exceeds_pool", _rule_quota_exceeds_pool),
    ("driver_version_pinned", _rule_driver_version_pinned),
    ("driver_source", _rule_driver_source),
    ("driver_versions_mixed", _rule_driver_versions_mixed),
    ("guest_driver_set", _rule_guest_driver_set),
    ("guest_driver_matches_host", _rule_guest_driver_matches_host),
    ("driver_upgrade_keeps_pools", _rule_driver_upgrade_keeps_pools),
    ("mig_strategy_vgpu", _rule_mig_strategy_vgpu),
    ("graphics_shared_direct", _rule_graphics_shared_direct),
    ("scheduler_valid", _rule_scheduler_valid),
    ("mixed_size_fixed_share", _rule_mixed_size_fixed_share),
    ("gpu_vms_pinned", _rule_gpu_vms_pinned),
    ("cluster_capacity", _rule_cluster_capacity),
    ("mig_geometry_fits", _rule_mig_geometry_fits),
    ("spare_capacity", _rule_spare_capacity),
    ("vm_reservations_fit", _rule_vm_reservations_fit),
    ("model_fits_framebuffer", _rule_model_fits_framebuffer),
    ("slo_knee", _rule_slo_knee),
])


def validate_normalized(d, findings):
    refused = any(f.rule == "schema" for f in findings)
    try:
        ctx = Context(d)
    except (TypeError, KeyError, AttributeError, ValueError, ZeroDivisionError):
        if not refused:
            raise
        ctx = None
    for name, func in _RULE_FUNCS.items() if ctx is not None else ():
        if not refused:
            findings.extend(func(ctx))
            continue
        # the schema left out the values it refused (None): a rule that needs one of them cannot
        # judge the rest of its object and says nothing; the design is refused by the schema anyway
        found = []
        try:
            found.extend(func(ctx))
        except (TypeError, KeyError, AttributeError, ValueError, ZeroDivisionError):
            pass
        findings.extend(found)
    order = dict((name, i) for i, name in enumerate(RULES))
    return sorted(findings, key=lambda f: (order[f.rule], f.object))


def validate(design):
    """Every finding of the design (schema and rules), errors and warnings, all at once."""
    d, findings = normalize(design)
    return validate_normalized(d, findings)
