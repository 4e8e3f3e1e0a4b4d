# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a valid pool design means for each link (pure, standard library only).

``derive(design) -> dict``: the inputs of every role and module of the chain under their
own names (see docs/design.md); raises ``DesignError`` when the design has errors.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    cluster_mig_geometry,
    geometry_positions,
    pool_gpus,
    protected,
    roll_min_gpus,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError, errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    POOL_LABEL,
    node_pool_labels,
    node_pool_taints,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ha import admission_policy
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _profiling
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import gang_scheduled, validate_normalized
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize, vcenter_env_prefix
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import encode_scheduler, format_rmpvmrl, parse_profile


def _mig_strategy(d):
    strategy = d["guest"]["mig_strategy"]
    if strategy != "auto":
        return strategy
    return "single" if any(p["sharing"] == "mig" for p in d["pools"]) else "none"


def gpu_resource(pool, mig_strategy, rename_shared=False):
    """The extended resource a pod of the pool requests."""
    if mig_strategy == "mixed" and pool["sharing"] == "mig":
        return "nvidia.com/mig-%s" % parse_profile(pool["vgpu_profile"]).mig_profile
    if rename_shared and (pool.get("guest_time_slicing") or {}).get("replicas"):
        return "nvidia.com/gpu.shared"
    return "nvidia.com/gpu"


def _derive_esxi(ctx):
    clusters = OrderedDict()
    for cluster in ctx.d["clusters"]:
        model = ctx.models[cluster["name"]]
        driver, scheduler = cluster["driver"], cluster["scheduler"]
        geometry, positions, _explicit = cluster_mig_geometry(ctx, cluster)
        clusters[cluster["name"]] = OrderedDict([
            ("cluster", cluster["name"]),
            ("gpu_model", model.name),
            ("hosts", cluster["hosts"]),
            ("gpus_per_host", cluster["gpu"]["per_host"]),
            ("driver_version", driver["version"]),
            ("driver_bundle", driver["bundle"] or ""),
            ("lifecycle", driver["lifecycle"]),
            ("vlcm_depot_url", driver["depot"] or ""),
            ("component", driver["component"]),
            ("graphics_type", cluster["graphics"]["type"]),
            ("assignment_policy", cluster["graphics"]["assignment_policy"]),
            # same_size | mixed_size on the GPUs without MIG; "" - not managed
            ("vgpu_mode", cluster["graphics"].get("vgpu_mode") or ""),
            ("scheduler", OrderedDict([("policy", scheduler["policy"]),
                                       ("time_slice_ms", scheduler["time_slice_ms"])])),
            ("rmpvmrl", format_rmpvmrl(encode_scheduler(scheduler["policy"], scheduler["time_slice_ms"]))),
            # one entry per host position (name order) or per host name: the GPUs in MIG mode
            ("mig_geometry", _geometry_out(geometry, cluster["hosts"])),
            # the summary in one word (reports): enabled when the geometry puts MIG on any GPU
            ("mig_mode", "enabled" if any(positions) else "disabled"),
            ("min_gpus", roll_min_gpus(ctx, cluster)),
            ("protected_priority_classes", protected_priority_classes(ctx, cluster["name"])),
        ])
    return OrderedDict([("clusters", clusters)])


def _geometry_out(geometry, hosts):
    """A MIG geometry as derive() gives it: sorted GPU indexes, the mapping form's hosts in name order,
    the list form one entry per host position (an empty one, or no mapping at all, is every host with
    MIG off: the role enforces that, where an empty geometry would leave MIG mode as it is)."""
    if isinstance(geometry, dict) and geometry:
        return OrderedDict((name, sorted(set(geometry[name] or []))) for name in sorted(geometry))
    return geometry_positions([] if isinstance(geometry, dict) else geometry, hosts)


def protected_priority_classes(ctx, cluster_name):
    """The PriorityClasses of the cluster's protected pools (inference and pools nothing preempts):
    a host roll's drain must find room for their pods elsewhere before it evicts them."""
    keep = protected(ctx)
    return sorted(set(p["priority"] for p in ctx.d["pools"]
                      if p["cluster"] == cluster_name and keep(p) and p.get("priority")))


def _access(entries):
    # the option names of gpupool.vcf.supervisor_namespace's access entries
    return [OrderedDict([("subject", a["subject"]), ("type", a["type"].upper()),
                         ("domain", a["domain"]), ("role", a["role"].upper())]) for a in entries]


