#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dls_client_token
short_description: A client configuration token from an NVIDIA DLS appliance
version_added: 0.1.0
description:
  - Logs in to the REST API of an NVIDIA Delegated License Service (DLS) appliance, finds its
    service instance, its license server's scope reference and the node to lease from, and
    composes a client configuration token (C(compose-messenger-token)) that vGPU guests and the
    GPU Operator use to lease licenses.
  - The token is written to O(dest) with mode 0600 (written to a temporary file in the same
    folder, then renamed). No new token is minted while the one in O(dest) is valid for more than
    O(renew_before_days) days and was made for the same appliance, address type and leasing port,
    unless O(force).
  - The format of the token is not documented by NVIDIA, so its expiry is not read from the token
    itself. The module keeps a metadata file next to it, C(<dest>.meta.json) (mode 0600; expiry date,
    appliance, address, leasing port and the SHA-256 of the token, never the token), and treats a
    token whose content no longer matches that file as unknown (a new one is made).
  - Check mode logs in and reads the appliance (so an unreachable appliance or wrong credentials
    fail as they would) but composes nothing and writes nothing.
author:
  - gpupool.vcf developers (@gpupool)
options:
  dest:
    description: File the token is written to (conventionally C(client_configuration_token_<date>.tok)).
    type: path
    required: true
  expiry_days:
    description: Validity of a new token in days.
    type: int
    default: 365
  renew_before_days:
    description: A token that expires within this many days is replaced.
    type: int
    default: 30
  address_type:
    description: How clients address the license node - its FQDN or its IPv4 address.
    type: str
    choices: [fqdn, ipv4]
    default: fqdn
  leasing_port:
    description: Port the clients lease on.
    type: int
    choices: [443, 8082]
    default: 443
  force:
    description: Make a new token even when the one in O(dest) is still valid.
    type: bool
    default: false
  request_timeout:
    description:
      - Seconds to wait for one request to the appliance (connect and each read); 1 or more.
      - A request that times out, a dropped or refused connection and a 429 or 5xx answer are
        tried again, three times in all, with exponential backoff and jitter; so a read that never
        answers fails after about three times this value. The token request itself is repeated
        only when the connection was refused, as it mints a token each time it reaches the appliance.
    type: int
    default: 30
    aliases: [timeout]
extends_documentation_fragment:
  - gpupool.vcf.attributes
  - gpupool.vcf.dls.appliance
attributes:
  check_mode:
    description: Logs in and reads the appliance, composes and writes nothing; reports whether a token would be made.
  diff_mode:
    description: Returns the token's expiry, address and leasing port before and after (never the token).
notes:
  - Endpoints - C(POST /auth/v1/login), C(GET /auth/v1/user/me), C(GET /service_instance_manager/v1/service-instance),
    C(GET /admin/v1/org/{org}/virtual-groups/{vg}/license-servers/{ls}),
    C(POST /service_instance_manager/v1/service-instance/compose-messenger-token). An expired bearer token
    (401) is answered by one new login; a second 401 fails the module.
  - When the appliance cannot be reached or fails, the module fails before anything is written - the token
    and metadata file in O(dest) are left exactly as they were - and says so; a rerun makes the token.
"""

EXAMPLES = r"""
- name: Client configuration token for the GPU pool
  gpupool.vcf.dls_client_token:
    dls_host: dls-1.example.com
    username: dls_admin
    password: "{{ vault_dls_password }}"
    dest: /srv/nls/client_configuration_token.tok
    ca_file: /etc/pki/dls-ca.pem
    address_type: fqdn
    expiry_days: 365
"""

RETURN = r"""
dest:
  description: Path of the token file.
  returned: always
  type: str
expiry:
  description: Expiry date (UTC) of the token in O(dest) after the run.
  returned: success
  type: str
  sample: "2027-11-29"
reason:
  description: Why a token was (or would be) made - V(missing), V(unknown), V(expiring), V(settings), V(force); V(valid) when kept.
  returned: success
  type: str
address:
  description: The license node address written into the token.
  returned: when a token was made
  type: str
meta_file:
  description: Path of the metadata file kept next to the token.
  returned: success
  type: str
