# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vSphere session of a module whose vCenter options carry a prefix (``vcenter_hostname``, ...)
beside another backend's unprefixed ones (``gpu_usage``: Prometheus first, vCenter as well).

The modules that talk to vSphere alone take the unprefixed options of ``VsphereModule``; this is
the same session (``vsphere/_vsphere.VsphereClient``: one login, one fault boundary) made from the
prefixed options; the module opens it once for the run's reads and logs it out after them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import env_fallback

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient


def vcenter_argument_spec(prefix="vcenter_"):
    """The vCenter connection options under ``prefix`` (the VMWARE_* environment fallbacks but VMWARE_HOST,
    so that an environment set for other modules does not turn the vCenter read on)."""
    return {
        prefix + "hostname": dict(type="str"),
        prefix + "username": dict(type="str", fallback=(env_fallback, ["VMWARE_USER"])),
        prefix + "password": dict(type="str", no_log=True, fallback=(env_fallback, ["VMWARE_PASSWORD"])),
        prefix + "port": dict(type="int", default=443, fallback=(env_fallback, ["VMWARE_PORT"])),
        prefix + "validate_certs": dict(type="bool", default=True, fallback=(env_fallback, ["VMWARE_VALIDATE_CERTS"])),
        prefix + "ca_file": dict(type="path", fallback=(env_fallback, ["VMWARE_CA_FILE"])),
    }


def vcenter_client(params, timeout, retries, prefix="vcenter_"):
    """The logged-in VsphereClient of the options under ``prefix`` (the caller closes it)."""
    return VsphereClient(params[prefix + "hostname"], params[prefix + "username"], params[prefix + "password"],
                         port=params[prefix + "port"], validate_certs=params[prefix + "validate_certs"],
                         ca_file=params[prefix + "ca_file"], timeout=timeout, retries=retries)


__all__ = ["vcenter_argument_spec", "vcenter_client"]
