#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_lease
short_description: One run per GPU pool at a time - the run lease on the pool's GPU clusters
version_added: 0.1.0
description:
  - Takes, renews or releases the lease a changing run holds on GPU clusters, so that two runs
    (an AWX schedule beside a manual run, a rerun beside the orphaned module of a killed run)
    never change one pool at the same time.
  - The lease is a record in the custom attribute C(gpupool.vcf.run-lease) of each cluster (defined
    for clusters on first use) - compact JSON with the C(holder) (the run id), its C(start) and its
    C(expiry) (UTC, C(YYYY-MM-DDTHH:MM:SSZ)).
  - O(state=acquired) takes a free lease, renews the run's own (a new expiry O(ttl) seconds from
    now) and takes over the lease of another run that has expired.
  - The run's own lease is renewed only when less than 90% of O(ttl) is left (or more than O(ttl), when a
    shorter one is asked); otherwise it is left as it is (action V(none), C(changed=false)), so a rerun by the
    same holder within the first tenth of the ttl writes nothing. After every call the lease has at least 90% of
    O(ttl) left. Check mode predicts the same. The lease of another run that
    has not expired is refused before any change, naming the holder, its start and its expiry;
    with O(wait) the module first waits up to that many seconds for it to be released or to expire.
    One refused cluster refuses them all.
  - O(state=released) clears the run's own lease; a cluster without a lease is left alone; the lease
    of another run is refused.
  - Reads every cluster's record in one PropertyCollector retrieval, writes each record that
    changes with one C(SetField) and, after taking a lease, reads the records once more to see that
    no parallel run wrote over them (the last writer holds the lease; the other run is refused).
  - In check mode nothing is written and nothing is refused - the result says what a run would do
    and who holds each lease (RV(leases)).
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  clusters:
    description: The GPU clusters of the pool (names as vCenter knows them).
    type: list
    elements: str
    required: true
  state:
    description: Take (or renew) the lease, or release it.
    type: str
    choices: [acquired, released]
    default: acquired
  holder:
    description:
      - The run id written as holder. Every call of one run passes the same one.
      - Default - C(awx-job-<id>) when the environment has C(JOB_ID) (AWX, Automation Controller), else
        C(<user>@<controller host>:<pid>-<random>), where pid is the process that runs the task on the
        controller; the id made is returned in RV(holder) for the later calls.
    type: str
  ttl:
    description:
      - Seconds from now until the lease expires (at least 60).
      - Another run takes the lease over only after that, so the default (three hours) outlasts the
        longest single module call of a run (a vLCM remediation waits up to 7200 seconds); a run
        killed during such a call leaves a module that goes on working until it ends, and a rerun
        waits or is refused until then instead of racing it.
    type: int
    default: 10800
  wait:
    description:
      - Seconds to wait for the lease of another run to be released or to expire before refusing;
        C(0) refuses at once. The records are read again every 30 seconds at most.
    type: int
    default: 0
attributes:
  check_mode:
    description: Reads the leases and says what a run would do and who holds each, without writing or refusing.
  diff_mode:
    description: Returns each cluster's lease before and after.
notes:
  - Writing the record needs the privileges C(Global.SetCustomField) and, once, C(Global.ManageCustomFields).
  - The lease is bookkeeping of the run, not a change of the pool - the playbooks register it with
    C(changed_when) false, so a run that changes nothing reports nothing changed.
"""

EXAMPLES = r"""
- name: Take the lease of the pool's clusters, waiting up to ten minutes for another run
  gpupool.vcf.gpu_pool_lease:
    clusters: [gpu-h100, gpu-l40s]
    wait: 600
  register: lease
  changed_when: false

- name: Release it at the end of the run
  gpupool.vcf.gpu_pool_lease:
    clusters: [gpu-h100, gpu-l40s]
    holder: "{{ lease.holder }}"
    state: released
  changed_when: false
"""

RETURN = r"""
holder:
  description: The run id the lease is taken, renewed or released for.
  returned: always
  type: str
  sample: awx-job-4711
leases:
  description:
    - Per cluster - the C(action) (V(take), V(renew), V(take_over), V(release), V(none) - nothing to release, or
      the run's own lease with at least 90% of O(ttl) left - or, in check mode, V(refuse) for another run's lease),
      the lease C(before) and C(after) (holder, start and expiry, or null for none) and the C(reason) in words.
  returned: always
  type: list
  elements: dict
  sample: [{cluster: gpu-h100, action: take, before: null, after: {holder: awx-job-4711, start: "2026-01-05T10:00:00Z",
            expiry: "2026-01-05T13:00:00Z"}, reason: takes the free lease until 2026-01-05T13:00:00Z}]
held_by_others:
  description: The clusters whose lease another run holds, unexpired, with its holder, start and expiry (check mode, or after the wait).
  returned: always
  type: dict
  sample: {gpu-h100: {holder: "ops@ctl:412-9f3c", start: "2026-01-05T09:00:00Z", expiry: "2026-01-05T12:00:00Z"}}
requests:
  description: The retrievals and C(SetField) calls the module made (C(reads), C(writes)) and the seconds it waited for another run.
  returned: always
  type: dict
  sample: {reads: 2, writes: 2, waited: 0}
