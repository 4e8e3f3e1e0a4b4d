# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes objects the guest roles write, built from the roles' inputs (pure: no I/O, no
kubernetes import). The roles write what these functions return (through the k8s_objects
filters) and the audit compares the live objects with the same functions' output for the inputs
derive() gives the roles, so "audit clean" and "site.yml has nothing to do" are judged from one
rendering of each object."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import re

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _driver_upgrade

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
        "gpu_operator_driver_pull_secrets": [],
        "gpu_operator_vgpu_guest": True,
        "gpu_operator_allow_mig_strategy_change": False,
        "gpu_operator_licensing_secret_name": "",
        "gpu_operator_mig_strategy": "single",
        "gpu_operator_time_slicing": {},
        "gpu_operator_device_plugin_config_name": "gpupool-device-plugin-config",
        "gpu_operator_device_plugin_default_config": "default",
        "gpu_operator_dcgm_metrics_config_name": "gpupool-dcgm-metrics",
        "gpu_operator_dcgm_metrics": [
            {"field": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge", "help": "GPU utilization in percent (not for MIG)."},
            {"field": "DCGM_FI_DEV_FB_USED", "type": "gauge", "help": "Framebuffer in use in MiB."},
            {"field": "DCGM_FI_DEV_FB_FREE", "type": "gauge", "help": "Framebuffer free in MiB."},
            {"field": "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "type": "gauge", "help": "vGPU license status."},
            {"field": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "type": "gauge",
             "help": "Share of time the graphics engine is busy (profiling)."},
            {"field": "DCGM_FI_PROF_SM_ACTIVE", "type": "gauge",
             "help": "Share of cycles an SM has a warp assigned (profiling)."},
            {"field": "DCGM_FI_PROF_DRAM_ACTIVE", "type": "gauge",
             "help": "Share of cycles the memory interface moves data (profiling)."},
            {"field": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "type": "gauge",
             "help": "Share of cycles the tensor pipe is busy (profiling)."},
        ],
        "gpu_operator_driver_upgrade": {"max_parallel": 1, "drain_timeout_s": 300, "honour_pdbs": True,
                                        "step_timeout_s": 900},
        "gpu_operator_dcgm_pod_labels": True,
        "gpu_operator_dcgm_pod_label_allowlist": ["^app$", "^app\\.kubernetes\\.io/name$", "^gpupool\\.vcf/.*$",
                                                  "^kueue\\.x-k8s\\.io/queue-name$"],
    },
    "gpu_scheduling_policy": {
        "gpu_scheduling_policy_priority_classes": [],
        "gpu_scheduling_policy_tenants": [],
        "gpu_scheduling_policy_kueue": True,
        "gpu_scheduling_policy_kueue_api_version": "kueue.x-k8s.io/v1beta2",
        "gpu_scheduling_policy_kueue_queues": [],
        "gpu_scheduling_policy_kueue_cohort": "",
        "gpu_scheduling_policy_kueue_preemption": {"within_cluster_queue": "Never", "reclaim_within_cohort": "Never"},
        "gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout": "",
        "gpu_scheduling_policy_kueue_namespace": "kueue-system",
        "gpu_scheduling_policy_kueue_config_map": "kueue-manager-config",
        "gpu_scheduling_policy_kueue_config_key": "controller_manager_config.yaml",
        "gpu_scheduling_policy_kueue_restart": True,
        "gpu_scheduling_policy_kueue_pod_selector": "control-plane=controller-manager",
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
        "gpu_scheduling_policy_culling_pools": {},
        "gpu_scheduling_policy_culling_prometheus_url": "",
        "gpu_scheduling_policy_pool_label": "gpupool.vcf/pool",
        "gpu_scheduling_policy_kubeflow_controller_namespace": "kubeflow",
        "gpu_scheduling_policy_kubeflow_controller_deployment": "notebook-controller-deployment",
        "gpu_scheduling_policy_kubeflow_controller_container": "manager",
    },
}
CLUSTER_POLICY = "cluster-policy"
CULLER = "gpupool-notebook-culler"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpupool.vcf"}
DEFAULT_SHARED_RESOURCES = ["nvidia.com/gpu"]


