"""Kueue from the design: a queue per gang-scheduled pool (derive -> role inputs -> the objects
the role writes and the audit expects), cohort and preemption, waitForPodsReady in Kueue's own
configuration, and the audit of both."""
import copy
import pathlib

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.gpupool.vcf.plugins.filter import k8s_objects as f
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
CONFIG_V1BETA2 = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
# a comment the role keeps as long as it changes nothing
integrations:
  frameworks:
  - batch/job
"""


def two_gang_pools(**kueue):
    """The example design with a second gang-scheduled training pool, `finetune` (one node of 4
    H100s), on which only research has quota."""
    design = copy.deepcopy(EXAMPLE)
    training = [p for p in design["pools"] if p["name"] == "training"][0]
    training["node_pool"]["replicas"] = 1
    finetune = copy.deepcopy(training)
    finetune["name"] = "finetune"
    design["pools"].append(finetune)
    for tenant in design["tenants"]:
        if tenant["name"] == "research":
            tenant["gpu_quota"]["finetune"] = 4
    if kueue:
        design.setdefault("guest", {})["kueue"] = kueue
    return design


def policy_of(design):
    return objs.role_inputs("gpu_scheduling_policy", derive(design)["roles"]["gpu_scheduling_policy"])


def test_derive_a_queue_per_gang_pool():
    role = derive(two_gang_pools())["roles"]["gpu_scheduling_policy"]
    queues = role["gpu_scheduling_policy_kueue_queues"]
    assert [(q["name"], q["local_queue"], q["namespaces"]) for q in queues] == [
        ("gpupool-training", "training", ["team-vision", "research"]),
        ("gpupool-finetune", "finetune", ["research"])]
    # each queue's quota is its own pool's size: 1 node of 32 vCPU, 384 GiB and 4 GPUs
    assert [q["resources"] for q in queues] == [{"cpu": 32, "memory": "384Gi", "nvidia.com/gpu": 4}] * 2
    assert queues[1]["node_labels"] == {"gpupool.vcf/pool": "finetune"}
    assert {"key": "gpupool.vcf/pool", "operator": "Equal", "value": "finetune", "effect": "NoSchedule"} in \
        queues[1]["tolerations"]
    assert role["gpu_scheduling_policy_kueue"] is True
    assert role["gpu_scheduling_policy_kueue_cohort"] == "gpupool"
    assert role["gpu_scheduling_policy_kueue_preemption"] == {"within_cluster_queue": "LowerPriority",
                                                              "reclaim_within_cohort": "Any"}
    assert role["gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout"] == "10m"
    tenants = dict((t["namespace"], t["training"]) for t in role["gpu_scheduling_policy_tenants"])
    assert tenants == {"team-search": False, "team-vision": True, "research": True}


def test_derived_objects_of_two_gang_pools():
    k = objs.kueue_objects(policy_of(two_gang_pools(cohort="ml", preemption={"within_cluster_queue": "Never"})))
    assert [n for n, _s in k["resource_flavors"]] == ["gpupool-training", "gpupool-finetune"]
    assert [n for n, _s in k["cluster_queues"]] == ["gpupool-training", "gpupool-finetune"]
    assert [(ns, n, s["clusterQueue"]) for ns, n, s in k["local_queues"]] == [
        ("team-vision", "training", "gpupool-training"), ("research", "training", "gpupool-training"),
        ("research", "finetune", "gpupool-finetune")]
    finetune = dict(k["cluster_queues"])["gpupool-finetune"]
    assert finetune["cohortName"] == "ml"
    assert finetune["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research"]}]}
    assert finetune["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any",
                                      "borrowWithinCohort": {"policy": "Never"}}
    assert finetune["resourceGroups"] == [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [{
        "name": "gpupool-finetune", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                  {"name": "memory", "nominalQuota": "384Gi"},
                                                  {"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]
    assert dict(k["resource_flavors"])["gpupool-finetune"]["nodeLabels"] == {"gpupool.vcf/pool": "finetune"}


def test_role_writes_what_the_audit_expects():
    policy = policy_of(two_gang_pools())
    k = objs.kueue_objects(policy)
    m = f.kueue_manifests(dict(policy))
    assert [(o["metadata"]["name"], o["spec"]) for o in m["cluster_queues"]] == k["cluster_queues"]
    assert [(o["metadata"]["name"], o["spec"]) for o in m["resource_flavors"]] == k["resource_flavors"]
    assert [(o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]) for o in m["local_queues"]] == \
        k["local_queues"]
    assert all(o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf"}
               for kind in m.values() for o in kind)


def queue(**given):
    return dict({"name": "q", "resources": {"nvidia.com/gpu": 4}}, **given)


def policy(**given):
    return objs.role_inputs("gpu_scheduling_policy", given)


def test_queue_without_tenants_admits_no_namespace_and_v1beta1_cohort():
    k = objs.kueue_objects(policy(gpu_scheduling_policy_kueue_queues=[queue()],
                                  gpu_scheduling_policy_kueue_cohort="c",
                                  gpu_scheduling_policy_kueue_api_version="kueue.x-k8s.io/v1beta1"))
    spec = k["cluster_queues"][0][1]
    assert spec["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}
    assert spec["cohort"] == "c" and "cohortName" not in spec
    assert k["local_queues"] == []
    # the role's defaults: no cohort, Kueue's own preemption defaults
    spec = objs.kueue_objects(policy(gpu_scheduling_policy_kueue_queues=[queue()]))["cluster_queues"][0][1]
    assert "cohortName" not in spec and "cohort" not in spec
    assert spec["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                                  "borrowWithinCohort": {"policy": "Never"}}
    # the queues replace the single training queue
    k = objs.kueue_objects(policy(gpu_scheduling_policy_kueue_queues=[queue()],
                                  gpu_scheduling_policy_training_resources={"nvidia.com/gpu": 1}))
    assert [n for n, _s in k["cluster_queues"]] == ["q"]


@pytest.mark.parametrize("given,match", [
    ({"gpu_scheduling_policy_kueue_queues": [{"name": "q"}]}, "has no resources"),
    ({"gpu_scheduling_policy_kueue_queues": [queue(), queue()]}, "given twice"),
    ({"gpu_scheduling_policy_kueue_queues": [{"resources": {"cpu": 1}}]}, "with a name"),
    ({"gpu_scheduling_policy_kueue_queues": [queue()],
      "gpu_scheduling_policy_kueue_preemption": {"within_cluster_queue": "Any"}}, "within_cluster_queue must be one of"),
    ({"gpu_scheduling_policy_kueue_queues": [queue()],
      "gpu_scheduling_policy_kueue_preemption": {"within_queue": "Never"}}, "unknown key"),
])
def test_bad_queue_inputs_fail_clearly(given, match):
    with pytest.raises(ValueError, match=match):
        objs.kueue_objects(policy(**given))
    with pytest.raises(AnsibleFilterError, match=match):
        f.kueue_manifests(given)


@pytest.mark.parametrize("text,seconds", [
    ("10m", 600), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("250ms", 0.25),
    ("", None), ("10", None), ("ten minutes", None), ("-1m", None), (None, None)])
def test_duration_seconds(text, seconds):
    assert objs.duration_seconds(text) == seconds


def test_wait_for_pods_ready():
    assert objs.kueue_wait_for_pods_ready(policy()) is None
    assert objs.kueue_wait_for_pods_ready(policy(gpu_scheduling_policy_kueue=False,
                                                 gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout="5m")) is None
    assert objs.kueue_wait_for_pods_ready(policy(gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout="5m")) == {
        "timeout": "5m", "blockAdmission": True}
    for bad in ("5 minutes", "0s", "5"):
        with pytest.raises(ValueError, match="positive duration"):
            objs.kueue_wait_for_pods_ready(policy(gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout=bad))
        with pytest.raises(AnsibleFilterError, match="positive duration"):
            f.kueue_wait_for_pods_ready({"gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout": bad})


def test_kueue_configuration_keeps_the_rest_and_is_idempotent():
    p = policy(gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout="10m")
    current = yaml.safe_load(CONFIG_V1BETA2)
    current["waitForPodsReady"] = {"timeout": "5m", "requeuingStrategy": {"backoffLimitCount": 5}}
    assert objs.kueue_config_differences(p, current) == [
        ("waitForPodsReady.timeout", "5m", "10m"), ("waitForPodsReady.blockAdmission", None, True)]
    new = objs.kueue_configuration(p, current)
    assert new["waitForPodsReady"] == {"timeout": "10m", "blockAdmission": True,
                                       "requeuingStrategy": {"backoffLimitCount": 5}}
    assert new["integrations"] == current["integrations"] and new["health"] == current["health"]
    assert current["waitForPodsReady"]["timeout"] == "5m"  # the input is not changed
    assert objs.kueue_config_differences(p, new) == []
    # the same timeout written another way is no difference
    assert objs.kueue_config_differences(p, dict(new, waitForPodsReady={"timeout": "600s", "blockAdmission": True})) \
        == []
    # a v1beta1 Configuration has the explicit switch too
    old = dict(yaml.safe_load(CONFIG_V1BETA2), apiVersion="config.kueue.x-k8s.io/v1beta1")
    assert objs.kueue_configuration(p, old)["waitForPodsReady"] == {"enable": True, "timeout": "10m",
                                                                    "blockAdmission": True}
    with pytest.raises(ValueError, match="config.kueue.x-k8s.io Configuration"):
        objs.kueue_config_differences(p, {"apiVersion": "v1", "kind": "ConfigMap"})
    # no timeout: nothing to change, whatever the configuration
    assert objs.kueue_config_differences(policy(), "anything") == []


def test_kueue_manager_config_filter():
    inputs = {"gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout": "10m"}
    out = f.kueue_manager_config(inputs, CONFIG_V1BETA2)
    assert out["differences"] == ["waitForPodsReady.timeout: unset (wanted 10m)",
                                  "waitForPodsReady.blockAdmission: unset (wanted True)"]
    written = yaml.safe_load(out["text"])
    assert written["waitForPodsReady"] == {"timeout": "10m", "blockAdmission": True}
    assert written["integrations"] == {"frameworks": ["batch/job"]}
    # a rerun on what was written changes nothing, text included
    again = f.kueue_manager_config(inputs, out["text"])
    assert again == {"text": out["text"], "differences": []}
    assert f.kueue_manager_config({}, CONFIG_V1BETA2) == {"text": CONFIG_V1BETA2, "differences": []}
    with pytest.raises(AnsibleFilterError, match="not YAML"):
        f.kueue_manager_config(inputs, "a: [")
    with pytest.raises(AnsibleFilterError, match="Configuration"):
        f.kueue_manager_config(inputs, "kind: ConfigMap\n")
    with pytest.raises(AnsibleFilterError, match="text of its ConfigMap key"):
        f.kueue_manager_config(inputs, None)


def live_kueue(policy_):
    k = objs.kueue_objects(policy_)
    live = dict(served=True, resource_flavors=dict((n, copy.deepcopy(s)) for n, s in k["resource_flavors"]),
                cluster_queues=dict((n, copy.deepcopy(s)) for n, s in k["cluster_queues"]), local_queues={},
                configuration=objs.kueue_configuration(policy_, yaml.safe_load(CONFIG_V1BETA2)))
    for ns, name, spec in k["local_queues"]:
        live["local_queues"].setdefault(ns, {})[name] = dict(spec)
    return live


def kueue_findings(derived, live):
    return sorted((x["rule"], x["object"]) for x in _audit_guest.audit_guest(derived, kueue=live))


def test_audit_two_gang_pools():
    derived = derive(two_gang_pools())
    _op, p = _audit_guest.guest_inputs(derived)
    live = live_kueue(p)
    assert kueue_findings(derived, live) == []
    del live["cluster_queues"]["gpupool-finetune"]
    del live["local_queues"]["research"]["finetune"]
    live["cluster_queues"]["gpupool-training"]["cohortName"] = "elsewhere"
    live["cluster_queues"]["gpupool-training"]["preemption"]["withinClusterQueue"] = "Never"
    live["resource_flavors"]["gpupool-finetune"]["nodeLabels"] = {"gpupool.vcf/pool": "training"}
    out = _audit_guest.audit_guest(derived, kueue=live)
    assert sorted((x["rule"], x["object"]) for x in out) == [
        ("cluster_queue_changed", "cluster_queue gpupool-training"),
        ("cluster_queue_missing", "cluster_queue gpupool-finetune"),
        ("local_queue_missing", "local_queue research/finetune"),
        ("resource_flavor_changed", "resource_flavor gpupool-finetune")]
    msg = [x for x in out if x["rule"] == "cluster_queue_changed"][0]["message"]
    assert "cohortName elsewhere (design gpupool)" in msg
    assert "preemption.withinClusterQueue Never (design LowerPriority)" in msg


def test_audit_kueue_configuration():
    derived = derive(two_gang_pools(wait_for_pods_ready_timeout="15m"))
    _op, p = _audit_guest.guest_inputs(derived)
    live = live_kueue(p)
    assert live["configuration"]["waitForPodsReady"]["timeout"] == "15m"
    assert kueue_findings(derived, live) == []
    live["configuration"]["waitForPodsReady"] = {"timeout": "10m"}
    out = _audit_guest.audit_guest(derived, kueue=live)
    assert [(x["rule"], x["object"]) for x in out] == [("kueue_config_changed", "config_map kueue-system/"
                                                                                "kueue-manager-config")]
    assert "waitForPodsReady.timeout 10m (design 15m)" in out[0]["message"]
    assert "waitForPodsReady.blockAdmission unset (design True)" in out[0]["message"]
    assert "reads it only when it starts" in out[0]["message"]
    live["configuration"] = None
    out = _audit_guest.audit_guest(derived, kueue=live)
    assert [x["rule"] for x in out] == ["kueue_config_changed"] and "is missing" in out[0]["message"]
    live["configuration"] = "not: [yaml"
    assert [x["rule"] for x in _audit_guest.audit_guest(derived, kueue=live)] == ["kueue_config_changed"]
    # not read: not judged
    del live["configuration"]
    assert kueue_findings(derived, live) == []
    # no gang-scheduled pool: neither queues nor Kueue's configuration are expected
    design = two_gang_pools()
    for pool in design["pools"]:
        if pool["shape"] == "training":
            pool["training"] = {"gpus_per_job": 1, "gang_scheduling": False}
    assert kueue_findings(derive(design), dict(served=True, configuration=None)) == []
