"""A drained node's training pods of an admitted Kueue Workload leave through Kueue (the Workload deactivated
and requeued), not one by one; other pods are evicted as before."""
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _drain


def pod(name, node, owner_kind=None, owner_uid=None, priority="training"):
    meta = {"namespace": "ml", "name": name, "uid": "u-" + name}
    if owner_kind:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": "owner-" + owner_uid, "uid": owner_uid, "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node, "priorityClassName": priority}, "status": {"phase": "Running"}}


def workload(name, job_uid, admitted=True, active=None, mark=None):
    wl = {"metadata": {"namespace": "ml", "name": name, "ownerReferences": [{"kind": "Job", "uid": job_uid}],
                       "annotations": {_drain.KUEUE_DEACTIVATED_BY: mark} if mark else {}},
          "spec": {} if active is None else {"active": active},
          "status": {"admission": {"clusterQueue": "training"}} if admitted else {}}
    return wl


PODS = [pod("gang-0", "n1", "Job", "j1"), pod("gang-1", "n2", "Job", "j1"), pod("solo", "n1", "Job", "j2"),
        pod("web", "n1", "ReplicaSet", "rs", priority="")]


def test_the_pods_of_an_admitted_workload_on_the_drained_nodes_go_through_kueue():
    plan = _drain.drain_plan(["n1"], PODS, [], [])
    requeue = _drain.kueue_requeues(plan, PODS, [workload("job-gang", "j1"), workload("job-solo", "j2", admitted=False)])
    assert list(requeue) == ["ml/job-gang"]
    assert requeue["ml/job-gang"]["job"] == "owner-j1"
    assert [r["name"] for r in requeue["ml/job-gang"]["pods"]] == ["gang-0"]  # gang-1 is on a node not drained
    assert _drain.kueue_requeues(plan, PODS, []) == {}  # no Kueue: every pod is evicted


def test_a_rerun_finds_the_workloads_its_owner_left_inactive():
    wls = [workload("a", "j1", active=False, mark="host-roll/esx-1"), workload("b", "j2", active=False),
           workload("c", "j3", active=True, mark="host-roll/esx-1"), workload("d", "j4", active=False, mark="other")]
    assert _drain.workloads_left_inactive(wls, ["host-roll/esx-1"]) == [{"namespace": "ml", "name": "a"}]
