#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: guest_node_drain
short_description: Drain the guest (VKS) nodes of GPU node VMs before their host goes down, and restore them after
version_added: 0.2.0
description:
  - The Kubernetes half of a host roll that carries workloads. With O(state=drained), finds the nodes of the
    given node VMs in the guest cluster (the node's name is the VM's name, or its C(spec.providerID) is
    C(vsphere://<VM uuid>)), checks before any change that the pods of the O(protected_priority_classes)
    have somewhere to go (another Ready, schedulable node their selectors, affinity and tolerations allow,
    with the NVIDIA GPUs they request free), and that no PodDisruptionBudget forbids their eviction for good;
    then cordons the nodes and evicts their pods through the Eviction API, so PodDisruptionBudgets are
    respected, and waits until they are gone. DaemonSet and static pods stay (as with
    C(kubectl drain --ignore-daemonsets)); pods of other classes are preempted and counted.
  - With O(state=restored), waits until the nodes are Ready again and uncordons them, but only nodes the
    collection cordoned (annotation C(gpupool.vcf/cordoned-by)); a node an administrator cordoned stays
    cordoned. Without O(vms), every node whose annotation is one of O(owners) is restored.
  - Each node it cordons carries the annotation with O(owner), so a rerun after a failure resumes (already
    cordoned nodes are taken as its own, evicted pods are gone) and a parallel roll of another cluster does
    not uncordon them.
  - The pods of a Job whose Kueue Workload is admitted leave through Kueue rather than one by one - the
    Workload is deactivated (C(spec.active=false), so Kueue evicts it whole and suspends its Job), its pods are
    waited for, and it is activated again, so Kueue requeues it and admits it where there is room (the drained
    nodes are cordoned). The Workload carries the annotation C(gpupool.vcf/deactivated-by) with O(owner) while it
    is inactive; a rerun after a failure activates what it left inactive. They are listed in RV(requeued).
    Other preemptible pods are evicted.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes
options:
  state:
    description: V(drained) before the node VMs go down, V(restored) after they are back.
    type: str
    choices: [drained, restored]
    default: drained
  vms:
    description:
      - The node VMs, as M(gpupool.vcf.gpu_host_info) returns a host's C(vgpu_vms) (C(name), and C(uuid) for
        nodes named otherwise). VMs no node of the cluster matches are returned in RV(not_nodes).
      - With O(state=drained) and no VMs, there is nothing to drain.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: VM name.
        type: str
        required: true
      uuid:
        description: The VM's BIOS uuid (C(config.uuid)), which the vSphere cloud provider puts in C(spec.providerID).
        type: str
  owner:
    description: The value of the C(gpupool.vcf/cordoned-by) annotation on the nodes this run cordons (for example the host's roll).
    type: str
    default: gpupool.vcf
  owners:
    description:
      - With O(state=restored), the annotation values whose nodes may be uncordoned (default O(owner) alone;
        an empty list restores nothing).
    type: list
    elements: str
  protected_priority_classes:
    description:
      - PriorityClasses whose evicted pods must fit elsewhere before anything is cordoned (inference and the
        pools nothing preempts). Pods of other classes are preempted and counted in RV(preempted).
    type: list
    elements: str
    default: []
  force:
    description: Drain even when protected pods have nowhere to go (they stay Pending until the nodes are back).
    type: bool
    default: false
  returning_owners:
    description:
      - With O(state=drained), the C(gpupool.vcf/cordoned-by) values whose nodes are back (Ready, uncordoned) before
        this drain runs - for example the earlier hosts of a roll, judged before any host changes, or a host a
        rerun resumes. Their nodes count as places the protected pods can go.
    type: list
    elements: str
    default: []
  restarted:
    description:
      - With O(state=restored), the nodes' VMs were powered off and on since they were cordoned. A node then counts
        as Ready only with a Ready condition it did not have when it was cordoned - a new boot id
        (C(status.nodeInfo.bootID)) or a Ready that went away and came back - as recorded in the annotation
        C(gpupool.vcf/cordoned-boot) at the cordon. A VM off for less than the node monitor's grace period leaves its
        node Ready all along, and that Ready says nothing about the kubelet booting now.
      - Nodes cordoned without that record (by an older release) are taken as Ready on their Ready condition alone.
    type: bool
    default: false
  timeout:
    description:
      - With O(state=drained), one deadline in seconds for the whole drain of this call, shared by every pod and
        node - the evictions (each PodDisruptionBudget allowing) and then the wait until the evicted pods are gone.
        It is not spent per pod - ten pods behind a budget that never lets go stop the drain after O(timeout), not
        ten times O(timeout). The evictions go in rounds, each asking once for every pod not yet evicted, so one
        pod a budget holds does not hold up the others; every pod is asked for at least once.
      - When the deadline passes, the drain stops with a message that names, per node, the pods still in the way
        (and why - the PodDisruptionBudget that allows no disruption, or evicted and not gone yet), the pods
        evicted so far and the nodes left cordoned; a plain rerun resumes.
      - With O(state=restored), seconds each node may take to be Ready.
    type: int
    default: 600
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
attributes:
  check_mode:
    description: Returns the whole plan (nodes, pods to evict, preempted, blocked) without changing anything.
  diff_mode:
    description:
      - Per node of the VMs its cordon before and after (C(unschedulable), C(cordoned_by) - the
        C(gpupool.vcf/cordoned-by) annotation); with O(state=drained) also the pods on it (C(namespace/name)), after
        the drain only the DaemonSet and static pods that stay, and the Kueue Workloads that leave through Kueue
        (C(admitted) or C(inactive) before, C(requeued) after). Check mode shows the same.
notes:
  - Pods that cannot all be evicted and gone within O(timeout) (one deadline for the drain, not per pod) stop the
    drain; the message names the pods still in the way on each node, which nodes are left cordoned and which pods
    were evicted so far, and a plain rerun resumes.
"""

EXAMPLES = r"""
- name: Drain the guest nodes of the host's node VMs
  gpupool.vcf.guest_node_drain:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    vms: "{{ (info.hosts | selectattr('name', 'equalto', 'esx-h100-01') | first).vgpu_vms | selectattr('power_state', 'equalto', 'poweredOn') }}"
    owner: host-roll/esx-h100-01
    protected_priority_classes: [gpu-inference]
    timeout: 600
  register: drain

- name: After the host is back, wait for the nodes and uncordon them
  gpupool.vcf.guest_node_drain:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    state: restored
    vms: "{{ (info.hosts | selectattr('name', 'equalto', 'esx-h100-01') | first).vgpu_vms }}"
    owner: host-roll/esx-h100-01
    timeout: 900
"""

RETURN = r"""
nodes:
  description: The node of each VM given (null when no node of the cluster matches it).
  returned: always
  type: dict
  sample: {tkc-gpu-inference-7d9f-x2: tkc-gpu-inference-7d9f-x2}
not_nodes:
  description: VMs given that are not nodes of this cluster.
  returned: always
  type: list
  elements: str
drain:
  description:
    - Per node, with O(state=drained), the pods the drain evicts (C(evict)), leaves (C(skipped), with the reason),
      waits for (C(terminating)), those no controller owns (C(unmanaged)), and the protected pods a
      PodDisruptionBudget holds now (C(blocked), evicted within O(timeout) as the budget allows).
  returned: always
  type: dict
preempted:
  description: Count of evicted running pods of the preemptible PriorityClasses ("" for pods without a class).
  returned: always
  type: dict
  sample: {gpu-training: 4, gpu-notebook: 2}
evicted:
  description: The pods evicted (C(namespace/name)); in check mode those that would be.
  returned: always
  type: list
  elements: str
requeued:
  description:
    - The admitted Kueue Workloads (C(namespace/name)) whose pods left through Kueue - deactivated, their pods gone,
      activated again to be requeued - and those an earlier failed run left inactive; in check mode those that would be.
  returned: always
  type: list
  elements: str
unplaceable:
  description: Protected pods no other node can take (the drain refuses them without O(force)).
  returned: always
  type: list
  elements: dict
cordoned:
  description: The nodes this run cordoned (in check mode, would cordon).
  returned: always
  type: list
  elements: str
uncordoned:
  description: With O(state=restored), the nodes made schedulable again (in check mode, would be).
  returned: always
  type: list
  elements: str
seconds:
  description: Seconds each step took (C(plan), C(cordon), C(evict), C(wait_gone), C(wait_ready), C(uncordon)).
  returned: when changed and not in check mode
  type: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi, DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    auth_argument_spec, request_argument_spec, request_timeout_error,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _drain
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_inputs import guest_node_drain_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["drained", "restored"], default="drained"),
    vms=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True), uuid=dict(type="str"))),
    owner=dict(type="str", default="gpupool.vcf"),
    owners=dict(type="list", elements="str"),
    protected_priority_classes=dict(type="list", elements="str", default=[]),
    force=dict(type="bool", default=False),
    restarted=dict(type="bool", default=False),
    returning_owners=dict(type="list", elements="str", default=[]),
    timeout=dict(type="int", default=600),
)
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


