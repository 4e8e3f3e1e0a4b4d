#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_what_if
short_description: Replay a GPU workload record against the current and a proposed pool design
version_added: 0.2.0
description:
  - Takes a workload record (a versioned file of GPU workloads - tenant, pool, priority, GPUs, arrival and run
    time; docs/what-if.md), from O(record) or O(record_file), made by the seeded generator of O(generate), or read
    from the pool's own Prometheus (O(prometheus_url), kube-state-metrics' pod created, start and completion
    series over the last O(record_hours)).
  - With O(replay) (the default) it builds, on the replay cluster of O(kubeconfig) (a sandbox with kwok and Kueue,
    never the platform), the nodes, PriorityClasses, tenant namespaces, quotas and Kueue objects the design's
    derive gives (the same objects site.yml writes), submits the record's workloads as Jobs with time compressed
    O(compression) times, measures admission and scheduling waits and preemptions, removes what it created, and
    does the same for the proposed design.
  - The result sets the two designs side by side per pool and tenant, with each pool's SLO (the design's
    C(pools[].slo)). A proposal whose replay breaches a pool's SLO fails the module, naming the pool, unless
    O(fail_on_breach) is false; C(breaches) lists them either way.
  - It changes nothing on the platform; the replay cluster gets only objects labelled C(gpupool.vcf/what-if),
    and only those are deleted.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes.no_diff
  - gpupool.vcf.prometheus
  - gpupool.vcf.prometheus.bearer_token
options:
  design:
    description: The current pool design as a mapping.
    type: dict
  design_file:
    description: Path to the current design (YAML or JSON), instead of O(design).
    type: path
  proposed_design:
    description: The proposed pool design as a mapping.
    type: dict
  proposed_design_file:
    description: Path to the proposed design, instead of O(proposed_design). Without either only the current
      design is replayed.
    type: path
  record:
    description: The workload record as a mapping (schema C(gpupool.vcf/workload-record), version 1).
    type: dict
  record_file:
    description: Path to the workload record (YAML or JSON).
    type: path
  generate:
    description:
      - A synthetic record for designs with no history, C({seed, hours, pools}) where C(pools) maps a pool to
        C(arrivals_per_hour), C(mean_seconds), C(distribution) (C(exponential), C(lognormal) or C(fixed)), C(cv),
        C(gpus), C(pods), C(tenants) and C(priority).
    type: dict
  record_hours:
    description: With O(prometheus_url) and no other record, the hours of history read (ending now).
    type: float
    default: 168
  record_dest:
    description: Where to write the record used (YAML), to edit, share or replay it again.
    type: path
  anonymise:
    description: Rename tenants and workloads in the record (C(tenant-1), C(w-00001)) before it is written or replayed.
    type: bool
    default: false
  replay:
    description: Replay the record on O(kubeconfig); false only makes (and writes) the record.
    type: bool
    default: true
  compression:
    description: Simulated seconds per wall second of the replay (1 to 100000).
    type: float
    default: 600
  poll_interval:
    description: Wall seconds between two reads of the replay's Jobs; it bounds the resolution of each wait.
    type: float
    default: 0.25
  report_dest:
    description: Where to write the text report.
    type: path
  html_dest:
    description: Where to write the HTML report.
    type: path
  fail_on_breach:
    description: Fail when the proposed design (or, without one, the current design) breaches a pool's SLO.
    type: bool
    default: true
  request_timeout:
    description: Seconds to wait for one request to the replay cluster or to Prometheus.
    type: int
    default: 30
attributes:
  check_mode:
    description: Runs as usual (the replay cluster is a sandbox and the platform is not touched); no file is written.
"""

EXAMPLES = r"""
- name: Would cutting the training pool to one node breach its SLO?
  gpupool.vcf.gpu_what_if:
    design_file: design.yml
    proposed_design_file: design-proposed.yml
    record_file: week.workloads.yml
    kubeconfig: /etc/gpupool/replay.kubeconfig
    compression: 600
    html_dest: what-if.html
  register: what_if
"""

RETURN = r"""
record:
  description: The record replayed (C(workloads) count, C(source), C(span_seconds)).
  returned: always
  type: dict
