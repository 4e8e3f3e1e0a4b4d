"""guest_node_drain through main(): the real DrainApi on a fake guest cluster's Kubernetes API
(tests/lib/fakes_guest.py), so the cordon annotations, the Eviction API's answers and the K8sError of the
client's boundary are the product's. Check mode predicts the real run and writes nothing; a rerun is
idempotent; a restore undoes the drain."""
import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY
from ansible_collections.gpupool.vcf.plugins.modules import guest_node_drain
from tests.lib.fakes_guest import GuestCluster, budget, drain_api, node, pod
from tests.lib.module_docs import leaked, missing_keys, secret_options
from tests.lib.module_main import K8S, run_main

API_KEY = "k8s-api-key-drain-41"
OWNER = "host-roll/esx-01"


@pytest.fixture
def guest(monkeypatch):
    cluster = GuestCluster(
        nodes=[node("tkc-gpu-1"), node("tkc-gpu-2"), node("tkc-cpu-1", gpus=0)],
        pods=[pod("web-0", "tkc-gpu-1", app="web"), pod("llm-0", "tkc-gpu-1", app="llm"),
              pod("llm-1", "tkc-gpu-2", app="llm"), pod("static-0", "tkc-gpu-1", owner=None),
              pod("agent-x", "tkc-gpu-1", namespace="kube-system", owner="DaemonSet")],
        budgets=[budget("llm", "llm", allowed=1)])
    monkeypatch.setattr(guest_node_drain, "DrainApi", drain_api(cluster))
    return cluster


def args(**extra):
    out = dict(K8S, api_key=API_KEY, vms=[dict(name="tkc-gpu-1"), dict(name="not-a-node")], owner=OWNER)
    out.update(extra)
    return out


def test_check_mode_predicts_the_drain_and_changes_nothing_then_the_real_run_does_it(guest):
    checked = run_main(guest_node_drain, args(), check_mode=True)
    assert not checked.get("failed"), checked.get("msg")
    assert guest.writes() == []
    assert missing_keys(guest_node_drain, checked) == []
    assert checked["changed"] is True and checked["cordoned"] == ["tkc-gpu-1"]
    assert checked["nodes"] == {"tkc-gpu-1": "tkc-gpu-1", "not-a-node": None} and checked["not_nodes"] == ["not-a-node"]
    # the pod no controller owns is evicted too (named under unmanaged); the DaemonSet's pod is skipped
    assert sorted(checked["evicted"]) == ["apps/llm-0", "apps/static-0", "apps/web-0"]
    assert [p["name"] for p in checked["drain"]["tkc-gpu-1"]["unmanaged"]] == ["static-0"]
    assert "seconds" not in checked

    real = run_main(guest_node_drain, args())
    assert not real.get("failed"), real.get("msg")
    assert missing_keys(guest_node_drain, real) == []
    assert set(real["seconds"]) == {"cordon", "evict", "wait_gone"}
    assert dict((k, v) for k, v in real.items() if k != "seconds") == checked
    n = guest.nodes["tkc-gpu-1"]
    assert n["spec"]["unschedulable"] is True and n["metadata"]["annotations"][CORDONED_BY] == OWNER
    assert sorted(guest.pods) == ["apps/llm-1", "kube-system/agent-x"]
    assert guest.nodes["tkc-gpu-2"]["spec"] == {}
    assert guest.made[0]["kubeconfig"] == K8S["kubeconfig"] and guest.made[0]["api_key"] == API_KEY


def test_a_rerun_of_the_drain_and_of_the_restore_changes_nothing(guest):
    run_main(guest_node_drain, args())
    writes = len(guest.writes())
    again = run_main(guest_node_drain, args())
    assert not again.get("failed") and again["changed"] is False, again
    assert again["cordoned"] == [] and again["evicted"] == [] and len(guest.writes()) == writes

    restore = run_main(guest_node_drain, args(state="restored"), check_mode=True)
    assert restore["changed"] is True and restore["uncordoned"] == ["tkc-gpu-1"]
    assert len(guest.writes()) == writes  # check mode
    restored = run_main(guest_node_drain, args(state="restored"))
    assert not restored.get("failed"), restored.get("msg")
    assert restored["changed"] is True and restored["uncordoned"] == ["tkc-gpu-1"]
    assert set(restored["seconds"]) == {"wait_ready", "uncordon"}
    n = guest.nodes["tkc-gpu-1"]
    assert not n["spec"].get("unschedulable") and CORDONED_BY not in n["metadata"]["annotations"]
    again = run_main(guest_node_drain, args(state="restored"))
    assert again["changed"] is False and again["uncordoned"] == []


