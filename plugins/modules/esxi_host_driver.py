#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: esxi_host_driver
short_description: The NVIDIA host driver of one ESXi host at a version, through the vSphere API
version_added: 0.1.0
description:
  - Brings the NVIDIA vGPU host driver (component C(NVD-AIE-800)) of one host to a version,
    through the vSphere API only (no SSH).
  - When the installed version is the target, nothing is done. Otherwise the host enters
    maintenance mode (its VMs are evacuated by vCenter), the offline bundle or VIB is
    installed with C(InstallHostPatchV2), the host is rebooted (even when the installer says
    no reboot is needed, as NVIDIA asks), the module waits for the host to reconnect,
    checks the installed version, and takes the host out of maintenance mode.
  - Powered-on VMs holding vGPUs do not move unless vCenter's advanced setting
    C(vgpu.hotmigrate.enabled) is true. When they cannot move, the module fails before
    changing anything, unless O(power_off_vgpu_vms) is true; the VMs it powered off are
    powered on again at the end.
  - The host is judged as running vs staged. A driver installed but not running (the host
    still owes the reboot, C(summary.rebootRequired)) is finished with maintenance mode, reboot,
    verify and exit. A host that an earlier run of this collection left in maintenance mode
    (recorded in its custom attribute C(gpupool.vcf.host-state)) and that is otherwise done is
    taken out of maintenance mode. So a plain rerun after any failure resumes; check mode
    predicts it (RV(plan) V(reboot) or V(exit_maintenance_mode)).
  - A failure after the host entered maintenance mode leaves it in maintenance mode, and
    the message says so; a host is never handed back to DRS with the wrong driver. Every
    failure result says what was left (RV(hosts_in_maintenance), RV(vms_powered_off),
    RV(staged_not_running)), what was done (RV(steps)) and the next step (RV(next_step)).
  - Versions are compared as NVIDIA driver versions (550.90.05 is newer than 550.54.10).
    A short target (V(550.90.05)) matches any build of it; a full one
    (V(550.90.05-1OEM.800.1.0.20613240)) also compares the build.
  - On vCenter API 9.0 and later, a host in a cluster managed by a vLCM image takes the driver through
    the cluster's image only, so an install there is refused before any change (check mode too), naming
    M(gpupool.vcf.vlcm_component) as the way. On 8.x the install goes ahead as before.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  host:
    description: Name of the ESXi host, as vCenter knows it.
    type: str
    required: true
  version:
    description:
      - Target NVIDIA host driver version, short (V(550.90.05)) or full
        (V(550.90.05-1OEM.800.1.0.20613240)).
    type: str
    required: true
  bundle:
    description:
      - The NVIDIA offline bundle (C(.zip)) or VIB (C(.vib)) to install, as a URL the host can
        fetch, a datastore path (V([datastore1] drivers/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip))
        or an absolute C(/vmfs/volumes/...) path.
      - Required when the host is not at O(version). A file name following NVIDIA's naming that
        names another version than O(version) is refused.
    type: str
  component:
    description: Name of the driver component (for messages and results).
    type: str
    default: NVD-AIE-800
  evacuate_timeout:
    description: Seconds vCenter may take to evacuate the host when it enters maintenance mode.
    type: int
    default: 1800
  power_off_vgpu_vms:
    description:
      - Power off the powered-on VMs holding vGPUs that cannot be migrated, then power them on
        again after the host is back.
    type: bool
    default: false
  allow_downgrade:
    description: Allow installing a version older than the installed one.
    type: bool
    default: false
  reboot_timeout:
    description: Seconds to wait for the host to reconnect after the reboot.
    type: int
    default: 1800
  install_timeout:
    description: Seconds the install task may take.
    type: int
    default: 1800
attributes:
  check_mode:
    description: Reports what would be done (maintenance mode, install, reboot) without doing it.
  diff_mode:
    description: Returns the driver version and maintenance mode before and after.
notes:
  - The install task runs on the host; a URL must be reachable from the host, not only from
    the control node.
