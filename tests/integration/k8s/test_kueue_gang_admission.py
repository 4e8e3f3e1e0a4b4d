"""Kueue from the design, through the real Kueue v0.17 controller on a rig of its own.

The design's gang-scheduled training pool (3 nodes of 4 GPUs: 12 GPUs) becomes, by derive() and
the gpu_scheduling_policy role, a ResourceFlavor, a ClusterQueue and LocalQueues, and
waitForPodsReady in Kueue's configuration ConfigMap. The rig runs Kueue as a process, not as a
Deployment: a stand-in Deployment with the labels of Kueue's pods shows the role's restart, and the
test then does what the new pod would do (start Kueue with the configuration the ConfigMap holds).
Then: two Jobs of 2 pods x 4 GPUs are admitted one at a time and never split; a Job whose pods do
not all start is evicted after the design's timeout, and blocks other admissions meanwhile.
"""
from __future__ import annotations

import os
import subprocess
import time
import urllib.request

import k8s_rig
import pytest
import yaml
from k8s_fixtures import wait_for
from kubernetes import client, dynamic

from tests.lib import kueue_rig
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.kueue_rig import GPU, derived_inputs, example_design, queued_job, training_nodes
KV = "kueue.x-k8s.io/v1beta2"
KUEUE_NS, CONFIG_MAP, CONFIG_KEY = "kueue-system", "kueue-manager-config", "controller_manager_config.yaml"
TIMEOUT = "20s"  # the design's waitForPodsReady timeout, short for the test
KUEUE_RULES = {"kueue_missing", "resource_flavor_missing", "resource_flavor_changed", "cluster_queue_missing",
               "cluster_queue_changed", "local_queue_missing", "local_queue_changed", "kueue_config_changed"}
NODES = training_nodes(3)


def design():
    """The example design with its gang-scheduled training pool at 3 nodes of 4 H100s."""
    d = example_design()
    [cluster] = [c for c in d["clusters"] if c["name"] == "gpu-h100"]
    cluster["hosts"] = 6  # room for the third training node and a spare host
    [pool] = [p for p in d["pools"] if p["name"] == "training"]
    pool["node_pool"]["replicas"] = 3
    d.setdefault("guest", {})["kueue"] = {"wait_for_pods_ready_timeout": TIMEOUT}
    return d


def role_play(inputs):
    # what site.yml passes (the derived inputs one to one); no culling in this test
    return kueue_rig.role_play(inputs, gpu_scheduling_policy_culling="none")


def kueue_stand_in(rig, core, apps):
    """Kueue's configuration as its release manifests install it (the ConfigMap, holding the
    configuration the rig started Kueue with) and a Deployment whose pods carry the label of
    Kueue's controller pods."""
    config_text = (rig.data_dir / "kueue.yml").read_text()
    core.create_namespaced_config_map(KUEUE_NS, {"metadata": {"name": CONFIG_MAP},
                                                 "data": {CONFIG_KEY: config_text}})
    labels = {"control-plane": "controller-manager", "app.kubernetes.io/name": "kueue"}
    apps.create_namespaced_deployment(KUEUE_NS, {
        "metadata": {"name": "kueue-controller-manager", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"nodeSelector": {"gpupool.vcf/pool": "system"},
                     "containers": [{"name": "manager", "image": "registry.invalid/kueue:v0.17.0"}]}}}})


def controller_pods(core):
    return sorted(p.metadata.name for p in core.list_namespaced_pod(
        KUEUE_NS, label_selector="control-plane=controller-manager").items
        if not p.metadata.deletion_timestamp and p.status.phase == "Running")


