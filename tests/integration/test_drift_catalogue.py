"""The drift catalogue: drifts injected across the four links of a pool that site.yml converged
(vSphere simulator, the Kubernetes rig as Supervisor and guest, the DLS double).

For each drift: the audit names it with its rule and object; ``site.yml --check`` predicts a
change for that object (a changed task whose result names it, and no changed task that no drift
explains); after ``site.yml`` the audit is clean and a rerun changes nothing. On the clean pool
``--check`` predicts no change. The drifts are injected together (each on its own object, or its
own field of one), then one audit, one check, one converge, one audit and one rerun judge them all.
The simulator serves the GPU hosts' SSH (VSPHERE_SSH) and site.yml gets its key: MIG mode is set with
nvidia-smi over SSH, so a GPU's MIG mode off the design's geometry is a drift site.yml repairs.
The design is the example with the vGPU mode of gpu-l40s given (same size, as the hosts start), so a GPU
switched to mixed size is a drift too. Every L40S host also runs VMs outside Kubernetes, which a roll does
not power off unless told to, so the drifted GPU is one no VM sits on: it is changed in place (a GPU under
a powered-on VM goes through the drain window: tests/integration/test_esxi_gpu_host_role.py).
"""
import json
import pathlib
import re
import ssl
import sys
import time

import pytest
import yaml

from tests.lib import chain
from tests.lib.ansible_run import COLLECTIONS, run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]

SITE = ROOT / "playbooks" / "site.yml"
DESIGN = ROOT / "examples" / "design.yml"
VM_CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NAMESPACES = "/api/vcenter/namespaces/instances"
OLD_DRIVER = "550.54.10-1OEM.800.1.0.20613240"
VKS_NS, VKS_CLUSTER = "gpu-platform", "gpu-workloads"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
VKS_TASK = r"^Node pools of VKS cluster"
POLICY_TASK = r"^PriorityClasses, tenant namespaces and GPU quotas"  # the three kinds in one task
# the GPU hosts' SSH (tests/integration/conftest.py): site.yml sets MIG mode per GPU with nvidia-smi
VSPHERE_SSH = True
# a GPU of esx-h100-04 that holds no VM, MIG mode off in the design's geometry (examples/fleet.yml)
MIG_HOST, MIG_GPU = "esx-h100-04", 3
# the host one of whose GPUs is switched to mixed size: the GPU no VM sits on
VGPU_HOST = "esx-l40s-03"


def catalogue_design(folder):
    """The example design with gpu-l40s's vGPU mode given: the design file site.yml and the audit read."""
    design = yaml.safe_load(DESIGN.read_text())
    [c for c in design["clusters"] if c["name"] == "gpu-l40s"][0].setdefault("graphics", {})["vgpu_mode"] = "same_size"
    path = pathlib.Path(folder) / "design.yml"
    path.write_text(yaml.safe_dump(design, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def pool(vsphere, tmp_path_factory):
    """The example design converged by site.yml: (run site.yml, run the audit, the rig, the simulator)."""
    tmp = tmp_path_factory.mktemp("catalogue")
    design = catalogue_design(tmp)
    with chain.platform(vsphere.env, tmp, ssh=vsphere) as (rig, _dls, env, extra):
        extra = dict(extra, gpupool_design_file=str(design))

        def site(check=False):
            run = run_playbook(SITE, env=env, check=check, diff=check, extra_vars=extra)
            assert run.rc == 0 and run.data is not None, run.stdout[-4000:] + run.stderr[-3000:]
            return run

        def audit():
            res, _run = run_module("gpupool.vcf.gpu_pool_audit", {
                "design_file": str(design), "kubeconfig": str(rig.kubeconfig),
                "supervisor_kubeconfig": str(rig.kubeconfig)}, env=env)
            assert not res.get("failed"), res.get("msg")
            assert res["audited"] == ["esxi", "vsphere", "vks", "guest"]
            return res

        start = time.monotonic()
        site()
        print("\nfirst converge %.0f s" % (time.monotonic() - start))
        yield type("Pool", (), dict(site=staticmethod(site), audit=staticmethod(audit), rig=rig, sim=vsphere))


# --- what a run changed ---------------------------------------------------------------------------


def changed_entries(run):
    """[(task name, play host, result text)] of every changed result; a loop gives one per changed item."""
    out = []
    for play in run.data.get("plays", []):
        for task in play.get("tasks", []):
            for host, res in task.get("hosts", {}).items():
                items = res.get("results") if isinstance(res.get("results"), list) else None
                for item in items if items is not None else [res]:
                    if isinstance(item, dict) and item.get("changed"):
                        name = task["task"]["name"].split(" : ", 1)[-1]  # without a role's "<role> : " prefix
                        out.append((name, host, json.dumps(item, sort_keys=True, default=str)))
    return out


def findings(res):
    return set((f["rule"], f["object"]) for f in res["findings"] if f["severity"] != "info")


def node_pools_changed(text):
    """The node pools whose machineDeployment differs between the diff's before and after."""
    diff = json.loads(text).get("diff") or {}
    before = dict((m["name"], m) for m in (diff.get("before") or {}).get("machineDeployments") or [])
    after = dict((m["name"], m) for m in (diff.get("after") or {}).get("machineDeployments") or [])
    return sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))


