#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: esxi_gpu_config
short_description: Graphics configuration and vGPU scheduler of ESXi GPU hosts
version_added: 0.1.0
description:
  - Sets, on one host or on every NVIDIA GPU host of a cluster, the host default graphics
    type and the graphics type of every NVIDIA GPU (C(UpdateGraphicsConfig)), the shared
    passthrough assignment policy, and the vGPU scheduler policy.
  - The scheduler is the C(RmPVMRL) registry value in the C(nvidia) kernel module options
    (C(NVreg_RegistryDwords) for every GPU, C(NVreg_RegistryDwordsPerDevice) per GPU). The
    value is merged into the options already there; everything else in them is kept.
    Module options take effect when the host reboots; the result says O(reboot)-less runs
    need one with RV(reboot_required).
  - Only the options given are compared and changed; hosts already as asked are left alone.
  - Fixed share on a GPU that carries time-sliced vGPUs of different sizes (powered-on VMs
    placed on it) is refused, as NVIDIA does not support it.
  - Host MIG mode (O(mig_mode)) is read and set with C(nvidia-smi) in the host's shell over SSH
    (vSphere has no API for it), only in maintenance mode. With O(reboot) the host's VMs that
    hold vGPUs are powered off (O(power_off_vgpu_vms)), the host enters maintenance mode, the
    GPUs whose mode differs are set, the host reboots when a GPU only has the new mode pending
    (Ampere GPUs such as A100; Hopper and later take it at once when idle), the mode is read back
    and verified, and only then the host leaves maintenance mode and the VMs are powered on.
  - All hosts are read and every check is made before the first change.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
options:
  host:
    description: Name of one ESXi host. Mutually exclusive with O(cluster).
    type: str
  cluster:
    description: Name of a cluster; every host of it with an NVIDIA GPU is configured.
    type: str
  graphics_type:
    description:
      - Host default graphics type and the type of every NVIDIA GPU. vGPU needs V(shared_direct)
        (Shared Direct, C(sharedDirect) in the API).
    type: str
    choices: [shared_direct, shared]
  assignment_policy:
    description:
      - How vGPU VMs are placed on the GPUs of a host. V(performance) spreads them over the GPUs,
        V(consolidation) fills one GPU before the next (density).
    type: str
    choices: [performance, consolidation]
  scheduler:
    description: The vGPU scheduler. Leave out to leave the scheduler alone.
    type: dict
    suboptions:
      policy:
        description: Policy for every GPU of the host. Leave out to change only O(scheduler.per_gpu).
        type: str
        choices: [best_effort, equal_share, fixed_share]
      time_slice_ms:
        description: Time slice in ms (1-30) for equal_share or fixed_share; left out, NVIDIA's default.
        type: int
      per_gpu:
        description: Policy for single GPUs, by PCI address; other GPUs are left alone.
        type: list
        elements: dict
        suboptions:
          pci_id:
            description: PCI address of the GPU (V(0000:3b:00.0)).
            type: str
            required: true
          policy:
            description: Scheduler policy of this GPU.
            type: str
            required: true
            choices: [best_effort, equal_share, fixed_share]
          time_slice_ms:
            description: Time slice in ms (1-30).
            type: int
  mig_mode:
    description:
      - Host MIG mode of the host's GPUs, read and set with C(nvidia-smi) over SSH (O(ssh)). Leave out
        to leave MIG mode alone. GPUs without MIG (L40S) are skipped for V(disabled) and refused for V(enabled).
      - A change needs maintenance mode. With O(reboot) the module takes the host there (see above);
        without, a host not in maintenance mode is refused before any change.
    type: str
    choices: [enabled, disabled]
  mig_gpu_indexes:
    description: GPU indexes (as nvidia-smi numbers them) whose MIG mode is managed; left out, every GPU.
    type: list
    elements: int
  ssh:
    description: How the module reaches each host's shell (OpenSSH client, key authentication, no password) for O(mig_mode).
    type: dict
    suboptions:
      user:
        description: User name on the host.
        type: str
        default: root
      port:
        description: SSH port of the hosts.
        type: int
        default: 22
      private_key_file:
        description: Private key file; left out, the SSH client's own keys and agent.
        type: path
      known_hosts_file:
        description: Known hosts file to check the hosts' keys against; left out, the SSH client's own.
        type: path
      host_key_checking:
        description: Check the hosts' keys. V(false) accepts any host key (test rigs only).
        type: bool
        default: true
      addresses:
        description: Address (V(address) or V(address:port)) per host name, for hosts reached at another address than their vCenter name.
        type: dict
      timeout:
        description: Seconds to connect (a command may take twice that).
        type: int
        default: 30
  reboot:
    description:
      - With O(host) only. When this run changed the module options, put the host in
        maintenance mode, reboot it, wait for it, and take it out of maintenance mode (if it
        was not in maintenance mode before). Fails before any change when powered-on VMs
        holding vGPUs are on the host and cannot be migrated (vCenter's advanced setting
        C(vgpu.hotmigrate.enabled)), unless O(power_off_vgpu_vms).
      - Also powers on the VMs an earlier reboot of this collection powered off and left off
        (recorded on the host).
      - With O(mig_mode), a MIG mode change takes the same path (maintenance mode, VMs powered off),
        rebooting only when a GPU has the new mode pending.
    type: bool
    default: false
  power_off_vgpu_vms:
    description:
      - With O(reboot), power off the powered-on VMs holding vGPUs that cannot be migrated
        before the host enters maintenance mode, and power them on again after the host is
        back. Each VM is recorded on the host (custom attribute C(gpupool.vcf.host-state))
        before it goes off, so a rerun powers on what a failure left off.
    type: bool
    default: false
  evacuate_timeout:
    description: Seconds vCenter may take to evacuate the host before a reboot.
    type: int
    default: 1800
  reboot_timeout:
    description: Seconds to wait for the host to reconnect after a reboot.
    type: int
    default: 1800
