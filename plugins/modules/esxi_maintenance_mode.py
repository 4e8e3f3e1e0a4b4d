#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: esxi_maintenance_mode
short_description: Put one ESXi host in maintenance mode or take it out
version_added: 0.1.0
description:
  - Enters or exits maintenance mode on one host. Entering fails before any change when
    powered-on VMs holding vGPUs are on the host and vCenter does not migrate vGPU VMs
    (advanced setting C(vgpu.hotmigrate.enabled)).
  - Used by C(playbooks/host_rebuild.yml) to hand a host back only after every check passed.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  host:
    description: Name of the ESXi host.
    type: str
    required: true
  state:
    description: V(present) in maintenance mode, V(absent) out of it.
    type: str
    choices: [present, absent]
    default: present
  evacuate_timeout:
    description: Seconds vCenter may take to evacuate the host.
    type: int
    default: 1800
  power_off_vgpu_vms:
    description:
      - With O(state=present), power off the powered-on VMs holding vGPUs that vCenter cannot migrate before
        the host enters maintenance mode, each recorded on the host first (custom attribute
        C(gpupool.vcf.host-state)), instead of refusing.
      - With O(state=absent), after the host leaves maintenance mode, power on the VMs that record holds and
        that are still off (those this module or a reboot of the collection powered off).
    type: bool
    default: false
attributes:
  check_mode:
    description: Reports whether the host would enter or exit maintenance mode without doing it.
  diff_mode:
    description: Returns the maintenance mode before and after.
"""

EXAMPLES = r"""
- name: Hand the host back to DRS
  gpupool.vcf.esxi_maintenance_mode:
    host: esx-h100-01.example.com
    state: absent
"""

RETURN = r"""
maintenance_mode:
  description: Whether the host is (or would be) in maintenance mode at the end.
  returned: always
  type: bool
powered_off_vms:
  description: VMs powered off (or that would be) before the host entered maintenance mode.
  returned: always
  type: list
  elements: str
powered_on_vms:
  description: Recorded VMs powered on (or that would be) after the host left maintenance mode (those that stay off are in
    RV(vms_powered_off)).
  returned: always
  type: list
  elements: str
vms_powered_off:
  description: VMs the collection powered off that are still off when the run ends (a rerun powers them on).
  returned: when a power-on failed
  type: list
  elements: str
power_on_errors:
  description: Why vSphere did not power on each VM of RV(vms_powered_off) (the failed task's error), by VM name.
  returned: when a power-on failed
  type: dict
  sample: {"inference-2": "power on VM inference-2 failed: no GPU of the host can place vGPU nvidia_h100xm-1-10c"}
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host_reader import EsxiHosts
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import esxi_maintenance_mode_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    evacuate_timeout=dict(type="int", default=1800),
    power_off_vgpu_vms=dict(type="bool", default=False),
)


class MaintenanceMode(Resource):
    """Maintenance mode of one host; refused (before any change) while powered-on VMs hold vGPUs that cannot move."""

    def __init__(self, module):
        Resource.__init__(self, "host %s" % module.params["host"])
        self.module = module
        self.p = module.params
        self.want = self.p["state"] == "present"
        self.hosts = None

    def read(self):
        self.hosts = EsxiHosts(self.module.client())
        # the host's record (and, to power on, the VMs an earlier run left off): one retrieval each
        item = self.hosts.read([self.p["host"]], left_off=not self.want and self.p["power_off_vgpu_vms"])[0]
        now = item["in_maintenance"]
        stuck, recorded = [], []
        if self.want and not now:
            running = self.hosts.powered_on_vgpu_vms(self.hosts.read_vgpu_vms([item])[0])
            if running and not self.hosts.vgpu_hotmigrate_enabled():
                if not self.p["power_off_vgpu_vms"]:
                    raise Failure("Unable to put host %s in maintenance mode: powered-on VMs hold vGPUs and cannot be "
                                  "migrated (%s); power them off or move them first, or set power_off_vgpu_vms. "
                                  "Nothing was changed." % (self.p["host"], ", ".join(v["name"] for v in running)))
                stuck = running
        if not self.want and self.p["power_off_vgpu_vms"]:
            recorded = item["left_off"]
        return dict(item=item, maintenance_mode=now, stuck=stuck, recorded=recorded)

    def plan(self, live):
        now = live["maintenance_mode"]
        plan = Plan(before=dict(maintenance_mode=now), after=dict(maintenance_mode=self.want), item=live["item"],
                    stuck=live["stuck"], recorded=live["recorded"])
        for vm in live["stuck"]:
            plan.add("VM %s" % vm["name"], "power_state", "poweredOn", "poweredOff", "power_off")
        if now != self.want:
            plan.add(self.name, "maintenance_mode", now, self.want, "enter" if self.want else "exit")
        for vm in live["recorded"]:
            plan.add("VM %s" % vm["name"], "power_state", "poweredOff", "poweredOn", "power_on")
        return plan

    def result(self, live, plan):
        return dict(maintenance_mode=self.want, powered_off_vms=[v["name"] for v in plan.facts["stuck"]],
                    powered_on_vms=[v["name"] for v in plan.facts["recorded"]])

    def _step(self, _key, doing, func, *args):
        with self.doing(doing, self.name):
            func(*args)

    def apply(self, plan):
        item = plan.facts["item"]
        off, names = [], []

        def power_off(key, doing, func, *args):
            self._step(key, doing, func, *args)
            names.append(key.split(" ", 1)[1])

        if plan.facts["stuck"]:
            self.partial = dict(vms_powered_off=names)  # what a failure leaves off (names, recorded on the host)
            self.hosts.power_off_recorded(item, plan.facts["stuck"], off, power_off)
        if plan.before["maintenance_mode"] != self.want:
            with self.doing("%s maintenance mode on" % ("enter" if self.want else "exit")):
                if self.want:
                    self.hosts.enter_maintenance(item, self.p["evacuate_timeout"])
                else:
                    self.hosts.exit_maintenance(item)
        if plan.facts["recorded"]:
            left = list(plan.facts["recorded"])
            refused = {}

            def power_on(key, doing, func, *args):
                try:
                    self._step(key, doing, func, *args)
                except ClientError as exc:  # the VM stays off (recorded on the host): why, for the result
                    refused[key.split(" ", 1)[1]] = str(exc)
                    raise

            for text in self.hosts.power_on_recorded(item, left, power_on):
                self.warnings.append(text)
            if left:
                still_off = [v["name"] for v in left]
                return dict(vms_powered_off=still_off,
                            powered_on_vms=[v["name"] for v in plan.facts["recorded"] if v["name"] not in still_off],
                            power_on_errors=dict((v["name"], refused.get(v["name"], "not powered on")) for v in left))
        return None

    def next_step(self, exc):
        off = (self.partial or {}).get("vms_powered_off")
        if off:
            return ("VMs powered off so far (recorded on the host): %s; a rerun with state=absent and "
                    "power_off_vgpu_vms powers them on" % ", ".join(off))
        return None


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "esxi_maintenance_mode", esxi_maintenance_mode_errors)
    Runner(module, MaintenanceMode(module)).run()


if __name__ == "__main__":
    main()
