# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  hostname:
    description:
      - vCenter Server host name or IP address.
      - If not set, the environment variable E(VMWARE_HOST) is used.
    type: str
  username:
    description:
      - vCenter user name.
      - If not set, the environment variable E(VMWARE_USER) is used.
    type: str
    aliases: [user, admin]
  password:
    description:
      - Password of O(username).
      - If not set, the environment variable E(VMWARE_PASSWORD) is used.
    type: str
    aliases: [pass, pwd]
  port:
    description:
      - vCenter HTTPS port.
      - If not set, the environment variable E(VMWARE_PORT) is used.
    type: int
    default: 443
  validate_certs:
    description:
      - Verify the vCenter TLS certificate. Leave on in production; the module warns when it is off.
      - If not set, the environment variable E(VMWARE_VALIDATE_CERTS) is used.
    type: bool
    default: true
  ca_file:
    description:
      - PEM bundle of the CA(s) that signed the vCenter certificate.
      - If not set, the environment variable E(VMWARE_CA_FILE) is used, then the standard
        E(REQUESTS_CA_BUNDLE) and E(SSL_CERT_FILE), then the system trust store.
    type: path
  timeout:
    description:
      - Seconds to wait for one HTTP request to vCenter. Must be above 0.
    type: int
    default: 60
  retries:
    description:
      - How often one vCenter call is repeated after a transient failure, and how often an
        expired session is logged in again, before the module fails.
      - Reads are repeated after a dropped or refused connection, a timeout or a 5xx answer;
        a change only where it provably did not reach vCenter (connection refused; for the
        REST API also a connect timeout or HTTP 503 with C(Retry-After)). After a 502 or 504
        (a gateway that may have forwarded it), a reset or a timeout, a change is not sent again;
        the module fails saying it may or may not have been carried out, with what it read
        again (C(reread)). Delays grow from 1 s, doubled up to 30 s, with jitter.
      - V(0) turns retries and re-login off. Must not be negative.
    type: int
    default: 5
requirements:
  - pyvmomi >= 8.0.3.0
notes:
  - All vSphere modules of this collection are in the action group C(gpupool.vcf.vsphere), so
    C(module_defaults) can set the connection options once.
"""
