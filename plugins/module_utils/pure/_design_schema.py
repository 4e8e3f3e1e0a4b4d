# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The schema of a gpupool.vcf pool design, as data (no I/O, standard library only).

``DESIGN_SCHEMA`` describes every field of a design with the vocabulary of an Ansible
argument spec, so modules can use it without reading a file:

* ``type``: ``str``, ``int``, ``float`` (an int is accepted), ``bool``, ``dict`` (fixed
  keys, described in ``options``), ``list`` (items described by ``elements``: a type name,
  ``dict`` with ``options``, or a spec), ``map`` (free keys, values described by ``values``),
  ``either`` (one of the specs in ``forms``, told apart by their type: a list or a mapping);
* ``required``, ``default`` (filled in when the key is absent; ``None`` means "not set"),
  ``choices``, ``min`` (numbers and list length);
* ``description``: the field's documentation (docs/design.md explains the same fields with
  an example).

Unknown keys are errors. ``normalize(design) -> (normalized, findings)`` applies the schema
(defaults filled in, rule ``schema`` findings for unknown keys, wrong types, missing required
fields, bad choices); ``json_schema()`` gives
the same schema as JSON Schema (draft 2020-12) for editors.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
import difflib
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import Finding

SCHEMA_VERSION = 1

_ACCESS = {
    "type": "list", "elements": "dict", "default": [],
    "description": "Who may use the namespace (the vSphere namespace access list).",
    "options": {
        "subject": {"type": "str", "required": True, "description": "User or group name, without the domain."},
        "type": {"type": "str", "choices": ["group", "user"], "default": "group",
                 "description": "Whether the subject is a group or a user."},
        "domain": {"type": "str", "default": "vsphere.local", "description": "Identity source domain."},
        "role": {"type": "str", "choices": ["owner", "edit", "view"], "default": "edit",
                 "description": "Namespace role."},
    },
}

_TAINT = {
    "key": {"type": "str", "required": True, "description": "Taint key."},
    "value": {"type": "str", "default": None, "description": "Taint value."},
    "effect": {"type": "str", "choices": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
               "default": "NoSchedule", "description": "Taint effect."},
}

_MIG_GPUS = {"type": "list", "elements": {"type": "int", "min": 0}}
_MIG_GEOMETRY_LIST = {"type": "list", "elements": _MIG_GPUS}
_MIG_GEOMETRY_MAP = {"type": "map", "values": _MIG_GPUS}

DEFAULT_PRIORITIES = {
    "gpu-inference": {"value": 100000, "preemption_policy": "PreemptLowerPriority",
                      "description": "Online inference: preempts training and notebooks."},
    "gpu-training": {"value": 50000, "preemption_policy": "PreemptLowerPriority",
                     "description": "Batch training: preempts notebooks."},
    "gpu-notebook": {"value": 1000, "preemption_policy": "Never",
                     "description": "Interactive notebooks: best effort, preempted first."},
}

