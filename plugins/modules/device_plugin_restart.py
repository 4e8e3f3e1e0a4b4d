#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: device_plugin_restart
short_description: Restart the GPU Operator's device plugin node by node until every GPU node advertises its design count
version_added: 0.3.0
description:
  - NVIDIA's device plugin reads its sharing configuration (time-slicing replicas, MIG strategy) when it starts, so a
    changed device plugin ConfigMap takes effect on a node only when the plugin's pod there restarts. This module finds
    the GPU nodes whose C(status.allocatable) count differs from GPUs (label C(nvidia.com/gpu.count)) x replicas of
    their configuration (label C(nvidia.com/device-plugin.config)), and takes them one at a time, in name order.
  - Per node, where running pods request C(nvidia.com/gpu) (or C(nvidia.com/gpu.shared)) the node is drained first as
    M(gpupool.vcf.guest_node_drain) drains (cordoned with the annotation C(gpupool.vcf/cordoned-by) set to O(owner),
    pods evicted through the Eviction API so PodDisruptionBudgets hold it, DaemonSet pods left); then its device plugin
    pod (label C(app=nvidia-device-plugin-daemonset) in O(namespace)) is deleted so the DaemonSet starts a new one that
    reads the configuration again; the node is waited for until it advertises the design's count, and uncordoned when
    this module cordoned it. The next node starts only then.
  - Whether a node is drained is judged again just before its turn (a pod evicted from an earlier node may have moved
    there). A node that does not advertise the design's count within O(wait_timeout) stops the run with its name,
    what it advertises and what it should; a plain rerun resumes at the first node still stale (a node this module
    left cordoned is uncordoned).
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes
options:
  namespace:
    description: The GPU Operator's namespace, where its device plugin pods run.
    type: str
    default: gpu-operator
  time_slicing:
    description:
      - The design's time-slicing configurations, as the gpu_operator role takes them (C(gpu_operator_time_slicing)),
        by name, each with C(replicas) and C(rename_by_default). A node whose C(nvidia.com/device-plugin.config) label names none of
        them advertises its GPUs.
    type: dict
    default: {}
  node_labels:
    description: Only the GPU nodes that carry all these labels (for example one pool's C(gpupool.vcf/pool)); default every GPU node.
    type: dict
    default: {}
  owner:
    description: The value of the C(gpupool.vcf/cordoned-by) annotation on the nodes this run cordons.
    type: str
    default: gpupool.vcf/device-plugin
  protected_priority_classes:
    description: PriorityClasses whose pods must have another node to go to before a node is drained (else the run stops).
    type: list
    elements: str
    default: []
  drain_timeout:
    description: Seconds the drain of one node may take (evictions and the evicted pods gone).
    type: int
    default: 600
  wait_timeout:
    description: Seconds one node may take, after its device plugin pod was deleted, to advertise the design's count.
    type: int
    default: 300
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
attributes:
  check_mode:
    description: Returns the order (RV(order)) - each stale node, whether it is drained and its steps - and changes nothing.
  diff_mode:
    description: Per stale node, the count it advertises before and the design's count after.
"""

EXAMPLES = r"""
- name: After a time-slicing change, restart the device plugin node by node
  gpupool.vcf.device_plugin_restart:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    namespace: gpu-operator
    time_slicing:
      notebooks: {replicas: 2, rename_by_default: false}
    protected_priority_classes: [gpu-inference]
    wait_timeout: 300
  register: restart

- name: The per-node step times
  ansible.builtin.debug:
    msg: "{{ restart.steps | map(attribute='seconds') | list }}"
"""

RETURN = r"""
order:
  description:
    - The stale nodes in the order they are taken (C(node), C(resource), C(advertised), C(expected), C(drain), the
      C(gpu_pods) on it when read, C(steps)), and the nodes a failed run left cordoned (steps C(uncordon) only).
      Empty when every GPU node advertises its design count.
  returned: always
  type: list
  elements: dict
  sample: [{node: notebooks-0, resource: nvidia.com/gpu, advertised: 4, expected: 2, drain: true,
            gpu_pods: [research/notebook-1], steps: [drain, restart, wait, uncordon]}]
steps:
  description:
    - Per node, what was done (C(node), C(drained), C(evicted), C(restarted) - the plugin pods deleted - and
      C(seconds) of each step and C(total)).
  returned: when changed and not in check mode
  type: list
  elements: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._device_plugin_api import DevicePluginApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    auth_argument_spec, request_argument_spec, request_timeout_error,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _device_plugin_restart as _restart
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _drain
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_inputs import device_plugin_restart_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    namespace=dict(type="str", default="gpu-operator"),
    time_slicing=dict(type="dict", default={}),
    node_labels=dict(type="dict", default={}),
    owner=dict(type="str", default="gpupool.vcf/device-plugin"),
    protected_priority_classes=dict(type="list", elements="str", default=[]),
    drain_timeout=dict(type="int", default=600),
    wait_timeout=dict(type="int", default=300),
)
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


def _name(obj):
    return (obj.get("metadata") or {}).get("name")


def _ours(node, owner):
    """The node is cordoned, by this module's owner (an earlier run that failed before its uncordon)."""
    return bool((node.get("spec") or {}).get("unschedulable")) and (
        ((node.get("metadata") or {}).get("annotations") or {}).get(CORDONED_BY) == owner)


