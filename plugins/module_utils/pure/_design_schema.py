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
  ``choices``;
* bounds: ``min`` and ``max`` (a number's range; a list's or a map's number of items), ``above``
  and ``below`` (a number's exclusive range), ``max_len`` (a string's length, ``TEXT_MAX`` when
  the spec gives none), ``format`` (a string's syntax, a name of ``FORMATS``), ``keys`` (a map's
  keys: ``max_len`` and ``format``);
* ``description``: the field's documentation (docs/design.md explains the same fields with
  an example).

Unknown keys are errors. ``normalize(design) -> (normalized, findings)`` applies the schema
(defaults filled in, rule ``schema`` findings for unknown keys, wrong types, missing required
fields, bad choices, values out of bounds, each naming the field and the bound; a value that
breaks a bound is not used, so no rule and no link sees it); ``json_schema()`` gives
the same schema as JSON Schema (draft 2020-12) for editors.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
import difflib
import math
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import Finding
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_SUBDOMAIN_MAX,
    PRIORITY_VALUE_MAX,
    PRIORITY_VALUE_MIN,
    dns_subdomain_problem,
    http_url_problem,
    oci_path_problem,
    oci_repository_problem,
    oci_tag_problem,
    shown,
)

SCHEMA_VERSION = 1

# bounds of the schema (docs/design.md lists them): a string without a max_len of its own holds at
# most TEXT_MAX characters; names at most NAME_MAX (an RFC 1123 subdomain; the dns_label rule
# holds the names of vCenter and Kubernetes objects to 63); paths and URLs at most PATH_MAX
TEXT_MAX = 1024
NAME_MAX = DNS_SUBDOMAIN_MAX
PATH_MAX = 2048
# the whole design: at most DESIGN_NODES values (mappings, lists and scalars) nested at most
# DESIGN_DEPTH deep; the design file at most DESIGN_FILE_MAX bytes (runner/_design_input)
DESIGN_NODES = 100000
DESIGN_DEPTH = 32
DESIGN_FILE_MAX = 1024 * 1024

# what each ``format`` checks: (the problem function, what the syntax is called)
# ranges of the numbers (vSphere 8 configuration maximums where they bound a value: 96 hosts per
# cluster, 768 vCPUs and 24 TiB per VM; the schema's own sanity bounds elsewhere)
HOSTS_MAX = 96
VM_CPU_MAX = 768
VM_MEMORY_GB_MAX = 24576
GPUS_PER_HOST_MAX = 64
GPUS_MAX = 100000
TIME_SLICING_REPLICAS = (2, 256)
IDLE_MINUTES_MAX = 43200          # 30 days
SECONDS_MAX = 31536000            # a year
LIMIT_MAX = 2 ** 50               # MHz or MiB
PRICE_MAX = 1000000
LABEL_KEY_MAX = DNS_SUBDOMAIN_MAX + 1 + 63   # [prefix/]name

FORMATS = {
    "dns_subdomain": (dns_subdomain_problem, "a DNS subdomain (Kubernetes object name)"),
    "oci_repository": (oci_repository_problem, "an OCI image repository ([registry[:port]/]path)"),
    "oci_path": (oci_path_problem, "an OCI repository path"),
    "oci_tag": (oci_tag_problem, "an OCI image tag"),
    "http_url": (http_url_problem, "an http:// or https:// URL"),
}

_ACCESS = {
    "type": "list", "elements": "dict", "default": [], "max": 256,
    "description": "Who may use the namespace (the vSphere namespace access list).",
    "options": {
        "subject": {"type": "str", "required": True, "max_len": NAME_MAX, "description": "User or group name, without the domain."},
        "type": {"type": "str", "choices": ["group", "user"], "default": "group",
                 "description": "Whether the subject is a group or a user."},
        "domain": {"type": "str", "default": "vsphere.local", "max_len": NAME_MAX, "description": "Identity source domain."},
        "role": {"type": "str", "choices": ["owner", "edit", "view"], "default": "edit",
                 "description": "Namespace role."},
    },
}

_TAINT = {
    "key": {"type": "str", "required": True, "max_len": LABEL_KEY_MAX, "description": "Taint key."},
    "value": {"type": "str", "default": None, "max_len": NAME_MAX, "description": "Taint value."},
    "effect": {"type": "str", "choices": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
               "default": "NoSchedule", "description": "Taint effect."},
}

