# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a DLS appliance as a whole (client layer over ``_nls.DlsClient``; knows nothing of Ansible).

:func:`wait_answering` logs in until the appliance answers or a deadline passes (a new appliance
boots for minutes); :func:`read_appliance` reads it step by step - login, current user, service
instance, license server, leases - and names the first step that failed. Its result has the keys
the audit's licensing link judges (``where``, ``error``, ``stage``, ``license_server``, ``leases``)
plus the service instance itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import backoff_delays

SERVICE_INSTANCE = "/service_instance_manager/v1/service-instance"


def wait_answering(client, timeout, sleep=time.sleep, clock=time.monotonic):
    """Log in until the appliance answers; return the seconds waited. A refused login (401/403) or a TLS
    failure ends the wait at once; a refused connection, a timeout or a 5xx is waited out up to
    ``timeout`` seconds, then the last error is raised."""
    start = clock()
    deadline = start + max(0, timeout)
    delays = backoff_delays(1.0, 10.0)
    while True:
        try:
            client.login()
            return clock() - start
        except DlsError as err:
            if not err.transient or clock() >= deadline:
                if err.transient and timeout:
                    raise DlsError("%s; still not answering after %d s" % (err, int(clock() - start)),
                                   status=err.status, kind=err.kind, attempts=err.attempts)
                raise
        sleep(min(next(delays), max(0.0, deadline - clock())))


def lease_list(answer):
    """The leases of a leases/all answer: a list, or the list under its ``leases`` key."""
    if isinstance(answer, list):
        return answer
    leases = (answer or {}).get("leases") if isinstance(answer, dict) else None
    if not isinstance(leases, list):
        raise DlsError("leases/all answered without a list of leases", kind="other")
    return leases


def read_appliance(client, where, logged_in=False):
    """{where, error, stage, transient, user, service_instance, license_server, leases}: what the appliance answers,
    the first failing step as ``stage`` (login, user, service_instance, license_server, leases)."""
    out = dict(where=where, error=None, stage=None, transient=False, user=None, service_instance=None,
               license_server=None, leases=None)
    stage = "login"
    try:
        if not logged_in:
            client.login()
        stage = "user"
        me = client.call("GET", "/auth/v1/user/me")
        out["user"] = me.get("name")
        stage = "service_instance"
        out["service_instance"] = client.call("GET", SERVICE_INSTANCE)
        stage = "license_server"
        scope = me.get("userScope") or {}
        org, vg, ls = me.get("orgName"), scope.get("virtualGroupId"), scope.get("licenseServerId")
        if not (org and vg is not None and ls):
            raise DlsError("the user has no license server in its scope (orgName, virtualGroupId, licenseServerId)",
                           kind="other")
        server = client.call("GET", "/admin/v1/org/%s/virtual-groups/%s/license-servers/%s" % (org, vg, ls))
        if not (server.get("licenseServer") or {}).get("scopeReference"):
            raise DlsError("license server %s has no scope reference (is it installed on the service instance?)" % ls,
                           kind="other")
        out["license_server"] = ls
        stage = "leases"
        out["leases"] = lease_list(client.call(
            "GET", "/admin/v1/org/%s/virtual-groups/%s/leases/all?license_server_ids=%s" % (org, vg, ls)))
    except DlsError as exc:
        out.update(error=str(exc), stage=stage, transient=exc.transient)
    return out


__all__ = ["SERVICE_INSTANCE", "lease_list", "read_appliance", "wait_answering"]