def test_a_node_an_administrator_cordoned_is_not_restored(guest):
    guest.nodes["tkc-gpu-2"]["spec"]["unschedulable"] = True
    guest.nodes["tkc-gpu-2"]["metadata"]["annotations"][CORDONED_BY] = "someone-else"
    result = run_main(guest_node_drain, args(state="restored", vms=[dict(name="tkc-gpu-2")]))
    assert result["changed"] is False and result["uncordoned"] == [] and guest.writes() == []


def test_diff_mode_shows_the_cordon_and_the_pods_that_leave_as_check_mode_predicts(guest):
    checked = run_main(guest_node_drain, args(), check_mode=True, diff=True)
    assert not checked.get("failed"), checked.get("msg")
    assert guest.writes() == []
    on_node = ["apps/llm-0", "apps/static-0", "apps/web-0", "kube-system/agent-x"]
    assert checked["diff"] == dict(
        before=dict(nodes={"tkc-gpu-1": dict(unschedulable=False, cordoned_by=None, pods=on_node)}, workloads={}),
        after=dict(nodes={"tkc-gpu-1": dict(unschedulable=True, cordoned_by=OWNER, pods=["kube-system/agent-x"])},
                   workloads={}))
    real = run_main(guest_node_drain, args(), diff=True)
    assert not real.get("failed"), real.get("msg")
    assert real["diff"] == checked["diff"]
    # what the diff said is what the cluster now holds
    assert guest.nodes["tkc-gpu-1"]["spec"]["unschedulable"] is True
    left = sorted(k for k, p in guest.pods.items() if p["spec"].get("nodeName") == "tkc-gpu-1")
    assert left == ["kube-system/agent-x"]
    again = run_main(guest_node_drain, args(), diff=True)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"] == checked["diff"]["after"]
    assert "diff" not in run_main(guest_node_drain, args())


def test_diff_mode_of_the_restore_shows_the_nodes_uncordoned_and_leaves_the_others(guest):
    run_main(guest_node_drain, args())
    guest.nodes["tkc-gpu-2"]["spec"]["unschedulable"] = True
    guest.nodes["tkc-gpu-2"]["metadata"]["annotations"][CORDONED_BY] = "someone-else"
    vms = [dict(name="tkc-gpu-1"), dict(name="tkc-gpu-2")]
    checked = run_main(guest_node_drain, args(state="restored", vms=vms), check_mode=True, diff=True)
    real = run_main(guest_node_drain, args(state="restored", vms=vms), diff=True)
    assert not real.get("failed"), real.get("msg")
    other = dict(unschedulable=True, cordoned_by="someone-else")
    assert real["diff"] == checked["diff"] == dict(
        before=dict(nodes={"tkc-gpu-1": dict(unschedulable=True, cordoned_by=OWNER), "tkc-gpu-2": other}),
        after=dict(nodes={"tkc-gpu-1": dict(unschedulable=False, cordoned_by=None), "tkc-gpu-2": other}))
    assert guest.nodes["tkc-gpu-2"]["spec"]["unschedulable"] is True


@pytest.mark.parametrize("bad, message", [
    (dict(owner=" "), "owner must not be empty"),
    (dict(vms=[dict(name="")]), "vms[0].name must not be empty"),
    (dict(protected_priority_classes=["gpu-inference", ""]), "protected_priority_classes[1] is empty"),
    (dict(state="restored", owners=[""]), "owners[0] is empty"),
])
def test_bad_input_is_refused_before_the_cluster_is_reached(guest, bad, message):
    result = run_main(guest_node_drain, args(**bad))
    assert result["failed"] is True and result["msg"].startswith("Invalid input for guest_node_drain: ")
    assert message in result["msg"], result["msg"]
    assert guest.made == [] and guest.calls == []


