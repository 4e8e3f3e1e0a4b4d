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
attributes:
  check_mode:
    description: Reports whether the host would enter or exit maintenance mode without doing it.
    support: full
  diff_mode:
    description: Returns the maintenance mode before and after.
    support: full
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
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    evacuate_timeout=dict(type="int", default=1800),
)


class MaintenanceMode(Resource):
    """Maintenance mode of one host; refused (before any change) while powered-on VMs hold vGPUs that cannot move."""

    def __init__(self, module):
        Resource.__init__(self, "host %s" % module.params["host"])
        self.module = module
        self.p = module.params
        self.want = self.p["state"] == "present"
        self.ops = None

    def read(self):
        self.ops = HostOps(self.module.client())
        host = self.ops.find_host(self.p["host"])
        now = bool(host.get("runtime.inMaintenanceMode"))
        if self.want and not now:
            stuck = [v["name"] for v in self.ops.vgpu_vms(host) if v["power_state"] == "poweredOn"]
            if stuck and not self.ops.vgpu_hotmigrate_enabled():
                raise Failure("Unable to put host %s in maintenance mode: powered-on VMs hold vGPUs and cannot be migrated "
                              "(%s). Nothing was changed." % (self.p["host"], ", ".join(stuck)))
        return dict(host=host, maintenance_mode=now)

    def plan(self, live):
        now = live["maintenance_mode"]
        changes = [] if now == self.want else [Change(self.name, "maintenance_mode", now, self.want, "enter" if self.want else "exit")]
        return Plan(changes, before=dict(maintenance_mode=now), after=dict(maintenance_mode=self.want), host=live["host"])

    def result(self, live, plan):
        return dict(maintenance_mode=self.want)

    def apply(self, plan):
        host = plan.facts["host"]
        with self.doing("%s maintenance mode on" % plan.verb()):
            if self.want:
                self.ops.enter_maintenance(host, self.p["evacuate_timeout"])
            else:
                self.ops.exit_maintenance(host)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "esxi_maintenance_mode")
    Runner(module, MaintenanceMode(module)).run()


if __name__ == "__main__":
    main()
