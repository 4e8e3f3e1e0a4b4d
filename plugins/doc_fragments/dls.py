# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The connection to an NVIDIA DLS appliance's REST API of the modules that read it beside other
    # links (the options carry the dls_ prefix). A module says in its own description of dls_host
    # what it reads there. APPLIANCE: the same connection of the modules that talk to the appliance
    # alone (no prefix but for dls_host; the host, user and password required).
    DOCUMENTATION = r"""
options:
  dls_host:
    description:
      - Address of the DLS appliance (site.yml's C(gpupool_dls_host)).
    type: str
  dls_port:
    description: HTTPS port of the appliance's REST API (1 to 65535).
    type: int
    default: 443
  dls_username:
    description: User of the appliance's REST API.
    type: str
  dls_password:
    description: Password of O(dls_username).
    type: str
  dls_ca_file:
    description: CA bundle of the appliance's certificate.
    type: path
  dls_validate_certs:
    description: Verify the appliance's TLS certificate.
    type: bool
    default: true
"""

    APPLIANCE = r"""
options:
  dls_host:
    description: Host name or address of the DLS appliance (any node of an HA pair).
    type: str
    required: true
  port:
    description: HTTPS port of the appliance's REST API.
    type: int
    default: 443
  username:
    description: User of the appliance's REST API (a local DLS administrator, C(dls_admin) by default on the appliance).
    type: str
    required: true
  password:
    description: Password of O(username).
    type: str
    required: true
  ca_file:
    description: PEM bundle of the CA that signed the appliance's certificate (default the system trust store).
    type: path
  validate_certs:
    description: Verify the appliance's TLS certificate.
    type: bool
    default: true
"""
