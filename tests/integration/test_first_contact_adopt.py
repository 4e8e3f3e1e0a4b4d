"""Adopt, then purge, on a GPU platform built by hand (the builders of test_first_contact_hand_built: three GPU
models, three vGPU VM classes and two Supervisor namespaces made through the REST API, a VKS cluster whose GPU node
pools were made with the Kubernetes client), with two more objects made by hand that no design names: a VM class
without a vGPU and a CPU node pool.

Discover the design, fill in what discovery cannot know (the driver bundles), set ``adopt: true``: site.yml records
as the collection's own the objects that match (the ownership mark at the start of the VM classes' and namespaces'
descriptions, the Cluster's annotation listing its node pools), read back through the platforms' APIs; the two
objects no design names stay foreign. Then one pool leaves the design and site.yml runs with the node pools' purge:
the adopted node pool of that pool is removed (and its class from the namespace that offered it), the other
adopted ones stay, and the CPU node pool and the VM class made by hand and never adopted are untouched. (The VM
class of the pool that left stays: the collection deletes a VM class only when a revision supersedes it.)"""
import yaml
from k8s_fixtures import k8s_api, k8s_namespace, k8s_rig, k8s_rig_instance  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import OWNER_MARK
from tests.integration.test_first_contact_hand_built import (  # noqa: F401 pylint: disable=unused-import
    FLEET, hand_built)
from tests.integration.test_gpu_pool_discover import CLASSES, NAMESPACES, Rest
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.paths import ROOT

SITE = ROOT / "playbooks" / "site.yml"
OWNED = "gpupool.vcf/node-pools"  # the Cluster's annotation: the node pools vks_node_pool made or adopted
GPU_CLASSES = ("lab-l40s", "serve-a100", "train-h100")
HAND_CLASS = {"id": "cpu-batch", "cpu_count": 4, "memory_MB": 8192, "description": "made by hand: CPU batch"}
HAND_POOL = {"class": "node-pool", "name": "cpu-batch", "replicas": 2,
             "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}}


def vsphere_objects(sim, namespaces):
    """({VM class id: description}, {namespace: (description, its VM classes)}) read through the REST API."""
    rest = Rest(sim)
    try:
        classes = dict((c["id"], c.get("description") or "") for c in rest.call("GET", CLASSES))
        spaces = {}
        for name in namespaces:
            ns = rest.call("GET", "%s/%s" % (NAMESPACES, name))
            offered = (ns.get("vm_service_spec") or {}).get("vm_classes") or []
            spaces[name] = (ns.get("description") or "", sorted(offered))
        return classes, spaces
    finally:
        rest.close()


def node_pools(hand_built):  # noqa: F811
    """({node pool: VM class} of the Cluster, the pools its ownership annotation names)."""
    ns = hand_built["namespace"]
    obj = hand_built["clusters"].get(namespace=ns, name=ns).to_dict()
    mds = obj["spec"]["topology"]["workers"]["machineDeployments"]
    classes = dict((md["name"], dict((v["name"], v["value"]) for v in md["variables"]["overrides"])["vmClass"])
                   for md in mds)
    owned = ((obj["metadata"].get("annotations") or {}).get(OWNED) or "").split(",")
    return classes, sorted(n for n in owned if n)


def site(env, extra):
    run = run_playbook(SITE, env=env, extra_vars=extra)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def test_adopt_then_purge_removes_only_what_was_adopted_or_created(vsphere, hand_built):  # noqa: F811
    env, kubeconfig, tmp = hand_built["env"], hand_built["kubeconfig"], hand_built["tmp"]
    platform = hand_built["namespace"]
    # two objects made by hand that no design will name: a VM class without a vGPU, a CPU node pool
    rest = Rest(vsphere)
    try:
        rest.call("POST", CLASSES, HAND_CLASS)
    finally:
        rest.close()
    cluster = hand_built["clusters"].get(namespace=platform, name=platform).to_dict()
    mds = cluster["spec"]["topology"]["workers"]["machineDeployments"] + [HAND_POOL]
    hand_built["clusters"].patch(namespace=platform, name=platform, content_type="application/merge-patch+json",
                                 body={"spec": {"topology": {"workers": {"machineDeployments": mds}}}})
    namespaces = (platform, "team-x")
    classes, spaces = vsphere_objects(vsphere, namespaces)
    assert not [d for d in list(classes.values()) + [s[0] for s in spaces.values()] if d.startswith(OWNER_MARK)]
    assert node_pools(hand_built) == ({"serving": "serve-a100", "lab-l40s": "lab-l40s", "train-h100": "train-h100",
                                       "cpu-batch": "best-effort-large"}, [])

    # discover; the operator fills in the driver bundles and adopts the platform
    dest = tmp / "design.yml"
    res = run_module("gpupool.vcf.gpu_pool_discover", {"dest": str(dest), "name": "hand-built",
                                                       "supervisor_kubeconfig": kubeconfig}, env=env)[0]
    assert not res.get("failed"), res.get("msg")
    design = res["design"]
    assert sorted(p["vm_class"]["name"] for p in design["pools"]) == list(GPU_CLASSES)
    for c in design["clusters"]:
        c["driver"]["bundle"] = "[gpu-depot] nvidia/NVD-AIE-%s.zip" % c["name"]
    design["adopt"] = True
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    extra = {"gpupool_design_file": str(dest), "gpupool_supervisor_kubeconfig": kubeconfig}
    site(env, extra)

    # the objects that match are the collection's own now; the two no design names stay foreign
    classes, spaces = vsphere_objects(vsphere, namespaces)
    assert [c for c in GPU_CLASSES if not classes[c].startswith(OWNER_MARK)] == []
    assert [n for n in namespaces if not spaces[n][0].startswith(OWNER_MARK)] == []
    assert classes["cpu-batch"] == HAND_CLASS["description"]
    pools, owned = node_pools(hand_built)
    assert owned == ["lab-l40s", "serving", "train-h100"] and "cpu-batch" in pools
    assert "lab-l40s" in spaces[platform][1]

    # the time-sliced pool leaves the design; site.yml with the node pools' purge
    gone = [p for p in design["pools"] if p["vm_class"]["name"] == "lab-l40s"][0]
    design["pools"] = [p for p in design["pools"] if p is not gone]
    for tenant in design.get("tenants") or []:
        tenant["gpu_quota"].pop(gone["name"], None)
    dest.write_text(yaml.safe_dump(design, sort_keys=False))
    site(env, dict(extra, vks_gpu_node_pools_purge=True))

    pools, owned = node_pools(hand_built)
    assert pools == {"serving": "serve-a100", "train-h100": "train-h100", "cpu-batch": "best-effort-large"}
    assert owned == ["serving", "train-h100"]
    classes, spaces = vsphere_objects(vsphere, namespaces)
    assert "lab-l40s" not in spaces[platform][1] and spaces[platform][1] == ["serve-a100", "train-h100"]
    assert classes["cpu-batch"] == HAND_CLASS["description"]
    assert [c for c in ("serve-a100", "train-h100") if not classes[c].startswith(OWNER_MARK)] == []
