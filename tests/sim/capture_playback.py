"""Playback of a capture (docs/capture.md): the platform a capture describes, rebuilt on the simulators, so what a
user sends becomes a test. Pure translation here (no I/O besides :func:`load`); tests/sim/capture_loader.py sends
what it makes to a running vSphere simulator and Kubernetes rig.

- The vSphere fleet (:func:`fleet_from_capture`), the one fleet.go loads from examples/fleet.yml
  (tests/sim/vsphere/README.md has its schema): the clusters (Supervisor where the capture names one, vLCM where
  the driver came from the cluster's image), each host with its GPUs (model and count), driver version, graphics
  default and policy, nvidia module options, the GPUs in MIG mode, the vGPU mode, maintenance mode, SSH service and
  lockdown mode, and the vGPU VMs with their profiles and power state.
- What a user makes after the start (:func:`vm_class_bodies`, :func:`namespace_bodies`, :func:`drs_overrides`):
  the VM classes and Supervisor namespaces as the REST API's create specs, the namespaces' Supervisor cluster and
  storage policies mapped by name onto the new simulator's ids; the per-VM DRS overrides by VM name.
- The Kubernetes part (:func:`supervisor_objects`, :func:`guest_objects`): on the Supervisor, each VKS cluster's
  namespace and Cluster with one machineDeployment per node pool, written through the ClusterClass's variables as
  vks_node_pool writes them (_cluster_class.apply_pool, the inverse of the reader's read_pool); in the guest, the
  objects the capture holds whole (``guest.objects``: namespaces with their labels, PriorityClasses,
  ResourceQuotas, Kueue's ResourceFlavors, ClusterQueues and LocalQueues, ownership labels included), the
  ClusterPolicy (where its CRD is installed) and the culling CronJob; a capture without ``guest.objects`` gets
  the PriorityClasses, quotas and ClusterQueues made from what discovery read.

:func:`unplayed` names what a capture holds that playback leaves out, so a test can say so instead of passing on a
narrower platform.
"""
import copy
import json
import os

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _discover, _esxi, _ownership
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace as nsu
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import apply_pool
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._k8s_objects import CLUSTER_POLICY, culling_cronjob

SUPPORTED_FORMATS = (1,)


def load(path: str | os.PathLike) -> dict:
    """The capture at ``path``; ValueError for a format this loader does not know."""
    with open(path, encoding="utf-8") as fh:
        record = json.load(fh)
    if record.get("format_version") not in SUPPORTED_FORMATS:
        raise ValueError("capture %s has format_version %r; this loader reads %s"
                         % (path, record.get("format_version"), list(SUPPORTED_FORMATS)))
    return record


def _host(rec: dict) -> dict:
    host = {"name": rec["name"]}
    gpus = rec.get("gpus") or []
    if gpus:
        host["gpu"] = {"model": gpus[0]["model"], "count": len(gpus)}
    driver = rec.get("driver") or {}
    if driver.get("full_version") and driver.get("source") != "image":
        host["driver_version"] = driver["full_version"]
    graphics = rec.get("graphics") or {}
    if graphics.get("default_type"):
        default = graphics["default_type"]
        host["graphics"] = {"default": _esxi.GRAPHICS_API_BY_WORD.get(default, default),
                            "policy": graphics.get("assignment_policy")}
    if isinstance(rec.get("nvidia_module_options"), str) and rec["nvidia_module_options"]:
        host["nvidia_options"] = rec["nvidia_module_options"]
    mig = [g["index"] for g in gpus if g.get("mig") == "enabled"]
    if mig:
        host["mig"] = mig
    if any(g.get("configured_vgpu_mode") == "mixedSize" for g in gpus):
        host["vgpu_mode"] = "mixed_size"
    if rec.get("maintenance_mode"):
        host["maintenance"] = True
    if rec.get("ssh_service") == "running":
        host["ssh"] = "running"
    if rec.get("lockdown_mode") in ("normal", "strict"):
        host["lockdown"] = rec["lockdown_mode"]
    return host


