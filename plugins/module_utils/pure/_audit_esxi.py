# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The esxi link of the drift audit: ESXi hosts (driver, graphics, scheduler, MIG, SSH) and DRS pinning, judged against the derived design (pure).

Live state, as the module reads it: ``hosts``: host records as ``_gpu_inventory.GpuInventory.read`` returns them (``name``,
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

:data:`RULES` is this link's rule table (severity, link, one line, fix); ``_audit_report`` assembles
every link's table into one. A finding carries its rule's fix unless it names a more specific one (the
design's version, graphics type, scheduler value or GPU).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _nvidia
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _drs, _ha


RULES = OrderedDict([
    ("cluster_missing", ("error", "esxi",
                         "Every GPU cluster of the design exists in vCenter.",
                         "create the cluster and add its GPU hosts, or fix the name in the design")),
    ("gpu_hosts_short", ("warning", "esxi",
                         "A cluster has at least the GPU hosts the design counts on.",
                         "add GPU hosts to the cluster or lower clusters.<cluster>.hosts in the design")),
    ("host_unreachable", ("warning", "esxi",
                          "Every GPU host is connected and could be read.",
                          "reconnect the host in vCenter and run the audit again")),
    ("host_in_maintenance", ("warning", "esxi",
                             "No GPU host is left in maintenance mode by an earlier run.",
                             "rerun the esxi_gpu_host role: it finishes the host's turn and exits maintenance mode")),
    ("host_in_maintenance_by_admin", ("info", "esxi",
                                      "A GPU host an administrator put in maintenance mode is named (the roles leave "
                                      "it alone).",
                                      "finish the work on the host and exit maintenance mode; the roles leave it "
                                      "alone")),
    ("host_reboot_pending", ("warning", "esxi",
                             "No GPU host owes a reboot (staged driver or nvidia module options not running).",
                             "reboot the host (esxi_gpu_host role, esxi_gpu_config reboot=true)")),
    ("gpu_vms_left_off", ("warning", "esxi",
                          "No vGPU VM an earlier run powered off is left off.",
                          "rerun the esxi_gpu_host role: it powers them on")),
    ("host_not_plannable", ("error", "esxi",
                            "The design's settings can be planned on every GPU host.",
                            "fix the host's nvidia module options or the design, then rerun the esxi_gpu_host role")),
    ("driver_mixed", ("error", "esxi",
                      "Every GPU host of a cluster runs the same NVIDIA driver.",
                      "bring every GPU host to the design's driver version, one host at a time (esxi_gpu_host role)")),
    ("driver_off_design", ("error", "esxi",
                           "Every GPU host runs the driver version of the design.",
                           "install the design's driver version on the host (esxi_gpu_host role, esxi_host_driver); "
                           "with lifecycle vlcm, remediate the cluster against its vLCM image (vlcm_component)")),
    ("driver_not_loaded", ("error", "esxi",
                           "Every GPU host offers vGPU profiles (its NVIDIA driver is loaded).",
                           "reboot the host (esxi_gpu_host role, esxi_gpu_config reboot=true)")),
    ("graphics_not_shared_direct", ("error", "esxi",
                                    "Host default and every NVIDIA device have the design's graphics type (Shared "
                                    "Direct).",
                                    "set the host default and every NVIDIA device to the design's graphics type "
                                    "(esxi_gpu_host role, esxi_gpu_config), then restart the X.Org service or reboot "
                                    "the host")),
    ("assignment_policy_off_design", ("warning", "esxi",
                                      "The shared passthrough assignment policy is the design's.",
                                      "set the assignment policy to the design's (esxi_gpu_host role, "
                                      "esxi_gpu_config)")),
    ("scheduler_off_design", ("error", "esxi",
                              "The vGPU scheduler (RmPVMRL) is the design's.",
                              "set the nvidia module option NVreg_RegistryDwords=RmPVMRL=<the design's value> "
                              "(esxi_gpu_host role, esxi_gpu_config) and reboot the host")),
    ("gpu_vgpu_mode_off_design", ("error", "esxi",
                                  "Every NVIDIA GPU not in MIG mode runs the design's vGPU mode (graphics.vgpu_mode: "
                                  "same_size or mixed_size), where the design sets one.",
                                  "set the design's vGPU mode on the GPUs (esxi_gpu_host role, esxi_gpu_config "
                                  "vgpu_mode) while no powered-on VM holds a vGPU on them: power the host's vGPU VMs "
                                  "off first, or roll the host through maintenance mode")),
    ("gpu_mig_off_design", ("error", "esxi",
                            "Every GPU runs the MIG mode the design's MIG geometry gives it (mig_geometry: the GPU "
                            "indexes in MIG mode per host).",
                            "rerun the esxi_gpu_host role: it sets MIG GPU by GPU from the design's geometry "
                            "(nvidia-smi -i <index> -mig 1|0, SSH started only while needed), then resets the GPUs or "
                            "reboots the host")),
    ("gpu_vgpu_mode_mismatch", ("error", "esxi",
                                "Every vGPU sits on a GPU of its kind: MIG-backed profiles on MIG GPUs, time-sliced "
                                "and full-card profiles on GPUs without MIG, one size on a sameSize GPU.",
                                "read the GPU's mode on the host (nvidia-smi -i <index> "
                                "--query-gpu=mig.mode.current,mig.mode.pending --format=csv) and compare with "
                                "vCenter; set the mode back with the esxi_gpu_host role (host in maintenance mode) or "
                                "power the VM off and restart it on a GPU of its kind")),
    ("gpu_mig_not_read", ("info", "esxi",
                          "Where the design gives a MIG geometry, the GPU hosts whose vSphere API reports no vGPU "
                          "mode (before 8.0.3) are named: their MIG mode is not judged.",
                          "upgrade the hosts and vCenter to vSphere 8.0 Update 3 or later, or check MIG mode on the "
                          "hosts (nvidia-smi --query-gpu=index,mig.mode.current --format=csv; the esxi_gpu_host role "
                          "in check mode reads it over SSH)")),
    ("host_ssh_running", ("warning", "esxi",
                          "No GPU host is left with its SSH service (TSM-SSH) running.",
                          "stop the SSH service on them (vSphere Client: host > Configure > Services > SSH > Stop, or "
                          "HostServiceSystem.StopService TSM-SSH); the esxi_gpu_host role starts it only while it "
                          "sets MIG")),
    ("drs_overrides_disabled", ("warning", "esxi",
                                "DRS and its per-VM overrides are on where GPU VMs are pinned.",
                                "enable DRS and VM overrides on the cluster")),
    ("gpu_vm_not_pinned", ("error", "esxi",
                           "Every VM holding a vGPU has an enabled DRS override that keeps it from being moved "
                           "automatically.",
                           "pin it: drs_gpu_pinning with the design's behavior")),
    ("gpu_vm_pin_behavior", ("warning", "esxi",
                             "A GPU VM's DRS override has the design's behavior.",
                             "drs_gpu_pinning with the design's behavior")),
    ("ha_admission_control_off_design", ("warning", "esxi",
                                         "Where the design manages HA, the cluster has HA and admission control on "
                                         "with the failover capacity of the spare rule.",
                                         "run the ha_gpu_restart role (site.yml's vSphere link): it sets the "
                                         "percentage policy of clusters.<cluster>.ha")),
    ("ha_restart_priority_missing", ("warning", "esxi",
                                     "Every node VM of a pool whose cluster's HA the design manages has an HA "
                                     "restart priority override.",
                                     "run the ha_gpu_restart role: it sets the pool's ha_restart_priority")),
    ("ha_restart_priority_off_design", ("warning", "esxi",
                                        "A pool VM's HA restart priority that the collection set is the pool's.",
                                        "run the ha_gpu_restart role: it sets the pool's ha_restart_priority back")),
    ("ha_restart_priority_stale", ("info", "esxi",
                                   "No HA override the collection set is left on a VM that is no pool's node VM.",
                                   "run the ha_gpu_restart role: it removes the overrides it set there")),
    ("ha_record_changed", ("info", "esxi",
                           "The cluster's record gpupool.vcf.ha-restart holds what the collection owns.",
                           "run the ha_gpu_restart role: it writes the record")),
    ("ha_setting_foreign", ("info", "esxi",
                            "An HA override of a pool VM, or an admission control, that someone else set and that "
                            "differs from the design is named (the role leaves it).",
                            "make it the design's by hand, or adopt it (clusters.<cluster>.adopt: true) so the "
                            "ha_gpu_restart role sets it")),
])


def finding(rule, obj, message, fix, severity=None):
    """A finding of a rule of this link's table."""
    return _audit.finding(rule, obj, message, fix, RULES[rule], severity=severity)


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
# the rules of the drs_gpu_pinning plan (_drs.plan_pinning, by :func:`pinning_plan`): each override it
# would add or edit, and when
PINNING_RULE_BY_CHANGE = OrderedDict([
    ("gpu_vm_not_pinned", "an override the plan adds, or edits from a disabled or an unpinning one"),
    ("gpu_vm_pin_behavior", "an override the plan edits from the other pinning behavior"),
])
# the rules of the ha_gpu_restart plan (_ha.plan, by :func:`ha_plan`): (field, action) of each change -> rule
HA_RULE_BY_CHANGE = OrderedDict([
    ("ha_admission_control_off_design", ("ha_admission_control", "update")),
    ("ha_restart_priority_missing", ("ha_restart_priority", "create")),
    ("ha_restart_priority_off_design", ("ha_restart_priority", "update")),
    ("ha_restart_priority_stale", ("ha_restart_priority", "delete")),
    ("ha_record_changed", ("ha_owned", "update")),
])
# the ESXi rules decided from more than one host's plan or outside it, and why
ESXI_RULES_BESIDES_THE_PLAN = {
    "cluster_missing": "the role's gpu_host_info read of the cluster fails",
    "gpu_hosts_short": "hardware: the role cannot add hosts",
    "driver_mixed": "the driver items of the hosts of one cluster, summed up",
    "host_in_maintenance_by_admin": "information only: the role leaves an administrator's maintenance mode alone",
    "drs_overrides_disabled": "the cluster's DRS settings, which the drs_gpu_pinning role does not change",
    "gpu_vgpu_mode_mismatch": "the read itself: a host refuses such a vGPU, so vCenter's view is inconsistent or "
                              "the GPU's mode changed behind its back",
    "gpu_mig_not_read": "information only: vSphere reports no vGPU mode there; the role reads MIG mode over SSH",
    "host_ssh_running": "the esxi_gpu_host role starts SSH only while it sets MIG and stops it after; one left "
                        "running was started by hand or by a run that failed",
    "ha_setting_foreign": "information only: the ha_gpu_restart plan's kept_foreign, what someone else set and the "
                          "role leaves without adopt",
}


def esxi_role_inputs(want):
    """:func:`_esxi.host_plan`'s arguments from the esxi_gpu_host role's variables for one
    cluster (``derived["roles"]["esxi_gpu_host"][cluster]``): the mapping the role's turns use
    (:func:`_esxi.host_inputs`), so the audit plans each host as the roll does."""
    return _esxi.host_inputs(want)


def host_findings(h, want, mig=None):
    """The findings of one GPU host: its plan from _esxi.host_plan (with its MIG item, ``mig``: the host's
    entry of :func:`mig_changes`), one finding per rule."""
    items = _esxi.host_plan(h, driver=True, **esxi_role_inputs(want))
    if mig is not None:
        if mig.get("refused"):
            items.append(_esxi.refusal_change(h["name"], mig["refused"]))
        else:
            items.append(_esxi.mig_change(h["name"], mig["before"], mig["after"], mig["reason"]))
    by_rule = OrderedDict()
    for item in items:
        rule = ESXI_RULE_BY_FIELD.get(item.field)
        if rule is not None:
            by_rule.setdefault(rule, []).append(item)
    out = []
    for rule, group in by_rule.items():
        message, fix = _ESXI_TEXT[rule](h, want, group)
        out.append(finding(rule, "host %s" % h["name"], message, fix))
    if h.get("maintenance_mode") and not any(i.field == "maintenance_mode" for i in items):
        out.append(finding(
            "host_in_maintenance_by_admin", "host %s" % h["name"],
            "host %s is in maintenance mode (not by this collection): its GPUs serve no VM" % h["name"], None))
    return out


def _reasons_text(group):
    return "; ".join(_esxi.reasons(group))


def _text_unreachable(h, want, group):
    return "host %s could not be read fully (%s)" % (h["name"], _reasons_text(group)), None


def _text_driver(h, want, group):
    item = group[0]
    message = "host %s runs NVIDIA driver %s, the design pins %s" % (
        h["name"], item.before or "(none installed)", want["esxi_gpu_host_driver_version"])
    if item.action == "refused":
        message += " (%s)" % item.reason
    if want.get("esxi_gpu_host_lifecycle") == "vlcm":
        fix = "remediate cluster %s against its vLCM image with %s (esxi_gpu_host role, vlcm_component)" % (
            h.get("cluster"), want["esxi_gpu_host_driver_version"])
    else:
        fix = "install %s on the host (esxi_gpu_host role, esxi_host_driver)" % want["esxi_gpu_host_driver_version"]
    return message, fix


def _text_not_loaded(h, want, group):
    return "host %s offers no vGPU profile: its NVIDIA driver is not loaded" % h["name"], None


def _text_graphics(h, want, group):
    graphics = want.get("esxi_gpu_host_graphics_type")
    return ("host %s graphics are not %s: %s" % (h["name"], graphics, _reasons_text(group)),
            "set the host default and every NVIDIA device to %s (esxi_gpu_host role, esxi_gpu_config), then "
            "restart the X.Org service or reboot the host" % graphics)


def _text_policy(h, want, group):
    return ("host %s places vGPUs by %s, the design says %s" % (h["name"], group[0].before, group[0].after),
            "set the assignment policy to %s (esxi_gpu_host role, esxi_gpu_config)" % group[0].after)


def _text_vgpu_mode(h, want, group):
    wanted = want.get("esxi_gpu_host_vgpu_mode")
    gpus = ", ".join("%s (%s)" % (i.detail("gpu"), i.before) for i in group)
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
    if item.field == "nvidia_module_options" and item.action == "set":
        message = "host %s vGPU scheduler is %s, the design says %s (RmPVMRL %s)" % (
            h["name"], _scheduler_words(item.before), wanted, rmpvmrl)
    else:
        message = "host %s vGPU scheduler cannot be set to %s: %s" % (h["name"], wanted, _reasons_text(group))
    return message, ("set the nvidia module option NVreg_RegistryDwords=RmPVMRL=%s (esxi_gpu_host role, "
                     "esxi_gpu_config) and reboot the host" % rmpvmrl)


def _text_reboot(h, want, group):
    return "host %s owes a reboot: %s" % (h["name"], _reasons_text(group)), None


def _text_maintenance(h, want, group):
    return "host %s was %s: its GPUs serve no VM" % (h["name"], group[0].reason), None


def _text_vms_off(h, want, group):
    return "host %s: %s" % (h["name"], group[0].reason), None


def _text_mig(h, want, group):
    return "host %s: %s" % (h["name"], group[0].reason), None


def _text_not_plannable(h, want, group):
    return "the design's settings cannot be planned on host %s: %s" % (h["name"], _reasons_text(group)), None


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
            None))


