# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes objects the guest roles write, built from the inputs derive() gives the roles
(pure: no I/O, no kubernetes import). The audit compares the live objects with these, so
"audit clean" and "site.yml has nothing to do" are judged from the same inputs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

# The roles' defaults for the inputs derive() does not set (a unit test holds them equal to
# roles/*/defaults/main.yml), so the audit expects what a converge with those inputs writes.

ROLE_DEFAULTS = {
    "vks_gpu_node_pools": {
        "vks_gpu_node_pools_node_pools": [],
        "vks_gpu_node_pools_gpu_taint": {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    },
    "gpu_operator": {
        "gpu_operator_namespace": "gpu-operator",
        "gpu_operator_driver_enabled": True,
        "gpu_operator_driver_repository": "nvcr.io/nvidia",
        "gpu_operator_driver_image": "driver",
        "gpu_operator_driver_version": "",
        "gpu_operator_licensing_secret_name": "",
        "gpu_operator_mig_strategy": "single",
        "gpu_operator_time_slicing": {},
        "gpu_operator_device_plugin_config_name": "gpupool-device-plugin-config",
        "gpu_operator_device_plugin_default_config": "default",
    },
    "gpu_scheduling_policy": {
        "gpu_scheduling_policy_priority_classes": [],
        "gpu_scheduling_policy_tenants": [],
        "gpu_scheduling_policy_kueue": True,
        "gpu_scheduling_policy_kueue_api_version": "kueue.x-k8s.io/v1beta2",
        "gpu_scheduling_policy_training_flavor": "gpu-training",
        "gpu_scheduling_policy_training_cluster_queue": "gpu-training",
        "gpu_scheduling_policy_training_local_queue": "training",
        "gpu_scheduling_policy_training_node_labels": {},
        "gpu_scheduling_policy_training_tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "gpu_scheduling_policy_training_resources": {},
        "gpu_scheduling_policy_culling": "auto",
        "gpu_scheduling_policy_culling_idle_minutes": 240,
        "gpu_scheduling_policy_culling_check_minutes": 10,
        "gpu_scheduling_policy_culling_namespace": "gpupool-system",
        "gpu_scheduling_policy_culling_image": "python:3.12-alpine",
        "gpu_scheduling_policy_culling_selector": "gpupool.vcf/workload=notebook",
        "gpu_scheduling_policy_culling_port": 8888,
    },
}
CLUSTER_POLICY = "cluster-policy"
CULLER = "gpupool-notebook-culler"


def role_inputs(role, given=None):
    """The role's variables: its defaults, overridden by what derive() (or a caller) gives."""
    out = copy.deepcopy(ROLE_DEFAULTS[role])
    out.update(copy.deepcopy(given or {}))
    return out


def node_pools(vks):
    """The node pools the vks_gpu_node_pools role hands vks_node_pool, from its inputs `vks`
    (role_inputs("vks_gpu_node_pools", ...)): every pool marked gpu (the default) carries the GPU
    taint first, besides its own taints."""
    out = []
    for given in vks["vks_gpu_node_pools_node_pools"]:
        pool = dict((k, v) for k, v in given.items() if k != "gpu")
        taints = []
        for taint in ([vks["vks_gpu_node_pools_gpu_taint"]] if given.get("gpu", True) is not False else []) + list(
                given.get("taints") or []):
            if dict(taint) not in taints:
                taints.append(dict(taint))
        if taints:  # none: the role leaves the pool's taints as they are
            pool["taints"] = taints
        out.append(pool)
    return out


def cluster_policy_fields(op, licensing_secret=None):
    """[(path, value)] of the ClusterPolicy spec fields the gpu_operator role sets (chart values
    and its repair patch), from its inputs `op` (role_inputs("gpu_operator", ...)). The licensing
    Secret is judged apart (its name carries a content hash); `licensing_secret` given, it is
    listed too."""
    driver = [(("driver", "enabled"), bool(op["gpu_operator_driver_enabled"])),
              (("driver", "repository"), op["gpu_operator_driver_repository"]),
              (("driver", "image"), op["gpu_operator_driver_image"])]
    if op.get("gpu_operator_driver_version"):
        driver.append((("driver", "version"), op["gpu_operator_driver_version"]))
    driver.append((("driver", "licensingConfig", "nlsEnabled"), True))
    if licensing_secret:
        driver.append((("driver", "licensingConfig", "secretName"), licensing_secret))
    out = driver + [(("mig", "strategy"), op["gpu_operator_mig_strategy"])]
    if op.get("gpu_operator_time_slicing"):
        out += [(("devicePlugin", "config", "name"), op["gpu_operator_device_plugin_config_name"]),
                (("devicePlugin", "config", "default"), op["gpu_operator_device_plugin_default_config"])]
    return out


def device_plugin_configs(op):
    """{key: config} of the device plugin ConfigMap the gpu_operator role writes (each value is
    the YAML document of one key, as data); {} when the role writes none."""
    if not op.get("gpu_operator_time_slicing"):
        return {}
    strategy = op["gpu_operator_mig_strategy"]
    out = {op["gpu_operator_device_plugin_default_config"]: {"version": "v1", "flags": {"migStrategy": strategy}}}
    for name, ts in op["gpu_operator_time_slicing"].items():
        out[name] = {"version": "v1", "flags": {"migStrategy": strategy}, "sharing": {"timeSlicing": {
            "renameByDefault": bool(ts.get("rename_by_default", False)),
            "failRequestsGreaterThanOne": bool(ts.get("fail_requests_greater_than_one", False)),
            "resources": [{"name": r, "replicas": int(ts["replicas"])}
                          for r in ts.get("resources") or ["nvidia.com/gpu"]]}}}
    return out


def tenant_namespace_labels(tenant):
    """The labels the gpu_scheduling_policy role keeps on a tenant namespace."""
    labels = dict((k, str(v)) for k, v in (tenant.get("labels") or {}).items())
    labels.update({"gpupool.vcf/tenant": "true", "gpupool.vcf/training": "true" if tenant.get("training") else "false"})
    return labels


def kueue_objects(policy):
    """The Kueue objects the gpu_scheduling_policy role writes, as
    {"api_version", "resource_flavor": (name, spec), "cluster_queue": (name, spec),
    "local_queues": [(namespace, name, spec)]}; None when the role writes none."""
    if not policy.get("gpu_scheduling_policy_kueue") or not policy.get("gpu_scheduling_policy_training_resources"):
        return None
    api_version = policy["gpu_scheduling_policy_kueue_api_version"]
    flavor = policy["gpu_scheduling_policy_training_flavor"]
    cq = policy["gpu_scheduling_policy_training_cluster_queue"]
    resources = policy["gpu_scheduling_policy_training_resources"]
    fungibility = ({"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"} if api_version.endswith("v1beta1")
                   else {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})
    cq_spec = {
        "namespaceSelector": {"matchLabels": {"gpupool.vcf/training": "true"}},
        "queueingStrategy": "StrictFIFO",
        "stopPolicy": "None",
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                       "borrowWithinCohort": {"policy": "Never"}},
        "flavorFungibility": fungibility,
        "resourceGroups": [{"coveredResources": list(resources), "flavors": [{
            "name": flavor, "resources": [{"name": k, "nominalQuota": str(v)} for k, v in resources.items()]}]}],
    }
    flavor_spec = {"nodeLabels": dict(policy["gpu_scheduling_policy_training_node_labels"]),
                   "tolerations": [dict(t) for t in policy["gpu_scheduling_policy_training_tolerations"]]}
    local = [(t["namespace"], policy["gpu_scheduling_policy_training_local_queue"], {"clusterQueue": cq})
             for t in policy["gpu_scheduling_policy_tenants"] if t.get("training")]
    return {"api_version": api_version, "resource_flavor": (flavor, flavor_spec), "cluster_queue": (cq, cq_spec),
            "local_queues": local}