def adopts(d, entry):
    """Whether an entry of the design (pool, tenant, VKS cluster, cluster) adopts: its own adopt, else the design's."""
    own = entry.get("adopt")
    return bool(d.get("adopt")) if own is None else bool(own)


def _adopt(d, entry):
    """The adopt key of a derived entry: present only when it adopts (what does not adopt is derived as before)."""
    return [("adopt", True)] if adopts(d, entry) else []


def _derive_vsphere(ctx):
    d = ctx.d
    vm_classes = []
    for pool in d["pools"]:
        vm_class = pool["vm_class"]
        vm_classes.append(OrderedDict([
            ("name", vm_class["name"]),
            ("cpu_count", vm_class["cpu"]),
            ("memory_mb", vm_class["memory_gb"] * 1024),
            ("vgpu_profiles", [pool["vgpu_profile"]] * pool["gpus_per_node"]),
            ("profiling", _profiling.pool_profiling(pool)),
            ("memory_reservation", 100),
            ("pool", pool["name"]),
            ("cluster", pool["cluster"]),
            ("description", vm_class["description"] if vm_class["description"] is not None else
             "gpupool %s: %s, %d x %s" % (pool["name"], pool["shape"], pool["gpus_per_node"], pool["vgpu_profile"])),
        ] + _adopt(d, pool)))
    namespaces = []
    storage = d["supervisor"]["storage_policy"]
    for vks in d["vks_clusters"]:
        classes = [p["vm_class"]["name"] for p in d["pools"] if p["node_pool"]["vks_cluster"] == vks["name"]]
        existing = [n for n in namespaces if n["name"] == vks["namespace"]]
        if existing:
            existing[0]["vm_classes"].extend(c for c in classes if c not in existing[0]["vm_classes"])
            existing[0]["access"].extend(a for a in _access(vks["access"]) if a not in existing[0]["access"])
            continue
        namespaces.append(OrderedDict([
            ("name", vks["namespace"]), ("cluster", d["supervisor"]["cluster"]),
            ("supervisor", d["supervisor"]["name"]), ("kind", "platform"),
            ("description", vks["description"] if vks["description"] is not None else
             "gpupool platform namespace of VKS cluster %s" % vks["name"]),
            ("vm_classes", classes), ("storage_policies", [OrderedDict([("policy", storage), ("limit_mib", None)])]),
            ("limits", OrderedDict([("cpu_mhz", None), ("memory_mib", None), ("storage_mib", None)])),
            ("access", _access(vks["access"])),
            # the namespace offers exactly the GPU shapes of the design (classes without a vGPU stay)
            ("purge_gpu_vm_classes", True),
        ] + _adopt(d, vks)))
    for tenant in d["tenants"]:
        classes = [ctx.pools[p]["vm_class"]["name"] for p, n in tenant["gpu_quota"].items() if n > 0]
        namespaces.append(OrderedDict([
            ("name", tenant["namespace"]), ("cluster", d["supervisor"]["cluster"]),
            ("supervisor", d["supervisor"]["name"]), ("kind", "tenant"),
            ("description", tenant["description"] if tenant["description"] is not None else
             "gpupool tenant %s" % tenant["name"]),
            ("vm_classes", classes),
            ("storage_policies", [OrderedDict([("policy", tenant["storage_policy"]),
                                               ("limit_mib", tenant["limits"]["storage_mib"])])]),
            ("limits", OrderedDict((k, tenant["limits"][k]) for k in ("cpu_mhz", "memory_mib", "storage_mib"))),
            ("access", _access(tenant["access"])),
            ("purge_gpu_vm_classes", True),
        ] + _reserved(ctx, tenant) + _adopt(d, tenant)))
    drs = [OrderedDict([("name", c["name"]), ("behavior", c["drs"]["behavior"])] + _adopt(d, c))
           for c in d["clusters"] if c["drs"]["pinning"]]
    return OrderedDict([("vm_classes", vm_classes), ("namespaces", namespaces), ("drs_pinning", drs),
                        ("ha", _derive_ha(ctx)), ("zone_bindings", _zone_bindings(ctx))])


