#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vks_node_pool
short_description: Node pools of a VKS cluster on the Supervisor
version_added: 0.1.0
description:
  - Creates and updates the node pools (C(spec.topology.workers.machineDeployments)) of a VKS
    C(Cluster) (C(cluster.x-k8s.io)) through the Supervisor's Kubernetes API - replicas, the
    VM class override (which carries the vGPU profile), node labels and node taints.
  - Pools not named are left as they are unless O(purge); fields of a pool that are not set are
    left as they are; every other field of the Cluster is kept.
  - The pools this module creates are recorded in the Cluster's annotation
    C(gpupool.vcf/node-pools) (their names, sorted, comma-separated), written in the same update
    as the pools; a pool that is no longer in the Cluster is dropped from it. O(purge) removes
    only recorded pools, so a pool someone else added (by hand, or before the record existed)
    is never removed.
  - How labels and taints are written is read from the variable schema of the Cluster's
    ClusterClass (its C(spec.variables), and the C(status.variables) Cluster API lists, which
    include variables a runtime extension contributes), not from a list of VKS releases - a
    labels variable (a map, or a list of key/value pairs such as C(nodePoolLabels) in v3.1-era
    classes), a taints variable (a list of key/effect items such as C(nodePoolTaints)), or such
    properties of an object variable (C(node.labels), C(node.taints) in later classes).
  - When the class has no place for what is asked (taints on a class without a taint variable), has
    two places that both fit, or its schema refuses a taint (a required value missing, an effect it
    does not allow), the module fails before any change, naming the class and what it lacks.
  - A new override of an object variable (C(node)) starts from the Cluster's value of that
    variable, so the properties the pool does not set (labels when only taints are given) keep
    what the pool had.
  - The Cluster is read, changed and written with its C(resourceVersion); a conflict (another
    writer in between) re-reads and retries.
  - Check mode sends the same update as a server-side dry run, so the Supervisor's own
    validation of the variables runs without storing anything.
  - With O(wait_rollout), the module then waits until each named pool with a O(node_pools[].vm_class)
    has rolled - Cluster API replaces a machineDeployment's machines when its VM class changes -
    that is, the guest's nodes that carry all the pool's O(node_pools[].labels) number its replicas,
    every one runs on the pool's class (its C(node.kubernetes.io/instance-type) label), is Ready and
    schedulable, and no other node of the pool is left. It polls every O(rollout_poll) seconds for at
    most O(rollout_timeout) seconds; when the bound passes it fails naming each pool's nodes that are
    left, with the Cluster already updated - a rerun finds nothing to write and waits again. A pool
    already rolled is not waited for, so a rerun is quick. Check mode does not wait.
  - RV(classes_in_use) lists the VM classes a node pool of the Cluster names or a guest node runs on
    (with O(wait_rollout)) - a superseded class not in it can be retired
    (M(gpupool.vcf.vm_class) O(gpupool.vcf.vm_class#module:in_use)).
  - A failure names the Cluster and the step (read, read the ClusterClass, update), never with a
    traceback - an unusable kubeconfig and an unreachable API server included - and says what was left
    (nothing changed, or an update whose answer was lost); a plain rerun converges.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes
options:
  cluster_name:
    description: Name of the VKS Cluster.
    type: str
    required: true
  namespace:
    description: vSphere Namespace (Supervisor namespace) of the Cluster.
    type: str
    required: true
  node_pools:
    description: Node pools to create or update.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Name of the node pool (machineDeployment).
        type: str
        required: true
      class:
        description:
          - machineDeployment class of the ClusterClass for a new pool; default the only one the
            class defines (C(node-pool) in VKS).
        type: str
      replicas:
        description: Number of nodes.
        type: int
      vm_class:
        description: VM class of the pool's nodes (the override of the C(vmClass) variable).
        type: str
      labels:
        description: Node labels of the pool (the whole set the class variable holds).
        type: dict
      taints:
        description: Node taints of the pool (the whole list).
        type: list
        elements: dict
        suboptions:
          key:
            description: Taint key.
            type: str
            required: true
          value:
            description: Taint value.
            type: str
          effect:
            description: Taint effect.
            type: str
            required: true
            choices: [NoSchedule, PreferNoSchedule, NoExecute]
  purge:
    description:
      - Remove node pools of the Cluster that O(node_pools) does not name, when the Cluster's
        C(gpupool.vcf/node-pools) annotation records them as created by this module.
      - Other pools are kept and listed in RV(kept_foreign).
    type: bool
    default: false
  adopt:
    description:
      - Record in the Cluster's C(gpupool.vcf/node-pools) annotation every pool O(node_pools) names
        (one made by hand, once this run has made it as asked, included), so that a later O(purge)
        may remove it.
      - Without it, only the pools this module creates are recorded; a pool that was there stays foreign.
    type: bool
    default: false
  wait_rollout:
    description:
      - Wait until every named pool with a O(node_pools[].vm_class) runs on that class (see above). Each
        such pool needs O(node_pools[].labels), which tell its nodes.
    type: bool
    default: false
  rollout_timeout:
    description: Seconds to wait for the rollout, in all (1 or more).
    type: int
    default: 1800
  rollout_poll:
    description: Seconds between two reads of the guest's nodes while waiting (1 or more).
    type: int
    default: 5
  guest_kubeconfig:
    description:
      - Kubeconfig of the guest (VKS) cluster whose nodes are watched with O(wait_rollout); on a
        Supervisor, the Secret C(<cluster_name>-kubeconfig) of the namespace holds one.
      - Unset, the nodes are read through the Supervisor connection (where one API shows both, as in a
        test rig).
    type: path
  retries:
    description: How many times a conflicting update is re-read and retried.
    type: int
    default: 5
  request_timeout:
    description:
      - Seconds to wait for one request to the Supervisor API (1 or more).
      - Reads (and API discovery) that time out, lose or cannot open their connection, or get a 429 or
        5xx answer are tried again, three times in all, with exponential backoff and jitter; so an API
        server that never answers fails the module after about three times this value.
      - The update is one C(PUT) of the Cluster carrying the C(resourceVersion) it was read at, so it is
        retried the same way - a repeat of an update that was stored gets a conflict and the Cluster is
        re-read. It is never half-written - the Cluster holds all of it or none of it.
    type: int
    default: 30
attributes:
  check_mode:
    description: Sends the update as a server-side dry run (the Supervisor's validation runs, nothing is stored) and returns the node pools it would write.
  diff_mode:
    description: Returns the Cluster's machineDeployments before and after.
"""

EXAMPLES = r"""
- name: GPU node pools of a VKS cluster
  gpupool.vcf.vks_node_pool:
    kubeconfig: "{{ supervisor_kubeconfig }}"
    namespace: ml-team
    cluster_name: gpu-cluster
    node_pools:
      - name: inference-h100
        replicas: 2
        vm_class: vmclass-h100-80c
        labels:
          gpupool.vcf/workload: inference
        taints:
          - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
"""

RETURN = r"""
machine_deployments:
  description: The Cluster's node pools after the run (or as check mode predicts them).
  returned: success
  type: list
  elements: dict
variable_plan:
  description: The Cluster's ClusterClass and which of its variables carry the VM class, node labels and node taints.
  returned: success
  type: dict
  sample: {"class": "vmware-system-vks-public/builtin-generic-v3.4.0", "vm_class": "vmClass",
           "labels": {"variable": "node", "property": "labels", "form": "map"},
           "taints": {"variable": "node", "property": "taints"}}
owned:
  description: Node pools the Cluster's C(gpupool.vcf/node-pools) annotation records as created by this module, after the run.
  returned: success
  type: list
  elements: str
kept_foreign:
  description: Unnamed node pools that O(purge) kept because this module did not create them.
  returned: success
  type: list
  elements: str
api_version:
  description: The C(cluster.x-k8s.io) version the Cluster was read and written in.
  returned: success
  type: str
  sample: cluster.x-k8s.io/v1beta2
rollout:
  description:
    - With O(wait_rollout), per pool waited for - C(pool), C(vm_class), C(replicas), C(ready) (nodes on the
      class, Ready and schedulable), C(done), and C(left) (the pool's other nodes, each with C(node),
      C(vm_class), C(ready), C(cordoned)). In check mode, where the pools stand now.
  returned: with wait_rollout
  type: list
  elements: dict
classes_in_use:
  description: With O(wait_rollout), the VM classes a node pool of the Cluster names or a guest node runs on, sorted.
  returned: with wait_rollout
  type: list
  elements: str
rollout_seconds:
  description: With O(wait_rollout), how long the module waited.
  returned: with wait_rollout
  type: float
diff:
  description: C(before) and C(after) of the Cluster's machineDeployments and of the pools its annotation records (C(owned)), with C(--diff).
  returned: in diff mode (before equal to after when nothing changes)
  type: dict
"""

import copy
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR
HAS_K8S = K8S_IMPORT_ERROR is None

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_inputs import vks_node_pool_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    K8sError, auth_argument_spec, request_argument_spec, request_timeout_error)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import (
    PlanError, plan_machine_deployments, public_plan, read_pool, top_variables, variable_plan)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _rollout
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._rollout_api import GuestNodes
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change, Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import (
    NODE_POOLS_ANNOTATION, owned_node_pools, record_after)
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._vks_api import GROUP, VksClusterApi

VKS_CLASS_NAMESPACE = "vmware-system-vks-public"
UPDATE_VERB = "update the node pools of"

TAINT_SPEC = dict(key=dict(type="str", required=True, no_log=False), value=dict(type="str"),
                  effect=dict(type="str", required=True, choices=["NoSchedule", "PreferNoSchedule", "NoExecute"]))
POOL_SPEC = dict(name=dict(type="str", required=True), replicas=dict(type="int"),
                 vm_class=dict(type="str"), labels=dict(type="dict"),
                 taints=dict(type="list", elements="dict", options=TAINT_SPEC),
                 **{"class": dict(type="str")})
ARGUMENT_SPEC = dict(cluster_name=dict(type="str", required=True), namespace=dict(type="str", required=True),
                     node_pools=dict(type="list", elements="dict", required=True, options=POOL_SPEC),
                     purge=dict(type="bool", default=False), adopt=dict(type="bool", default=False),
                     retries=dict(type="int", default=5),
                     wait_rollout=dict(type="bool", default=False), rollout_timeout=dict(type="int", default=1800),
                     rollout_poll=dict(type="int", default=5), guest_kubeconfig=dict(type="path"))
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


def plan_ownership(current, kept, names, owned, purge, adopt=False):
    """Purge only what the record says this module created, and the record after the run.

    ``current``: the Cluster's machineDeployments; ``kept``: the list with the named pools
    created or updated and every other pool kept; ``names``: the pools named; ``owned``: the
    record; ``adopt``: the named pools are recorded too (they are as asked after the run).
    Returns (new list, owned after, unnamed pools kept because they are not ours).
    """
    created = set(names) - set(md.get("name") for md in current)
    out = []
    foreign = []
    for md in kept:
        name = md.get("name")
        if purge and name not in names:
            if name in owned:
                continue
            foreign.append(name)
        out.append(md)
    present = set(md.get("name") for md in out)
    return out, record_after(owned, present, created, names, adopt), sorted(foreign)


def check_pools(pools, class_spec):
    """The pools with their class checked against the ClusterClass's machineDeployment classes;
    the default class (the only one, else None)."""
    md_classes = [m.get("class") for m in ((class_spec.get("workers") or {}).get("machineDeployments") or [])]
    for pool in pools:
        if pool.get("class") and md_classes and pool["class"] not in md_classes:
            raise PlanError("node pool %s: class %s is not a machineDeployment class of the ClusterClass (%s)"
                            % (pool["name"], pool["class"], ", ".join(md_classes)))
    return [dict(pool) for pool in pools], md_classes[0] if len(md_classes) == 1 else None


def updated_body(obj, new, owned_after):
    """The Cluster as it is written: the new machineDeployments and, when it changes, the annotation."""
    body = copy.deepcopy(obj)
    body["spec"]["topology"].setdefault("workers", {})
    body["spec"]["topology"]["workers"]["machineDeployments"] = new
    body["metadata"].pop("managedFields", None)
    if owned_after != owned_node_pools(obj["metadata"].get("annotations")):
        annotations = dict(body["metadata"].get("annotations") or {})
        annotations[NODE_POOLS_ANNOTATION] = ",".join(sorted(owned_after))
        if not owned_after:
            del annotations[NODE_POOLS_ANNOTATION]
        body["metadata"]["annotations"] = annotations
    return body


def left(exc):
    """What a failed update left behind: one request, so all of it or nothing."""
    if exc.kind in ("timeout", "reset"):
        return ("the update was one request (stored whole or not at all) and its answer was lost; "
                "a rerun reads the Cluster and finishes or finds nothing to do")
    return "the Cluster was not changed (its node pools are as before); a rerun converges"


class NodePools(Resource):
    """The node pools of one VKS Cluster: read, planned from the ClusterClass's variables, one PUT."""

    verb = UPDATE_VERB
    refusals = (PlanError,)

    def __init__(self, module):
        self.p = module.params
        Resource.__init__(self, "Cluster %s/%s" % (self.p["namespace"], self.p["cluster_name"]))
        self.module = module
        self.api = None
        self.lost_answer = False  # an update whose answer was lost, and whose repeat then met a conflict, was stored

    def check(self):
        """The options no request is needed for."""
        p = self.p
        if not HAS_K8S:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        for pool in p["node_pools"]:
            if pool.get("replicas") is not None and pool["replicas"] < 0:
                raise Failure("node pool %s: replicas must be 0 or more" % pool["name"])
        names = [pool["name"] for pool in p["node_pools"]]
        if len(set(names)) != len(names):
            raise Failure("node_pools names must be unique: %s" % ", ".join(names))
        if p["wait_rollout"]:
            for key in ("rollout_timeout", "rollout_poll"):
                if p[key] < 1:
                    raise Failure("%s must be 1 or more seconds, not %d; nothing was changed" % (key, p[key]))
            blind = [pool["name"] for pool in p["node_pools"] if pool.get("vm_class") and not pool.get("labels")]
            if blind:
                raise Failure("wait_rollout needs the labels of node pool(s) %s to tell their nodes; nothing was changed"
                              % ", ".join(blind))

    def read(self):
        if self.api is None:
            self.check()
            with self.doing("reach the Supervisor API for"):
                self.api = VksClusterApi(self.p, self.p["namespace"], self.p["cluster_name"])
        with self.doing("read"):
            version, obj, ref = self.api.read_cluster()
        if version is None:
            raise Failure("Unable to read %s: it has no managed topology (spec.topology with a ClusterClass)" % self.name)
        with self.doing("read the ClusterClass of"):
            return dict(version=version, obj=obj, cc=self.api.read_class(version, ref))

    def plan(self, live):
        plan = self.compute(live)
        if plan and self.module.check_mode:
            self.store(plan, dry_run=True)  # the Supervisor's own validation, nothing stored
        return plan

    def compute(self, live):
        """The plan from one read (pure)."""
        obj, cc_spec = live["obj"], live["cc"].get("spec") or {}
        vplan = variable_plan(live["cc"])
        pools, default_class = check_pools(self.p["node_pools"], cc_spec)
        current = (obj["spec"]["topology"].get("workers") or {}).get("machineDeployments") or []
        new = plan_machine_deployments(current, pools, vplan, default_class, False, top_variables(obj))
        owned_before = owned_node_pools((obj.get("metadata") or {}).get("annotations"))
        new, owned_after, kept_foreign = plan_ownership(current, new, [x["name"] for x in pools], owned_before, self.p["purge"],
                                                        adopt=self.p["adopt"])
        changes = []
        if current != new:
            changes.append(Change(self.name, "machineDeployments", current, new))
        if owned_after != owned_before:
            changes.append(Change(self.name, "annotations/" + NODE_POOLS_ANNOTATION, sorted(owned_before), sorted(owned_after)))
        return Plan(changes, before={"machineDeployments": current, "owned": sorted(owned_before)},
                    after={"machineDeployments": new, "owned": sorted(owned_after)},
                    version=live["version"], obj=obj, vplan=vplan, kept_foreign=kept_foreign, owned_after=owned_after)

    def result(self, live, plan):
        facts = plan.facts
        out = dict(machine_deployments=plan.after["machineDeployments"], api_version="%s/%s" % (GROUP, facts["version"]),
                   owned=plan.after["owned"], kept_foreign=facts["kept_foreign"],
                   variable_plan=public_plan(facts["vplan"]))
        if self.p["wait_rollout"] and live is not None:
            if self.module.check_mode:
                out.update(self.rollout_state(plan))  # where the pools stand; nothing is waited for
            elif not plan:
                out.update(self.wait(plan))  # nothing to write: a rerun after a rollout that ran out of time
        return out

    def apply(self, plan):
        out = self.store(plan)
        if self.p["wait_rollout"]:
            out.update(self.wait(plan))
        return out

    # --- the rollout

    def guest(self):
        if getattr(self, "_guest", None) is None:
            params = dict(self.p)
            if self.p["guest_kubeconfig"]:
                params.update(kubeconfig=self.p["guest_kubeconfig"], context=None, host=None)
            with self.doing("reach the guest cluster of"):
                self._guest = GuestNodes(params)
        return self._guest

    def rollout_state(self, plan):
        """Each waited-for pool's state and the classes in use, from one read of the guest's nodes."""
        with self.doing("read the guest nodes of"):
            nodes = self.guest().list()
        reports = [_rollout.pool_rollout(pool["name"], pool["vm_class"], pool.get("replicas"),
                                         _rollout.pool_nodes(nodes, pool.get("labels")))
                   for pool in self.p["node_pools"] if pool.get("vm_class")]
        top = top_variables(plan.facts["obj"])
        pools = [read_pool(md, top, plan.facts["vplan"]) for md in plan.after["machineDeployments"]]
        return dict(rollout=reports, classes_in_use=_rollout.classes_in_use(pools, nodes))

    def wait(self, plan):
        """Poll until every waited-for pool has rolled; Failure (with what is left) after rollout_timeout."""
        start = time.time()
        while True:
            state = self.rollout_state(plan)
            elapsed = time.time() - start
            state["rollout_seconds"] = round(elapsed, 1)
            if all(r["done"] for r in state["rollout"]):
                return state
            if elapsed + self.p["rollout_poll"] > self.p["rollout_timeout"]:
                self.partial = dict(state, machine_deployments=plan.after["machineDeployments"],
                                    api_version="%s/%s" % (GROUP, plan.facts["version"]))
                raise Failure("Unable to finish the rollout of %s: %s" % (
                    self.name, _rollout.timeout_message(state["rollout"], self.p["rollout_timeout"])), **self.partial)
            time.sleep(self.p["rollout_poll"])

    def store(self, plan, dry_run=False):
        """PUT the plan's Cluster; on a conflict re-read, re-plan (``plan`` takes the new one) and retry."""
        for attempt in range(self.p["retries"] + 1):
            try:
                body = updated_body(plan.facts["obj"], plan.after["machineDeployments"], plan.facts["owned_after"])
                with self.doing(UPDATE_VERB):
                    self.api.replace(plan.facts["version"], body, dry_run=dry_run)
                return dict(self.result(None, plan), changed=True)
            except K8sError as exc:
                if exc.status != 409 or attempt >= self.p["retries"]:
                    self.partial = dict(machine_deployments=plan.before["machineDeployments"],
                                        api_version="%s/%s" % (GROUP, plan.facts["version"]))
                    raise
                self.lost_answer = self.lost_answer or exc.attempts > 1
            again = self.compute(self.read())
            plan.changes, plan.before, plan.after, plan.facts = again.changes, again.before, again.after, again.facts
            if not again:
                return dict(self.result(None, plan), changed=self.lost_answer)
        return None  # not reached: the last attempt returns or raises

    def next_step(self, exc):
        if isinstance(exc, K8sError) and self.step and self.step[0] == UPDATE_VERB:
            return left(exc)
        if self.step and self.step[0] == "reach the Supervisor API for":
            return "nothing was changed"
        return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "vks_node_pool", vks_node_pool_errors)
    Runner(module, NodePools(module)).run()


if __name__ == "__main__":
    main()
