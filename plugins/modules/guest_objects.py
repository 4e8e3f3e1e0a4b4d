#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: guest_objects
short_description: The PriorityClasses, tenant Namespaces, GPU quotas, Kueue queues, GPU Operator objects and notebook culler of a guest cluster
version_added: 0.3.0
description:
  - Builds the objects the C(gpu_scheduling_policy) role keeps (the PriorityClasses, each tenant's Namespace with
    its labels and its ResourceQuotas, Kueue's ResourceFlavors, ClusterQueues and LocalQueues) and those the
    C(gpu_operator) role keeps (the device plugin's time-slicing ConfigMap, the DCGM exporter's metrics ConfigMap and
    the fields it sets on the chart's ClusterPolicy) and the notebook culler (its CronJob and the objects it needs, or
    the culling settings of Kubeflow's notebook controller) from its inputs, reads them (one list per kind), plans each
    object field by field with the plan the drift audit (M(gpupool.vcf.gpu_pool_audit)) reports from, and makes
    exactly the changes of the plan.
  - Only what the collection sets is compared; labels, annotations and limits set by others stay. The ClusterPolicy
    is the GPU Operator chart's - only the fields the role sets are planned, one by one, and patched back (a merge
    patch of those fields); it is never created, deleted or labelled, and a missing one fails the run. So is Kubeflow's
    notebook-controller Deployment - only the env variables of its container that the role sets are planned and
    patched back.
  - An object this module creates carries the label C(app.kubernetes.io/managed-by=gpupool.vcf), the collection's
    record of what it owns; one that existed without it gets it only with O(adopt). An object
    whose immutable field differs (a PriorityClass C(value) or C(preemptionPolicy), a ResourceQuota's
    C(scopeSelector), a LocalQueue's C(clusterQueue)) is deleted and created again (action C(replace)) only when it
    carries that label; one created by others is refused, and nothing of the run is changed.
  - Updates are merge patches that carry the resourceVersion they were planned from (a concurrent change makes
    the server refuse them; a rerun plans again); deletes carry the object's uid and resourceVersion.
  - With O(node_pools), the labels and taints of each pool's nodes (kind C(Node), the nodes whose O(pool_label)
    label names the pool, read in one list) - each label and each taint (known by its key and effect) to add or
    correct is one change, and each node that changes gets one patch with its labels and its whole taint list (a
    patch replaces the list, so the others' taints are kept in it). Others' labels and taints stay; nodes are never
    created, deleted or labelled as the collection's, and a pool without nodes writes nothing.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes
options:
  priority_classes:
    description: The PriorityClasses.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: PriorityClass name.
        type: str
        required: true
      value:
        description: Its priority (immutable).
        type: int
        required: true
      preemption_policy:
        description: V(Never) or V(PreemptLowerPriority) (immutable).
        type: str
        default: Never
        choices: [Never, PreemptLowerPriority]
      description:
        description: Its description (default its name).
        type: str
  tenants:
    description:
      - The tenants, as C(gpu_scheduling_policy_tenants) gives them - C(namespace), optionally C(labels),
        C(training), and C(quotas) (each C(name), C(hard), optionally C(priority_class)), or without C(quotas)
        C(gpus) and C(mig) (counts per MIG resource) for one quota named O(quota_name).
    type: list
    elements: dict
    default: []
  quota_name:
    description: The ResourceQuota of a tenant without C(quotas).
    type: str
    default: gpu-quota
  gpu_resource:
    description: The GPU resource of that quota (C(requests.<resource>)).
    type: str
    default: nvidia.com/gpu
  mig_resources:
    description: The MIG resources of that quota (each C(requests.<resource>), 0 unless the tenant's C(mig) gives one).
    type: list
    elements: str
    default: []
  kueue:
    description:
      - The Kueue inputs of the C(gpu_scheduling_policy) role by their variable names (C(gpu_scheduling_policy_kueue),
        C(gpu_scheduling_policy_kueue_api_version), C(gpu_scheduling_policy_kueue_queues),
        C(gpu_scheduling_policy_kueue_cohort), C(gpu_scheduling_policy_kueue_preemption),
        C(gpu_scheduling_policy_tenants), the C(gpu_scheduling_policy_training_*) inputs); the role's defaults
        stand for those not given. A ResourceFlavor and a ClusterQueue per training queue and its LocalQueue in
        each of the queue's tenants are built from them, as the audit builds them.
      - With C(gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout), Kueue's configuration ConfigMap
        (C(gpu_scheduling_policy_kueue_namespace)/C(gpu_scheduling_policy_kueue_config_map), key
        C(gpu_scheduling_policy_kueue_config_key); kind C(ConfigMap)) gets waitForPodsReady (that timeout,
        blockAdmission), every other setting kept. Kueue's installation makes it - a missing one fails the run;
        Kueue's controller reads it only when it starts (the role restarts it).
      - Empty (the default) - no Kueue object is read or written.
    type: dict
    default: {}
  gpu_operator:
    description:
      - The inputs of the C(gpu_operator) role by their variable names (C(gpu_operator_namespace),
        C(gpu_operator_time_slicing), C(gpu_operator_device_plugin_config_name), C(gpu_operator_dcgm_metrics),
        C(gpu_operator_driver_version), C(gpu_operator_licensing_secret_name), ...); the role's defaults stand for
        those not given. The device plugin ConfigMap (time-sliced pools only), the DCGM metrics ConfigMap (metrics
        given only) and the ClusterPolicy's fields are built from them, as the audit builds them, and the release's
        Namespace (kind C(Namespace); created with the collection's label, a live one's labels are left alone).
      - Empty (the default) - no GPU Operator object is read or written.
    type: dict
    default: {}
  licensing:
    description:
      - The Kubernetes objects of the C(nls_licensing) role - the GPU Operator's Namespace (created with the
        collection's label; a live one's labels are left alone), the licensing Secret
        C(<secret_prefix>-<content hash>) (a new token is a new Secret) and, with O(licensing.cluster_policy), the
        ClusterPolicy's C(driver.licensingConfig) pointing at it.
      - The Secret's values never appear in RV(changes), RV(objects) or the diff; a change of one shows a short
        hash of it (C((secret data, sha256 <12 hex digits>))).
    type: dict
    suboptions:
      namespace:
        description: The GPU Operator's namespace.
        type: str
        required: true
      secret_prefix:
        description: The first part of the Secret's name; the second is the first 10 hex digits of the sha256 of O(licensing.data).
        type: str
        default: licensing-config
      data:
        description: The Secret's data, base64 values by key (C(gridd.conf), C(client_configuration_token.tok)).
        type: dict
        required: true
      cluster_policy:
        description: Point the ClusterPolicy's C(driver.licensingConfig) at the Secret (C(secretName), C(nlsEnabled)).
        type: bool
        default: false
  culling:
    description:
      - The notebook culling inputs of the C(gpu_scheduling_policy) role by their variable names
        (C(gpu_scheduling_policy_culling), C(gpu_scheduling_policy_culling_idle_minutes),
        C(gpu_scheduling_policy_culling_check_minutes), C(gpu_scheduling_policy_culling_namespace), C(_image),
        C(_selector), C(_port), C(_pools), C(gpu_scheduling_policy_pool_label), the
        C(gpu_scheduling_policy_kubeflow_controller_*) inputs); the role's defaults stand for those not given.
      - C(gpu_scheduling_policy_culling) V(cronjob) - the culling Namespace (created with the collection's label; a
        live one's labels are left alone), the culler's ServiceAccount, ClusterRole and ClusterRoleBinding, the
        ConfigMap with O(culler_script) and the CronJob (kinds C(Namespace), C(ServiceAccount), C(ClusterRole),
        C(ClusterRoleBinding), C(ConfigMap), C(CronJob)); objects of a namespace this run creates are planned as
        creates, check mode included.
      - V(kubeflow) - the env variables C(ENABLE_CULLING), C(CULL_IDLE_TIME) and C(IDLENESS_CHECK_PERIOD) of the
        container C(gpu_scheduling_policy_kubeflow_controller_container) of Kubeflow's notebook-controller Deployment
        (kind C(Deployment)); the Deployment or the container missing fails the run before any change. V(none) -
        nothing. V(auto) is the role's - it resolves it by Kubeflow's Notebook CRD before it calls this module.
      - Empty (the default) - no culling object is read or written.
    type: dict
    default: {}
  culler_script:
    description: The culler's source (the role's C(notebook_culler.py)), the ConfigMap the CronJob runs; required with V(cronjob).
    type: str
  node_pools:
    description:
      - The labels and taints per pool, as C(gpu_scheduling_policy_node_pools) gives them (nodes that are not VKS
        node pools); a pool's nodes are those whose O(pool_label) label is its O(node_pools[].pool).
      - Empty (the default) - no node is read or written.
    type: list
    elements: dict
    default: []
    suboptions:
      pool:
        description: The value of the pool label.
        type: str
        required: true
      labels:
        description: Labels to set on each of the pool's nodes (text values; others' labels stay).
        type: dict
        default: {}
      taints:
        description:
          - Taints to put on each of the pool's nodes; others' taints stay, and a live taint of the same key and
            effect is corrected to the value given.
        type: list
        elements: dict
        default: []
        suboptions:
          key:
            description: The taint's key.
            type: str
            required: true
          value:
            description: Its value; without one, a live taint of the same key and effect keeps its own.
            type: str
          effect:
            description: Its effect.
            type: str
            required: true
            choices: [NoSchedule, PreferNoSchedule, NoExecute]
  pool_label:
    description: The node label that names a node's pool.
    type: str
    default: gpupool.vcf/pool
  adopt:
    description:
      - Record the objects in scope that exist without the label C(app.kubernetes.io/managed-by=gpupool.vcf) (made
        by hand or before the collection) as the collection's - each gets the label, a change the plan shows
        (field C(metadata.labels.app.kubernetes.io/managed-by)), after the changes its plan makes.
      - Without it nothing changes owner. Adoption does not allow a C(replace) of an object made by hand. The
        ClusterPolicy is never adopted (it is the chart's), nor Kubeflow's Deployment.
    type: bool
    default: false
  kinds:
    description:
      - The kinds this run reads and converges (the others of the inputs are left alone), so that a play can
        write them in separate steps. A Kueue kind is read only when the inputs want an object of it, C(Node) only
        when O(node_pools) gives a pool.
    type: list
    elements: str
    choices: [PriorityClass, Namespace, ResourceQuota, ResourceFlavor, ClusterQueue, LocalQueue, ConfigMap,
              ClusterPolicy, Secret, ServiceAccount, ClusterRole, ClusterRoleBinding, CronJob, Deployment, Node]
    default: [PriorityClass, Namespace, ResourceQuota, ResourceFlavor, ClusterQueue, LocalQueue, ConfigMap,
              ClusterPolicy, Secret, ServiceAccount, ClusterRole, ClusterRoleBinding, CronJob, Deployment, Node]
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: PriorityClasses, tenant namespaces and their GPU quotas
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    priority_classes:
      - {name: gpu-inference, value: 1000000, preemption_policy: PreemptLowerPriority}
      - {name: gpu-training, value: 100000}
    tenants:
      - namespace: team-a
        training: true
        quotas:
          - {name: gpupool-gpus, hard: {requests.nvidia.com/gpu: 4}}
          - {name: gpupool-gpu-training, hard: {requests.nvidia.com/gpu: 4}, priority_class: gpu-training}
  register: objects

- name: Kueue's training queue over a MIG pool, a LocalQueue in each training tenant
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [ResourceFlavor, ClusterQueue, LocalQueue]
    kueue:
      gpu_scheduling_policy_tenants:
        - {namespace: team-a, training: true}
      gpu_scheduling_policy_training_node_labels: {gpupool.vcf/pool: gpu-a100-mig}
      gpu_scheduling_policy_training_resources: {nvidia.com/mig-1g.10gb: 14}

- name: The GPU Operator's time-slicing and DCGM metrics ConfigMaps
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [ConfigMap]
    gpu_operator:
      gpu_operator_namespace: gpu-operator
      gpu_operator_time_slicing: {notebook: {replicas: 4}}

- name: The ClusterPolicy fields the gpu_operator role sets, patched back where they drifted
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [ClusterPolicy]
    gpu_operator:
      gpu_operator_driver_version: 550.127.05
      gpu_operator_mig_strategy: single

- name: The licensing Secret from a DLS client configuration token, and the ClusterPolicy pointed at it
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [Namespace, Secret, ClusterPolicy]
    licensing:
      namespace: gpu-operator
      data:
        gridd.conf: "{{ lookup('ansible.builtin.template', 'gridd.conf.j2') | b64encode }}"
        client_configuration_token.tok: "{{ lookup('ansible.builtin.file', '/etc/gpupool/client.tok') | b64encode }}"
      cluster_policy: true
  no_log: true
  register: licensing

- name: The notebook culling CronJob, its script and its permissions
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap, CronJob]
    culling:
      gpu_scheduling_policy_culling: cronjob
      gpu_scheduling_policy_culling_idle_minutes: 120
    culler_script: "{{ lookup('ansible.builtin.file', 'notebook_culler.py') }}"

- name: Culling switched on in Kubeflow's notebook controller
  gpupool.vcf.guest_objects:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    kinds: [Deployment]
    culling:
      gpu_scheduling_policy_culling: kubeflow
      gpu_scheduling_policy_culling_idle_minutes: 120
"""

RETURN = r"""
changes:
  description:
    - The plan, one entry per field, with C(object) (C(priority_class <name>), C(namespace <name>),
      C(resource_quota <namespace>/<name>), C(resource_flavor <name>), C(cluster_queue <name>),
      C(local_queue <namespace>/<name>), C(config_map <namespace>/<name>), C(cluster_policy cluster-policy),
      C(service_account <namespace>/<name>), C(cluster_role <name>), C(cluster_role_binding <name>),
      C(cronjob <namespace>/<name>), C(deployment <namespace>/<name>), C(node <name>)), C(field) (C(spec.<path>) of a
      ClusterPolicy field, C(data.<key>) of a ConfigMap key, C(spec.template.spec.containers[<name>].env.<variable>) of
      the Kubeflow controller's, C(metadata.labels.<key>) or C(spec.taints.<key>:<effect>) of a node, whose changes
      also carry its C(pool)), C(before), C(after) and C(action) (C(create), C(update), C(replace)). Check mode returns
      the same.
  returned: always
  type: list
  elements: dict
objects:
  description: The objects that change, in the order they are written (as C(object) of RV(changes)).
  returned: always
  type: list
  elements: str
adopted:
  description: The objects this run records as the collection's (O(adopt)), as C(object) of RV(changes).
  returned: always
  type: list
  elements: str
licensing_secret_name:
  description: The licensing Secret's name (O(licensing); check mode gives it too).
  returned: when O(licensing) is given
  type: str
  sample: licensing-config-3f2a9c01be
names:
  description: The same objects by name (C(<namespace>/<name>) for a ResourceQuota or LocalQueue).
  returned: always
  type: list
  elements: str
  sample: [gpu-training, team-a, team-a/gpupool-gpus]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import GuestObjectsApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import auth_argument_spec, request_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_node_plan as gnp
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan as gp
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_inputs import guest_objects_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, Failure, Plan, Resource

from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    priority_classes=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True),
        value=dict(type="int", required=True),
        preemption_policy=dict(type="str", default="Never", choices=["Never", "PreemptLowerPriority"]),
        description=dict(type="str"))),
    tenants=dict(type="list", elements="dict", default=[]),
    quota_name=dict(type="str", default="gpu-quota"),
    gpu_resource=dict(type="str", default="nvidia.com/gpu"),
    mig_resources=dict(type="list", elements="str", default=[]),
    kueue=dict(type="dict", default={}),
    gpu_operator=dict(type="dict", default={}),
    licensing=dict(type="dict", options=dict(
        namespace=dict(type="str", required=True),
        secret_prefix=dict(type="str", default="licensing-config", no_log=False),
        data=dict(type="dict", required=True, no_log=True),
        cluster_policy=dict(type="bool", default=False))),
    culling=dict(type="dict", default={}),
    culler_script=dict(type="str"),
    adopt=dict(type="bool", default=False),
    node_pools=dict(type="list", elements="dict", default=[], options=dict(
        pool=dict(type="str", required=True),
        labels=dict(type="dict", default={}),
        taints=dict(type="list", elements="dict", default=[], no_log=False, options=dict(
            key=dict(type="str", required=True, no_log=False),
            value=dict(type="str"),
            effect=dict(type="str", required=True, choices=list(gnp.TAINT_EFFECTS)))))),
    pool_label=dict(type="str", default=gnp.POOL_LABEL),
    kinds=dict(type="list", elements="str", choices=list(gp.KINDS + gp.CULLING_KINDS) + ["Node"],
               default=list(gp.KINDS + gp.CULLING_KINDS) + ["Node"]),
)
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


