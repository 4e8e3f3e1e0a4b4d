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
  - MIG mode per GPU (O(mig_geometry), or one mode for every GPU with O(mig_mode)). The current
    mode of each GPU is read without a shell, in the one retrieval of the hosts
    (C(config.graphicsInfo[].vgpuMode) is C(multiInstanceGpu) on a GPU in MIG mode, vSphere API
    8.0.3); check mode and hosts already as asked never open a shell. vSphere has no call that sets
    it, so a host whose GPUs need a change gets C(nvidia-smi -i <index> -mig 1|0) in its shell over
    SSH, only in maintenance mode. With O(reboot) the host's VMs that hold vGPUs are powered off
    (O(power_off_vgpu_vms)), the host enters maintenance mode, the pending mode of its GPUs is read
    with nvidia-smi, the GPUs whose mode differs are set, the host reboots when a GPU only has the
    new mode pending (Ampere GPUs such as A100; Hopper and later take it at once when idle), the
    mode is read back and verified, and only then the host leaves maintenance mode and the VMs are
    powered on.
  - The host's shell is open only while its MIG step needs it. When the host's SSH service
    (C(TSM-SSH)) is not running, it is started through the host's service system before the first
    command and stopped again after the step, also when the step fails; a service that was running
    is left running. A host in lockdown mode (C(lockdownNormal), C(lockdownStrict)) admits SSH only
    for its exception users; when the SSH user is not one of them the run fails before any change,
    naming the host, the mode and the users.
  - All hosts are read and every check is made before the first change.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
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
  vgpu_mode:
    description:
      - The vGPU mode of every NVIDIA GPU of the host that is not in MIG mode (C(deviceType[].vgpuMode) of
        C(UpdateGraphicsConfig), vSphere API 8.0.3). V(same_size) lets a GPU carry time-sliced vGPUs of one
        size only; V(mixed_size) lets it carry vGPUs of different sizes. Leave out to leave the mode alone.
      - The current mode is read from C(config.graphicsInfo[].vgpuMode). A GPU in MIG mode (it reads
        C(multiInstanceGpu)) is left alone, so is a GPU whose API reports no vGPU mode (before 8.0.3).
      - The host refuses to change the mode of a GPU that carries a powered-on vGPU VM (C(graphicsInfo[].vm)).
        Such a change fails before any change (check mode predicts it), naming the GPU, its VMs and the mode it
        is left in; a refusal of the host itself (a VM powered on meanwhile) fails the same way. Power off the
        host's vGPU VMs (or roll the host through maintenance mode with the esxi_gpu_host role) and rerun.
      - NVIDIA does not support the fixed share scheduler with mixed-size time-sliced vGPUs on one GPU.
      - On a vCenter of vSphere API 9.1 or later (its C(About.apiVersion), read at login) the mode is read and set
        through the Automation API's C(direct-path-devices) instead (one C(GET /api/vcenter/host/{host}/hardware/direct-path-devices)
        per host; a C(configure) task per GPU whose mode changes, C(VGPU_SAME_SIZE) or C(VGPU_MIXED_SIZE)); the result
        has the same shape, with the impacts of each change in RV(hosts.impacts). Older vCenters get C(UpdateGraphicsConfig).
      - There, a mode the device does not list in its C(configurable_modes), and a change that needs maintenance
        mode (C(HOST_MAINTENANCE_MODE_REQUIRED), VMs use the device) on a host that is not in it, fail before any change.
    type: str
    choices: [same_size, mixed_size]
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
  mig_geometry:
    description:
      - Which GPUs of each host run in MIG mode; every other GPU of the host is time-sliced (MIG mode off).
        Leave out to leave MIG mode alone. Mutually exclusive with O(mig_mode) and O(mig_gpu_indexes).
      - A list with one entry per host position, each a list of GPU indexes (as nvidia-smi numbers them, in
        PCI address order) in MIG mode; the positions are the GPU hosts of the cluster (with O(host), the
        host's cluster) in name order, as the design derives it (C(mig_geometry) of each cluster). Hosts beyond
        the list run no MIG.
      - Or a mapping of host name to GPU indexes; hosts it does not name run no MIG. A name outside the
        cluster, an index the host lacks or a GPU without MIG (L40S) fails before any change.
      - A change needs maintenance mode, as for O(mig_mode).
    type: raw
  mig_mode:
    description:
      - One MIG mode for the host's GPUs (those of O(mig_gpu_indexes)), for callers without a per-GPU geometry.
        Leave out to leave MIG mode alone. GPUs without MIG (L40S) are skipped for V(disabled) and refused for
        V(enabled).
      - A change needs maintenance mode. With O(reboot) the module takes the host there (see above);
        without, a host not in maintenance mode is refused before any change.
    type: str
    choices: [enabled, disabled]
  mig_gpu_indexes:
    description: With O(mig_mode), the GPU indexes (as nvidia-smi numbers them) whose MIG mode is managed; left out, every GPU.
    type: list
    elements: int
  ssh:
    description:
      - How the module reaches each host's shell (OpenSSH client, key authentication, no password) to set MIG
        mode (O(mig_geometry), O(mig_mode)); only hosts whose GPUs need a change are reached, and only outside
        check mode. Left out, the SSH client's own keys and the user V(root).
      - In check mode with O(ssh) given, a host in lockdown mode whose exception users lack O(ssh.user) is
        refused as the real run would refuse it.
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
  diff_mode:
    description: Returns the graphics configuration, the nvidia module options and the MIG mode of each GPU (when managed) of each host before and after.
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
      graphics: {default_type: shared_direct, assignment_policy: performance, device_types: {"0000:3b:00.0": shared_direct},
                 vgpu_modes: {"0000:3b:00.0": mixed_size}}
      nvidia_module_options: "NVreg_RegistryDwords=RmPVMRL=0x00030011"
      reboot_required: true
      rebooted: false
      powered_off_vms: []
      mig:
        before: {"0": disabled, "1": disabled}
        after: {"0": enabled, "1": disabled}
        changed: true
        enabled: [0]
        disabled: []
        set: [0]
        reset: [0]
        reason: "MIG mode disabled -> enabled on GPU 0: maintenance mode, nvidia-smi, ..."
      ssh_service: started and stopped
  contains:
    graphics:
      description:
        - The graphics configuration after the run (in check mode, the prediction) - the host default type
          (V(default_type)), the assignment policy, the type of each NVIDIA GPU (V(device_types), PCI address as
          key) and, with O(vgpu_mode), the vGPU mode of each GPU (V(vgpu_modes) - V(same_size), V(mixed_size) or
          V(multi_instance_gpu) for a GPU in MIG mode, left alone).
      type: dict
      returned: always
    mig:
      description:
        - With O(mig_geometry) or O(mig_mode), the MIG mode of each GPU (index as key) before and after (as asked),
          whether it changes (C(changed)), the GPUs turned on (C(enabled)) and off
          (C(disabled)), the GPUs nvidia-smi set (C(set); in check mode the prediction from
          the current modes), those whose new mode needs a GPU reset or reboot (C(reset)), and the
          reason in words. None when MIG mode is not managed.
      type: dict
      returned: always
    impacts:
      description:
        - With O(vgpu_mode) on a vCenter of API 9.1 or later, the impacts of each GPU's vGPU mode change (PCI address
          as key, a list of C(NONE), C(HOST_MAINTENANCE_MODE_REQUIRED), C(HOST_REBOOT_REQUIRED)) - in check mode (and
          before the change) the prediction from the device's C(configurable_modes) and VMs (C(NONE) for an idle
          GPU, C(HOST_MAINTENANCE_MODE_REQUIRED) while VMs use it; the API has no call that tells them without
          making the change), after a change the C(configure_impacts) vCenter answered. A GPU already in the mode
          is not listed. C(HOST_REBOOT_REQUIRED) sets RV(reboot_required).
        - None when the vGPU mode is not managed or goes through C(UpdateGraphicsConfig) (before API 9.1).
      type: dict
      returned: always
      sample: {"0000:3b:00.0": ["NONE"]}
    ssh_service:
      description:
        - What the run did with the host's SSH service (C(TSM-SSH)) - V(started and stopped), V(already running)
          (left running), V(not used) (no shell needed - check mode, or the host already as asked; in check mode the
          value the real run would give is predicted), or V(not listed by the host) (left alone).
      type: str
      returned: always
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
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _direct_path, _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._direct_path_api import DirectPathApi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_config import (
    host_changes, host_error, host_mig_plan, lockdown_refusal, mig_change, mig_left, mig_left_words, mig_report,
    mig_words, needs_profiles, plan_host, report_mig, scheduler_option, smi_rows, ssh_prediction, turn_what,
    vgpu_mode_changed, vgpu_mode_refusal,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_api import GpuConfigApi, SSH_SERVICE
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_config_reader import GpuHosts
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_inputs import esxi_gpu_config_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    host=dict(type="str"),
    cluster=dict(type="str"),
    graphics_type=dict(type="str", choices=["shared_direct", "shared"]),
    assignment_policy=dict(type="str", choices=["performance", "consolidation"]),
    vgpu_mode=dict(type="str", choices=["same_size", "mixed_size"]),
    scheduler=dict(type="dict", options=dict(
        policy=dict(type="str", choices=["best_effort", "equal_share", "fixed_share"]),
        time_slice_ms=dict(type="int"),
        per_gpu=dict(type="list", elements="dict", options=dict(
            pci_id=dict(type="str", required=True),
            policy=dict(type="str", required=True, choices=["best_effort", "equal_share", "fixed_share"]),
            time_slice_ms=dict(type="int"),
        )),
    )),
    mig_geometry=dict(type="raw"),
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


class GpuConfig(Resource):
    """Graphics and vGPU scheduler of one host or of the GPU hosts of a cluster: every host read and
    checked before the first change; a reboot owed is remembered on the host."""

    verb = "configure the GPUs of"

    def __init__(self, module):
        self.p = module.params
        Resource.__init__(self, "host %s" % self.p["host"] if self.p["host"] else "cluster %s" % self.p["cluster"])
        self.module = module
        self.sched = None
        self.hosts = None
        self.shell = EsxiShell(self.p["ssh"])
        self.mig = None if self.p["mig_mode"] is None else self.p["mig_mode"] == "enabled"
        # {host name: GPU indexes in MIG mode} resolved from mig_geometry (None: no geometry managed)
        self.geometry = None
        self.mig_managed = self.mig is not None or self.p["mig_geometry"] is not None
        self.ssh_user = (self.p["ssh"] or {}).get("user") or "root"

    def read(self):
        """Every host with what the plan needs of it (:class:`GpuHosts`); a host's read error is kept for the
        plan's message."""
        p = self.p
        self.sched = scheduler_option(p["scheduler"])
        if p["reboot"] and not p["host"]:
            raise Failure("reboot is only allowed with host (hosts of a cluster are rebooted one at a time by the esxi_gpu_host role)")
        api = GpuConfigApi(self.module.client())
        direct = None
        if p["vgpu_mode"] is not None and _direct_path.offers_direct_path(api.api_version()):
            # vSphere 9.1+: the vGPU mode of each GPU through direct-path-devices (one GET per host)
            direct = DirectPathApi(self.module.rest_client())
        self.hosts = GpuHosts(api, direct)
        with self.doing("read the GPU configuration of"):
            live = self.hosts.read(host=p["host"], cluster=p["cluster"], vgpu_mode=p["vgpu_mode"] is not None,
                                   scheduler=self.sched is not None,
                                   profiles=self.sched is not None and needs_profiles(self.sched),
                                   left_off=p["reboot"], mig=self.mig_managed)
            if p["mig_geometry"] is not None:
                self.geometry = self.resolve_geometry(self.hosts.geometry_names(live, bool(p["host"])))
        return live

    def resolve_geometry(self, names):
        """mig_geometry as {host name: GPU indexes}, positions over the GPU hosts of the cluster in name
        order (with host, the host's cluster); a bad geometry stops the run before any change."""
        where = "the GPU hosts of %s" % ("the cluster of host %s" % self.p["host"] if self.p["host"]
                                         else "cluster %s" % self.p["cluster"])
        try:
            return _esxi.mig_geometry_for(self.p["mig_geometry"], names)
        except _esxi.EsxiError as exc:
            raise Failure("Invalid mig_geometry for %s (%s): %s. Nothing was changed." % (
                where, ", ".join(names) or "none", exc))

    def plan(self, live):
        hosts, skipped, errors = [], [], []
        for item in live:
            if not item["pcis"] or not item["connected"]:
                if self.p["host"]:
                    errors.append("host %s %s" % (item["name"], "has no NVIDIA GPU" if not item["pcis"]
                                                  else "is %s" % item["connection_state"]))
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
                                              mig=mig_report(host), ssh_service=ssh_prediction(host),
                                              impacts=host["impacts"])
            plan.before[name] = dict(graphics=host["current"], nvidia_module_options=host["options"])
            plan.after[name] = dict(graphics=host["desired"], nvidia_module_options=host["new_options"])
            if host["mig"] is not None:
                plan.before[name]["mig"] = mig_words(host["mig"]["before"])
                plan.after[name]["mig"] = mig_words(host["mig"]["after"])
        return plan

    def host_mig_plan(self, name, rows):
        """The host's MIG plan (:func:`_esxi_config.host_mig_plan`) from the geometry or the mig_mode options."""
        geometry = None if self.geometry is None else self.geometry.get(name, [])
        return host_mig_plan(rows, geometry, self.mig, self.p["mig_gpu_indexes"])

    def plan_mig(self, item):
        """The host's MIG plan from the modes vCenter reads (no shell); :class:`_esxi.EsxiError` when it
        cannot be made."""
        if not self.mig_managed:
            return None
        mig = self.host_mig_plan(item["name"], item["mig_rows"])
        changed = bool(mig["set"] or mig["reset"])
        in_mm = item["in_maintenance"]
        if changed and not self.p["reboot"] and not in_mm and not self.module.check_mode:
            raise _esxi.EsxiError("MIG mode changes only in maintenance mode (a GPU in use keeps the old mode "
                                  "pending): set reboot=true, or put the host in maintenance mode first")
        refusal = lockdown_refusal(item, self.ssh_user) if changed and (self.p["ssh"] or not self.module.check_mode) else None
        if refusal:
            raise _esxi.EsxiError("%s (MIG mode %s needs the host's shell)" % (refusal, mig_change(mig)))
        return mig

    def plan_host(self, item):
        """(the host's plan, None), or (None, what stops it): its MIG plan here (the module's options and
        geometry), the rest by :func:`_esxi_config.plan_host`."""
        try:
            mig = self.plan_mig(item)
        except (_esxi.EsxiError, VsphereError) as exc:
            return None, host_error(item["name"], exc, bool(self.p["host"]))
        return plan_host(item, self.p, self.sched, mig, self.hosts.direct is not None)

    def check_reboot(self, hosts):
        """With reboot: the powered-on vGPU VMs of each host to reboot (read now, before any change) are
        powered off for it with power_off_vgpu_vms, else the run stops here."""
        if not self.p["reboot"]:
            return
        for host in hosts:
            if (host["options_changed"] or host["pending"] or host["mig_changed"]) and not host["in_maintenance"]:
                with self.doing("read the VMs of", "host %s" % host["name"]):
                    try:
                        host["stuck"] = self.hosts.vms_to_power_off(host, self.p["power_off_vgpu_vms"])
                    except _esxi.EsxiError as exc:
                        raise Failure("Unable to reboot host %s for %s: %s. Nothing was changed."
                                      % (host["name"], turn_what(host), exc))

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
                    try:
                        if host["soap_graphics"] and host["impacts"] is None:
                            self.hosts.update_graphics(host, host["desired"])
                        elif host["soap_graphics"]:  # the vGPU modes go through direct-path-devices
                            self.hosts.update_graphics(host, host["desired"], vgpu_modes=False)
                        if host["rest_modes"]:
                            self.configure_devices(host, plan.facts["report"][host["name"]])
                    except VsphereError as exc:
                        if not vgpu_mode_changed(host):
                            raise
                        raise Failure("%s (hosts already changed: %s)" % (vgpu_mode_refusal(host, exc), ", ".join(done) or "none"),
                                      hosts_changed=done, hosts_in_maintenance=[],
                                      next_step="power off the vGPU VMs of host %s (or roll it through maintenance mode) and rerun"
                                      % host["name"])
                if host["options_changed"]:
                    self.hosts.update_module_options(host, host["new_options"])
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
                    if not self.mig_step(host):
                        plan.facts["report"][host["name"]]["reboot_required"] = True
                except _StepFailed as exc:
                    raise Failure("Unable to set MIG mode on host %s: %s%s (hosts already changed: %s); the host is "
                                  "left in maintenance mode; fix the cause and rerun: a plain rerun resumes"
                                  % (host["name"], exc, mig_left_words(host, SSH_SERVICE), ", ".join(done)),
                                  hosts_changed=done, hosts_in_maintenance=[host["name"]], next_step="fix the cause and rerun",
                                  **mig_left(host))
            if host["mig_changed"]:
                report_mig(plan.facts["report"][host["name"]], host)
            if off:
                self.warnings.extend(self.hosts.power_on_recorded(host, off, self.run_step))
        for name in self.partial.get("hosts_rebooted") or []:  # a MIG mode a GPU kept pending needed one too
            plan.facts["report"][name]["rebooted"] = True
        return dict(hosts=plan.facts["report"])

    def configure_devices(self, host, report):
        """The vGPU mode of each GPU that changes, through direct-path-devices, one configure task per GPU; the
        result reports the impacts the server answered (a reboot it asks for is owed)."""
        answered = {}
        report["impacts"] = answered
        for pci, word in sorted(host["rest_modes"].items()):
            try:
                answered[pci] = self.hosts.configure_vgpu_mode(host, pci, word)
            except VsphereError as exc:
                raise VsphereError("%s (GPUs of the host already set through direct-path-devices: %s)"
                                   % (exc, ", ".join(sorted(answered)) or "none"))
        if any(_direct_path.IMPACT_REBOOT in impacts for impacts in answered.values()):
            report["reboot_required"] = True
        needing = sorted(pci for pci, impacts in answered.items() if _direct_path.IMPACT_MAINTENANCE in impacts)
        if needing and not host["in_maintenance"]:
            self.warnings.append("host %s: vCenter says the vGPU mode of GPU %s takes effect once the host has been "
                                 "through maintenance mode (%s)" % (host["name"], ", ".join(needing), _direct_path.IMPACT_MAINTENANCE))

    def run_step(self, _name, doing, func, *args):
        """One step of the reboot path (HostOps' power-off and power-on steps call it)."""
        with self.doing(doing):
            return func(*args)

    def mig_step(self, item):
        """The host's MIG step, in maintenance mode: its SSH service started when it is not running, the
        pending mode of each GPU read with nvidia-smi, ``nvidia-smi -i <i> -mig 1`` / ``-mig 0`` on the GPUs
        whose pending mode differs, the mode read back, the service stopped again (also when a command
        fails) unless it was running before. True when every GPU runs its new mode (no reboot needed)."""
        name = item["name"]
        item.setdefault("mig_set", [])
        self.open_shell(item)
        try:
            try:
                rows, smi = smi_rows(self.shell.mig_modes(name), item["mig_rows"])
                mig = self.host_mig_plan(name, rows)
            except (ShellError, _esxi.EsxiError) as exc:
                raise _StepFailed("read MIG mode with nvidia-smi: %s" % exc, True)
            for on, indexes in ((True, mig["enable"]), (False, mig["disable"])):
                for index in indexes:
                    try:
                        self.shell.set_mig(name, on, [smi[index]])
                    except ShellError as exc:
                        raise _StepFailed("set MIG mode with nvidia-smi: %s" % exc, True)
                    item["mig_set"].append((index, on))
            try:
                back = self.host_mig_plan(name, smi_rows(self.shell.mig_modes(name), item["mig_rows"])[0])
            except (ShellError, _esxi.EsxiError) as exc:
                raise _StepFailed("read MIG mode back: %s" % exc, True)
            if back["set"]:
                raise _StepFailed("nvidia-smi still has MIG mode %s pending after setting it" % mig_change(back), True)
            return not back["reset"]
        finally:
            self.close_shell(item)

    def open_shell(self, item):
        """The host's SSH service running before the first command (started when it was not)."""
        item["ssh_service"] = "not used"
        running = item["ssh_running"]
        if running is None:
            item["ssh_service"] = "not listed by the host"
            return
        if running:
            try:
                running = self.hosts.ssh_running(item)  # read again: the plan's read may be old
            except VsphereError as exc:
                raise _StepFailed("read the state of the SSH service %s: %s" % (SSH_SERVICE, exc), True)
        if running:
            item["ssh_service"] = "already running"
            return
        try:
            self.hosts.start_ssh(item)
        except VsphereError as exc:
            raise _StepFailed("start the SSH service %s: %s" % (SSH_SERVICE, exc), True)
        item["ssh_service"] = "started"

    def close_shell(self, item):
        """The SSH service stopped again when this run started it; a failure to stop it is a warning and
        the result says the service was left running."""
        if item.get("ssh_service") != "started":
            return
        try:
            self.hosts.stop_ssh(item)
            item["ssh_service"] = "started and stopped"
        except VsphereError as exc:
            item["ssh_service"] = "started and left running"
            self.warnings.append("host %s: the SSH service %s this run started could not be stopped (%s): stop it "
                                 "(a rerun that changes MIG mode stops it too)" % (item["name"], SSH_SERVICE, exc))

    def verify_mig(self, item):
        """After the reboot: every GPU runs its new MIG mode, as vCenter reads it (no shell)."""
        try:
            mig = self.host_mig_plan(item["name"], self.hosts.mig_rows_now(item))
        except (VsphereError, _esxi.EsxiError) as exc:
            raise _StepFailed("read MIG mode back: %s" % exc, True)
        if mig["reset"]:
            raise _StepFailed("MIG mode still %s after the reboot" % mig_change(mig), True)

    def reboot(self, item, off):
        """The VMs that cannot move powered off (recorded), maintenance mode, MIG mode set, reboot (when
        needed), MIG mode verified, and out of maintenance mode unless the host was in it before the
        collection. ``off`` (the VMs to power on again afterwards) grows with each VM powered off."""
        hosts = self.hosts
        # in maintenance mode by an earlier run of the collection: taken out after this reboot
        was_in_mm = hosts.in_maintenance_by_others(item)
        entered = False
        try:
            hosts.power_off_recorded(item, off, self.run_step)
            entered = hosts.enter_maintenance(item, self.p["evacuate_timeout"], "esxi_gpu_config")
            reboot = item["options_changed"] or bool(item["pending"])
            if item["mig_changed"]:
                reboot = not self.mig_step(item) or reboot
            if reboot:
                hosts.reboot_and_wait(item, self.p["reboot_timeout"])
                self.partial.setdefault("hosts_rebooted", []).append(item["name"])
                if item["mig_changed"]:
                    self.verify_mig(item)
            if not was_in_mm:
                hosts.exit_maintenance(item)
        except (VsphereError, _StepFailed) as exc:
            left = entered or was_in_mm or isinstance(exc, _StepFailed)
            names = [v["name"] for v in off]
            extra = mig_left(item) if item["mig_changed"] else {}
            raise Failure("Unable to %s host %s for %s: %s%s%s%s; fix the cause and rerun with "
                          "reboot=true: the owed reboot and the VMs powered off are remembered "
                          "on the host" % (
                              "reboot" if not item["mig_changed"] else "take down", item["name"], turn_what(item),
                              exc, "; the host is left in maintenance mode" if left else "",
                              "; VMs left powered off: %s" % ", ".join(names) if names else "",
                              mig_left_words(item, SSH_SERVICE) if item["mig_changed"] else ""),
                          host_left_in_maintenance=left, hosts_in_maintenance=[item["name"]] if left else [],
                          vms_powered_off=names, next_step="fix the cause and rerun with reboot=true", **extra)


class _StepFailed(Exception):
    """A MIG step on the host failed (the host stays in maintenance mode)."""

    def __init__(self, msg, entered):
        Exception.__init__(self, msg)
        self.entered = entered


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("host", "cluster"), ("mig_geometry", "mig_mode"),
                                                                            ("mig_geometry", "mig_gpu_indexes")],
                           required_one_of=[("host", "cluster")], supports_check_mode=True)
    enforce(module, "esxi_gpu_config", esxi_gpu_config_errors)
    Runner(module, GpuConfig(module)).run()


if __name__ == "__main__":
    main()