def role_inputs(role, given=None):
    """The role's variables: its defaults, overridden by what derive() (or a caller) gives."""
    out = copy.deepcopy(ROLE_DEFAULTS[role])
    out.update(copy.deepcopy(given or {}))
    return out


def flag(value):
    """A role's boolean input as the roles' ``bool`` filter reads it (yes/on/true/1, any case)."""
    if isinstance(value, (str, int)):
        return str(value).lower() in ("yes", "on", "true", "1")
    try:
        return value == 1
    except TypeError:
        return False


def _manifest(api_version, kind, name, namespace=None, labels=None, **fields):
    """An object of the collection: its metadata carries the managed-by label (or `labels`)."""
    metadata = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(MANAGED_BY) if labels is None else labels
    out = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    out.update(fields)
    return out


def node_pools(vks):
    """The node pools the vks_gpu_node_pools role hands vks_node_pool, from its inputs `vks`
    (role_inputs("vks_gpu_node_pools", ...)): every pool marked gpu (the default) carries the GPU
    taint first, besides its own taints."""
    out = []
    for given in vks["vks_gpu_node_pools_node_pools"]:
        pool = dict((k, v) for k, v in given.items() if k != "gpu")
        taints = []
        for taint in ([vks["vks_gpu_node_pools_gpu_taint"]] if flag(given.get("gpu", True)) else []) + list(
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
    Secret is judged apart (its name carries a content hash); `licensing_secret` given (not None),
    it is listed too."""
    driver = [(("driver", "enabled"), flag(op["gpu_operator_driver_enabled"])),
              (("driver", "repository"), op["gpu_operator_driver_repository"]),
              (("driver", "image"), op["gpu_operator_driver_image"])]
    if op.get("gpu_operator_driver_version"):
        driver.append((("driver", "version"), op["gpu_operator_driver_version"]))
    if op.get("gpu_operator_driver_pull_secrets"):  # none: the chart leaves the field out
        driver.append((("driver", "imagePullSecrets"), list(op["gpu_operator_driver_pull_secrets"])))
    driver.append((("driver", "licensingConfig", "nlsEnabled"), True))
    if licensing_secret is not None:
        driver.append((("driver", "licensingConfig", "secretName"), licensing_secret))
    # the upgrade controller's policy: one node at a time, PDBs honoured unless the design says otherwise
    driver += _driver_upgrade.cluster_policy_fields(op.get("gpu_operator_driver_upgrade"))
    out = driver + [(("mig", "strategy"), op["gpu_operator_mig_strategy"])]
    out += dcgm_exporter_fields(op)
    if op.get("gpu_operator_time_slicing"):
        out += [(("devicePlugin", "config", "name"), op["gpu_operator_device_plugin_config_name"]),
                (("devicePlugin", "config", "default"), op["gpu_operator_device_plugin_default_config"])]
    return out


def dcgm_exporter_fields(op):
    """[(path, value)] of the ClusterPolicy's dcgmExporter fields the gpu_operator role sets: the
    metrics ConfigMap (none without metrics) and pod labels on the metrics, bounded by an allowlist
    of label names (each label is a Prometheus dimension)."""
    out = []
    if op.get("gpu_operator_dcgm_metrics"):
        out.append((("dcgmExporter", "config", "name"), op["gpu_operator_dcgm_metrics_config_name"]))
    if flag(op.get("gpu_operator_dcgm_pod_labels")):
        out.append((("dcgmExporter", "enablePodLabels"), True))
        if op.get("gpu_operator_dcgm_pod_label_allowlist"):
            out.append((("dcgmExporter", "podLabelAllowlistRegex"), list(op["gpu_operator_dcgm_pod_label_allowlist"])))
    return out


DCGM_METRICS_KEY = "dcgm-metrics.csv"


def dcgm_metrics_csv(op):
    """The DCGM exporter's metrics file the gpu_operator role writes (``<field>, <type>, <help>`` per
    line, as the exporter reads it); None without metrics (the exporter's own list)."""
    metrics = op.get("gpu_operator_dcgm_metrics") or []
    if not metrics:
        return None
    lines = ["# DCGM field, Prometheus metric type, help (written by gpupool.vcf's gpu_operator role)"]
    for metric in metrics:
        lines.append("%s, %s, %s" % (metric["field"], metric.get("type") or "gauge",
                                     (metric.get("help") or metric["field"]).replace(",", ";")))
    return "\n".join(lines) + "\n"


def dcgm_metrics_fields(text):
    """[(field, type)] of a DCGM exporter metrics file, comments and blank lines left out."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        out.append((parts[0], parts[1] if len(parts) > 1 else ""))
    return out


def dcgm_metrics_config_map(op):
    """The DCGM exporter metrics ConfigMap the gpu_operator role writes; None without metrics."""
    text = dcgm_metrics_csv(op)
    if text is None:
        return None
    return _manifest("v1", "ConfigMap", op["gpu_operator_dcgm_metrics_config_name"], op["gpu_operator_namespace"],
                     data={DCGM_METRICS_KEY: text})


def _merged(base, extra):
    """`extra` over `base` as Ansible's ``combine(recursive=true)`` does: mappings key by key,
    anything else replaced."""
    if not isinstance(base, dict) or not isinstance(extra, dict):
        return copy.deepcopy(extra)
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(base[key], value) if key in base else copy.deepcopy(value)
    return out


def nested(fields):
    """The mapping that holds each (path, value) of `fields` at its path."""
    out = {}
    for path, value in fields:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


def cluster_policy_spec(op):
    """The ClusterPolicy spec the gpu_operator role patches back after the chart (Helm compares
    only its release values): the fields of cluster_policy_fields() nested, with the licensing
    Secret the role is given (empty included, as the chart values hold it). Chart values given
    last (`gpu_operator_extra_values`) win for the same fields, as they do in the release."""
    spec = nested(cluster_policy_fields(op, op.get("gpu_operator_licensing_secret_name", "")))
    extra = op.get("gpu_operator_extra_values") or {}
    given = extra.get("driver")
    for key in ("enabled", "repository", "image", "version", "imagePullSecrets", "licensingConfig"):
        if isinstance(given, dict) and key in given:
            spec["driver"][key] = _merged(spec["driver"].get(key), given[key])
    if "mig" in extra:
        spec["mig"] = _merged(spec["mig"], extra["mig"])
    dcgm = extra.get("dcgmExporter")
    if "dcgmExporter" in spec and isinstance(dcgm, dict):
        for key in ("enablePodLabels", "podLabelAllowlistRegex", "config"):
            if key in dcgm:
                spec["dcgmExporter"][key] = _merged(spec["dcgmExporter"].get(key), dcgm[key])
    plugin = extra.get("devicePlugin")
    given = plugin.get("config") if isinstance(plugin, dict) else None
    if "devicePlugin" in spec and isinstance(given, dict):
        for key in ("name", "default"):
            if key in given:
                spec["devicePlugin"]["config"][key] = copy.deepcopy(given[key])
    return spec


def missing_guest_driver(op):
    """Why the gpu_operator role must not install the operator with its inputs `op`: a vGPU guest
    without a guest driver version (the chart's data-center driver does not load on a vGPU); None
    when it may."""
    if not flag(op.get("gpu_operator_vgpu_guest", True)) or not flag(op.get("gpu_operator_driver_enabled", True)):
        return None
    if op.get("gpu_operator_driver_version"):
        return None
    return ("no vGPU guest driver is given (gpu_operator_driver_version is empty): the GPU Operator would deploy "
            "its data-center driver, which does not load in a vGPU VM. Add guest.driver to the design: "
            "{repository: <private registry path of the mirrored NVIDIA vGPU guest driver image>, image: "
            "vgpu-guest-driver, version: <Linux guest driver of the hosts' vGPU release>, pull_secret: <image pull "
            "Secret in namespace %s>}" % op.get("gpu_operator_namespace", "gpu-operator"))


GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


def _pod_spec(obj):
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    return (spec.get("template") or {}).get("spec") or {}


def gpu_requests(obj):
    """The GPU resources (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>) the pods
    of a Pod, Deployment, StatefulSet, DaemonSet, Job or CronJob request, sorted."""
    spec = _pod_spec(obj)
    found = set()
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            found.update(name for name in (resources.get(part) or {}) if name.startswith(GPU_RESOURCE_PREFIXES))
    return sorted(found)


def gpu_workloads(objects):
    """["<Kind> <namespace>/<name> (<resources>)"] of the workloads among `objects` that request
    GPUs: controllers by their pod template, Pods only when no controller owns them (a controller's
    Pods are its own line)."""
    out = []
    for obj in objects or []:
        meta = obj.get("metadata") or {}
        if obj.get("kind") == "Pod" and any(o.get("controller") for o in meta.get("ownerReferences") or []):
            continue
        wanted = gpu_requests(obj)
        if wanted:
            out.append("%s %s/%s (%s)" % (obj.get("kind"), meta.get("namespace"), meta.get("name"), ", ".join(wanted)))
    return sorted(out)


def mig_strategy_change(op, live_spec):
    """(live strategy, wanted strategy) when the role's inputs `op` would change the mig.strategy of
    the live ClusterPolicy spec `live_spec` (None: no ClusterPolicy) and the change is not allowed
    (gpu_operator_allow_mig_strategy_change); None otherwise."""
    if live_spec is None or flag(op.get("gpu_operator_allow_mig_strategy_change", False)):
        return None
    live = (live_spec.get("mig") or {}).get("strategy")
    wanted = cluster_policy_spec(op)["mig"]["strategy"]
    if live is None or live == wanted:
        return None
    return live, wanted


def device_plugin_configs(op):
    """{key: config} of the device plugin ConfigMap the gpu_operator role writes (each value is
    the YAML document of one key, as data); {} when the role writes none."""
    if not op.get("gpu_operator_time_slicing"):
        return {}
    strategy = op["gpu_operator_mig_strategy"]
    out = {op["gpu_operator_device_plugin_default_config"]: {"version": "v1", "flags": {"migStrategy": strategy}}}
    for name, ts in op["gpu_operator_time_slicing"].items():
        out[name] = {"version": "v1", "flags": {"migStrategy": strategy}, "sharing": {"timeSlicing": {
            "renameByDefault": flag(ts.get("rename_by_default", False)),
            "failRequestsGreaterThanOne": flag(ts.get("fail_requests_greater_than_one", False)),
            "resources": [{"name": r, "replicas": int(ts["replicas"])} for r in (
                DEFAULT_SHARED_RESOURCES if ts.get("resources") is None else ts["resources"])]}}}
    return out


def device_plugin_config_map(op, dump):
    """The device plugin ConfigMap the gpu_operator role writes, each configuration as the YAML
    text `dump` makes of it; None when the role writes none."""
    configs = device_plugin_configs(op)
    if not configs:
        return None
    return _manifest("v1", "ConfigMap", op["gpu_operator_device_plugin_config_name"], op["gpu_operator_namespace"],
                     data=dict((key, dump(config)) for key, config in configs.items()))


def tenant_namespace_labels(tenant):
    """The labels the gpu_scheduling_policy role keeps on a tenant namespace."""
    labels = dict((k, str(v)) for k, v in (tenant.get("labels") or {}).items())
    labels.update({"gpupool.vcf/tenant": "true",
                   "gpupool.vcf/training": "true" if flag(tenant.get("training", False)) else "false"})
    return labels


def tenant_namespace(tenant, created=False):
    """The tenant Namespace the gpu_scheduling_policy role writes; one it `created` (that did not
    exist before the run) is labelled as the collection's too."""
    labels = tenant_namespace_labels(tenant)
    if created:
        labels.update(MANAGED_BY)
    return _manifest("v1", "Namespace", tenant["namespace"], labels=labels)


KUEUE_PREEMPTION = {"within_cluster_queue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
                    "reclaim_within_cohort": ("Never", "LowerPriority", "Any")}
_DURATION = re.compile(r"^(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|ms|s|m|h)")
_DURATION_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def duration_seconds(text):
    """Seconds of a Go duration (``10m``, ``1h30m``, ``90s``) as Kueue's configuration reads it;
    None when `text` is not one."""
    text = str(text).strip() if text is not None else ""
    if not _DURATION.match(text):
        return None
    return sum(float(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(text))


def kueue_queues(policy):
    """The training queues of the gpu_scheduling_policy role: each ``{"flavor", "cluster_queue",
    "local_queue", "namespaces", "node_labels", "tolerations", "resources"}`` from
    gpu_scheduling_policy_kueue_queues (one per gang-scheduled pool), or, when that is empty,
    the one queue of the gpu_scheduling_policy_training_* inputs (``namespaces`` None: the
    tenants marked ``training``). [] when the role writes no queue."""
    if not flag(policy.get("gpu_scheduling_policy_kueue")):
        return []
    out = []
    for i, q in enumerate(policy.get("gpu_scheduling_policy_kueue_queues") or []):
        if not isinstance(q, dict) or not q.get("name"):
            raise ValueError("gpu_scheduling_policy_kueue_queues[%d] must be a mapping with a name, not %r" % (i, q))
        if not q.get("resources"):
            raise ValueError("gpu_scheduling_policy_kueue_queues[%d] (%s) has no resources: give the pool's size "
                             "per resource (for example {nvidia.com/gpu: 8}), the ClusterQueue's quota" % (i, q["name"]))
        out.append({"flavor": q["name"], "cluster_queue": q["name"], "local_queue": q.get("local_queue") or q["name"],
                    "namespaces": list(q.get("namespaces") or []),
                    "node_labels": dict(q.get("node_labels") or {}),
                    "tolerations": [dict(t) for t in (q.get("tolerations") or [])],
                    "resources": dict(q["resources"])})
    names = [q["cluster_queue"] for q in out]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        raise ValueError("gpu_scheduling_policy_kueue_queues: names must be unique (%s given twice)" % ", ".join(twice))
    if not out and policy.get("gpu_scheduling_policy_training_resources"):
        out.append({"flavor": policy["gpu_scheduling_policy_training_flavor"],
                    "cluster_queue": policy["gpu_scheduling_policy_training_cluster_queue"],
                    "local_queue": policy["gpu_scheduling_policy_training_local_queue"],
                    "namespaces": None,
                    "node_labels": dict(policy["gpu_scheduling_policy_training_node_labels"]),
                    "tolerations": [dict(t) for t in policy["gpu_scheduling_policy_training_tolerations"]],
                    "resources": dict(policy["gpu_scheduling_policy_training_resources"])})
    return out


def _kueue_preemption(policy):
    given = dict(policy.get("gpu_scheduling_policy_kueue_preemption") or {})
    unknown = sorted(set(given) - set(KUEUE_PREEMPTION))
    if unknown:
        raise ValueError("gpu_scheduling_policy_kueue_preemption: unknown key(s) %s (known: %s)" % (
            ", ".join(unknown), ", ".join(sorted(KUEUE_PREEMPTION))))
    out = {}
    for key, choices in KUEUE_PREEMPTION.items():
        value = given.get(key) or "Never"
        if value not in choices:
            raise ValueError("gpu_scheduling_policy_kueue_preemption.%s must be one of %s, not %r" % (
                key, ", ".join(choices), value))
        out[key] = value
    return {"withinClusterQueue": out["within_cluster_queue"], "reclaimWithinCohort": out["reclaim_within_cohort"],
            "borrowWithinCohort": {"policy": "Never"}}


def kueue_objects(policy):
    """The Kueue objects the gpu_scheduling_policy role writes, as {"api_version",
    "resource_flavors": [(name, spec)], "cluster_queues": [(name, spec)], "local_queues":
    [(namespace, name, spec)]}, one flavor and ClusterQueue per queue of kueue_queues() and a
    LocalQueue in each of its namespaces; None when the role writes none."""
    queues = kueue_queues(policy)
    if not queues:
        return None
    api_version = policy["gpu_scheduling_policy_kueue_api_version"]
    v1beta1 = api_version.endswith("v1beta1")
    fungibility = ({"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"} if v1beta1
                   else {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"})
    cohort = policy.get("gpu_scheduling_policy_kueue_cohort") or ""
    preemption = _kueue_preemption(policy)
    tenants = [t["namespace"] for t in policy.get("gpu_scheduling_policy_tenants") or [] if flag(t.get("training"))]
    out = {"api_version": api_version, "resource_flavors": [], "cluster_queues": [], "local_queues": []}
    for q in queues:
        if q["namespaces"] is None:
            selector = {"matchLabels": {"gpupool.vcf/training": "true"}}
            namespaces = tenants
        elif q["namespaces"]:
            selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                              "values": list(q["namespaces"])}]}
            namespaces = q["namespaces"]
        else:  # no tenant has quota on the pool: a selector no namespace matches
            selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}
            namespaces = []
        resources = q["resources"]
        spec = {"namespaceSelector": selector}
        if cohort:
            spec["cohort" if v1beta1 else "cohortName"] = cohort
        spec.update({
            "queueingStrategy": "StrictFIFO",
            "stopPolicy": "None",
            "preemption": copy.deepcopy(preemption),
            "flavorFungibility": dict(fungibility),
            "resourceGroups": [{"coveredResources": list(resources), "flavors": [{
                "name": q["flavor"], "resources": [{"name": k, "nominalQuota": str(v)} for k, v in resources.items()]}]}],
        })
        out["resource_flavors"].append((q["flavor"], {"nodeLabels": q["node_labels"], "tolerations": q["tolerations"]}))
        out["cluster_queues"].append((q["cluster_queue"], spec))
        out["local_queues"] += [(ns, q["local_queue"], {"clusterQueue": q["cluster_queue"]}) for ns in namespaces]
    return out


def kueue_manifests(policy):
    """The Kueue objects of kueue_objects() as the role writes them: {"resource_flavors",
    "cluster_queues", "local_queues": [manifest]}; None when the role writes none."""
    want = kueue_objects(policy)
    if want is None:
        return None
    api_version = want["api_version"]
    return {"resource_flavors": [_manifest(api_version, "ResourceFlavor", name, spec=spec)
                                 for name, spec in want["resource_flavors"]],
            "cluster_queues": [_manifest(api_version, "ClusterQueue", name, spec=spec)
                               for name, spec in want["cluster_queues"]],
            "local_queues": [_manifest(api_version, "LocalQueue", name, ns, spec=spec)
                             for ns, name, spec in want["local_queues"]]}


def kueue_wait_for_pods_ready(policy):
    """The waitForPodsReady the role sets in Kueue's Configuration ({"timeout", "blockAdmission":
    True}): all pods of an admitted job must run within the timeout or the job is evicted and
    requeued, and no other job is admitted meanwhile. None when the role leaves Kueue's
    configuration alone (no timeout given, or Kueue off)."""
    timeout = policy.get("gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout") or ""
    if not flag(policy.get("gpu_scheduling_policy_kueue")) or not timeout:
        return None
    seconds = duration_seconds(timeout)
    if not seconds:
        raise ValueError("gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout must be a positive duration "
                         "such as 10m or 1h30m, not %r" % (timeout,))
    return {"timeout": str(timeout), "blockAdmission": True}


def _kueue_config_version(config):
    if not isinstance(config, dict) or config.get("kind") != "Configuration" or not str(
            config.get("apiVersion", "")).startswith("config.kueue.x-k8s.io/"):
        raise ValueError("Kueue's configuration must be a config.kueue.x-k8s.io Configuration, not %s" % (
            "%s %s" % (config.get("apiVersion"), config.get("kind")) if isinstance(config, dict) else repr(config)))
    return config["apiVersion"]


def kueue_config_differences(policy, config):
    """[(path, live, wanted)] where Kueue's Configuration `config` (parsed) lacks the
    waitForPodsReady the role sets (timeouts compared as durations); [] when it has it or the
    role sets none."""
    want = kueue_wait_for_pods_ready(policy)
    if want is None:
        return []
    v1beta1 = _kueue_config_version(config).endswith("/v1beta1")
    have = config.get("waitForPodsReady")
    have = have if isinstance(have, dict) else {}
    out = []
    if v1beta1 and not flag(have.get("enable", False)):
        out.append(("waitForPodsReady.enable", have.get("enable"), True))
    if duration_seconds(have.get("timeout")) != duration_seconds(want["timeout"]):
        out.append(("waitForPodsReady.timeout", have.get("timeout"), want["timeout"]))
    if not flag(have.get("blockAdmission", False)):
        out.append(("waitForPodsReady.blockAdmission", have.get("blockAdmission"), True))
    return out


def kueue_configuration(policy, config):
    """Kueue's Configuration `config` (parsed) with waitForPodsReady as the role sets it; every
    other setting (and waitForPodsReady's other fields) kept. `config` itself when nothing differs."""
    if not kueue_config_differences(policy, config):
        return config
    out = copy.deepcopy(config)
    wfpr = dict(out.get("waitForPodsReady") or {}) if isinstance(out.get("waitForPodsReady"), dict) else {}
    wfpr.update(kueue_wait_for_pods_ready(policy))
    if config["apiVersion"].endswith("/v1beta1"):
        wfpr["enable"] = True
    out["waitForPodsReady"] = wfpr
    return out


def culling_cronjob(policy):
    """The notebook culling CronJob the gpu_scheduling_policy role writes when Kubeflow is not
    installed: {"namespace", "name", "schedule", "image", "env"}; None when culling is off or
    left to Kubeflow."""
    if policy.get("gpu_scheduling_policy_culling") in ("none", "kubeflow"):
        return None
    job = {"namespace": policy["gpu_scheduling_policy_culling_namespace"], "name": CULLER,
           "schedule": "*/%s * * * *" % policy["gpu_scheduling_policy_culling_check_minutes"],
           "image": policy["gpu_scheduling_policy_culling_image"],
           "env": {"CULL_IDLE_MINUTES": str(policy["gpu_scheduling_policy_culling_idle_minutes"]),
                   "NOTEBOOK_SELECTOR": policy["gpu_scheduling_policy_culling_selector"],
                   "NOTEBOOK_PORT": str(policy["gpu_scheduling_policy_culling_port"])}}
    if policy.get("gpu_scheduling_policy_culling_pools"):  # idle minutes per pool, the pool read off the pod's node
        job["env"].update(CULL_POOL_IDLE_MINUTES=json.dumps(dict(policy["gpu_scheduling_policy_culling_pools"]),
                                                            sort_keys=True),
                          POOL_LABEL=policy["gpu_scheduling_policy_pool_label"])
    if policy.get("gpu_scheduling_policy_culling_prometheus_url"):  # idle also means no DCGM engine activity
        job["env"]["PROMETHEUS_URL"] = policy["gpu_scheduling_policy_culling_prometheus_url"]
    return job


def culling_manifests(policy, script):
    """The objects of the notebook culling CronJob (culling_cronjob()) as the role writes them:
    its ServiceAccount, ClusterRole and binding, the ConfigMap with `script` (the culler's
    source) and the CronJob; [] when culling is off or left to Kubeflow."""
    job = culling_cronjob(policy)
    if job is None:
        return []
    ns = job["namespace"]
    rules = [{"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
             {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get"]},
             {"apiGroups": ["apps"], "resources": ["statefulsets/scale", "deployments/scale"],
              "verbs": ["get", "patch", "update"]},
             {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]  # Culled, CullCheckFailed, CullFailed
    container = {
        "name": "culler", "image": job["image"], "command": ["python3", "/culler/culler.py"],
        "env": [{"name": k, "value": v} for k, v in job["env"].items()],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "script", "mountPath": "/culler", "readOnly": True}]}
    pod = {"serviceAccountName": CULLER, "restartPolicy": "Never", "containers": [container],
           "volumes": [{"name": "script", "configMap": {"name": CULLER}}]}
    return [
        _manifest("v1", "ServiceAccount", CULLER, ns),
        _manifest("rbac.authorization.k8s.io/v1", "ClusterRole", CULLER, rules=rules),
        _manifest("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", CULLER,
                  roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CULLER},
                  subjects=[{"kind": "ServiceAccount", "name": CULLER, "namespace": ns}]),
        _manifest("v1", "ConfigMap", CULLER, ns, data={"culler.py": script if script.endswith("\n") else script + "\n"}),
        _manifest("batch/v1", "CronJob", CULLER, ns, spec={
            "schedule": job["schedule"], "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": {"spec": pod}}}}),
    ]


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