def fleet_from_capture(record: dict, datacenter: str = "DC0") -> dict:
    """The simulator fleet (a dict for vsphere_sim.start) of a capture's vSphere section."""
    vs = record["vsphere"]
    supervisors = set((vs.get("cluster_names") or {}).values())
    clusters, order, vms = {}, [], []
    for rec in vs["hosts"]:
        name = rec.get("cluster")
        if name not in clusters:
            order.append(name)
            clusters[name] = {"name": name, "supervisor": name in supervisors, "hosts": []}
        if (rec.get("driver") or {}).get("source") == "image":
            clusters[name]["lifecycle"] = "vlcm"
        clusters[name]["hosts"].append(_host(rec))
        # the VMs in turns over the GPUs that hold them (the simulator places each VM of the fleet, in order,
        # on the least loaded GPU that fits): the first VM of each GPU, then the second...; the others after
        rank = {}
        for gpu in rec.get("gpus") or []:
            for position, held in enumerate(gpu.get("vms") or []):
                key = (position, gpu["index"])
                rank[held.get("name")] = min(rank.get(held.get("name"), key), key)
        last = (len(rank) + 1, 0)
        for vm in sorted(rec.get("vgpu_vms") or [], key=lambda v: (rank.get(v["name"], last), v["name"])):
            entry = {"name": vm["name"], "host": rec["name"], "vgpu": list(vm.get("vgpu_profiles") or [])}
            if vm.get("power_state") != "poweredOn":
                entry["power"] = "off"
            vms.append(entry)
    return {"datacenter": datacenter, "clusters": [clusters[n] for n in order], "vms": vms}


# --- vSphere objects a user makes after the start (REST create specs, DRS overrides) ---------------------------

def vm_class_bodies(record: dict, form: str = "config_spec") -> list[dict]:
    """The create specs of the capture's VM classes (the class id as ``id``), in the REST form ``form``: the
    config_spec form by default, the one that carries a class's profiling setting (the devices form has no place
    for it and refuses a class with profiling on)."""
    classes = record["vsphere"].get("vm_classes") or {}
    return [vmc.request_body(cid, classes[cid], form, create=True) for cid in sorted(classes)]


def namespace_bodies(record: dict, cluster_ids: dict, policy_ids: dict) -> list[dict]:
    """The create specs of the capture's Supervisor namespaces. ``cluster_ids``: {Supervisor cluster name: id} and
    ``policy_ids``: {storage policy name: id} of the simulator played onto (ids are its own, names travel)."""
    vs = record["vsphere"]
    cluster_names = vs.get("cluster_names") or {}
    policy_names = vs.get("storage_policies") or {}
    out = []
    for name in sorted(vs.get("namespaces") or {}):
        ns = copy.deepcopy(vs["namespaces"][name])
        cluster = cluster_names.get(ns["cluster"], ns["cluster"])
        if cluster not in cluster_ids:
            raise ValueError("namespace %s: its Supervisor cluster %s is not one of the simulator's (%s)"
                             % (name, cluster, ", ".join(sorted(cluster_ids)) or "none"))
        ns["cluster"] = cluster_ids[cluster]
        policies = {}
        for pid, limit in (ns.get("storage_policies") or {}).items():
            pname = policy_names.get(pid, pid)
            if pname not in policy_ids:
                raise ValueError("namespace %s: storage policy %s is not one of the simulator's" % (name, pname))
            policies[policy_ids[pname]] = limit
        ns["storage_policies"] = policies
        out.append(nsu.create_body(name, ns))
    return out


def vm_names(record: dict) -> dict:
    """{VM id in the capture: VM name} of the vGPU VMs the hosts hold."""
    out = {}
    for host in record["vsphere"]["hosts"]:
        for vm in host.get("vgpu_vms") or []:
            out[vm.get("moid")] = vm["name"]
        for gpu in host.get("gpus") or []:
            for vm in gpu.get("vms") or []:
                out.setdefault(vm.get("moid"), vm.get("name"))
    return out


