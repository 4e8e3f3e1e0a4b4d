#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nls_appliance_info
short_description: Whether an NVIDIA DLS appliance is ready to license the GPU pool
version_added: 0.2.0
description:
  - Waits (bounded by O(wait_seconds)) until the appliance's REST API answers a login, then reads the
    current user, the service instance with its HA node list, the license server and its leases.
  - Judges the result - the service instance lists the expected nodes (O(expect_nodes)), no node reports
    itself unhealthy, a license server is installed - and, where the license server is missing, returns
    the manual step in RV(next_step). Installing the license server (created in the NVIDIA Licensing
    Portal and bound to this appliance's service instance) has no public API, so no module can do it.
  - Watches the licensing the way the audit's C(licensing) link does (the same judgement, shared code) -
    the leases against the GPU nodes (O(gpu_nodes)) and the client configuration token that
    M(gpupool.vcf.dls_client_token) keeps (O(token_path)) - and returns the findings.
  - Changes nothing; check mode runs it as well.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.attributes.info_module
  - gpupool.vcf.dls.appliance
options:
  request_timeout:
    description: Seconds to wait for one request.
    type: int
    default: 30
  wait_seconds:
    description:
      - Seconds to wait for the appliance to answer (a new appliance boots and starts its services for
        minutes); a refused connection, a timeout or a 5xx answer is waited out, wrong credentials are not.
      - V(0) asks once.
    type: int
    default: 900
  expect_nodes:
    description: Nodes the service instance should list (2 for an HA pair).
    type: int
  token_path:
    description: The client configuration token file M(gpupool.vcf.dls_client_token) keeps (with C(<path>.meta.json)).
    type: path
  renew_before_days:
    description: A token that expires within this many days is reported (the margin dls_client_token renews at).
    type: int
    default: 30
  gpu_nodes:
    description: Names of the GPU nodes that should each hold a lease.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Is the appliance ready?
  gpupool.vcf.nls_appliance_info:
    dls_host: dls-1.example.com
    username: dls_admin
    password: "{{ vault_dls_password }}"
    ca_file: /etc/pki/dls-ca.pem
    expect_nodes: 2
    token_path: /srv/nls/gpu-pool.tok
  register: dls

- name: Stop with the manual step
  ansible.builtin.fail:
    msg: "{{ dls.problems | join('; ') }}: {{ dls.next_step }}"
  when: not dls.ready
"""

RETURN = r"""
answered:
  description: The appliance answered a login.
  returned: always
  type: bool
waited_seconds:
  description: Seconds waited until it answered.
  returned: always
  type: int
ready:
  description: It answered, lists the expected nodes, none reports itself unhealthy, and a license server is installed.
  returned: always
  type: bool
license_server_installed:
  description: A license server is installed on the service instance (null when the appliance did not answer).
  returned: always
  type: bool
license_server:
  description: Id of the license server in the user's scope.
  returned: always
  type: str
nodes:
  description: The service instance's HA nodes - node_id, fqdn, address, role, health (healthy, unhealthy, unknown) and the status the appliance gave.
  returned: always
  type: list
  elements: dict
leases:
  description: Number of leases the license server holds (null when not read).
  returned: always
  type: int
token:
  description: The kept client token - path, state (missing, unknown, expired, expiring, other_appliance, valid), expiry, days_left.
  returned: when token_path is given
  type: dict
problems:
  description: Why the appliance is not ready, as sentences.
  returned: always
  type: list
  elements: str
findings:
  description: The licensing findings (rules of the audit's licensing link - dls_unreachable, dls_license_server_missing, leases_short, client_token_*).
  returned: always
  type: list
  elements: dict
next_step:
  description: What to do next - the manual Licensing Portal step when the license server is missing.
  returned: always
  type: str
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._appliance import read_appliance, wait_answering
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError, dls_argument_spec, dls_client
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._token import read_token
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_licensing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nls_appliance as nls
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._licensing_inputs import nls_appliance_info_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    request_timeout=dict(type="int", default=30), wait_seconds=dict(type="int", default=900),
    expect_nodes=dict(type="int"), token_path=dict(type="path"), renew_before_days=dict(type="int", default=30),
    gpu_nodes=dict(type="list", elements="str"),
)
ARGUMENT_SPEC.update(dls_argument_spec(prefix="", required=True))  # doc fragment gpupool.vcf.dls.appliance


class ApplianceReadiness(Info):
    """The appliance's answers, judged."""

    def __init__(self, module):
        p = module.params
        Info.__init__(self, "the DLS appliance %s:%d" % (p["dls_host"], p["port"]))
        self.p = p

    def read(self):
        p = self.p
        where = "%s:%d" % (p["dls_host"], p["port"])
        client = dls_client(p, p["request_timeout"], prefix="")
        waited = 0
        try:
            waited = wait_answering(client, p["wait_seconds"])
            read = read_appliance(client, where, logged_in=True)
        except DlsError as exc:
            read = dict(where=where, error=str(exc), stage="login", transient=exc.transient, service_instance=None,
                        license_server=None, leases=None)
        token = None
        if p["token_path"]:
            meta, digest = read_token(p["token_path"])
            state, detail = _audit_licensing.token_state(meta, digest, datetime.datetime.now(datetime.timezone.utc).date(),
                                                         p["renew_before_days"], p["dls_host"], p["port"])
            token = dict(path=p["token_path"], state=state, detail=detail)
        return dict(read=read, waited=waited, token=token)

    def result(self, live, plan):
        p, read, token = self.p, live["read"], live["token"]
        state = nls.appliance_state(read, p["expect_nodes"])
        findings = [f for f in _audit_licensing.audit_licensing({}, dls=read, token=token, license_series=None,
                                                                gpu_nodes=p["gpu_nodes"], renew_before_days=p["renew_before_days"])
                    if f["rule"] != "license_check_not_made"]
        out = dict(answered=read["stage"] != "login" or not read.get("error"), waited_seconds=int(live["waited"]),
                   ready=state["ready"], license_server_installed=state["license_server_installed"],
                   license_server=read.get("license_server"), nodes=state["nodes"],
                   leases=len(read["leases"]) if read.get("leases") is not None else None,
                   problems=state["problems"], findings=findings, next_step=state["next_step"])
        if token is not None:
            out["token"] = dict(path=token["path"], state=token["state"], expiry=token["detail"].get("expiry"),
                                days_left=token["detail"].get("days_left"))
        return out


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "nls_appliance_info", nls_appliance_info_errors)
    Runner(module, ApplianceReadiness(module)).run()


if __name__ == "__main__":
    main()