"""

import datetime
import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._licensing_inputs import dls_client_token_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import dls_argument_spec, dls_client
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import SECRET_MODE, atomic_write
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    dest=dict(type="path", required=True), expiry_days=dict(type="int", default=365),
    renew_before_days=dict(type="int", default=30),
    address_type=dict(type="str", choices=["fqdn", "ipv4"], default="fqdn"),
    leasing_port=dict(type="int", choices=[443, 8082], default=443),
    force=dict(type="bool", default=False),
    request_timeout=dict(type="int", default=30, aliases=["timeout"]),
)
ARGUMENT_SPEC.update(dls_argument_spec(prefix="", required=True))  # doc fragment gpupool.vcf.dls.appliance


def current_state(dest, meta_path):
    """(meta dict or None, reason or None): None reason means the file is a known token."""
    if not os.path.exists(dest):
        return None, "missing"
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        with open(dest, "rb") as f:
            digest = hashlib.sha256(f.read().strip()).hexdigest()
    except (OSError, ValueError):
        return None, "unknown"
    if meta.get("sha256") != digest or not meta.get("expiry"):
        return None, "unknown"
    return meta, None


class ClientToken(Resource):
    """The token file in ``dest`` and its metadata; a new token is composed only when the kept one will not do."""

    verb = "get"
    errors = (OSError,)  # the token and metadata files: named like a client error, no traceback

    def __init__(self, module):
        p = module.params
        Resource.__init__(self, "a client configuration token from DLS %s:%d" % (p["dls_host"], p["port"]))
        self.p = p
        self.dest = p["dest"]
        self.meta_path = self.dest + ".meta.json"
        self.settings = {"dls_host": p["dls_host"], "port": p["port"], "address_type": p["address_type"],
                         "leasing_port": p["leasing_port"]}
        self.client = None

    def check(self):
        p = self.p
        if p["expiry_days"] < 1 or p["renew_before_days"] < 0 or p["renew_before_days"] >= p["expiry_days"]:
            raise Failure("expiry_days must be 1 or more and renew_before_days between 0 and expiry_days - 1")
        if os.path.isdir(self.dest) or not os.path.isdir(os.path.dirname(os.path.abspath(self.dest))):
            raise Failure("dest %s must be a file path in an existing folder" % self.dest)

    def read(self):
        """The kept token's metadata and why it will not do (None: it will); the appliance only then."""
        self.check()
        p = self.p
        today = datetime.datetime.now(datetime.timezone.utc).date()
        meta, reason = current_state(self.dest, self.meta_path)
        if reason is None:
            if p["force"]:
                reason = "force"
            elif any(meta.get(k) != v for k, v in self.settings.items()):
                reason = "settings"
            elif (datetime.date.fromisoformat(meta["expiry"]) - today).days <= p["renew_before_days"]:
                reason = "expiring"
        live = dict(meta=meta, reason=reason, today=today)
        if reason is None:
            return live
        self.partial.update(reason=reason, dest=self.dest, meta_file=self.meta_path, written=False)
        self.client = dls_client(p, p["request_timeout"], prefix="")
        with self.doing("get"):
            live["selection"], live["scope_ref"] = self.client.discover(p["address_type"])
        return live

    def plan(self, live):
        if live["reason"] is None:
            return Plan()
        meta = live["meta"]
        expiry = (live["today"] + datetime.timedelta(days=self.p["expiry_days"])).isoformat()
        after = dict(self.settings, expiry=expiry, address=live["selection"]["address"])
        before = dict((k, meta.get(k)) for k in after) if meta else {}
        change = Change("client configuration token %s" % self.dest, "expiry", before.get("expiry"), expiry, "write")
        return Plan([change], before=before, after=after, expiry=expiry, live=live)

    def result(self, live, plan):
        result = dict(dest=self.dest, meta_file=self.meta_path)
        if not plan:
            return dict(result, reason="valid", expiry=live["meta"]["expiry"])
        return dict(result, reason=live["reason"], expiry=plan.after["expiry"], address=plan.after["address"])

    def diff(self, live, plan):
        return dict(before=plan.before, after=plan.after) if plan else None

    def apply(self, plan):
        live = plan.facts["live"]
        with self.doing("get"):
            token = self.client.compose(live["selection"], live["scope_ref"], self.p["leasing_port"], plan.facts["expiry"])
        token_bytes = token.strip().encode()
        with self.doing("write the token to", self.dest):
            atomic_write(self.dest, token_bytes + b"\n", SECRET_MODE)
            self.partial["written"] = True
            meta = dict(plan.after, sha256=hashlib.sha256(token_bytes).hexdigest(), created=live["today"].isoformat())
            atomic_write(self.meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode(), SECRET_MODE)

    def next_step(self, exc):
        if self.partial.get("written"):
            return "the token in %s is new but its metadata file was not written, a rerun makes both again" % self.dest
        left = "the token in %s was left as it was" % self.dest if os.path.exists(self.dest) else "no token was written"
        return "%s, a rerun makes it" % left


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "dls_client_token", dls_client_token_errors)
    Runner(module, ClientToken(module)).run()


if __name__ == "__main__":
    main()
