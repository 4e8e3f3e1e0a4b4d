"""Game day on the real Kueue v0.17 controller: the queue as the collection writes it, gang Jobs running on it.

The example design's gang-scheduled training pool (2 nodes of 4 GPUs) becomes, by derive() and the
gpu_scheduling_policy role, the ResourceFlavor, ClusterQueue ``gpupool-training`` and the LocalQueues
``training`` (Kueue's own configuration is left alone here: no waitForPodsReady restart). Three gang Jobs of 2
pods run on it (two in team-vision, one in research), created suspended with the queue label as Kueue's webhook
would have made them; Kueue admits them and the Job controller starts their pods on the kwok nodes.

Then: check mode lists what would be killed and kills nothing; the playbook kills the chosen pods, the Job
controller brings each Job back, the user's check command runs per job with the job in its environment, and the
JSON and Markdown reports say every hit job survived; a check command that fails marks its job lost; a bound
shorter than the job takes to come back (its nodes cordoned meanwhile) names the job as not recovered.
"""
from __future__ import annotations

import json
import time

import pytest
from k8s_fixtures import wait_for
from kubernetes import client

from tests.lib import kueue_rig
from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.kueue_rig import derived_inputs, queued_job, training_nodes
from tests.lib.paths import ROOT

CQ, LQ = "gpupool-training", "training"
JOBS = [("team-vision", "gang-a"), ("team-vision", "gang-b"), ("research", "gang-c")]
NODES = training_nodes(2)


def role_play(inputs):
    # the derived inputs one to one, as site.yml passes them; Kueue's configuration is not rewritten
    # here (the rig runs Kueue as a process: see test_kueue_gang_admission.py for that part), no culling
    return kueue_rig.role_play(inputs, gpu_scheduling_policy_culling="none",
                               gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout="")


def gang_job(name, pods=2, gpus=1, backoff_limit=6):
    """A checkpointing training job as users submit it to the queue: a backoff limit that allows lost pods."""
    return queued_job(name, LQ, pods, gpus, backoff_limit=backoff_limit, grace_seconds=5)


def running(core, ns, job_name):
    """{pod name: uid} of the Job's Running pods that are not being deleted."""
    return dict((p.metadata.name, p.metadata.uid) for p in core.list_namespaced_pod(
        ns, label_selector="batch.kubernetes.io/job-name=%s" % job_name).items
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp)


def all_running(core):
    return dict(("%s/%s" % key, running(core, *key)) for key in JOBS)


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("game-day")
    with kueue_rig.kueue_rig(tmp, NODES) as rig:
        api = rig.api_client()
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        inputs = derived_inputs()
        [queue] = inputs["gpu_scheduling_policy_kueue_queues"]
        assert (queue["name"], queue["local_queue"]) == (CQ, LQ)
        converge = run_playbook(role_play(inputs), env=rig.env)
        assert converge.rc == 0, converge.stdout[-3000:]
        for ns, name in JOBS:
            batch.create_namespaced_job(ns, gang_job(name))
        wait_for("the three gang jobs Running, 2 pods each",
                 lambda: all(len(pods) == 2 for pods in all_running(core).values()), timeout=90)
        yield dict(rig=rig, core=core, batch=batch, tmp=tmp)


def game_day(day, check=False, diff=False, **args):
    # method delete: the pod kill (a pod lost with its node); the reclaim through Kueue is test_game_day_preemption.py
    base = dict(kubeconfig=str(day["rig"].kubeconfig), cluster_queue=CQ, local_queue=LQ, poll_interval=0.5,
                method="delete")
    return run_module("gpupool.vcf.gpu_game_day", dict(base, **args), env=day["rig"].env, check=check, diff=diff)[0]


def nodes_of_pods(core):
    """{namespace/pod: node} of the gang jobs' Running pods."""
    out = {}
    for ns, job_name in JOBS:
        for p in core.list_namespaced_pod(ns, label_selector="batch.kubernetes.io/job-name=%s" % job_name).items:
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp:
                out["%s/%s" % (ns, p.metadata.name)] = p.spec.node_name
    return out