_MIG_GPUS = {"type": "list", "max": GPUS_PER_HOST_MAX, "elements": {"type": "int", "min": 0, "max": GPUS_PER_HOST_MAX - 1}}
_MIG_GEOMETRY_LIST = {"type": "list", "max": HOSTS_MAX, "elements": _MIG_GPUS}
_MIG_GEOMETRY_MAP = {"type": "map", "max": HOSTS_MAX, "values": _MIG_GPUS}

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
        "name": {"type": "str", "default": "gpupool", "max_len": NAME_MAX, "description": "Name of the design (labels, reports)."},
        "adopt": {"type": "bool", "default": False,
                  "description": "Make the objects that exist, made by hand, the collection's once they match (VM classes, "
                                 "namespaces, node pools, DRS overrides); each pool, tenant, VKS cluster and cluster "
                                 "may say otherwise. False - such objects stay foreign and no purge touches them."},
        "vcenter": {
            "type": "dict", "default": {},
            "description": "The vCenter endpoint. Credentials never go in the design.",
            "options": {
                "hostname": {"type": "str", "default": None, "max_len": NAME_MAX,
                             "description": "vCenter address; null takes it from the vSphere modules' "
                                            "connection (module_defaults or VMWARE_HOST)."},
                "datacenter": {"type": "str", "default": None, "max_len": NAME_MAX,
                               "description": "Datacenter of the GPU clusters."},
            },
        },
        "vcenters": {
            "type": "map", "default": None, "max": 16,
            "description": "Several vCenters: name (lower-case letters, digits, dashes) -> endpoint; each GPU "
                           "cluster names its vCenter (clusters[].vcenter). null - the one vCenter of the "
                           "vcenter block (named default). Credentials never go in the design: per vCenter from "
                           "the inventory or GPUPOOL_VCENTER_<NAME>_* environment variables (docs/design.md).",
            "values": {
                "type": "dict",
                "options": {
                    "hostname": {"type": "str", "default": None, "max_len": NAME_MAX,
                                 "description": "vCenter address; null - from the vCenter's connection "
                                                "(inventory or environment)."},
                    "port": {"type": "int", "default": None, "min": 1, "max": 65535,
                             "description": "HTTPS port; null - 443."},
                    "datacenter": {"type": "str", "default": None, "max_len": NAME_MAX,
                                   "description": "Datacenter of the vCenter's GPU clusters."},
                },
            },
        },
        "supervisor": {
            "type": "dict", "required": True,
            "description": "The Supervisor that serves the namespaces and the VKS clusters.",
            "options": {
                "name": {"type": "str", "default": None, "max_len": NAME_MAX,
                         "description": "Supervisor name; null - the Supervisor of the GPU clusters."},
                "cluster": {"type": "str", "default": None, "max_len": NAME_MAX,
                            "description": "vSphere cluster the Supervisor is enabled on (namespaces are "
                                           "created there); null - give name instead."},
                "endpoint": {"type": "str", "default": None, "max_len": NAME_MAX,
                             "description": "Supervisor control plane address (kubectl); null - discovered."},
                "storage_policy": {"type": "str", "required": True, "max_len": NAME_MAX,
                                   "description": "Default storage policy of every namespace."},
                "vm_class_revisions": {"type": "bool", "default": False,
                                       "description": "A pool whose VM class changes shape (vCPUs, memory, vGPU "
                                                      "profile) gets a new class <class>-r<5 hex>; the namespaces "
                                                      "get it, the node pool rolls to it (site.yml waits for the "
                                                      "rollout) and the old class is deleted once no node uses it. "
                                                      "false - the class is edited in place (node VMs keep their "
                                                      "old vGPU until they are powered on again)."},
                "vcenter": {"type": "str", "default": None, "max_len": NAME_MAX,
                            "description": "vCenter of the Supervisor (vcenters key): its VM classes and "
                                           "namespaces are made there; null - the vCenter of supervisor.cluster "
                                           "(or the only one)."},
            },
        },
        "vks_clusters": {
            "type": "list", "elements": "dict", "required": True, "min": 1, "max": 64,
            "description": "VKS (guest Kubernetes) clusters that carry the GPU node pools.",
            "options": {
                "name": {"type": "str", "required": True, "max_len": NAME_MAX, "description": "Cluster name."},
                "namespace": {"type": "str", "required": True, "max_len": NAME_MAX,
                              "description": "vSphere namespace of the cluster (gets the node pools' VM classes)."},
                "version": {"type": "str", "default": None, "max_len": 128,
                            "description": "Kubernetes release (v1.35.5+vmware.1-vkr.1); null - leave alone."},
                "storage_class": {"type": "str", "default": None, "max_len": NAME_MAX, "format": "dns_subdomain",
                                  "description": "Storage class of the nodes (a Kubernetes object name)."},
                "description": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                "description": "Description of the cluster's vSphere namespace; null - gpupool "
                                               "platform namespace of VKS cluster <name>."},
                "adopt": {"type": "bool", "default": None,
                          "description": "Adopt the cluster's node pools and its vSphere namespace; null - the design's adopt."},
                "access": _ACCESS,
            },
        },
        "clusters": {
            "type": "list", "elements": "dict", "required": True, "min": 1, "max": 64,
            "description": "vSphere clusters with GPU hosts.",
            "options": {
                "name": {"type": "str", "required": True, "max_len": NAME_MAX, "description": "vSphere cluster name."},
                "vcenter": {"type": "str", "default": None, "max_len": NAME_MAX,
                            "description": "vCenter of the cluster (vcenters key); null - the only vCenter."},
                "gpu": {
                    "type": "dict", "required": True, "description": "The GPUs of every host of the cluster.",
                    "options": {
                        "model": {"type": "str", "required": True, "max_len": 64,
                                  "description": "GPU model as the NVIDIA catalog names it (H100-80GB, L40S)."},
                        "per_host": {"type": "int", "required": True, "min": 1, "max": GPUS_PER_HOST_MAX,
                                     "description": "GPUs per host."},
                    },
                },
                "hosts": {"type": "int", "required": True, "min": 1, "max": HOSTS_MAX,
                          "description": "GPU hosts in the cluster (a vSphere cluster holds at most 96)."},
                "driver": {
                    "type": "dict", "default": {}, "description": "The NVIDIA host driver, one version for every host.",
                    "options": {
                        "version": {"type": "str", "default": None, "max_len": 128,
                                    "description": "Full component version, pinned "
                                                   "(550.90.05-1OEM.800.1.0.20613240)."},
                        "lifecycle": {"type": "str", "choices": ["direct", "vlcm"], "default": "direct",
                                      "description": "direct - install the bundle host by host through the "
                                                     "vSphere API; vlcm - the cluster's vLCM desired image."},
                        "bundle": {"type": "str", "default": None, "max_len": PATH_MAX,
                                   "description": "Offline bundle (datastore path or URL) for the direct lifecycle."},
                        "depot": {"type": "str", "default": None, "max_len": PATH_MAX,
                                  "description": "Offline depot URL for vLCM."},
                        "component": {"type": "str", "default": "NVD-AIE-800", "max_len": 128,
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
                        "time_slice_ms": {"type": "int", "default": None, "min": 0, "max": 1000,
                                          "description": "Time slice 1-30 ms (equal_share, fixed_share); "
                                                         "null - NVIDIA's default."},
                    },
                },
                "mig_mix": {"type": "map", "values": {"type": "int", "min": 1, "max": 7}, "default": None, "max": 16,
                            "keys": {"max_len": 64},
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
                        "gpu_vms_pinned": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                           "description": "Why the vGPU VMs are not DRS-pinned (drs.pinning "
                                                          "false); null - no waiver."},
                        "notebooks_best_effort": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                                  "description": "Why the vGPU scheduler is not best_effort "
                                                                 "although a time-sliced notebook pool runs "
                                                                 "here; null - no waiver."},
                    },
                },
                "adopt": {"type": "bool", "default": None,
                          "description": "Adopt the DRS overrides of the cluster's vGPU VMs; null - the design's adopt."},
                "drs": {
                    "type": "dict", "default": {}, "description": "DRS per-VM overrides for the vGPU VMs.",
                    "options": {
                        "pinning": {"type": "bool", "default": True, "description": "Pin the vGPU VMs."},
                        "behavior": {"type": "str", "choices": ["partiallyAutomated", "manual"],
                                     "default": "partiallyAutomated", "description": "Per-VM automation level."},
                    },
                },
                "ha": {
                    "type": "dict", "default": {},
                    "description": "vSphere HA as the spare: restart priorities of the pools' node VMs and the "
                                   "admission control the spare rule keeps (docs/capacity.md).",
                    "options": {
                        "manage": {"type": "bool", "default": False,
                                   "description": "Set the HA restart priority of the pools' node VMs (and, with "
                                                  "admission_control, the cluster's admission control); false - "
                                                  "HA is left as it is."},
                        "admission_control": {"type": "bool", "default": True,
                                              "description": "Turn HA admission control on with the failover "
                                                             "capacity of the spare rule (one host of hosts, as a "
                                                             "percentage of CPU and memory); false - the "
                                                             "cluster's admission control is left as it is."},
                    },
                },
            },
        },
        "pools": {
            "type": "list", "elements": "dict", "required": True, "min": 1, "max": 256,
            "description": "One pool per workload shape: a vGPU profile, a VM class and a node pool.",
            "options": {
                "name": {"type": "str", "required": True, "max_len": NAME_MAX, "description": "Pool name (DNS label)."},
                "adopt": {"type": "bool", "default": None,
                          "description": "Adopt the pool's VM class; null - the design's adopt."},
                "shape": {"type": "str", "required": True, "choices": ["inference", "training", "notebooks"],
                          "description": "Workload shape."},
                "cluster": {"type": "str", "required": True, "max_len": NAME_MAX,
                            "description": "vSphere cluster (clusters[].name)."},
                "sharing": {"type": "str", "required": True, "choices": ["mig", "full_card", "time_sliced"],
                            "description": "How a card is shared: MIG instances, whole cards, or time-sliced vGPUs."},
                "vgpu_profile": {"type": "str", "required": True, "max_len": 64,
                                 "description": "vGPU profile of each vGPU (nvidia_h100-3-40c)."},
                "gpus_per_node": {"type": "int", "default": 1, "min": 1, "max": 16, "description": "vGPUs per node VM."},
                "profiling": {"type": "bool", "default": None,
                              "description": "Let the node VMs' guests read the vGPU profiling counters (DCGM_FI_PROF_*): "
                                             "the VM class sets pciPassthru<n>.cfg.enable_profiling per vGPU; null - on "
                                             "where the sharing supports it (mig, full_card), off for time_sliced; true "
                                             "with time_sliced is refused (profiling_supported)."},
                "per_card": {"type": "int", "default": None, "min": 1, "max": 256,
                             "description": "vGPUs of this profile per physical card; null - as many as fit."},
                "priority": {"type": "str", "default": None, "max_len": NAME_MAX,
                             "description": "PriorityClass (priorities key); null - gpu-<shape> default."},
                "ha_restart_priority": {"type": "str", "default": None,
                                        "choices": ["disabled", "lowest", "low", "medium", "high", "highest"],
                                        "description": "vSphere HA restart priority of the pool's node VMs (where "
                                                       "the cluster's ha.manage is true); null - from the shape: "
                                                       "inference highest, training medium, notebooks lowest."},
                "vm_class": {
                    "type": "dict", "required": True, "description": "The VM class of the node VMs.",
                    "options": {
                        "name": {"type": "str", "default": None, "max_len": NAME_MAX,
                                 "description": "VM class name; null - gpu-<pool name>."},
                        "cpu": {"type": "int", "required": True, "min": 1, "max": VM_CPU_MAX,
                                "description": "vCPUs (a vSphere 8 VM has at most 768)."},
                        "memory_gb": {"type": "int", "required": True, "min": 1, "max": VM_MEMORY_GB_MAX,
                                      "description": "Memory in GiB (reserved 100 %; a vSphere 8 VM has at most "
                                                     "24 TiB)."},
                        "description": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                        "description": "Description of the VM class; null - gpupool <pool>: <shape>, "
                                                       "<gpus_per_node> x <vgpu_profile>."},
                    },
                },
                "node_pool": {
                    "type": "dict", "required": True, "description": "The VKS node pool of the pool.",
                    "options": {
                        "name": {"type": "str", "default": None, "max_len": NAME_MAX,
                                 "description": "Node pool name; null - pool name."},
                        "vks_cluster": {"type": "str", "default": None, "max_len": NAME_MAX,
                                        "description": "VKS cluster (vks_clusters[].name); null - the only one."},
                        "replicas": {"type": "int", "required": True, "min": 0, "max": 1000, "description": "Node VMs."},
                        "labels": {"type": "map", "values": {"type": "str", "max_len": NAME_MAX}, "nullable_values": True,
                                   "default": {}, "max": 64, "keys": {"max_len": LABEL_KEY_MAX},
                                   "description": "Extra node labels, merged over the derived ones "
                                                  "(a null value removes a derived label)."},
                        "taints": {"type": "list", "elements": "dict", "default": None, "options": _TAINT, "max": 64,
                                   "description": "Node taints; null - nvidia.com/gpu=present:NoSchedule and "
                                                  "gpupool.vcf/pool=<pool>:NoSchedule."},
                    },
                },
                "training": {
                    "type": "dict", "default": {}, "description": "Training jobs (shape training).",
                    "options": {
                        "gpus_per_job": {"type": "int", "default": 1, "min": 1, "max": 16384,
                                         "description": "GPUs of one job."},
                        "gang_scheduling": {"type": "bool", "default": False,
                                            "description": "Admit a job's pods all at once (Kueue)."},
                    },
                },
                "guest_time_slicing": {
                    "type": "dict", "default": {}, "description": "GPU Operator time-slicing inside the guests.",
                    "options": {
                        "replicas": {"type": "int", "default": None, "min": TIME_SLICING_REPLICAS[0],
                                     "max": TIME_SLICING_REPLICAS[1],
                                     "description": "Pods sharing one vGPU; null - no guest time-slicing."},
                    },
                },
                "culling": {
                    "type": "dict", "default": {}, "description": "Idle culling of the pool's notebooks (shape notebooks).",
                    "options": {
                        "idle_minutes": {"type": "int", "default": None, "min": 1, "max": IDLE_MINUTES_MAX,
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
                        "wait_seconds": {"type": "float", "default": None, "above": 0, "max": SECONDS_MAX,
                                         "description": "Target queueing wait (creation to admission or "
                                                        "scheduling, not run time) at the percentile; "
                                                        "null - no SLO."},
                        "percentile": {"type": "float", "default": 95.0, "above": 0, "below": 100,
                                       "description": "Percentile of the waits the target holds for, above 0 "
                                                      "and below 100."},
                        "planned_utilization": {"type": "float", "default": None, "min": 0, "max": 1,
                                                "description": "Share (0-1) of the pool's GPU slots planned busy "
                                                               "on average; null - not planned."},
                        "job_seconds": {"type": "float", "default": None, "above": 0, "max": SECONDS_MAX,
                                        "description": "Mean time one job (or pod) holds its GPUs: the service "
                                                       "time of the queueing model the slo_knee rule uses; "
                                                       "null - the rule cannot place the knee (gpu_capacity "
                                                       "fits it from Prometheus samples)."},
                        "first_token_seconds": {"type": "float", "default": None, "above": 0, "max": SECONDS_MAX,
                                                "description": "Bound on the p99 time to first token of the pool's "
                                                               "inference endpoint, as the latency probe measures "
                                                               "it (one streaming completion every interval); the "
                                                               "alert GpuPoolFirstTokenSlo fires past it; null - "
                                                               "no latency SLO."},
                    },
                },
                "checkpoint": {
                    "type": "dict", "default": None,
                    "description": "How the pool's jobs checkpoint and how a resume is checked: the volume the "
                                   "checkpoints live on and the sign a resumed job gives (gpu_game_day checks it "
                                   "after a Kueue preemption). A preemptible training pool needs one (rule "
                                   "checkpoint_declared). null - not declared.",
                    "options": {
                        "claim": {"type": "str", "default": None, "max_len": NAME_MAX,
                                  "description": "PersistentVolumeClaim the pool's jobs checkpoint to (one claim "
                                                 "for all of them); null - claim_template."},
                        "claim_template": {"type": "str", "default": None, "max_len": NAME_MAX,
                                           "description": "Name of a claim per job, {job} standing for the Job's "
                                                          "name (ckpt-{job}); null - claim. Exactly one of claim "
                                                          "and claim_template."},
                        "mount_path": {"type": "str", "default": "/checkpoints", "max_len": 4096,
                                       "description": "Where the jobs' containers mount the claim."},
                        "resume_check": {
                            "type": "dict", "required": True,
                            "description": "How to tell that a job resumed from its checkpoint: exactly one of "
                                           "annotation, condition and command.",
                            "options": {
                                "annotation": {"type": "str", "default": None, "max_len": LABEL_KEY_MAX,
                                               "description": "Job annotation the job sets when it resumed from "
                                                              "a checkpoint (its value: the step it resumed "
                                                              "from); the check passes when the resumed job "
                                                              "carries it with a value it did not have before."},
                                "condition": {"type": "str", "default": None, "max_len": NAME_MAX,
                                              "description": "Job status condition type the job sets True when "
                                                             "it resumed from a checkpoint; the check passes "
                                                             "when it turned True after the preemption."},
                                "command": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                            "description": "Shell command run once per preempted job on the "
                                                           "machine that plays the game day, with the job and "
                                                           "its resumed pod in its environment "
                                                           "(GAME_DAY_NAMESPACE, GAME_DAY_JOB, GAME_DAY_POD: "
                                                           "kubectl exec into it); exit status 0 - resumed."},
                            },
                        },
                    },
                },
                "waivers": {
                    "type": "dict", "default": {},
                    "description": "Seed rules this pool departs from on purpose, each with the reason (the rule "
                                   "then reports nothing).",
                    "options": {
                        "checkpoint_declared": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                                "description": "Why this preemptible training pool declares no "
                                                               "checkpoint (its jobs are short, or restart from "
                                                               "the start on purpose); null - no waiver."},
                    },
                },
                "model": {
                    "type": "dict", "default": {}, "description": "Declared model size (inference).",
                    "options": {
                        "weights_gb": {"type": "float", "default": None, "min": 0, "max": 100000,
                                       "description": "Model weights in GB."},
                        "kv_cache_gb": {"type": "float", "default": None, "min": 0, "max": 100000,
                                        "description": "KV cache in GB."},
                    },
                },
            },
        },
        "priorities": {
            "type": "map", "default": {}, "max": 64, "keys": {"max_len": NAME_MAX},
            "description": "PriorityClasses, merged over the defaults gpu-inference, gpu-training, gpu-notebook.",
            "values": {
                "type": "dict",
                "options": {
                    "value": {"type": "int", "required": True, "min": PRIORITY_VALUE_MIN, "max": PRIORITY_VALUE_MAX,
                              "description": "Priority value: a 32-bit integer of at most one billion (Kubernetes "
                                             "keeps the higher values for its system classes)."},
                    "preemption_policy": {"type": "str", "choices": ["PreemptLowerPriority", "Never"],
                                          "default": "PreemptLowerPriority",
                                          "description": "Whether pods of this class preempt lower ones."},
                    "description": {"type": "str", "default": None, "max_len": TEXT_MAX,
                                    "description": "Description."},
                },
            },
        },
        "tenants": {
            "type": "list", "elements": "dict", "default": [], "max": 1000,
            "description": "Tenants: a vSphere namespace and a guest namespace each, with GPU quotas.",
            "options": {
                "name": {"type": "str", "required": True, "max_len": NAME_MAX, "description": "Tenant name."},
                "namespace": {"type": "str", "default": None, "max_len": NAME_MAX,
                              "description": "vSphere and guest namespace; null - the tenant name."},
                "description": {"type": "str", "default": None, "max_len": TEXT_MAX, "description": "Description."},
                "adopt": {"type": "bool", "default": None,
                          "description": "Adopt the tenant's vSphere namespace; null - the design's adopt."},
                "access": _ACCESS,
                "gpu_quota": {"type": "map", "values": {"type": "int", "min": 0, "max": GPUS_MAX}, "default": {},
                              "max": 256,
                              "description": "Pool name -> GPUs the tenant may request from that pool."},
                "storage_policy": {"type": "str", "default": None, "max_len": NAME_MAX,
                                   "description": "Storage policy; null - supervisor.storage_policy."},
                "vm_reservations": {
                    "type": "list", "elements": "dict", "default": [], "max": 256,
                    "description": "Reserved VM classes (vSphere API 9.0 and later): VMs of a pool's VM class kept "
                                   "for the tenant in a vSphere zone, on the Supervisor's zone binding and the "
                                   "namespace's zone.",
                    "options": {
                        "pool": {"type": "str", "required": True, "max_len": NAME_MAX,
                                 "description": "Pool whose VM class is reserved."},
                        "zone": {"type": "str", "required": True, "max_len": NAME_MAX,
                                 "description": "vSphere zone of the Supervisor the VMs are kept in."},
                        "count": {"type": "int", "required": True, "min": 0, "max": GPUS_MAX,
                                  "description": "VMs of the class kept for the tenant in that zone."},
                    },
                },
                "disallow_unreserved_direct_path_usage": {
                    "type": "bool", "default": False,
                    "description": "The namespace's zones refuse VMs with a vGPU (DirectPath) device beyond the "
                                   "tenant's reservations (ZoneSpec disallow_unreserved_direct_path_usage)."},
                "limits": {
                    "type": "dict", "default": {}, "description": "vSphere namespace limits (null - unlimited).",
                    "options": {
                        "cpu_mhz": {"type": "int", "default": None, "min": 0, "max": LIMIT_MAX,
                                    "description": "CPU limit in MHz."},
                        "memory_mib": {"type": "int", "default": None, "min": 0, "max": LIMIT_MAX,
                                       "description": "Memory limit in MiB."},
                        "storage_mib": {"type": "int", "default": None, "min": 0, "max": LIMIT_MAX,
                                        "description": "Storage limit in MiB."},
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
                        "repository": {"type": "str", "required": True, "max_len": 255, "format": "oci_repository",
                                       "description": "Registry path of the image (registry.example.com/nvaie)."},
                        "image": {"type": "str", "default": "vgpu-guest-driver", "max_len": 255, "format": "oci_path",
                                  "description": "Image name in the repository."},
                        "version": {"type": "str", "required": True, "max_len": 128, "format": "oci_tag",
                                    "description": "Linux guest driver version (the image tag without the OS "
                                                   "suffix, 550.90.07): of the vGPU software release of the "
                                                   "host drivers, or one NVIDIA supports with it."},
                        "pull_secret": {"type": "str", "default": None, "max_len": NAME_MAX,
                                        "description": "Name of the image pull Secret in the operator namespace "
                                                       "(a reference: the registry credentials never go in the "
                                                       "design); null - none."},
                    },
                },
                "driver_upgrade": {
                    "type": "dict", "default": {},
                    "description": "How the GPU Operator's upgrade controller rolls a guest driver change over the "
                                   "GPU nodes (ClusterPolicy driver.upgradePolicy).",
                    "options": {
                        "max_parallel": {"type": "int", "default": 1, "min": 0, "max": 1000,
                                         "description": "Nodes upgraded at a time (maxParallelUpgrades and "
                                                        "maxUnavailable); 0 - every node at once."},
                        "drain_timeout_s": {"type": "int", "default": 300, "min": 1, "max": 86400,
                                            "description": "Seconds the controller tries to drain a node (and to "
                                                           "delete its GPU pods) before it marks the node "
                                                           "upgrade-failed."},
                        "honour_pdbs": {"type": "bool", "default": True,
                                        "description": "Drain through evictions PodDisruptionBudgets may refuse "
                                                       "(drain.force and podDeletion.force false); false - force."},
                        "step_timeout_s": {"type": "int", "default": 900, "min": 1, "max": 86400,
                                           "description": "Seconds the gpu_operator role lets a node stay in one "
                                                          "upgrade state before it stops and names the node."},
                    },
                },
                "operator_namespace": {"type": "str", "default": "gpu-operator", "max_len": NAME_MAX,
                                       "description": "Namespace of the GPU Operator."},
                "time_slicing_config": {"type": "str", "default": "gpupool-time-slicing", "max_len": NAME_MAX,
                                        "description": "Name of the device plugin time-slicing ConfigMap."},
                "rename_shared": {"type": "bool", "default": False,
                                  "description": "renameByDefault: advertise time-sliced GPUs as "
                                                 "nvidia.com/gpu.shared."},
                "licensing": {
                    "type": "dict", "default": {}, "description": "NVIDIA licensing of the guest drivers.",
                    "options": {
                        "secret_name": {"type": "str", "default": "licensing-config", "max_len": NAME_MAX,
                                        "description": "Secret with gridd.conf and the client token."},
                        "feature_type": {"type": "int", "choices": [0, 1, 2, 4], "default": 1,
                                         "description": "gridd.conf FeatureType (1 - NVIDIA vGPU)."},
                        "dls_host": {"type": "str", "default": None, "max_len": NAME_MAX,
                                     "description": "DLS appliance address."},
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
                        "idle_minutes": {"type": "int", "default": 240, "min": 1, "max": IDLE_MINUTES_MAX,
                                         "description": "Idle minutes of a notebook pool that sets none."},
                        "check_minutes": {"type": "int", "default": 10, "min": 1, "max": 1440,
                                          "description": "Minutes between two idleness checks."},
                        "prometheus_url": {"type": "str", "default": None, "max_len": PATH_MAX, "format": "http_url",
                                           "description": "Prometheus the culling CronJob asks for the GPU activity "
                                                          "of each notebook pod (dcgm-exporter's engine activity): "
                                                          "a notebook is idle only when its Jupyter server and its "
                                                          "GPUs both are; null - Jupyter activity alone "
                                                          "(docs/notebook-culling.md)."},
                    },
                },
                "kueue": {
                    "type": "dict", "default": {}, "description": "Kueue queues for gang-scheduled training.",
                    "options": {
                        "cohort": {"type": "str", "default": "gpupool", "max_len": NAME_MAX,
                                   "description": "Cohort of the ClusterQueues."},
                        "wait_for_pods_ready_timeout": {"type": "str", "default": "10m", "max_len": 32,
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
                "currency": {"type": "str", "default": "USD", "max_len": 16, "description": "Currency of the prices."},
                "card_hour": {"type": "map", "values": {"type": "float", "min": 0, "max": PRICE_MAX}, "default": {},
                              "max": 64, "keys": {"max_len": 64},
                              "description": "Hourly cost of one whole card per GPU model (the clusters' "
                                             "gpu.model, e.g. H100-80GB); a profile-hour costs this times the "
                                             "profile's share of the card (1 / how many of the profile a card "
                                             "holds)."},
                "profile_hour": {"type": "map", "values": {"type": "float", "min": 0, "max": PRICE_MAX}, "default": {},
                                 "max": 1024, "keys": {"max_len": 64},
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
    counted = {"list": ("minItems", "maxItems"), "map": ("minProperties", "maxProperties")}
    for key, word in zip(("min", "max"), counted.get(kind, ("minimum", "maximum"))):
        if spec.get(key) is not None:
            node[word] = spec[key]
    if spec.get("above") is not None:
        node["exclusiveMinimum"] = spec["above"]
    if spec.get("below") is not None:
        node["exclusiveMaximum"] = spec["below"]
    if kind == "str":
        node["maxLength"] = spec.get("max_len", TEXT_MAX)
    if kind == "map":
        node["propertyNames"] = {"maxLength": (spec.get("keys") or {}).get("max_len", NAME_MAX)}
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
# the vSphere HA restart priority of a pool's node VMs, when the pool names none
DEFAULT_HA_RESTART_PRIORITY = {"inference": "highest", "training": "medium", "notebooks": "lowest"}


_TYPE_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "dict": "a mapping", "list": "a list", "map": "a mapping"}


def _schema_error(findings, path, message, fix):
    findings.append(Finding("schema", path or "design", message, fix))


def _ha_spare_errors(d, findings):
    """HA admission control keeps one host spare: a managed cluster needs two hosts at least."""
    for index, cluster in enumerate(d.get("clusters") or []):
        ha = cluster.get("ha") if isinstance(cluster.get("ha"), dict) else {}
        hosts = cluster.get("hosts")
        if ha.get("manage") and ha.get("admission_control") and isinstance(hosts, int) and hosts < 2:
            _schema_error(findings, "%s.ha.admission_control" % _item_path("clusters", index, cluster),
                          "HA admission control keeps one host of the cluster spare (the spare rule), but the cluster "
                          "has %d host" % hosts,
                          "give the cluster at least 2 hosts, or set ha.admission_control: false")


def _item_path(path, index, item):
    if isinstance(item, dict) and isinstance(item.get("name"), str) and 0 < len(item["name"]) <= NAME_MAX:
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


def _bound_problem(value, spec, kind):
    """(message, fix) when ``value`` (of type ``kind``) breaks a bound of ``spec``, else None."""
    if kind in ("int", "float"):
        low, high = spec.get("min"), spec.get("max")
        if low is not None and high is not None:
            accepted = "from %s to %s" % (low, high)
        else:
            accepted = "%s or more" % low if low is not None else "%s or less" % high
        if low is not None and value < low:
            return "value %s is below the minimum %s" % (shown(value), low), "give a value %s" % accepted
        if high is not None and value > high:
            return "value %s is above the maximum %s" % (shown(value), high), "give a value %s" % accepted
        above, below = spec.get("above"), spec.get("below")
        if (above is not None and value <= above) or (below is not None and value >= below):
            bounds = ("above %s" % above if above is not None else None,
                      "below %s" % below if below is not None else None)
            words = " and ".join(w for w in bounds if w)
            return "value %s is outside the bound: %s" % (shown(value), words), "give a value %s" % words
        return None
    if kind in ("list", "map"):
        low, high = spec.get("min"), spec.get("max")
        if low is not None and len(value) < low:
            return "items %d is below the minimum %s" % (len(value), low), "give at least %s" % low
        if high is not None and len(value) > high:
            return "items %d is above the maximum %s" % (len(value), high), "give at most %s" % high
        return None
    if kind == "str":
        limit = spec.get("max_len", TEXT_MAX)
        if len(value) > limit:
            return ("%d characters, over the bound of %d: %s" % (len(value), limit, shown(value)),
                    "shorten it to at most %d characters" % limit)
        if spec.get("format"):
            check, words = FORMATS[spec["format"]]
            problem = check(value)
            if problem:
                return "%s is not %s: %s" % (shown(value), words, problem), "give %s" % words
    return None


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
        _schema_error(findings, path, "%s is not %s" % (shown(value), words), "give %s" % words)
        return None
    if not _is_a(value, kind):
        _schema_error(findings, path, "%s is not %s" % (shown(value), _TYPE_WORDS[kind]),
                      "give %s" % _TYPE_WORDS[kind])
        return None
    if kind == "float":
        value = float(value)
        if math.isnan(value) or math.isinf(value):
            _schema_error(findings, path, "%s is not a finite number" % shown(value), "give a number")
            return None
    if spec.get("choices") is not None and value not in spec["choices"]:
        _schema_error(findings, path, "%s is not one of %s" % (shown(value), ", ".join(str(c) for c in spec["choices"])),
                      "use one of %s" % ", ".join(str(c) for c in spec["choices"]))
        return None
    problem = _bound_problem(value, spec, kind)
    if problem:
        _schema_error(findings, path, problem[0], problem[1])
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
        key_spec = dict(spec.get("keys") or {}, type="str")
        key_spec.setdefault("max_len", NAME_MAX)
        for key, item in value.items():
            item_path = "%s.%s" % (path, shown(key, NAME_MAX + 2)[1:-1] if isinstance(key, str) else shown(key))
            if not isinstance(key, str):
                _schema_error(findings, item_path, "key %s is not a string" % shown(key), "quote the key")
                continue
            problem = _bound_problem(key, key_spec, "str")
            if problem:
                _schema_error(findings, "%s (key)" % item_path, problem[0], problem[1])
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
            close = difflib.get_close_matches(str(key)[:NAME_MAX], list(options), n=1)
            key_text = shown(key, NAME_MAX + 2)[1:-1] if isinstance(key, str) else shown(key)
            _schema_error(findings, "%s.%s" % (path, key_text) if path else key_text, "unknown key %s" % shown(key),
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


def size_problem(design, nodes=DESIGN_NODES, depth=DESIGN_DEPTH):
    """None when ``design`` has at most ``nodes`` values nested at most ``depth`` deep, else why not.

    Counts every value as often as it is reached, so a structure that shares one list many times
    (what YAML aliases give) counts at its expanded size, and stops counting at the bound.
    """
    count = 0
    stack = [(design, 1)]
    while stack:
        value, level = stack.pop()
        count += 1
        if count > nodes:
            return "the design holds more than %d values" % nodes
        if level > depth:
            return "the design is nested more than %d deep" % depth
        if isinstance(value, dict):
            stack.extend((v, level + 1) for v in value.values())
            count += len(value)  # the keys
        elif isinstance(value, (list, tuple)):
            stack.extend((v, level + 1) for v in value)
    return None


def normalize(design):
    """Apply the schema and the derived defaults; return ``(normalized design, schema findings)``."""
    findings = []
    if not isinstance(design, dict):
        _schema_error(findings, "design", "the design is %r, not a mapping" % (type(design).__name__,),
                      "give the design as a YAML mapping (see docs/design.md)")
        design = {}
    too_big = size_problem(design)
    if too_big:
        # only this finding: the design is not read further (nor are its required fields missed)
        _schema_error(findings, "design", too_big, "give a design of at most %d values, nested at most %d deep "
                      "(no YAML aliases)" % (DESIGN_NODES, DESIGN_DEPTH))
        design = {}
    d = _norm_dict(design, DESIGN_SCHEMA["options"], "", [] if too_big else findings)
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
        if pool.get("ha_restart_priority") is None and pool.get("shape"):
            pool["ha_restart_priority"] = DEFAULT_HA_RESTART_PRIORITY[pool["shape"]]
        if isinstance(pool.get("vm_class"), dict) and pool["vm_class"].get("name") is None and pool.get("name"):
            pool["vm_class"]["name"] = "gpu-%s" % pool["name"]
        node_pool = pool.get("node_pool")
        if isinstance(node_pool, dict):
            if node_pool.get("name") is None:
                node_pool["name"] = pool.get("name")
            if node_pool.get("vks_cluster") is None:
                node_pool["vks_cluster"] = only_vks
    _resolve_vcenters(d, findings)
    _ha_spare_errors(d, findings)
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
