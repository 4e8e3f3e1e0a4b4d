# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The design of a platform that exists: the inverse of derive() (pure, standard library only).

``discover(hosts, vm_classes, namespaces, storage_policies, drs, name) -> (design, notes)`` takes
what the readers the audit uses return (``vsphere._pool_reader``: the GPU inventory's host
records, the VM classes and namespaces in normal form, the storage policies, the DRS state) and
gives a design whose derived vSphere objects are the live ones. ``notes`` maps a path in the
design (a tuple of keys and list indexes) to a comment: what the platform does not say and how
to fill it in. ``render(design, notes)`` writes it as YAML with those comments.

What the vSphere side cannot say is left at the schema's default or, where the schema requires
a value, at a documented choice, each with a note: node pool replicas (the Supervisor's Cluster
objects hold them), the tenants' GPU quotas (the guest ResourceQuotas hold them), prices, SLOs
and model sizes.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import json
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nvidia
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import preemptible
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import gpu_resource
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import node_pool_labels, node_pool_taints
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import DEFAULT_PRIORITIES, DEFAULT_PRIORITY

PLATFORM_DESCRIPTION = re.compile(r"^gpupool platform namespace of VKS cluster (\S+)$")
POOL_DESCRIPTION = re.compile(r"^gpupool (\S+): (inference|training|notebooks), \d+ x \S+$")
MIG_ON = "enabled"  # a GPU's MIG mode as the GPU inventory reads it (enabled, disabled, None: unknown)
PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
YAML_WORDS = ("y", "n", "yes", "no", "on", "off", "true", "false", "null")
SHAPE_BY_SHARING = dict(mig="inference", full_card="training", time_sliced="notebooks")
# the descriptions derive() writes when the design gives none
PLATFORM_TEXT = "gpupool platform namespace of VKS cluster %s"
TENANT_TEXT = "gpupool tenant %s"
CHECKPOINT_UNSEEN = "found by gpu_pool_discover, which cannot see how the jobs checkpoint: declare checkpoint or give the reason"


def pool_description(pool):
    """The VM class description derive() writes for ``pool`` when its vm_class gives none."""
    return "gpupool %s: %s, %d x %s" % (pool["name"], pool["shape"], pool["gpus_per_node"], pool["vgpu_profile"])


class DiscoverError(Exception):
    """The platform cannot be described as a design (no GPU host, no VM class with a vGPU)."""


def _most(values):
    """The most frequent of ``values`` (the first seen on a tie), None for none."""
    counts = OrderedDict()
    for v in values:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    return max(counts, key=lambda v: counts[v]) if counts else None