attributes:
  check_mode:
    description: Reports the changes each host would get without making them.
    support: full
  diff_mode:
    description: Returns the graphics configuration and the nvidia module options of each host before and after.
    support: full
notes:
  - A new graphics type is used by VMs powered on after the change once the host's graphics
    service (xorg) restarted or the host rebooted.
"""

EXAMPLES = r"""
- name: Shared Direct, consolidation, fixed share with a 3 ms slice on every GPU host of a cluster
  gpupool.vcf.esxi_gpu_config:
    cluster: gpu-h100
    graphics_type: shared_direct
    assignment_policy: consolidation
    scheduler:
      policy: fixed_share
      time_slice_ms: 3
  register: cfg

- name: Equal share on one GPU only, and reboot when needed
  gpupool.vcf.esxi_gpu_config:
    host: esx-h100-01.example.com
    scheduler:
      per_gpu:
        - pci_id: "0000:3b:00.0"
          policy: equal_share
          time_slice_ms: 2
    reboot: true
"""

RETURN = r"""
reboot_required:
  description:
    - Whether a host needs a reboot for new module options, changed by this run or by an earlier
      one whose reboot did not happen yet (false after O(reboot) rebooted it).
    - The module remembers an owed reboot on the host (custom attribute C(gpupool.vcf.host-state),
      the boot in which the options were changed), so a rerun with O(reboot) still reboots it.
  returned: always
  type: bool
hosts:
  description: Per host configured (name as key).
  returned: always
  type: dict
  sample:
    esx-h100-01:
      changes: ["host default graphics type shared -> shared_direct", "nvidia module options"]
      graphics: {default_type: shared_direct, assignment_policy: performance, device_types: {"0000:3b:00.0": shared_direct}}
      nvidia_module_options: "NVreg_RegistryDwords=RmPVMRL=0x00030011"
      reboot_required: true
      rebooted: false
      powered_off_vms: []
      mig: {before: {"0": disabled}, after: enabled, set: [0], reason: "MIG mode disabled -> enabled on GPU 0"}
skipped_hosts:
  description: Hosts of the cluster without an NVIDIA GPU or not connected.
  returned: always
  type: list
  elements: str
