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

from ansible_collections.gpupool.vcf.plugins.module_utils._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce


def main():
    module = VsphereModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            evacuate_timeout=dict(type="int", default=1800),
        ),
        supports_check_mode=True,
    )
    enforce(module, "esxi_maintenance_mode")
    p = module.params
    want = p["state"] == "present"
    ops = HostOps(module.client())
    try:
        host = ops.find_host(p["host"])
        now = bool(host.get("runtime.inMaintenanceMode"))
        if want and not now:
            stuck = [v["name"] for v in ops.vgpu_vms(host) if v["power_state"] == "poweredOn"]
            if stuck and not ops.vgpu_hotmigrate_enabled():
                module.fail_json(msg="Unable to put host %s in maintenance mode: powered-on VMs hold vGPUs and cannot "
                                     "be migrated (%s). Nothing was changed." % (p["host"], ", ".join(stuck)))
    except VsphereError as exc:
        module.fail_vsphere("read", "host %s" % p["host"], exc)
    result = dict(changed=now != want, maintenance_mode=want)
    if module._diff:
        result["diff"] = dict(before=dict(maintenance_mode=now), after=dict(maintenance_mode=want))
    if result["changed"] and not module.check_mode:
        try:
            if want:
                ops.enter_maintenance(host, p["evacuate_timeout"])
            else:
                ops.exit_maintenance(host)
        except VsphereError as exc:
            module.fail_vsphere("%s maintenance mode on" % ("enter" if want else "exit"), "host %s" % p["host"], exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
