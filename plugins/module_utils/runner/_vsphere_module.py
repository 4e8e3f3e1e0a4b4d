# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Ansible-aware layer over the vSphere client: shared options and error handling."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import warn_tls_off
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    HAS_PYVMOMI,
    PYVMOMI_IMPORT_ERROR,
    VsphereClient,
    VsphereError,
    service_api_version,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import (
    HAS_REQUESTS,
    REQUESTS_IMPORT_ERROR,
    VsphereRestClient,
)


def vsphere_argument_spec():
    """Connection options shared by every vSphere module (doc fragment gpupool.vcf.vsphere)."""
    return dict(
        hostname=dict(type="str", fallback=(env_fallback, ["VMWARE_HOST"])),
        username=dict(type="str", aliases=["user", "admin"], fallback=(env_fallback, ["VMWARE_USER"])),
        password=dict(type="str", aliases=["pass", "pwd"], no_log=True,
                      fallback=(env_fallback, ["VMWARE_PASSWORD"])),
        port=dict(type="int", default=443, fallback=(env_fallback, ["VMWARE_PORT"])),
        validate_certs=dict(type="bool", default=True, fallback=(env_fallback, ["VMWARE_VALIDATE_CERTS"])),
        ca_file=dict(type="path", fallback=(env_fallback, ["VMWARE_CA_FILE"])),
        timeout=dict(type="int", default=60),
        retries=dict(type="int", default=5),
    )


class VsphereModule(AnsibleModule):
    """AnsibleModule with the vSphere connection options and one way to fail."""

    def __init__(self, argument_spec, **kwargs):
        # set before AnsibleModule validates the arguments: a bad option fails through
        # fail_json, which closes the sessions
        self._client = None
        self._rest = None
        self._api_version = None
        spec = vsphere_argument_spec()
        spec.update(argument_spec)
        # what a run changed so far, returned with any failure (the runner adds it to the result)
        self.partial = {}
        super(VsphereModule, self).__init__(argument_spec=spec, **kwargs)
        if not HAS_PYVMOMI:
            self.fail_json(msg=missing_required_lib("pyvmomi"), exception=str(PYVMOMI_IMPORT_ERROR))
        if self.params["timeout"] is not None and self.params["timeout"] <= 0:
            self.fail_json(msg="timeout must be a number of seconds above 0, not %s" % self.params["timeout"])
        if self.params["retries"] is not None and self.params["retries"] < 0:
            self.fail_json(msg="retries must be 0 or more, not %s" % self.params["retries"])
        warn_tls_off(self)  # the modules without the runner (gpu_pool_audit) warn too

    def _connection_args(self):
        """The connection options, as both client layers take them."""
        return dict((name, self.params[name]) for name in vsphere_argument_spec())

    def rest_client(self):
        """The vSphere Automation API (/api) session of this module run."""
        if self._rest is None:
            if not HAS_REQUESTS:
                self.fail_json(msg=missing_required_lib("requests"), exception=str(REQUESTS_IMPORT_ERROR))
            try:
                self._rest = VsphereRestClient(**self._connection_args())
            except VsphereError as exc:
                self.fail_json(msg="Unable to connect to the vSphere API: %s" % exc)
        return self._rest

    def open_rest_session(self):
        """A new vSphere Automation API session that the caller closes (rest_client() is the run's shared one)."""
        return VsphereRestClient(**self._connection_args())

    def client(self):
        """The session of this module run (logged in on first use)."""
        if self._client is None:
            try:
                self._client = VsphereClient(**self._connection_args())
            except VsphereError as exc:
                self.fail_json(msg="Unable to connect to vCenter: %s" % exc)
        return self._client

    def api_version(self):
        """The vCenter's API version ('8.0.3.0'): the session's when one is open, else read without a login
        (one RetrieveServiceContent, no Login or Logout), for calls that need the version alone."""
        if self._client is not None:
            return self._client.content.about.apiVersion
        if self._api_version is None:
            args = self._connection_args()
            try:
                self._api_version = service_api_version(
                    args["hostname"], port=args["port"], validate_certs=args["validate_certs"], ca_file=args["ca_file"],
                    timeout=args["timeout"], retries=args["retries"])
            except VsphereError as exc:
                self.fail_json(msg="Unable to connect to vCenter: %s" % exc)
        return self._api_version

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._rest is not None:
            self._rest.close()
            self._rest = None

    def fail_vsphere(self, verb, obj, exc, **result):
        """fail_json(msg="Unable to <verb> <object>: <reason>"), logging out first."""
        self.close()
        self.fail_json(msg="Unable to %s %s: %s" % (verb, obj, exc), **result)

    def exit_json(self, **kwargs):
        self.close()
        super(VsphereModule, self).exit_json(**kwargs)

    def fail_json(self, msg, **kwargs):
        self.close()
        super(VsphereModule, self).fail_json(msg=msg, **kwargs)
