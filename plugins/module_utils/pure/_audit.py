# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift audit of a GPU pool: the derived design against already-read live state (pure).

The module ``gpu_pool_audit`` reads each link once and hands plain data to the functions
here; nothing in this file does I/O, so every rule is unit-tested with hand-made states.

Live state, per link (every value is plain data):

``esxi``
    ``hosts``: host records as ``_gpu_inventory.GpuInventory.read`` returns them (``name``,
    ``cluster``, ``connection_state``, ``maintenance_mode``, ``gpu_count``, ``gpus``,
    ``graphics``, ``driver``, ``nvidia_module_options``, ``vgpu_profiles``, ``vgpu_vms``,
    ``errors``, ``reboot_pending``, ``maintenance_by_collection``,
    ``vms_powered_off_by_collection``, ``ssh_service``; each GPU of ``gpus`` with ``index``,
    ``model``, ``vgpu_mode`` and ``vms``: [{name, profiles}]); each GPU host is judged by its plan from
    ``_esxi.host_plan`` with the esxi_gpu_host role's inputs (:func:`esxi_role_inputs`), one
    rule per field of the plan (:data:`ESXI_RULE_BY_FIELD`), its MIG item from the design's
    ``mig_geometry`` by ``_esxi.mig_geometry_for`` and ``_esxi.mig_geometry_plan`` (:func:`mig_changes`);
    the vGPUs on each GPU against its mode (:func:`vgpu_mode_mismatches`); ``drs``: per cluster name
    ``{"enabled": bool, "overrides_enabled": bool, "overrides": {vm moid: {"behavior",
    "enabled"}}}``.
``vsphere``
    ``vm_classes``: ``{id: normal form of _vm_class.normalize}``; ``namespaces``: ``{name:
    normal form of _namespace.normalize}`` (a name absent from the dict does not exist).