"""

EXAMPLES = r"""
- name: NVIDIA host driver 550.90.05 on one host
  gpupool.vcf.esxi_host_driver:
    host: esx-h100-01.example.com
    version: 550.90.05
    bundle: "[vsanDatastore] nvidia/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip"
  register: drv

- name: Downgrade, powering off the vGPU VMs that cannot move
  gpupool.vcf.esxi_host_driver:
    host: esx-h100-02.example.com
    version: 550.54.10-1OEM.800.1.0.20613240
    bundle: https://depot.example.com/nvidia/NVD-AIE-800_550.54.10-1OEM.800.1.0.20613240_23000000.zip
    allow_downgrade: true
    power_off_vgpu_vms: true
"""

RETURN = r"""
previous_version:
  description: Short driver version installed before (null when none was).
  returned: always
  type: str
  sample: 550.54.10
version:
  description: Short driver version installed after the run (in check mode, the one it would be).
  returned: always
  type: str
  sample: 550.90.05
full_version:
  description: Full version reported by the host after the run (null in check mode).
  returned: always
  type: str
plan:
  description:
    - What was (or would be) done, V(none), V(install), V(upgrade) or V(downgrade); V(reboot) to
      finish a driver staged by an earlier run; V(exit_maintenance_mode) to take out a host an
      earlier run left in maintenance mode.
  returned: always
  type: str
running_version:
  description:
    - Version of the nvidia kernel module running on the host after the run, as the host reports it (null when
      none); in check mode, the short version it would run once the planned reboot is done.
  returned: always
  type: str
pending:
  description: Why the host owed a reboot when it was read (staged driver, module options not loaded).
  returned: always
  type: list
  elements: str
rebooted:
  description: Whether the host was (or would be) rebooted.
  returned: always
  type: bool
maintenance_mode:
  description: Whether the host is (or would be) in maintenance mode at the end.
  returned: always
  type: bool
powered_off_vms:
  description: VMs holding vGPUs powered off for the install (and powered on again).
  returned: always
  type: list
  elements: str
steps:
  description: Each step done with the seconds it took.
  returned: always
  type: list
  elements: dict
  sample: [{step: enter_maintenance_mode, seconds: 2.1}, {step: install, seconds: 40.3}]
host_left_in_maintenance:
  description: On failure, whether the host was left in maintenance mode.
  returned: failure
  type: bool
hosts_in_maintenance:
  description: On failure, the hosts left in maintenance mode (this host, or none).
  returned: failure
  type: list
  elements: str
vms_powered_off:
  description: On failure, the VMs this run powered off that are still off.
  returned: failure
  type: list
  elements: str
staged_not_running:
  description: On failure, the driver version installed on the host but not running yet (null when none).
  returned: failure
  type: str
next_step:
  description: On failure, what to do next (usually fix the cause and rerun, which resumes).
  returned: failure
  type: str
diff:
  description: Before and after (with C(--diff)).
  returned: when diff mode is on
  type: dict