def restart_kueue_from_config_map(rig, core):
    """What a new pod of Kueue's Deployment does: start the controller with the configuration
    file the ConfigMap holds (the rig runs Kueue as a process; its command line is kept)."""
    text = core.read_namespaced_config_map(CONFIG_MAP, KUEUE_NS).data[CONFIG_KEY]
    (rig.data_dir / "kueue.yml").write_text(text)
    old = rig.procs["kueue"]
    old.terminate()
    old.wait(20)
    log = open(rig.data_dir / "kueue.log", "ab")
    rig.procs["kueue"] = subprocess.Popen(
        old.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=rig.data_dir,
        env=dict(os.environ, KUBECONFIG=str(rig.kubeconfig)), start_new_session=True,
        preexec_fn=getattr(k8s_rig, "_die_with_parent", None))
    health = yaml.safe_load(text)["health"]["healthProbeBindAddress"]

    def ready():
        assert rig.procs["kueue"].poll() is None, "Kueue exited: " + (rig.data_dir / "kueue.log").read_text()[-3000:]
        try:
            with urllib.request.urlopen("http://%s/readyz" % health, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    wait_for("Kueue ready with the new configuration", ready, timeout=60)
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def gang(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kueue-gang")
    with kueue_rig.kueue_rig(tmp, NODES) as rig:
        api = rig.api_client()
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        kueue_stand_in(rig, core, apps)
        wait_for("the stand-in Kueue pod Running", lambda: controller_pods(core))
        d = design()
        (tmp / "design.yml").write_text(yaml.safe_dump(d))
        inputs = derived_inputs(d)
        runs = {"check": run_playbook(role_play(inputs), env=rig.env, check=True, diff=True)}
        before = controller_pods(core)
        runs["converge"] = run_playbook(role_play(inputs), env=rig.env, diff=True)
        runs["pods_before"], runs["pods_after"] = before, controller_pods(core)
        runs["config"] = restart_kueue_from_config_map(rig, core)
        runs["again"] = run_playbook(role_play(inputs), env=rig.env)
        runs["pods_again"] = controller_pods(core)
        yield dict(rig=rig, api=api, inputs=inputs, runs=runs, design_file=tmp / "design.yml")


def _failed(run):
    return [(name, res.get("msg")) for name, res in run.tasks if res.get("failed")]


def _changed(run):
    """The changed tasks, by their name in the role."""
    return [name.split(" : ", 1)[-1] for name, res in run.tasks if res.get("changed")]


def test_converge_restart_rerun_and_check(gang):
    runs = gang["runs"]
    for key in ("check", "converge", "again"):
        assert runs[key].rc == 0 and not _failed(runs[key]), (key, _failed(runs[key]), runs[key].stdout[-3000:])
    # check mode predicted the configuration change and the restart, and changed nothing
    assert "Write waitForPodsReady into Kueue's configuration" in _changed(runs["check"])
    # the converge rewrote the configuration and deleted Kueue's pod; its Deployment made a new one
    assert "Write waitForPodsReady into Kueue's configuration" in _changed(runs["converge"])
    assert runs["pods_after"] and set(runs["pods_after"]).isdisjoint(runs["pods_before"])
    # Kueue read it: waitForPodsReady as designed, the rig's own settings kept
    assert runs["config"]["waitForPodsReady"] == {"timeout": TIMEOUT, "blockAdmission": True}
    assert runs["config"]["integrations"] == {"frameworks": ["batch/job"]}
    # a rerun changes nothing and restarts nothing
    assert _changed(runs["again"]) == []
    assert runs["pods_again"] == runs["pods_after"]


def test_objects_are_the_derived_ones(gang):
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
    want = objs.kueue_objects(objs.role_inputs("gpu_scheduling_policy", gang["inputs"]))
    dyn = dynamic.DynamicClient(gang["api"])
    cq = dyn.resources.get(api_version=KV, kind="ClusterQueue").get(name="gpupool-training").to_dict()
    assert objs.differences(dict(want["cluster_queues"])["gpupool-training"], cq["spec"]) == []
    assert cq["spec"]["cohortName"] == "gpupool"
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][-1] == {"name": GPU, "nominalQuota": "12"}
    lqs = dyn.resources.get(api_version=KV, kind="LocalQueue").get().to_dict()["items"]
    assert sorted((q["metadata"]["namespace"], q["metadata"]["name"]) for q in lqs) == [
        ("research", "training"), ("team-vision", "training")]


def job(name, pods, gpus):
    return queued_job(name, "training", pods, gpus)


def _admitted(batch, ns):
    return sorted(j.metadata.name for j in batch.list_namespaced_job(ns).items if not j.spec.suspend)


def _pods(core, ns, job_name, phase=None):
    return [p for p in core.list_namespaced_pod(ns, label_selector="job-name=%s" % job_name).items
            if not p.metadata.deletion_timestamp and (phase is None or p.status.phase == phase)]


def test_two_gang_jobs_admitted_one_at_a_time_never_split(gang):
    ns = "team-vision"
    core, batch = client.CoreV1Api(gang["api"]), client.BatchV1Api(gang["api"])
    try:
        for name in ("gang-a", "gang-b"):
            batch.create_namespaced_job(ns, job(name, pods=2, gpus=4))
            time.sleep(1.1)  # creation order is queue order
        assert wait_for("one gang admitted", lambda: _admitted(batch, ns)) == ["gang-a"]
        running = wait_for("both pods of gang-a Running", lambda: len(_pods(core, ns, "gang-a", "Running")) == 2
                           and _pods(core, ns, "gang-a", "Running"))
        # all of gang-a on the pool's nodes, 4 GPUs each on two nodes
        assert all(p.spec.node_name.startswith("training-") for p in running)
        assert len(set(p.spec.node_name for p in running)) == 2
        # gang-b needs 8 GPUs, 4 are free: it waits whole, not one pod of it starts
        watched = time.monotonic()
        while time.monotonic() - watched < 5:
            assert _admitted(batch, ns) == ["gang-a"]
            assert _pods(core, ns, "gang-b") == []
            time.sleep(0.5)
        for p in running:
            core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"annotations": {
                "gpupool.vcf/sim-complete": "true"}}})
        wait_for("gang-b admitted once gang-a finished", lambda: "gang-b" in _admitted(batch, ns), timeout=60)
        both = wait_for("both pods of gang-b Running", lambda: len(_pods(core, ns, "gang-b", "Running")) == 2
                        and _pods(core, ns, "gang-b", "Running"))
        assert len(set(p.spec.node_name for p in both)) == 2
    finally:
        batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        wait_for("the test's pods gone", lambda: not core.list_namespaced_pod(ns).items, timeout=60)


