# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DirectPath devices of ESXi hosts in the vSphere 9.1 Automation API (client layer: knows nothing of
Ansible).

``GET /api/vcenter/host/{host}/hardware/direct-path-devices`` lists a host's devices
(``ListResult{items[{device, info}]}``, at most ``page_size`` of them, 256 unless asked);
``POST .../direct-path-devices?action=configure&vmw-task=true`` with ``ConfigureSpec{device, new_mode}``
starts the only form of the configure call (a task, ``configure$task`` in VMware's bindings), whose result
is ``ConfigureResult{configure_impacts}``. Modes are mapped to the collection's words in
:mod:`.._direct_path` (pure). Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _direct_path

PATH = "/api/vcenter/host/%s/hardware/direct-path-devices"
# IterationSpec.page_size: "If None, then defaults to 256"
DEFAULT_PAGE = 256


class DirectPathApi:
    """The direct-path-devices of the hosts of one run, through one REST session."""

    def __init__(self, rest, task_timeout=600):
        self.rest = rest
        self.task_timeout = task_timeout

    def devices(self, host_moid):
        """{device id: Info} of the host: one GET (the API's default page holds 256 devices); only a full
        page asks for the next one, ``marker`` set to the last device of the page."""
        out = {}
        params = None
        while True:
            answer = self.rest.get(PATH % host_moid, params=params) or {}
            items = answer.get("items") or []
            for item in items:
                out[item["device"]] = item.get("info") or {}
            if len(items) < DEFAULT_PAGE:
                return out
            params = {"marker": items[-1]["device"]}

    def configure(self, host_moid, device, word, what=None):
        """The device set to the vGPU mode ``word`` (same_size, mixed_size); the impacts the server
        answered (:func:`_direct_path.impact_list` of ``configure_impacts``)."""
        mode = _direct_path.rest_mode(word)
        if mode is None:
            raise _direct_path.DirectPathError("vGPU mode %r has no direct-path-devices mode" % (word,))
        task = self.rest.post(PATH % host_moid, body={"device": device, "new_mode": mode},
                              params={"action": "configure", "vmw-task": "true"})
        result = self.rest.wait_for_task(task, timeout=self.task_timeout,
                                         what=what or "configure device %s of host %s to %s" % (device, host_moid, mode))
        return _direct_path.impact_list((result or {}).get("configure_impacts"))


__all__ = ["DEFAULT_PAGE", "DirectPathApi", "PATH"]