def _tenant_reservations(ctx, tenant):
    """A tenant's ``vm_reservations`` as the modules take them: ``[{zone, vm_class, count}]``, the pool named by
    its VM class (the design rules check the pools exist)."""
    return [OrderedDict([("zone", r["zone"]), ("vm_class", ctx.pools[r["pool"]]["vm_class"]["name"]),
                         ("count", r["count"])])
            for r in tenant.get("vm_reservations") or [] if r.get("pool") in ctx.pools]


def _reserved(ctx, tenant):
    """The namespace keys of a tenant with reserved VM classes (none without)."""
    reservations = _tenant_reservations(ctx, tenant)
    if not reservations:
        return []
    return [("vm_reservations", reservations),
            ("disallow_unreserved_direct_path_usage", bool(tenant.get("disallow_unreserved_direct_path_usage")))]


def _zone_bindings(ctx):
    """The Supervisor's zone bindings: every tenant's reservations summed per zone and class (zones, then
    classes, sorted), the pools' classes managed (a class the design stops reserving in a named zone is
    removed there); none when no tenant reserves."""
    d = ctx.d
    counts = OrderedDict()
    for tenant in d["tenants"]:
        for r in _tenant_reservations(ctx, tenant):
            key = (r["zone"], r["vm_class"])
            counts[key] = counts.get(key, 0) + r["count"]
    if not counts:
        return []
    reservations = [OrderedDict([("zone", zone), ("vm_class", vm_class), ("count", counts[(zone, vm_class)])])
                    for zone, vm_class in sorted(counts)]
    managed = sorted(set(p["vm_class"]["name"] for p in d["pools"]))
    return [OrderedDict([("cluster", d["supervisor"]["cluster"]), ("reservations", reservations),
                         ("managed_classes", managed)])]


def _derive_ha(ctx):
    """Per cluster with ha.manage: its pools' restart priorities and the admission control of the spare rule
    (one host of the cluster's hosts kept free, as a percentage of CPU and memory: docs/capacity.md), with the
    GPU cards that spare host holds (``spare_gpus``, a report key)."""
    d = ctx.d
    out = []
    for c in d["clusters"]:
        if not c["ha"]["manage"]:
            continue
        pools = [OrderedDict([("name", p["name"]), ("vgpu_profile", p["vgpu_profile"]),
                              ("node_pool", (p.get("node_pool") or {}).get("name")), ("vm_class", p["vm_class"]["name"]),
                              ("restart_priority", p["ha_restart_priority"])])
                 for p in d["pools"] if p["cluster"] == c["name"]]
        admission = None
        if c["ha"]["admission_control"]:
            admission = OrderedDict(sorted(admission_policy(c["hosts"], SPARE_HOSTS).items()))
        out.append(OrderedDict([("name", c["name"]), ("pools", pools), ("admission_control", admission),
                                ("spare_gpus", SPARE_HOSTS * c["gpu"]["per_host"] if admission else 0)]
                               + _adopt(d, c)))
    return out


def _derive_vks(ctx):
    d = ctx.d
    clusters = OrderedDict()
    for vks in d["vks_clusters"]:
        pools = []
        for pool in d["pools"]:
            if pool["node_pool"]["vks_cluster"] != vks["name"]:
                continue
            pools.append(OrderedDict([
                ("name", pool["node_pool"]["name"]),
                ("replicas", pool["node_pool"]["replicas"]),
                ("vm_class", pool["vm_class"]["name"]),
                ("failure_domain", pool["cluster"]),
                ("labels", node_pool_labels(pool)),
                ("taints", node_pool_taints(pool)),
            ]))
        clusters[vks["name"]] = OrderedDict([
            ("name", vks["name"]), ("namespace", vks["namespace"]), ("version", vks["version"]),
            ("storage_class", vks["storage_class"]), ("node_pools", pools)] + _adopt(d, vks))
    return OrderedDict([("clusters", clusters)])


# the hosts the spare rule keeps free per cluster (the largest host lost: _design_capacity.host_loss)
SPARE_HOSTS = 1
# the keys of derive()'s vSphere entries that say where an object comes from; the roles do not take them
REPORT_KEYS = ("pool", "kind", "supervisor")
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpupool.vcf"}


def _tolerations(pool):
    return [OrderedDict([("key", t["key"]), ("operator", "Equal" if t["value"] is not None else "Exists")]
                        + ([("value", t["value"])] if t["value"] is not None else []) + [("effect", t["effect"])])
            for t in node_pool_taints(pool)]