diff:
  description: Before and after per host (with C(--diff)).
  returned: when diff mode is on
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_shell import EsxiShell, ShellError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import gpu_pci_ids
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import GRAPHICS_WORD_BY_API as VIM_TO_WORD
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_api import GpuConfigApi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    host=dict(type="str"),
    cluster=dict(type="str"),
    graphics_type=dict(type="str", choices=["shared_direct", "shared"]),
    assignment_policy=dict(type="str", choices=["performance", "consolidation"]),
    scheduler=dict(type="dict", options=dict(
        policy=dict(type="str", choices=["best_effort", "equal_share", "fixed_share"]),
        time_slice_ms=dict(type="int"),
        per_gpu=dict(type="list", elements="dict", options=dict(
            pci_id=dict(type="str", required=True),
            policy=dict(type="str", required=True, choices=["best_effort", "equal_share", "fixed_share"]),
            time_slice_ms=dict(type="int"),
        )),
    )),
    mig_mode=dict(type="str", choices=["enabled", "disabled"]),
    mig_gpu_indexes=dict(type="list", elements="int"),
    ssh=dict(type="dict", options=dict(
        user=dict(type="str", default="root"),
        port=dict(type="int", default=22),
        private_key_file=dict(type="path"),
        known_hosts_file=dict(type="path"),
        host_key_checking=dict(type="bool", default=True),
        addresses=dict(type="dict"),
        timeout=dict(type="int", default=30),
    )),
    reboot=dict(type="bool", default=False),
    power_off_vgpu_vms=dict(type="bool", default=False),
    evacuate_timeout=dict(type="int", default=1800),
    reboot_timeout=dict(type="int", default=1800),
)


def graphics_view(cfg):
    if cfg is None:
        return None
    return dict(
        default_type=VIM_TO_WORD.get(cfg.hostDefaultGraphicsType, cfg.hostDefaultGraphicsType),
        assignment_policy=cfg.sharedPassthruAssignmentPolicy,
        device_types=dict((d.deviceId, VIM_TO_WORD.get(d.graphicsType, d.graphicsType)) for d in cfg.deviceType or []),
    )


def scheduler_option(sched):
    """The scheduler option, None when it sets nothing; its input errors first, whatever the hosts."""
    if sched is not None and sched.get("policy") is None and not sched.get("per_gpu") and sched.get("time_slice_ms") is None:
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
        out.append(Change(name, "mig_mode", dict((str(i), _esxi.mig_word(c)) for i, c in sorted(host["mig"]["before"].items())),
                          host["mig"]["after"]))
    if host["left_off"]:
        out.append(Change(name, "vms_powered_off", [v["name"] for v in host["left_off"]], [], "power_on"))
    return out