def drs_overrides(record: dict) -> dict:
    """{cluster: {VM name: {behavior, enabled}}}: the per-VM DRS overrides, by VM name (a new simulator numbers its
    VMs anew). An override of a VM the capture does not name is left out (:func:`unplayed` says so)."""
    names = vm_names(record)
    out = {}
    for cluster, state in sorted((record["vsphere"].get("drs") or {}).items()):
        for moid, override in sorted((state.get("overrides") or {}).items()):
            if moid in names:
                out.setdefault(cluster, {})[names[moid]] = dict(override)
    return out


# --- the Kubernetes part --------------------------------------------------------------------------------------

def derived_of(record: dict) -> dict:
    """The inputs derived from the design discovered from the capture's vSphere section: the names gpu_pool_capture
    read the Kubernetes links by (the culling CronJob's place, Kueue's API version)."""
    vs = record["vsphere"]
    design, _notes = _discover.discover(vs["hosts"], vs.get("vm_classes") or {}, vs.get("namespaces") or {},
                                        vs.get("storage_policies") or {}, vs.get("drs") or {},
                                        cluster_names=vs.get("cluster_names") or {})
    return derive(design)


def supervisor_objects(record: dict, plans: dict, version: str, class_variables: dict) -> list[dict]:
    """The Supervisor's objects of the capture's ``vks`` section: each VKS cluster's namespace and its Cluster,
    a machineDeployment per node pool. ``plans``: {ClusterClass "namespace/name": (its variable_plan, its
    machineDeployment class)} of the rig; ``version``: the clusters' Kubernetes release (not recorded);
    ``class_variables``: the Cluster's required topology variables {name: value} (not recorded)."""
    out = []
    for name in sorted(record.get("vks") or {}):
        cluster = record["vks"][name]
        mds, ref = [], None
        for md_name in sorted(cluster.get("machine_deployments") or {}):
            pool = dict(cluster["machine_deployments"][md_name], name=md_name)
            cls = pool.pop("class", None)
            pool.pop("lacks", None)
            if cls not in plans:
                raise ValueError("node pool %s/%s: ClusterClass %s is not on the rig (%s)"
                                 % (name, md_name, cls, ", ".join(sorted(plans)) or "none"))
            ref = ref or cls
            plan, md_class = plans[cls]
            top = dict((v["name"], v["value"]) for v in (cluster.get("topology") or {}).get("variables") or []) \
                if (cluster.get("topology") or {}).get("variables") is not None else class_variables
            mds.append(apply_pool(None, pool, plan, md_class, top_vars=top))
        recorded = cluster.get("topology") or {}
        ref = recorded.get("cluster_class") or ref or sorted(plans)[0]
        ns, cc = ref.split("/", 1)
        variables = [dict(v) for v in recorded["variables"]] if recorded.get("variables") is not None else [
            {"name": k, "value": v} for k, v in sorted(class_variables.items())]
        out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster["namespace"]}})
        meta = {"name": name, "namespace": cluster["namespace"]}
        if cluster.get("owned"):  # the collection's record of the pools it made or adopted
            meta["annotations"] = {_ownership.NODE_POOLS_ANNOTATION: ",".join(sorted(cluster["owned"]))}
        out.append({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": meta,
                    "spec": {"topology": {"classRef": {"name": cc, "namespace": ns},
                                          "version": recorded.get("version") or version,
                                          "controlPlane": {"replicas": recorded.get("control_plane_replicas") or 1},
                                          "workers": {"machineDeployments": mds}, "variables": variables}}})
    return out


def _quota(namespace, quota):
    spec = {"hard": dict(quota.get("hard") or {})}
    if quota.get("priority_class"):
        spec["scopeSelector"] = {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": [quota["priority_class"]]}]}
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": quota["name"], "namespace": namespace},
            "spec": spec}