``vks``
    ``clusters``: ``{name: {"namespace", "machine_deployments": {name: {"replicas", "vm_class",
    "labels", "taints", "lacks"}}}}`` (each pool as ``_cluster_class.read_pool`` reads it through its
    ClusterClass's variables; None where the class has no variable, the reason in ``lacks``) or the
    name absent when the Cluster does not exist.
``guest``
    ``nodes``: ``[{"name", "labels": {}, "taints": [{"key", "value", "effect"}],
    "capacity": {}}]``; ``namespaces``: names; ``namespace_labels``: ``{name: labels}``;
    ``resource_quotas``: ``{namespace: {quota name: hard dict}}``; ``secrets``: ``{namespace:
    [names]}`` (only the names asked for need be there); ``priority_classes``: ``{name: {"value",
    "preemptionPolicy", "description"}}``; ``cluster_policy``: ``{"exists", "spec"}``;
    ``device_plugin_config``: ``{"exists", "data": {key: parsed YAML}}``; ``dcgm_metrics_config``:
    ``{"exists", "data": {key: text}}``; ``kueue``: ``{"served",
    "resource_flavors": {name: spec}, "cluster_queues": {name: spec}, "local_queues": {namespace:
    {name: spec}}, "configuration": Kueue's parsed Configuration or None}``; ``culling``: ``{"exists", "schedule", "image", "env": {}}`` (the CronJob), or
    ``{"kubeflow": True, "exists", "env": {}}`` (Kubeflow's notebook controller's container). What the guest
    roles write is built by ``_k8s_objects`` from the role inputs derive() gives them.

A finding is a dict: ``rule``, ``severity`` (error | warning | info), ``link``, ``object``,
``message``, ``fix``. :data:`RULES` names every rule with its severity, link and one line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _namespace, _nvidia, _vm_class
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._pool_ready import LICENSE_METRIC, LICENSED, license_by_node

LINKS = ("esxi", "vsphere", "licensing", "vks", "guest")
SEVERITIES = ("error", "warning", "info")
GPU_TAINT_KEY = "nvidia.com/gpu"
PROFILE_LABEL = "nvidia.com/vgpu.profile"
POOL_LABEL = "gpupool.vcf/pool"
PINNED_BEHAVIORS = ("manual", "partiallyAutomated")

RULES = OrderedDict([
    # esxi
    ("cluster_missing", ("error", "esxi", "Every GPU cluster of the design exists in vCenter.")),
    ("gpu_hosts_short", ("warning", "esxi", "A cluster has at least the GPU hosts the design counts on.")),
    ("host_unreachable", ("warning", "esxi", "Every GPU host is connected and could be read.")),
    ("host_in_maintenance", ("warning", "esxi", "No GPU host is left in maintenance mode by an earlier run.")),
    ("host_in_maintenance_by_admin", ("info", "esxi", "A GPU host an administrator put in maintenance mode is "
                                                      "named (the roles leave it alone).")),
    ("host_reboot_pending", ("warning", "esxi", "No GPU host owes a reboot (staged driver or nvidia module "
                                                "options not running).")),
    ("gpu_vms_left_off", ("warning", "esxi", "No vGPU VM an earlier run powered off is left off.")),
    ("host_not_plannable", ("error", "esxi", "The design's settings can be planned on every GPU host.")),
    ("driver_mixed", ("error", "esxi", "Every GPU host of a cluster runs the same NVIDIA driver.")),
    ("driver_off_design", ("error", "esxi", "Every GPU host runs the driver version of the design.")),
    ("driver_not_loaded", ("error", "esxi", "Every GPU host offers vGPU profiles (its NVIDIA driver is loaded).")),
    ("graphics_not_shared_direct", ("error", "esxi", "Host default and every NVIDIA device have the design's "
                                                     "graphics type (Shared Direct).")),
    ("assignment_policy_off_design", ("warning", "esxi", "The shared passthrough assignment policy is the "
                                                         "design's.")),
    ("scheduler_off_design", ("error", "esxi", "The vGPU scheduler (RmPVMRL) is the design's.")),
    ("gpu_vgpu_mode_off_design", ("error", "esxi", "Every NVIDIA GPU not in MIG mode runs the design's vGPU mode "
                                                   "(graphics.vgpu_mode: same_size or mixed_size), where the "
                                                   "design sets one.")),
    ("gpu_mig_off_design", ("error", "esxi", "Every GPU runs the MIG mode the design's MIG geometry gives it "
                                             "(mig_geometry: the GPU indexes in MIG mode per host).")),
    ("gpu_vgpu_mode_mismatch", ("error", "esxi", "Every vGPU sits on a GPU of its kind: MIG-backed profiles on MIG "
                                                 "GPUs, time-sliced and full-card profiles on GPUs without MIG, one "
                                                 "size on a sameSize GPU.")),
    ("gpu_mig_not_read", ("info", "esxi", "Where the design gives a MIG geometry, the GPU hosts whose vSphere API "
                                          "reports no vGPU mode (before 8.0.3) are named: their MIG mode is not "
                                          "judged.")),
    ("host_ssh_running", ("warning", "esxi", "No GPU host is left with its SSH service (TSM-SSH) running.")),
    ("drs_overrides_disabled", ("warning", "esxi", "DRS and its per-VM overrides are on where GPU VMs are "
                                                   "pinned.")),
    ("gpu_vm_not_pinned", ("error", "esxi", "Every VM holding a vGPU has an enabled DRS override that keeps it "
                                            "from being moved automatically.")),
    ("gpu_vm_pin_behavior", ("warning", "esxi", "A GPU VM's DRS override has the design's behavior.")),
    # vsphere
    ("vm_class_missing", ("error", "vsphere", "Every pool's VM class exists.")),
    ("vm_class_profile_changed", ("error", "vsphere", "A VM class carries the vGPU profiles of its pool.")),
    ("vm_class_size_changed", ("warning", "vsphere", "A VM class has the design's vCPUs, memory and 100% memory "
                                                     "reservation.")),
    ("vm_class_description_changed", ("warning", "vsphere", "A VM class has the design's description.")),
    ("namespace_missing", ("error", "vsphere", "Every platform and tenant namespace exists.")),
    ("namespace_class_missing", ("error", "vsphere", "A namespace offers every VM class of its pools.")),
    ("namespace_class_extra", ("error", "vsphere", "A namespace offers no GPU VM class the design does not give "
                                                   "it (where the role purges them).")),
    ("namespace_storage_changed", ("error", "vsphere", "A namespace has the design's storage policies and their "
                                                       "limits.")),
    ("namespace_limits_changed", ("warning", "vsphere", "A namespace has the design's CPU, memory and storage "
                                                        "limits.")),
    ("namespace_access_changed", ("error", "vsphere", "A namespace grants the design's access entries (and only "
                                                      "them where the role purges access).")),
    ("namespace_description_changed", ("warning", "vsphere", "A namespace has the design's description.")),
    ("namespace_libraries_changed", ("warning", "vsphere", "A namespace has the content libraries the role "
                                                           "gives it.")),
    # vks
    ("vks_cluster_missing", ("error", "vks", "Every VKS cluster of the design exists on the Supervisor.")),
    ("node_pool_missing", ("error", "vks", "Every GPU pool has its node pool in its VKS cluster.")),
    ("node_pool_changed", ("warning", "vks", "A node pool has the design's replicas and VM class (the vmClass "
                                             "variable its ClusterClass defines).")),
    ("node_pool_labels_changed", ("error", "vks", "A node pool labels its nodes as the design says (the labels "
                                                  "variable of its ClusterClass).")),
    ("node_pool_taints_changed", ("error", "vks", "A node pool taints its nodes as the design says (the taints "
                                                  "variable of its ClusterClass).")),
    ("node_pool_class_lacks", ("error", "vks", "A node pool's ClusterClass has one variable for each of the node "
                                               "labels and taints the design gives the pool.")),
    # guest
    ("gpu_node_untainted", ("error", "guest", "Every GPU node carries the nvidia.com/gpu taint and its pool's "
                                              "taints.")),
    ("gpu_node_profile_label_missing", ("error", "guest", "Every GPU node of a pool carries the "
                                                          "nvidia.com/vgpu.profile label of the pool's profile.")),
    ("node_pool_no_nodes", ("warning", "guest", "A node pool with replicas has nodes in the guest cluster.")),
    ("guest_namespace_missing", ("error", "guest", "Every tenant namespace exists in the guest cluster.")),
    ("gpu_quota_missing", ("error", "guest", "Every tenant namespace has its GPU ResourceQuotas.")),
    ("gpu_quota_changed", ("warning", "guest", "A GPU ResourceQuota has the design's limits.")),
    ("priority_class_missing", ("error", "guest", "Every PriorityClass of the design exists.")),
    ("priority_class_changed", ("warning", "guest", "A PriorityClass has the design's value and preemption "
                                                    "policy (both immutable) and description.")),
    ("guest_namespace_labels_changed", ("warning", "guest", "A tenant namespace carries the labels the "
                                                            "gpu_scheduling_policy role sets (Kueue selects "
                                                            "training tenants by them).")),
    ("licensing_secret_missing", ("error", "guest", "The licensing Secret is in the GPU Operator namespace.")),
    ("cluster_policy_missing", ("error", "guest", "The GPU Operator's ClusterPolicy exists.")),
    ("cluster_policy_changed", ("error", "guest", "The ClusterPolicy has the driver (repository, image, version, "
                                                  "pull Secrets), licensing Secret and device plugin configuration "
                                                  "the gpu_operator role sets.")),
    ("mig_strategy_changed", ("error", "guest", "The ClusterPolicy's mig.strategy is the design's (the gpu_operator "
                                                "role changes a live one only with guest.allow_mig_strategy_change).")),
    ("guest_driver_missing", ("error", "guest", "The design names the vGPU guest driver of a vGPU guest cluster (the "
                                                "gpu_operator role refuses to install the operator without one).")),
    ("time_slicing_config_missing", ("error", "guest", "The device plugin ConfigMap of the time-sliced pools "
                                                       "exists.")),
    ("time_slicing_config_changed", ("error", "guest", "The device plugin ConfigMap holds the configurations the "
                                                       "gpu_operator role writes (MIG strategy, time-slicing "
                                                       "replicas per pool).")),
    ("dcgm_metrics_config_missing", ("warning", "guest", "The DCGM exporter metrics ConfigMap the gpu_operator "
                                                         "role writes exists.")),
    ("dcgm_metrics_config_changed", ("warning", "guest", "The DCGM exporter metrics ConfigMap lists the metrics "
                                                         "the gpu_operator role writes (profiling counters, "
                                                         "framebuffer, vGPU license status).")),
    ("kueue_missing", ("error", "guest", "The guest cluster serves Kueue where the design gang-schedules training.")),
    ("resource_flavor_missing", ("error", "guest", "Every gang-scheduled pool's Kueue ResourceFlavor exists.")),
    ("resource_flavor_changed", ("warning", "guest", "The ResourceFlavor has the pool's node labels and "
                                                     "tolerations.")),
    ("cluster_queue_missing", ("error", "guest", "Every gang-scheduled pool's Kueue ClusterQueue exists.")),
    ("cluster_queue_changed", ("error", "guest", "The ClusterQueue has the role's namespace selector, queueing "
                                                 "strategy, preemption and the pool's size as nominal quota.")),
    ("local_queue_missing", ("error", "guest", "Every tenant with quota on a gang-scheduled pool has its Kueue "
                                               "LocalQueue.")),
    ("local_queue_changed", ("error", "guest", "A LocalQueue points at the training ClusterQueue.")),
    ("kueue_config_changed", ("error", "guest", "Kueue's configuration has waitForPodsReady (the design's timeout, "
                                                "blockAdmission) where the design gang-schedules training.")),
    ("notebook_culling_missing", ("warning", "guest", "The notebook culling CronJob exists (without Kubeflow).")),
    ("notebook_culling_changed", ("warning", "guest", "The culling CronJob has the role's schedule, image and idle "
                                                      "time.")),
    # licensing: the DLS appliance, the client token, the GPU nodes' licenses and the leases
    ("dls_unreachable", ("error", "licensing", "The DLS appliance answers (login, service instance, license "
                                               "server, leases).")),
    ("dls_license_server_missing", ("error", "licensing", "The appliance's service instance has a license server "
                                                          "installed in the user's scope.")),
    ("leases_short", ("error", "licensing", "The appliance holds at least one lease per GPU node.")),
    ("client_token_missing", ("error", "licensing", "The client configuration token dls_client_token keeps "
                                                    "exists with its metadata.")),
    ("client_token_expired", ("error", "licensing", "The client configuration token has not expired.")),
    ("client_token_expiring", ("warning", "licensing", "The client configuration token is valid beyond the "
                                                       "renewal margin (renew_before_days).")),
    ("client_token_other_appliance", ("warning", "licensing", "The client configuration token was made for this "
                                                              "appliance (host and port).")),
    ("gpu_node_unlicensed", ("error", "licensing", "Every vGPU of every GPU node is licensed (the DCGM exporter's "
                                                   "vGPU license status is 1).")),
    ("gpu_node_license_unknown", ("warning", "licensing", "Every GPU node has license status series in "
                                                          "Prometheus.")),
    ("license_check_not_made", ("info", "licensing", "Without Prometheus the GPU nodes' licenses are not "
                                                     "checked, and the finding says so.")),
    # any link
    ("link_not_audited", ("info", None, "A link that was not audited says so.")),
])


def finding(rule, obj, message, fix, link=None, severity=None):
    sev, rule_link, _doc = RULES[rule]
    return OrderedDict([("rule", rule), ("severity", severity or sev), ("link", link or rule_link),
                        ("object", obj), ("message", message), ("fix", fix)])


def not_audited(link, reason, fix):
    return finding("link_not_audited", link, "link %s not audited: %s" % (link, reason), fix, link=link)


# ---------------------------------------------------------------------------------------
# esxi
# ---------------------------------------------------------------------------------------


# Each field of a host's plan (_esxi.HOST_PLAN) and the rule that reports it: the audit reports
# exactly what the esxi_gpu_host role would change, decided by the same function (_esxi.host_plan).
ESXI_RULE_BY_FIELD = OrderedDict([
    ("connection", "host_unreachable"),
    ("read", "host_unreachable"),
    ("graphics", "host_unreachable"),
    ("driver", "driver_off_design"),
    ("vgpu_profiles", "driver_not_loaded"),
    ("graphics.default_type", "graphics_not_shared_direct"),
    ("graphics.device_type", "graphics_not_shared_direct"),
    ("graphics.assignment_policy", "assignment_policy_off_design"),
    ("graphics.vgpu_mode", "gpu_vgpu_mode_off_design"),
    ("nvidia_module_options", "scheduler_off_design"),
    ("scheduler", "scheduler_off_design"),
    ("reboot", "host_reboot_pending"),
    ("maintenance_mode", "host_in_maintenance"),
    ("vms_powered_off", "gpu_vms_left_off"),
    ("mig_mode", "gpu_mig_off_design"),
    ("plan", "host_not_plannable"),
])
# fields of the plan the audit cannot see, and why
ESXI_FIELDS_NOT_AUDITED = {}
# the ESXi rules decided from more than one host's plan or outside it, and why
ESXI_RULES_BESIDES_THE_PLAN = {
    "cluster_missing": "the role's gpu_host_info read of the cluster fails",
    "gpu_hosts_short": "hardware: the role cannot add hosts",
    "driver_mixed": "the driver items of the hosts of one cluster, summed up",
    "host_in_maintenance_by_admin": "information only: the role leaves an administrator's maintenance mode alone",
    "drs_overrides_disabled": "the drs_gpu_pinning role",
    "gpu_vm_not_pinned": "the drs_gpu_pinning role",
    "gpu_vm_pin_behavior": "the drs_gpu_pinning role",
    "gpu_vgpu_mode_mismatch": "the read itself: a host refuses such a vGPU, so vCenter's view is inconsistent or "
                              "the GPU's mode changed behind its back",
    "gpu_mig_not_read": "information only: vSphere reports no vGPU mode there; the role reads MIG mode over SSH",
    "host_ssh_running": "the esxi_gpu_host role starts SSH only while it sets MIG and stops it after; one left "
                        "running was started by hand or by a run that failed",
}


def role_inputs(derived, role):
    """The variables derive() gives a role (``derived["roles"][role]``): what site.yml passes it."""
    return (derived.get("roles") or {}).get(role) or {}


def esxi_role_inputs(want):
    """:func:`_esxi.host_plan`'s arguments from the esxi_gpu_host role's variables for one
    cluster (``derived["roles"]["esxi_gpu_host"][cluster]``), as the role passes them on."""
    return dict(target=want["esxi_gpu_host_driver_version"],
                graphics_type=want.get("esxi_gpu_host_graphics_type") or None,
                assignment_policy=want.get("esxi_gpu_host_assignment_policy") or None,
                vgpu_mode=want.get("esxi_gpu_host_vgpu_mode") or None,
                scheduler=want.get("esxi_gpu_host_scheduler") or None,
                allow_downgrade=bool(want.get("esxi_gpu_host_allow_downgrade", False)))


def host_findings(h, want, mig=None):
    """The findings of one GPU host: its plan from _esxi.host_plan (with its MIG item, ``mig``: the host's
    entry of :func:`mig_changes`), one finding per rule."""
    items = _esxi.host_plan(h, driver=True, **esxi_role_inputs(want))
    if mig is not None:
        if mig.get("refused"):
            items.append(_esxi.plan_item("plan", None, None, "refused", mig["refused"]))
        else:
            items.append(_esxi.plan_item("mig_mode", mig["before"], mig["after"], "set", mig["reason"]))
    by_rule = OrderedDict()
    for item in items:
        rule = ESXI_RULE_BY_FIELD.get(item["field"])
        if rule is not None:
            by_rule.setdefault(rule, []).append(item)
    out = []
    for rule, group in by_rule.items():
        message, fix = _ESXI_TEXT[rule](h, want, group)
        out.append(finding(rule, "host %s" % h["name"], message, fix))
    if h.get("maintenance_mode") and not any(i["field"] == "maintenance_mode" for i in items):
        out.append(finding(
            "host_in_maintenance_by_admin", "host %s" % h["name"],
            "host %s is in maintenance mode (not by this collection): its GPUs serve no VM" % h["name"],
            "finish the work on the host and exit maintenance mode; the roles leave it alone"))
    return out


def _reasons_text(group):
    return "; ".join(i["reason"] for i in group)


def _text_unreachable(h, want, group):
    return ("host %s could not be read fully (%s)" % (h["name"], _reasons_text(group)),
            "reconnect the host in vCenter and run the audit again")


def _text_driver(h, want, group):
    item = group[0]
    message = "host %s runs NVIDIA driver %s, the design pins %s" % (
        h["name"], item["live"] or "(none installed)", want["esxi_gpu_host_driver_version"])
    if item["action"] == "refused":
        message += " (%s)" % item["reason"]
    if want.get("esxi_gpu_host_lifecycle") == "vlcm":
        fix = "remediate cluster %s against its vLCM image with %s (esxi_gpu_host role, vlcm_component)" % (
            h.get("cluster"), want["esxi_gpu_host_driver_version"])
    else:
        fix = "install %s on the host (esxi_gpu_host role, esxi_host_driver)" % want["esxi_gpu_host_driver_version"]
    return message, fix


def _text_not_loaded(h, want, group):
    return ("host %s offers no vGPU profile: its NVIDIA driver is not loaded" % h["name"],
            "reboot the host (esxi_gpu_host role, esxi_gpu_config reboot=true)")


def _text_graphics(h, want, group):
    graphics = want.get("esxi_gpu_host_graphics_type")
    return ("host %s graphics are not %s: %s" % (h["name"], graphics, _reasons_text(group)),
            "set the host default and every NVIDIA device to %s (esxi_gpu_host role, esxi_gpu_config), then "
            "restart the X.Org service or reboot the host" % graphics)


def _text_policy(h, want, group):
    return ("host %s places vGPUs by %s, the design says %s" % (h["name"], group[0]["live"], group[0]["wanted"]),
            "set the assignment policy to %s (esxi_gpu_host role, esxi_gpu_config)" % group[0]["wanted"])


def _text_vgpu_mode(h, want, group):
    wanted = want.get("esxi_gpu_host_vgpu_mode")
    gpus = ", ".join("%s (%s)" % (i.get("gpu"), i["live"]) for i in group)
    return ("host %s has GPUs off the design's vGPU mode %s: %s" % (h["name"], wanted, gpus),
            "set vGPU mode %s on them (esxi_gpu_host role, esxi_gpu_config vgpu_mode=%s) while no powered-on VM "
            "holds a vGPU on them: power the host's vGPU VMs off first, or roll the host through maintenance "
            "mode" % (wanted, wanted))


def _scheduler_words(options):
    """The all-GPU scheduler of an nvidia module option string, decoded by _nvidia."""
    try:
        every = _nvidia.get_scheduler(options)["all"]
    except _nvidia.NvidiaError as exc:
        return "unreadable (%s)" % exc
    every = every if every is not None else _nvidia.decode_scheduler(None)
    return "%s (RmPVMRL %s)" % (every.policy, every.hex)


def _design_rmpvmrl(scheduler):
    """The RmPVMRL value the role writes for the design's scheduler, by the _nvidia codec."""
    try:
        return _nvidia.format_rmpvmrl(_nvidia.encode_scheduler(scheduler.get("policy"), scheduler.get("time_slice_ms")))
    except (_nvidia.NvidiaError, TypeError, ValueError):
        return "?"


def _text_scheduler(h, want, group):
    item = group[0]
    scheduler = want.get("esxi_gpu_host_scheduler") or {}
    wanted, rmpvmrl = scheduler.get("policy"), _design_rmpvmrl(scheduler)
    if item["field"] == "nvidia_module_options" and item["action"] == "set":
        message = "host %s vGPU scheduler is %s, the design says %s (RmPVMRL %s)" % (
            h["name"], _scheduler_words(item["live"]), wanted, rmpvmrl)
    else:
        message = "host %s vGPU scheduler cannot be set to %s: %s" % (h["name"], wanted, _reasons_text(group))
    return message, ("set the nvidia module option NVreg_RegistryDwords=RmPVMRL=%s (esxi_gpu_host role, "
                     "esxi_gpu_config) and reboot the host" % rmpvmrl)


def _text_reboot(h, want, group):
    return ("host %s owes a reboot: %s" % (h["name"], _reasons_text(group)),
            "reboot the host (esxi_gpu_host role, esxi_gpu_config reboot=true)")


def _text_maintenance(h, want, group):
    return ("host %s was %s: its GPUs serve no VM" % (h["name"], group[0]["reason"]),
            "rerun the esxi_gpu_host role: it finishes the host's turn and exits maintenance mode")


def _text_vms_off(h, want, group):
    return ("host %s: %s" % (h["name"], group[0]["reason"]),
            "rerun the esxi_gpu_host role: it powers them on")


def _text_mig(h, want, group):
    return ("host %s: %s" % (h["name"], group[0]["reason"]),
            "rerun the esxi_gpu_host role: it sets MIG GPU by GPU from the design's geometry (nvidia-smi -i <index> "
            "-mig 1|0, SSH started only while needed), then resets the GPUs or reboots the host")


def _text_not_plannable(h, want, group):
    return ("the design's settings cannot be planned on host %s: %s" % (h["name"], _reasons_text(group)),
            "fix the host's nvidia module options or the design, then rerun the esxi_gpu_host role")


_ESXI_TEXT = {
    "host_unreachable": _text_unreachable,
    "driver_off_design": _text_driver,
    "driver_not_loaded": _text_not_loaded,
    "graphics_not_shared_direct": _text_graphics,
    "assignment_policy_off_design": _text_policy,
    "scheduler_off_design": _text_scheduler,
    "gpu_vgpu_mode_off_design": _text_vgpu_mode,
    "host_reboot_pending": _text_reboot,
    "host_in_maintenance": _text_maintenance,
    "gpu_vms_left_off": _text_vms_off,
    "host_not_plannable": _text_not_plannable,
    "gpu_mig_off_design": _text_mig,
}


# ---------------------------------------------------------------------------------------
# per GPU: MIG mode against the design's geometry, vGPUs on GPUs of their kind, SSH
# ---------------------------------------------------------------------------------------

VGPU_MODE_MIG = "multiInstanceGpu"


def design_mig_geometry(derived, cluster, want):
    """(found, geometry) of a cluster: the esxi_gpu_host role's ``esxi_gpu_host_mig_geometry``, else the
    ``mig_geometry`` derive() gives the ESXi cluster; found is False when the design derives none."""
    if "esxi_gpu_host_mig_geometry" in (want or {}):
        return True, want["esxi_gpu_host_mig_geometry"]
    summary = ((derived.get("esxi") or {}).get("clusters") or {}).get(cluster) or {}
    if "mig_geometry" in summary:
        return True, summary["mig_geometry"]
    return False, None


def _mig_capable(model):
    try:
        return _nvidia.gpu_model(model).mig_capable
    except _nvidia.NvidiaError:
        return False


def mig_rows(host):
    """The host's GPUs as :func:`_esxi.mig_geometry_plan` takes them, from gpu_host_info's per-GPU view:
    current = pending = the GPU's vGPU mode is multiInstanceGpu (vSphere shows no pending mode), supported
    = the catalog model has MIG. None when a GPU's vGPU mode is not reported (before API 8.0.3)."""
    rows = []
    for g in host.get("gpus") or []:
        if g.get("vgpu_mode") is None or g.get("index") is None:
            return None
        on = g["vgpu_mode"] == VGPU_MODE_MIG
        rows.append(dict(index=g["index"], pci_id=g.get("pci_id"), current=on, pending=on,
                         supported=_mig_capable(g.get("model"))))
    return rows or None


def _indexes(values):
    return ", ".join(str(i) for i in values)


def mig_changes(geometry, hosts):
    """{host name: {"before", "after", "reason"}} of the GPU hosts whose GPUs' MIG mode is off ``geometry``
    (``before``/``after``: {index: enabled|disabled} of the GPUs to change), judged by
    :func:`_esxi.mig_geometry_for` over the GPU hosts in name order and :func:`_esxi.mig_geometry_plan`;
    {"refused": reason} for a host the geometry cannot be planned on. Hosts not connected, or whose vGPU
    mode vSphere does not report, are left out. The geometry itself naming hosts the cluster lacks raises
    :class:`_esxi.EsxiError`."""
    gpu_hosts = [h for h in hosts or [] if h.get("gpu_count")]
    layout = _esxi.mig_geometry_for(geometry, [h["name"] for h in gpu_hosts])
    out = OrderedDict()
    for h in sorted(gpu_hosts, key=lambda h: h["name"]):
        rows = mig_rows(h) if h.get("connection_state") == "connected" else None
        if rows is None:
            continue
        try:
            plan = _esxi.mig_geometry_plan(rows, layout[h["name"]])
        except _esxi.EsxiError as exc:
            out[h["name"]] = dict(refused="the design's MIG geometry: %s" % exc)
            continue
        if not (plan["enable"] or plan["disable"]):
            continue
        changed = sorted(plan["enable"] + plan["disable"])
        parts = []
        if plan["enable"]:
            parts.append("GPU %s run%s without MIG, the design's MIG geometry puts %s in MIG mode" % (
                _indexes(plan["enable"]), "s" if len(plan["enable"]) == 1 else "",
                "it" if len(plan["enable"]) == 1 else "them"))
        if plan["disable"]:
            parts.append("GPU %s run%s in MIG mode, the design's MIG geometry has %s without" % (
                _indexes(plan["disable"]), "s" if len(plan["disable"]) == 1 else "",
                "it" if len(plan["disable"]) == 1 else "them"))
        out[h["name"]] = dict(before=dict((i, _esxi.mig_word(plan["before"][i])) for i in changed),
                              after=dict((i, _esxi.mig_word(plan["after"][i])) for i in changed),
                              reason="; ".join(parts) + " (MIG GPUs wanted: %s)" % (
                                  _indexes(layout[h["name"]]) or "none"))
    return out


def _profile_kind(profile):
    """(MIG-backed, framebuffer GB) of a vGPU profile, None for a name the catalog cannot parse."""
    try:
        parsed = _nvidia.parse_profile(profile)
    except _nvidia.NvidiaError:
        return None
    return parsed.mig_backed, parsed.framebuffer_gb


def vgpu_mode_mismatches(host):
    """[(gpu, vm name, profile, why)] of the vGPUs gpu_host_info places on a GPU of the wrong kind: a
    MIG-backed profile on a GPU without MIG, a time-sliced or full-card profile on a MIG GPU, vGPUs of
    several sizes on a sameSize GPU. GPUs whose mode or VMs are unknown, and hosts not connected (what
    vCenter keeps of them is stale), are left out."""
    out = []
    if host.get("connection_state") != "connected":
        return out
    for g in host.get("gpus") or []:
        mode = g.get("vgpu_mode")
        if mode is None or g.get("vms") is None:
            continue
        sizes = OrderedDict()
        for vm in g["vms"]:
            for profile in vm.get("profiles") or []:
                kind = _profile_kind(profile)
                if kind is None:
                    continue
                mig_backed, fb = kind
                if mig_backed and mode != VGPU_MODE_MIG:
                    out.append((g, vm["name"], profile, "a MIG-backed vGPU on a GPU without MIG (vGPU mode %s)" % mode))
                elif not mig_backed and mode == VGPU_MODE_MIG:
                    out.append((g, vm["name"], profile, "a time-sliced vGPU on a GPU in MIG mode"))
                elif not mig_backed:
                    sizes.setdefault(fb, []).append((vm["name"], profile))
        if mode == "sameSize" and len(sizes) > 1:
            held = "; ".join("%s (%s)" % (", ".join(sorted(set(p for _n, p in v))), ", ".join(sorted(set(n for n, _p in v))))
                             for v in sizes.values())
            out.append((g, None, None, "vGPUs of %d sizes on a sameSize GPU: %s" % (len(sizes), held)))
    return out


def _vgpu_mode_findings(out, h):
    for g, vm, profile, why in vgpu_mode_mismatches(h):
        where = "GPU %s (%s) of host %s" % (g.get("index"), g.get("pci_id"), h["name"])
        what = "VM %s holds %s: %s" % (vm, profile, why) if vm else why
        out.append(finding(
            "gpu_vgpu_mode_mismatch", "host %s gpu %s" % (h["name"], g.get("index")),
            "%s: %s. A host refuses such a vGPU, so vCenter's view is inconsistent or the GPU's mode changed "
            "behind its back" % (where, what),
            "read the GPU's mode on the host (nvidia-smi -i %s --query-gpu=mig.mode.current,mig.mode.pending "
            "--format=csv) and compare with vCenter; set the mode back with the esxi_gpu_host role (host in "
            "maintenance mode) or power the VM off and restart it on a GPU of its kind" % g.get("index")))


def _mig_not_read(out, name, gpu_hosts):
    """One info finding naming the connected GPU hosts whose per-GPU view has no vGPU mode (the key there,
    its value null: the API does not report it)."""
    hosts = sorted(h["name"] for h in gpu_hosts if h.get("connection_state") == "connected"
                   and any("vgpu_mode" in g and g["vgpu_mode"] is None for g in h.get("gpus") or []))
    if hosts:
        out.append(finding(
            "gpu_mig_not_read", "cluster %s" % name,
            "the MIG mode of the GPUs of %s is not judged against the design's MIG geometry: their vSphere API "
            "reports no vGPU mode (graphicsInfo.vgpuMode, API 8.0.3)" % ", ".join(hosts),
            "upgrade the hosts and vCenter to vSphere 8.0 Update 3 or later, or check MIG mode on the hosts "
            "(nvidia-smi --query-gpu=index,mig.mode.current --format=csv; the esxi_gpu_host role in check mode "
            "reads it over SSH)"))


def _ssh_findings(out, name, gpu_hosts):
    running = sorted(h["name"] for h in gpu_hosts if h.get("ssh_service") == "running")
    if not running:
        return
    out.append(finding(
        "host_ssh_running", "cluster %s" % name,
        "GPU host(s) of cluster %s left with SSH (TSM-SSH) running: %s; security baselines keep it stopped"
        % (name, ", ".join(running)),
        "stop the SSH service on them (vSphere Client: host > Configure > Services > SSH > Stop, or "
        "HostServiceSystem.StopService TSM-SSH); the esxi_gpu_host role starts it only while it sets MIG"))


def _driver_key(full):
    try:
        return _esxi.parse_driver_version(full).text if full else "none"
    except _esxi.EsxiError:
        return full


def audit_esxi(derived, hosts, drs=None):
    """Findings of the ESXi link: each GPU host's plan (the esxi_gpu_host role's comparator),
    drivers mixed in a cluster, hosts short, DRS pinning."""
    out = []
    drs = drs or {}
    # the esxi link's summary (how many hosts the design counts on); the expectations are the roles' inputs
    clusters = (derived.get("esxi") or {}).get("clusters") or {}
    pinning = dict((p["name"], p["behavior"])
                   for p in role_inputs(derived, "drs_gpu_pinning").get("drs_gpu_pinning_clusters") or [])
    by_cluster = {}
    for h in hosts or []:
        by_cluster.setdefault(h.get("cluster"), []).append(h)
    for name, want in role_inputs(derived, "esxi_gpu_host").items():
        members = sorted(by_cluster.get(name, []), key=lambda h: h["name"])
        if not members:
            out.append(finding("cluster_missing", "cluster %s" % name, "cluster %s has no hosts in vCenter" % name,
                               "create the cluster and add its GPU hosts, or fix the name in the design"))
            continue
        gpu_hosts = [h for h in members if h.get("gpu_count")]
        counted = (clusters.get(name) or {}).get("hosts") or 0
        if len(gpu_hosts) < counted:
            out.append(finding(
                "gpu_hosts_short", "cluster %s" % name,
                "%d GPU host(s), the design counts on %d" % (len(gpu_hosts), counted),
                "add GPU hosts to the cluster or lower clusters.%s.hosts in the design" % name))
        found, geometry = design_mig_geometry(derived, name, want)
        mig = {}
        if found:
            try:
                mig = mig_changes(geometry, members)
            except _esxi.EsxiError as exc:
                out.append(finding("host_not_plannable", "cluster %s" % name,
                                   "the design's MIG geometry cannot be planned on cluster %s: %s" % (name, exc),
                                   "fix mig_geometry in the design (the cluster's GPU hosts in name order), then "
                                   "rerun the esxi_gpu_host role"))
            _mig_not_read(out, name, gpu_hosts)
        versions = OrderedDict()
        for h in gpu_hosts:
            out.extend(host_findings(h, want, mig.get(h["name"])))
            _vgpu_mode_findings(out, h)
            if "driver" in h and h.get("connection_state") == "connected" and not h.get("errors"):
                versions.setdefault(_driver_key((h.get("driver") or {}).get("full_version")), []).append(h["name"])
        if len(versions) > 1:
            listing = "; ".join("%s on %s" % (v, ", ".join(names)) for v, names in versions.items())
            out.append(finding(
                "driver_mixed", "cluster %s" % name,
                "GPU hosts of cluster %s run different NVIDIA drivers: %s" % (name, listing),
                "bring every GPU host to %s, one host at a time (esxi_gpu_host role)"
                % want["esxi_gpu_host_driver_version"]))
        _ssh_findings(out, name, gpu_hosts)
        if name in pinning:
            _cluster_pinning(out, name, gpu_hosts, drs.get(name), pinning[name])
    return out


def _cluster_pinning(out, name, gpu_hosts, drs, behavior):
    if drs is None:
        return
    if drs.get("enabled") is False or drs.get("overrides_enabled") is False:
        out.append(finding(
            "drs_overrides_disabled", "cluster %s" % name,
            "DRS or its per-VM overrides are disabled on cluster %s: the overrides of GPU VMs do not apply" % name,
            "enable DRS and VM overrides on the cluster"))
    overrides = drs.get("overrides") or {}
    for h in gpu_hosts:
        for vm in h.get("vgpu_vms") or []:
            have = overrides.get(vm.get("moid"))
            obj = "vm %s" % vm["name"]
            if have is None or have.get("enabled") is False or have.get("behavior") not in PINNED_BEHAVIORS:
                state = "no DRS override" if have is None else (
                    "a disabled DRS override" if have.get("enabled") is False else
                    "a %s DRS override" % have.get("behavior"))
                out.append(finding(
                    "gpu_vm_not_pinned", obj,
                    "VM %s holds a vGPU (%s) on host %s and has %s: DRS may try to move it" % (
                        vm["name"], ", ".join(vm.get("vgpu_profiles") or []), h["name"], state),
                    "pin it: drs_gpu_pinning cluster=%s behavior=%s" % (name, behavior)))
            elif have.get("behavior") != behavior:
                out.append(finding(
                    "gpu_vm_pin_behavior", obj,
                    "VM %s is pinned %s, the design says %s" % (vm["name"], have.get("behavior"), behavior),
                    "drs_gpu_pinning cluster=%s behavior=%s" % (name, behavior)))


# ---------------------------------------------------------------------------------------
# vsphere
# ---------------------------------------------------------------------------------------


# Each field the vm_class and supervisor_namespace modules compare, and the rule that reports it:
# the audit plans each object with the modules' comparators (_vm_class / _namespace merge and differs)
# and the supervisor_gpu_tenancy role's inputs.
VM_CLASS_RULE_BY_FIELD = OrderedDict([
    ("cpu_count", "vm_class_size_changed"),
    ("memory_mb", "vm_class_size_changed"),
    ("cpu_reservation", "vm_class_size_changed"),
    ("memory_reservation", "vm_class_size_changed"),
    ("description", "vm_class_description_changed"),
    ("vgpu_profiles", "vm_class_profile_changed"),
])
NAMESPACE_RULE_BY_FIELD = OrderedDict([
    ("description", "namespace_description_changed"),
    ("vm_classes", "namespace_class_missing"),  # namespace_class_extra for the classes the plan removes
    ("content_libraries", "namespace_libraries_changed"),
    ("storage_policies", "namespace_storage_changed"),
    ("limits", "namespace_limits_changed"),
    ("access", "namespace_access_changed"),
])
_VM_CLASS_LABELS = dict(cpu_count="vCPUs", memory_mb="memory MB", cpu_reservation="CPU reservation %",
                        memory_reservation="memory reservation %")
# the role's options that are no fields of the object
_VM_CLASS_OPTIONS = ("name", "cluster", "api_form", "state")
_NAMESPACE_PURGES = ("purge_lists", "purge_access", "purge_gpu_vm_classes")


def _desired_class(want):
    """One class entry of the supervisor_gpu_tenancy role's inputs as vm_class takes it (_vm_class.desired)."""
    params = dict((k, v) for k, v in want.items() if k in _vm_class.FIELDS)
    params["name"] = want["name"]
    return _vm_class.desired(params)


def vm_class_plan(want, have):
    """(after, changed fields) of one VM class of derive()'s ``vsphere.vm_classes``, as
    vm_class plans it with the options supervisor_gpu_tenancy passes (None: missing)."""
    after = _vm_class.merge(have, _desired_class(want))
    return after, _vm_class.differs(have, after)


def namespace_plan(want, have, storage_policies=None, gpu_classes=()):
    """(after, changed fields) of one namespace of derive()'s ``vsphere.namespaces``, as
    supervisor_namespace plans it with the options supervisor_gpu_tenancy passes (purge options
    included). ``storage_policies``: {id: name} (None: storage policies not judged);
    ``gpu_classes``: ids of the VM classes with a vGPU (purged with ``purge_gpu_vm_classes``)."""
    options = dict((k, v) for k, v in want.items() if k not in _NAMESPACE_PURGES)
    after = _namespace.merge(have, _namespace.wanted(options, storage_policies), purge_lists=bool(want.get("purge_lists")),
                             purge_access=bool(want.get("purge_access")),
                             purge_vm_classes=gpu_classes if want.get("purge_gpu_vm_classes") else None)
    return after, _namespace.differs(have, after)


def _words(value):
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_words(v) for v in value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _words(v)) for k, v in sorted(value.items()))
    return "none" if value is None else str(value)