def _ssh_findings(out, name, gpu_hosts):
    running = sorted(h["name"] for h in gpu_hosts if h.get("ssh_service") == "running")
    if not running:
        return
    out.append(finding(
        "host_ssh_running", "cluster %s" % name,
        "GPU host(s) of cluster %s left with SSH (TSM-SSH) running: %s; security baselines keep it stopped"
        % (name, ", ".join(running)),
        None))


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
    pinning = pinning_inputs(derived)
    by_cluster = {}
    for h in hosts or []:
        by_cluster.setdefault(h.get("cluster"), []).append(h)
    for name, want in _audit.role_inputs(derived, "esxi_gpu_host").items():
        members = sorted(by_cluster.get(name, []), key=lambda h: h["name"])
        if not members:
            out.append(finding("cluster_missing", "cluster %s" % name, "cluster %s has no hosts in vCenter" % name,
                               None))
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


def pinning_inputs(derived):
    """Per cluster, :func:`_drs.plan_pinning`'s arguments as the drs_gpu_pinning role passes them
    (derive's ``drs_gpu_pinning`` role inputs: each cluster's entry over the role's defaults)."""
    role = _audit.role_inputs(derived, "drs_gpu_pinning")
    out = OrderedDict()
    for entry in role.get("drs_gpu_pinning_clusters") or []:
        out[entry["name"]] = dict(
            behavior=entry.get("behavior") or role.get("drs_gpu_pinning_behavior") or _drs.DEFAULT_BEHAVIOR,
            names=entry.get("vms"), exclude=entry.get("exclude") or [],
            purge_stale=entry.get("purge_stale", role.get("drs_gpu_pinning_purge_stale", False)))
    return out