DESIGN_SCHEMA = {
    "type": "dict",
    "description": "One GPU pool design: everything the collection builds is derived from it.",
    "options": {
        "version": {"type": "int", "default": SCHEMA_VERSION, "choices": [SCHEMA_VERSION],
                    "description": "Schema version of the design."},
        "name": {"type": "str", "default": "gpupool", "description": "Name of the design (labels, reports)."},
        "vcenter": {
            "type": "dict", "default": {},
            "description": "The vCenter endpoint. Credentials never go in the design.",
            "options": {
                "hostname": {"type": "str", "default": None,
                             "description": "vCenter address; null takes it from the vSphere modules' "
                                            "connection (module_defaults or VMWARE_HOST)."},
                "datacenter": {"type": "str", "default": None, "description": "Datacenter of the GPU clusters."},
            },
        },
        "vcenters": {
            "type": "map", "default": None,
            "description": "Several vCenters: name (lower-case letters, digits, dashes) -> endpoint; each GPU "
                           "cluster names its vCenter (clusters[].vcenter). null - the one vCenter of the "
                           "vcenter block (named default). Credentials never go in the design: per vCenter from "
                           "the inventory or GPUPOOL_VCENTER_<NAME>_* environment variables (docs/design.md).",
            "values": {
                "type": "dict",
                "options": {
                    "hostname": {"type": "str", "default": None,
                                 "description": "vCenter address; null - from the vCenter's connection "
                                                "(inventory or environment)."},
                    "port": {"type": "int", "default": None, "description": "HTTPS port; null - 443."},
                    "datacenter": {"type": "str", "default": None,
                                   "description": "Datacenter of the vCenter's GPU clusters."},
                },
            },
        },
        "supervisor": {
            "type": "dict", "required": True,
            "description": "The Supervisor that serves the namespaces and the VKS clusters.",
            "options": {
                "name": {"type": "str", "default": None,
                         "description": "Supervisor name; null - the Supervisor of the GPU clusters."},
                "cluster": {"type": "str", "default": None,
                            "description": "vSphere cluster the Supervisor is enabled on (namespaces are "
                                           "created there); null - give name instead."},
                "endpoint": {"type": "str", "default": None,
                             "description": "Supervisor control plane address (kubectl); null - discovered."},
                "storage_policy": {"type": "str", "required": True,
                                   "description": "Default storage policy of every namespace."},
                "vm_class_revisions": {"type": "bool", "default": False,
                                       "description": "A pool whose VM class changes shape (vCPUs, memory, vGPU "
                                                      "profile) gets a new class <class>-r<5 hex>; the namespaces "
                                                      "get it, the node pool rolls to it (site.yml waits for the "
                                                      "rollout) and the old class is deleted once no node uses it. "
                                                      "false - the class is edited in place (node VMs keep their "
                                                      "old vGPU until they are powered on again)."},
                "vcenter": {"type": "str", "default": None,
                            "description": "vCenter of the Supervisor (vcenters key): its VM classes and "
                                           "namespaces are made there; null - the vCenter of supervisor.cluster "
                                           "(or the only one)."},
            },
        },
        "vks_clusters": {
            "type": "list", "elements": "dict", "required": True, "min": 1,
            "description": "VKS (guest Kubernetes) clusters that carry the GPU node pools.",
            "options": {
                "name": {"type": "str", "required": True, "description": "Cluster name."},
                "namespace": {"type": "str", "required": True,
                              "description": "vSphere namespace of the cluster (gets the node pools' VM classes)."},
                "version": {"type": "str", "default": None,
                            "description": "Kubernetes release (v1.35.5+vmware.1-vkr.1); null - leave alone."},
                "storage_class": {"type": "str", "default": None, "description": "Storage class of the nodes."},
                "access": _ACCESS,
            },
        },
        "clusters": {
            "type": "list", "elements": "dict", "required": True, "min": 1,
            "description": "vSphere clusters with GPU hosts.",
            "options": {
                "name": {"type": "str", "required": True, "description": "vSphere cluster name."},
                "vcenter": {"type": "str", "default": None,
                            "description": "vCenter of the cluster (vcenters key); null - the only vCenter."},
                "gpu": {
                    "type": "dict", "required": True, "description": "The GPUs of every host of the cluster.",
                    "options": {
                        "model": {"type": "str", "required": True,
                                  "description": "GPU model as the NVIDIA catalog names it (H100-80GB, L40S)."},
                        "per_host": {"type": "int", "required": True, "min": 1, "description": "GPUs per host."},
                    },
                },
                "hosts": {"type": "int", "required": True, "min": 1, "description": "GPU hosts in the cluster."},
                "driver": {
                    "type": "dict", "default": {}, "description": "The NVIDIA host driver, one version for every host.",
                    "options": {
                        "version": {"type": "str", "default": None,
                                    "description": "Full component version, pinned "
                                                   "(550.90.05-1OEM.800.1.0.20613240)."},
                        "lifecycle": {"type": "str", "choices": ["direct", "vlcm"], "default": "direct",
                                      "description": "direct - install the bundle host by host through the "
                                                     "vSphere API; vlcm - the cluster's vLCM desired image."},
                        "bundle": {"type": "str", "default": None,
                                   "description": "Offline bundle (datastore path or URL) for the direct lifecycle."},
                        "depot": {"type": "str", "default": None, "description": "Offline depot URL for vLCM."},
                        "component": {"type": "str", "default": "NVD-AIE-800",
                                      "description": "NVIDIA driver component name."},
                    },
                },
                "graphics": {
                    "type": "dict", "default": {}, "description": "Host graphics configuration.",
                    "options": {
                        "type": {"type": "str", "choices": ["shared_direct", "shared"], "default": "shared_direct",
                                 "description": "Host default and per-GPU graphics type; vGPU needs shared_direct."},
                        "assignment_policy": {"type": "str", "choices": ["performance", "consolidation"],
                                              "default": "performance",
                                              "description": "performance spreads vGPU VMs over the GPUs, "
                                                             "consolidation fills one GPU first."},
                        "vgpu_mode": {"type": "str", "choices": ["same_size", "mixed_size"], "default": None,
                                      "description": "vGPU mode of every NVIDIA GPU not in MIG mode (vSphere 8.0 "
                                                     "Update 3 and later): same_size - the time-sliced vGPUs of "
                                                     "one GPU all have one size; mixed_size - vGPUs of different "
                                                     "sizes share a GPU (not with the fixed_share scheduler, rule "
                                                     "mixed_size_fixed_share). null - not managed (left as the "
                                                     "hosts have it)."},
                    },
                },
                "scheduler": {
                    "type": "dict", "default": {}, "description": "vGPU scheduler of every GPU (time-sliced vGPUs).",
                    "options": {
                        "policy": {"type": "str", "choices": ["best_effort", "equal_share", "fixed_share"],
                                   "default": "best_effort", "description": "Scheduler policy."},
                        "time_slice_ms": {"type": "int", "default": None,
                                          "description": "Time slice 1-30 ms (equal_share, fixed_share); "
                                                         "null - NVIDIA's default."},
                    },
                },
                "mig_mix": {"type": "map", "values": "int", "default": None,
                            "description": "Optional layout of one MIG card when pools share cards: "
                                           "MIG-backed vGPU profile -> instances per card."},
                "mig_geometry": {
                    "type": "either", "default": None, "forms": [_MIG_GEOMETRY_LIST, _MIG_GEOMETRY_MAP],
                    "description": "Which GPUs of which host run MIG mode: a list with one entry per host "
                                   "position (the cluster's GPU hosts in name order), each the GPU indexes "
                                   "(0 to gpu.per_host - 1) in MIG mode, at most hosts entries; or a mapping "
                                   "of host name -> GPU indexes (hosts it does not name run no MIG). Only on "
                                   "models with MIG. null - derived from the pools (docs/design.md)."},
                "waivers": {
                    "type": "dict", "default": {},
                    "description": "Seed rules this cluster departs from on purpose, each with the reason (the "
                                   "rule then reports nothing).",
                    "options": {
                        "gpu_vms_pinned": {"type": "str", "default": None,
                                           "description": "Why the vGPU VMs are not DRS-pinned (drs.pinning "
                                                          "false); null - no waiver."},
                        "notebooks_best_effort": {"type": "str", "default": None,
                                                  "description": "Why the vGPU scheduler is not best_effort "
                                                                 "although a time-sliced notebook pool runs "
                                                                 "here; null - no waiver."},
                    },
                },
                "drs": {
                    "type": "dict", "default": {}, "description": "DRS per-VM overrides for the vGPU VMs.",
                    "options": {
                        "pinning": {"type": "bool", "default": True, "description": "Pin the vGPU VMs."},
                        "behavior": {"type": "str", "choices": ["partiallyAutomated", "manual"],
                                     "default": "partiallyAutomated", "description": "Per-VM automation level."},
                    },
                },
            },
        },
        "pools": {
            "type": "list", "elements": "dict", "required": True, "min": 1,
            "description": "One pool per workload shape: a vGPU profile, a VM class and a node pool.",
            "options": {
                "name": {"type": "str", "required": True, "description": "Pool name (DNS label)."},
                "shape": {"type": "str", "required": True, "choices": ["inference", "training", "notebooks"],
                          "description": "Workload shape."},
                "cluster": {"type": "str", "required": True, "description": "vSphere cluster (clusters[].name)."},
                "sharing": {"type": "str", "required": True, "choices": ["mig", "full_card", "time_sliced"],
                            "description": "How a card is shared: MIG instances, whole cards, or time-sliced vGPUs."},
                "vgpu_profile": {"type": "str", "required": True,
                                 "description": "vGPU profile of each vGPU (nvidia_h100-3-40c)."},
                "gpus_per_node": {"type": "int", "default": 1, "min": 1, "description": "vGPUs per node VM."},
                "per_card": {"type": "int", "default": None, "min": 1,
                             "description": "vGPUs of this profile per physical card; null - as many as fit."},
                "priority": {"type": "str", "default": None,
                             "description": "PriorityClass (priorities key); null - gpu-<shape> default."},
                "vm_class": {
                    "type": "dict", "required": True, "description": "The VM class of the node VMs.",
                    "options": {
                        "name": {"type": "str", "default": None,
                                 "description": "VM class name; null - gpu-<pool name>."},
                        "cpu": {"type": "int", "required": True, "min": 1, "description": "vCPUs."},
                        "memory_gb": {"type": "int", "required": True, "min": 1,
                                      "description": "Memory in GiB (reserved 100 %)."},
                    },
                },
                "node_pool": {
                    "type": "dict", "required": True, "description": "The VKS node pool of the pool.",
                    "options": {
                        "name": {"type": "str", "default": None, "description": "Node pool name; null - pool name."},
                        "vks_cluster": {"type": "str", "default": None,
                                        "description": "VKS cluster (vks_clusters[].name); null - the only one."},
                        "replicas": {"type": "int", "required": True, "min": 0, "description": "Node VMs."},
                        "labels": {"type": "map", "values": "str", "nullable_values": True, "default": {},
                                   "description": "Extra node labels, merged over the derived ones "
                                                  "(a null value removes a derived label)."},
                        "taints": {"type": "list", "elements": "dict", "default": None, "options": _TAINT,
                                   "description": "Node taints; null - nvidia.com/gpu=present:NoSchedule and "
                                                  "gpupool.vcf/pool=<pool>:NoSchedule."},
                    },
                },
                "training": {
                    "type": "dict", "default": {}, "description": "Training jobs (shape training).",
                    "options": {
                        "gpus_per_job": {"type": "int", "default": 1, "min": 1, "description": "GPUs of one job."},
                        "gang_scheduling": {"type": "bool", "default": False,
                                            "description": "Admit a job's pods all at once (Kueue)."},
                    },
                },
                "guest_time_slicing": {
                    "type": "dict", "default": {}, "description": "GPU Operator time-slicing inside the guests.",
                    "options": {
                        "replicas": {"type": "int", "default": None, "min": 2,
                                     "description": "Pods sharing one vGPU; null - no guest time-slicing."},
                    },
                },
                "culling": {
                    "type": "dict", "default": {}, "description": "Idle culling of the pool's notebooks (shape notebooks).",
                    "options": {
                        "idle_minutes": {"type": "int", "default": None, "min": 1,
                                         "description": "Minutes a notebook on the pool's nodes may stay idle before "
                                                        "it is stopped; null - guest.culling.idle_minutes."},
                    },
                },
                "slo": {
                    "type": "dict", "default": {},
                    "description": "The pool's queueing SLO and planned load: the wait a job (or pod) may spend "
                                   "queued for its GPUs before it runs, and how busy the pool is planned to be "
                                   "(rule slo_knee; gpu_capacity's knee).",
                    "options": {
                        "wait_seconds": {"type": "float", "default": None,
                                         "description": "Target queueing wait (creation to admission or "
                                                        "scheduling, not run time) at the percentile; "
                                                        "null - no SLO."},
                        "percentile": {"type": "float", "default": 95.0,
                                       "description": "Percentile of the waits the target holds for, above 0 "
                                                      "and below 100."},
                        "planned_utilization": {"type": "float", "default": None,
                                                "description": "Share (0-1) of the pool's GPU slots planned busy "
                                                               "on average; null - not planned."},
                        "job_seconds": {"type": "float", "default": None,
                                        "description": "Mean time one job (or pod) holds its GPUs: the service "
                                                       "time of the queueing model the slo_knee rule uses; "
                                                       "null - the rule cannot place the knee (gpu_capacity "
                                                       "fits it from Prometheus samples)."},
                    },
                },
                "model": {
                    "type": "dict", "default": {}, "description": "Declared model size (inference).",
                    "options": {
                        "weights_gb": {"type": "float", "default": None, "description": "Model weights in GB."},
                        "kv_cache_gb": {"type": "float", "default": None, "description": "KV cache in GB."},
                    },
                },
            },
        },
        "priorities": {
            "type": "map", "default": {},
            "description": "PriorityClasses, merged over the defaults gpu-inference, gpu-training, gpu-notebook.",
            "values": {
                "type": "dict",
                "options": {
                    "value": {"type": "int", "required": True, "description": "Priority value."},
                    "preemption_policy": {"type": "str", "choices": ["PreemptLowerPriority", "Never"],
                                          "default": "PreemptLowerPriority",
                                          "description": "Whether pods of this class preempt lower ones."},
                    "description": {"type": "str", "default": None, "description": "Description."},
                },
            },
        },
        "tenants": {
            "type": "list", "elements": "dict", "default": [],
            "description": "Tenants: a vSphere namespace and a guest namespace each, with GPU quotas.",
            "options": {
                "name": {"type": "str", "required": True, "description": "Tenant name."},
                "namespace": {"type": "str", "default": None,
                              "description": "vSphere and guest namespace; null - the tenant name."},
                "description": {"type": "str", "default": None, "description": "Description."},
                "access": _ACCESS,
                "gpu_quota": {"type": "map", "values": "int", "default": {},
                              "description": "Pool name -> GPUs the tenant may request from that pool."},
                "storage_policy": {"type": "str", "default": None,
                                   "description": "Storage policy; null - supervisor.storage_policy."},
                "limits": {
                    "type": "dict", "default": {}, "description": "vSphere namespace limits (null - unlimited).",
                    "options": {
                        "cpu_mhz": {"type": "int", "default": None, "description": "CPU limit in MHz."},
                        "memory_mib": {"type": "int", "default": None, "description": "Memory limit in MiB."},
                        "storage_mib": {"type": "int", "default": None, "description": "Storage limit in MiB."},
                    },
                },
            },
        },
        "guest": {
            "type": "dict", "default": {}, "description": "Settings of the guest clusters (GPU Operator, Kueue).",
            "options": {
                "mig_strategy": {"type": "str", "choices": ["auto", "none", "single", "mixed"], "default": "auto",
                                 "description": "GPU Operator mig.strategy; auto - single when a pool is "
                                                "MIG-backed, else none."},
                "allow_mig_strategy_change": {
                    "type": "bool", "default": False,
                    "description": "Let the gpu_operator role change the mig.strategy of a live ClusterPolicy "
                                   "(it rewrites the GPU resource names every workload requests); false - the "
                                   "role stops and lists the workloads that request GPUs."},
                "driver": {
                    "type": "dict", "default": None,
                    "description": "The vGPU guest driver the GPU Operator deploys in the node VMs (a private "
                                   "registry image; NVIDIA's are entitled). null - none: the gpu_operator role "
                                   "refuses to install the operator in a vGPU guest.",
                    "options": {
                        "repository": {"type": "str", "required": True,
                                       "description": "Registry path of the image (registry.example.com/nvaie)."},
                        "image": {"type": "str", "default": "vgpu-guest-driver",
                                  "description": "Image name in the repository."},
                        "version": {"type": "str", "required": True,
                                    "description": "Linux guest driver version (the image tag without the OS "
                                                   "suffix, 550.90.07): of the vGPU software release of the "
                                                   "host drivers, or one NVIDIA supports with it."},
                        "pull_secret": {"type": "str", "default": None,
                                        "description": "Name of the image pull Secret in the operator namespace "
                                                       "(a reference: the registry credentials never go in the "
                                                       "design); null - none."},
                    },
                },
                "operator_namespace": {"type": "str", "default": "gpu-operator",
                                       "description": "Namespace of the GPU Operator."},
                "time_slicing_config": {"type": "str", "default": "gpupool-time-slicing",
                                        "description": "Name of the device plugin time-slicing ConfigMap."},
                "rename_shared": {"type": "bool", "default": False,
                                  "description": "renameByDefault: advertise time-sliced GPUs as "
                                                 "nvidia.com/gpu.shared."},
                "licensing": {
                    "type": "dict", "default": {}, "description": "NVIDIA licensing of the guest drivers.",
                    "options": {
                        "secret_name": {"type": "str", "default": "licensing-config",
                                        "description": "Secret with gridd.conf and the client token."},
                        "feature_type": {"type": "int", "choices": [0, 1, 2, 4], "default": 1,
                                         "description": "gridd.conf FeatureType (1 - NVIDIA vGPU)."},
                        "dls_host": {"type": "str", "default": None, "description": "DLS appliance address."},
                    },
                },
                "culling": {
                    "type": "dict", "default": {}, "description": "Idle culling of the notebooks of the notebook pools.",
                    "options": {
                        "mechanism": {"type": "str", "choices": ["auto", "kubeflow", "cronjob", "none"],
                                      "default": "auto",
                                      "description": "Who stops idle notebooks: kubeflow - Kubeflow's notebook "
                                                     "controller (one idle time for all: the shortest pool's); "
                                                     "cronjob - the collection's culling CronJob (per pool); "
                                                     "auto - kubeflow where its Notebook CRD is installed, else "
                                                     "cronjob; none - no culling."},
                        "idle_minutes": {"type": "int", "default": 240, "min": 1,
                                         "description": "Idle minutes of a notebook pool that sets none."},
                        "check_minutes": {"type": "int", "default": 10, "min": 1,
                                          "description": "Minutes between two idleness checks."},
                    },
                },
                "kueue": {
                    "type": "dict", "default": {}, "description": "Kueue queues for gang-scheduled training.",
                    "options": {
                        "cohort": {"type": "str", "default": "gpupool", "description": "Cohort of the ClusterQueues."},
                        "wait_for_pods_ready_timeout": {"type": "str", "default": "10m",
                                                        "description": "waitForPodsReady timeout (gang)."},
                        "preemption": {
                            "type": "dict", "default": {},
                            "description": "Preemption of the training ClusterQueues (their spec.preemption).",
                            "options": {
                                "within_cluster_queue": {
                                    "type": "str", "default": "LowerPriority",
                                    "choices": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
                                    "description": "A pending job may evict jobs of its own queue (pool) of "
                                                   "lower priority."},
                                "reclaim_within_cohort": {
                                    "type": "str", "default": "Any", "choices": ["Never", "LowerPriority", "Any"],
                                    "description": "A pending job may evict jobs of other queues of the cohort "
                                                   "that borrowed its queue's quota."},
                            },
                        },
                    },
                },
            },
        },
        "chargeback": {
            "type": "dict", "default": None,
            "description": "Prices of GPU use for the chargeback report (gpu_usage, playbooks/chargeback.yml). "
                           "null - no prices: the report counts GPU-hours only.",
            "options": {
                "currency": {"type": "str", "default": "USD", "description": "Currency of the prices."},
                "card_hour": {"type": "map", "values": "float", "default": {},
                              "description": "Hourly cost of one whole card per GPU model (the clusters' "
                                             "gpu.model, e.g. H100-80GB); a profile-hour costs this times the "
                                             "profile's share of the card (1 / how many of the profile a card "
                                             "holds)."},
                "profile_hour": {"type": "map", "values": "float", "default": {},
                                 "description": "Price of one hour of a vGPU profile (nvidia_h100-3-40c); "
                                                "set here, it replaces the price derived from card_hour."},
            },
        },
    },
}


