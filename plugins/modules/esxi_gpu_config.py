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
  reboot:
    description:
      - With O(host) only. When this run changed the module options, put the host in
        maintenance mode, reboot it, wait for it, and take it out of maintenance mode (if it
        was not in maintenance mode before). Fails before any change when powered-on VMs
        holding vGPUs are on the host.
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

from ansible_collections.gpupool.vcf.plugins.module_utils import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils._esxi_host import HostOps, gpu_pci_ids
from ansible_collections.gpupool.vcf.plugins.module_utils._esxi import GRAPHICS_WORD_BY_API as VIM_TO_WORD
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError, vim
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce

HOST_PROPERTIES = [
    "name",
    "runtime.connectionState",
    "runtime.inMaintenanceMode",
    "runtime.bootTime",
    "summary.rebootRequired",
    "customValue",
    "hardware.pciDevice",
    "config.graphicsInfo",
    "configManager.graphicsManager",
    "configManager.kernelModuleSystem",
    "vm",
]


def graphics_view(cfg):
    if cfg is None:
        return None
    return dict(
        default_type=VIM_TO_WORD.get(cfg.hostDefaultGraphicsType, cfg.hostDefaultGraphicsType),
        assignment_policy=cfg.sharedPassthruAssignmentPolicy,
        device_types=dict((d.deviceId, VIM_TO_WORD.get(d.graphicsType, d.graphicsType)) for d in cfg.deviceType or []),
    )


