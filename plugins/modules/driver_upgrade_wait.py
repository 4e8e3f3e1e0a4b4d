#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: driver_upgrade_wait
short_description: Wait for the GPU Operator to upgrade the guest driver node by node, timing each step
version_added: 0.2.0
description:
  - After a change of the ClusterPolicy's C(driver.version), NVIDIA's GPU Operator upgrade controller moves each GPU
    node through the label C(nvidia.com/gpu-driver-upgrade-state) (C(upgrade-required), C(cordon-required),
    C(wait-for-jobs-required), C(pod-deletion-required), C(drain-required), C(pod-restart-required),
    C(validation-required), C(uncordon-required), C(upgrade-done) or C(upgrade-failed)) as its
    C(driver.upgradePolicy) allows. This module reads the nodes' labels every O(poll_interval) seconds and
    returns the seconds each node spent in each state.
  - It succeeds when every node of O(node_selector) is C(upgrade-done). It fails, naming the node and its state,
    when a node is C(upgrade-failed) or stays in one state longer than O(step_timeout), or when the whole upgrade
    takes longer than O(timeout).
  - Reading only; in check mode it reads the nodes once and waits for nothing.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes.no_diff
options:
  node_selector:
    description: Labels of the nodes the upgrade controller upgrades (the nodes that run the GPU driver).
    type: dict
    default: {nvidia.com/gpu.present: "true"}
  version:
    description: The driver version upgraded to, for the messages.
    type: str
    default: ""
  step_timeout:
    description: Seconds a node may stay in one upgrade state.
    type: int
    default: 900
  timeout:
    description: Seconds the whole upgrade may take.
    type: int
    default: 7200
  settle:
    description:
      - Seconds to wait for the controller to take up the change (a node past C(upgrade-done)); nodes still
        C(upgrade-done) then are reported as not upgraded, with a warning.
      - The controller labels every node it manages; when no node of O(node_selector) carries the label at the
        first read, no controller manages them and the module returns at once, with a warning.
    type: int
    default: 120
  poll_interval:
    description: Seconds between two reads of the nodes.
    type: float
    default: 2.0
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
attributes:
  check_mode:
    description: Reads the nodes' states once and waits for nothing.
"""
EXAMPLES = r"""
- name: Wait for the guest driver upgrade, one node at a time, each state at most 15 minutes
  gpupool.vcf.driver_upgrade_wait:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    version: "550.127.05"
    step_timeout: 900
  register: upgrade
"""
RETURN = r"""
states:
  description: Each node's upgrade state at the last read.
  returned: always
  type: dict
  sample: {gpu-inference-0: upgrade-done}
order:
  description: The nodes in the order the controller started them.
  returned: always
  type: list
  elements: str
steps:
  description: Per node, C(state) and C(seconds) of each state it went through (upgrade-done left out).
  returned: always
  type: dict
node_seconds:
  description: Per upgraded node, seconds from its first step to upgrade-done.
  returned: always
  type: dict
total_seconds:
  description: Seconds the wait took.
  returned: always
  type: float
markdown:
  description: The step times as a Markdown table.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    K8sClient, auth_argument_spec, request_argument_spec, request_timeout_error,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import list_nodes
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _driver_upgrade as du
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_inputs import driver_upgrade_wait_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    node_selector=dict(type="dict", default={"nvidia.com/gpu.present": "true"}),
    version=dict(type="str", default=""),
    step_timeout=dict(type="int", default=900),
    timeout=dict(type="int", default=7200),
    settle=dict(type="int", default=120),
    poll_interval=dict(type="float", default=2.0),
)
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


class DriverUpgradeWait(Info):
    """The nodes' upgrade states, read until every node is upgrade-done."""

    def __init__(self, module, clock=time.monotonic, sleep=time.sleep):
        Info.__init__(self, "the guest driver upgrade%s" % (
            " to %s" % module.params["version"] if module.params["version"] else ""))
        self.module = module
        self.p = module.params
        self.clock, self.sleep = clock, sleep
        self.progress = None

    def _look(self, k8s):
        selector = ",".join("%s=%s" % kv for kv in sorted((self.p["node_selector"] or {}).items()))
        with self.doing("list", "the GPU nodes (%s)" % (selector or "every node")):
            nodes = list_nodes(k8s, selector)
        states = du.node_states(nodes)
        self.progress.observe(self.clock(), states)
        return states

    def _out(self):
        pr = self.progress
        return dict(states=dict(pr.current()), order=pr.order(), steps=dict(
            (n, [dict(state=s, seconds=sec) for s, sec in rows]) for n, rows in pr.step_seconds().items()),
            node_seconds=dict(pr.node_seconds()), total_seconds=round((pr.last or pr.start) - pr.start, 3),
            markdown=pr.markdown())

    def read(self):
        p = self.p
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        with self.doing("reach the guest cluster for"):
            k8s = K8sClient(p)
        self.progress = du.Progress(self.clock(), p["step_timeout"])
        states = self._look(k8s)
        if self.module.check_mode:
            return self._out()
        if not any(states.values()):
            # the controller labels every node it manages (upgrade-done at rest): none labelled, none managed
            self.warnings.append("no node of %s carries %s: no GPU Operator upgrade controller manages them, "
                                 "nothing was waited for" % (p["node_selector"], du.STATE_LABEL))
            return self._out()
        deadline = self.progress.start + p["timeout"]
        while True:
            if self.progress.failed():
                raise Failure(self.progress.failure(p["version"] or "the new version"), **self._out())
            begun = any(s not in ("", du.DONE) for s in states.values()) or any(
                len(steps) > 1 for steps in self.progress.history.values())
            if self.progress.done() and begun:
                return self._out()
            if not begun and self.clock() - self.progress.start >= p["settle"]:
                # the controller labelled nothing: nothing to upgrade (or no controller); say so, do not wait
                self.warnings.append("no node of %s left upgrade-done within %s s: %s" % (
                    p["node_selector"], p["settle"], dict(states) or "no such node"))
                return self._out()
            if self.clock() >= deadline:
                raise Failure("The guest driver upgrade did not finish within %s s: %s" % (
                    p["timeout"], ", ".join("%s %s" % (n, s or "(no label)") for n, s in states.items())),
                    **self._out())
            self.sleep(max(0.0, min(p["poll_interval"], deadline - self.clock())))
            states = self._look(k8s)

    def result(self, live, plan):
        return live


def _clock():
    return time.monotonic()


def _sleep(seconds):
    time.sleep(seconds)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "driver_upgrade_wait", driver_upgrade_wait_errors)
    Runner(module, DriverUpgradeWait(module, clock=_clock, sleep=_sleep)).run()


if __name__ == "__main__":
    main()
