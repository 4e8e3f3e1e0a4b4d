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

import json
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    node_vms,
    pack,
    pool_gpus,
    sorted_node_vms,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError, errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    POOL_LABEL,
    node_pool_labels,
    node_pool_taints,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate_normalized
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize
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
        used, _unplaced = pack(sorted_node_vms(node_vms(ctx, cluster)), cluster["hosts"], cluster["gpu"]["per_host"])
        uses_mig = any(p["cluster"] == cluster["name"] and ctx.profiles[p["name"]].mig_backed for p in ctx.d["pools"])
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
            ("scheduler", OrderedDict([("policy", scheduler["policy"]),
                                       ("time_slice_ms", scheduler["time_slice_ms"])])),
            ("rmpvmrl", format_rmpvmrl(encode_scheduler(scheduler["policy"], scheduler["time_slice_ms"]))),
            ("mig_mode", "enabled" if uses_mig else "disabled"),
            ("min_gpus", used),
        ])
    return OrderedDict([("clusters", clusters)])


def _access(entries):
    # the option names of gpupool.vcf.supervisor_namespace's access entries
    return [OrderedDict([("subject", a["subject"]), ("type", a["type"].upper()),
                         ("domain", a["domain"]), ("role", a["role"].upper())]) for a in entries]


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
            ("memory_reservation", 100),
            ("pool", pool["name"]),
            ("cluster", pool["cluster"]),
            ("description", "gpupool %s: %s, %d x %s" % (pool["name"], pool["shape"], pool["gpus_per_node"],
                                                         pool["vgpu_profile"])),
        ]))
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
            ("description", "gpupool platform namespace of VKS cluster %s" % vks["name"]),
            ("vm_classes", classes), ("storage_policies", [OrderedDict([("policy", storage), ("limit_mib", None)])]),
            ("limits", OrderedDict([("cpu_mhz", None), ("memory_mib", None), ("storage_mib", None)])),
            ("access", _access(vks["access"])),
            # the namespace offers exactly the GPU shapes of the design (classes without a vGPU stay)
            ("purge_gpu_vm_classes", True),
        ]))
    for tenant in d["tenants"]:
        classes = [ctx.pools[p]["vm_class"]["name"] for p, n in tenant["gpu_quota"].items() if n > 0]
        namespaces.append(OrderedDict([
            ("name", tenant["namespace"]), ("cluster", d["supervisor"]["cluster"]),
            ("supervisor", d["supervisor"]["name"]), ("kind", "tenant"),
            ("description", tenant["description"] or "gpupool tenant %s" % tenant["name"]),
            ("vm_classes", classes),
            ("storage_policies", [OrderedDict([("policy", tenant["storage_policy"]),
                                               ("limit_mib", tenant["limits"]["storage_mib"])])]),
            ("limits", OrderedDict((k, tenant["limits"][k]) for k in ("cpu_mhz", "memory_mib", "storage_mib"))),
            ("access", _access(tenant["access"])),
            ("purge_gpu_vm_classes", True),
        ]))
    drs = [OrderedDict([("name", c["name"]), ("behavior", c["drs"]["behavior"])])
           for c in d["clusters"] if c["drs"]["pinning"]]
    return OrderedDict([("vm_classes", vm_classes), ("namespaces", namespaces), ("drs_pinning", drs)])


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
            ("storage_class", vks["storage_class"]), ("node_pools", pools)])
    return OrderedDict([("clusters", clusters)])


def _meta(name, namespace=None, design=None):
    meta = OrderedDict([("name", name)])
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = OrderedDict([("app.kubernetes.io/managed-by", "gpupool.vcf")])
    if design:
        meta["labels"]["gpupool.vcf/design"] = design
    return meta


def _tolerations(pool):
    return [OrderedDict([("key", t["key"]), ("operator", "Equal" if t["value"] is not None else "Exists")]
                        + ([("value", t["value"])] if t["value"] is not None else []) + [("effect", t["effect"])])
            for t in node_pool_taints(pool)]