"""

import time

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host_reader import EsxiHosts
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_inputs import esxi_host_driver_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._image_clusters import ImageClusters
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    version=dict(type="str", required=True),
    bundle=dict(type="str"),
    component=dict(type="str", default="NVD-AIE-800"),
    evacuate_timeout=dict(type="int", default=1800),
    power_off_vgpu_vms=dict(type="bool", default=False),
    allow_downgrade=dict(type="bool", default=False),
    reboot_timeout=dict(type="int", default=1800),
    install_timeout=dict(type="int", default=1800),
)

RERUN = "fix the cause, then rerun: the rerun reads the host and resumes where this run stopped"
INSTALLS = ("install", "upgrade", "downgrade")
# what each plan does after the driver decision (V(none) does nothing)
REBOOTS = INSTALLS + ("reboot",)


class HostDriver(Resource):
    """The NVIDIA host driver of one host: read as running vs staged, planned, rolled."""

    def __init__(self, module):
        Resource.__init__(self, "host %s" % module.params["host"])
        self.module = module
        self.p = module.params
        self.verb = "bring the NVIDIA driver to %s on" % self.p["version"]
        self.refusals = (_esxi.EsxiError,)
        self.hosts = None
        self.item = None
        self.steps = []
        self.powered_off = []
        self.staged = None
        self.verified = {}

    # -- read and plan (no change) -------------------------------------------------------
    def read(self):
        target = _esxi.parse_driver_version(self.p["version"])
        self.hosts = EsxiHosts(self.module.client())
        # the host's record with its driver and the VMs an earlier run left off: one retrieval each
        item = self.item = self.hosts.read([self.p["host"]], driver=True, left_off=True)[0]
        if not item["connected"]:
            raise VsphereError("the host is %s" % item["connection_state"])
        installed, installed_full, running, state = item["installed"], item["installed_full"], item["running"], item["state"]
        pending = _esxi.pending_reboot(item["reboot_required"], item["boot_time"], state,
                                       running=running, installed=installed_full or installed)
        in_mm = item["in_maintenance"]
        action = self.action(installed_full or installed, target, pending, state, in_mm, item["left_off"])
        stuck = []
        if action in REBOOTS and not in_mm:
            # what cannot move: decided before anything changes
            try:
                stuck = self.hosts.vms_to_power_off([item], self.p["power_off_vgpu_vms"])[0]["stuck"]
            except _esxi.EsxiError as exc:
                raise Failure("Unable to bring the NVIDIA driver of host %s to %s: %s. Nothing was changed."
                              % (self.p["host"], target.text, exc), previous_version=installed)
        return dict(item=item, target=target, installed=installed, installed_full=installed_full, running=running,
                    pending=pending, state=state, in_mm=in_mm, action=action, stuck=stuck)

    def action(self, installed, target, pending, state, in_mm, left_off):
        """The plan's one action: the driver's, else what an earlier run left to finish."""
        action = _esxi.driver_plan(installed, target, self.p["allow_downgrade"])
        if action in INSTALLS:
            _esxi.bundle_location(self.p["bundle"])
            _esxi.check_bundle_matches(self.p["bundle"], target)
            self.refuse_on_image_cluster(target)
        elif pending:
            action = "reboot"
        elif in_mm and state.get("maintenance"):
            action = "exit_maintenance_mode"
        elif state.get("powered_off") and left_off:
            action = "power_on_vms"
        return action

    def refuse_on_image_cluster(self, target):
        """On vSphere 9 a cluster managed by a vLCM image takes the driver through its image only
        (``_api_capabilities``): refused before any change, naming vlcm_component."""
        why = ImageClusters(self.module.client(), self.module.rest_client).install_refusal(
            self.item["host"], self.p["host"], target.text)
        if why:
            raise _esxi.EsxiError(why)

    def end_maintenance(self, live):
        """Maintenance mode at the end: as found, except a host an earlier run left there."""
        return live["in_mm"] and not live["state"].get("maintenance")

    def plan(self, live):
        action = live["action"]
        version = live["target"].short if action in INSTALLS else live["installed"]
        before = dict(version=live["installed"], running_version=live["running"], maintenance_mode=live["in_mm"],
                      pending=live["pending"])
        after = dict(version=version, running_version=version, maintenance_mode=self.end_maintenance(live), pending=[])
        if action == "none":
            return Plan([], before=before, after=before, live=live)
        return Plan([Change(self.name, "driver", live["installed"], version, action)], before=before, after=after, live=live)

    def result(self, live, plan):
        action = live["action"]
        out = dict(previous_version=live["installed"], version=live["installed"], full_version=live["installed_full"],
                   running_version=live["running"], pending=live["pending"], plan=action, rebooted=False,
                   maintenance_mode=live["in_mm"], powered_off_vms=[], steps=[], component=self.p["component"])
        if plan:
            out.update(version=plan.after["version"], full_version=None, rebooted=action in REBOOTS,
                       running_version=plan.after["running_version"],
                       maintenance_mode=plan.after["maintenance_mode"], powered_off_vms=[v["name"] for v in live["stuck"]])
        return out

    # -- apply -----------------------------------------------------------------------------
    def left(self):
        """What the host is left with now, as every failure result carries it."""
        in_mm = bool(self.item is not None and self.item["in_maintenance"])
        names = [v["name"] for v in self.powered_off]
        return dict(host_left_in_maintenance=in_mm, hosts_in_maintenance=[self.p["host"]] if in_mm else [],
                    vms_powered_off=names, powered_off_vms=names, staged_not_running=self.staged,
                    steps=self.steps, next_step=RERUN)

    def next_step(self, exc):
        left = self.left()
        parts = []
        if left["host_left_in_maintenance"]:
            parts.append("the host is left in maintenance mode")
        if self.staged:
            parts.append("driver %s is installed but not running" % self.staged)
        if left["vms_powered_off"]:
            parts.append("VMs powered off by this run: %s" % ", ".join(left["vms_powered_off"]))
        return "; ".join(parts + [RERUN])

    def timed(self, name, doing, func, *args):
        """One timed step; a failure names ``doing`` and carries what the host is left with."""
        start = time.monotonic()
        with self.doing(doing):
            out = func(*args)
        self.steps.append(dict(step=name, seconds=round(time.monotonic() - start, 2)))
        self.partial.update(self.left())
        return out

    def apply(self, plan):
        live = plan.facts["live"]
        action, item, target = live["action"], live["item"], live["target"]
        self.partial.update(self.left())
        self.powered_off = list(item["left_off"])
        if action in REBOOTS:
            self.roll(live, item, target)
        if not self.end_maintenance(live) and item["in_maintenance"]:
            self.timed("exit_maintenance_mode", "exit maintenance mode on", self.hosts.exit_maintenance, item)
        self.warnings.extend(self.hosts.power_on_recorded(item, self.powered_off, self.timed))
        out = dict(steps=self.steps, pending=[])
        out["powered_off_vms"] = sorted(set(v["name"] for v in live["stuck"]) | set(v["name"] for v in self.powered_off))
        out.update(self.verified)
        return out

    def roll(self, live, item, target):
        """Power off what cannot move, maintenance mode, install (unless finishing), reboot, verify."""
        self.hosts.power_off_recorded(item, live["stuck"], self.powered_off, self.timed)
        self.timed("enter_maintenance_mode", "enter maintenance mode on", self.hosts.enter_maintenance, item,
                   self.p["evacuate_timeout"], "esxi_host_driver")
        if live["action"] in INSTALLS:
            kind, location = _esxi.bundle_location(self.p["bundle"])
            self.timed("install", "install %s %s on" % (self.p["component"], target.text), self.hosts.install, item, kind,
                       location, self.p["install_timeout"])
            self.staged = target.short
        elif live["pending"]:
            self.staged = live["installed"]
        self.partial.update(self.left())  # a failed reboot reports the driver staged and not running
        self.timed("reboot", "reboot", self.hosts.reboot_and_wait, item, self.p["reboot_timeout"])
        back = self.timed("verify", "verify the NVIDIA driver on", self.hosts.read_driver, item)
        now, now_full, running = back["installed"], back["installed_full"], back["running"]
        with self.doing("verify the NVIDIA driver on"):
            if now is None or not _esxi.same_version(now_full or now, target):
                raise VsphereError("the host runs %s after the install, not %s" % (now_full or "no NVIDIA driver", target.text))
            if running is None or _esxi.compare_versions(running, now_full or now) != 0:
                raise VsphereError("driver %s is installed but the loaded nvidia module is %s after the reboot"
                                   % (now, running or "none"))
        self.staged = None
        self.partial.update(self.left())
        self.verified = dict(version=now, full_version=now_full, running_version=running)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "esxi_host_driver", esxi_host_driver_errors)
    Runner(module, HostDriver(module)).run()


if __name__ == "__main__":
    main()