def _discovered_guest_objects(guest, policy, namespace):
    """PriorityClasses, quotas and ClusterQueues made from what discovery reads (no labels, no LocalQueues)."""
    out = []
    for name in sorted(guest.get("priority_classes") or {}):
        if name.startswith("system-"):
            continue  # the API server's own
        pc = guest["priority_classes"][name]
        obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
               "value": pc["value"], "preemptionPolicy": pc.get("preemptionPolicy") or "PreemptLowerPriority"}
        if pc.get("description"):
            obj["description"] = pc["description"]
        out.append(obj)
    for ns in sorted(guest.get("resource_quotas") or {}):
        namespace(ns)
        out.extend(_quota(ns, q) for q in guest["resource_quotas"][ns])
    api_version = policy["gpu_scheduling_policy_kueue_api_version"]
    for name in sorted(guest.get("kueue") or {}):
        out.append({"apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": name},
                    "spec": copy.deepcopy(guest["kueue"][name])})
    return out


def guest_objects(record: dict, cluster_policy_served: bool = True) -> list[dict]:
    """The guest cluster's objects of the capture's ``guest`` section, in an order the API accepts (namespaces
    before what lives in them). The ClusterPolicy only with ``cluster_policy_served`` (its CRD installed)."""
    guest = record.get("guest") or {}
    policy = _audit_guest.guest_inputs(derived_of(record))[1]
    out, namespaces = [], []

    def namespace(name):
        if name not in namespaces:
            namespaces.append(name)
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    if guest.get("objects") is not None:
        # whole, as the guest_objects reader read them: labels (the ownership mark) and LocalQueues included
        for obj in guest["objects"]:
            if obj["kind"] == "Namespace":
                namespaces.append(obj["metadata"]["name"])
            out.append(copy.deepcopy(obj))
    else:  # a capture from before the objects were recorded: made from what discovery reads
        out += _discovered_guest_objects(guest, policy, namespace)
    if guest.get("cluster_policy") is not None and cluster_policy_served:
        out.append({"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": CLUSTER_POLICY},
                    "spec": copy.deepcopy(guest["cluster_policy"])})
    culling = guest.get("culling") or {}
    place = culling_cronjob(policy)
    if culling.get("exists") and not culling.get("kubeflow") and place:
        namespace(place["namespace"])
        env = [{"name": k, "value": v} for k, v in sorted((culling.get("env") or {}).items())]
        out.append({"apiVersion": "batch/v1", "kind": "CronJob",
                    "metadata": {"name": place["name"], "namespace": place["namespace"]},
                    "spec": {"schedule": culling.get("schedule"), "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "culler", "image": culling.get("image"), "env": env}]}}}}}})
    return out


def unplayed(record: dict, cluster_policy_served: bool = True) -> list[str]:
    """What the capture holds that playback leaves out, one line each ([] for a capture played back in full).
    ``cluster_policy_served``: whether the rig played onto has the ClusterPolicy CRD."""
    out = []
    vs = record["vsphere"]
    for rec in vs["hosts"]:
        if len(set(g["model"] for g in rec.get("gpus") or [])) > 1:
            out.append("host %s: GPUs of more than one model" % rec["name"])
    names = vm_names(record)
    for cluster, state in sorted((vs.get("drs") or {}).items()):
        lost = sorted(m for m in (state.get("overrides") or {}) if m not in names)
        if lost:
            out.append("cluster %s: %d DRS override(s) of VMs without a vGPU (not recorded by name)"
                       % (cluster, len(lost)))
    guest = record.get("guest") or {}
    if guest.get("cluster_policy") is not None and not cluster_policy_served:
        out.append("the ClusterPolicy (the rig has no ClusterPolicy CRD: install the GPU Operator's CRDs)")
    culling = guest.get("culling") or {}
    if culling.get("kubeflow") and culling.get("exists"):
        out.append("the notebook culling of Kubeflow's notebook controller (its Deployment is not recorded whole)")
    return out