def _role_entry(entry):
    return OrderedDict((k, v) for k, v in entry.items() if k not in REPORT_KEYS)


def _esxi_role(esxi):
    """esxi_gpu_host's variables per GPU cluster (site.yml runs the role once per cluster).
    MIG mode is among them, card by card (``esxi_gpu_host_mig_geometry``: the GPUs of each host position, or
    of each named host, in MIG mode; ``_esxi.mig_geometry_for`` resolves it to the host names): a host whose
    MIG mode differs is rolled like a driver change (its guest nodes drained, maintenance mode, nvidia-smi,
    verified before the next host)."""
    out = OrderedDict()
    for name, c in esxi["clusters"].items():
        out[name] = OrderedDict([
            ("esxi_gpu_host_cluster", c["cluster"]),
            ("esxi_gpu_host_driver_version", c["driver_version"]),
            ("esxi_gpu_host_driver_bundle", c["driver_bundle"]),
            ("esxi_gpu_host_lifecycle", c["lifecycle"]),
            ("esxi_gpu_host_vlcm_depot_url", c["vlcm_depot_url"]),
            ("esxi_gpu_host_component", c["component"]),
            ("esxi_gpu_host_graphics_type", c["graphics_type"]),
            ("esxi_gpu_host_assignment_policy", c["assignment_policy"]),
            ("esxi_gpu_host_vgpu_mode", c["vgpu_mode"]),
            ("esxi_gpu_host_scheduler", c["scheduler"]),
            ("esxi_gpu_host_mig_geometry", c["mig_geometry"]),
            ("esxi_gpu_host_min_gpus", c["min_gpus"]),
            ("esxi_gpu_host_protected_priority_classes", c["protected_priority_classes"]),
        ])
    return out


def _vsphere_roles(vsphere, revisions=False):
    tenancy = OrderedDict([
        ("supervisor_gpu_tenancy_vm_classes", [_role_entry(c) for c in vsphere["vm_classes"]]),
        ("supervisor_gpu_tenancy_namespaces", [_role_entry(n) for n in vsphere["namespaces"]]),
        # a changed shape becomes a new class <name>-r<hex> the node pools roll to (supervisor.vm_class_revisions)
        ("supervisor_gpu_tenancy_class_revisions", revisions),
        # reserved VM classes (vSphere API 9.0 and later): the Supervisor's zone bindings, before the namespaces
        ("supervisor_gpu_tenancy_zone_bindings", [OrderedDict(b) for b in vsphere.get("zone_bindings") or []]),
    ])
    pinning = OrderedDict([
        ("drs_gpu_pinning_clusters", [OrderedDict(c) for c in vsphere["drs_pinning"]]),
        # removes only overrides the collection set (recorded on the cluster); an administrator's stay
        ("drs_gpu_pinning_purge_stale", True),
    ])
    return tenancy, pinning


def _ha_role(vsphere):
    """ha_gpu_restart's variables: the clusters the design manages HA of (the report key spare_gpus left out)."""
    return OrderedDict([("ha_gpu_restart_clusters", [OrderedDict((k, v) for k, v in c.items() if k != "spare_gpus")
                                                     for c in vsphere["ha"]])])


def _derive_vcenters(d, pinning, ha=None):
    """Per vCenter of the design: its endpoint (no credentials), the prefix of its connection's
    environment variables, whether the Supervisor is there, its GPU clusters, and the inputs of the
    roles that run once per vCenter (drs_gpu_pinning over its own clusters)."""
    out = OrderedDict()
    for name, vc in d["vcenters"].items():
        clusters = [c["name"] for c in d["clusters"] if c["vcenter"] == name]
        out[name] = OrderedDict([
            ("name", name), ("hostname", vc["hostname"]), ("port", vc["port"]), ("datacenter", vc["datacenter"]),
            ("env_prefix", vcenter_env_prefix(name)),
            ("supervisor", d["supervisor"]["vcenter"] == name),
            ("clusters", clusters),
            ("roles", OrderedDict([("drs_gpu_pinning", OrderedDict([
                ("drs_gpu_pinning_clusters", [OrderedDict(c) for c in pinning["drs_gpu_pinning_clusters"]
                                              if c["name"] in clusters]),
                ("drs_gpu_pinning_purge_stale", pinning["drs_gpu_pinning_purge_stale"]),
            ])), ("ha_gpu_restart", OrderedDict([
                ("ha_gpu_restart_clusters", [c for c in (ha or {}).get("ha_gpu_restart_clusters") or []
                                             if c["name"] in clusters]),
            ]))])),
        ])
    return out


