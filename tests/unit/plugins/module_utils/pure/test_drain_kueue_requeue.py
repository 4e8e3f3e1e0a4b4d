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


def test_the_diff_of_a_drain_names_the_workloads_that_leave_through_kueue_and_the_pods_that_go():
    plan = _drain.drain_plan(["n1"], PODS + [pod("agent", "n1", "DaemonSet", "ds")], [], [])
    before, after = _drain.drain_diff(plan, {"n1": True}, {"n1": "host-roll/esx-0"}, "host-roll/esx-1",
                                      requeue=["ml/job-gang"], reactivate=["ml/left"])
    assert before == dict(nodes={"n1": dict(unschedulable=True, cordoned_by="host-roll/esx-0",
                                            pods=["ml/agent", "ml/gang-0", "ml/solo", "ml/web"])},
                          workloads={"ml/job-gang": "admitted", "ml/left": "inactive"})
    # a node already cordoned keeps its mark; only the DaemonSet's pod stays
    assert after == dict(nodes={"n1": dict(unschedulable=True, cordoned_by="host-roll/esx-0", pods=["ml/agent"])},
                         workloads={"ml/job-gang": "requeued", "ml/left": "requeued"})
    fresh = _drain.drain_diff(plan, {"n1": False}, {"n1": None}, "host-roll/esx-1")[1]
    assert fresh["nodes"]["n1"]["cordoned_by"] == "host-roll/esx-1" and fresh["workloads"] == {}


def test_the_diff_of_a_restore_uncordons_only_the_nodes_it_names():
    before, after = _drain.restore_diff(["n1", "n2"], {"n1": True, "n2": True}, {"n1": "a", "n2": "b"}, ["n1"])
    assert before == dict(nodes={"n1": dict(unschedulable=True, cordoned_by="a"),
                                 "n2": dict(unschedulable=True, cordoned_by="b")})
    assert after == dict(nodes={"n1": dict(unschedulable=False, cordoned_by=None),
                                "n2": dict(unschedulable=True, cordoned_by="b")})
