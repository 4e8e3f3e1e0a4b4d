"""The pure translation of a capture into what the simulators are given (tests/sim/capture_playback.py), over the
shipped capture of the example platform: REST create specs with ids mapped by name, DRS overrides by VM name, the
Supervisor's Clusters whose node pools the reader reads back as captured (apply_pool and read_pool are inverses on
the rig's ClusterClasses), the guest objects, and what playback leaves out."""
import copy
import pathlib

import pytest
import yaml

import capture_playback
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import (
    class_name, read_pool, top_variables, variable_plan)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "tests" / "fixtures" / "captures" / "example.json"
SUPERVISOR = ROOT / "tests" / "sim" / "k8s" / "supervisor.yml"
VARIABLES = {"vmClass": "best-effort-large", "storageClass": "gold"}


@pytest.fixture
def record():
    return capture_playback.load(SHIPPED)


def rig_plans():
    """{ClusterClass: (variable_plan, machineDeployment class)} of the rig's Supervisor objects."""
    out = {}
    for doc in yaml.safe_load_all(SUPERVISOR.read_text()):
        for obj in (doc or {}).get("items") or [doc or {}]:
            if obj.get("kind") == "ClusterClass":
                mds = obj["spec"]["workers"]["machineDeployments"]
                out[class_name(obj)] = (variable_plan(obj), mds[0]["class"] if len(mds) == 1 else None)
    return out


def test_vm_classes_become_create_specs(record):
    bodies = capture_playback.vm_class_bodies(record)
    classes = record["vsphere"]["vm_classes"]
    assert [b["id"] for b in bodies] == sorted(classes)
    for body in bodies:
        cls = classes[body["id"]]
        assert (body["cpu_count"], body["memory_MB"], body["memory_reservation"], body["description"]) == (
            cls["cpu_count"], cls["memory_mb"], cls["memory_reservation"], cls["description"])
        changes = body["config_spec"]["deviceChange"]
        assert [c["device"]["backing"]["vgpu"] for c in changes] == cls["vgpu_profiles"]
        profiling = dict((o["key"], o["value"]) for o in body["config_spec"].get("extraConfig") or [])
        assert profiling == ({"pciPassthru%d.cfg.enable_profiling" % i: "1" for i in range(len(changes))}
                             if cls.get("profiling") else {})
    assert any(classes[b["id"]].get("profiling") for b in bodies) and not all(
        classes[b["id"]].get("profiling") for b in bodies), "the shipped capture has classes with and without profiling"


def test_namespaces_take_the_new_simulators_ids_by_name(record):
    names = record["vsphere"]["cluster_names"]
    clusters = dict((name, "domain-new-%d" % i) for i, name in enumerate(sorted(names.values())))
    known = sorted(record["vsphere"]["storage_policies"].values())
    policies = dict((name, "policy-%d" % i) for i, name in enumerate(known))
    bodies = capture_playback.namespace_bodies(record, clusters, policies)
    assert [b["namespace"] for b in bodies] == sorted(record["vsphere"]["namespaces"])
    for body in bodies:
        ns = record["vsphere"]["namespaces"][body["namespace"]]
        assert body["cluster"] == clusters[names[ns["cluster"]]]
        want = sorted(policies[record["vsphere"]["storage_policies"][p]] for p in ns["storage_policies"])
        assert sorted(s["policy"] for s in body["storage_specs"]) == want
        assert body["description"] == ns["description"] and body["vm_service_spec"]["vm_classes"] == ns["vm_classes"]
    with pytest.raises(ValueError, match="Supervisor cluster"):
        capture_playback.namespace_bodies(record, {}, policies)
    with pytest.raises(ValueError, match="storage policy"):
        capture_playback.namespace_bodies(record, clusters, {})


def test_drs_overrides_go_by_vm_name(record):
    by_name = capture_playback.drs_overrides(record)
    names = capture_playback.vm_names(record)
    for cluster, state in record["vsphere"]["drs"].items():
        assert by_name.get(cluster, {}) == dict((names[k], v) for k, v in state["overrides"].items())
    assert sum(len(v) for v in by_name.values()) > 0