def schema():
    """A copy of the design schema."""
    return copy.deepcopy(DESIGN_SCHEMA)


_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
               "dict": "object", "list": "array", "map": "object"}


def _json_node(spec):
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec["type"]
    if kind == "either":
        forms = [_json_node(form) for form in spec["forms"]]
        if spec.get("default", 0) is None:
            forms.append({"type": "null"})
        node = {"anyOf": forms}
        if "description" in spec:
            node["description"] = spec["description"]
        return node
    node = {"type": _JSON_TYPES[kind]}
    if "description" in spec:
        node["description"] = spec["description"]
    if spec.get("choices") is not None:
        node["enum"] = list(spec["choices"])
    if spec.get("default") is not None:
        node["default"] = copy.deepcopy(spec["default"])
    if spec.get("min") is not None:
        node["minItems" if kind == "list" else "minimum"] = spec["min"]
    if kind == "dict":
        options = spec.get("options", {})
        node["properties"] = dict((k, _json_node(v)) for k, v in options.items())
        required = [k for k, v in options.items() if v.get("required")]
        if required:
            node["required"] = required
        node["additionalProperties"] = False
    elif kind == "list":
        elements = spec.get("elements", "str")
        node["items"] = _json_node({"type": "dict", "options": spec.get("options", {})}
                                   if elements == "dict" else elements)
    elif kind == "map":
        node["additionalProperties"] = _json_node(spec.get("values", "str"))
    if kind in ("str", "int", "float", "dict", "list", "map") and spec.get("default", 0) is None:
        node["type"] = [node["type"], "null"]
    return node