def test_a_bad_request_timeout_is_refused_before_the_cluster_is_reached(guest):
    result = run_main(guest_node_drain, args(request_timeout=0))
    assert result["failed"] is True and "request_timeout must be a whole number of seconds, 1 or more, not 0" \
        in result["msg"], result["msg"]
    assert guest.made == [] and guest.calls == []


def test_a_budget_that_never_allows_a_disruption_is_refused_before_anything_changes(guest):
    guest.budgets[0]["status"].update(disruptionsAllowed=0, desiredHealthy=2)  # wants every pod it covers healthy
    guest.pods["apps/llm-0"]["spec"]["priorityClassName"] = "gpu-inference"
    result = run_main(guest_node_drain, args(protected_priority_classes=["gpu-inference"]))
    assert result["failed"] is True
    assert "apps/llm-0 on tkc-gpu-1 (PodDisruptionBudget llm wants every pod it covers healthy)" in result["msg"], \
        result["msg"]
    assert result["msg"].endswith("Nothing was changed."), result["msg"]
    assert guest.writes() == [] and "tkc-gpu-1" in result["drain"]


def test_a_budget_that_lets_nothing_go_within_the_timeout_fails_naming_the_pod_and_what_was_left(guest):
    guest.budgets[0]["status"]["disruptionsAllowed"] = 0
    result = run_main(guest_node_drain, args(timeout=120))
    assert result["failed"] is True
    assert result["msg"] == (
        "Unable to evict the pods of the guest nodes of 2 VMs (host-roll/esx-01): the drain's deadline (120 s) passed "
        "before every pod was evicted; still in the way: on node tkc-gpu-1: apps/llm-0 (PodDisruptionBudget llm allows "
        "no disruption) (left: nodes left cordoned: tkc-gpu-1; pods evicted so far: apps/static-0, apps/web-0; a plain "
        "rerun resumes from there)"), result["msg"]
    assert guest.clock.now == pytest.approx(120.0)
    assert result["cordoned"] == ["tkc-gpu-1"] and "apps/llm-0" in guest.pods


def test_an_api_error_while_reading_names_what_failed_and_that_nothing_changed(guest):
    guest.fail["list_pod_disruption_budget_for_all_namespaces"] = ApiException(status=403, reason="Forbidden")
    result = run_main(guest_node_drain, args())
    assert result["failed"] is True
    assert result["msg"].startswith("Unable to read the guest nodes of 2 VMs (host-roll/esx-01): cannot list the "
                                    "PodDisruptionBudgets: "), result["msg"]
    assert "403" in result["msg"] and guest.writes() == []


def test_an_api_error_during_the_evictions_names_the_pod_and_what_was_left(guest):
    calls = dict(n=0)
    real = guest.create_namespaced_pod_eviction

    def second_refused(name, namespace, body):
        calls["n"] += 1
        if calls["n"] == 2:
            guest.calls.append(("create_namespaced_pod_eviction", name, namespace))
            raise ApiException(status=403, reason="Forbidden")
        return real(name, namespace, body)

    guest.create_namespaced_pod_eviction = second_refused
    result = run_main(guest_node_drain, args())
    assert result["failed"] is True
    msg = result["msg"]
    assert msg.startswith("Unable to evict the pods of the guest nodes of 2 VMs (host-roll/esx-01): cannot evict "
                          "pod apps/"), msg
    assert "(left: nodes left cordoned: tkc-gpu-1; pods evicted so far: apps/" in msg, msg
    assert msg.endswith("a plain rerun resumes from there)"), msg
    assert result["cordoned"] == ["tkc-gpu-1"]  # what the run attempted goes with the failure
    assert guest.nodes["tkc-gpu-1"]["spec"]["unschedulable"] is True

    guest.create_namespaced_pod_eviction = real  # the rerun resumes
    again = run_main(guest_node_drain, args())
    assert not again.get("failed") and again["changed"] is True and again["cordoned"] == [], again
    assert len(again["evicted"]) == 2 and sorted(guest.pods) == ["apps/llm-1", "kube-system/agent-x"]


def test_the_api_key_is_not_in_the_result(guest):
    assert secret_options(guest_node_drain.ARGUMENT_SPEC) == ["api_key"]
    for check_mode in (True, False):
        result = run_main(guest_node_drain, args(), check_mode=check_mode)
        assert not result.get("failed"), result.get("msg")
        assert leaked(result, [API_KEY]) == []