def test_node_pools_read_back_as_captured(record):
    plans = rig_plans()
    objs = capture_playback.supervisor_objects(record, plans, "v1.35.5+vmware.1-vkr.1", VARIABLES)
    clusters = [o for o in objs if o["kind"] == "Cluster"]
    assert sorted(c["metadata"]["name"] for c in clusters) == sorted(record["vks"])
    for cluster in clusters:
        captured = record["vks"][cluster["metadata"]["name"]]
        assert cluster["metadata"]["namespace"] == captured["namespace"]
        topology = cluster["spec"]["topology"]
        recorded = captured["topology"]
        assert top_variables(cluster) == dict((v["name"], v["value"]) for v in recorded["variables"])
        assert (topology["version"], topology["controlPlane"]["replicas"]) == (
            recorded["version"], recorded["control_plane_replicas"])
        assert "%s/%s" % (topology["classRef"]["namespace"], topology["classRef"]["name"]) == recorded["cluster_class"]
        for md in topology["workers"]["machineDeployments"]:
            want = captured["machine_deployments"][md["name"]]
            plan = plans[want["class"]][0]
            assert read_pool(md, top_variables(cluster), plan) == want
    # a capture that does not record the topology: the release and variables given
    bare = copy.deepcopy(record)
    for cluster in bare["vks"].values():
        del cluster["topology"]
    objs = capture_playback.supervisor_objects(bare, plans, "v1.33.1", VARIABLES)
    assert [(top_variables(o), o["spec"]["topology"]["version"]) for o in objs if o["kind"] == "Cluster"] == [
        (VARIABLES, "v1.33.1")] * len(record["vks"])
    wrong = copy.deepcopy(record)
    for pool in next(iter(wrong["vks"].values()))["machine_deployments"].values():
        pool["class"] = "elsewhere/no-such-class"
    with pytest.raises(ValueError, match="not on the rig"):
        capture_playback.supervisor_objects(wrong, plans, "v1", VARIABLES)


def test_guest_objects_are_played_whole_with_their_labels(record):
    guest = record["guest"]
    objs = capture_playback.guest_objects(record)
    assert objs[:len(guest["objects"])] == guest["objects"]
    mine = [o for o in guest["objects"] if o["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by")]
    assert set(o["kind"] for o in mine) >= {"Namespace", "PriorityClass", "ResourceQuota", "ClusterQueue"}
    assert "LocalQueue" in [o["kind"] for o in objs]
    rest = [(o["kind"], o["metadata"].get("namespace")) for o in objs[len(guest["objects"]):]]
    assert rest == [("ClusterPolicy", None), ("CronJob", "gpupool-system")]


def test_guest_objects_of_a_capture_without_them(record):
    guest = record["guest"]
    del guest["objects"]
    objs = capture_playback.guest_objects(record)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert sorted(n for k, n in kinds if k == "PriorityClass") == sorted(
        n for n in guest["priority_classes"] if not n.startswith("system-"))
    quotas = [o for o in objs if o["kind"] == "ResourceQuota"]
    assert len(quotas) == sum(len(q) for q in guest["resource_quotas"].values())
    for quota in quotas:
        meta = quota["metadata"]
        want = [q for q in guest["resource_quotas"][meta["namespace"]] if q["name"] == meta["name"]][0]
        assert quota["spec"]["hard"] == want["hard"]
        scoped = (quota["spec"].get("scopeSelector") or {}).get("matchExpressions") or [{}]
        assert scoped[0].get("values", [None]) == [want["priority_class"]]
    # every namespace before the first object that lives in it
    first = dict((o["metadata"]["namespace"], i) for i, o in reversed(list(enumerate(objs)))
                 if o["metadata"].get("namespace"))
    made = dict((o["metadata"]["name"], i) for i, o in enumerate(objs) if o["kind"] == "Namespace")
    assert all(made[ns] < i for ns, i in first.items())
    queues = [o for o in objs if o["kind"] == "ClusterQueue"]
    assert [q["spec"] for q in queues] == [guest["kueue"][n] for n in sorted(guest["kueue"])]
    assert all(q["apiVersion"].startswith("kueue.x-k8s.io/") for q in queues)
    assert [o["spec"] for o in objs if o["kind"] == "ClusterPolicy"] == [guest["cluster_policy"]]
    without = capture_playback.guest_objects(record, cluster_policy_served=False)
    assert "ClusterPolicy" not in [o["kind"] for o in without]
    job = [o for o in objs if o["kind"] == "CronJob"][0]
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert (job["spec"]["schedule"], container["name"], container["image"]) == (
        guest["culling"]["schedule"], "culler", guest["culling"]["image"])
    assert dict((e["name"], e["value"]) for e in container["env"]) == guest["culling"]["env"]


def test_unplayed_names_what_playback_leaves_out(record):
    assert capture_playback.unplayed(record) == []
    mixed = copy.deepcopy(record)
    host = [h for h in mixed["vsphere"]["hosts"] if len(h["gpus"]) > 1][0]
    host["gpus"][1]["model"] = "A100-80GB"
    cluster = next(iter(mixed["vsphere"]["drs"]))
    mixed["vsphere"]["drs"][cluster]["overrides"]["vm-unknown"] = {"behavior": "manual", "enabled": True}
    mixed["guest"]["culling"] = {"kubeflow": True, "exists": True, "env": {}}
    assert capture_playback.unplayed(mixed, cluster_policy_served=False) == [
        "host %s: GPUs of more than one model" % host["name"],
        "cluster %s: 1 DRS override(s) of VMs without a vGPU (not recorded by name)" % cluster,
        "the ClusterPolicy (the rig has no ClusterPolicy CRD: install the GPU Operator's CRDs)",
        "the notebook culling of Kubeflow's notebook controller (its Deployment is not recorded whole)"]