def json_schema():
    """The design schema as a JSON Schema (draft 2020-12) document."""
    node = _json_node(DESIGN_SCHEMA)
    node["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    node["title"] = "gpupool.vcf pool design"
    return node


# ---------------------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------------------

# the PriorityClass of a pool of each shape, when the pool names none
DEFAULT_PRIORITY = {"inference": "gpu-inference", "training": "gpu-training", "notebooks": "gpu-notebook"}


_TYPE_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "dict": "a mapping", "list": "a list", "map": "a mapping"}


def _schema_error(findings, path, message, fix):
    findings.append(Finding("schema", path or "design", message, fix))


def _item_path(path, index, item):
    if isinstance(item, dict) and isinstance(item.get("name"), str) and item.get("name"):
        return "%s.%s" % (path, item["name"])
    return "%s[%d]" % (path, index)


def _is_a(value, kind):
    """Whether ``value`` has the schema type ``kind`` (not ``either``)."""
    return {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "dict": isinstance(value, dict),
        "map": isinstance(value, dict),
        "list": isinstance(value, list),
    }[kind]


def _norm(value, spec, path, findings):
    """Normalize ``value`` (not None) against ``spec``; None when it is invalid."""
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec["type"]
    if kind == "either":
        for form in spec["forms"]:
            if _is_a(value, form["type"]):
                # all or nothing: a value with an error inside is not used in part (rules would judge
                # a list whose bad entries were dropped and the others shifted)
                before = len(findings)
                out = _norm(value, form, path, findings)
                return out if len(findings) == before else None
        words = " or ".join(_TYPE_WORDS[form["type"]] for form in spec["forms"])
        _schema_error(findings, path, "%r is not %s" % (value, words), "give %s" % words)
        return None
    if not _is_a(value, kind):
        _schema_error(findings, path, "%r is not %s" % (value, _TYPE_WORDS[kind]),
                      "give %s" % _TYPE_WORDS[kind])
        return None
    if kind == "float":
        value = float(value)
    if spec.get("choices") is not None and value not in spec["choices"]:
        _schema_error(findings, path, "%r is not one of %s" % (value, ", ".join(str(c) for c in spec["choices"])),
                      "use one of %s" % ", ".join(str(c) for c in spec["choices"]))
        return None
    low = spec.get("min")
    if low is not None:
        size = len(value) if kind == "list" else value
        if size < low:
            what = "items" if kind == "list" else "value"
            _schema_error(findings, path, "%s %s is below the minimum %s" % (what, size, low),
                          "give at least %s" % low)
            return None
    if kind == "dict":
        return _norm_dict(value, spec.get("options", {}), path, findings)
    if kind == "list":
        elements = spec.get("elements", "str")
        element_spec = {"type": "dict", "options": spec.get("options", {})} if elements == "dict" else elements
        out = []
        for index, item in enumerate(value):
            item_path = _item_path(path, index, item)
            if item is None:
                _schema_error(findings, item_path, "empty list item", "remove it or fill it in")
                continue
            normalized = _norm(item, element_spec, item_path, findings)
            if normalized is not None:
                out.append(normalized)
        return out
    if kind == "map":
        out = OrderedDict()
        for key, item in value.items():
            item_path = "%s.%s" % (path, key)
            if not isinstance(key, str):
                _schema_error(findings, item_path, "key %r is not a string" % (key,), "quote the key")
                continue
            if item is None:
                if spec.get("nullable_values"):
                    out[key] = None
                else:
                    _schema_error(findings, item_path, "no value", "give a value or remove the key")
                continue
            normalized = _norm(item, spec.get("values", "str"), item_path, findings)
            if normalized is not None:
                out[key] = normalized
        return out
    return value


