#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nvidia_license_info
short_description: vGPU software license state of a Linux guest from nvidia-smi
version_added: 0.1.0
description:
  - Runs C(nvidia-smi -q) on the target and returns, per GPU, the licensed product, the license
    status and its expiry, and whether every GPU holds a valid license.
  - A guest without a working NVIDIA driver is reported (RV(driver_present) false), not failed.
  - Changes nothing; check mode runs it as well.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.attributes.info_module
options:
  nvidia_smi:
    description: The nvidia-smi command (a name on E(PATH) or a path).
    type: str
    default: nvidia-smi
  chroot:
    description:
      - Run nvidia-smi inside this root (C(/run/nvidia/driver) on a node whose driver the GPU
        Operator's driver container provides).
    type: path
"""

EXAMPLES = r"""
- name: License state of the vGPU guest
  gpupool.vcf.nvidia_license_info:
  register: lic

- name: Every GPU is licensed
  ansible.builtin.assert:
    that: lic.licensed
"""

RETURN = r"""
driver_present:
  description: nvidia-smi could talk to the NVIDIA driver.
  returned: always
  type: bool
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
  sample: 550.127.05
licensed:
  description: Every GPU holds a license that has not expired.
  returned: always
  type: bool
gpus:
  description: Per GPU.
  returned: always
  type: list
  elements: dict
  contains:
    pci_bus_id: {description: PCI bus id., type: str}
    product_name: {description: GPU (vGPU type) name., type: str}
    licensed_product: {description: Licensed product., type: str, sample: NVIDIA Virtual Compute Server}
    license_status: {description: License status as nvidia-smi prints it., type: str}
    licensed: {description: Licensed and not expired., type: bool}
    expiry: {description: "Expiry of the license (UTC, ISO 8601).", type: str}
    expired: {description: The expiry is past., type: bool}
message:
  description: What nvidia-smi said when the driver was not reachable.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._licensing_inputs import nvidia_license_info_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia_smi import parse
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    nvidia_smi=dict(type="str", default="nvidia-smi"),
    chroot=dict(type="path"),
)


class LicenseState(Info):
    """What ``nvidia-smi -q`` says of the driver and each GPU's license (no driver: driver_present false)."""

    def __init__(self, module):
        Info.__init__(self, "the license state of the NVIDIA driver")
        self.module = module

    def read(self):
        module = self.module
        cmd = [module.params["nvidia_smi"], "-q"]
        if module.params["chroot"]:
            cmd = [module.get_bin_path("chroot", required=True), module.params["chroot"]] + cmd
        elif "/" not in cmd[0]:
            path = module.get_bin_path(cmd[0])
            if not path:
                return dict(driver_present=False, driver_version=None, licensed=False, gpus=[],
                            message="%s not found: no NVIDIA driver installed" % cmd[0])
            cmd[0] = path
        rc, out, err = module.run_command(cmd)
        facts = parse(out if out.strip() else err)
        if rc != 0 and facts["driver_present"]:
            facts.update(driver_present=False, message=(err or out).strip()[:500] or "nvidia-smi exited %d" % rc)
        return facts

    def result(self, live, plan):
        return live


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "nvidia_license_info", nvidia_license_info_errors)
    Runner(module, LicenseState(module)).run()


if __name__ == "__main__":
    main()