def _access_words(entries):
    return ", ".join("%s %s@%s %s" % (a["type"], a["subject"], a["domain"], a["role"]) for a in entries) or "none"


def _vm_class_findings(want, have, name, pool=None):
    obj = "vm_class %s" % name
    try:
        after, fields = vm_class_plan(want, have)
    except _vm_class.VmClassError as exc:
        return [finding("vm_class_profile_changed", obj, "VM class %s cannot be planned: %s" % (name, exc),
                        "fix the pool's VM class in the design")]
    out = []
    if "vgpu_profiles" in fields:
        out.append(finding(
            "vm_class_profile_changed", obj,
            "VM class %s has vGPU profiles [%s], pool %s needs [%s]" % (
                name, ", ".join(sorted(have.get("vgpu_profiles") or [])), pool,
                ", ".join(after["vgpu_profiles"])),
            "set its profiles back (vm_class, or the supervisor_gpu_tenancy role); node VMs created since "
            "run the wrong profile and must be recreated"))
    size = ["%s %s (design %s)" % (_VM_CLASS_LABELS[k], have.get(k), after[k]) for k in fields if k in _VM_CLASS_LABELS]
    if size:
        out.append(finding("vm_class_size_changed", obj, "VM class %s: %s" % (name, ", ".join(size)),
                           "set the VM class back to the design (vm_class, or the supervisor_gpu_tenancy role)"))
    if "description" in fields:
        out.append(finding("vm_class_description_changed", obj, "VM class %s is described %r, the design says %r" % (
            name, have.get("description"), after["description"]), "set it back (vm_class, or the "
                                                                  "supervisor_gpu_tenancy role)"))
    return out