def for_vcenter(derived, name):
    """``derived`` narrowed to what one vCenter holds: its GPU clusters (ESXi link, DRS pinning) and,
    where the Supervisor is, the VM classes and namespaces; the other links as they are. A vCenter
    the design does not name raises KeyError."""
    vc = derived["vcenters"][name]
    out = OrderedDict(derived)
    clusters = set(vc["clusters"])
    out["esxi"] = OrderedDict([("clusters", OrderedDict(
        (k, v) for k, v in derived["esxi"]["clusters"].items() if k in clusters))])
    vsphere = OrderedDict(derived["vsphere"])
    vsphere["drs_pinning"] = [c for c in vsphere["drs_pinning"] if c["name"] in clusters]
    vsphere["ha"] = [c for c in vsphere.get("ha") or [] if c["name"] in clusters]
    roles = OrderedDict(derived["roles"])
    roles["esxi_gpu_host"] = OrderedDict((k, v) for k, v in roles["esxi_gpu_host"].items() if k in clusters)
    roles["drs_gpu_pinning"] = vc["roles"]["drs_gpu_pinning"]
    if "ha_gpu_restart" in vc["roles"]:
        roles["ha_gpu_restart"] = vc["roles"]["ha_gpu_restart"]
    if not vc["supervisor"]:
        vsphere["vm_classes"], vsphere["namespaces"] = [], []
        roles["supervisor_gpu_tenancy"] = OrderedDict((k, [] if isinstance(v, list) else v)
                                                      for k, v in roles["supervisor_gpu_tenancy"].items())
    out["vsphere"], out["roles"] = vsphere, roles
    return out


def _vks_role(vks, revisions=False):
    return [OrderedDict([
        ("vks_gpu_node_pools_cluster_name", cluster["name"]),
        ("vks_gpu_node_pools_namespace", cluster["namespace"]),
        ("vks_gpu_node_pools_node_pools", [OrderedDict([
            ("name", p["name"]), ("replicas", p["replicas"]), ("vm_class", p["vm_class"]),
            ("labels", p["labels"]), ("taints", p["taints"]), ("gpu", True)]) for p in cluster["node_pools"]]),
        # with class revisions a pool whose class changed is rolled by Cluster API: wait until it is done
        ("vks_gpu_node_pools_wait_rollout", revisions),
        # the pools made by hand are recorded as the collection's (vks_clusters[].adopt, else the design's adopt)
        ("vks_gpu_node_pools_adopt", bool(cluster.get("adopt"))),
    ]) for cluster in vks["clusters"].values()]


def _time_slicing(d):
    """The gpu_operator role's time-slicing configurations: one per pool that time-slices in the guest."""
    out = OrderedDict()
    for pool in d["pools"]:
        replicas = (pool.get("guest_time_slicing") or {}).get("replicas")
        if replicas:
            out[pool["name"]] = OrderedDict([
                ("replicas", replicas), ("resources", ["nvidia.com/gpu"]),
                ("rename_by_default", d["guest"]["rename_shared"]), ("fail_requests_greater_than_one", True)])
    return out


# the gpu_operator role's driver image without a guest driver in the design (its defaults): with
# an empty version the role refuses to install the operator in a vGPU guest
NO_GUEST_DRIVER = OrderedDict([("repository", "nvcr.io/nvidia"), ("image", "driver"), ("version", ""),
                               ("pull_secret", None)])


