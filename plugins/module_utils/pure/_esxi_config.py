# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What esxi_gpu_config decides about a host, from what it read (pure: no I/O, no Ansible).

* The read in the collection's words: :func:`graphics_view` (a GraphicsConfig), :func:`vgpu_modes_view`
  (``config.graphicsInfo``), :func:`direct_path_modes_view` (direct-path-devices' ``current_mode``).
* The vGPU mode: :func:`busy_gpus` (refused on a GPU that carries powered-on vGPU VMs),
  :func:`rest_modes`, :func:`other_graphics_changed`, :func:`vgpu_mode_changed`, :func:`predict_impacts`
  (the direct-path-devices answer, predicted), :func:`vgpu_mode_refusal` (the message of a refused change).
* The scheduler option: :func:`scheduler_option`, :func:`needs_profiles`.
* Host MIG mode: :func:`host_mig_plan`, :func:`mig_change` and :func:`mig_reason` (in words),
  :func:`mig_words`.
* One host's plan: :func:`plan_host` (graphics, vGPU mode, scheduler, MIG, a reboot owed, VMs left off),
  :func:`host_error` (what stops it), and its changes as ``_plan.Change``: :func:`host_changes`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _direct_path, _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import GRAPHICS_WORD_BY_API as VIM_TO_WORD
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure


def graphics_view(cfg):
    """A host's GraphicsConfig (``hostDefaultGraphicsType``, ``sharedPassthruAssignmentPolicy``,
    ``deviceType``) in the collection's words: dict(default_type, assignment_policy, device_types {pci: type});
    None when it was not read."""
    if cfg is None:
        return None
    return dict(
        default_type=VIM_TO_WORD.get(cfg.hostDefaultGraphicsType, cfg.hostDefaultGraphicsType),
        assignment_policy=cfg.sharedPassthruAssignmentPolicy,
        device_types=dict((d.deviceId, VIM_TO_WORD.get(d.graphicsType, d.graphicsType)) for d in cfg.deviceType or []),
    )


def vgpu_modes_view(host, pcis):
    """{pci: vGPU mode word} of the host's NVIDIA GPUs (``config.graphicsInfo[].vgpuMode``); a GPU whose mode
    the API does not report is left out."""
    infos = dict((i.pciId, i) for i in host.get("config.graphicsInfo") or [])
    modes = dict((pci, _esxi.vgpu_mode_word(getattr(infos.get(pci), "vgpuMode", None))) for pci in pcis)
    return dict((pci, mode) for pci, mode in modes.items() if mode is not None)


def vgpu_mode_refusal(host, exc):
    """The message of a graphics change the host refused while its vGPU mode was to change: which GPUs were
    left in which mode, and what lets the change through."""
    before = (host["current"] or {}).get("vgpu_modes") or {}
    wanted = host["desired"].get("vgpu_modes") or {}
    left = ["%s (left %s, asked %s)" % (pci, before.get(pci), mode) for pci, mode in sorted(wanted.items())
            if before.get(pci) != mode]
    return ("Unable to set the vGPU mode of the GPUs of host %s: %s. Its graphics configuration was not "
            "changed by the refused call; GPUs left in their mode: %s. The vGPU mode of a GPU changes only while "
            "no powered-on VM holds a "
            "vGPU on it: power off the host's vGPU VMs (or roll the host through maintenance mode with the "
            "esxi_gpu_host role, esxi_gpu_host_power_off_vgpu_vms) and rerun" % (host["name"], exc, ", ".join(left)))


def busy_gpus(item, desired):
    """Refuse (before any change, in check mode too) a vGPU mode change on a GPU that carries powered-on vGPU
    VMs: the host would refuse it."""
    before = (item["current"] or {}).get("vgpu_modes") or {}
    busy = ["GPU %s (VMs %s; left %s, asked %s)" % (pci, ", ".join(item["vms_on_gpu"][pci]), before.get(pci), mode)
            for pci, mode in sorted((desired.get("vgpu_modes") or {}).items())
            if before.get(pci) != mode and (item.get("vms_on_gpu") or {}).get(pci)]
    if busy:
        raise _esxi.EsxiError(
            "host %s keeps the vGPU mode of its GPUs that carry powered-on vGPU VMs (the mode changes only while no "
            "powered-on VM holds a vGPU on the GPU): %s. Power off the "
            "host's vGPU VMs (or roll the host through maintenance mode with the esxi_gpu_host role, "
            "esxi_gpu_host_power_off_vgpu_vms) and rerun" % (item["name"], "; ".join(busy)))


def vgpu_mode_changed(host):
    before = (host["current"] or {}).get("vgpu_modes") or {}
    return any(before.get(pci) != mode for pci, mode in (host["desired"].get("vgpu_modes") or {}).items())


def direct_path_modes_view(soap_modes, devices, pcis):
    """{pci: vGPU mode word} with the mode of each GPU as direct-path-devices reads it (``current_mode``); a GPU
    in MIG mode (``multi_instance_gpu`` in the hosts' retrieval) or one the API does not list in a vGPU mode keeps
    what the retrieval read."""
    out = dict(soap_modes)
    for pci in pcis:
        word = _direct_path.WORD_BY_REST_MODE.get((devices.get(pci) or {}).get("current_mode"))
        if word is not None and out.get(pci) != _esxi.VGPU_MODE_MIG:
            out[pci] = word
    return out


def rest_modes(current, desired):
    """{pci: vGPU mode word} of the GPUs whose mode changes (sent through direct-path-devices)."""
    before = (current or {}).get("vgpu_modes") or {}
    return dict((pci, mode) for pci, mode in sorted((desired.get("vgpu_modes") or {}).items())
                if before.get(pci) != mode)


def other_graphics_changed(current, desired):
    """Whether anything but the vGPU modes changes in the graphics configuration (UpdateGraphicsConfig)."""
    def rest(view):
        return dict((k, v) for k, v in (view or {}).items() if k != "vgpu_modes")
    return rest(current) != rest(desired)


def scheduler_option(sched):
    """The scheduler option, None when it sets nothing; its input errors first, whatever the hosts."""
    if sched is not None and sched.get("policy") is None and not sched.get("per_gpu") \
            and sched.get("time_slice_ms") is None:
        sched = None
    if sched is not None and sched.get("time_slice_ms") is not None and sched.get("policy") is None:
        raise Failure("scheduler.time_slice_ms needs scheduler.policy")
    try:
        _esxi.validate_scheduler(sched)
    except _esxi.EsxiError as exc:
        raise Failure("Invalid scheduler: %s" % exc)
    return sched


def needs_profiles(sched):
    """Whether the scheduler asks for fixed share somewhere (refused next to mixed vGPU sizes)."""
    return "fixed_share" in [sched.get("policy")] + [e.get("policy") for e in sched.get("per_gpu") or []]


def host_changes(name, host):
    """The plan's changes of one host: its graphics, its module options, a reboot owed."""
    out = []
    if host["graphics_changed"]:
        out.append(Change(name, "graphics", host["current"], host["desired"]))
    if host["opt_changed"]:
        out.append(Change(name, "nvidia_module_options", host["options"], host["new_options"]))
    if host["reboot_owed"]:
        out.append(Change(name, "reboot", host["pending"], [], "reboot"))
    if host["mig_changed"]:
        out.append(Change(name, "mig_mode", mig_words(host["mig"]["before"]), mig_words(host["mig"]["after"])))
    if host["left_off"]:
        out.append(Change(name, "vms_powered_off", [v["name"] for v in host["left_off"]], [], "power_on"))
    return out


def mig_words(modes):
    """{index: enabled|disabled} with the indexes as text, as the result shows them."""
    return dict((str(i), _esxi.mig_word(on)) for i, on in sorted(modes.items()))


def gpu_list(indexes):
    return ", ".join(str(i) for i in sorted(indexes)) or "none"


def mig_change(mig):
    """What a host's MIG plan changes, in words ("disabled -> enabled on GPU 2, 3 and ...")."""
    parts = []
    if mig["enable_all"]:
        parts.append("disabled -> enabled on GPU %s" % gpu_list(mig["enable_all"]))
    if mig["disable_all"]:
        parts.append("enabled -> disabled on GPU %s" % gpu_list(mig["disable_all"]))
    if not parts:  # only a reset owed: nvidia-smi set it earlier, it runs after a reboot
        parts.append("pending on GPU %s" % gpu_list(mig["reset"]))
    return " and ".join(parts)


def mig_reason(mig):
    """The MIG change of a host and how it is made, in words."""
    return "MIG mode %s: maintenance mode, nvidia-smi, a reboot if a GPU keeps it pending, read back before " \
           "the host leaves maintenance mode" % mig_change(mig)


def host_mig_plan(rows, geometry_indexes=None, enabled=None, gpu_indexes=None):
    """What the GPUs of a host (:func:`_esxi.parse_mig_query` rows, from the API or nvidia-smi) need:
    {enable, disable, set, reset, before, after, enable_all, disable_all}. ``geometry_indexes``: the GPUs
    the design's MIG geometry puts in MIG mode on this host (None: no geometry, then ``enabled`` and
    ``gpu_indexes``, the mig_mode and mig_gpu_indexes options, decide); :class:`_esxi.EsxiError` when it
    cannot be made."""
    if geometry_indexes is not None:
        mig = _esxi.mig_geometry_plan(rows, geometry_indexes)
    else:
        mig = _esxi.mig_plan(rows, enabled, gpu_indexes)
        mig["enable"], mig["disable"] = (mig["set"], []) if enabled else ([], mig["set"])
        mig["after"] = dict((i, enabled) for i in mig["before"])
    mig["set"] = sorted(mig["enable"] + mig["disable"])
    # every GPU whose mode changes (set now, or set earlier and pending), by direction
    changing = set(mig["set"]) | set(mig["reset"])
    mig["enable_all"] = sorted(i for i in changing if mig["after"].get(i))
    mig["disable_all"] = sorted(i for i in changing if not mig["after"].get(i))
    return mig


def predict_impacts(item, desired):
    """{pci: impacts} the direct-path-devices configure of each GPU whose vGPU mode changes would have
    (:func:`_direct_path.predict_impacts` from the host's Info, ``item["devices"]``); a mode the device cannot
    take, or a change that needs maintenance mode on a host that is not in it, is refused
    (:class:`_esxi.EsxiError`) before any change."""
    impacts = {}
    for pci, word in rest_modes(item["current"], desired).items():
        try:
            impacts[pci] = _direct_path.predict_impacts((item.get("devices") or {}).get(pci), word)
        except _direct_path.DirectPathError as exc:
            raise _esxi.EsxiError("GPU %s: %s" % (pci, exc))
    refusal = _direct_path.maintenance_refusal(item["name"], impacts, bool(item["in_maintenance"]))
    if refusal:
        raise _esxi.EsxiError(refusal)
    return impacts


def host_error(name, exc, one_host):
    """What stops the plan of host ``name`` in words: the error as it is for the one host asked (or when it
    names the host already), else prefixed with the host's name."""
    text = str(exc)
    return text if one_host or text.startswith("host %s " % name) else "host %s: %s" % (name, text)


def plan_host(item, params, sched, mig, direct):
    """(the host's plan, None), or (None, what stops it), from what esxi_gpu_config read of the host (``item``:
    its record of the module's read, with ``error`` / ``state_error`` for a part that could not be read),
    the module's ``params``, the checked scheduler option ``sched`` (:func:`scheduler_option`), the host's
    MIG plan ``mig`` (:func:`host_mig_plan`, None when MIG is not managed) and whether the vGPU mode goes
    through direct-path-devices (``direct``: the impacts are predicted, :func:`predict_impacts`).

    The plan is a dict: ``current`` / ``desired`` graphics, ``changes`` (in words), ``options`` /
    ``new_options``, ``pending`` (the reboot owed), what the steps send (``rest_modes``, ``soap_graphics``)
    and the flags the apply and the result read (``graphics_changed``, ``options_changed``, ``reboot_owed``,
    ``mig_changed`` ...)."""
    p, name = params, item["name"]
    options = new_options = None
    opt_changed = False
    try:
        desired, changes = _esxi.graphics_plan(item["current"], item["pcis"], p["graphics_type"],
                                               p["assignment_policy"], p["vgpu_mode"])
        graphics_changed = bool(changes)
        if (p["vgpu_mode"] is not None or sched is not None) and item.get("error") is not None:
            return None, host_error(name, item["error"], bool(p["host"]))
        if p["vgpu_mode"] is not None:
            busy_gpus(item, desired)
            if direct:
                item["impacts"] = predict_impacts(item, desired)
        if sched is not None:
            options = item["options"]
            if options is None:
                raise _esxi.EsxiError("the nvidia kernel module is not on the host: install the NVIDIA host driver "
                                      "first")
            new_options, opt_changed = _esxi.scheduler_plan(options, sched, item["pcis"], item.get("profiles"))
            if opt_changed:
                changes.append("nvidia module options %r -> %r" % (options, new_options))
        if mig is not None and (mig["set"] or mig["reset"]):
            changes.append("MIG mode %s" % mig_change(mig))
    except _esxi.EsxiError as exc:
        return None, host_error(name, exc, bool(p["host"]))
    if item.get("state_error") is not None:
        return None, "host %s: %s" % (name, item["state_error"])
    pending = _esxi.pending_reboot(item["reboot_required"], item["boot_time"], item["state"])
    if pending and p["reboot"]:
        changes.append("reboot owed since an earlier run: %s" % "; ".join(pending))
    left_off = item.get("left_off") or []
    if left_off:
        changes.append("power on the VMs an earlier reboot powered off: %s" % ", ".join(v["name"] for v in left_off))
    impacts = item.get("impacts")
    return dict(host=item["host"], name=name, in_maintenance=bool(item["in_maintenance"]), current=item["current"],
                desired=desired, changes=changes, pending=pending,
                impacts=impacts, rest_modes=rest_modes(item["current"], desired) if impacts is not None else {},
                soap_graphics=graphics_changed and (impacts is None
                                                    or other_graphics_changed(item["current"], desired)),
                options=options, new_options=new_options, graphics_changed=graphics_changed,
                opt_changed=opt_changed, reboot_owed=bool(pending and p["reboot"]), left_off=left_off, stuck=[],
                mig=mig, mig_changed=bool(mig and (mig["set"] or mig["reset"])),
                ssh_running=item.get("ssh_running"), mig_rows=item.get("mig_rows") or [],
                options_changed=new_options is not None and new_options != (options or "")), None


def mig_report(host):
    """The host's MIG modes and change in the result (None when MIG mode is not managed)."""
    mig = host["mig"]
    if mig is None:
        return None
    return dict(before=mig_words(mig["before"]), after=mig_words(mig["after"]), changed=host["mig_changed"],
                enabled=mig["enable_all"], disabled=mig["disable_all"], set=mig["set"], reset=mig["reset"],
                reason=mig_reason(mig) if host["mig_changed"] else "MIG mode as asked on every GPU")


def ssh_prediction(host):
    """ssh_service in the result before the run: what the MIG step will do with the service."""
    if not host["mig_changed"]:
        return "not used"
    running = host["ssh_running"]
    return "not listed by the host" if running is None else "already running" if running else "started and stopped"


# HostLockdownMode values that limit SSH to the exception users
LOCKDOWN_ON = ("lockdownNormal", "lockdownStrict")


def lockdown_refusal(item, ssh_user):
    """Why the host's shell cannot be reached by ``ssh_user`` in lockdown mode (None when it can)."""
    mode = item.get("lockdown")
    if mode not in LOCKDOWN_ON:
        return None
    if item.get("lockdown_error") is not None:
        return "host %s is in lockdown mode %s and its exception users could not be read (%s)" % (
            item["name"], mode, item["lockdown_error"])
    users = item.get("lockdown_exceptions") or []
    if ssh_user in users:
        return None
    return ("host %s is in lockdown mode %s: its SSH admits only the lockdown exception users (%s), not %s; "
            "add %s to the host's exception users (vCenter: the host, Configure > System > Security Profile > "
            "Lockdown Mode > Exception Users), or run with ssh.user set to a user on the list" % (
                item["name"], mode, ", ".join(users) or "none", ssh_user, ssh_user))


def turn_what(item):
    """What the host is taken down for, in words."""
    parts = (["the new scheduler"] if item["options_changed"] or item["pending"] else []) + \
        (["MIG mode"] if item["mig_changed"] else [])
    return " and ".join(parts) or "the new scheduler"


def smi_rows(rows, vsphere_rows):
    """nvidia-smi's ``rows`` of a host with the GPUs numbered as vCenter's read (``vsphere_rows``) numbers them
    (PCI address order, as the geometry's indexes are), and {that index: nvidia-smi's own index} for its
    commands; matched by PCI address, so the two agree even where nvidia-smi would number the GPUs otherwise.
    A GPU vCenter does not list: nvidia-smi's rows and numbers as they are."""
    by_pci = dict((r["pci_id"].lower(), r["index"]) for r in vsphere_rows)
    out, smi = [], {}
    for row in rows:
        pci = row["pci_id"].lower()[-12:]  # nvidia-smi: 00000000:3B:00.0, vSphere: 0000:3b:00.0
        index = by_pci.get(pci)
        if index is None:
            return rows, dict((r["index"], r["index"]) for r in rows)
        out.append(dict(row, index=index))
        smi[index] = row["index"]
    return sorted(out, key=lambda r: r["index"]), smi


def mig_left(item):
    """What a failed MIG step left: the SSH service and the MIG modes nvidia-smi set (result keys)."""
    return dict(ssh_service=item.get("ssh_service", "not used"),
                mig_set=dict((str(i), _esxi.mig_word(on)) for i, on in item.get("mig_set") or []))


def mig_left_words(item, service):
    """:func:`mig_left` in words, ``service`` the name of the host's SSH service."""
    left = mig_left(item)
    return "; SSH service %s: %s; MIG mode set so far: %s (a plain rerun resumes)" % (
        service, left["ssh_service"], ", ".join("GPU %s %s" % kv for kv in sorted(left["mig_set"].items())) or "none")


def report_mig(report, item):
    """The result of a host whose MIG step ran: the service, what nvidia-smi set."""
    report["ssh_service"] = item.get("ssh_service", "not used")
    report["mig"]["set"] = sorted(i for i, _on in item.get("mig_set") or [])


__all__ = ["LOCKDOWN_ON", "busy_gpus", "direct_path_modes_view", "gpu_list", "graphics_view", "host_changes",
           "host_error", "host_mig_plan", "lockdown_refusal", "mig_change", "mig_left", "mig_left_words", "mig_reason",
           "mig_report", "mig_words", "needs_profiles", "other_graphics_changed", "plan_host", "predict_impacts",
           "report_mig", "rest_modes", "scheduler_option", "smi_rows", "ssh_prediction", "turn_what",
           "vgpu_mode_changed", "vgpu_mode_refusal", "vgpu_modes_view"]