def _workload_of(api, ns, job_name):
    items = dynamic.DynamicClient(api).resources.get(api_version=KV, kind="Workload").get(namespace=ns).to_dict()
    return [w for w in items["items"] if any(o.get("name") == job_name for o in w["metadata"].get("ownerReferences") or [])]


def test_gang_whose_pods_cannot_all_start_is_evicted_and_blocks_admission(gang):
    """waitForPodsReady as the role configured it: quota admits the job, but with two of the three
    nodes cordoned only one of its pods can run; Kueue evicts it after the design's timeout, and
    admits no other job meanwhile (blockAdmission)."""
    ns = "team-vision"
    core, batch = client.CoreV1Api(gang["api"]), client.BatchV1Api(gang["api"])
    cordoned = ["training-1", "training-2"]
    try:
        for node in cordoned:
            core.patch_node(node, {"spec": {"unschedulable": True}})
        batch.create_namespaced_job(ns, job("stuck", pods=2, gpus=4))
        time.sleep(1.1)
        batch.create_namespaced_job(ns, job("small", pods=1, gpus=2))
        wait_for("stuck admitted", lambda: "stuck" in _admitted(batch, ns))
        wait_for("one pod of stuck Running", lambda: len(_pods(core, ns, "stuck", "Running")) == 1)
        started = time.monotonic()
        # 4 GPUs of quota are free, yet small waits while stuck waits for its pods
        while time.monotonic() - started < 8:
            assert "small" not in _admitted(batch, ns)
            time.sleep(0.5)
        evicted = wait_for("stuck evicted for PodsReadyTimeout", lambda: [
            c for w in _workload_of(gang["api"], ns, "stuck") for c in (w.get("status") or {}).get("conditions") or []
            if c["type"] == "Evicted" and c["status"] == "True" and c.get("reason") == "PodsReadyTimeout"], timeout=60)
        assert evicted
        assert time.monotonic() - started >= 10  # not before the timeout (20 s from admission)
        wait_for("stuck suspended again, its pods gone", lambda: "stuck" not in _admitted(batch, ns)
                 and not _pods(core, ns, "stuck", "Running"), timeout=60)
        wait_for("small admitted after the eviction", lambda: "small" in _admitted(batch, ns), timeout=60)
    finally:
        for node in cordoned:
            core.patch_node(node, {"spec": {"unschedulable": False}})
        batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        wait_for("the test's pods gone", lambda: not core.list_namespaced_pod(ns).items, timeout=60)


def _kueue_findings(gang):
    res, play = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(gang["design_file"]), "links": ["guest"], "kubeconfig": str(gang["rig"].kubeconfig)},
        env=gang["rig"].env)
    assert not res.get("failed"), (res.get("msg"), play.stdout[-2000:])
    return sorted((f["rule"], f["object"]) for f in res["findings"] if f["rule"] in KUEUE_RULES)


def test_audit_judges_the_queues_and_kueues_configuration(gang):
    core = client.CoreV1Api(gang["api"])
    dyn = dynamic.DynamicClient(gang["api"])
    assert _kueue_findings(gang) == []
    cm = core.read_namespaced_config_map(CONFIG_MAP, KUEUE_NS)
    config = yaml.safe_load(cm.data[CONFIG_KEY])
    config["waitForPodsReady"]["timeout"] = "1h"
    core.patch_namespaced_config_map(CONFIG_MAP, KUEUE_NS, {"data": {CONFIG_KEY: yaml.safe_dump(config)}})
    dyn.resources.get(api_version=KV, kind="LocalQueue").delete(name="training", namespace="research")
    try:
        assert _kueue_findings(gang) == [("kueue_config_changed", "config_map kueue-system/kueue-manager-config"),
                                         ("local_queue_missing", "local_queue research/training")]
    finally:
        # the role repairs both (and restarts Kueue's stand-in pod)
        run = run_playbook(role_play(gang["inputs"]), env=gang["rig"].env)
        assert run.rc == 0 and not _failed(run), _failed(run)
    assert _kueue_findings(gang) == []
