# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the pure ESXi host logic (_esxi.py), for the esxi_gpu_host role and playbooks.

Each filter is documented in the <filter name>.yml file next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _nvidia, _vm_class
from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters


def _gpu_hosts(hosts):
    return [h for h in hosts or [] if h.get("gpu_count")]


def _versions(hosts):
    return dict((h["name"], ((h.get("driver") or {}).get("version"))) for h in _gpu_hosts(hosts))


def driver_version_gate(hosts, target=None):
    try:
        return _esxi.version_gate(_versions(hosts), target or None)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))


def design_driver_version(hosts, exclude=(), target=None):
    if isinstance(exclude, str):
        exclude = [exclude]
    try:
        return _esxi.design_version(_versions(hosts), target or None, exclude=exclude)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))


def roll_capacity(hosts, min_gpus=0, force=False):
    gpu_hosts = _gpu_hosts(hosts)
    unavailable = [h["name"] for h in gpu_hosts
                   if h.get("connection_state") != "connected"]
    allowed, message = _esxi.roll_capacity(dict((h["name"], h["gpu_count"]) for h in gpu_hosts),
                                           int(min_gpus or 0), bool(force), unavailable)
    return dict(allowed=allowed, message=message)


def driver_version_compare(a, b):
    try:
        return _esxi.compare_versions(a, b)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))


def mig_mode_commands(enabled, indexes=None):
    try:
        return _esxi.mig_mode_commands(enabled, indexes)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))


def common_scheduler(hosts, exclude=()):
    """The scheduler (policy, time slice) most other GPU hosts run, for esxi_gpu_config; {} on a tie or none."""
    if isinstance(exclude, str):
        exclude = [exclude]
    counts = {}
    for h in _gpu_hosts(hosts):
        sched = h.get("scheduler") or {}
        if h["name"] in exclude or not sched.get("policy"):
            continue
        key = (sched["policy"], sched.get("time_slice_ms"))
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return {}
    policy, time_slice = ranked[0][0]
    out = dict(policy=policy)
    if time_slice is not None and policy != "best_effort":
        out["time_slice_ms"] = time_slice
    return out


def _class_profiles(cls):
    """The vGPU profiles of one VM class: a normal form (the vm_class module's result, a design entry)
    is taken as it is; an API Info (config_spec.deviceChange or devices.vgpu_devices) is read as the
    vm_class module reads it back."""
    if "vgpu_profiles" in cls:
        return [p.lower() for p in cls.get("vgpu_profiles") or [] if p]
    return _vm_class.normalize(cls)["vgpu_profiles"]


def _model_stems(models):
    """vGPU type stems (H100, H100XM, ...) of the GPU models named, or None when one is not in the catalog."""
    if isinstance(models, str):
        models = models.split(",")
    stems = set()
    for name in models:
        try:
            stems.update(_nvidia.gpu_model(name.strip()).vgpu_stems)
        except _nvidia.NvidiaError:
            return None
    return stems


def vm_class_vgpu_profiles(classes, namespaces=None, gpu_models=None):
    """Profiles named by VM classes, in the shapes the vm_class module writes and the API returns."""
    if namespaces is not None and isinstance(namespaces, str):
        namespaces = [namespaces]
    stems = _model_stems(gpu_models) if gpu_models else None
    out = set()
    for cls in classes or []:
        if not isinstance(cls, dict):
            raise AnsibleFilterError("vm_class_vgpu_profiles: a VM class must be a mapping, not %r" % (cls,))
        if namespaces is not None and not set(cls.get("namespaces") or []) & set(namespaces):
            continue
        for profile in _class_profiles(cls):
            try:
                stem = _nvidia.parse_profile(profile).gpu
            except _nvidia.NvidiaError as exc:
                raise AnsibleFilterError("vm_class_vgpu_profiles: VM class %s: %s"
                                         % (cls.get("id") or cls.get("name"), exc))
            if stems is None or stem in stems:
                out.add(profile)
    return sorted(out)


def _changes(name, items):
    """A host's plan as the role hands it back (the to_dict form of its changes) read as _plan.Change."""
    if not isinstance(items, list):
        raise AnsibleFilterError("%s: the host's plan items must be a list, not %r" % (name, items))
    try:
        return _esxi.as_changes(items)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc))


def _plan_out(items):
    """A host's plan as it crosses into Jinja: each change's to_dict."""
    return [c.to_dict() for c in items]


def _turn_out(turn):
    """A host's turn (_esxi.host_turns) with its changes in their to_dict form."""
    return dict(turn, changes=_plan_out(turn["changes"]),
                plan=dict((part, _plan_out(items)) for part, items in turn["plan"].items()))


def esxi_host_drain_vms(info, host, items, reboot=True):
    """The node VMs whose guest nodes a host's turn must drain first ([] when its turn keeps it out of
    maintenance mode, or vCenter migrates its vGPU VMs)."""
    record = [h for h in (info or {}).get("hosts") or [] if h.get("name") == host]
    if not record:
        raise AnsibleFilterError("host %s is not in the gpu_host_info result" % host)
    if not _esxi.needs_maintenance(_changes("esxi_host_drain_vms", items), bool(reboot)):
        return []
    return _esxi.vms_going_down(record[0], bool((info or {}).get("vgpu_hotmigrate")))


def esxi_turn_window(items, reboot=True):
    """How a host's turn goes through maintenance mode (_esxi.turn_window of its plan items)."""
    return _esxi.turn_window(_changes("esxi_turn_window", items), bool(reboot))


def esxi_hosts_to_roll(hosts, target, graphics_type=None, assignment_policy=None, scheduler=None,
                       allow_downgrade=False, only=None, always=False, driver=True, mig=None, vgpu_mode=None):
    try:
        plans = _esxi.hosts_to_roll(hosts, target, graphics_type or None, assignment_policy or None,
                                    scheduler or None, bool(allow_downgrade), only or None, bool(always), bool(driver),
                                    mig or None, vgpu_mode=vgpu_mode or None)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))
    return dict((name, _plan_out(items)) for name, items in plans.items())


def esxi_host_turns(info, spec):
    """Each GPU host's turn in a roll of one cluster, planned once (_esxi.host_turns): one mapping of inputs."""
    if not isinstance(spec, dict):
        raise AnsibleFilterError("esxi_host_turns: the argument must be one mapping (vars, target, hosts, mig, driver, "
                                 "direct, reboot), not %r" % (spec,))
    if not isinstance(info, dict) or not isinstance(info.get("hosts"), list):
        raise AnsibleFilterError("esxi_host_turns: the input must be the result of gpupool.vcf.gpu_host_info, "
                                 "with its hosts list")
    try:
        turns = _esxi.host_turns(info, spec)
    except _esxi.EsxiError as exc:
        raise AnsibleFilterError(str(exc))
    return dict((name, _turn_out(turn)) for name, turn in turns.items())


class FilterModule(object):
    def filters(self):
        return plain_filters({
            "esxi_host_drain_vms": esxi_host_drain_vms,
            "driver_version_gate": driver_version_gate,
            "design_driver_version": design_driver_version,
            "roll_capacity": roll_capacity,
            "driver_version_compare": driver_version_compare,
            "mig_mode_commands": mig_mode_commands,
            "vm_class_vgpu_profiles": vm_class_vgpu_profiles,
            "common_scheduler": common_scheduler,
            "esxi_hosts_to_roll": esxi_hosts_to_roll,
            "esxi_turn_window": esxi_turn_window,
            "esxi_host_turns": esxi_host_turns,
        })