def test_check_mode_lists_what_would_be_killed_and_kills_nothing(day):
    before = all_running(day["core"])
    nodes = nodes_of_pods(day["core"])
    result = game_day(day, check=True, diff=True, jobs=2, pods=1, seed=11)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True and result["killed"] == []
    chosen = result["would_kill"]
    assert len(chosen) == 2 and all(len(c["kill"]) == 1 for c in chosen)
    for c in chosen:
        assert c["kill"][0] in before["%s/%s" % (c["namespace"], c["job"])]
        assert c["workload"] and c["local_queue"] == LQ
    # --diff: the Running pods of the two chosen jobs on their nodes, and after the kill without the chosen pods
    hit = dict(("%s/%s" % (c["namespace"], c["job"]), c) for c in chosen)
    wanted = dict(("%s/%s" % (job.split("/")[0], pod), dict(job=job, node=nodes["%s/%s" % (job.split("/")[0], pod)]))
                  for job in hit for pod in before[job])
    assert result["diff"]["before"] == dict(pods=wanted), result["diff"]
    killed = set("%s/%s" % (c["namespace"], c["kill"][0]) for c in chosen)
    assert result["diff"]["after"] == dict(pods=dict((k, v) for k, v in wanted.items() if k not in killed))
    assert "nothing was killed" in result["markdown"]
    # the same seed chooses the same again; nothing was deleted
    assert game_day(day, check=True, jobs=2, pods=1, seed=11)["would_kill"] == chosen
    assert all_running(day["core"]) == before


def test_game_day_kills_pods_they_come_back_and_the_report_says_so(day):
    core, tmp = day["core"], day["tmp"]
    ckpt = tmp / "checkpoints"
    ckpt.mkdir()
    for ns, name in JOBS:
        (ckpt / ("%s.%s" % (ns, name))).write_text("step 1200\n")
    seen = tmp / "checks.log"
    command = ('echo "$GAME_DAY_NAMESPACE/$GAME_DAY_JOB $GAME_DAY_WORKLOAD $GAME_DAY_CLUSTER_QUEUE '
               '$GAME_DAY_LOCAL_QUEUE $GAME_DAY_PODS_KILLED $GAME_DAY_RECOVERED" >> %s; '
               'test -s "%s/$GAME_DAY_NAMESPACE.$GAME_DAY_JOB"' % (seen, ckpt))
    predicted = game_day(day, check=True, jobs=2, seed=3)["would_kill"]
    before = all_running(core)
    out = tmp / "reports"
    started = time.monotonic()
    run = run_playbook(ROOT / "playbooks" / "game_day.yml", env=day["rig"].env, extra_vars=dict(
        game_day_kubeconfig=str(day["rig"].kubeconfig), game_day_cluster_queue=CQ, game_day_local_queue=LQ,
        game_day_jobs=2, game_day_seed=3, game_day_recovery_timeout=90, game_day_check_command=command,
        game_day_poll_interval=0.5, game_day_output_dir=str(out), game_day_name="day-1", game_day_method="delete"))
    took = time.monotonic() - started
    assert run.rc == 0, run.stdout[-4000:]
    report = json.loads((out / "day-1.json").read_text())
    markdown = (out / "day-1.md").read_text()
    hit = [(j["namespace"], j["job"], j["kill"]) for j in report["jobs"]]
    assert hit == [(c["namespace"], c["job"], c["kill"]) for c in predicted]  # what check mode said
    assert report["pods_killed"] == 4 and report["lost"] == [] and len(report["survived"]) == 2
    after = all_running(core)
    for j in report["jobs"]:
        name = "%s/%s" % (j["namespace"], j["job"])
        assert j["state"] == "recovered" and j["survived"] is True, j
        assert sorted(j["kill"]) == sorted(before[name])  # every Running pod of the job was killed
        # running again: as many pods, none of them a killed one (new uids)
        assert len(after[name]) == 2 and set(after[name].values()).isdisjoint(before[name].values()), after[name]
        assert 0 < j["seconds"] <= 90 and j["seconds"] < took
        assert j["check"]["rc"] == 0
        assert "| %s | %s | recovered | %.2f |" % (name, ", ".join(j["kill"]), j["seconds"]) in markdown
    untouched = [k for k in before if k not in report["survived"]]
    assert len(untouched) == 1 and after[untouched[0]] == before[untouched[0]]  # the third job was not touched
    lines = sorted(seen.read_text().splitlines())
    assert lines == sorted("%s/%s %s %s %s %s true" % (j["namespace"], j["job"], j["workload"], CQ, LQ,
                                                       ",".join(j["kill"])) for j in report["jobs"])
    assert "Every hit job survived." in markdown
    print("game day figures: seconds until Running again %s, run %.1f s" % (
        [j["seconds"] for j in report["jobs"]], took))