# --- injecting drift, as someone would behind the collection's back ------------------------------


class Vc:
    """pyvmomi and the Automation API on the simulator, as an administrator acts."""

    def __init__(self, sim):
        from pyVim import connect
        if str(COLLECTIONS) not in sys.path:
            sys.path.insert(0, str(COLLECTIONS))
        from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient
        ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
        self.content = self.si.RetrieveContent()
        self.rest = VsphereRestClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)

    def close(self):
        from pyVim import connect
        self.rest.close()
        connect.Disconnect(self.si)

    def named(self, kind, name):
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        try:
            return [o for o in view.view if o.name == name][0]
        finally:
            view.DestroyView()

    def graphics(self, host_name, **change):
        from pyVmomi import vim
        manager = self.named(vim.HostSystem, host_name).configManager.graphicsManager
        config = manager.graphicsConfig
        config.hostDefaultGraphicsType = change.get("default", config.hostDefaultGraphicsType)
        config.sharedPassthruAssignmentPolicy = change.get("policy", config.sharedPassthruAssignmentPolicy)
        manager.UpdateGraphicsConfig(config)

    def drs(self, cluster, remove=(), behavior=None):
        from pyVim.task import WaitForTask
        from pyVmomi import vim
        specs = [vim.cluster.DrsVmConfigSpec(operation="remove", removeKey=self.named(vim.VirtualMachine, v))
                 for v in remove]
        for vm_name, how in (behavior or {}).items():
            specs.append(vim.cluster.DrsVmConfigSpec(operation="edit", info=vim.cluster.DrsVmConfigInfo(
                key=self.named(vim.VirtualMachine, vm_name), behavior=how, enabled=True)))
        cl = self.named(vim.ClusterComputeResource, cluster)
        WaitForTask(cl.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(drsVmConfigSpec=specs), modify=True))

    def vm_class(self, name, profile=None, cpu=None):
        info = self.rest.get("%s/%s" % (VM_CLASSES, name))
        spec = info["config_spec"]
        body = {}
        if profile:
            for change in spec.get("deviceChange") or []:
                change["device"]["backing"]["vgpu"] = profile
        if cpu:
            spec["numCPUs"] = cpu
            body["cpu_count"] = cpu
        body["config_spec"] = spec
        self.rest.patch("%s/%s" % (VM_CLASSES, name), body)

    def namespace_without_class(self, namespace, vm_class):
        info = self.rest.get("%s/%s" % (NAMESPACES, namespace))
        service = dict(info.get("vm_service_spec") or {})
        service["vm_classes"] = [c for c in service.get("vm_classes") or [] if c != vm_class]
        self.rest.patch("%s/%s" % (NAMESPACES, namespace), {"vm_service_spec": service})


