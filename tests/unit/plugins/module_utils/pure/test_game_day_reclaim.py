"""The reclaim through Kueue of pure._game_day: the reclaim Job's size from the ClusterQueue's quota and the
victim's pods, its manifest, Kueue's eviction conditions, and the declared resume checks."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _game_day as gd

GPU = "nvidia.com/gpu"


def queue(nominal, reserved, resources=(GPU,)):
    return {"spec": {"resourceGroups": [{"coveredResources": list(resources), "flavors": [
        {"name": "f1", "resources": [{"name": GPU, "nominalQuota": nominal[0]}]},
        {"name": "f2", "resources": [{"name": GPU, "nominalQuota": nominal[1]}]}]}]},
        "status": {"flavorsReservation": [{"name": "f1", "resources": [{"name": GPU, "total": reserved}]}]}}


def pod(gpus, containers=1, limits_only=False):
    res = {"limits": {GPU: str(gpus)}} if limits_only else {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {"spec": {"containers": [{"name": "c%d" % i, "resources": res} for i in range(containers)]}}


def test_free_quota_is_nominal_over_the_flavors_less_the_reservation():
    assert gd.free_quota(queue((8, 4), 10), GPU) == 2  # 12 nominal, 10 reserved: by hand
    assert gd.free_quota(queue((8, 0), 9), GPU) == 0  # never below 0 (borrowed from the cohort)
    assert gd.free_quota(queue(("8Gi", 0), 0), GPU) is None


@pytest.mark.parametrize("pods, q, with_free, want", [
    # 2 pods of 2 GPUs (4 held) and 4 free of 8: 8 GPUs needed, 4 pods of 2
    ([pod(2), pod(2)], queue((8, 0), 4), True, ({GPU: 2}, 4)),
    # the same victim as the second of a run: its own 4 only
    ([pod(2), pod(2)], queue((8, 0), 4), False, ({GPU: 2}, 2)),
    # 4 held (a pod of 3 and one of 1, shaped as the largest) plus 2 free: 6 -> 2 pods of 3
    ([pod(3), pod(1)], queue((4, 4), 6), True, ({GPU: 3}, 2)),
    # two containers of 1 GPU make a pod of 2; limits alone count
    ([pod(1, containers=2, limits_only=True)], queue((4, 0), 2), True, ({GPU: 2}, 2)),
])
def test_the_reclaim_needs_the_victims_quota_and_all_the_free_quota(pods, q, with_free, want):
    per_pod, count = gd.reclaim_size(pods, q, with_free=with_free)
    assert (per_pod, count) == want
    held = sum(gd.pod_requests(p, [GPU])[GPU] for p in pods)
    free = gd.free_quota(q, GPU) if with_free else 0
    assert per_pod[GPU] * count >= held + free  # Kueue cannot admit it without preempting the victim's share
    assert per_pod[GPU] * (count - 1) < held + free  # and it asks no more than that


def test_a_victim_asking_for_nothing_the_queue_covers_is_refused():
    with pytest.raises(gd.GameDayError, match="none of the resources the ClusterQueue's quota covers"):
        gd.reclaim_size([{"spec": {"containers": [{"resources": {"requests": {"cpu": "2"}}}]}}], queue((8, 0), 0))


def test_the_reclaim_job_is_suspended_on_the_victims_queue_at_the_higher_class():
    entry = dict(namespace="team-a", job="gang-a", local_queue="training")
    job = gd.reclaim_job(entry, gd.reclaim_name("gang-a", "0a1b2c"), "gpu-inference", "pause:1", {GPU: 2}, 4)
    assert job["metadata"]["name"] == "gd-gang-a-0a1b2c" and job["metadata"]["namespace"] == "team-a"
    assert job["metadata"]["labels"] == {gd.QUEUE_LABEL: "training", gd.RECLAIM_LABEL: "team-a.gang-a"}
    spec = job["spec"]
    assert spec["suspend"] is True and spec["parallelism"] == spec["completions"] == 4
    pod_spec = spec["template"]["spec"]
    assert pod_spec["priorityClassName"] == "gpu-inference"
    assert pod_spec["containers"][0]["resources"] == {"requests": {GPU: "2"}, "limits": {GPU: "2"}}
    long = gd.reclaim_name("x" * 80, "0a1b2c")
    assert len(long) == 63 and long.endswith("-0a1b2c")


def test_eviction_reads_kueues_conditions():
    assert gd.eviction({"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}) is None
    assert gd.eviction({"status": {"conditions": [{"type": "Evicted", "status": "False", "reason": "Preempted"}]}}) is None
    wl = {"status": {"conditions": [
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload"},
        {"type": "Preempted", "status": "True", "reason": "InClusterQueue"}]}}
    assert gd.eviction(wl) == dict(evicted="Preempted", preempted="InClusterQueue",
                                   message="Preempted to accommodate a workload")


def job(annotations=None, conditions=None):
    return {"metadata": {"annotations": annotations or {}}, "status": {"conditions": conditions or []}}


def test_an_annotation_check_wants_a_value_the_job_did_not_carry_before():
    check = {"annotation": "a/step"}
    assert gd.resume_seen(check, job(), job({"a/step": "120"}), None) == (True, "annotation a/step=120 (was unset)")
    assert gd.resume_seen(check, job({"a/step": "80"}), job({"a/step": "120"}), None)[0] is True
    passed, why = gd.resume_seen(check, job({"a/step": "120"}), job({"a/step": "120"}), None)
    assert passed is False and "the one it had before the preemption" in why
    assert gd.resume_seen(check, job(), job(), None) == (False, "the Job carries no annotation a/step")


def test_a_condition_check_wants_it_true_since_the_preemption():
    check = {"condition": "Resumed"}
    since = "2026-04-01T10:00:00Z"
    now = job(conditions=[{"type": "Resumed", "status": "True", "lastTransitionTime": "2026-04-01T10:00:05Z"}])
    assert gd.resume_seen(check, None, now, since)[0] is True
    old = job(conditions=[{"type": "Resumed", "status": "True", "lastTransitionTime": "2026-04-01T09:00:00Z"}])
    assert "before the preemption" in gd.resume_seen(check, None, old, since)[1]
    off = job(conditions=[{"type": "Resumed", "status": "False", "lastTransitionTime": "2026-04-01T10:00:05Z"}])
    assert gd.resume_seen(check, None, off, since) == (False, "the Job has no condition Resumed True")


def test_survival_needs_the_resume_check_too():
    out = dict(state=gd.RECOVERED, check=None, resume=dict(passed=False))
    assert gd.survived(out) is False
    assert gd.survived(dict(out, resume=dict(passed=True))) is True
    assert gd.survived(dict(out, resume=None)) is True


@pytest.mark.parametrize("params, message", [
    (dict(resume_check={"annotation": "a", "command": "true"}), "exactly one of annotation, condition and command"),
    (dict(resume_check={}), "not none"),
    (dict(method="delete", resume_check={"annotation": "a"}), "resume_check annotation needs method preempt"),
    (dict(reclaim_priority_class=" "), "reclaim_priority_class must not be empty"),
    (dict(reclaim_hold=-1), "reclaim_hold must be 0 or more seconds"),
])
def test_input_errors_of_the_reclaim(params, message):
    assert any(message in e for e in gd.input_errors(params)), gd.input_errors(params)


def test_a_command_check_goes_with_either_method():
    assert gd.input_errors(dict(method="delete", resume_check={"command": "true"})) == []