def _cluster(name, members, drs):
    """(design cluster, notes under it) of one vSphere cluster's GPU hosts."""
    notes = {}
    models = [g["model"] for h in members for g in h.get("gpus") or []]
    model = _most(models)
    if len(set(models)) > 1:
        notes[("gpu", "model")] = "hosts of this cluster carry %s: a design cluster has one GPU model" % (
            ", ".join(sorted(set(models))))
    drivers = [h.get("driver") or {} for h in members]
    full = _most(d.get("full_version") for d in drivers)
    image = any(d.get("source") == "image" for d in drivers)
    component = _most(p.get("name") for d in drivers for p in d.get("packages") or []
                      if p.get("version") == full)
    driver = OrderedDict([("version", full), ("lifecycle", "vlcm" if image else "direct")])
    source = "depot" if image else "bundle"
    # the rule driver_source requires a source and the platform does not say where its driver came from
    driver[source] = "FILL-IN the offline %s of %s %s" % (source, component or "the NVIDIA component", full)
    if component:
        driver["component"] = component
    notes[("driver", source)] = ("the platform does not say where its driver came from and the %s lifecycle "
                                 "requires it (rule driver_source): give the offline %s; the audit does not use it"
                                 % (driver["lifecycle"], "depot URL" if image else "bundle's datastore path or URL"))
    graphics = [h.get("graphics") or {} for h in members]
    out_graphics = OrderedDict([("type", _most(g.get("default_type") for g in graphics) or "shared_direct"),
                                ("assignment_policy", _most(g.get("assignment_policy") for g in graphics)
                                 or "performance")])
    scheds = [h.get("scheduler") or {} for h in members]
    scheduler = OrderedDict([("policy", _most(s.get("policy") for s in scheds) or "best_effort")])
    slice_ms = _most(s.get("time_slice_ms") for s in scheds if s.get("policy") == scheduler["policy"])
    if slice_ms is not None and scheduler["policy"] != "best_effort":
        scheduler["time_slice_ms"] = slice_ms
    out = OrderedDict([
        ("name", name),
        ("gpu", OrderedDict([("model", model), ("per_host", max(h.get("gpu_count") or 0 for h in members))])),
        ("hosts", len(members)),
        ("driver", driver),
        ("graphics", out_graphics),
        ("scheduler", scheduler),
    ])
    geometry = OrderedDict((h["name"], [g["index"] for g in h.get("gpus") or [] if g.get("mig") == MIG_ON])
                           for h in sorted(members, key=lambda h: h["name"]))
    if any(geometry.values()):
        out["mig_geometry"] = OrderedDict((k, v) for k, v in geometry.items() if v)
    state = drs.get(name) or {}
    behaviors = [o.get("behavior") for o in (state.get("overrides") or {}).values() if o.get("enabled") is not False]
    gpu_vms = [vm.get("moid") for h in members for vm in h.get("vgpu_vms") or []]
    pinned = [m for m in gpu_vms if m in (state.get("overrides") or {})]
    behavior = _most(behaviors)
    if gpu_vms and not pinned:
        out["drs"] = OrderedDict([("pinning", False)])
        notes[("drs",)] = "no vGPU VM has a DRS override: pinning false needs waivers.gpu_vms_pinned (the reason)"
        out["waivers"] = OrderedDict([("gpu_vms_pinned", "found unpinned by gpu_pool_discover: give the reason")])
    elif behavior in ("partiallyAutomated", "manual"):
        out["drs"] = OrderedDict([("pinning", True), ("behavior", behavior)])
    return out, notes


def _sharing(profile, model):
    """mig, full_card or time_sliced for a vGPU profile on a GPU model (catalog name)."""
    parsed = _nvidia.parse_profile(profile)
    if parsed.mig_backed:
        return "mig"
    try:
        memory = _nvidia.gpu_model(model).memory_gb
    except _nvidia.NvidiaError:
        memory = None
    return "full_card" if memory is not None and parsed.framebuffer_gb >= memory else "time_sliced"


def _pool_name(class_id, description):
    match = POOL_DESCRIPTION.match(description or "")
    if match:
        return match.group(1), match.group(2)
    name = class_id[4:] if class_id.startswith("gpu-") and len(class_id) > 4 else class_id
    return name, None


def _access(entries):
    return [OrderedDict([("subject", a.get("subject")), ("type", (a.get("type") or "group").lower()),
                         ("domain", a.get("domain") or "vsphere.local"), ("role", (a.get("role") or "edit").lower())])
            for a in entries or []]


def _policy_name(policy_id, storage_policies):
    return (storage_policies or {}).get(policy_id) or policy_id