def _namespace_findings(want, have, storage_policies, gpu_classes):
    name = want["name"]
    obj = "namespace %s" % name
    try:
        after, fields = namespace_plan(want, have, storage_policies, gpu_classes)
    except _namespace.NamespaceError as exc:
        return [finding("namespace_storage_changed" if "storage policy" in str(exc) else "namespace_access_changed",
                        obj, "namespace %s cannot be planned: %s" % (name, exc),
                        "fix the namespace in the design or create what it names in vCenter")]
    names = storage_policies or {}
    fix = "set it back (supervisor_namespace, or the supervisor_gpu_tenancy role)"
    out = []
    for field in fields:
        live, wanted = have.get(field), after[field]
        if field == "vm_classes":
            missing = [c for c in wanted if c not in live]
            extra = [c for c in live if c not in wanted]
            if missing:
                out.append(finding("namespace_class_missing", obj, "namespace %s does not offer VM class(es) %s" % (
                    name, ", ".join(missing)), "add them to the namespace (supervisor_namespace vm_classes, or the "
                                               "supervisor_gpu_tenancy role)"))
            if extra:
                out.append(finding("namespace_class_extra", obj, "namespace %s offers GPU VM class(es) %s that the "
                                   "design does not give it" % (name, ", ".join(extra)),
                                   "remove them from the namespace (the supervisor_gpu_tenancy role)"))
        elif field == "storage_policies":
            out.append(finding("namespace_storage_changed", obj, "namespace %s has storage policies %s, the design "
                               "says %s (limit MiB)" % (name, _words(dict((names.get(k, k), v) for k, v in live.items())),
                                                        _words(dict((names.get(k, k), v) for k, v in wanted.items()))),
                               fix))
        elif field == "access":
            out.append(finding("namespace_access_changed", obj, "namespace %s grants %s; after the role: %s" % (
                name, _access_words(live), _access_words(wanted)), fix))
        else:
            out.append(finding(NAMESPACE_RULE_BY_FIELD[field], obj, "namespace %s %s is %s, the design says %s" % (
                name, field.replace("_", " "), _words(live), _words(wanted)), fix))
    return out