current:
  description:
    - The current design's replay, C({pools, tenants, breaches}); per pool (and per C(pool/tenant)) C(workloads),
      C(admitted), C(waiting) (not running when the replay ended), C(preempted), and the p50, p95 and p99 of the
      admission, scheduling and total waits (simulated seconds), and C(slo) where the pool has one; and C(workloads),
      per workload its waits, when it ran (C(start), C(end), simulated seconds after the replay's start), whether
      it was admitted and running, and how often it was preempted.
    - C(usage), per pool the GPUs in use over the replay (C(series), a step series of C([simulated seconds, GPUs])),
      C(utilization) (their mean over the pool's GPUs), and where the design sits against the pool's knee
      (C(knee_utilization) from the queueing model for C(servers), C(service_s) and C(cv) of the recorded run times
      and the pool's SLO, C(model_wait_s), C(past_knee)).
  returned: with replay
  type: dict
proposed:
  description: The proposed design's replay, as C(current).
  returned: with replay and a proposed design
  type: dict
breaches:
  description: The pools whose SLO the proposed (or only) design breaches, C({pool, percentile, wait_seconds, value, message}).
  returned: always
  type: list
  elements: dict
report:
  description: The side-by-side text report.
  returned: with replay
  type: str
compression:
  description: The compression factor and what it distorts.
  returned: with replay
  type: dict
kept:
  description: Objects the replay found on the cluster, not its own, and used as they were (never deleted).
  returned: with replay
  type: list
  elements: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import auth_argument_spec, request_timeout_error
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._what_if_api import ReplayCluster
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import prom_client, prometheus_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _what_if as wi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _workload_record as wr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._what_if_inputs import gpu_what_if_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import given_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import read_text, write_report
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - ansible-core ships PyYAML
    HAS_YAML = False

PARSE_ERRORS = (ValueError, yaml.YAMLError) if HAS_YAML else (ValueError,)

ARGUMENT_SPEC = dict(
    design=dict(type="dict"),
    design_file=dict(type="path"),
    proposed_design=dict(type="dict"),
    proposed_design_file=dict(type="path"),
    record=dict(type="dict"),
    record_file=dict(type="path"),
    generate=dict(type="dict"),
    record_hours=dict(type="float", default=168),
    record_dest=dict(type="path"),
    anonymise=dict(type="bool", default=False),
    replay=dict(type="bool", default=True),
    compression=dict(type="float", default=600),
    poll_interval=dict(type="float", default=0.25),
    report_dest=dict(type="path"),
    html_dest=dict(type="path"),
    fail_on_breach=dict(type="bool", default=True),
    request_timeout=dict(type="int", default=30),
)
ARGUMENT_SPEC.update(prometheus_argument_spec(env_fallback=env_fallback))
ARGUMENT_SPEC.update(auth_argument_spec())


class WhatIf(Info):
    """Make the record, replay it per design, compare."""

    refusals = (wr.RecordError, wi.WhatIfError)

    def __init__(self, module, wall=time.time):
        Info.__init__(self, "the what-if replay")
        self.module = module
        self.p = module.params
        self.wall = wall
        self.cluster = None

    def _record(self):
        p = self.p
        if p["record"] is not None:
            return wr.check_record(p["record"])
        if p["record_file"]:
            text = read_text(p["record_file"])
            if text is None:
                raise Failure("Unable to read workload record %s: no such file" % p["record_file"])
            try:
                data = yaml.safe_load(text) if HAS_YAML else json.loads(text)
            except PARSE_ERRORS as exc:
                raise Failure("Unable to parse workload record %s: %s" % (p["record_file"], exc))
            return wr.check_record(data)
        if p["generate"] is not None:
            g = p["generate"]
            return wr.generate(g.get("pools"), g.get("hours", 24), g.get("seed", 0))
        end = self.wall()
        span = int(p["record_hours"] * 3600)
        prom = prom_client(p, p["request_timeout"])
        results = {}
        with self.doing("read", "the workload record from Prometheus"):
            for name, expr in wr.prometheus_queries(span).items():
                results[name] = prom.query(expr, at=end)
        return wr.record_from_prometheus(results, end - span, end)

    def _design(self, which):
        """The design as given (derive() checks it and refuses one with errors)."""
        if which == "current":
            return given_design(self.p)
        return given_design({"design": self.p["proposed_design"], "design_file": self.p["proposed_design_file"]})

    def _replay(self, design, record, label, factor):
        try:
            derived = derive(design)
        except DesignError as exc:
            raise Failure("Unable to replay the %s design: %s" % (label, exc))
        pools = wi.design_pools(design, derived)
        problems = wi.fit_problems(record, pools)
        if problems:
            raise wi.WhatIfError("the %s design cannot take the record: %s" % (label, "; ".join(problems[:10])))
        cluster, run = self.cluster, self.cluster.run
        if any(pool["local_queue"] for pool in pools.values()):
            with self.doing("read", "the replay cluster's Kueue API"):
                if not cluster.kueue_served():
                    raise Failure("Unable to replay the %s design: its pools use Kueue and the replay cluster does "
                                  "not serve %s" % (label, "kueue.x-k8s.io"))
        jobs = dict((w["name"], wi.workload_job(w, pools[w["pool"]], run, factor, i))
                    for i, w in enumerate(record["workloads"], 1))
        try:
            with self.doing("build", "the %s design on the replay cluster" % label):
                cluster.build(wi.replay_nodes(pools, run), wi.policy_objects(derived, run))
            with self.doing("replay", "the record against the %s design" % label):
                seen, end = cluster.replay(record, jobs, factor, poll=self.p["poll_interval"])
        finally:
            with self.doing("clean up", "the %s design's replay objects" % label):
                cluster.reset()
        rows = wi.outcomes(record, seen, factor, end)
        out = wi.summary(rows, pools, end * factor)
        out["workloads"] = rows
        return out, end, cluster.kept

    def read(self):
        p = self.p
        record = self._record()
        if p["anonymise"]:
            record = wr.anonymise(record)
        if p["record_dest"] and HAS_YAML:
            write_report(self.module, p["record_dest"], yaml.safe_dump(json.loads(json.dumps(record)), sort_keys=False))
        out = dict(record=dict(source=record["source"], workloads=len(record["workloads"]),
                               span_seconds=record["span_seconds"]), breaches=[])
        if not p["replay"]:
            return out
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        factor = wi.check_factor(p["compression"])
        current_design = self._design("current")
        if current_design is None:
            raise Failure("Unable to replay: give design or design_file (the current design)")
        proposed_design = self._design("proposed")
        self.cluster = ReplayCluster(p, run="what-if-%d" % int(self.wall()))
        try:
            current, wall, kept = self._replay(current_design, record, "current", factor)
            proposed = None
            if proposed_design is not None:
                proposed, wall2, kept = self._replay(proposed_design, record, "proposed", factor)
                wall += wall2
        finally:
            with self.doing("clean up", "the replay's tenant namespaces"):
                self.cluster.finish()
        note = wi.compression_note(factor, p["poll_interval"])
        gate = proposed if proposed is not None else current
        out.update(current=current, proposed=proposed, breaches=gate["breaches"], kept=kept,
                   compression=dict(factor=factor, note=note, wall_seconds=round(wall, 1)))
        empty = {"pools": {}, "tenants": {}, "breaches": []}
        out["report"] = wi.text_report(current, proposed or empty, note)
        if p["report_dest"]:
            write_report(self.module, p["report_dest"], out["report"])
        if p["html_dest"]:
            write_report(self.module, p["html_dest"], wi.html_report(current, proposed or empty, note))
        if gate["breaches"] and p["fail_on_breach"]:
            raise Failure("The %s design breaches the SLO of pool(s) %s: %s" % (
                "proposed" if proposed is not None else "current", ", ".join(b["pool"] for b in gate["breaches"]),
                "; ".join(b["message"] for b in gate["breaches"])), **out)
        return out

    def result(self, live, plan):
        return live


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("design", "design_file"), ("proposed_design", "proposed_design_file"),
                                               ("record", "record_file", "generate")])
    enforce(module, "gpu_what_if", gpu_what_if_errors)
    Runner(module, WhatIf(module)).run()


if __name__ == "__main__":
    main()