def _key(ref):
    return "%s/%s" % (ref["namespace"], ref["name"])


def _mark(node):
    return ((node.get("metadata") or {}).get("annotations") or {}).get(CORDONED_BY)


def _unschedulable(by_name, names):
    return dict((name, bool((by_name[name].get("spec") or {}).get("unschedulable"))) for name in names)


_LIFECYCLE_TAINTS = ("node.kubernetes.io/unschedulable", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def _returned(node):
    """The node as it will be once back: uncordoned and Ready (a copy)."""
    status = dict(node.get("status") or {})
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"] + [
        {"type": "Ready", "status": "True"}]
    spec = dict(node.get("spec") or {}, unschedulable=False)
    # the taints the node lifecycle controller puts on a cordoned or NotReady node go with it
    spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") not in _LIFECYCLE_TAINTS]
    return dict(node, spec=spec, status=status)


class GuestNodes(Resource):
    """The guest nodes of some node VMs: drained (cordoned, pods evicted) or restored (Ready, uncordoned)."""

    def __init__(self, module):
        self.p = module.params
        Resource.__init__(self, "the guest nodes of %d VMs (%s)" % (len(self.p["vms"]), self.p["owner"]) if self.p["vms"]
                          else "the guest nodes cordoned by %s" % ", ".join(self.owners()))
        self.verb = "drain" if self.p["state"] == "drained" else "restore"
        self.module = module
        self.api = None
        self.clock = time.monotonic

    def owners(self):
        return self.p["owners"] if self.p["owners"] is not None else [self.p["owner"]]

    def read(self):
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(self.p["request_timeout"]):
            raise Failure(request_timeout_error(self.p["request_timeout"]))
        start = self.clock()
        with self.doing("reach the guest cluster for"):
            self.api = DrainApi(self.p, owner=self.p["owner"])
        nodes = self.api.list_nodes()
        live = dict(nodes=nodes, started=start)
        if self.p["vms"] or self.p["state"] == "drained":
            live["map"] = _drain.nodes_of_vms(self.p["vms"], nodes)
        else:
            owners = set(self.owners())
            live["map"] = dict((n["metadata"]["name"], n["metadata"]["name"]) for n in nodes if _mark(n) in owners)
        if self.p["state"] == "drained":
            live["pods"] = self.api.list_pods()
            live["pdbs"] = self.api.list_pdbs()
            live["workloads"] = self.api.list_workloads()
        return live

    # --- planning (pure, from the one read)

    def plan(self, live):
        names = [n for n in live["map"].values() if n]
        by_name = dict((n["metadata"]["name"], n) for n in live["nodes"])
        if self.p["state"] == "restored":
            return self._plan_restore(names, by_name)
        return self._plan_drain(live, names, by_name)

    def _plan_restore(self, names, by_name):
        owners = set(self.owners())
        plan = Plan(nodes=names)
        for name in names:
            node = by_name[name]
            if _mark(node) in owners and (node.get("spec") or {}).get("unschedulable"):
                plan.add("node %s" % name, "spec.unschedulable", True, False)
        plan.facts["uncordon"] = [c.object[len("node "):] for c in plan]
        plan.facts["marks"] = dict((name, _mark(by_name[name])) for name in names)
        plan.before, plan.after = _drain.restore_diff(names, _unschedulable(by_name, names), plan.facts["marks"],
                                                      plan.facts["uncordon"])
        return plan

    def _plan_drain(self, live, names, by_name):
        protected = self.p["protected_priority_classes"]
        dplan = _drain.drain_plan(names, live["pods"], live["pdbs"], protected)
        never = set(_drain.budgets_that_never_allow(live["pdbs"]))
        refused = []
        for node, ref in _drain.blocked_pods(dplan):
            hard = [b for b in ref["pdb"] if "%s/%s" % (ref["namespace"], b) in never]
            if len(ref["pdb"]) > 1 or hard:
                refused.append("%s on %s (%s)" % (_key(ref), node, ref["reason"] if len(ref["pdb"]) > 1 else
                                                  "PodDisruptionBudget %s wants every pod it covers healthy" % hard[0]))
        returning = set(self.p["returning_owners"])
        # the nodes an earlier step brings back before this drain are places to go
        judged = [_returned(n) if _mark(n) in returning else n for n in live["nodes"]]
        unplaceable = _drain.unplaceable(dplan, live["pods"], judged, protected)
        plan = Plan(drain=dplan, unplaceable=unplaceable)
        if refused:
            raise Failure("Unable to drain %s: the Eviction API would refuse %s; change the budget or scale the "
                          "workload up first. Nothing was changed." % (self.name, "; ".join(refused)),
                          nodes=live["map"], drain=dplan, unplaceable=unplaceable)
        if unplaceable and not self.p["force"]:
            raise Failure("Unable to drain %s: %d protected pods would have nowhere to go (%s); add capacity, or set "
                          "force to drain anyway (they stay Pending until the nodes are back). Nothing was changed."
                          % (self.name, len(unplaceable), "; ".join(
                              "%s on %s: %s" % (_key(u), u["node"], u["reason"]) for u in unplaceable)),
                          nodes=live["map"], drain=dplan, unplaceable=unplaceable)
        for name in names:
            node = by_name[name]
            if not (node.get("spec") or {}).get("unschedulable"):
                plan.add("node %s" % name, "spec.unschedulable", False, True)
        for name in names:
            entry = dplan[name]
            for ref in entry["evict"] + entry["blocked"]:
                plan.add("pod %s" % _key(ref), "node", name, None, action="evict")
        # the pods of admitted Kueue workloads leave with their workload (deactivated, then requeued)
        requeue = _drain.kueue_requeues(dplan, live["pods"], live.get("workloads"))
        through_kueue = set(_key(r) for wl in requeue.values() for r in wl["pods"])
        inactive = [w for w in _drain.workloads_left_inactive(live.get("workloads"), [self.p["owner"]])
                    if _key(w) not in requeue]
        for key in sorted(requeue):
            plan.add("workload %s" % key, "spec.active", True, False, action="requeue")
        for wl in inactive:
            plan.add("workload %s" % _key(wl), "spec.active", False, True, action="requeue")
        plan.facts["cordon"] = [c.object[len("node "):] for c in plan if c.field == "spec.unschedulable"]
        plan.facts["evict"] = [ref for ref in _drain.drain_refs(dplan) if _key(ref) not in through_kueue]
        plan.facts["wait"] = _drain.drain_refs(dplan, ("terminating",)) + [
            ref for ref in _drain.drain_refs(dplan, ("evict",)) if _key(ref) in through_kueue]
        plan.facts["requeue"] = [dict(namespace=wl["namespace"], name=wl["name"]) for _k, wl in sorted(requeue.items())]
        plan.facts["reactivate"] = inactive
        plan.before, plan.after = _drain.drain_diff(
            dplan, _unschedulable(by_name, names), dict((name, _mark(by_name[name])) for name in names),
            self.p["owner"], sorted(requeue), [_key(wl) for wl in inactive])
        return plan

    def result(self, live, plan):
        facts = plan.facts
        out = dict(nodes=live["map"], not_nodes=sorted(vm for vm, node in live["map"].items() if not node),
                   drain={}, preempted={}, evicted=[], unplaceable=[], cordoned=[], uncordoned=[], requeued=[])
        if self.p["state"] == "drained":
            out.update(drain=facts["drain"], preempted=_drain.preempted_total(facts["drain"]),
                       evicted=[_key(r) for r in facts["evict"]], unplaceable=facts["unplaceable"],
                       cordoned=facts["cordon"], requeued=[_key(w) for w in facts["requeue"] + facts["reactivate"]])
        else:
            out["uncordoned"] = facts["uncordon"]
        return out

    # --- applying

    def apply(self, plan):
        times = {}
        mark = self.clock()
        if self.p["state"] == "restored":
            self.api.cordoned = list(plan.facts["uncordon"])  # what a failure leaves: these stay cordoned
            for name in plan.facts["uncordon"]:
                with self.doing("wait until Ready:", "node %s (cordoned by %s)" % (name, plan.facts["marks"][name])):
                    self.api.wait_ready(name, self.p["timeout"], restarted=self.p["restarted"])
            times["wait_ready"], mark = round(self.clock() - mark, 1), self.clock()
            owners = self.owners()
            for name in plan.facts["uncordon"]:
                with self.doing("uncordon", "node %s" % name):
                    self.api.uncordon(name, owners)
            times["uncordon"] = round(self.clock() - mark, 1)
            return dict(seconds=times)
        # one deadline for the whole drain of this call: every eviction and the wait for the pods gone
        deadline = self.api.deadline(self.p["timeout"])
        for name in plan.facts["cordon"]:
            with self.doing("cordon", "node %s" % name):
                self.api.cordon(name)
        times["cordon"], mark = round(self.clock() - mark, 1), self.clock()
        for wl in plan.facts["requeue"]:
            with self.doing("deactivate (Kueue evicts it whole)", "Kueue workload %s" % _key(wl)):
                self.api.set_workload_active(wl["namespace"], wl["name"], False)
        with self.doing("evict the pods of"):
            self.api.evict_all(plan.facts["evict"], deadline, self.p["timeout"])
        times["evict"], mark = round(self.clock() - mark, 1), self.clock()
        with self.doing("wait for the evicted pods of"):
            self.api.wait_gone(plan.facts["evict"] + plan.facts["wait"], self.p["timeout"], deadline=deadline)
        times["wait_gone"] = round(self.clock() - mark, 1)
        for wl in plan.facts["requeue"] + plan.facts["reactivate"]:
            with self.doing("activate again (Kueue requeues it)", "Kueue workload %s" % _key(wl)):
                self.api.set_workload_active(wl["namespace"], wl["name"], True)
        return dict(seconds=times)

    def next_step(self, exc):
        if self.api is None:
            return "nothing was changed"
        if isinstance(exc, DrainError):
            return None  # its message already says what was left and that a rerun resumes
        return "left: %s" % self.api.left()


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "guest_node_drain", guest_node_drain_errors)
    Runner(module, GuestNodes(module)).run()


if __name__ == "__main__":
    main()