def class_names(tenancy, vm_classes):
    """({design name: the class it is used under}, {design name: [superseded classes]}) of the
    supervisor_gpu_tenancy role's inputs ``tenancy`` against the live classes ``vm_classes`` ({id:
    normal form}). Without class revisions every class is used under its design name; with them the
    name is resolved as vm_class resolves it (the base name or ``<base>-r<hex>`` of the design's
    shape, _vm_class.resolve) and the other classes of the family are superseded."""
    names, superseded = {}, {}
    revisions = bool(tenancy.get("supervisor_gpu_tenancy_class_revisions"))
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        if not revisions:
            names[base], superseded[base] = base, []
            continue
        try:
            names[base], superseded[base] = _vm_class.resolve(base, _desired_class(want), vm_classes or {})
        except _vm_class.VmClassError:  # reported by the class's own findings
            names[base], superseded[base] = base, []
    return names, superseded


def designed_class_names(tenancy):
    """{design name: the names a node pool may use for it} when the live classes are not read: with
    class revisions the base name and the revision of the design's shape, else the design name."""
    out = {}
    revisions = bool(tenancy.get("supervisor_gpu_tenancy_class_revisions"))
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        try:
            out[base] = [base, _vm_class.revision_name(base, _desired_class(want))] if revisions else [base]
        except _vm_class.VmClassError:
            out[base] = [base]
    return out


def _superseded_finding(want, name, old, vm_classes, pool):
    """The pool's class family has no class of the design's shape: the rollout to ``name`` is due."""
    have = vm_classes[old[0]]
    cpu, memory, profiles = _vm_class.shape(have)
    rule = "vm_class_profile_changed" if profiles != _vm_class.shape(want)[2] else "vm_class_size_changed"
    return finding(rule, "vm_class %s" % want["name"],
                   "VM class %s of pool %s has %s vCPUs, %s MB, vGPU [%s]; the design's shape is the class %s, "
                   "which does not exist yet (supervisor.vm_class_revisions)" % (
                       ", ".join(old), pool, cpu, memory, ", ".join(profiles), name),
                   "run site.yml: it creates %s, the namespaces get it, the node pools roll to it, and %s is "
                   "deleted once no node uses it" % (name, ", ".join(old)))


def audit_vsphere(derived, vm_classes, namespaces, storage_policies=None):
    """Findings of the vSphere link: VM classes and namespaces, each planned by its module's
    comparator with the supervisor_gpu_tenancy role's inputs.

    ``storage_policies``: {policy id: name} (None: the namespaces' storage policies are not judged).
    With class revisions each class is judged under the name vm_class resolves (class_names).
    """
    out = []
    tenancy = role_inputs(derived, "supervisor_gpu_tenancy")
    # the vSphere link's summary names each object's pool and kind, for the messages
    vs = derived.get("vsphere") or {}
    pool_of = dict((c["name"], c.get("pool")) for c in vs.get("vm_classes") or [])
    kind_of = dict((n["name"], n.get("kind")) for n in vs.get("namespaces") or [])
    vm_classes = vm_classes or {}
    namespaces = namespaces or {}
    names, superseded = class_names(tenancy, vm_classes)
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        name = names.get(base, base)
        have = vm_classes.get(name)
        old = [n for n in superseded.get(base) or [] if n in vm_classes]
        if have is None and old:
            out.append(_superseded_finding(want, name, old, vm_classes, pool_of.get(base)))
            continue
        if have is None:
            out.append(finding("vm_class_missing", "vm_class %s" % name,
                               "VM class %s of pool %s does not exist" % (name, pool_of.get(base)),
                               "create it (vm_class, or the supervisor_gpu_tenancy role)"))
            continue
        out.extend(_vm_class_findings(dict(want, name=name), have, name, pool_of.get(base)))
    # a superseded class stays in the namespaces while nodes use it: not a class the design lacks
    kept = set(n for olds in superseded.values() for n in olds)
    gpu_classes = [c for c in _vm_class.with_vgpu(vm_classes) if c not in kept]
    for want in tenancy.get("supervisor_gpu_tenancy_namespaces") or []:
        have = namespaces.get(want["name"])
        if have is None:
            out.append(finding("namespace_missing", "namespace %s" % want["name"],
                               "%s namespace %s does not exist" % (kind_of.get(want["name"]) or "", want["name"]),
                               "create it (supervisor_namespace, or the supervisor_gpu_tenancy role)"))
            continue
        if want.get("vm_classes") is not None:
            want = dict(want, vm_classes=[names.get(c, c) for c in want["vm_classes"]])
        out.extend(_namespace_findings(want, have, storage_policies, gpu_classes))
    return out


# ---------------------------------------------------------------------------------------
# vks (Supervisor)
# ---------------------------------------------------------------------------------------


def _vks_expected(derived):
    """[(cluster, namespace, [pool options])] as the vks_gpu_node_pools role passes them to
    vks_node_pool, from the role inputs derive() gives it (one entry per VKS cluster)."""
    out = []
    for entry in (derived.get("roles") or {}).get("vks_gpu_node_pools") or []:
        inputs = _objects.role_inputs("vks_gpu_node_pools", entry)
        out.append((entry["vks_gpu_node_pools_cluster_name"], entry.get("vks_gpu_node_pools_namespace"),
                    _objects.node_pools(inputs)))
    return out


def _taint_set(taints):
    return sorted(_taint_text(t) for t in taints or [])


def audit_vks(derived, clusters, vm_classes=None):
    """Findings of the VKS link: each cluster and its node pools (MachineDeployments).

    A node pool's fields are read through the variables of its Cluster's ClusterClass (the same
    plan vks_node_pool writes by); a field read as None is not judged. With class revisions a pool's
    class is the one vm_class resolves against ``vm_classes`` (the live classes, {id: normal form});
    without them read, the design's name or the revision of the design's shape."""
    out = []
    clusters = clusters or {}
    tenancy = role_inputs(derived, "supervisor_gpu_tenancy")
    if vm_classes is not None:
        allowed = dict((k, [v]) for k, v in class_names(tenancy, vm_classes)[0].items())
    else:
        allowed = designed_class_names(tenancy)
    for name, namespace, pools in _vks_expected(derived):
        have = clusters.get(name)
        if have is None:
            out.append(finding("vks_cluster_missing", "vks_cluster %s" % name,
                               "VKS cluster %s is not in namespace %s" % (name, namespace),
                               "create the cluster, or fix vks_clusters in the design"))
            continue
        mds = have.get("machine_deployments") or {}
        for pool in pools:
            obj = "node_pool %s/%s" % (name, pool["name"])
            md = mds.get(pool["name"])
            if md is None:
                out.append(finding("node_pool_missing", obj,
                                   "VKS cluster %s has no node pool %s" % (name, pool["name"]),
                                   "add it (vks_node_pool, or the vks_gpu_node_pools role)"))
                continue
            diffs = []
            if md.get("replicas") is not None and pool.get("replicas") is not None and md["replicas"] != pool["replicas"]:
                diffs.append("replicas %s (design %s)" % (md["replicas"], pool.get("replicas")))
            if pool.get("vm_class") is not None and md.get("vm_class") not in allowed.get(pool["vm_class"],
                                                                                          [pool["vm_class"]]):
                diffs.append("VM class %s (design %s)" % (md.get("vm_class"), " or ".join(
                    allowed.get(pool["vm_class"], [pool["vm_class"]]))))
            if diffs:
                out.append(finding("node_pool_changed", obj, "node pool %s: %s" % (pool["name"], ", ".join(diffs)),
                                   "set it back (vks_node_pool, or the vks_gpu_node_pools role)"))
            labels = md.get("labels")
            if labels is not None and pool.get("labels") is not None:
                want = dict((k, str(v)) for k, v in pool["labels"].items())
                wrong = ["%s=%s (design %s)" % (k, labels.get(k, "unset"), v) for k, v in sorted(want.items())
                         if labels.get(k) != v]
                wrong += ["%s=%s (not in the design)" % (k, labels[k]) for k in sorted(set(labels) - set(want))]
                if wrong:
                    out.append(finding(
                        "node_pool_labels_changed", obj,
                        "node pool %s labels its nodes differently: %s" % (pool["name"], ", ".join(wrong)),
                        "set the node pool labels back (vks_node_pool labels, or the vks_gpu_node_pools role)"))
            taints = md.get("taints")
            if taints is not None and pool.get("taints") is not None and _taint_set(taints) != _taint_set(pool["taints"]):
                out.append(finding(
                    "node_pool_taints_changed", obj,
                    "node pool %s taints its nodes with [%s], the design says [%s]: %s" % (
                        pool["name"], ", ".join(_taint_set(taints)), ", ".join(_taint_set(pool["taints"])),
                        "pods without the toleration land on its GPUs" if len(taints) < len(pool["taints"])
                        else "pods of the pool may not schedule"),
                    "set the node pool taints back (vks_node_pool taints, or the vks_gpu_node_pools role)"))
            lacking = [f for f in ("labels", "taints") if pool.get(f) and (md.get("lacks") or {}).get(f)]
            if lacking:
                out.append(finding(
                    "node_pool_class_lacks", obj,
                    "node pool %s: %s" % (pool["name"], "; ".join(md["lacks"][f] for f in lacking)),
                    "move the cluster to a ClusterClass with node labels and taints (builtin-generic), or "
                    "take them out of the pool's design; vks_node_pool refuses the pool until then"))
    return out