def pinning_plan(gpu_hosts, drs, inputs):
    """The drs_gpu_pinning module's plan of one cluster (:func:`_drs.plan_pinning`) from the audit's read:
    the VMs holding a vGPU on its GPU hosts and the cluster's overrides. The audit reads no ownership
    record, so the plan removes nothing (purge_stale only ever removes the collection's own overrides of
    VMs without a vGPU: no GPU VM's drift)."""
    vms = [dict(moid=vm["moid"], name=vm["name"], vgpu_profiles=list(vm.get("vgpu_profiles") or []))
           for h in gpu_hosts for vm in h.get("vgpu_vms") or []]
    overrides = [dict(moid=moid, behavior=o.get("behavior"), enabled=o.get("enabled"))
                 for moid, o in sorted(((drs or {}).get("overrides") or {}).items())]
    return _drs.plan_pinning(vms, overrides, owned=None, **inputs)


def _cluster_pinning(out, name, gpu_hosts, drs, inputs):
    """The pinning findings of one cluster: one per override the drs_gpu_pinning plan adds or edits."""
    if drs is None:
        return
    if drs.get("enabled") is False or drs.get("overrides_enabled") is False:
        out.append(finding(
            "drs_overrides_disabled", "cluster %s" % name,
            "DRS or its per-VM overrides are disabled on cluster %s: the overrides of GPU VMs do not apply" % name,
            None))
    behavior = inputs["behavior"]
    try:
        plan = pinning_plan(gpu_hosts, drs, inputs)
    except _drs.DrsPlanError as exc:
        out.append(finding("gpu_vm_not_pinned", "cluster %s" % name,
                           "the DRS pinning of cluster %s cannot be planned: %s" % (name, exc),
                           "fix drs_gpu_pinning_clusters for cluster %s in the role inputs" % name))
        return
    where = dict((vm["moid"], (h["name"], vm)) for h in gpu_hosts for vm in h.get("vgpu_vms") or [])
    for entry in plan.add + plan.edit:
        host, vm = where[entry["moid"]]
        was = entry.get("was")
        if was in _drs.BEHAVIORS:
            out.append(finding(
                "gpu_vm_pin_behavior", "vm %s" % entry["name"],
                "VM %s is pinned %s, the design says %s" % (entry["name"], was, behavior),
                "drs_gpu_pinning cluster=%s behavior=%s" % (name, behavior)))
            continue
        state = "no DRS override" if "was" not in entry else (
            "a disabled DRS override" if was == "disabled" else "a %s DRS override" % was)
        out.append(finding(
            "gpu_vm_not_pinned", "vm %s" % entry["name"],
            "VM %s holds a vGPU (%s) on host %s and has %s: DRS may try to move it" % (
                entry["name"], ", ".join(vm.get("vgpu_profiles") or []), host, state),
            "pin it: drs_gpu_pinning cluster=%s behavior=%s" % (name, behavior)))