def _derive_guest(ctx):
    d = ctx.d
    guest = d["guest"]
    strategy = _mig_strategy(d)
    rename = guest["rename_shared"]
    priority_classes = []
    for name, p in d["priorities"].items():
        priority_classes.append(OrderedDict([
            ("apiVersion", "scheduling.k8s.io/v1"), ("kind", "PriorityClass"), ("metadata", _meta(name)),
            ("value", p["value"]), ("preemptionPolicy", p["preemption_policy"]), ("globalDefault", False),
            ("description", p["description"] or name)]))
    namespaces, quotas = [], []
    for tenant in d["tenants"]:
        ns = tenant["namespace"]
        namespaces.append(OrderedDict([("apiVersion", "v1"), ("kind", "Namespace"),
                                       ("metadata", _meta(ns, design=d["name"]))]))
        total = OrderedDict()
        by_priority = OrderedDict()
        for pool_name, gpus in tenant["gpu_quota"].items():
            pool = ctx.pools[pool_name]
            resource = "requests.%s" % gpu_resource(pool, strategy, rename)
            total[resource] = total.get(resource, 0) + gpus
            scoped = by_priority.setdefault(pool["priority"], OrderedDict())
            scoped[resource] = scoped.get(resource, 0) + gpus
        quotas.append(OrderedDict([
            ("apiVersion", "v1"), ("kind", "ResourceQuota"), ("metadata", _meta("gpupool-gpus", ns, d["name"])),
            ("spec", OrderedDict([("hard", OrderedDict((k, str(v)) for k, v in total.items()))]))]))
        for priority, hard in by_priority.items():
            quotas.append(OrderedDict([
                ("apiVersion", "v1"), ("kind", "ResourceQuota"),
                ("metadata", _meta("gpupool-%s" % priority, ns, d["name"])),
                ("spec", OrderedDict([
                    ("hard", OrderedDict((k, str(v)) for k, v in hard.items())),
                    ("scopeSelector", OrderedDict([("matchExpressions", [OrderedDict([
                        ("scopeName", "PriorityClass"), ("operator", "In"), ("values", [priority])])])])),
                ]))]))
    flavors, cluster_queues, local_queues = [], [], []
    for pool in d["pools"]:
        if pool["shape"] != "training" or not pool["training"]["gang_scheduling"]:
            continue
        name = "gpupool-%s" % pool["name"]
        resource = gpu_resource(pool, strategy, rename)
        replicas = pool["node_pool"]["replicas"]
        tenants = [t for t in d["tenants"] if t["gpu_quota"].get(pool["name"], 0) > 0]
        flavors.append(OrderedDict([
            ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "ResourceFlavor"), ("metadata", _meta(name)),
            ("spec", OrderedDict([("nodeLabels", OrderedDict([(POOL_LABEL, pool["name"])])),
                                  ("tolerations", _tolerations(pool))]))]))
        cluster_queues.append(OrderedDict([
            ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "ClusterQueue"), ("metadata", _meta(name)),
            ("spec", OrderedDict([
                ("cohort", guest["kueue"]["cohort"]),
                ("namespaceSelector", OrderedDict([("matchExpressions", [OrderedDict([
                    ("key", "kubernetes.io/metadata.name"), ("operator", "In"),
                    ("values", [t["namespace"] for t in tenants])])])])),
                ("resourceGroups", [OrderedDict([
                    ("coveredResources", ["cpu", "memory", resource]),
                    ("flavors", [OrderedDict([("name", name), ("resources", [
                        OrderedDict([("name", "cpu"), ("nominalQuota", replicas * pool["vm_class"]["cpu"])]),
                        OrderedDict([("name", "memory"),
                                     ("nominalQuota", "%dGi" % (replicas * pool["vm_class"]["memory_gb"]))]),
                        OrderedDict([("name", resource), ("nominalQuota", pool_gpus(pool))]),
                    ])])]),
                ])]),
                ("preemption", OrderedDict([("withinClusterQueue", "LowerPriority"),
                                            ("reclaimWithinCohort", "Any")])),
            ]))]))
        for tenant in tenants:
            local_queues.append(OrderedDict([
                ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "LocalQueue"),
                ("metadata", _meta(pool["name"], tenant["namespace"], d["name"])),
                ("spec", OrderedDict([("clusterQueue", name)]))]))
    time_slicing = OrderedDict()
    for pool in d["pools"]:
        replicas = (pool.get("guest_time_slicing") or {}).get("replicas")
        if replicas:
            time_slicing[pool["name"]] = OrderedDict([
                ("version", "v1"),
                ("sharing", OrderedDict([("timeSlicing", OrderedDict([
                    ("renameByDefault", rename), ("failRequestsGreaterThanOne", True),
                    ("resources", [OrderedDict([("name", "nvidia.com/gpu"), ("replicas", replicas)])]),
                ]))])),
            ])
    licensing = guest["licensing"]
    return OrderedDict([
        ("priority_classes", priority_classes),
        ("namespaces", namespaces),
        ("resource_quotas", quotas),
        ("kueue", OrderedDict([
            ("enabled", bool(cluster_queues)),
            ("wait_for_pods_ready", OrderedDict([("enable", bool(cluster_queues)),
                                                 ("timeout", guest["kueue"]["wait_for_pods_ready_timeout"])])),
            ("resource_flavors", flavors), ("cluster_queues", cluster_queues), ("local_queues", local_queues)])),
        ("time_slicing", OrderedDict([
            ("config_name", guest["time_slicing_config"]),
            ("namespace", guest["operator_namespace"]),
            ("data", time_slicing),
            ("manifest", OrderedDict([
                ("apiVersion", "v1"), ("kind", "ConfigMap"),
                ("metadata", _meta(guest["time_slicing_config"], guest["operator_namespace"], d["name"])),
                # JSON is YAML: the device plugin reads each key as its config file
                ("data", OrderedDict((k, json.dumps(v)) for k, v in time_slicing.items())),
            ]) if time_slicing else None),
        ])),
        ("gpu_operator", OrderedDict([
            ("namespace", guest["operator_namespace"]),
            ("mig_strategy", strategy),
            ("mig_manager_enabled", False),
            ("device_plugin_config", OrderedDict([("name", guest["time_slicing_config"]), ("default", "")])
             if time_slicing else None),
        ])),
        ("licensing", OrderedDict([("secret_name", licensing["secret_name"]),
                                   ("feature_type", licensing["feature_type"]),
                                   ("nls_enabled", True), ("dls_host", licensing["dls_host"])])),
    ])