def _guest_roles(d):
    guest, licensing = d["guest"], d["guest"]["licensing"]
    driver = guest["driver"] or NO_GUEST_DRIVER
    gpu_operator = OrderedDict([
        ("gpu_operator_namespace", guest["operator_namespace"]),
        # every node VM of a design holds vGPUs: the guest driver, never the data-center one
        ("gpu_operator_vgpu_guest", True),
        ("gpu_operator_driver_repository", driver["repository"]),
        ("gpu_operator_driver_image", driver["image"]),
        ("gpu_operator_driver_version", driver["version"]),
        ("gpu_operator_driver_pull_secrets", [driver["pull_secret"]] if driver["pull_secret"] else []),
        ("gpu_operator_mig_strategy", _mig_strategy(d)),
        ("gpu_operator_allow_mig_strategy_change", guest["allow_mig_strategy_change"]),
        ("gpu_operator_mig_manager_enabled", False),
        ("gpu_operator_time_slicing", _time_slicing(d)),
        ("gpu_operator_device_plugin_config_name", guest["time_slicing_config"]),
        ("gpu_operator_licensing_secret_name", licensing["secret_name"]),
        ("gpu_operator_driver_upgrade", OrderedDict(
            (k, guest["driver_upgrade"][k]) for k in ("max_parallel", "drain_timeout_s", "honour_pdbs",
                                                      "step_timeout_s"))),
    ])
    nls_licensing = OrderedDict([
        ("nls_licensing_operator_namespace", guest["operator_namespace"]),
        ("nls_licensing_secret_prefix", licensing["secret_name"]),
        ("nls_licensing_feature_type", licensing["feature_type"]),
    ])
    return gpu_operator, nls_licensing


def _tenant_quotas(ctx, tenant, strategy):
    """The tenant's ResourceQuotas: ``gpupool-gpus`` over every GPU request, and one per PriorityClass."""
    rename = ctx.d["guest"]["rename_shared"]
    total, by_priority = OrderedDict(), OrderedDict()
    for pool_name, gpus in tenant["gpu_quota"].items():
        pool = ctx.pools[pool_name]
        resource = "requests.%s" % gpu_resource(pool, strategy, rename)
        total[resource] = total.get(resource, 0) + gpus
        scoped = by_priority.setdefault(pool["priority"], OrderedDict())
        scoped[resource] = scoped.get(resource, 0) + gpus
    quotas = [OrderedDict([("name", "gpupool-gpus"), ("hard", OrderedDict((k, str(v)) for k, v in total.items()))])]
    for priority, hard in by_priority.items():
        quotas.append(OrderedDict([("name", "gpupool-%s" % priority),
                                   ("hard", OrderedDict((k, str(v)) for k, v in hard.items())),
                                   ("priority_class", priority)]))
    return quotas


def _kueue_queue(ctx, pool, strategy):
    """The Kueue queue of one gang-scheduled pool: flavor and ClusterQueue ``gpupool-<pool>`` on the
    pool's nodes (its pool label and taints), the pool's size as quota, a LocalQueue ``<pool>`` in
    every tenant namespace with quota on the pool."""
    d = ctx.d
    replicas = pool["node_pool"]["replicas"]
    resources = OrderedDict([
        ("cpu", replicas * pool["vm_class"]["cpu"]),
        ("memory", "%dGi" % (replicas * pool["vm_class"]["memory_gb"])),
        (gpu_resource(pool, strategy, d["guest"]["rename_shared"]), pool_gpus(pool)),
    ])
    return OrderedDict([
        ("name", "gpupool-%s" % pool["name"]),
        ("local_queue", pool["name"]),
        ("namespaces", [t["namespace"] for t in d["tenants"] if t["gpu_quota"].get(pool["name"], 0) > 0]),
        ("node_labels", OrderedDict([(POOL_LABEL, pool["name"])])),
        ("tolerations", _tolerations(pool)),
        ("resources", resources),
    ])


def _culling(d):
    """The culling inputs of gpu_scheduling_policy: the mechanism (none without a notebook pool),
    each notebook pool's idle minutes (its own or guest.culling.idle_minutes), the shortest of
    them as the one idle time (Kubeflow's controller has one; the CronJob uses it for notebooks
    on no pool's nodes), the minutes between checks and the Prometheus the CronJob asks for the
    pods' GPU activity (empty: Jupyter activity alone)."""
    culling = d["guest"]["culling"]
    pools = OrderedDict((p["name"], p["culling"]["idle_minutes"] or culling["idle_minutes"])
                        for p in d["pools"] if p["shape"] == "notebooks")
    mechanism = culling["mechanism"] if pools else "none"
    return OrderedDict([
        ("gpu_scheduling_policy_culling", mechanism),
        ("gpu_scheduling_policy_culling_idle_minutes", min(pools.values()) if pools else culling["idle_minutes"]),
        ("gpu_scheduling_policy_culling_check_minutes", culling["check_minutes"]),
        ("gpu_scheduling_policy_culling_pools", pools if mechanism != "none" else OrderedDict()),
        ("gpu_scheduling_policy_culling_prometheus_url", culling["prometheus_url"] or ""),
    ])