class GpuConfig(Resource):
    """Graphics and vGPU scheduler of one host or of the GPU hosts of a cluster: every host read and
    checked before the first change; a reboot owed is remembered on the host."""

    verb = "configure the GPUs of"

    def __init__(self, module):
        self.p = module.params
        Resource.__init__(self, "host %s" % self.p["host"] if self.p["host"] else "cluster %s" % self.p["cluster"])
        self.module = module
        self.sched = None
        self.api = None
        self.shell = EsxiShell(self.p["ssh"])
        self.mig = None if self.p["mig_mode"] is None else self.p["mig_mode"] == "enabled"

    def read(self):
        """Every host with what the plan needs of it; a host's read error is kept for the plan's message."""
        p = self.p
        self.sched = scheduler_option(p["scheduler"])
        if p["reboot"] and not p["host"]:
            raise Failure("reboot is only allowed with host (hosts of a cluster are rebooted one at a time by the esxi_gpu_host role)")
        self.api = GpuConfigApi(self.module.client())
        with self.doing("read the GPU configuration of"):
            hosts = self.api.hosts(host=p["host"], cluster=p["cluster"])
            graphics = self.api.graphics_configs(hosts)
        return [self.read_host(h, graphics) for h in hosts]

    def read_host(self, host, graphics):
        pcis = gpu_pci_ids(host.get("hardware.pciDevice"))
        out = dict(host=host, name=host["name"], pcis=pcis, connected=str(host.get("runtime.connectionState")) == "connected")
        if not pcis or not out["connected"]:
            return out
        out["current"] = graphics_view(graphics.get(host["configManager.graphicsManager"]._moId))
        try:
            if self.sched is not None:
                out["options"] = self.api.nvidia_module_options(host)
                if out["options"] is not None and needs_profiles(self.sched):
                    out["profiles"] = self.api.profiles_by_gpu(host)
        except VsphereError as exc:
            out["error"] = exc
        try:
            out["state"] = self.api.ops.state(host)
            # the VMs an earlier reboot powered off and left off: the reboot path powers them on
            out["left_off"] = self.api.ops.recorded_powered_off(host) if self.p["reboot"] and \
                out["state"].get("powered_off") else []
        except VsphereError as exc:
            out["state_error"] = exc
        if self.mig is not None:
            try:
                out["mig"] = self.shell.mig_modes(host["name"])
            except ShellError as exc:
                out["mig_error"] = exc
        return out

    def plan(self, live):
        hosts, skipped, errors = [], [], []
        for item in live:
            if not item["pcis"] or not item["connected"]:
                if self.p["host"]:
                    errors.append("host %s %s" % (item["name"], "has no NVIDIA GPU" if not item["pcis"]
                                                  else "is %s" % item["host"].get("runtime.connectionState")))
                skipped.append(item["name"])
                continue
            host, error = self.plan_host(item)
            if error is not None:
                errors.append(error)
            else:
                hosts.append(host)
        if errors:
            raise Failure("Unable to configure the GPUs of %s: %s. Nothing was changed." % (self.name, "; ".join(errors)))
        self.check_reboot(hosts)
        plan = Plan(before={}, after={}, hosts=hosts, skipped=skipped, report={})
        for host in hosts:
            name = host["name"]
            plan.changes.extend(host_changes("host %s" % name, host))
            needs_reboot = host["options_changed"] or bool(host["pending"])
            rebooted = bool(self.p["reboot"] and needs_reboot)
            plan.facts["report"][name] = dict(changes=host["changes"], graphics=host["desired"], nvidia_module_options=host["new_options"],
                                              reboot_required=needs_reboot, pending=host["pending"], rebooted=rebooted,
                                              powered_off_vms=[v["name"] for v in host["stuck"]] if self.p["reboot"] and
                                              (needs_reboot or host["mig_changed"]) else [],
                                              mig=self.mig_report(host))
            plan.before[name] = dict(graphics=host["current"], nvidia_module_options=host["options"])
            plan.after[name] = dict(graphics=host["desired"], nvidia_module_options=host["new_options"])
        return plan

    def mig_report(self, host):
        """The host's MIG change in the result (None when MIG mode is as asked or not managed)."""
        if not host["mig_changed"]:
            return None
        mig = host["mig"]
        gpus = sorted(set(mig["set"]) | set(mig["reset"]))
        return dict(before=dict((str(i), _esxi.mig_word(c)) for i, c in sorted(mig["before"].items())),
                    after=self.p["mig_mode"], set=mig["set"], reset=mig["reset"],
                    reason="MIG mode %s on GPU %s: maintenance mode, nvidia-smi, a reboot if a GPU keeps it pending, "
                           "read back before the host leaves maintenance mode" % (
                        "%s -> %s" % (_esxi.mig_word(not self.mig), self.p["mig_mode"]),
                        ", ".join(str(i) for i in gpus)))

    def plan_mig(self, item):
        """The host's MIG plan ({set, reset, before}); :class:`_esxi.EsxiError` when it cannot be made."""
        if self.mig is None:
            return None
        if item.get("mig_error") is not None:
            raise _esxi.EsxiError("MIG mode not read over SSH (%s); the host's SSH service must be on and the key "
                                  "authorized" % item["mig_error"])
        mig = _esxi.mig_plan(item["mig"], self.mig, self.p["mig_gpu_indexes"])
        mig["after"] = self.p["mig_mode"]
        changed = bool(mig["set"] or mig["reset"])
        in_mm = bool(item["host"].get("runtime.inMaintenanceMode"))
        if changed and not self.p["reboot"] and not in_mm and not self.module.check_mode:
            raise _esxi.EsxiError("MIG mode changes only in maintenance mode (a GPU in use keeps the old mode "
                                  "pending): set reboot=true, or put the host in maintenance mode first")
        return mig

    def plan_host(self, item):
        """(the host's plan, None), or (None, what stops it)."""
        p, sched, name = self.p, self.sched, item["name"]
        options = new_options = None
        opt_changed = False
        try:
            mig = self.plan_mig(item)
            desired, changes = _esxi.graphics_plan(item["current"], item["pcis"], p["graphics_type"], p["assignment_policy"])
            graphics_changed = bool(changes)
            if sched is not None:
                if item.get("error") is not None:
                    raise item["error"]
                options = item["options"]
                if options is None:
                    raise _esxi.EsxiError("the nvidia kernel module is not on the host: install the NVIDIA host driver first")
                new_options, opt_changed = _esxi.scheduler_plan(options, sched, item["pcis"], item.get("profiles"))
                if opt_changed:
                    changes.append("nvidia module options %r -> %r" % (options, new_options))
            if mig is not None and (mig["set"] or mig["reset"]):
                changes.append("MIG mode -> %s on GPU %s" % (p["mig_mode"], ", ".join(
                    str(i) for i in sorted(set(mig["set"]) | set(mig["reset"])))))
        except (_esxi.EsxiError, VsphereError) as exc:
            return None, str(exc) if p["host"] else "host %s: %s" % (name, exc)
        if item.get("state_error") is not None:
            return None, "host %s: %s" % (name, item["state_error"])
        host = item["host"]
        pending = _esxi.pending_reboot(host.get("summary.rebootRequired"), host.get("runtime.bootTime"), item["state"])
        if pending and p["reboot"]:
            changes.append("reboot owed since an earlier run: %s" % "; ".join(pending))
        left_off = item.get("left_off") or []
        if left_off:
            changes.append("power on the VMs an earlier reboot powered off: %s" % ", ".join(v["name"] for v in left_off))
        return dict(host=host, name=name, current=item["current"], desired=desired, changes=changes, pending=pending,
                    options=options, new_options=new_options, graphics_changed=graphics_changed, opt_changed=opt_changed,
                    reboot_owed=bool(pending and p["reboot"]), left_off=left_off, stuck=[],
                    mig=mig, mig_changed=bool(mig and (mig["set"] or mig["reset"])),
                    options_changed=new_options is not None and new_options != (options or "")), None

    def check_reboot(self, hosts):
        """With reboot: the powered-on vGPU VMs of each host to reboot (read now, before any change) are
        powered off for it with power_off_vgpu_vms, else the run stops here."""
        if not self.p["reboot"]:
            return
        for host in hosts:
            if (host["options_changed"] or host["pending"] or host["mig_changed"]) and \
                    not host["host"].get("runtime.inMaintenanceMode"):
                with self.doing("read the VMs of", "host %s" % host["name"]):
                    try:
                        host["stuck"] = self.api.ops.vms_to_power_off(self.api.ops.refresh(host["host"], ["name", "vm"]),
                                                                      self.p["power_off_vgpu_vms"])
                    except _esxi.EsxiError as exc:
                        raise Failure("Unable to reboot host %s for %s: %s. Nothing was changed."
                                      % (host["name"], self.what(host), exc))

    def result(self, live, plan):
        report = plan.facts["report"]
        return dict(hosts=report, skipped_hosts=plan.facts["skipped"],
                    reboot_required=any(h["reboot_required"] and not h["rebooted"] for h in report.values()))

    def apply(self, plan):
        """Host by host: graphics, then the options (the owed reboot recorded first), then the reboot."""
        done = []
        self.partial.update(hosts_changed=done, hosts_in_maintenance=[])
        for host in plan.facts["hosts"]:
            if not host["changes"]:
                continue
            try:
                if host["graphics_changed"]:
                    self.api.update_graphics(host["host"], host["desired"])
                if host["options_changed"]:
                    self.api.update_module_options(host["host"], host["new_options"])
            except VsphereError as exc:
                raise Failure("Unable to configure the GPUs of host %s: %s (hosts already changed: %s); fix the cause "
                              "and rerun: hosts already configured are skipped and owed reboots are remembered"
                              % (host["name"], exc, ", ".join(done) or "none"),
                              hosts_changed=done, hosts_in_maintenance=[], next_step="fix the cause and rerun")
            done.append(host["name"])
            self.partial["changed"] = True
            off = list(host["left_off"])
            if self.p["reboot"] and (host["options_changed"] or host["pending"] or host["mig_changed"]):
                self.reboot(host, off)
            elif host["mig_changed"]:  # in maintenance mode already (checked in the plan)
                try:
                    self.set_mig(host, entered=False)
                    if not self.verify_mig(host["name"], need=False):
                        plan.facts["report"][host["name"]]["reboot_required"] = True
                except _StepFailed as exc:
                    raise Failure("Unable to set MIG mode on host %s: %s (hosts already changed: %s); the host is "
                                  "left in maintenance mode; fix the cause and rerun" % (host["name"], exc, ", ".join(done)),
                                  hosts_changed=done, hosts_in_maintenance=[host["name"]], next_step="fix the cause and rerun")
            if off:
                self.warnings.extend(self.api.ops.power_on_recorded(host["host"], off, self.run_step))
        for name in self.partial.get("hosts_rebooted") or []:  # a MIG mode a GPU kept pending needed one too
            plan.facts["report"][name]["rebooted"] = True
        return dict(hosts=plan.facts["report"])

    def run_step(self, _name, doing, func, *args):
        """One step of the reboot path (HostOps' power-off and power-on steps call it)."""
        with self.doing(doing):
            return func(*args)

    @staticmethod
    def what(item):
        """What the host is taken down for, in words."""
        parts = (["the new scheduler"] if item["options_changed"] or item["pending"] else []) + \
            (["MIG mode"] if item["mig_changed"] else [])
        return " and ".join(parts) or "the new scheduler"

    def set_mig(self, item, entered):
        """nvidia-smi -mig on the GPUs whose pending mode differs (the host in maintenance mode)."""
        if not item["mig"]["set"]:
            return
        try:
            item["mig_output"] = self.shell.set_mig(item["name"], self.mig, item["mig"]["set"])
        except ShellError as exc:
            raise _StepFailed("set MIG mode with nvidia-smi: %s" % exc, entered)

    def verify_mig(self, name, need=True):
        """Whether every managed GPU runs the asked MIG mode (read back over SSH); with ``need``, a GPU
        that does not is a failure."""
        try:
            mig = _esxi.mig_plan(self.shell.mig_modes(name), self.mig, self.p["mig_gpu_indexes"])
        except (ShellError, _esxi.EsxiError) as exc:
            raise _StepFailed("read MIG mode back: %s" % exc, True)
        if mig["reset"] and need:
            raise _StepFailed("MIG mode still not %s on GPU %s after %s" % (
                self.p["mig_mode"], ", ".join(str(i) for i in mig["reset"]), "the reboot"), True)
        return not mig["reset"]

    def reboot(self, item, off):
        """The VMs that cannot move powered off (recorded), maintenance mode, MIG mode set, reboot (when
        needed), MIG mode verified, and out of maintenance mode unless the host was in it before the
        collection. ``off`` (the VMs to power on again afterwards) grows with each VM powered off."""
        ops, host = self.api.ops, item["host"]
        # in maintenance mode by an earlier run of the collection: taken out after this reboot
        was_in_mm = bool(host.get("runtime.inMaintenanceMode")) and not ops.state(host).get("maintenance")
        entered = False
        try:
            ops.power_off_recorded(host, item["stuck"], off, self.run_step)
            entered = ops.enter_maintenance(host, self.p["evacuate_timeout"], "esxi_gpu_config")
            reboot = item["options_changed"] or bool(item["pending"])
            if item["mig_changed"]:
                self.set_mig(item, entered)
                reboot = not self.verify_mig(item["name"], need=False) or reboot
            if reboot:
                back = ops.reboot_and_wait(ops.refresh(host), self.p["reboot_timeout"])
                host.props.update(back.props)
                self.partial.setdefault("hosts_rebooted", []).append(item["name"])
                if item["mig_changed"]:
                    self.verify_mig(item["name"])
            if not was_in_mm:
                ops.exit_maintenance(host)
        except (VsphereError, _StepFailed) as exc:
            left = entered or was_in_mm or isinstance(exc, _StepFailed)
            names = [v["name"] for v in off]
            raise Failure("Unable to %s host %s for %s: %s%s%s; fix the cause and rerun with "
                          "reboot=true: the owed reboot and the VMs powered off are remembered on the host" % (
                              "reboot" if not item["mig_changed"] else "take down", host["name"], self.what(item),
                              exc, "; the host is left in maintenance mode" if left else "",
                              "; VMs left powered off: %s" % ", ".join(names) if names else ""),
                          host_left_in_maintenance=left, hosts_in_maintenance=[host["name"]] if left else [],
                          vms_powered_off=names, next_step="fix the cause and rerun with reboot=true")


class _StepFailed(Exception):
    """A MIG step on the host failed (the host stays in maintenance mode)."""

    def __init__(self, msg, entered):
        Exception.__init__(self, msg)
        self.entered = entered


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("host", "cluster")],
                           required_one_of=[("host", "cluster")], supports_check_mode=True)
    enforce(module, "esxi_gpu_config")
    Runner(module, GpuConfig(module)).run()


if __name__ == "__main__":
    main()