def _derive_roles(ctx, vks, guest):
    """Each Kubernetes role's variables for the design, so a playbook only passes them through.

    What the roles create with these variables is what ``guest`` (the audit's expectation) lists.
    """
    d = ctx.d
    node_pools = [OrderedDict([
        ("vks_gpu_node_pools_cluster_name", cluster["name"]),
        ("vks_gpu_node_pools_namespace", cluster["namespace"]),
        ("vks_gpu_node_pools_node_pools", [OrderedDict([
            ("name", p["name"]), ("replicas", p["replicas"]), ("vm_class", p["vm_class"]),
            ("labels", p["labels"]), ("taints", p["taints"]), ("gpu", True)]) for p in cluster["node_pools"]]),
    ]) for cluster in vks["clusters"].values()]
    operator = guest["gpu_operator"]
    licensing = guest["licensing"]
    time_slicing = OrderedDict()
    for pool_name, config in guest["time_slicing"]["data"].items():
        ts = config["sharing"]["timeSlicing"]
        time_slicing[pool_name] = OrderedDict([
            ("replicas", ts["resources"][0]["replicas"]),
            ("resources", [r["name"] for r in ts["resources"]]),
            ("rename_by_default", ts["renameByDefault"]),
            ("fail_requests_greater_than_one", ts["failRequestsGreaterThanOne"])])
    gpu_operator = OrderedDict([
        ("gpu_operator_namespace", operator["namespace"]),
        ("gpu_operator_mig_strategy", operator["mig_strategy"]),
        ("gpu_operator_mig_manager_enabled", operator["mig_manager_enabled"]),
        ("gpu_operator_time_slicing", time_slicing),
        ("gpu_operator_device_plugin_config_name", guest["time_slicing"]["config_name"]),
        ("gpu_operator_licensing_secret_name", licensing["secret_name"]),
    ])
    nls_licensing = OrderedDict([
        ("nls_licensing_operator_namespace", operator["namespace"]),
        ("nls_licensing_secret_prefix", licensing["secret_name"]),
        ("nls_licensing_feature_type", licensing["feature_type"]),
    ])
    quotas = OrderedDict()
    for q in guest["resource_quotas"]:
        spec = q["spec"]
        entry = OrderedDict([("name", q["metadata"]["name"]), ("hard", OrderedDict(spec["hard"]))])
        if spec.get("scopeSelector"):
            entry["priority_class"] = spec["scopeSelector"]["matchExpressions"][0]["values"][0]
        quotas.setdefault(q["metadata"]["namespace"], []).append(entry)
    training = set(q["metadata"]["namespace"] for q in guest["kueue"]["local_queues"])
    tenants = [OrderedDict([
        ("namespace", ns["metadata"]["name"]),
        ("labels", OrderedDict(ns["metadata"]["labels"])),
        ("training", ns["metadata"]["name"] in training),
        ("quotas", quotas.get(ns["metadata"]["name"], [])),
    ]) for ns in guest["namespaces"]]
    policy = OrderedDict([
        ("gpu_scheduling_policy_priority_classes", [OrderedDict([
            ("name", pc["metadata"]["name"]), ("value", pc["value"]),
            ("preemption_policy", pc["preemptionPolicy"]), ("description", pc["description"])])
            for pc in guest["priority_classes"]]),
        ("gpu_scheduling_policy_tenants", tenants),
        ("gpu_scheduling_policy_kueue", bool(guest["kueue"]["cluster_queues"])),
    ])
    gang = [p for p in d["pools"] if p["shape"] == "training" and p["training"]["gang_scheduling"]]
    # the role keeps one training pool's queue: the first gang-scheduled one (empty values without one)
    cq = guest["kueue"]["cluster_queues"][0] if gang else None
    flavor = guest["kueue"]["resource_flavors"][0] if gang else None
    group = cq["spec"]["resourceGroups"][0]["flavors"][0] if gang else {"resources": []}
    policy.update([
        ("gpu_scheduling_policy_training_flavor", flavor["metadata"]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_cluster_queue", cq["metadata"]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_local_queue", gang[0]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_node_labels", OrderedDict(flavor["spec"]["nodeLabels"]) if gang else {}),
        ("gpu_scheduling_policy_training_tolerations", list(flavor["spec"]["tolerations"]) if gang else []),
        ("gpu_scheduling_policy_training_resources",
         OrderedDict((r["name"], r["nominalQuota"]) for r in group["resources"])),
    ])
    return OrderedDict([("vks_gpu_node_pools", node_pools), ("nls_licensing", nls_licensing),
                        ("gpu_operator", gpu_operator), ("gpu_scheduling_policy", policy)])


def derive(design):
    """The per-link inputs of a valid design: ``{esxi, vsphere, vks, guest, roles}`` (see docs/design.md).

    Raises ``DesignError`` listing the errors when the design has any.
    """
    d, findings = normalize(design)
    findings = validate_normalized(d, findings)
    errs = errors(findings)
    if errs:
        raise DesignError(errs)
    ctx = Context(d)
    vks, guest = _derive_vks(ctx), _derive_guest(ctx)
    return OrderedDict([
        ("design", d["name"]),
        ("vcenter", OrderedDict([("hostname", d["vcenter"]["hostname"]),
                                 ("datacenter", d["vcenter"]["datacenter"])])),
        ("supervisor", OrderedDict((k, d["supervisor"][k]) for k in ("name", "endpoint", "storage_policy"))),
        ("esxi", _derive_esxi(ctx)),
        ("vsphere", _derive_vsphere(ctx)),
        ("vks", vks),
        ("guest", guest),
        ("roles", _derive_roles(ctx, vks, guest)),
    ])