class Kube:
    """The rig's API, as an administrator acts on the Supervisor and the guest cluster."""

    def __init__(self, rig):
        from kubernetes import client
        api = rig.api_client()
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.sched = client.SchedulingV1Api(api)
        self.batch = client.BatchV1Api(api)

    def node_pools(self, change):
        """change(machineDeployments by name) on the VKS Cluster."""
        cluster = self.custom.get_namespaced_custom_object("cluster.x-k8s.io", "v1beta2", VKS_NS, "clusters", VKS_CLUSTER)
        mds = dict((m["name"], m) for m in cluster["spec"]["topology"]["workers"]["machineDeployments"])
        change(mds)
        self.custom.replace_namespaced_custom_object("cluster.x-k8s.io", "v1beta2", VKS_NS, "clusters", VKS_CLUSTER,
                                                     cluster)

    def gpu_quota_of_cluster_queue(self, name, quota):
        cq = self.custom.get_cluster_custom_object(KUEUE[0], KUEUE[1], "clusterqueues", name)
        for res in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
            if res["name"] == "nvidia.com/gpu":
                res["nominalQuota"] = quota
        self.custom.replace_cluster_custom_object(KUEUE[0], KUEUE[1], "clusterqueues", name, cq)

    def pool_nodes(self, pool):
        return sorted(n.metadata.name for n in self.core.list_node(label_selector="gpupool.vcf/pool=%s" % pool).items)

    def advertised(self, node):
        return int((self.core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu", "0"))

    def time_slicing_advertised(self, config_map, replicas, design_replicas):
        """The notebooks configuration set to `replicas` by hand, then the notebooks nodes' device plugin pods
        deleted (the DaemonSet makes new ones, which read the edit): waits until each node advertises 1 x replicas."""
        self.core.patch_namespaced_config_map(config_map, "gpu-operator", {"data": {"notebooks": yaml.safe_dump({
            "version": "v1", "flags": {"migStrategy": "single"}, "sharing": {"timeSlicing": {
                "renameByDefault": False, "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}})}})
        nodes = self.pool_nodes("notebooks")
        # one card per node (tests/lib/chain.py nodes_file): the design's count until the plugins restart
        assert nodes and [self.advertised(n) for n in nodes] == [design_replicas] * len(nodes), [
            self.advertised(n) for n in nodes]
        for pod in self.core.list_namespaced_pod("gpu-operator", label_selector="app=nvidia-device-plugin-daemonset").items:
            if pod.spec.node_name in nodes:
                self.core.delete_namespaced_pod(pod.metadata.name, "gpu-operator")
        end = time.monotonic() + 60
        while [self.advertised(n) for n in nodes] != [replicas] * len(nodes):
            assert time.monotonic() < end, "the notebooks nodes advertise %s" % [self.advertised(n) for n in nodes]
            time.sleep(0.5)

    def licensing_secret(self):
        cp = self.custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy")
        return cp["spec"]["driver"]["licensingConfig"]["secretName"]


def _override(md, name):
    return [o for o in md["variables"]["overrides"] if o["name"] == name][0]


def _replicas(mds):
    mds["training"]["replicas"] = 1


def _vm_class(mds):
    _override(mds["notebooks"], "vmClass")["value"] = "best-effort-large"


def _taint_removed(mds):
    node = _override(mds["inference"], "node")["value"]
    node["taints"] = [t for t in node["taints"] if t["key"] != "gpupool.vcf/pool"]


def _label_removed(mds):
    del _override(mds["notebooks"], "node")["value"]["labels"]["nvidia.com/device-plugin.config"]


# Each drift: (name, how to inject it, [(audit rule, audit object)], [(changed task, object in its result)]).
# The changed task is a regular expression on the task name; the object, text its result holds.
def empty_gpu(sim, host):
    """The first GPU of ``host`` no powered-on VM sits on."""
    free = [g for g in sorted(sim.gpus(host), key=lambda g: g["index"]) if not g["vms"]]
    assert free, "every GPU of %s carries a VM: %s" % (host, sim.gpus(host))
    return free[0]


def drifts(sim, vc, kube, derived):
    time_sliced = derived["roles"]["gpu_operator"]["gpu_operator_device_plugin_config_name"]
    return [
        # ESXi
        ("host driver downgraded", lambda: sim.set_driver("esx-h100-04", OLD_DRIVER),
         [("driver_off_design", "host esx-h100-04")],
         [(r"^NVIDIA driver on esx-h100-04$", '"plan": "upgrade"'),
          (r"^NVIDIA driver on esx-h100-04$", '"previous_version": "550.54.10"'),
          (r"^Drain the guest nodes of the node VMs of esx-h100-04$", "inference-2")]),
        ("host graphics default not Shared Direct", lambda: vc.graphics("esx-l40s-02", default="shared"),
         [("graphics_not_shared_direct", "host esx-l40s-02")], [(r".", "esx-l40s-02")]),
        ("host assignment policy changed", lambda: vc.graphics("esx-h100-03", policy="consolidation"),
         [("assignment_policy_off_design", "host esx-h100-03")], [(r".", "esx-h100-03")]),
        ("GPU put in MIG mode off the design's geometry", lambda: sim.set_gpu(MIG_HOST, MIG_GPU, mig=True),
         [("gpu_mig_off_design", "host %s" % MIG_HOST)],
         [(r"^MIG mode in maintenance mode", "enabled -> disabled on GPU %d:" % MIG_GPU)]),
        ("GPU switched to mixed size behind the collection's back", lambda: sim.set_gpu(
            VGPU_HOST, empty_gpu(sim, VGPU_HOST)["index"], vgpu_mode="mixedSize"),
         [("gpu_vgpu_mode_off_design", "host %s" % VGPU_HOST)],
         [(r"^Graphics and scheduler before the driver .* on %s$" % VGPU_HOST,
           "GPU %s vGPU mode mixed_size -> same_size" % empty_gpu(sim, VGPU_HOST)["pci_id"])]),
        ("GPU VM's DRS override removed", lambda: vc.drs("gpu-h100", remove=["llm-training-01"]),
         [("gpu_vm_not_pinned", "vm llm-training-01")], [(r"DRS|pin", "llm-training-01")]),
        ("GPU VM's DRS override set to manual", lambda: vc.drs("gpu-h100", behavior={"embedding-01": "manual"}),
         [("gpu_vm_pin_behavior", "vm embedding-01")], [(r"DRS|pin", "embedding-01")]),
        # vSphere
        ("VM class profile changed", lambda: vc.vm_class("gpu-inference", profile="nvidia_h100-1-10c"),
         [("vm_class_profile_changed", "vm_class gpu-inference")], [(r"VM class", "gpu-inference")]),
        ("VM class vCPUs changed", lambda: vc.vm_class("gpu-notebooks", cpu=2),
         [("vm_class_size_changed", "vm_class gpu-notebooks")], [(r"VM class", "gpu-notebooks")]),
        ("namespace lost a VM class", lambda: vc.namespace_without_class("team-search", "gpu-inference"),
         [("namespace_class_missing", "namespace team-search")], [(r"[Nn]amespace", "team-search")]),
        # VKS: fields of node pools on the Supervisor's Cluster object
        ("node pool replicas changed", lambda: kube.node_pools(_replicas),
         [("node_pool_changed", "node_pool gpu-workloads/training")], [(VKS_TASK, "pool:training")]),
        ("node pool VM class changed", lambda: kube.node_pools(_vm_class),
         [("node_pool_changed", "node_pool gpu-workloads/notebooks")], [(VKS_TASK, "pool:notebooks")]),
        ("node pool lost its pool taint", lambda: kube.node_pools(_taint_removed),
         [("node_pool_taints_changed", "node_pool gpu-workloads/inference")], [(VKS_TASK, "pool:inference")]),
        ("node pool lost its device plugin label", lambda: kube.node_pools(_label_removed),
         [("node_pool_labels_changed", "node_pool gpu-workloads/notebooks")], [(VKS_TASK, "pool:notebooks")]),
        # guest
        ("PriorityClass deleted", lambda: kube.sched.delete_priority_class("gpu-notebook"),
         [("priority_class_missing", "priority_class gpu-notebook")], [(POLICY_TASK, "gpu-notebook")]),
        ("PriorityClass description changed", lambda: kube.sched.patch_priority_class(
            "gpu-training", {"description": "changed by hand"}),
         [("priority_class_changed", "priority_class gpu-training")], [(POLICY_TASK, "gpu-training")]),
        ("GPU quota raised", lambda: kube.core.patch_namespaced_resource_quota(
            "gpupool-gpus", "team-search", {"spec": {"hard": {"requests.nvidia.com/gpu": "40"}}}),
         [("gpu_quota_changed", "resource_quota team-search/gpupool-gpus")],
         [(POLICY_TASK, "team-search/gpupool-gpus")]),
        ("GPU quota deleted", lambda: kube.core.delete_namespaced_resource_quota("gpupool-gpu-notebook", "research"),
         [("gpu_quota_missing", "resource_quota research/gpupool-gpu-notebook")],
         [(POLICY_TASK, "research/gpupool-gpu-notebook")]),
        ("tenant namespace lost its training label", lambda: kube.core.patch_namespace(
            "research", {"metadata": {"labels": {"gpupool.vcf/training": None}}}),
         [("guest_namespace_labels_changed", "namespace research")], [(POLICY_TASK, "\"research\"")]),
        ("ClusterQueue quota lowered", lambda: kube.gpu_quota_of_cluster_queue("gpupool-training", "2"),
         [("cluster_queue_changed", "cluster_queue gpupool-training")], [(r"ClusterQueue", "gpupool-training")]),
        ("ResourceFlavor lost its tolerations", lambda: kube.custom.patch_cluster_custom_object(
            KUEUE[0], KUEUE[1], "resourceflavors", "gpupool-training", {"spec": {"tolerations": None}}),
         [("resource_flavor_changed", "resource_flavor gpupool-training")], [(r"ResourceFlavor", "gpupool-training")]),
        ("LocalQueue deleted", lambda: kube.custom.delete_namespaced_custom_object(
            KUEUE[0], KUEUE[1], "team-vision", "localqueues", "training"),
         [("local_queue_missing", "local_queue team-vision/training")], [(r"LocalQueues of each", "team-vision")]),
        # the ConfigMap edited, then the notebooks nodes' device plugins restarted (a node reboot, say): they read the
        # edit at their start and advertise 1 x 2, which the audit names per node and site.yml restarts back to 1 x 4
        ("time-slicing replicas changed", lambda: kube.time_slicing_advertised(
            time_sliced, 2, derived["roles"]["gpu_operator"]["gpu_operator_time_slicing"]["notebooks"]["replicas"]),
         [("time_slicing_config_changed", "config_map gpu-operator/%s" % time_sliced)]
         + [("device_plugin_capacity", "node %s" % n) for n in kube.pool_nodes("notebooks")],
         [(r"^Time-slicing configurations", time_sliced)]
         + [(r"^Device plugin restarted node by node", '"node": "%s"' % n) for n in kube.pool_nodes("notebooks")]),
        ("DCGM exporter metrics lost a profiling counter", lambda: kube.core.patch_namespaced_config_map(
            "gpupool-dcgm-metrics", "gpu-operator", {"data": {"dcgm-metrics.csv": "DCGM_FI_DEV_FB_USED, gauge, used\n"}}),
         [("dcgm_metrics_config_changed", "config_map gpu-operator/gpupool-dcgm-metrics")],
         [(r"DCGM exporter metrics$", "gpupool-dcgm-metrics")]),
        # (a mig.strategy changed by hand is repaired only with guest.allow_mig_strategy_change: not in the catalogue)
        ("ClusterPolicy guest driver version changed", lambda: kube.custom.patch_cluster_custom_object(
            "nvidia.com", "v1", "clusterpolicies", "cluster-policy", {"spec": {"driver": {"version": "550.54.14"}}}),
         [("cluster_policy_changed", "cluster_policy cluster-policy")], [(r"^ClusterPolicy fields", "cluster-policy")]),
        ("licensing Secret deleted", lambda: kube.core.delete_namespaced_secret(kube.licensing_secret(), "gpu-operator"),
         [("licensing_secret_missing", "secret gpu-operator/%s" % kube.licensing_secret())],
         [(r"^Licensing Secret for the GPU Operator$", "")]),
        ("culling schedule changed", lambda: kube.batch.patch_namespaced_cron_job(
            "gpupool-notebook-culler", "gpupool-system", {"spec": {"schedule": "*/30 * * * *"}}),
         [("notebook_culling_changed", "cronjob gpupool-system/gpupool-notebook-culler")],
         [(r"^Culling CronJob", "gpupool-notebook-culler")]),
    ]


def explains(expect, entry):
    pattern, text = expect
    task, _host, result = entry
    if not re.search(pattern, task):
        return False
    if text.startswith("pool:"):
        return text[len("pool:"):] in node_pools_changed(result)
    return text in result


def test_clean_pool_check_predicts_nothing(pool):
    res = pool.audit()
    assert res["clean"], [f for f in res["findings"] if f["severity"] != "info"]
    run = pool.site(check=True)
    assert changed_entries(run) == [], [e[:2] for e in changed_entries(run)]


def test_drift_catalogue(pool):
    vc, kube = Vc(pool.sim), Kube(pool.rig)
    try:
        # built before any drift: the licensing Secret's name is read from the ClusterPolicy first
        catalogue = drifts(pool.sim, vc, kube, chain.derived())
        for _name, inject, _rules, _tasks in catalogue:
            inject()
    finally:
        vc.close()

    times = []

    def timed(label, fn, *args, **kwargs):
        start = time.monotonic()
        out = fn(*args, **kwargs)
        times.append("%s %.0f s" % (label, time.monotonic() - start))
        return out

    found = findings(timed("audit", pool.audit))
    predicted = changed_entries(timed("check", pool.site, check=True))
    timed("converge", pool.site)
    ssh_after = pool.sim.ssh_service(MIG_HOST)  # started for nvidia-smi only while needed
    after = timed("audit", pool.audit)
    rerun = changed_entries(timed("rerun", pool.site))

    report = []
    for name, _inject, rules, tasks in catalogue:
        named = all(r in found for r in rules)
        check = all(any(explains(t, e) for e in predicted) for t in tasks)
        report.append((name, named, check))
    unexplained = [e[:2] for e in predicted if not any(explains(t, e) for _n, _i, _r, ts in catalogue for t in ts)]
    # the one update of the VKS Cluster changes exactly the drifted pools
    drifted = sorted(set(t[1][len("pool:"):] for _n, _i, _r, ts in catalogue for t in ts if t[0] == VKS_TASK))
    assert [node_pools_changed(e[2]) for e in predicted if re.search(VKS_TASK, e[0])] == [drifted]
    lines = ["%-55s audit=%s check=%s" % r for r in report]
    print("\n".join(["drift catalogue (%d drifts): %s" % (len(report), ", ".join(times))] + lines))
    assert all(r[1] and r[2] for r in report), "\n".join(lines) + "\nfound: %s" % sorted(found)
    assert not unexplained, "changed tasks no drift explains: %s" % unexplained
    assert after["clean"], [(f["rule"], f["object"], f["message"]) for f in after["findings"] if f["severity"] != "info"]
    assert rerun == [], [e[:2] for e in rerun]
    assert ssh_after == "stopped", "the SSH service of %s is %s after the MIG repair" % (MIG_HOST, ssh_after)
