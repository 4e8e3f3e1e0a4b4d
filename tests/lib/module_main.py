"""Run a module's ``main()`` the way Ansible does, for the unit tests under tests/unit/plugins/modules: the
arguments go in as the module reads them (``AnsibleModule`` parses, validates and applies defaults, so the
argument spec, ``required_if`` and ``no_log`` are exercised), ``exit_json`` and ``fail_json`` raise
:class:`~tests.lib.fake_module.Exited` with the result, and the sessions a module opens are placeholders
(``"soap session"``, ``"rest session"``) that the fake client layers the test patches in take.

Only the client layer (the ``*_api`` classes and readers a module imports) is replaced, never the module's
own logic."""
import json
from contextlib import ExitStack, contextmanager
from unittest import mock

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from tests.lib.fake_module import Exited

# the connection options every vSphere module takes, as a play would give them
VSPHERE = dict(hostname="vcenter.example.com", username="administrator@vsphere.local", password="secret")
K8S = dict(kubeconfig="/nonexistent/kubeconfig")


def _exit_json(self, **result):
    result.setdefault("changed", False)
    raise Exited(result)


def _fail_json(self, msg, **result):
    result.update(failed=True, msg=msg)
    raise Exited(result)


@contextmanager
def module_args(args, check_mode=False, diff=False):
    """``args`` as the arguments AnsibleModule reads, with Ansible's internal flags for check and diff mode."""
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff, _ansible_verbosity=0,
                   _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False)
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(basic, "_ANSIBLE_ARGS",
                                              to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": payload}))))
        if hasattr(basic, "_ANSIBLE_PROFILE"):
            # ansible-core 2.19 and later read the serialization profile beside the arguments
            stack.enter_context(mock.patch.object(basic, "_ANSIBLE_PROFILE", "legacy"))
        stack.enter_context(mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json))
        stack.enter_context(mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json))
        yield


def run_main(module, args, check_mode=False, diff=False, sessions=True):
    """The result of ``module.main()`` with ``args``. ``sessions``: the vSphere module's SOAP and REST sessions
    are the placeholders (no connection is opened; a test that wants the real session code gives False)."""
    patches = []
    if sessions:
        from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _vsphere_module
        patches = [mock.patch.object(_vsphere_module.VsphereModule, "client", lambda self: "soap session"),
                   mock.patch.object(_vsphere_module.VsphereModule, "rest_client", lambda self: "rest session")]
    for p in patches:
        p.start()
    try:
        with module_args(args, check_mode=check_mode, diff=diff):
            with pytest.raises(Exited) as exc:
                module.main()
    finally:
        for p in reversed(patches):
            p.stop()
    return exc.value.result