# ---------------------------------------------------------------------------------------
# guest
# ---------------------------------------------------------------------------------------


def is_gpu_node(node, pools=()):
    """A node of a GPU pool of the design, or one with an NVIDIA GPU (label or capacity)."""
    labels = node.get("labels") or {}
    if labels.get(POOL_LABEL) in pools or labels.get("nvidia.com/gpu.present") == "true":
        return True
    return any(k == "nvidia.com/gpu" or k.startswith("nvidia.com/mig-") for k in (node.get("capacity") or {}))


def _has_taint(node, taint):
    for t in node.get("taints") or []:
        if t.get("key") == taint["key"] and t.get("effect") == taint["effect"] and \
                (taint.get("value") is None or t.get("value") == taint["value"]):
            return True
    return False


def _taint_text(t):
    return "%s=%s:%s" % (t["key"], t.get("value") or "", t["effect"])


def _pools(derived):
    out = OrderedDict()
    for cluster in ((derived.get("vks") or {}).get("clusters") or {}).values():
        for pool in cluster.get("node_pools") or []:
            out[pool["labels"].get(POOL_LABEL, pool["name"])] = pool
    return out


def licensing_secret_matches(name, secret_name):
    """The design's licensing Secret, or one nls_licensing made from it (``<secret_name>-<content hash>``)."""
    return name == secret_name or re.match(r"^%s-[0-9a-f]{10}$" % re.escape(secret_name), name or "") is not None


def guest_inputs(derived):
    """(gpu_operator inputs, gpu_scheduling_policy inputs): the roles' defaults overridden by what
    derive() gives them, the same variables site.yml passes to the roles."""
    return (_objects.role_inputs("gpu_operator", role_inputs(derived, "gpu_operator")),
            _objects.role_inputs("gpu_scheduling_policy", role_inputs(derived, "gpu_scheduling_policy")))


def _diff_text(diffs):
    return ", ".join("%s %s (design %s)" % (path, "unset" if have is None else have, want) for path, have, want in diffs)


def audit_guest(derived, nodes=None, namespaces=None, resource_quotas=None, secrets=None,
                priority_classes=None, licensing_secret_in_use=None, namespace_labels=None, cluster_policy=None,
                device_plugin_config=None, kueue=None, culling=None, dcgm_metrics_config=None):
    """Findings of the guest link: GPU nodes, tenant namespaces and quotas, PriorityClasses, the
    licensing Secret, the ClusterPolicy, the device plugin ConfigMap, Kueue, notebook culling.

    What the roles write is built from the inputs derive() gives them (``derived["roles"]``) by
    ``_k8s_objects``; a part not read (None) is not judged. The licensing Secret is the one the
    ClusterPolicy names when there is one, else any Secret named as the design says or
    ``<secret_name>-<hash>`` (rotation by name).
    """
    out = []
    op, policy = guest_inputs(derived)
    _guest_nodes(out, derived, nodes)
    tenants = policy.get("gpu_scheduling_policy_tenants") or []
    missing_ns = set()
    if namespaces is not None:
        present = set(namespaces)
        quotas = resource_quotas or {}
        for tenant in tenants:
            name = tenant["namespace"]
            if name not in present:
                missing_ns.add(name)
                out.append(finding("guest_namespace_missing", "namespace %s" % name,
                                   "tenant namespace %s does not exist in the guest cluster" % name,
                                   "create it with its quotas (gpu_scheduling_policy role)"))
                continue
            if namespace_labels is not None:
                have = namespace_labels.get(name) or {}
                want = _objects.tenant_namespace_labels(tenant)
                wrong = ["%s=%s (design %s)" % (k, have.get(k, "unset"), v) for k, v in sorted(want.items())
                         if have.get(k) != v]
                if wrong:
                    out.append(finding(
                        "guest_namespace_labels_changed", "namespace %s" % name,
                        "tenant namespace %s: %s%s" % (name, ", ".join(wrong), (
                            "; Kueue's ClusterQueue selects training tenants by gpupool.vcf/training=true"
                            if tenant.get("training") and have.get("gpupool.vcf/training") != "true" else "")),
                        "set the labels back (gpu_scheduling_policy role)"))
            for q in tenant.get("quotas") or []:
                _guest_quota(out, name, q, (quotas.get(name) or {}).get(q["name"]))
    if priority_classes is not None:
        for pc in policy.get("gpu_scheduling_policy_priority_classes") or []:
            _priority_class(out, pc, priority_classes.get(pc["name"]))
    # the Secret the design names (nls_licensing makes <name>-<hash> of it); none: licensing is not judged
    secret_name = op.get("gpu_operator_licensing_secret_name") or None
    ns = op["gpu_operator_namespace"]
    cp_spec = (cluster_policy or {}).get("spec") if (cluster_policy or {}).get("exists") else None
    if cp_spec is not None:
        licensing_secret_in_use = ((cp_spec.get("driver") or {}).get("licensingConfig") or {}).get("secretName") or None
    if secrets is not None and secret_name:
        present = secrets.get(ns) or []
        if licensing_secret_in_use:
            missing = licensing_secret_in_use if licensing_secret_in_use not in present else None
            what = "the ClusterPolicy names licensing Secret %s, which is not in namespace %s" % (missing, ns)
        else:
            found = [n for n in present if licensing_secret_matches(n, secret_name)]
            missing = None if found else secret_name
            what = "no licensing Secret %s (or %s-<hash>) is in namespace %s" % (missing, missing, ns)
        if missing:
            out.append(finding(
                "licensing_secret_missing", "secret %s/%s" % (ns, missing),
                "%s: guest vGPU drivers run unlicensed and are throttled" % what,
                "create it from a DLS client configuration token (nls_licensing role)"))
    if cluster_policy is not None:
        refusal = _objects.missing_guest_driver(op)
        if refusal:
            out.append(finding("guest_driver_missing", "design guest.driver", refusal,
                               "add guest.driver to the design and run site.yml (gpu_operator role)"))
        _cluster_policy(out, op, cp_spec, secret_name)
    if device_plugin_config is not None:
        _device_plugin_config(out, op, device_plugin_config)
    if dcgm_metrics_config is not None:
        _dcgm_metrics_config(out, op, dcgm_metrics_config)
    if kueue is not None:
        _kueue(out, policy, kueue, missing_ns)
    if culling is not None:
        _culling(out, policy, culling)
    return out


def _guest_nodes(out, derived, nodes):
    pools = _pools(derived)
    gpu_taint = {"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"}
    seen = dict((p, 0) for p in pools)
    for node in sorted(nodes or [], key=lambda n: n["name"]):
        if not is_gpu_node(node, pools):
            continue
        pool_name = (node.get("labels") or {}).get(POOL_LABEL)
        pool = pools.get(pool_name)
        if pool is not None:
            seen[pool_name] += 1
        wanted = list(pool.get("taints") or []) if pool is not None else [gpu_taint]
        if not any(t["key"] == GPU_TAINT_KEY for t in wanted):
            wanted.insert(0, gpu_taint)
        missing = [t for t in wanted if not _has_taint(node, t)]
        if missing:
            out.append(finding(
                "gpu_node_untainted", "node %s" % node["name"],
                "GPU node %s%s lacks taint(s) %s: pods without the toleration land on it" % (
                    node["name"], " (pool %s)" % pool_name if pool_name else "",
                    ", ".join(_taint_text(t) for t in missing)),
                "set the taints on the node pool (vks_node_pool taints) so every node gets them; "
                "kubectl taint nodes %s %s for this node now" % (node["name"], " ".join(
                    _taint_text(t) for t in missing))))
        if pool is not None:
            profile = pool["labels"].get(PROFILE_LABEL)
            live = (node.get("labels") or {}).get(PROFILE_LABEL)
            if profile and live != profile:
                out.append(finding(
                    "gpu_node_profile_label_missing", "node %s" % node["name"],
                    "GPU node %s of pool %s has %s=%s, the pool's profile is %s" % (
                        node["name"], pool_name, PROFILE_LABEL, live if live is not None else "(none)", profile),
                    "set the node pool labels (vks_node_pool labels) to %s=%s" % (PROFILE_LABEL, profile)))
    if nodes is not None:
        for name, count in seen.items():
            if not count and pools[name].get("replicas"):
                out.append(finding(
                    "node_pool_no_nodes", "node_pool %s" % name,
                    "no node of the guest cluster has %s=%s; the design asks for %s" % (
                        POOL_LABEL, name, pools[name]["replicas"]),
                    "check the node pool on the Supervisor and its %s label" % POOL_LABEL))


def _guest_quota(out, ns, q, have):
    obj = "resource_quota %s/%s" % (ns, q["name"])
    want = dict((k, str(v)) for k, v in (q.get("hard") or {}).items())
    if have is None:
        out.append(finding(
            "gpu_quota_missing", obj,
            "namespace %s has no ResourceQuota %s (%s): its GPU use is unbounded" % (
                ns, q["name"], ", ".join("%s=%s" % kv for kv in sorted(want.items()))),
            "create it (gpu_scheduling_policy role)"))
        return
    live = dict((k, str(v)) for k, v in (have or {}).items())
    changed = ["%s=%s (design %s)" % (k, live.get(k, "unset"), v) for k, v in sorted(want.items()) if live.get(k) != v]
    if changed:
        out.append(finding("gpu_quota_changed", obj, "ResourceQuota %s/%s: %s" % (ns, q["name"], ", ".join(changed)),
                           "set it back (gpu_scheduling_policy role)"))


def _priority_class(out, pc, have):
    name = pc["name"]
    obj = "priority_class %s" % name
    if have is None:
        out.append(finding("priority_class_missing", obj, "PriorityClass %s does not exist" % name,
                           "create it (gpu_scheduling_policy role)"))
        return
    fixed, diffs = [], []
    if have.get("value") != pc.get("value"):
        fixed.append("value %s (design %s)" % (have.get("value"), pc.get("value")))
    if pc.get("preemption_policy") and have.get("preemptionPolicy") != pc["preemption_policy"]:
        fixed.append("preemptionPolicy %s (design %s)" % (have.get("preemptionPolicy"), pc["preemption_policy"]))
    if "description" in have and have.get("description") != pc.get("description", name):
        diffs.append("description %r (design %r)" % (have.get("description"), pc.get("description", name)))
    if fixed or diffs:
        out.append(finding(
            "priority_class_changed", obj, "PriorityClass %s: %s" % (name, ", ".join(fixed + diffs)),
            "PriorityClass values are immutable: delete and recreate it (gpu_scheduling_policy role)" if fixed
            else "set it back (gpu_scheduling_policy role)"))