class GuestObjects(Resource):
    refusals = (ValueError, KeyError, TypeError)

    def __init__(self, module, api_class=None):
        super(GuestObjects, self).__init__("the guest objects")
        self.p = module.params
        self.api_class = api_class or GuestObjectsApi
        self.api = None

    def wanted(self):
        for index, tenant in enumerate(self.p["tenants"]):
            if not isinstance(tenant, dict) or not tenant.get("namespace"):
                raise ValueError("tenants[%d] must be a mapping with a namespace, not %r" % (index, tenant))
        for option, prefix in (("kueue", "gpu_scheduling_policy_"), ("gpu_operator", "gpu_operator_"),
                               ("culling", "gpu_scheduling_policy_")):
            unknown = sorted(k for k in self.p[option] if not str(k).startswith(prefix))
            if unknown:
                raise ValueError("%s takes the %s role's inputs by their names, not %s" % (
                    option, prefix[:-1], ", ".join(unknown)))
        wanted = gp.wanted_objects(self.p["priority_classes"], self.p["tenants"], self.p["quota_name"],
                                   self.p["gpu_resource"], self.p["mig_resources"], self.p["kueue"])
        if self.p["kueue"]:
            wanted += gp.kueue_config_map(self.p["kueue"])
        if self.p["gpu_operator"]:
            wanted += gp.operator_objects(self.p["gpu_operator"], kinds=("Namespace",) + gp.OPERATOR_KINDS)
        licensing = self.p["licensing"]
        if licensing:
            if licensing["cluster_policy"] and self.p["gpu_operator"] and "ClusterPolicy" in self.p["kinds"]:
                raise ValueError("the ClusterPolicy's fields come from gpu_operator or from licensing.cluster_policy, "
                                 "not both in one run")
            wanted += gp.licensing_objects(licensing["namespace"], licensing["secret_prefix"], licensing["data"],
                                           licensing["cluster_policy"])
        if self.p["culling"]:
            culling = gp.culling_objects(self.p["culling"], self.p["culler_script"])
            if self.p["culler_script"] is None and any(obj["kind"] == "CronJob" for obj in culling):
                raise ValueError("culling with gpu_scheduling_policy_culling cronjob needs culler_script, the culler's "
                                 "source (the gpu_scheduling_policy role's notebook_culler.py)")
            wanted += culling
        out = []
        for obj in wanted:  # a Namespace two inputs want alike (the operator's, the licensing's) is written once
            if obj["kind"] in self.p["kinds"] and obj not in out:
                out.append(obj)
        return out

    def node_pools(self):
        """The pools whose nodes this run keeps ([] without the Node kind); ValueError for bad ones."""
        if "Node" not in self.p["kinds"]:
            return []
        gnp.check_pools(self.p["node_pools"], self.p["pool_label"])
        return self.p["node_pools"]

    def read(self):
        wanted = self.wanted()
        pools = self.node_pools()
        # a custom kind (Kueue's, the ClusterPolicy) and the culler's (through the dynamic client too) at the API
        # version of its manifests, and ConfigMaps (in the namespaces of those wanted), read only when an object of
        # the kind is wanted
        custom = gp.KUEUE_KINDS + ("ClusterPolicy",) + gp.CULLING_KINDS
        versions = dict((obj["kind"], obj["apiVersion"]) for obj in wanted if obj["kind"] in custom)
        self.api = self.api_class(self.p, versions=versions)
        kinds = [k for k in gp.KINDS + gp.CULLING_KINDS if k in self.p["kinds"] and (k not in custom or k in versions)]
        namespaces = sorted(set(obj["metadata"]["namespace"] for obj in wanted if obj["kind"] == "ConfigMap"))
        names = sorted(set(gp.key(obj)[1:] for obj in wanted if obj["kind"] == "Secret"))
        given = {}
        if namespaces:
            given["namespaces"] = namespaces
        if names:
            given["names"] = names
        if pools:  # the pools' nodes, one list by label selector
            given["node_selector"] = gnp.selector(pools, self.p["pool_label"])
        return self.api.read([k for k in kinds if (k != "ConfigMap" or namespaces) and (k != "Secret" or names)] + (
            ["Node"] if pools else []), **given)

    def plan(self, live):
        changes, before, after = [], {}, {}
        for obj in self.wanted():
            have = live.get(gp.key(obj))
            mine = gp.plan(have, obj, adopt=self.p["adopt"])
            if mine:
                name = gp.object_name(obj)
                before[name] = None if have is None else dict((c.field, c.before) for c in mine)
                after[name] = mine[0].after if have is None else dict((c.field, c.after) for c in mine)
            changes += mine
        nodes = gnp.live_nodes(live)
        mine = gnp.plan_pools(nodes, self.node_pools(), self.p["pool_label"])
        for side, diff in zip((before, after), gnp.diffs(nodes, mine)):
            side.update(diff)
        return Plan(changes + mine, before=before, after=after, live=live)

    def apply(self, plan):
        live = plan.facts["live"]
        for obj in self.wanted():
            mine = [c for c in plan if c.object == gp.object_name(obj)]
            if not mine:
                continue
            kind, ns, name = gp.key(obj)
            have = live.get(gp.key(obj))
            with self.doing("write", mine[0].object):
                if mine[0].action == CREATE:
                    self.api.create(gp.created(obj))
                elif any(c.action == gp.REPLACE for c in mine):
                    meta = have["metadata"]
                    self.api.delete(kind, name, ns or None, meta.get("uid"), meta.get("resourceVersion"))
                    self.api.create(gp.created(obj))
                else:
                    self.api.patch(kind, name, ns or None, have["metadata"].get("resourceVersion"),
                                   gp.patch_body(obj, mine, have))
            self.partial.setdefault("written", []).append(mine[0].object)
        for obj, name, version, body in gnp.patches(gnp.live_nodes(live), plan.changes):
            with self.doing("write", obj):
                self.api.patch("Node", name, None, version, body)
            self.partial.setdefault("written", []).append(obj)

    def result(self, live, plan):
        for change in plan:
            if change.action == gp.MISSING:
                maker = ("Kueue's installation makes it (its release manifests or chart; or point the kueue inputs "
                         "gpu_scheduling_policy_kueue_namespace, _config_map, _config_key at it)"
                         if change.object.startswith("config_map ") else
                         "Kubeflow's notebook controller makes it (install Kubeflow, point the "
                         "gpu_scheduling_policy_kubeflow_controller_* inputs at its Deployment and container, or set "
                         "gpu_scheduling_policy_culling to cronjob)" if change.object.startswith("deployment ") else
                         "The GPU Operator chart makes it (gpu_operator role: install the release first, then rerun)")
                raise Failure("Unable to set %s of %s: it does not exist. %s. Nothing was changed." % (
                    change.field, change.object, maker), changes=plan.to_list())
            if change.action == gp.REPLACE and not gp.owned(live.get(self._key(change.object))):
                raise Failure("Unable to replace %s: %s is immutable and the object was not created by this collection "
                              "(no label app.kubernetes.io/managed-by=gpupool.vcf); delete it by hand, or set the "
                              "input back to %r. Nothing was changed." % (change.object, change.field, change.before),
                              changes=plan.to_list())
        objects, names = [], []
        for obj in self.wanted():
            if any(c.object == gp.object_name(obj) for c in plan):
                objects.append(gp.object_name(obj))
                names.append(gp.object_name(obj).split(" ", 1)[1])
        for obj, name, _version, _body in gnp.patches(gnp.live_nodes(live), plan.changes):
            objects.append(obj)
            names.append(name)
        adopted = [name for name in objects if gp.adopting([c for c in plan if c.object == name])]
        out = dict(changes=plan.to_list(), objects=objects, names=names, adopted=adopted)
        if self.p["licensing"]:
            licensing = self.p["licensing"]
            out["licensing_secret_name"] = "%s-%s" % (licensing["secret_prefix"], gp.secret_hash(licensing["data"]))
        return out

    def _key(self, object_name):
        for obj in self.wanted():
            if gp.object_name(obj) == object_name:
                return gp.key(obj)
        return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "guest_objects", guest_objects_errors)
    if K8S_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
    Runner(module, GuestObjects(module)).run()


if __name__ == "__main__":
    main()