def ha_inputs(derived):
    """Per cluster, :func:`_ha.plan`'s wanted as the ha_gpu_restart role passes it (derive's role inputs)."""
    role = _audit.role_inputs(derived, "ha_gpu_restart")
    out = OrderedDict()
    for entry in role.get("ha_gpu_restart_clusters") or []:
        out[entry["name"]] = dict(cluster=entry["name"], pools=list(entry.get("pools") or []),
                                  admission_control=entry.get("admission_control"), exclude=entry.get("exclude") or [],
                                  adopt=bool(entry.get("adopt", role.get("ha_gpu_restart_adopt", False))))
    return out


def ha_plan(gpu_hosts, state, wanted):
    """The ha_gpu_restart module's plan of one cluster (:func:`_ha.plan`) from the audit's read: the VMs
    holding a vGPU on its GPU hosts, the cluster's HA settings, overrides and record."""
    vms = [dict(moid=vm["moid"], name=vm["name"], vgpu_profiles=list(vm.get("vgpu_profiles") or []))
           for h in gpu_hosts for vm in h.get("vgpu_vms") or []]
    live = dict(vms=vms, overrides=state.get("overrides") or {}, das=state.get("das"), owned=state.get("owned"))
    return _ha.plan(live, wanted)


def ha_findings(derived, hosts, ha):
    """The HA findings of every cluster the design manages HA of: one per change of its ha_gpu_restart plan,
    and one per setting someone else made that the plan leaves (``ha``: ``vsphere/_ha_api.read_ha_states``)."""
    out = []
    if ha is None:
        return out
    rule_of = dict((v, k) for k, v in HA_RULE_BY_CHANGE.items())
    for name, wanted in ha_inputs(derived).items():
        state = ha.get(name)
        if state is None:
            continue
        gpu_hosts = [h for h in hosts or [] if h.get("cluster") == name and h.get("gpu_count")]
        try:
            plan = ha_plan(gpu_hosts, state, wanted)
        except _ha.HaPlanError as exc:
            out.append(finding("ha_admission_control_off_design", "cluster %s" % name,
                               "the HA settings of cluster %s cannot be planned: %s" % (name, exc),
                               "fix ha_gpu_restart_clusters for cluster %s in the role inputs" % name))
            continue
        for change in plan.changes():
            rule = rule_of[(change.field, change.action)]
            out.append(finding(rule, change.object.lower() if change.object.startswith("VM ") else change.object,
                               _ha_message(name, change), None))
        for text in plan.kept_foreign:
            out.append(finding("ha_setting_foreign", text.split(":", 1)[0].replace("VM ", "vm ", 1), text, None))
    return out


def _ha_message(cluster, change):
    if change.field == "ha_admission_control":
        have, want = change.before or {}, change.after
        return ("cluster %s: HA %s, admission control %s (policy %s, failover level %s, CPU %s %%, memory %s %%); the "
                "spare rule keeps failover level %s, CPU %s %%, memory %s %%"
                % (cluster, "on" if have.get("ha_enabled") else "off", "on" if have.get("admission_control") else "off",
                   have.get("policy"), have.get("failover_level"), have.get("cpu_percent"), have.get("memory_percent"),
                   want["failover_level"], want["cpu_percent"], want["memory_percent"]))
    if change.field == "ha_owned":
        return "cluster %s: the record %s holds %s, what the collection owns is %s" % (
            cluster, _ha.RECORD_FIELD, ", ".join(change.before) or "nothing", ", ".join(change.after) or "nothing")
    if change.action == "create":
        return "%s of pool %s has no HA restart priority override; the design says %s" % (
            change.object, change.detail("pool"), change.after)
    if change.action == "update":
        return "%s of pool %s restarts at priority %s; the design says %s" % (
            change.object, change.detail("pool"), change.before, change.after)
    return "%s is no pool's node VM but keeps the HA override %s the collection set" % (change.object, change.before)