def _cluster_policy(out, op, spec, secret_prefix):
    obj = "cluster_policy %s" % _objects.CLUSTER_POLICY
    if spec is None:
        out.append(finding(
            "cluster_policy_missing", obj,
            "the GPU Operator has no ClusterPolicy %s: no guest driver, device plugin or licensing" % (
                _objects.CLUSTER_POLICY),
            "install the GPU Operator chart (gpu_operator role)"))
        return
    diffs = []
    for path, want in _objects.cluster_policy_fields(op):
        have = spec
        for key in path:
            have = have.get(key) if isinstance(have, dict) else None
        diffs += [(".".join(path), h, w) for _p, h, w in _objects.differences(want, have)]
    secret = ((spec.get("driver") or {}).get("licensingConfig") or {}).get("secretName")
    if secret_prefix and not licensing_secret_matches(secret, secret_prefix):
        diffs.append(("driver.licensingConfig.secretName", secret, "%s-<hash>" % secret_prefix))
    strategy = [d for d in diffs if d[0] == "mig.strategy"]
    diffs = [d for d in diffs if d[0] != "mig.strategy"]
    if strategy:
        out.append(finding(
            "mig_strategy_changed", obj, "ClusterPolicy %s: %s; the GPU resource every workload requests depends on "
            "it (nvidia.com/gpu or nvidia.com/mig-<profile>)" % (_objects.CLUSTER_POLICY, _diff_text(strategy)),
            "set it back (gpu_operator role) after checking the workloads that request GPUs: the role changes a live "
            "mig.strategy only with guest.allow_mig_strategy_change true (gpu_operator_allow_mig_strategy_change)"
            if not _objects.flag(op.get("gpu_operator_allow_mig_strategy_change")) else
            "set it back (gpu_operator role; the design allows the change)"))
    if diffs:
        out.append(finding(
            "cluster_policy_changed", obj, "ClusterPolicy %s: %s" % (_objects.CLUSTER_POLICY, _diff_text(diffs)),
            "set it back (gpu_operator role; nls_licensing points it at the licensing Secret)"))


def _dcgm_metrics_config(out, op, live):
    want = _objects.dcgm_metrics_csv(op)
    if want is None:
        return
    ns, name = op["gpu_operator_namespace"], op["gpu_operator_dcgm_metrics_config_name"]
    obj = "config_map %s/%s" % (ns, name)
    if not live.get("exists"):
        out.append(finding(
            "dcgm_metrics_config_missing", obj,
            "the DCGM exporter metrics ConfigMap %s/%s is missing: the exporter exports its own list, without "
            "the profiling counters the design's dashboards read" % (ns, name), "create it (gpu_operator role)"))
        return
    have = _objects.dcgm_metrics_fields((live.get("data") or {}).get(_objects.DCGM_METRICS_KEY))
    wanted = _objects.dcgm_metrics_fields(want)
    if have != wanted:
        missing = [f for f, _t in wanted if f not in [h for h, _u in have]]
        extra = [f for f, _t in have if f not in [w for w, _v in wanted]]
        what = "; ".join(part for part in (
            "missing %s" % ", ".join(missing) if missing else "",
            "not the role's %s" % ", ".join(extra) if extra else "") if part) or "types or order differ"
        out.append(finding("dcgm_metrics_config_changed", obj,
                           "DCGM exporter metrics ConfigMap %s/%s: %s" % (ns, name, what),
                           "set it back (gpu_operator role); the exporter reads it when its pods restart"))


def _device_plugin_config(out, op, live):
    want = _objects.device_plugin_configs(op)
    if not want:
        return
    ns, name = op["gpu_operator_namespace"], op["gpu_operator_device_plugin_config_name"]
    obj = "config_map %s/%s" % (ns, name)
    if not live.get("exists"):
        out.append(finding(
            "time_slicing_config_missing", obj,
            "the device plugin ConfigMap %s/%s is missing: time-sliced pools (%s) advertise one GPU per card" % (
                ns, name, ", ".join(sorted(op["gpu_operator_time_slicing"]))),
            "create it (gpu_operator role)"))
        return
    data = live.get("data") or {}
    diffs = []
    for key, config in sorted(want.items()):
        if key not in data:
            diffs.append((key, None, "a configuration"))
            continue
        diffs += [("%s: %s" % (key, p), h, w) for p, h, w in _objects.differences(config, data[key])]
    if diffs:
        out.append(finding("time_slicing_config_changed", obj,
                           "device plugin ConfigMap %s/%s: %s" % (ns, name, _diff_text(diffs)),
                           "set it back (gpu_operator role); the device plugin rereads it"))


def _kueue(out, policy, live, missing_ns):
    want = _objects.kueue_objects(policy)
    if want is None:
        return
    if not live.get("served", True):
        out.append(finding("kueue_missing", "kueue %s" % want["api_version"],
                           "the guest cluster does not serve %s: training jobs are not gang-scheduled" % (
                               want["api_version"]),
                           "install Kueue in the guest cluster, then run the gpu_scheduling_policy role"))
        return
    checks = [("resource_flavor", "ResourceFlavor", name, spec, (live.get("resource_flavors") or {}).get(name))
              for name, spec in want["resource_flavors"]]
    checks += [("cluster_queue", "ClusterQueue", name, spec, (live.get("cluster_queues") or {}).get(name))
               for name, spec in want["cluster_queues"]]
    for ns, name, spec in want["local_queues"]:
        if ns not in missing_ns:
            checks.append(("local_queue", "LocalQueue", "%s/%s" % (ns, name), spec,
                           ((live.get("local_queues") or {}).get(ns) or {}).get(name)))
    for rule, kind, name, spec, have in checks:
        obj = "%s %s" % (rule, name)
        if have is None:
            out.append(finding("%s_missing" % rule, obj, "Kueue %s %s does not exist: training jobs %s" % (
                kind, name, "of its namespace wait unadmitted" if rule == "local_queue" else "are not admitted"),
                "create it (gpu_scheduling_policy role)"))
            continue
        diffs = _objects.differences(spec, have)
        if diffs:
            out.append(finding("%s_changed" % rule, obj, "Kueue %s %s: %s" % (kind, name, _diff_text(diffs)),
                               "set it back (gpu_scheduling_policy role)"))
    _kueue_config(out, policy, live)


def _kueue_config(out, policy, live):
    """waitForPodsReady in Kueue's configuration (``live["configuration"]``: the parsed
    Configuration, None where its ConfigMap or key is missing; absent: not read)."""
    if "configuration" not in live or _objects.kueue_wait_for_pods_ready(policy) is None:
        return
    ns, name = policy["gpu_scheduling_policy_kueue_namespace"], policy["gpu_scheduling_policy_kueue_config_map"]
    obj = "config_map %s/%s" % (ns, name)
    config = live["configuration"]
    restart = "; Kueue's controller reads it only when it starts (the role restarts it)"
    if config is None:
        out.append(finding("kueue_config_changed", obj,
                           "Kueue's configuration %s/%s (key %s) is missing: waitForPodsReady cannot be set, gang "
                           "jobs may start some of their pods and hold GPUs waiting for the rest" % (
                               ns, name, policy["gpu_scheduling_policy_kueue_config_key"]),
                           "install Kueue from its manifests or chart, or point the gpu_scheduling_policy role at "
                           "its configuration (gpu_scheduling_policy_kueue_config_map)"))
        return
    try:
        diffs = _objects.kueue_config_differences(policy, config)
    except ValueError as exc:
        diffs = [("configuration", "not a Kueue Configuration", str(exc))]
    if diffs:
        out.append(finding("kueue_config_changed", obj, "Kueue's configuration %s/%s: %s%s" % (
            ns, name, _diff_text(diffs), restart), "set it (gpu_scheduling_policy role, which restarts Kueue)"))


def kubeflow_culling(policy):
    """What the role's culling tasks patch into Kubeflow's notebook controller (tasks/culling.yml):
    {"namespace", "name", "container", "env"}; None when the role leaves Kubeflow alone."""
    if policy.get("gpu_scheduling_policy_culling") not in ("auto", "kubeflow"):
        return None
    return {"namespace": policy["gpu_scheduling_policy_kubeflow_controller_namespace"],
            "name": policy["gpu_scheduling_policy_kubeflow_controller_deployment"],
            "container": policy["gpu_scheduling_policy_kubeflow_controller_container"],
            "env": OrderedDict([("ENABLE_CULLING", "true"),
                                ("CULL_IDLE_TIME", str(policy["gpu_scheduling_policy_culling_idle_minutes"])),
                                ("IDLENESS_CHECK_PERIOD", str(policy["gpu_scheduling_policy_culling_check_minutes"]))])}


def _kubeflow_culling(out, policy, live):
    want = kubeflow_culling(policy)
    if want is None:
        return
    obj = "deployment %s/%s" % (want["namespace"], want["name"])
    if not live.get("exists"):
        out.append(finding("notebook_culling_missing", obj,
                           "Kubeflow's notebook controller %s/%s (container %s) is missing: nothing culls idle "
                           "notebooks" % (want["namespace"], want["name"], want["container"]),
                           "install Kubeflow's notebook controller, or set guest.culling.mechanism to cronjob"))
        return
    diffs = _objects.differences({"env": want["env"]}, {"env": live.get("env") or {}})
    if diffs:
        out.append(finding("notebook_culling_changed", obj, "Kubeflow's notebook controller %s/%s: %s" % (
            want["namespace"], want["name"], _diff_text(diffs)), "set it back (gpu_scheduling_policy role)"))


def _culling(out, policy, live):
    if live.get("kubeflow"):
        _kubeflow_culling(out, policy, live)
        return
    want = _objects.culling_cronjob(policy)
    if want is None:
        return
    obj = "cronjob %s/%s" % (want["namespace"], want["name"])
    if not live.get("exists"):
        out.append(finding("notebook_culling_missing", obj,
                           "the notebook culling CronJob %s/%s is missing: idle notebooks keep their GPUs" % (
                               want["namespace"], want["name"]),
                           "create it (gpu_scheduling_policy role)"))
        return
    diffs = _objects.differences({"schedule": want["schedule"], "image": want["image"], "env": want["env"]},
                                 dict((k, live.get(k)) for k in ("schedule", "image", "env")))
    if diffs:
        out.append(finding("notebook_culling_changed", obj, "notebook culling CronJob %s/%s: %s" % (
            want["namespace"], want["name"], _diff_text(diffs)), "set it back (gpu_scheduling_policy role)"))


# ---------------------------------------------------------------------------------------
# licensing
# ---------------------------------------------------------------------------------------