def _norm_dict(value, options, path, findings):
    out = OrderedDict()
    for key in value:
        if key not in options:
            close = difflib.get_close_matches(str(key), list(options), n=1)
            _schema_error(findings, "%s.%s" % (path, key) if path else str(key), "unknown key %r" % (key,),
                          "did you mean %r?" % close[0] if close else
                          "remove it; valid keys: %s" % ", ".join(options))
    for key, sub in options.items():
        sub_path = "%s.%s" % (path, key) if path else key
        item = value.get(key)
        if item is None:
            if sub.get("required"):
                _schema_error(findings, sub_path, "required field is missing",
                              "add %s (%s)" % (key, sub.get("description", sub["type"])))
                out[key] = None
                continue
            default = copy.deepcopy(sub.get("default"))
            if default is not None and sub["type"] == "dict":
                default = _norm_dict(default, sub.get("options", {}), sub_path, findings)
            out[key] = default
            continue
        out[key] = _norm(item, sub, sub_path, findings)
    return out


def normalize(design):
    """Apply the schema and the derived defaults; return ``(normalized design, schema findings)``."""
    findings = []
    if not isinstance(design, dict):
        _schema_error(findings, "design", "the design is %r, not a mapping" % (type(design).__name__,),
                      "give the design as a YAML mapping (see docs/design.md)")
        design = {}
    d = _norm_dict(design, DESIGN_SCHEMA["options"], "", findings)
    for key in ("vks_clusters", "clusters", "pools", "tenants"):
        d[key] = [item for item in (d.get(key) or []) if isinstance(item, dict)]
    priorities = OrderedDict((k, copy.deepcopy(v)) for k, v in DEFAULT_PRIORITIES.items())
    for name, value in (d.get("priorities") or {}).items():
        if isinstance(value, dict):
            priorities[name] = value
    d["priorities"] = priorities
    supervisor = d.get("supervisor") or {}
    only_vks = d["vks_clusters"][0]["name"] if len(d["vks_clusters"]) == 1 else None
    for pool in d["pools"]:
        if pool.get("priority") is None and pool.get("shape"):
            pool["priority"] = DEFAULT_PRIORITY[pool["shape"]]
        if isinstance(pool.get("vm_class"), dict) and pool["vm_class"].get("name") is None and pool.get("name"):
            pool["vm_class"]["name"] = "gpu-%s" % pool["name"]
        node_pool = pool.get("node_pool")
        if isinstance(node_pool, dict):
            if node_pool.get("name") is None:
                node_pool["name"] = pool.get("name")
            if node_pool.get("vks_cluster") is None:
                node_pool["vks_cluster"] = only_vks
    _resolve_vcenters(d, findings)
    for tenant in d["tenants"]:
        if tenant.get("namespace") is None:
            tenant["namespace"] = tenant.get("name")
        if tenant.get("storage_policy") is None:
            tenant["storage_policy"] = supervisor.get("storage_policy")
    return d, findings


