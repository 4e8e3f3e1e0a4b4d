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
  - A failure after the host entered maintenance mode leaves it in maintenance mode, and
    the message says so; a host is never handed back to DRS with the wrong driver.
  - Versions are compared as NVIDIA driver versions (550.90.05 is newer than 550.54.10).
    A short target (V(550.90.05)) matches any build of it; a full one
    (V(550.90.05-1OEM.800.1.0.20613240)) also compares the build.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
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
    support: full
  diff_mode:
    description: Returns the driver version and maintenance mode before and after.
    support: full
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
  description: What was (or would be) done, V(none), V(install), V(upgrade) or V(downgrade).
  returned: always
  type: str
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
diff:
  description: Before and after (with C(--diff)).
  returned: when diff mode is on
  type: dict
"""

import time

from ansible_collections.gpupool.vcf.plugins.module_utils import _esxi
from ansible_collections.gpupool.vcf.plugins.module_utils._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce


class DriverRollout:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.ops = HostOps(module.client())
        self.steps = []
        self.in_maintenance_by_us = False
        self.powered_off = []

    def step(self, name, func, *args):
        start = time.monotonic()
        out = func(*args)
        self.steps.append(dict(step=name, seconds=round(time.monotonic() - start, 2)))
        return out

    def fail(self, what, exc, **extra):
        left = self.in_maintenance_by_us
        msg = "Unable to %s on host %s: %s" % (what, self.p["host"], exc)
        if left:
            msg += "; the host is left in maintenance mode (fix the cause, then rerun or exit maintenance mode by hand)"
        self.module.fail_vsphere_msg(msg, host_left_in_maintenance=left, steps=self.steps,
                                     powered_off_vms=[v["name"] for v in self.powered_off], **extra)

    def run(self):
        p = self.p
        try:
            target = _esxi.parse_driver_version(p["version"])
        except _esxi.EsxiError as exc:
            self.module.fail_json(msg=str(exc))
        try:
            host = self.ops.find_host(p["host"])
            if str(host.get("runtime.connectionState")) != "connected":
                raise VsphereError("the host is %s" % host.get("runtime.connectionState"))
            installed, installed_full = self.ops.installed_driver(host.obj)
        except VsphereError as exc:
            self.module.fail_vsphere("read the NVIDIA driver of", "host %s" % p["host"], exc)
        try:
            action = _esxi.driver_plan(installed_full or installed, target, p["allow_downgrade"])
            if action != "none":
                kind, location = _esxi.bundle_location(p["bundle"])
                _esxi.check_bundle_matches(p["bundle"], target)
        except _esxi.EsxiError as exc:
            self.module.fail_json(msg="Unable to bring the NVIDIA driver of host %s to %s: %s" % (p["host"], target.text, exc),
                                  previous_version=installed)
        in_mm = bool(host.get("runtime.inMaintenanceMode"))
        result = dict(changed=False, previous_version=installed, version=installed, full_version=installed_full,
                      plan=action, rebooted=False, maintenance_mode=in_mm, powered_off_vms=[], steps=[],
                      component=p["component"])
        before = dict(version=installed, maintenance_mode=in_mm)
        if action == "none":
            if self.module._diff:
                result["diff"] = dict(before=before, after=before)
            self.module.exit_json(**result)

        # what cannot move: decided before anything changes
        try:
            vgpu_vms = [v for v in self.ops.vgpu_vms(host) if v["power_state"] == "poweredOn"]
            stuck = vgpu_vms if (vgpu_vms and not self.ops.vgpu_hotmigrate_enabled()) else []
        except VsphereError as exc:
            self.module.fail_vsphere("read the VMs of", "host %s" % p["host"], exc)
        if stuck and not p["power_off_vgpu_vms"]:
            self.module.fail_json(
                msg="Unable to bring the NVIDIA driver of host %s to %s: %d powered-on VMs hold vGPUs and cannot be "
                    "migrated (%s); power them off or move them first, or set power_off_vgpu_vms=true. Nothing was changed."
                    % (p["host"], target.text, len(stuck), ", ".join(v["name"] for v in stuck)),
                previous_version=installed, blocking_vms=[v["name"] for v in stuck])

        result.update(changed=True, version=target.short, full_version=None, rebooted=True,
                      maintenance_mode=in_mm, powered_off_vms=[v["name"] for v in stuck])
        if self.module._diff:
            result["diff"] = dict(before=before, after=dict(version=target.short, maintenance_mode=in_mm))
        if self.module.check_mode:
            self.module.exit_json(**result)

        try:
            for vm in stuck:
                self.step("power_off %s" % vm["name"], self.ops.power_off, vm["obj"], vm["name"])
                self.powered_off.append(vm)
        except VsphereError as exc:
            self.fail("power off the vGPU VMs", exc)
        try:
            self.in_maintenance_by_us = self.step("enter_maintenance_mode", self.ops.enter_maintenance, host,
                                                  p["evacuate_timeout"])
        except VsphereError as exc:
            self.fail("enter maintenance mode", exc)
        self.in_maintenance_by_us = self.in_maintenance_by_us or in_mm
        try:
            self.step("install", self.ops.install, host, kind, location, p["install_timeout"])
        except VsphereError as exc:
            self.fail("install %s %s" % (p["component"], target.text), exc)
        try:
            host = self.step("reboot", self.ops.reboot_and_wait, self.ops.refresh(host), p["reboot_timeout"])
        except VsphereError as exc:
            self.fail("reboot after installing %s %s" % (p["component"], target.text), exc)
        try:
            now, now_full = self.step("verify", self.ops.installed_driver, host.obj)
        except VsphereError as exc:
            self.fail("verify the NVIDIA driver", exc)
        if now is None or not _esxi.same_version(now_full or now, target):
            self.fail("verify the NVIDIA driver", "the host runs %s after the install, not %s" % (now_full or "no NVIDIA driver", target.text))
        result.update(version=now, full_version=now_full)
        if not in_mm:
            try:
                self.step("exit_maintenance_mode", self.ops.exit_maintenance, host)
            except VsphereError as exc:
                self.fail("exit maintenance mode", exc)
            self.in_maintenance_by_us = False
        warnings = []
        for vm in self.powered_off:
            try:
                self.step("power_on %s" % vm["name"], self.ops.power_on, vm["obj"], vm["name"])
            except VsphereError as exc:
                warnings.append("VM %s was powered off for the install and could not be powered on again: %s" % (vm["name"], exc))
        for w in warnings:
            self.module.warn(w)
        result["steps"] = self.steps
        self.module.exit_json(**result)


class _Module(VsphereModule):
    def fail_vsphere_msg(self, msg, **result):
        self.fail_json(msg=msg, **result)


def main():
    module = _Module(
        argument_spec=dict(
            host=dict(type="str", required=True),
            version=dict(type="str", required=True),
            bundle=dict(type="str"),
            component=dict(type="str", default="NVD-AIE-800"),
            evacuate_timeout=dict(type="int", default=1800),
            power_off_vgpu_vms=dict(type="bool", default=False),
            allow_downgrade=dict(type="bool", default=False),
            reboot_timeout=dict(type="int", default=1800),
            install_timeout=dict(type="int", default=1800),
        ),
        supports_check_mode=True,
    )
    enforce(module, "esxi_host_driver")
    DriverRollout(module).run()


if __name__ == "__main__":
    main()