def token_state(meta, digest, today, renew_before_days, dls_host=None, port=None):
    """What the kept client token means, the way dls_client_token decides to renew it: ``(state, detail)``.

    ``meta``: the parsed ``<token>.meta.json`` (None: missing or unreadable), ``digest``: the
    sha256 of the token file's stripped content (None: no token file), ``today``: a date.
    States: ``missing`` (no token file), ``unknown`` (no metadata, or metadata of another file),
    ``expired`` (expiry before today), ``expiring`` (days left at most ``renew_before_days``:
    dls_client_token composes a new one on its next run), ``other_appliance`` (made for another
    host or port), ``valid``. ``detail``: {expiry, days_left, dls_host, port} where known."""
    if digest is None:
        return "missing", {}
    if not isinstance(meta, dict) or meta.get("sha256") != digest or not meta.get("expiry"):
        return "unknown", {}
    try:
        expiry = datetime.date.fromisoformat(str(meta["expiry"]))
    except ValueError:
        return "unknown", {}
    detail = dict(expiry=expiry.isoformat(), days_left=(expiry - today).days, dls_host=meta.get("dls_host"),
                  port=meta.get("port"))
    if detail["days_left"] < 0:
        return "expired", detail
    if detail["days_left"] <= renew_before_days:
        return "expiring", detail
    if (dls_host is not None and meta.get("dls_host") != dls_host) or (port is not None and meta.get("port") != port):
        return "other_appliance", detail
    return "valid", detail


def gpu_node_names(derived, nodes):
    """The guest's GPU nodes (the guest link's test: a node of a GPU pool, or one with an NVIDIA GPU)."""
    pools = _pools(derived)
    return sorted(n["name"] for n in nodes or [] if is_gpu_node(n, pools))


def design_gpu_nodes(derived):
    """How many GPU nodes the design asks for (the node pools' replicas)."""
    return sum(int(p.get("replicas") or 0) for p in _pools(derived).values())


def audit_licensing(derived, dls=None, token=None, license_series=None, gpu_nodes=None, metric=None,
                    renew_before_days=30, how_to_check=None):
    """Findings of the licensing link.

    ``dls``: {"where": "host:port", "error": text or None, "stage": where it failed, "license_server":
    id or None, "leases": [lease] or None}; None - not read. ``token``: {"path", "state", "detail"} (see
    :func:`token_state`); None - not read. ``license_series``: the Prometheus vector of the license
    metric; None - no Prometheus, ``how_to_check`` then says what would make the check.
    ``gpu_nodes``: the guest's GPU node names; None - unknown (the series' nodes are judged and the
    design's replicas are the count of GPU nodes)."""
    out = []
    metric = metric or LICENSE_METRIC
    expected = len(gpu_nodes) if gpu_nodes is not None else design_gpu_nodes(derived)
    if dls is not None:
        obj = "dls %s" % dls["where"]
        if dls.get("error") and dls.get("stage") == "license_server":
            out.append(finding("dls_license_server_missing", obj, "the DLS appliance %s has no license server the "
                               "client token can name: %s" % (dls["where"], dls["error"]),
                               "install the license server file from the NVIDIA Licensing Portal on the appliance "
                               "(a manual step in the appliance's web interface: the portal has no public API), "
                               "then run site.yml"))
        elif dls.get("error"):
            out.append(finding("dls_unreachable", obj, "the DLS appliance %s does not answer (%s): %s; GPU nodes cannot "
                               "renew their leases and a node that restarts stays unlicensed" % (
                                   dls["where"], dls.get("stage") or "login", dls["error"]),
                               "check that the appliance VM runs and its service is up, the network path from the "
                               "auditing host and the credentials (gpupool_dls_*)"))
        elif dls.get("leases") is not None and len(dls["leases"]) < expected:
            out.append(finding("leases_short", obj, "the DLS appliance %s holds %d lease(s) for %d GPU node(s)%s: "
                               "at least %d node(s) hold no license" % (
                                   dls["where"], len(dls["leases"]), expected,
                                   "" if gpu_nodes is not None else " (the design's replicas; no guest cluster given)",
                                   expected - len(dls["leases"])),
                               "check the nodes' license status (nvidia-smi -q in the driver pod), that they reach "
                               "the appliance on its leasing port, and the licenses left on the license server"))
    if token is not None:
        state, detail = token.get("state"), token.get("detail") or {}
        obj = "client_token %s" % token["path"]
        site = "run site.yml (its licensing link composes a new token with dls_client_token and rotates the " \
               "licensing Secret)"
        if state in ("missing", "unknown"):
            out.append(finding("client_token_missing", obj, "no client configuration token %s at %s" % (
                "with its metadata (%s.meta.json)" % token["path"] if state == "unknown" else "file", token["path"]),
                site))
        elif state == "expired":
            out.append(finding("client_token_expired", obj, "the client configuration token at %s expired on %s: "
                               "drivers that start now get no license" % (token["path"], detail["expiry"]), site))
        elif state == "expiring":
            out.append(finding("client_token_expiring", obj, "the client configuration token at %s expires on %s, "
                               "in %d day(s), within the renewal margin of %d days" % (
                                   token["path"], detail["expiry"], detail["days_left"], renew_before_days), site))
        elif state == "other_appliance":
            out.append(finding("client_token_other_appliance", obj, "the client configuration token at %s was made "
                               "for DLS %s:%s, not the audited appliance" % (
                                   token["path"], detail.get("dls_host"), detail.get("port")), site))
    if license_series is None:
        out.append(finding("license_check_not_made", "gpu_nodes", "the GPU nodes' licenses were not checked: %s" % (
            how_to_check or "no Prometheus given"),
            "give prometheus_url (the Prometheus that scrapes the GPU Operator's DCGM exporter, which exports %s "
            "per vGPU)" % metric))
        return out
    values = license_by_node(license_series)
    names = list(gpu_nodes) if gpu_nodes is not None else sorted(n for n in values if n)
    for name in names:
        got = values.get(name)
        if not got:
            out.append(finding("gpu_node_license_unknown", "node %s" % name,
                               "GPU node %s has no %s series in Prometheus: its license status is unknown" % (
                                   name, metric),
                               "check the DCGM exporter pod on the node (GPU Operator dcgmExporter) and that "
                               "Prometheus scrapes it"))
            continue
        bad = [v for v in got if v != LICENSED]
        if bad:
            out.append(finding("gpu_node_unlicensed", "node %s" % name,
                               "GPU node %s: %d of %d vGPU(s) not licensed (%s %s); unlicensed vGPUs run "
                               "degraded" % (name, len(bad), len(got), metric,
                                             ", ".join(sorted(set("%g" % v for v in bad)))),
                               "check the licensing Secret in the ClusterPolicy, the node's reach to the DLS "
                               "appliance, and nvidia-smi -q in the node's driver pod"))
    return out


# ---------------------------------------------------------------------------------------
# results and reports
# ---------------------------------------------------------------------------------------


def sort_findings(findings):
    rule_order = dict((r, i) for i, r in enumerate(RULES))
    link_order = dict((l, i) for i, l in enumerate(LINKS))
    return sorted(findings, key=lambda f: (link_order.get(f["link"], 99), rule_order.get(f["rule"], 999),
                                           f["object"]))


def summarize(findings):
    """Counts per severity and per link (each link: counts per severity)."""
    by_severity = OrderedDict((s, 0) for s in SEVERITIES)
    by_link = OrderedDict((l, OrderedDict((s, 0) for s in SEVERITIES)) for l in LINKS)
    for f in findings:
        by_severity[f["severity"]] += 1
        by_link.setdefault(f["link"], OrderedDict((s, 0) for s in SEVERITIES))[f["severity"]] += 1
    return OrderedDict([("total", len(findings)), ("severity", by_severity), ("link", by_link)])


def is_clean(findings):
    """No error and no warning (info findings, such as a link not audited, do not count)."""
    return not any(f["severity"] in ("error", "warning") for f in findings)


def should_fail(findings, fail_on):
    if fail_on == "error":
        return any(f["severity"] == "error" for f in findings)
    if fail_on == "warning":
        return any(f["severity"] in ("error", "warning") for f in findings)
    return False


def _md_cell(value):
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _html(value):
    text = "" if value is None else str(value)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#x27;"))


def render(design_name, findings, summary, audited, fmt):
    """The report text in ``json``, ``markdown`` or ``html``; no timestamps, so an unchanged
    state renders the same text."""
    if fmt == "json":
        return json.dumps(OrderedDict([("design", design_name), ("audited", list(audited)),
                                       ("clean", is_clean(findings)), ("summary", summary),
                                       ("findings", findings)]), indent=2) + "\n"
    sev = summary["severity"]
    counts = ", ".join("%d %s" % (sev[s], s) for s in SEVERITIES)
    status = "clean" if is_clean(findings) else "drift found"
    if fmt == "markdown":
        lines = ["# GPU pool audit: %s" % _md_cell(design_name), "",
                 "Links audited: %s. Result: %s (%s)." % (", ".join(audited) or "none", status, counts), "",
                 "| link | errors | warnings | info |", "|---|---|---|---|"]
        for link, c in summary["link"].items():
            lines.append("| %s | %d | %d | %d |" % (link, c["error"], c["warning"], c["info"]))
        lines += ["", "## Findings", ""]
        if not findings:
            lines.append("No findings.")
        else:
            lines += ["| rule | severity | link | object | message | fix |", "|---|---|---|---|---|---|"]
            for f in findings:
                lines.append("| %s |" % " | ".join(_md_cell(f[k]) for k in
                                                   ("rule", "severity", "link", "object", "message", "fix")))
        return "\n".join(lines) + "\n"
    if fmt == "html":
        rows = []
        for f in findings:
            rows.append("<tr class=\"%s\">%s</tr>" % (_html(f["severity"]), "".join(
                "<td>%s</td>" % _html(f[k]) for k in ("rule", "severity", "link", "object", "message", "fix"))))
        link_rows = "".join("<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td></tr>" % (
            _html(link), c["error"], c["warning"], c["info"]) for link, c in summary["link"].items())
        return "\n".join([
            "<!DOCTYPE html>",
            "<html><head><meta charset=\"utf-8\"><title>GPU pool audit: %s</title>" % _html(design_name),
            "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}"
            "tr.error{background:#fdd}tr.warning{background:#ffd}</style></head><body>",
            "<h1>GPU pool audit: %s</h1>" % _html(design_name),
            "<p>Links audited: %s. Result: %s (%s).</p>" % (_html(", ".join(audited) or "none"), status, counts),
            "<table><tr><th>link</th><th>errors</th><th>warnings</th><th>info</th></tr>%s</table>" % link_rows,
            "<h2>Findings</h2>",
            ("<table><tr><th>rule</th><th>severity</th><th>link</th><th>object</th><th>message</th>"
             "<th>fix</th></tr>\n%s\n</table>" % "\n".join(rows)) if rows else "<p>No findings.</p>",
            "</body></html>", ""])
    raise ValueError("unknown report format %r" % (fmt,))


__all__ = ["RULES", "LINKS", "finding", "not_audited", "audit_esxi", "audit_vsphere", "class_names", "designed_class_names",
           "audit_vks", "audit_guest", "guest_inputs",
           "audit_licensing", "token_state", "kubeflow_culling", "license_by_node", "gpu_node_names", "design_gpu_nodes",
           "sort_findings", "summarize", "is_clean", "should_fail", "render"]