class GpuConfig:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.client = module.client()
        self.ops = HostOps(self.client)

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def read_hosts(self):
        p = self.p
        if p["cluster"]:
            cluster = self.client.cluster_named(p["cluster"], self.client.clusters_by_name())
            hosts = self.client.retrieve({vim.HostSystem: HOST_PROPERTIES}, root=cluster.obj)
        else:
            hosts = [self.ops.find_host(p["host"], HOST_PROPERTIES)]
        return sorted(hosts, key=lambda h: h["name"])

    def profiles_by_gpu(self, host):
        """{pci: [vGPU profiles of the powered-on VMs placed on that GPU]}."""
        placed = {}
        refs = []
        for info in host.get("config.graphicsInfo") or []:
            placed[info.pciId] = list(info.vm or [])
            refs.extend(info.vm or [])
        if not refs:
            return {}
        profiles = {}
        for vm in self.client.retrieve_objects(refs, ["config.hardware.device"]):
            profiles[vm.moid] = [d.backing.vgpu for d in vm.get("config.hardware.device") or []
                                 if getattr(getattr(d, "backing", None), "vgpu", None)]
        return dict((pci, [p for ref in vms for p in profiles.get(ref._moId, [])]) for pci, vms in placed.items())

    def run(self):
        p = self.p
        sched = p["scheduler"]
        if sched is not None and sched.get("policy") is None and not sched.get("per_gpu") and sched.get("time_slice_ms") is None:
            sched = None
        if sched is not None and sched.get("time_slice_ms") is not None and sched.get("policy") is None:
            self.fail("scheduler.time_slice_ms needs scheduler.policy")
        try:
            _esxi.validate_scheduler(sched)  # input errors first, whatever the hosts
        except _esxi.EsxiError as exc:
            self.fail("Invalid scheduler: %s" % exc)
        if p["reboot"] and not p["host"]:
            self.fail("reboot is only allowed with host (hosts of a cluster are rebooted one at a time by the esxi_gpu_host role)")
        scope = "host %s" % p["host"] if p["host"] else "cluster %s" % p["cluster"]
        try:
            hosts = self.read_hosts()
            gm_refs = [h["configManager.graphicsManager"] for h in hosts if h.get("configManager.graphicsManager") is not None]
            graphics = dict((g.moid, g.get("graphicsConfig")) for g in self.client.retrieve_objects(gm_refs, ["graphicsConfig"]))
        except VsphereError as exc:
            self.module.fail_vsphere("read the GPU configuration of", scope, exc)

        plans, skipped, errors = [], [], []
        for h in hosts:
            name = h["name"]
            pcis = gpu_pci_ids(h.get("hardware.pciDevice"))
            if not pcis or str(h.get("runtime.connectionState")) != "connected":
                if p["host"]:
                    errors.append("host %s %s" % (name, "has no NVIDIA GPU" if not pcis else "is %s" % h.get("runtime.connectionState")))
                skipped.append(name)
                continue
            gm = h["configManager.graphicsManager"]
            current = graphics_view(graphics.get(gm._moId))
            try:
                desired, changes = _esxi.graphics_plan(current, pcis, p["graphics_type"], p["assignment_policy"])
                graphics_changed = bool(changes)
                options = new_options = None
                if sched is not None:
                    options = self.ops.nvidia_module_options(h.obj)
                    if options is None:
                        raise _esxi.EsxiError("the nvidia kernel module is not on the host: install the NVIDIA host driver first")
                    needs_profiles = "fixed_share" in [sched.get("policy")] + [e.get("policy") for e in sched.get("per_gpu") or []]
                    new_options, opt_changed = _esxi.scheduler_plan(
                        options, sched, pcis, self.profiles_by_gpu(h) if needs_profiles else None)
                    if opt_changed:
                        changes.append("nvidia module options %r -> %r" % (options, new_options))
            except (_esxi.EsxiError, VsphereError) as exc:
                errors.append(str(exc) if p["host"] else "host %s: %s" % (name, exc))
                continue
            try:
                pending = _esxi.pending_reboot(h.get("summary.rebootRequired"), h.get("runtime.bootTime"), self.ops.state(h))
            except VsphereError as exc:
                errors.append("host %s: %s" % (name, exc))
                continue
            if pending and p["reboot"]:
                changes.append("reboot owed since an earlier run: %s" % "; ".join(pending))
            plans.append(dict(host=h, name=name, current=current, desired=desired, changes=changes, pending=pending,
                              options=options, new_options=new_options,
                              graphics_changed=graphics_changed,
                              options_changed=new_options is not None and new_options != (options or "")))
        if errors:
            self.fail("Unable to configure the GPUs of %s: %s. Nothing was changed." % (scope, "; ".join(errors)))

        if p["reboot"]:
            for plan in plans:
                if (plan["options_changed"] or plan["pending"]) and not plan["host"].get("runtime.inMaintenanceMode"):
                    try:
                        vms = [v["name"] for v in self.ops.vgpu_vms(self.ops.refresh(plan["host"], ["name", "vm"]))
                               if v["power_state"] == "poweredOn"]
                    except VsphereError as exc:
                        self.module.fail_vsphere("read the VMs of", "host %s" % plan["name"], exc)
                    if vms:
                        self.fail("Unable to reboot host %s for the new scheduler: powered-on VMs hold vGPUs (%s); "
                                  "move or power them off first. Nothing was changed." % (plan["name"], ", ".join(vms)))

        changed = any(plan["changes"] for plan in plans)
        result_hosts, before, after = {}, {}, {}
        for plan in plans:
            needs_reboot = plan["options_changed"] or bool(plan["pending"])
            result_hosts[plan["name"]] = dict(changes=plan["changes"], graphics=plan["desired"],
                                              nvidia_module_options=plan["new_options"],
                                              reboot_required=needs_reboot, pending=plan["pending"],
                                              rebooted=bool(p["reboot"] and needs_reboot))
            before[plan["name"]] = dict(graphics=plan["current"], nvidia_module_options=plan["options"])
            after[plan["name"]] = dict(graphics=plan["desired"], nvidia_module_options=plan["new_options"])
        result = dict(changed=changed, hosts=result_hosts, skipped_hosts=skipped,
                      reboot_required=any(h["reboot_required"] and not h["rebooted"] for h in result_hosts.values()))
        if self.module._diff:
            result["diff"] = dict(before=before, after=after)
        if self.module.check_mode or not changed:
            self.module.exit_json(**result)

        done = []
        self.module.partial.update(hosts_changed=done, hosts_in_maintenance=[])
        for plan in plans:
            if not plan["changes"]:
                continue
            h = plan["host"]
            try:
                if plan["graphics_changed"]:
                    d = plan["desired"]
                    cfg = vim.host.GraphicsConfig(
                        hostDefaultGraphicsType=_esxi.vim_graphics_type(d["default_type"]),
                        sharedPassthruAssignmentPolicy=d["assignment_policy"],
                        deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId=pci, graphicsType=_esxi.vim_graphics_type(t))
                                    for pci, t in sorted(d["device_types"].items())])
                    h["configManager.graphicsManager"].UpdateGraphicsConfig(cfg)
                if plan["options_changed"]:
                    # recorded first: the options load at the next boot, whatever happens next
                    self.ops.update_state(h, options_boot=_esxi.boot_stamp(h.get("runtime.bootTime")))
                    h["configManager.kernelModuleSystem"].UpdateModuleOptionString(name="nvidia", options=plan["new_options"])
            except VsphereError as exc:
                self.fail("Unable to configure the GPUs of host %s: %s (hosts already changed: %s); fix the cause "
                          "and rerun: hosts already configured are skipped and owed reboots are remembered"
                          % (plan["name"], exc, ", ".join(done) or "none"),
                          hosts_changed=done, hosts_in_maintenance=[], next_step="fix the cause and rerun")
            done.append(plan["name"])
            if p["reboot"] and (plan["options_changed"] or plan["pending"]):
                self.reboot(h)
        self.module.exit_json(**result)

    def reboot(self, host):
        # in maintenance mode by an earlier run of the collection: taken out after this reboot
        was_in_mm = bool(host.get("runtime.inMaintenanceMode")) and not self.ops.state(host).get("maintenance")
        entered = False
        try:
            entered = self.ops.enter_maintenance(host, self.p["evacuate_timeout"], "esxi_gpu_config")
            back = self.ops.reboot_and_wait(self.ops.refresh(host), self.p["reboot_timeout"])
            if not was_in_mm:
                self.ops.exit_maintenance(back)
        except VsphereError as exc:
            left = entered or was_in_mm
            self.fail("Unable to reboot host %s for the new scheduler: %s%s; fix the cause and rerun with reboot=true: "
                      "the owed reboot is remembered on the host" % (
                          host["name"], exc, "; the host is left in maintenance mode" if left else ""),
                      host_left_in_maintenance=left, hosts_in_maintenance=[host["name"]] if left else [],
                      next_step="fix the cause and rerun with reboot=true")


def main():
    per_gpu = dict(pci_id=dict(type="str", required=True),
                   policy=dict(type="str", required=True, choices=["best_effort", "equal_share", "fixed_share"]),
                   time_slice_ms=dict(type="int"))
    module = VsphereModule(
        argument_spec=dict(
            host=dict(type="str"),
            cluster=dict(type="str"),
            graphics_type=dict(type="str", choices=["shared_direct", "shared"]),
            assignment_policy=dict(type="str", choices=["performance", "consolidation"]),
            scheduler=dict(type="dict", options=dict(
                policy=dict(type="str", choices=["best_effort", "equal_share", "fixed_share"]),
                time_slice_ms=dict(type="int"),
                per_gpu=dict(type="list", elements="dict", options=per_gpu),
            )),
            reboot=dict(type="bool", default=False),
            evacuate_timeout=dict(type="int", default=1800),
            reboot_timeout=dict(type="int", default=1800),
        ),
        mutually_exclusive=[("host", "cluster")],
        required_one_of=[("host", "cluster")],
        supports_check_mode=True,
    )
    enforce(module, "esxi_gpu_config")
    GpuConfig(module).run()


if __name__ == "__main__":
    main()
