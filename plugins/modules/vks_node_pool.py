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
    ClusterClass, not from a list of VKS releases - a labels variable (a map, or a list of
    key/value pairs such as C(nodePoolLabels)), a taints variable (a list of key/effect items),
    or such properties of an object variable (for example C(node.labels), C(node.taints)).
    When the class has no place for what is asked (taints on the legacy
    C(tanzukubernetescluster) class) the module fails before any change.
  - The Cluster is read, changed and written with its C(resourceVersion); a conflict (another
    writer in between) re-reads and retries.
  - Check mode sends the same update as a server-side dry run, so the Supervisor's own
    validation of the variables runs without storing anything.
  - A failure names the Cluster and the step (read, read the ClusterClass, update), never with a
    traceback - an unusable kubeconfig and an unreachable API server included - and says what was left
    (nothing changed, or an update whose answer was lost); a plain rerun converges.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
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
    support: full
  diff_mode:
    description: Returns the Cluster's machineDeployments before and after.
    support: full
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
  description: Which ClusterClass variables carry the VM class, node labels and node taints.
  returned: success
  type: dict
  sample: {"vm_class": "vmClass", "labels": {"variable": "node", "property": "labels", "form": "map"},
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
diff:
  description: C(before) and C(after) of the Cluster's machineDeployments and of the pools its annotation records (C(owned)), with C(--diff).
  returned: changed and diff mode
  type: dict
"""

import copy
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import kubernetes
    K8S_IMPORT_ERROR = None
except ImportError:
    kubernetes = None
    K8S_IMPORT_ERROR = traceback.format_exc()
HAS_K8S = kubernetes is not None

from ansible_collections.gpupool.vcf.plugins.module_utils._k8s import (
    K8sClient, K8sError, PlanError, auth_argument_spec, class_ref, plan_machine_deployments, request_argument_spec,
    request_timeout_error, variable_plan)
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce

GROUP = "cluster.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
VKS_CLASS_NAMESPACE = "vmware-system-vks-public"
# annotation of the Cluster: the node pools this module created (names, sorted, comma-separated)
OWNED_ANNOTATION = "gpupool.vcf/node-pools"


def owned_pools(annotations):
    """The pool names the Cluster's annotation records (an empty set without one)."""
    value = (annotations or {}).get(OWNED_ANNOTATION) or ""
    return set(x.strip() for x in value.split(",") if x.strip())


def plan_ownership(current, kept, names, owned, purge):
    """Purge only what the record says this module created, and the record after the run.

    ``current``: the Cluster's machineDeployments; ``kept``: the list with the named pools
    created or updated and every other pool kept; ``names``: the pools named; ``owned``: the
    record. Returns (new list, owned after, unnamed pools kept because they are not ours).
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
    return out, (set(owned) | created) & present, sorted(foreign)


def _reason(e):
    """What went wrong, in one line (K8sError already says it)."""
    return str(e)


class NodePools(object):
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.k8s = K8sClient(self.p)
        self.lost_answer = False
        self.ident = "%s/%s" % (self.p["namespace"], self.p["cluster_name"])

    def fail(self, verb, reason, **extra):
        self.module.fail_json(msg="Unable to %s Cluster %s: %s" % (verb, self.ident, reason), **extra)

    def resource(self, version, kind):
        return self.k8s.resource("%s/%s" % (GROUP, version), kind)

    def read(self):
        """(version, cluster dict, class ref dict) in the version the Cluster was written in."""
        last = None
        for version in VERSIONS:
            try:
                obj = self.k8s.call(self.resource(version, "Cluster").get, name=self.p["cluster_name"],
                                    namespace=self.p["namespace"]).to_dict()
            except K8sError as e:
                if e.status == 404:
                    self.fail("read", "not found")
                if e.kind != "not_served":
                    self.fail("read", str(e))
                last = e
                continue
            ref = class_ref(obj, version, self.p["namespace"])
            if ref is not None:
                return version, obj, ref
        if last is not None:
            self.fail("read", str(last))
        self.fail("read", "it has no managed topology (spec.topology with a ClusterClass)")

    def read_class(self, version, ref):
        for v in (version,) + tuple(x for x in VERSIONS if x != version):
            try:
                return self.k8s.call(self.resource(v, "ClusterClass").get, name=ref["name"],
                                     namespace=ref["namespace"]).to_dict()
            except K8sError as e:
                if e.status != 404 and e.kind != "not_served":
                    self.fail("read the ClusterClass of", str(e))
        self.fail("read the ClusterClass of", "ClusterClass %s/%s not found" % (ref["namespace"], ref["name"]))

    def desired(self, obj, cc):
        plan = variable_plan((cc.get("spec") or {}).get("variables") or [])
        md_classes = [m.get("class") for m in
                      (((cc.get("spec") or {}).get("workers") or {}).get("machineDeployments") or [])]
        default_class = md_classes[0] if len(md_classes) == 1 else None
        pools = []
        for pool in self.p["node_pools"]:
            pool = dict(pool)
            if pool.get("class") and md_classes and pool["class"] not in md_classes:
                raise PlanError("node pool %s: class %s is not a machineDeployment class of the ClusterClass (%s)"
                                % (pool["name"], pool["class"], ", ".join(md_classes)))
            pools.append(pool)
        workers = ((obj["spec"]["topology"]).get("workers") or {})
        current = workers.get("machineDeployments") or []
        new = plan_machine_deployments(current, pools, plan, default_class, False)
        self.owned_before = owned_pools((obj.get("metadata") or {}).get("annotations"))
        new, self.owned_after, self.kept_foreign = plan_ownership(
            current, new, [x["name"] for x in pools], self.owned_before, self.p["purge"])
        return plan, current, new

    def left(self, e):
        """What a failed update left behind: one request, so all of it or nothing."""
        if e.kind in ("timeout", "reset"):
            return ("the update was one request (stored whole or not at all) and its answer was lost; "
                    "a rerun reads the Cluster and finishes or finds nothing to do")
        return "the Cluster was not changed (its node pools are as before); a rerun converges"

    def run(self):
        names = [p["name"] for p in self.p["node_pools"]]
        if len(set(names)) != len(names):
            self.module.fail_json(msg="node_pools names must be unique: %s" % ", ".join(names))
        for attempt in range(self.p["retries"] + 1):
            version, obj, ref = self.read()
            cc = self.read_class(version, ref)
            try:
                plan, current, new = self.desired(obj, cc)
            except PlanError as e:
                self.fail("update the node pools of", str(e))
            owned_changed = self.owned_after != self.owned_before
            result = dict(changed=current != new or owned_changed, machine_deployments=new,
                          api_version="%s/%s" % (GROUP, version), owned=sorted(self.owned_after),
                          kept_foreign=self.kept_foreign,
                          variable_plan=dict((k, v) for k, v in plan.items() if k != "names"))
            if self.module._diff:
                result["diff"] = dict(before={"machineDeployments": current, "owned": sorted(self.owned_before)},
                                      after={"machineDeployments": new, "owned": sorted(self.owned_after)})
            if not result["changed"]:
                # an update whose answer was lost, and whose repeat then met a conflict, was stored
                result["changed"] = self.lost_answer
                self.module.exit_json(**result)
            body = copy.deepcopy(obj)
            body["spec"]["topology"].setdefault("workers", {})
            body["spec"]["topology"]["workers"]["machineDeployments"] = new
            for key in ("managedFields",):
                body["metadata"].pop(key, None)
            if owned_changed:
                annotations = dict(body["metadata"].get("annotations") or {})
                annotations[OWNED_ANNOTATION] = ",".join(sorted(self.owned_after))
                if not self.owned_after:
                    del annotations[OWNED_ANNOTATION]
                body["metadata"]["annotations"] = annotations
            try:
                kwargs = {"dry_run": "All"} if self.module.check_mode else {}
                # one PUT carrying the resourceVersion it was read at: idempotent enough to retry on a
                # timeout or a 5xx (a repeat of a stored update gets 409 and is re-read), never half-written
                self.k8s.call(self.resource(version, "Cluster").replace, body=body, namespace=self.p["namespace"], **kwargs)
            except K8sError as e:
                if e.status == 409 and attempt < self.p["retries"]:
                    self.lost_answer = self.lost_answer or e.attempts > 1
                    continue
                self.fail("update the node pools of", "%s; %s" % (e, self.left(e)),
                          machine_deployments=current, api_version=result["api_version"])
            self.module.exit_json(**result)


def main():
    taint = dict(key=dict(type="str", required=True, no_log=False), value=dict(type="str"),
                 effect=dict(type="str", required=True, choices=["NoSchedule", "PreferNoSchedule", "NoExecute"]))
    pool = dict(name=dict(type="str", required=True), replicas=dict(type="int"),
                vm_class=dict(type="str"), labels=dict(type="dict"),
                taints=dict(type="list", elements="dict", options=taint),
                **{"class": dict(type="str")})
    spec = dict(cluster_name=dict(type="str", required=True), namespace=dict(type="str", required=True),
                node_pools=dict(type="list", elements="dict", required=True, options=pool),
                purge=dict(type="bool", default=False), retries=dict(type="int", default=5))
    spec.update(auth_argument_spec())
    spec.update(request_argument_spec())
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    enforce(module, "vks_node_pool")
    if not HAS_K8S:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    if request_timeout_error(module.params["request_timeout"]):
        module.fail_json(msg=request_timeout_error(module.params["request_timeout"]))
    for p in module.params["node_pools"]:
        if p.get("replicas") is not None and p["replicas"] < 0:
            module.fail_json(msg="node pool %s: replicas must be 0 or more" % p["name"])
    try:
        NodePools(module).run()
    except K8sError as e:
        module.fail_json(msg="Unable to reach the Supervisor API for Cluster %s/%s: %s; nothing was changed"
                         % (module.params["namespace"], module.params["cluster_name"], e))


if __name__ == "__main__":
    main()