# the name of the one vCenter of a design that gives the vcenter block (or none)
DEFAULT_VCENTER = "default"
_VCENTER_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def vcenter_env_prefix(name):
    """Prefix of the environment variables of one vCenter's connection: GPUPOOL_VCENTER_<NAME>_."""
    return "GPUPOOL_VCENTER_%s_" % name.upper().replace("-", "_")


def _vcenter_ref(findings, path, ref, names):
    """The vCenter a cluster or the Supervisor names, checked against the design's vCenters."""
    if ref in names:
        return ref
    close = difflib.get_close_matches(str(ref), names, n=1)
    _schema_error(findings, path, "unknown vCenter %r: the design's vCenters are %s" % (ref, ", ".join(names)),
                  "did you mean %r?" % close[0] if close else "use one of %s (vcenters)" % ", ".join(names))
    return None


def _resolve_vcenters(d, findings):
    """``vcenters`` filled in (the vcenter block as vCenter ``default`` when none is named); each
    cluster's and the Supervisor's vCenter checked, or set where the design has only one."""
    single = d.get("vcenter") or {}
    named = d.get("vcenters")
    if named:
        if any(v is not None for v in single.values()):
            _schema_error(findings, "vcenter", "both vcenter and vcenters are given",
                          "name every vCenter under vcenters and remove the vcenter block")
        for name in named:
            if not _VCENTER_NAME.match(name):
                _schema_error(findings, "vcenters.%s" % name, "vCenter name %r is not lower-case letters, digits "
                              "and dashes" % name, "rename it (it names a play host and environment variables)")
    else:
        named = OrderedDict([(DEFAULT_VCENTER, OrderedDict([
            ("hostname", single.get("hostname")), ("port", None), ("datacenter", single.get("datacenter"))]))])
    d["vcenters"] = named
    names = list(named)
    for cluster in d["clusters"]:
        path = "clusters.%s.vcenter" % cluster.get("name")
        if cluster.get("vcenter") is not None:
            cluster["vcenter"] = _vcenter_ref(findings, path, cluster["vcenter"], names)
        elif len(names) == 1:
            cluster["vcenter"] = names[0]
        else:
            _schema_error(findings, path, "required field is missing: the design names several vCenters",
                          "add vcenter: one of %s" % ", ".join(names))
    supervisor = d.get("supervisor")
    if not isinstance(supervisor, dict):
        return
    if supervisor.get("vcenter") is not None:
        supervisor["vcenter"] = _vcenter_ref(findings, "supervisor.vcenter", supervisor["vcenter"], names)
    else:
        of_cluster = [c.get("vcenter") for c in d["clusters"] if c.get("name") == supervisor.get("cluster")]
        if of_cluster and of_cluster[0]:
            supervisor["vcenter"] = of_cluster[0]
        elif len(names) == 1:
            supervisor["vcenter"] = names[0]
        elif not of_cluster:
            _schema_error(findings, "supervisor.vcenter", "required field is missing: the design names several "
                          "vCenters and supervisor.cluster is none of its GPU clusters",
                          "add vcenter: one of %s" % ", ".join(names))
    # a Supervisor places node VMs (and offers VM classes) only on the clusters of its own vCenter
    home = supervisor.get("vcenter")
    vcenter_of = dict((c.get("name"), c.get("vcenter")) for c in d["clusters"])
    for pool in d["pools"]:
        there = vcenter_of.get(pool.get("cluster"))
        if home and there and there != home:
            _schema_error(findings, "pools.%s.cluster" % pool.get("name"),
                          "cluster %s is in vCenter %s, the Supervisor in vCenter %s: its node VMs cannot be "
                          "placed there" % (pool.get("cluster"), there, home),
                          "put the pool on a cluster of vCenter %s (GPU clusters of other vCenters are converged "
                          "and audited at the host and DRS level)" % home)