def culling_cronjob(policy):
    """The notebook culling CronJob the gpu_scheduling_policy role writes when Kubeflow is not
    installed: {"namespace", "name", "schedule", "image", "env"}; None when culling is off or
    left to Kubeflow."""
    if policy.get("gpu_scheduling_policy_culling") in ("none", "kubeflow"):
        return None
    return {"namespace": policy["gpu_scheduling_policy_culling_namespace"], "name": CULLER,
            "schedule": "*/%s * * * *" % policy["gpu_scheduling_policy_culling_check_minutes"],
            "image": policy["gpu_scheduling_policy_culling_image"],
            "env": {"CULL_IDLE_MINUTES": str(policy["gpu_scheduling_policy_culling_idle_minutes"]),
                    "NOTEBOOK_SELECTOR": policy["gpu_scheduling_policy_culling_selector"],
                    "NOTEBOOK_PORT": str(policy["gpu_scheduling_policy_culling_port"])}}


def differences(want, have, path=""):
    """[(path, have, want)] where `have` differs from `want`, looking only at what `want` sets
    (mappings compared key by key, lists item by item, scalars as text)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [(path or ".", have, want)]
        out = []
        for key, value in want.items():
            out += differences(value, have.get(key), "%s.%s" % (path, key) if path else key)
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [(path, have, want)]
        out = []
        for i, (w, h) in enumerate(zip(want, have)):
            out += differences(w, h, "%s[%d]" % (path, i))
        return out
    if have is None or str(have) != str(want):
        if isinstance(want, bool) and have is not None and str(have).lower() == str(want).lower():
            return []
        return [(path, have, want)]
    return []
