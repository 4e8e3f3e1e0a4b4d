"""Load a capture (docs/capture.md) as the starting state of the simulators: what tests/sim/capture_playback.py
translates, sent as a user would have made it, through the platforms' own APIs and never the collection.

    import capture_loader
    with capture_loader.played(path) as (sim, rig):      # a fresh vSphere simulator and Kubernetes rig
        ...

- :func:`play_vsphere`: onto a simulator started with the capture's fleet (vsphere_sim.start_from_capture), the VM
  classes and namespaces through the REST API, the per-VM DRS overrides through pyVmomi
  (ReconfigureComputeResource_Task).
- :func:`play_kubernetes`: onto a rig (Supervisor and guest at once, as tests/lib/chain.py uses it), the VKS
  clusters with their node pools and the guest objects, by server-side apply with a field manager of its own. The
  rig's ClusterClasses say where a node pool's VM class, labels and taints go; ``crds`` (files of
  CustomResourceDefinitions, the GPU Operator's ClusterPolicy CRD) are installed first.
"""
from __future__ import annotations

import contextlib
import pathlib
import ssl
import time

import requests
import yaml

import capture_playback

FIELD_MANAGER = "capture-playback"
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NAMESPACES = "/api/vcenter/namespaces/instances"
SUPERVISORS = "/api/vcenter/namespace-management/clusters"
POLICIES = "/api/vcenter/storage/policies"
# what the capture does not record of a VKS cluster: its release and the Cluster's required variables
VKS_VERSION = "v1.35.5+vmware.1-vkr.1"
VKS_VARIABLES = {"vmClass": "best-effort-large", "storageClass": "vsan-default-storage-policy"}


class PlaybackError(RuntimeError):
    """A platform refused what the capture asks for."""


class _Rest:
    def __init__(self, sim):
        self.base, self.verify = "https://%s:%d" % (sim.host, sim.port), sim.ca_file
        answer = requests.post(self.base + "/api/session", auth=(sim.user, sim.password), verify=self.verify,
                               timeout=30)
        self.headers = {"vmware-api-session-id": answer.json()}

    def call(self, method, path, body=None):
        answer = requests.request(method, self.base + path, json=body, headers=self.headers, verify=self.verify,
                                  timeout=30)
        if answer.status_code >= 300:
            raise PlaybackError("%s %s: %s %s" % (method, path, answer.status_code, answer.text))
        return answer.json() if answer.text else None

    def close(self):
        requests.delete(self.base + "/api/session", headers=self.headers, verify=self.verify, timeout=30)


def play_vsphere(sim, record: dict) -> dict:
    """The capture's VM classes, namespaces and DRS overrides made on ``sim``; {kind: how many}."""
    rest = _Rest(sim)
    try:
        classes = capture_playback.vm_class_bodies(record)
        for body in classes:
            rest.call("POST", CLASSES, body)
        clusters = dict((c["cluster_name"], c["cluster"]) for c in rest.call("GET", SUPERVISORS) or [])
        policies = dict((p["name"], p["policy"]) for p in rest.call("GET", POLICIES) or [])
        namespaces = capture_playback.namespace_bodies(record, clusters, policies)
        for body in namespaces:
            rest.call("POST", NAMESPACES, body)
    finally:
        rest.close()
    overrides = capture_playback.drs_overrides(record)
    if overrides:
        _drs(sim, overrides)
    return dict(vm_classes=len(classes), namespaces=len(namespaces),
                drs_overrides=sum(len(v) for v in overrides.values()))