class DevicePlugins(Resource):
    """The device plugin of every stale GPU node, restarted one node at a time."""

    verb = "restart the device plugin of"

    def __init__(self, module):
        Resource.__init__(self, "the stale GPU nodes")
        self.p = module.params
        self.module = module
        self.drain = None
        self.plugins = None
        self.clock = time.monotonic

    def read(self):
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(self.p["request_timeout"]):
            raise Failure(request_timeout_error(self.p["request_timeout"]))
        with self.doing("reach the guest cluster for"):
            self.drain = DrainApi(self.p, owner=self.p["owner"])
            self.plugins = DevicePluginApi(self.p["namespace"], k8s=self.drain.k8s)
        want = dict((str(k), str(v)) for k, v in (self.p["node_labels"] or {}).items())
        nodes = [n for n in self.drain.list_nodes()
                 if all(((n.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in want.items())]
        return dict(nodes=nodes, pods=self.drain.list_pods())

    def plan(self, live):
        order = _restart.restart_plan(live["nodes"], live["pods"], self.p["time_slicing"])
        for row in order:
            node = [n for n in live["nodes"] if _name(n) == row["node"]][0]
            if _ours(node, self.p["owner"]) and "uncordon" not in row["steps"]:
                row["steps"] = row["steps"] + ["uncordon"]
        stale = set(row["node"] for row in order)
        left = sorted(_name(n) for n in live["nodes"] if _ours(n, self.p["owner"]) and _name(n) not in stale)
        order += [dict(node=name, resource=None, advertised=None, expected=None, drain=False, gpu_pods=[],
                       steps=["uncordon"]) for name in left]
        plan = Plan(order=order)
        for row in order:
            if row["resource"] is None:
                plan.add("node %s" % row["node"], "spec.unschedulable", True, False, action="uncordon")
            else:
                plan.add("node %s" % row["node"], "status.allocatable.%s" % row["resource"], row["advertised"],
                         row["expected"], action="restart")
        plan.before = dict((r["node"], r["advertised"]) for r in order if r["resource"])
        plan.after = dict((r["node"], r["expected"]) for r in order if r["resource"])
        return plan

    def result(self, live, plan):
        return dict(order=plan.facts["order"])

    def _drain_node(self, name):
        """Cordon `name` and evict its pods as guest_node_drain does; the pods evicted."""
        pods, pdbs = self.drain.list_pods(), self.drain.list_pdbs()
        protected = self.p["protected_priority_classes"]
        dplan = _drain.drain_plan([name], pods, pdbs, protected)
        never = set(_drain.budgets_that_never_allow(pdbs))
        refused = ["%s/%s (PodDisruptionBudget %s)" % (ref["namespace"], ref["name"], ", ".join(ref["pdb"]))
                   for _node, ref in _drain.blocked_pods(dplan)
                   if len(ref["pdb"]) > 1 or any("%s/%s" % (ref["namespace"], b) in never for b in ref["pdb"])]
        if refused:
            raise Failure("Unable to drain node %s before its device plugin restart: the Eviction API would refuse %s; "
                          "nodes done so far are done, a rerun resumes at this node" % (name, "; ".join(refused)))
        nowhere = _drain.unplaceable(dplan, pods, self.drain.list_nodes(), protected)
        if nowhere:
            raise Failure("Unable to drain node %s before its device plugin restart: %d protected pods would have "
                          "nowhere to go (%s); a rerun resumes at this node" % (
                              name, len(nowhere), "; ".join("%s/%s" % (u["namespace"], u["name"]) for u in nowhere)))
        deadline = self.drain.deadline(self.p["drain_timeout"])
        with self.doing("cordon", "node %s" % name):
            self.drain.cordon(name)
        evict = _drain.drain_refs(dplan)
        with self.doing("evict the pods of", "node %s" % name):
            self.drain.evict_all(evict, deadline, self.p["drain_timeout"])
        with self.doing("wait for the evicted pods of", "node %s" % name):
            self.drain.wait_gone(evict + _drain.drain_refs(dplan, ("terminating",)), self.p["drain_timeout"],
                                 deadline=deadline)
        return ["%s/%s" % (r["namespace"], r["name"]) for r in evict]

    def apply(self, plan):
        done = []
        self.partial["steps"] = done
        for row in plan.facts["order"]:
            name, seconds = row["node"], {}
            start = mark = self.clock()
            step = dict(node=name, drained=False, evicted=[], restarted=[], seconds=seconds)
            if row["resource"] is not None:
                # judged again now: a pod evicted from an earlier node may have moved here
                holding = _restart.gpu_pods_by_node(self.drain.list_pods()).get(name) or []
                if holding:
                    step["evicted"] = self._drain_node(name)
                    step["drained"] = True
                    seconds["drain"], mark = round(self.clock() - mark, 1), self.clock()
                with self.doing("delete the device plugin pod of", "node %s" % name):
                    step["restarted"] = self.plugins.restart(name)
                seconds["restart"], mark = round(self.clock() - mark, 1), self.clock()
                with self.doing("wait until it advertises %s=%d:" % (row["resource"], row["expected"]), "node %s" % name):
                    self.plugins.wait_advertised(name, row["expected"], row["resource"], timeout=self.p["wait_timeout"])
                seconds["wait"], mark = round(self.clock() - mark, 1), self.clock()
            if step["drained"] or "uncordon" in row["steps"]:
                with self.doing("uncordon", "node %s" % name):
                    self.drain.uncordon(name, [self.p["owner"]])
                seconds["uncordon"] = round(self.clock() - mark, 1)
            seconds["total"] = round(self.clock() - start, 1)
            done.append(step)
        return dict(steps=done)

    def next_step(self, exc):
        if self.drain is None:
            return "nothing was changed"
        done = [s["node"] for s in self.partial.get("steps") or []]
        return "nodes done: %s; nodes left cordoned: %s; a plain rerun resumes at the first node still stale" % (
            ", ".join(done) or "none", ", ".join(self.drain.cordoned) or "none")


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "device_plugin_restart", device_plugin_restart_errors)
    Runner(module, DevicePlugins(module)).run()


if __name__ == "__main__":
    main()
