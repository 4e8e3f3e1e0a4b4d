# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DLS appliance as the audit's licensing link reads it (client layer over ``_nls.DlsClient`` and
``_appliance.read_appliance``: knows nothing of Ansible)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._appliance import lease_list, read_appliance
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import dls_client

AUDITED = ("where", "error", "stage", "license_server", "leases")


def read_dls(p):
    """{where, error, stage, license_server, leases} of the appliance of ``p`` (dls_host, dls_port,
    dls_username, dls_password, dls_validate_certs, dls_ca_file, request_timeout): the steps of
    ``read_appliance``, the first failing one as ``stage`` with its error."""
    answer = read_appliance(dls_client(p, p["request_timeout"]), "%s:%d" % (p["dls_host"], p["dls_port"]))
    return dict((key, answer[key]) for key in AUDITED)


__all__ = ["lease_list", "read_dls"]