def _drs(sim, overrides):
    from pyVim import connect
    from pyVmomi import vim
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                              sslContext=ssl.create_default_context(cafile=sim.ca_file))
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
        clusters = dict((c.name, c) for c in view.view)
        view.Destroy()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vms = dict((v.name, v) for v in view.view)
        view.Destroy()
        for cluster, by_vm in sorted(overrides.items()):
            specs = [vim.cluster.DrsVmConfigSpec(operation="add", info=vim.cluster.DrsVmConfigInfo(
                key=vms[name], behavior=o.get("behavior"), enabled=o.get("enabled")))
                for name, o in sorted(by_vm.items())]
            task = clusters[cluster].ReconfigureComputeResource_Task(
                spec=vim.cluster.ConfigSpecEx(drsVmConfigSpec=specs), modify=True)
            end = time.monotonic() + 30
            while task.info.state in ("queued", "running") and time.monotonic() < end:
                time.sleep(0.05)
            if task.info.state != "success":
                raise PlaybackError("DRS overrides of cluster %s: %s" % (cluster, task.info.error or task.info.state))
    finally:
        connect.Disconnect(si)


def _crds(api, files):
    from kubernetes import client
    ext = client.ApiextensionsV1Api(api)
    names = []
    for path in files:
        for doc in yaml.safe_load_all(pathlib.Path(path).read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                _apply(api, [doc])
                names.append(doc["metadata"]["name"])
    end = time.monotonic() + 60
    for name in names:
        while not any(c.type == "Established" and c.status == "True"
                      for c in ext.read_custom_resource_definition(name).status.conditions or []):
            if time.monotonic() > end:
                raise PlaybackError("CRD %s not established after 60 s" % name)
            time.sleep(0.1)


def _apply(api, objs):
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(api)
    for obj in objs:
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        res.server_side_apply(body=obj, name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"),
                              field_manager=FIELD_MANAGER, force_conflicts=True)


def cluster_policy_served(api) -> bool:
    """Whether the cluster serves the GPU Operator's ClusterPolicy (its CRD installed)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    try:
        client.ApiextensionsV1Api(api).read_custom_resource_definition("clusterpolicies.nvidia.com")
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def class_plans(api) -> dict:
    """{ClusterClass "namespace/name": (its variable_plan, its machineDeployment class)} of the Supervisor."""
    from kubernetes import dynamic

    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import class_name, variable_plan
    classes = dynamic.DynamicClient(api).resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="ClusterClass")
    out = {}
    for cc in classes.get().to_dict().get("items") or []:
        mds = ((cc.get("spec") or {}).get("workers") or {}).get("machineDeployments") or []
        out[class_name(cc)] = (variable_plan(cc), mds[0]["class"] if len(mds) == 1 else None)
    return out


def play_kubernetes(api, record: dict, crds=(), version: str = VKS_VERSION, variables: dict | None = None) -> dict:
    """The capture's VKS clusters and guest objects made on the cluster of ``api`` (the rig as Supervisor and
    guest); ``crds``: files of CRDs installed first. {kind: how many}."""
    if crds:
        _crds(api, crds)
    objs = []
    if record.get("vks"):
        objs += capture_playback.supervisor_objects(record, class_plans(api), version, dict(variables or VKS_VARIABLES))
    if record.get("guest"):
        objs += capture_playback.guest_objects(record, cluster_policy_served(api))
    _apply(api, objs)
    counts = {}
    for obj in objs:
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    return counts


@contextlib.contextmanager
def played(capture, crds=(), nodes_file=None, **sim_args):
    """A fresh vSphere simulator and Kubernetes rig in the state of the capture at ``capture`` (a path):
    yields (simulator, rig); both stopped after."""
    import k8s_rig
    import vsphere_sim
    record = capture_playback.load(capture)
    sim = vsphere_sim.start(capture_playback.fleet_from_capture(record), **sim_args)
    try:
        play_vsphere(sim, record)
        rig = None
        if record.get("vks") or record.get("guest"):
            rig = k8s_rig.start(nodes_file=nodes_file)
        try:
            if rig is not None:
                play_kubernetes(rig.api_client(), record, crds=crds)
            yield sim, rig
        finally:
            if rig is not None:
                rig.stop()
    finally:
        sim.stop()