def test_a_failing_or_hanging_checkpoint_check_marks_the_job_lost(day):
    command = ('if [ "$GAME_DAY_JOB" = gang-a ]; then sleep 30; fi; '
               'echo "no checkpoint for $GAME_DAY_JOB"; exit 3')
    nodes = nodes_of_pods(day["core"])
    result = game_day(day, only=["research/gang-c", "team-vision/gang-a"], jobs=2, pods=1, recovery_timeout=90,
                      check_command=command, check_timeout=2)
    assert result.get("failed"), result
    # each pod killed, with the Job it belonged to and the node it ran on, even though the run failed
    assert [(k["namespace"], k["job"]) for k in result["killed"]] == [("research", "gang-c"), ("team-vision", "gang-a")]
    for k in result["killed"]:
        assert k["node"] == nodes["%s/%s" % (k["namespace"], k["name"])] and k["node"], (k, nodes)
    assert [[k["name"]] for k in result["killed"]] == [j["kill"] for j in result["jobs"]]
    assert "2 of 2 hit jobs did not survive" in result["msg"], result["msg"]
    assert "research/gang-c (the check command exited 3)" in result["msg"]
    assert "team-vision/gang-a (the check command exited 124)" in result["msg"]
    failed, hung = result["jobs"]  # by namespace/name
    assert failed["job"] == "gang-c" and failed["state"] == "recovered" and failed["survived"] is False
    assert failed["check"]["rc"] == 3 and failed["check"]["output"] == "no checkpoint for gang-c\n"
    assert hung["job"] == "gang-a" and hung["state"] == "recovered" and hung["survived"] is False
    assert hung["check"]["rc"] == 124 and "stopped after check_timeout, 2 s" in hung["check"]["output"]
    assert hung["check"]["seconds"] < 10
    assert result["lost"] == ["research/gang-c", "team-vision/gang-a"]
    wait_for("gang-c Running", lambda: len(running(day["core"], "research", "gang-c")) == 2)


def test_a_bound_too_short_names_the_job_not_recovered(day):
    """The job's replacement pod cannot start for a while (the pool's nodes are cordoned, as during a host roll):
    a 3 s bound is too short, the job is named as not recovered; once the nodes are back it runs again."""
    core = day["core"]
    name = "team-vision/gang-b"
    before = running(core, "team-vision", "gang-b")
    training = [n.metadata.name for n in core.list_node(label_selector="gpupool.vcf/pool=training").items]
    try:
        for node in training:
            core.patch_node(node, {"spec": {"unschedulable": True}})
        result = game_day(day, only=[name], pods=1, recovery_timeout=3)
    finally:
        for node in training:
            core.patch_node(node, {"spec": {"unschedulable": False}})
    assert result.get("failed"), result
    assert "did not survive: %s (not recovered: not Running again within 3 s" % name in result["msg"]
    [job] = result["jobs"]
    assert job["state"] == "not_recovered" and job["seconds"] is None and job["survived"] is False
    assert job["detail"].endswith("1 of 2 pods Running"), job["detail"]
    assert result["lost"] == [name] and result["survived"] == []
    assert "| %s | %s | not recovered |" % (name, job["kill"][0]) in result["markdown"]
    # the job itself was fine: it runs again, on a new pod, once it can
    back = wait_for("gang-b Running again", lambda: len(running(core, "team-vision", "gang-b")) == 2
                    and running(core, "team-vision", "gang-b"), timeout=120)
    assert job["kill"][0] not in back and set(back) != set(before)


def test_nothing_running_in_the_queue_is_refused(day):
    result = game_day(day, cluster_queue="gpupool-inference", jobs=1)
    assert result.get("failed") and "no running Kueue-admitted job in the queue" in result["msg"], result