def _policy_role(ctx):
    """gpu_scheduling_policy's variables: PriorityClasses, tenants with their quotas, and a Kueue
    queue per gang-scheduled training pool, with the design's cohort, preemption and
    waitForPodsReady timeout (set in Kueue's configuration when a pool is gang-scheduled)."""
    d = ctx.d
    strategy = _mig_strategy(d)
    gang = [p for p in d["pools"] if gang_scheduled(p)]
    queues = [_kueue_queue(ctx, p, strategy) for p in gang]
    training = set(ns for q in queues for ns in q["namespaces"])
    tenants = [OrderedDict([
        ("namespace", t["namespace"]),
        ("labels", OrderedDict(MANAGED_BY, **{"gpupool.vcf/design": d["name"]})),
        ("training", t["namespace"] in training),
        ("quotas", _tenant_quotas(ctx, t, strategy)),
    ]) for t in d["tenants"]]
    kueue = d["guest"]["kueue"]
    return OrderedDict([
        ("gpu_scheduling_policy_priority_classes", [OrderedDict([
            ("name", name), ("value", p["value"]), ("preemption_policy", p["preemption_policy"]),
            ("description", p["description"] or name)]) for name, p in d["priorities"].items()]),
        ("gpu_scheduling_policy_tenants", tenants),
        ("gpu_scheduling_policy_kueue", bool(gang)),
        ("gpu_scheduling_policy_kueue_queues", queues),
        ("gpu_scheduling_policy_kueue_cohort", kueue["cohort"] if gang else ""),
        ("gpu_scheduling_policy_kueue_preemption", OrderedDict(
            (k, kueue["preemption"][k]) for k in ("within_cluster_queue", "reclaim_within_cohort"))),
        ("gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout",
         kueue["wait_for_pods_ready_timeout"] if gang else ""),
    ] + list(_culling(d).items()) + ([("gpu_scheduling_policy_adopt", True)] if d.get("adopt") else []))


def derive(design):
    """What a valid design means for each link: ``{design, vcenter, vcenters, supervisor, esxi, vsphere,
    vks, roles}`` (see docs/design.md). ``roles`` holds every role's variables under the role's
    own names, built from the design directly: site.yml passes them on one to one, and the
    audit expects what the roles write with them.

    Raises ``DesignError`` listing the errors when the design has any.
    """
    d, findings = normalize(design)
    findings = validate_normalized(d, findings)
    errs = errors(findings)
    if errs:
        raise DesignError(errs)
    ctx = Context(d)
    esxi, vsphere, vks = _derive_esxi(ctx), _derive_vsphere(ctx), _derive_vks(ctx)
    tenancy, pinning = _vsphere_roles(vsphere, d["supervisor"]["vm_class_revisions"])
    gpu_operator, nls_licensing = _guest_roles(d)
    return OrderedDict([
        ("design", d["name"]),
        ("vcenter", OrderedDict([("hostname", d["vcenters"][d["supervisor"]["vcenter"]]["hostname"]),
                                 ("datacenter", d["vcenters"][d["supervisor"]["vcenter"]]["datacenter"])])),
        ("vcenters", _derive_vcenters(d, pinning, _ha_role(vsphere))),
        ("supervisor", OrderedDict((k, d["supervisor"][k]) for k in ("name", "endpoint", "storage_policy"))),
        ("esxi", esxi),
        ("vsphere", vsphere),
        ("vks", vks),
        ("roles", OrderedDict([
            ("esxi_gpu_host", _esxi_role(esxi)),
            ("supervisor_gpu_tenancy", tenancy),
            ("drs_gpu_pinning", pinning),
            ("ha_gpu_restart", _ha_role(vsphere)),
            ("nls_licensing", nls_licensing),
            ("vks_gpu_node_pools", _vks_role(vks, d["supervisor"]["vm_class_revisions"])),
            ("gpu_operator", gpu_operator),
            ("gpu_scheduling_policy", _policy_role(ctx)),
        ])),
    ])
