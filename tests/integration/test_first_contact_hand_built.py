"""First contact with a GPU platform built by hand, through the platforms' own APIs and never the collection, of a
shape the example does not have: three GPU models in three clusters (A100 with MIG on GPU 1 of two hosts, L40S,
H100), two Supervisor namespaces made before (the VKS cluster's and a tenant's, REST), and a VKS node pool whose
taint the collection would not write (the Kubernetes client, on the rig as the Supervisor).

Then, as a new operator would: discover the design (no write on the platform); fill in the driver bundle
discovery cannot know and preflight with it (no write; the bundle is on a datastore vCenter lacks: named); the
audit of the esxi, vsphere and vks links with it is clean;
site.yml --check with it predicts no change; one field changed in the discovered design (the tenant's CPU limit)
and site.yml changes that namespace and nothing else of the platform."""
import pytest
import yaml
from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance  # noqa: F401 pylint: disable=unused-import
from kubernetes import dynamic

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import node_pool_labels
from tests.integration.test_gpu_pool_discover import CLASSES, NAMESPACES, Rest, changing
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.paths import ROOT

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
SHARED = {"default": "sharedDirect", "policy": "performance"}
FLEET = {
    "datacenter": "DC0",
    "clusters": [
        {"name": "ai-a100", "supervisor": True, "hosts": [
            {"prefix": "a100-", "count": 2, "gpu": {"model": "A100-80GB", "count": 2}, "driver_version": DRIVER,
             "graphics": SHARED, "mig": [1]},
            {"name": "a100-03", "gpu": {"model": "A100-80GB", "count": 2}, "driver_version": DRIVER, "graphics": SHARED}]},
        {"name": "ai-l40s", "hosts": [
            {"prefix": "l40s-", "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": DRIVER,
             "graphics": {"default": "sharedDirect", "policy": "consolidation"}}]},
        {"name": "ai-h100", "hosts": [
            {"prefix": "h100-", "count": 3, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": DRIVER,
             "graphics": SHARED}]},
        {"name": "mgmt", "hosts": [{"prefix": "mgmt-", "count": 1}]},
    ],
    "vms": [],
}
SITE = ROOT / "playbooks" / "site.yml"
CAPI = "cluster.x-k8s.io"
OWN_TAINT = {"key": "dedicated", "value": "serving", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def build_vsphere(sim, platform):
    """Three vGPU classes (MIG, time-sliced, full card) and two namespaces, through the REST API."""
    rest = Rest(sim)
    try:
        moid = dict((c["cluster_name"], c["cluster"])
                    for c in rest.call("GET", "/api/vcenter/namespace-management/clusters"))["ai-a100"]
        policy = rest.call("GET", "/api/vcenter/storage/policies")[0]["policy"]
        for cid, cpu, mem, profiles in (("serve-a100", 8, 32768, ["grid_a100d-3-40c"]),
                                        ("lab-l40s", 4, 16384, ["nvidia_l40s-12c"]),
                                        ("train-h100", 32, 262144, ["nvidia_h100-80c"] * 2)):
            rest.call("POST", CLASSES, {"id": cid, "cpu_count": cpu, "memory_MB": mem, "memory_reservation": 100,
                                        "description": "made by hand: %s" % cid,
                                        "devices": {"vgpu_devices": [{"profile_name": p} for p in profiles]}})
        rest.call("POST", NAMESPACES, {
            "cluster": moid, "namespace": platform, "description": "platform team's VKS namespace",
            "vm_service_spec": {"vm_classes": ["serve-a100", "lab-l40s", "train-h100"]},
            "storage_specs": [{"policy": policy}],
            "access_list": [{"subject_type": "GROUP", "domain": "vsphere.local", "subject": "ops", "role": "OWNER"}]})
        rest.call("POST", NAMESPACES, {
            "cluster": moid, "namespace": "team-x", "description": "Team X",
            "vm_service_spec": {"vm_classes": ["serve-a100", "train-h100"]},
            "storage_specs": [{"policy": policy, "limit": 204800}],
            "resource_spec": {"cpu_limit": 20000, "memory_limit": 65536, "storage_request_limit": 204800},
            "access_list": [{"subject_type": "GROUP", "domain": "vsphere.local", "subject": "x-devs", "role": "EDIT"}]})
    finally:
        rest.close()


POOLS = (  # (class, shape, sharing, profile, vGPUs): the pools discovery will find for the three classes
    ("serve-a100", "inference", "mig", "grid_a100d-3-40c", 1),
    ("lab-l40s", "notebooks", "time_sliced", "nvidia_l40s-12c", 1),
    ("train-h100", "training", "full_card", "nvidia_h100-80c", 2))


def build_node_pool(api, namespace):
    """The VKS cluster (named as its namespace) with a GPU node pool per class, each with the labels and
    taints a GPU node pool of its class carries; serve-a100's is named "serving" and has one label of the
    team's and a taint of its own."""
    mds = []
    for cid, shape, sharing, profile, gpus in POOLS:
        pool = {"name": cid, "shape": shape, "sharing": sharing, "vgpu_profile": profile, "gpus_per_node": gpus,
                "node_pool": {}}
        labels = dict(node_pool_labels(pool))
        taints = [GPU_TAINT, {"key": "gpupool.vcf/pool", "value": cid, "effect": "NoSchedule"}]
        name = cid
        if cid == "serve-a100":
            labels["team"], taints, name = "x", [GPU_TAINT, OWN_TAINT], "serving"
        mds.append({"class": "node-pool", "name": name, "replicas": 1, "variables": {"overrides": [
            {"name": "vmClass", "value": cid}, {"name": "node", "value": {"labels": labels, "taints": taints}}]}})
    topo = {"classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
            "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": mds},
            "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]}
    clusters = dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")
    clusters.create(namespace=namespace, body={"apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster",
                                               "metadata": {"name": namespace}, "spec": {"topology": topo}})
    return clusters


def writes(vsphere, action):
    """(what ``action()`` returned, the requests it sent that change state)."""
    before = vsphere.stats()
    out = action()
    return out, changing(before, vsphere.stats())


@pytest.fixture
def hand_built(vsphere, vsphere_env, k8s_rig, k8s_api, k8s_namespace, tmp_path):  # noqa: F811
    build_vsphere(vsphere, k8s_namespace)
    clusters = build_node_pool(k8s_api, k8s_namespace)
    return dict(env=vsphere_env, kubeconfig=str(k8s_rig.kubeconfig), namespace=k8s_namespace, clusters=clusters,
                tmp=tmp_path)


def test_first_contact_with_a_hand_built_platform(vsphere, hand_built):
    env, kubeconfig, tmp = hand_built["env"], hand_built["kubeconfig"], hand_built["tmp"]
    dest = tmp / "design.yml"
    res, sent = writes(vsphere, lambda: run_module("gpupool.vcf.gpu_pool_discover", {
        "dest": str(dest), "name": "hand-built", "supervisor_kubeconfig": kubeconfig}, env=env)[0])
    assert not res.get("failed"), res.get("msg")
    assert sent == {} and res["links_not_read"] == {}
    design = yaml.safe_load(dest.read_text())
    assert sorted((c["name"], c["gpu"]["model"]) for c in design["clusters"]) == [
        ("ai-a100", "A100-80GB"), ("ai-h100", "H100-80GB"), ("ai-l40s", "L40S")]
    pools = dict((p["vm_class"]["name"], p) for p in design["pools"])
    assert sorted((c, p["sharing"]) for c, p in pools.items()) == [
        ("lab-l40s", "time_sliced"), ("serve-a100", "mig"), ("train-h100", "full_card")]
    assert pools["serve-a100"]["node_pool"]["taints"] == [GPU_TAINT, OWN_TAINT]
    assert pools["serve-a100"]["node_pool"]["labels"] == {"team": "x"}
    assert design["vks_clusters"][0]["description"] == "platform team's VKS namespace"
    assert [t["name"] for t in design["tenants"]] == ["team-x"]

    # the operator fills in what discovery could not say: the driver's offline bundle (on a datastore this
    # vCenter does not have); preflight with that design only reads, and names the missing bundle
    text = dest.read_text()
    assert text.count('bundle: "FILL-IN') == 3
    for c in design["clusters"]:
        c["driver"]["bundle"] = "[gpu-depot] nvidia/NVD-AIE-%s.zip" % c["name"]
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    pre, sent = writes(vsphere, lambda: run_module("gpupool.vcf.gpu_pool_preflight", {
        "design_file": str(dest), "supervisor_kubeconfig": kubeconfig}, env=env)[0])
    assert sent == {}, sent
    assert not pre.get("failed") or "no-go" in pre.get("msg", ""), pre.get("msg")
    esxi = pre["links"]["esxi"]
    assert esxi["go"] is False and pre["go"] is False
    assert sorted(r.split(":")[0] for r in esxi["reasons"]) == ["cluster ai-a100", "cluster ai-h100", "cluster ai-l40s"]
    assert all("[gpu-depot]" in r and "datastore gpu-depot" in r for r in esxi["reasons"]), esxi

    # the audit of the links discovered is clean
    audit = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(dest), "links": ["esxi", "vsphere", "vks"], "supervisor_kubeconfig": kubeconfig},
        env=dict(env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))[0]
    assert not audit.get("failed"), audit.get("msg")
    assert audit["findings"] == []

    # site.yml --check with it: nothing to change on the links it reaches (no DLS, no guest given)
    extra = {"gpupool_design_file": str(dest), "gpupool_supervisor_kubeconfig": kubeconfig}
    run, sent = writes(vsphere, lambda: run_playbook(SITE, env=env, check=True, extra_vars=extra))
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stats.get("changed", 0) == 0, [n for n, r in run.tasks if r.get("changed")]
    assert sent == {}

    # one field changed: the tenant's CPU limit. site.yml changes that namespace and nothing else
    design["tenants"][0]["limits"]["cpu_mhz"] = 30000
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    topology = hand_built["clusters"].get(namespace=hand_built["namespace"], name=hand_built["namespace"]).to_dict()
    run, sent = writes(vsphere, lambda: run_playbook(SITE, env=env, extra_vars=extra))
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    changed = [n for n, r in run.tasks if r.get("changed")]
    # besides the namespace, only the run lease's bookkeeping (a custom attribute of each cluster, set and
    # cleared) is written
    objects = dict((k, v) for k, v in sent.items() if k not in ("soap SetField", "soap AddCustomFieldDef"))
    assert objects == {"rest PATCH %s/team-x" % NAMESPACES: 1}, (sent, changed)
    after = hand_built["clusters"].get(namespace=hand_built["namespace"], name=hand_built["namespace"]).to_dict()
    assert after["spec"]["topology"] == topology["spec"]["topology"]
    rest = Rest(vsphere)
    try:
        assert rest.call("GET", NAMESPACES + "/team-x")["resource_spec"]["cpu_limit"] == 30000
    finally:
        rest.close()
