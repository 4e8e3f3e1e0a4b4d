"""The guest driver upgrade policy from the design to the ClusterPolicy (derive, the role's chart values, the
fields the audit expects), the rule on a policy that drains a whole pool, and the progress of the upgrade
controller read from node labels over time. Expected values are written out by hand from the ClusterPolicy CRD
of the GPU Operator chart (spec.driver.upgradePolicy) and the chart's template (gpuPodDeletion)."""
from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _driver_upgrade as du
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from tests.lib.design_edit import EXAMPLE
from tests.lib.paths import ROOT


def test_the_example_derives_one_node_at_a_time_with_pdbs_honoured():
    op = derive(EXAMPLE)["roles"]["gpu_operator"]
    assert dict(op["gpu_operator_driver_upgrade"]) == {"max_parallel": 1, "drain_timeout_s": 300,
                                                       "honour_pdbs": True, "step_timeout_s": 900}


def test_the_designs_policy_goes_into_the_cluster_policy_fields():
    design = copy.deepcopy(EXAMPLE)
    design.setdefault("guest", {})["driver_upgrade"] = {"max_parallel": 2, "drain_timeout_s": 600,
                                                        "honour_pdbs": False}
    op = _k8s_objects.role_inputs("gpu_operator", derive(design)["roles"]["gpu_operator"])
    spec = _k8s_objects.cluster_policy_spec(op)
    assert spec["driver"]["upgradePolicy"] == {
        "autoUpgrade": True, "maxParallelUpgrades": 2, "maxUnavailable": 2,
        "podDeletion": {"force": True, "timeoutSeconds": 600},
        "drain": {"enable": True, "force": True, "timeoutSeconds": 600}}


def test_defaults_honour_pdbs_and_no_limit_is_every_node():
    fields = dict(du.cluster_policy_fields({}))
    base = ("driver", "upgradePolicy")
    assert fields[base + ("drain", "force")] is False and fields[base + ("podDeletion", "force")] is False
    assert fields[base + ("maxParallelUpgrades",)] == 1 and fields[base + ("maxUnavailable",)] == 1
    assert dict(du.cluster_policy_fields({"max_parallel": 0}))[base + ("maxUnavailable",)] == "100%"


def test_chart_values_use_the_charts_key_for_pod_deletion():
    values = du.chart_values({"drain_timeout_s": 120})
    assert values == {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1,
                      "gpuPodDeletion": {"force": False, "timeoutSeconds": 120, "deleteEmptyDir": False},
                      "drain": {"enable": True, "force": False, "timeoutSeconds": 120, "deleteEmptyDir": False},
                      "waitForCompletion": {"timeoutSeconds": 0}}
    # every key is one the chart's ClusterPolicy template reads under .Values.driver.upgradePolicy
    template = (ROOT.parent / "shared" / "charts" / "gpu-operator" / "templates" / "clusterpolicy.yaml")
    if template.is_file():
        text = template.read_text()
        for key in ("autoUpgrade", "maxParallelUpgrades", "maxUnavailable", "gpuPodDeletion.force",
                    "gpuPodDeletion.timeoutSeconds", "drain.enable", "drain.force", "drain.timeoutSeconds",
                    "waitForCompletion.timeoutSeconds"):
            assert ".Values.driver.upgradePolicy.%s" % key in text, key


def test_role_defaults_match_the_audits_defaults():
    defaults = yaml.safe_load((ROOT / "roles" / "gpu_operator" / "defaults" / "main.yml").read_text())
    assert defaults["gpu_operator_driver_upgrade"] == _k8s_objects.ROLE_DEFAULTS["gpu_operator"][
        "gpu_operator_driver_upgrade"] == dict(du.DEFAULT_POLICY)