def discover(hosts, vm_classes, namespaces, storage_policies=None, drs=None, name="gpupool", cluster_names=None,
             clusters=None):
    """(design, notes) of the live vSphere side; DiscoverError when it holds no GPU pool.
    ``cluster_names``: {cluster id: name}, for the namespaces that name their cluster by id; ``clusters``: the
    vSphere clusters to describe (None: every cluster with GPU hosts)."""
    notes = {}
    by_cluster = OrderedDict()
    for h in sorted(hosts or [], key=lambda h: (h.get("cluster") or "", h["name"])):
        if h.get("gpu_count") and (clusters is None or h.get("cluster") in clusters):
            by_cluster.setdefault(h.get("cluster"), []).append(h)
    if not by_cluster:
        where = "the platform" if clusters is None else "the platform (clusters %s)" % ", ".join(clusters)
        raise DiscoverError("%s has no host with an NVIDIA GPU: there is no GPU pool to describe "
                            "(gpu_host_info lists the hosts and their GPUs)" % where)
    clusters = []  # from here on: the design's clusters
    for i, (cname, members) in enumerate(by_cluster.items()):
        cluster, cnotes = _cluster(cname, members, drs or {})
        clusters.append(cluster)
        notes.update(((("clusters", i) + k), v) for k, v in cnotes.items())
    offered = OrderedDict((c["name"], set(p for h in by_cluster[c["name"]] for p in h.get("vgpu_profiles") or []))
                          for c in clusters)
    pools = []
    for class_id in sorted(vm_classes or {}):
        info = vm_classes[class_id]
        profiles = info.get("vgpu_profiles") or []
        if not profiles:
            continue
        profile = profiles[0]
        home = [c for c in clusters if profile in offered[c["name"]]] or clusters
        cluster = home[0]
        sharing = _sharing(profile, cluster["gpu"]["model"])
        pool_name, shape = _pool_name(class_id, info.get("description"))
        i = len(pools)
        if shape is None:
            shape = SHAPE_BY_SHARING[sharing]
            notes[("pools", i, "shape")] = "inferred from the sharing (%s): say the workload shape" % sharing
        pool = OrderedDict([
            ("name", pool_name), ("shape", shape), ("cluster", cluster["name"]), ("sharing", sharing),
            ("vgpu_profile", profile), ("gpus_per_node", len(profiles)),
            ("profiling", bool(info.get("profiling")) and sharing in ("mig", "full_card")),
            ("vm_class", OrderedDict([("name", class_id), ("cpu", info.get("cpu_count")),
                                      ("memory_gb", (info.get("memory_mb") or 0) // 1024)])),
            ("node_pool", OrderedDict([("replicas", 0)])),
        ])
        own = info.get("description") or ""
        if own != pool_description(pool):  # derive() writes its own text unless the design gives this one
            pool["vm_class"]["description"] = own
        if len(set(profiles)) > 1:
            notes[("pools", i, "vgpu_profile")] = "the class holds %s: a pool has one profile" % ", ".join(profiles)
        notes[("pools", i, "node_pool", "replicas")] = (
            "the schema requires it and the vSphere side does not say: 0 chosen; give the node pool's "
            "replicas (its Cluster object on the Supervisor: spec.topology.workers.machineDeployments[].replicas)")
        notes[("pools", i)] = "what the platform cannot say: add slo, model and training from the workloads"
        pools.append(pool)
    if not pools:
        raise DiscoverError("no VM class has a vGPU profile: there is no GPU pool to describe "
                            "(the VM classes: %s)" % (", ".join(sorted(vm_classes or {})) or "none"))
    pool_of_class = dict((p["vm_class"]["name"], p) for p in pools)
    design = OrderedDict([("version", 1), ("name", name)])
    platform, tenants = [], []
    for ns_name in sorted(namespaces or {}):
        ns = namespaces[ns_name]
        classes = [c for c in ns.get("vm_classes") or [] if c in pool_of_class]
        if not classes:
            continue
        match = PLATFORM_DESCRIPTION.match(ns.get("description") or "")
        (platform if match else tenants).append((ns_name, ns, classes, match.group(1) if match else None))
    if not platform and tenants:
        # no namespace says it is a VKS cluster's: the one without limits (else the first) carries the clusters
        free = [t for t in tenants if not any((t[1].get("limits") or {}).values())] or tenants
        chosen = free[0]
        tenants.remove(chosen)
        platform = [chosen[:3] + (None,)]
    all_policies = [pid for _n, ns, _c, _v in platform + tenants for pid in (ns.get("storage_policies") or {})]
    default_policy = _policy_name(_most(all_policies), storage_policies)
    sup_cluster = _most(ns.get("cluster") for _n, ns, _c, _v in platform + tenants)
    sup_cluster = (cluster_names or {}).get(sup_cluster, sup_cluster)
    if sup_cluster not in [c["name"] for c in clusters]:
        sup_cluster = clusters[0]["name"]
        notes[("supervisor", "cluster")] = "the namespaces name a cluster by id: check it is the Supervisor's cluster"
    design["supervisor"] = OrderedDict([("cluster", sup_cluster), ("storage_policy", default_policy or "")])
    vks = []
    for ns_name, ns, classes, vks_name in platform:
        if vks_name is None:
            notes[("vks_clusters", len(vks), "name")] = (
                "the VKS cluster's name is not on the vSphere side: the namespace's name chosen; give the "
                "cluster's name (kubectl get clusters -n %s on the Supervisor)" % ns_name)
        entry = OrderedDict([("name", vks_name or ns_name), ("namespace", ns_name)])
        own = ns.get("description") or ""
        if own != PLATFORM_TEXT % entry["name"]:
            entry["description"] = own
        entry["access"] = _access(ns.get("access"))
        vks.append(entry)
        for c in classes:
            pool_of_class[c]["node_pool"]["vks_cluster"] = vks_name or ns_name
    if not vks:
        raise DiscoverError("no Supervisor namespace offers a VM class with a vGPU: there is no VKS cluster to "
                            "describe (give the namespace its classes, or write vks_clusters by hand)")
    design["vks_clusters"] = vks
    design["clusters"] = clusters
    design["pools"] = pools
    out_tenants = []
    for ns_name, ns, classes, _v in tenants:
        i = len(out_tenants)
        policies = ns.get("storage_policies") or {}
        tenant = OrderedDict([("name", ns_name)])
        if (ns.get("description") or "") != TENANT_TEXT % ns_name:
            tenant["description"] = ns.get("description") or ""
        tenant["access"] = _access(ns.get("access"))
        tenant["gpu_quota"] = OrderedDict((pool_of_class[c]["name"], pool_of_class[c]["gpus_per_node"])
                                          for c in classes)
        notes[("tenants", i, "gpu_quota")] = (
            "the vSphere side says which pools the tenant may use, not how many GPUs: one node's worth chosen; "
            "give the guest ResourceQuota's nvidia.com GPU count per pool")
        if policies:
            policy = _policy_name(sorted(policies)[0], storage_policies)
            if policy != default_policy:
                tenant["storage_policy"] = policy
        limits = OrderedDict((k, (ns.get("limits") or {}).get(k)) for k in ("cpu_mhz", "memory_mib")
                             if (ns.get("limits") or {}).get(k) is not None)
        storage = policies.get(sorted(policies)[0]) if policies else None
        own = (ns.get("limits") or {}).get("storage_mib")
        if storage is not None and own is not None and storage != own:
            notes[("tenants", i, "limits", "storage_mib")] = (
                "the namespace limits storage to %d MiB and its storage policy to %d MiB: the design sets both to "
                "one value (the policy's taken)" % (own, storage))
        if storage is not None or own is not None:
            limits["storage_mib"] = storage if storage is not None else own
        if limits:
            tenant["limits"] = limits
        out_tenants.append(tenant)
    design["tenants"] = out_tenants
    waive_unseen_checkpoints(design, notes)
    return design, notes


def waive_unseen_checkpoints(design, notes):
    """The platform does not say how a training pool's jobs checkpoint: a pool preemptible under the design's
    priorities (the defaults merged with ``design["priorities"]``) gets the waiver of rule checkpoint_declared
    with a placeholder reason and a note, as an unpinned cluster gets ``waivers.gpu_vms_pinned``."""
    priorities = OrderedDict((k, dict(v)) for k, v in DEFAULT_PRIORITIES.items())
    for name, entry in (design.get("priorities") or {}).items():
        priorities[name] = dict(priorities.get(name) or {}, **entry)
    for i, pool in enumerate(design.get("pools") or []):
        if pool.get("shape") != "training" or pool.get("checkpoint") or (pool.get("waivers") or {}).get(
                "checkpoint_declared"):
            continue
        if preemptible(dict(pool, priority=_pool_priority(pool)), priorities):
            pool.setdefault("waivers", OrderedDict())["checkpoint_declared"] = CHECKPOINT_UNSEEN
            notes[("pools", i, "waivers")] = ("a preemptible training pool: declare checkpoint (claim or "
                                              "claim_template, resume_check) and drop the waiver, or give the reason")
    return design, notes


def apply_vks(design, notes, vks):
    """The VKS node pools read on the Supervisor (``k8s._guest_reader.read_vks``: {cluster: {namespace,
    machine_deployments: {name: {replicas, vm_class, labels, taints}}}}) written into ``design``'s pools: each
    pool takes the node pool whose VM class is its class (replicas, name, VKS cluster) and keeps, of the node
    pool's labels and taints, what differs from the ones derive() gives the pool. A pool no node pool uses
    keeps its note."""
    pools = design["pools"]
    taken = set()
    for vks_name in sorted(vks or {}):
        mds = vks[vks_name].get("machine_deployments") or {}
        for md_name in sorted(mds):
            md = mds[md_name]
            match = [i for i, p in enumerate(pools) if p["vm_class"]["name"] == md.get("vm_class") and i not in taken]
            if not match:
                continue
            i = match[0]
            taken.add(i)
            pool = pools[i]
            node_pool = OrderedDict([("replicas", md.get("replicas") or 0)])
            if md_name != pool["name"]:
                node_pool["name"] = md_name
            node_pool["vks_cluster"] = vks_name
            derived = node_pool_labels(dict(pool, node_pool={}))
            live = md.get("labels")
            if live is not None:
                extra = OrderedDict((k, live[k]) for k in sorted(live) if derived.get(k) != live[k])
                if extra:
                    node_pool["labels"] = extra
                lacking = [k for k in derived if k not in live]
                if lacking:  # the rules keep the derived labels (node_pool_profile_label ...): not nulled here
                    notes[("pools", i, "node_pool")] = (
                        "the node pool lacks the labels %s that the design derives: a converge adds them"
                        % ", ".join(lacking))
            taints = md.get("taints")
            if taints is not None:
                want = [OrderedDict((k, t.get(k)) for k in ("key", "value", "effect")) for t in taints]
                if want != node_pool_taints(dict(pool, node_pool={})):
                    node_pool["taints"] = want
            pool["node_pool"] = node_pool
            notes.pop(("pools", i, "node_pool", "replicas"), None)
    return design, notes


def _pool_priority(pool):
    return pool.get("priority") or DEFAULT_PRIORITY[pool["shape"]]


def _quota_of(tenant, pool, pools, quotas, strategy):
    """GPUs the tenant's ResourceQuotas give ``pool`` (None: they do not say for this pool alone)."""
    key = "requests.%s" % gpu_resource(pool, strategy)
    same = [p for p in pools if "requests.%s" % gpu_resource(p, strategy) == key]
    scoped = [q for q in quotas if q["priority_class"] == _pool_priority(pool) and key in q["hard"]]
    if len(same) == 1:
        whole = [q for q in quotas if q["priority_class"] is None and key in q["hard"]]
        found = (whole or scoped)[:1]
    else:  # pools sharing a resource: only quotas scoped to a priority no other of them uses tell them apart
        found = scoped if len([p for p in same if _pool_priority(p) == _pool_priority(pool)]) == 1 else []
    if not found:
        return None
    try:
        return int(str(found[0]["hard"][key]))
    except ValueError:
        return None


def apply_guest(design, notes, guest):
    """The guest cluster's objects (``k8s._guest_reader.read_guest_design``'s answer) written into ``design``:
    the tenants' GPU quotas from their ResourceQuotas, the PriorityClasses the design would write otherwise
    (a default of another value, a class a quota is scoped to), gang scheduling, cohort and preemption from the
    ClusterQueues ``gpupool-<pool>``, the ClusterPolicy's guest driver and MIG strategy, the culling."""
    guest_out = design.setdefault("guest", OrderedDict())
    pools = dict((p["name"], p) for p in design["pools"])
    policy = guest.get("cluster_policy")
    strategy = _most([(policy.get("mig") or {}).get("strategy")]) if policy else None
    auto = "single" if any(p["sharing"] == "mig" for p in design["pools"]) else "none"
    if strategy and strategy != auto:
        guest_out["mig_strategy"] = strategy
    strategy = strategy or auto
    if policy:
        drv = policy.get("driver") or {}
        if drv.get("repository") and drv.get("version"):
            driver = OrderedDict([("repository", drv["repository"])])
            if drv.get("image") and drv["image"] != "vgpu-guest-driver":
                driver["image"] = drv["image"]
            driver["version"] = drv["version"]
            secrets = drv.get("imagePullSecrets") or []
            if secrets:
                driver["pull_secret"] = secrets[0]
            guest_out["driver"] = driver
    else:
        notes[("guest",)] = "no ClusterPolicy in the guest cluster: the GPU Operator is not installed (give guest.driver)"
    live_pcs = guest.get("priority_classes") or {}
    scoped = set(q["priority_class"] for qs in (guest.get("resource_quotas") or {}).values() for q in qs
                 if q["priority_class"])
    priorities = OrderedDict()
    for name in sorted(live_pcs):
        pc = live_pcs[name]
        entry = OrderedDict([("value", pc.get("value")),
                             ("preemption_policy", pc.get("preemptionPolicy") or "PreemptLowerPriority")])
        if pc.get("description"):
            entry["description"] = pc["description"]
        default = DEFAULT_PRIORITIES.get(name)
        if default is not None:
            if (default["value"], default["preemption_policy"], default["description"]) != (
                    entry["value"], entry["preemption_policy"], entry.get("description", name)):
                priorities[name] = entry
        elif name in scoped and not name.startswith("system-"):
            priorities[name] = entry
    if priorities:
        design["priorities"] = priorities
    for i, tenant in enumerate(design.get("tenants") or []):
        quotas = (guest.get("resource_quotas") or {}).get(tenant.get("namespace") or tenant["name"])
        if quotas is None:
            continue
        mine = [pools[n] for n in tenant["gpu_quota"]]
        unread = []
        for pool in mine:
            gpus = _quota_of(tenant, pool, mine, quotas, strategy)
            if gpus is None:
                unread.append(pool["name"])
            else:
                tenant["gpu_quota"][pool["name"]] = gpus
        if unread:
            notes[("tenants", i, "gpu_quota")] = (
                "the ResourceQuotas of namespace %s do not say the GPUs of %s alone (one quota per pool, or one per "
                "PriorityClass, does): one node's worth chosen" % (tenant.get("namespace") or tenant["name"],
                                                                   ", ".join(unread)))
        else:
            notes.pop(("tenants", i, "gpu_quota"), None)
    queues = guest.get("kueue")
    if queues:
        cohorts, preemption = [], []
        for name, pool in pools.items():
            spec = queues.get("gpupool-%s" % name)
            if spec is None or pool["shape"] != "training":
                continue
            pool.setdefault("training", OrderedDict())["gang_scheduling"] = True
            cohorts.append(spec.get("cohortName") or spec.get("cohort"))
            pre = spec.get("preemption") or {}
            preemption.append((pre.get("withinClusterQueue"), pre.get("reclaimWithinCohort")))
        kueue = OrderedDict()
        cohort = _most(cohorts)
        if cohort and cohort != "gpupool":
            kueue["cohort"] = cohort
        within, reclaim = _most(preemption) or (None, None)
        pre = OrderedDict((k, v) for k, v, d in (("within_cluster_queue", within, "LowerPriority"),
                                                 ("reclaim_within_cohort", reclaim, "Any")) if v and v != d)
        if pre:
            kueue["preemption"] = pre
        if kueue:
            guest_out["kueue"] = kueue
        other = sorted(n for n in queues if not (n.startswith("gpupool-") and n[8:] in pools))
        if other:
            notes[("guest", "kueue")] = ("ClusterQueues the design does not derive (it writes gpupool-<pool> per "
                                         "gang-scheduled training pool): %s" % ", ".join(other))
    culling = guest.get("culling")
    if culling and culling.get("exists") and not culling.get("kubeflow"):
        env = culling.get("env") or {}
        out = OrderedDict()
        match = re.match(r"^\*/(\d+) \* \* \* \*$", culling.get("schedule") or "")
        if match and int(match.group(1)) != 10:
            out["check_minutes"] = int(match.group(1))
        try:
            per_pool = json.loads(env.get("CULL_POOL_IDLE_MINUTES") or "{}")
            idle = int(env.get("CULL_IDLE_MINUTES") or 240)
        except ValueError:
            per_pool, idle = {}, 240
        if idle != 240 and not per_pool:
            out["idle_minutes"] = idle
        for name, minutes in sorted(per_pool.items()):
            if name in pools and minutes != 240:
                pools[name].setdefault("culling", OrderedDict())["idle_minutes"] = minutes
        if out:
            guest_out["culling"] = out
    if not guest_out:
        design.pop("guest")
    waive_unseen_checkpoints(design, notes)  # the live PriorityClasses may make another pool preemptible
    return design, notes


# --- YAML with comments (JSON scalars are YAML scalars) ------------------------------------------------


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))


def _key(key):
    """A mapping key: plain where YAML reads it back as the same string, else JSON-quoted."""
    text = str(key)
    return text if PLAIN_KEY.match(text) and text.lower() not in YAML_WORDS else json.dumps(text)


def _comment(lines, indent, text):
    if text:
        lines.append("%s# %s" % (" " * indent, text))


def _emit(lines, value, indent, path, notes):
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            _comment(lines, indent, notes.get(path + (key,)))
            if isinstance(item, list) and item and not any(isinstance(v, (dict, list)) for v in item):
                lines.append("%s%s: [%s]" % (pad, _key(key), ", ".join(_scalar(v) for v in item)))
            elif isinstance(item, (dict, list)) and item:
                lines.append("%s%s:" % (pad, _key(key)))
                _emit(lines, item, indent + 2, path + (key,), notes)
            else:
                lines.append("%s%s: %s" % (pad, _key(key), "{}" if isinstance(item, dict) else
                                           "[]" if isinstance(item, list) else _scalar(item)))
        return
    for i, item in enumerate(value):
        _comment(lines, indent, notes.get(path + (i,)))
        if isinstance(item, dict) and item:
            sub = []
            _emit(sub, item, indent + 2, path + (i,), notes)
            first = next(n for n, text in enumerate(sub) if not text.lstrip().startswith("#"))
            sub[first] = "%s- %s" % (pad, sub[first][indent + 2:])
            lines.extend(sub)
        elif isinstance(item, list) and item:
            lines.append("%s-" % pad)
            _emit(lines, item, indent + 2, path + (i,), notes)
        else:
            lines.append("%s- %s" % (pad, _scalar(item) if not isinstance(item, (dict, list)) else
                                     ("{}" if isinstance(item, dict) else "[]")))


def render(design, notes, header=None):
    """The design as YAML text, each note a comment above its key."""
    lines = ["# %s" % line for line in (header or [])]
    _emit(lines, design, 0, (), notes or {})
    return "\n".join(lines) + "\n"