"""

import getpass
import os
import socket
import time
import uuid

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _lease
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._lease_inputs import gpu_pool_lease_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._lease_api import ClusterLeases

ARGUMENT_SPEC = dict(
    clusters=dict(type="list", elements="str", required=True),
    state=dict(type="str", choices=[_lease.ACQUIRED, _lease.RELEASED], default=_lease.ACQUIRED),
    holder=dict(type="str"),
    ttl=dict(type="int", default=_lease.DEFAULT_TTL),
    wait=dict(type="int", default=0),
)


def default_holder():
    """The run id of this controller process (pure._lease.run_id)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    return _lease.run_id(os.environ, user, socket.gethostname(), os.getppid(), uuid.uuid4().hex[:8])


class PoolLease(Resource):
    """The run lease of the clusters of one vCenter."""

    refusals = (_lease.LeaseError,)

    def __init__(self, module, sleep=time.sleep, clock=time.time):
        p = module.params
        Resource.__init__(self, "the run lease of GPU cluster%s %s" % ("" if len(p["clusters"]) == 1 else "s",
                                                                       ", ".join(p["clusters"])))
        self.verb = "take" if p["state"] == _lease.ACQUIRED else "release"
        self.module = module
        self.p = p
        self.holder = None
        self.api = None
        self.sleep = sleep
        self.clock = clock
        self.waited = 0.0

    def read(self):
        """Every record in one retrieval; with ``wait``, again until another run's lease is gone or expired."""
        p = self.p
        with self.doing("check the options of", "gpu_pool_lease"):
            self.holder = _lease.validate_holder(p["holder"]) if p["holder"] is not None else default_holder()
            if not p["clusters"] or any(not c for c in p["clusters"]):
                raise _lease.LeaseError("clusters must name at least one cluster, without empty names")
            if p["wait"] < 0:
                raise _lease.LeaseError("wait must be 0 or more seconds, not %s" % p["wait"])
        self.api = ClusterLeases(self.module.client(), sorted(set(p["clusters"])))
        start = self.clock()
        deadline = start + (p["wait"] if p["state"] == _lease.ACQUIRED and not self.module.check_mode else 0)
        while True:
            leases = dict((c, _lease.parse_lease(v)) for c, v in self.api.read().items())
            pause = _lease.wait_left(leases, self.holder, self.clock(), deadline)
            if pause is None:
                self.waited = round(self.clock() - start, 1)
                return leases
            self.sleep(pause)

    def plan(self, live):
        decisions = _lease.decide_all(live, self.holder, int(self.clock()), self.p["state"], self.p["ttl"],
                                      self.module.check_mode)
        writing = (_lease.TAKE, _lease.RENEW, _lease.TAKE_OVER, _lease.RELEASE)
        changes = [Change("GPU cluster %s" % d["cluster"], "run_lease", _lease.view(d["before"]), _lease.view(d["after"]),
                          d["action"]) for d in decisions if d["action"] in writing]
        return Plan(changes, before=dict((d["cluster"], _lease.view(d["before"])) for d in decisions),
                    after=dict((d["cluster"], _lease.view(d["after"])) for d in decisions), decisions=decisions)

    def result(self, live, plan):
        decisions = plan.facts["decisions"]
        held = dict((d["cluster"], _lease.view(d["before"])) for d in decisions if d["action"] == _lease.REFUSE)
        return dict(holder=self.holder, held_by_others=held,
                    leases=[dict(cluster=d["cluster"], action=d["action"], before=_lease.view(d["before"]),
                                 after=_lease.view(d["after"]), reason=d["reason"]) for d in decisions],
                    requests=self.requests())

    def requests(self):
        return dict(reads=self.api.reads, writes=self.api.writes, waited=self.waited)

    def apply(self, plan):
        """One SetField per cluster whose record changes; after taking, a read-back (the last writer holds the lease)."""
        written = []
        for d in plan.facts["decisions"]:
            if d["write"]:
                with self.doing("write", "the run lease of GPU cluster %s" % d["cluster"]):
                    self.api.write(d["cluster"], _lease.format_lease(d["after"]))
                written.append(d["cluster"])
                self.partial.update(changed=True, written=list(written))
        if self.p["state"] == _lease.ACQUIRED and written:
            with self.doing("read back"):
                back = dict((c, _lease.parse_lease(v)) for c, v in self.api.read().items())
            lost = sorted(c for c in written if not back[c] or back[c].get("holder") != self.holder)
            if lost:
                raise Failure("Unable to take the run lease of GPU cluster %s: a parallel run wrote its own lease over "
                              "this run's (%s); that run holds the pool now. Nothing else was changed; the leases this "
                              "run wrote elsewhere (%s) expire at their time or are released by its failure path"
                              % (", ".join(lost), "; ".join("%s: %s" % (c, (_lease.view(back[c]) or {}).get("holder")) for c in lost),
                                 ", ".join(c for c in written if c not in lost) or "none"),
                              holder=self.holder, requests=self.requests())
        return dict(requests=self.requests())


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "gpu_pool_lease", gpu_pool_lease_errors)
    Runner(module, PoolLease(module)).run()


if __name__ == "__main__":
    main()