def test_a_policy_that_drains_a_whole_pool_is_a_warning():
    design = copy.deepcopy(EXAMPLE)
    assert not [f for f in validate(design) if f.rule == "driver_upgrade_keeps_pools"]
    design.setdefault("guest", {})["driver_upgrade"] = {"max_parallel": 2}
    found = [f for f in validate(design) if f.rule == "driver_upgrade_keeps_pools"]
    two = [p["name"] for p in design["pools"] if p["node_pool"]["replicas"] <= 2 and p["node_pool"]["replicas"] > 1]
    assert sorted(f.object for f in found) == sorted("pools.%s" % n for n in two) and two
    assert all(f.severity == "warning" for f in found)
    design["guest"]["driver_upgrade"] = {"max_parallel": 0}
    multi = [p["name"] for p in design["pools"] if p["node_pool"]["replicas"] > 1]
    assert len([f for f in validate(design) if f.rule == "driver_upgrade_keeps_pools"]) == len(multi)


def test_progress_times_each_state_and_names_a_stuck_node():
    pr = du.Progress(100.0, step_timeout=30)
    pr.observe(100, {"n1": "upgrade-required", "n2": "upgrade-required"})
    pr.observe(105, {"n1": "cordon-required", "n2": "upgrade-required"})
    pr.observe(112, {"n1": "drain-required", "n2": "upgrade-required"})
    pr.observe(141, {"n1": "drain-required", "n2": "upgrade-required"})
    # n2 waits its turn (n1 is being upgraded): not stuck; n1 29 s in drain-required, within the bound
    assert pr.failed() == []
    assert pr.step_seconds()["n1"] == [("upgrade-required", 5.0), ("cordon-required", 7.0), ("drain-required", 29.0)]
    pr.observe(143, {"n1": "drain-required", "n2": "upgrade-required"})
    assert pr.failed() == [("n1", "drain-required")]  # 31 s > 30
    msg = pr.failure("550.127.05")
    assert "node n1 has been drain-required for 31 s (bound 30 s)" in msg and "550.127.05" in msg
    assert "n2" not in msg


def test_a_node_left_waiting_with_nobody_upgrading_is_stuck_from_the_last_node_done():
    pr = du.Progress(0, step_timeout=30)
    pr.observe(0, {"n1": "upgrade-required", "n2": "upgrade-required"})
    pr.observe(10, {"n1": "cordon-required", "n2": "upgrade-required"})
    pr.observe(50, {"n1": "upgrade-done", "n2": "upgrade-required"})
    assert pr.failed() == []  # n2's wait counts from n1's end (50), not from its own entry (0)
    pr.observe(81, {"n1": "upgrade-done", "n2": "upgrade-required"})
    assert pr.failed() == [("n2", "upgrade-required")]
    assert "node n2 has been upgrade-required for 31 s" in pr.failure("x")


def test_progress_done_order_and_failed_state():
    pr = du.Progress(0, step_timeout=1000)
    pr.observe(0, {"a": "", "b": ""})
    pr.observe(10, {"a": "cordon-required", "b": "upgrade-required"})
    pr.observe(20, {"a": "upgrade-done", "b": "cordon-required"})
    assert not pr.done() and pr.order() == ["a", "b"]
    pr.observe(30, {"a": "upgrade-done", "b": "upgrade-failed"})
    assert pr.failed() == [("b", "upgrade-failed")] and "node b is upgrade-failed" in pr.failure("x")
    pr.observe(40, {"a": "upgrade-done", "b": "upgrade-done"})
    assert pr.done() and pr.node_seconds() == {"a": 10.0, "b": 30.0}


def test_node_states_and_version_change():
    nodes = [{"metadata": {"name": "g1", "labels": {"gpu": "y", du.STATE_LABEL: "drain-required"}}},
             {"metadata": {"name": "c1", "labels": {}}}]
    assert du.node_states(nodes) == {"g1": "drain-required", "c1": ""}
    assert du.node_states(nodes, {"gpu": "y"}) == {"g1": "drain-required"}
    assert du.driver_version_change({"driver": {"version": "550.90.07"}}, "550.127.05") == ("550.90.07", "550.127.05")
    assert du.driver_version_change({"driver": {"version": "550.90.07"}}, "550.90.07") is None
    assert du.driver_version_change(None, "550.90.07") is None
