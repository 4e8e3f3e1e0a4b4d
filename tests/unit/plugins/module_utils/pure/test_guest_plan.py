# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plans of the guest objects (PriorityClass, tenant Namespace, ResourceQuota, Kueue's ResourceFlavor,
ClusterQueue and LocalQueue): field-level changes, immutable fields planned as a replace, what is left
alone; and a property over generated live/wanted pairs: the audit has a finding for an object exactly
when its plan has a change (the quotas and LocalQueue of a missing namespace are part of the
namespace's finding)."""

import copy

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan as gp

settings.register_profile("gpupool-guest-plan", max_examples=200, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])

PC = {"name": "gpu-training", "value": 100000, "preemption_policy": "Never", "description": "training"}
TENANT = {"namespace": "team-a", "training": True, "labels": {"cost-center": "42"},
          "quotas": [{"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": "4"}},
                     {"name": "gpupool-gpu-training", "hard": {"requests.nvidia.com/gpu": 2},
                      "priority_class": "gpu-training"}]}


def live_of(wanted, **extra):
    """`wanted` as the API server returns it: defaults and others' labels added, resourceVersion set."""
    out = copy.deepcopy(wanted)
    out["metadata"].update(resourceVersion="7", uid="u-1")
    out["metadata"]["labels"]["someone.else/label"] = "x"
    out.update(extra)
    return out


def test_created_objects_carry_the_collection_label_existing_ones_are_not_relabelled():
    ns = gp.wanted_objects([], [TENANT])[0]
    [change] = gp.plan(None, ns)
    assert change.action == "create" and change.after["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpupool.vcf"
    live = live_of(ns)
    assert gp.plan(live, ns) == []  # no managed-by label added to a namespace that existed
    assert not gp.owned(live) and gp.owned(change.after)


def test_priority_class_value_and_preemption_plan_a_replace_description_an_update():
    want = gp.priority_class(PC)
    live = live_of(want, value=5, preemptionPolicy="PreemptLowerPriority", description="old")
    changes = gp.plan(live, want)
    assert [(c.field, c.before, c.after, c.action) for c in changes] == [
        ("value", 5, 100000, "replace"), ("preemptionPolicy", "PreemptLowerPriority", "Never", "replace"),
        ("description", "old", "training", "update")]
    assert gp.patch_body(want, changes) == {"description": "training"}
    assert gp.plan(live_of(want), want) == []


def test_namespace_labels_of_the_collection_only():
    ns = gp.wanted_objects([], [TENANT])[0]
    live = live_of(ns)
    live["metadata"]["labels"].update({"gpupool.vcf/training": "false", "cost-center": "7"})
    changes = gp.plan(live, ns)
    assert [(c.field, c.before, c.after) for c in changes] == [
        ("metadata.labels.cost-center", "7", "42"), ("metadata.labels.gpupool.vcf/training", "false", "true")]
    assert gp.patch_body(ns, changes) == {"metadata": {"labels": {"cost-center": "42", "gpupool.vcf/training": "true"}}}


def test_quota_limits_as_text_others_limits_stay_scope_is_a_replace():
    quotas = gp.resource_quotas(TENANT)
    assert [q["metadata"]["name"] for q in quotas] == ["gpupool-gpus", "gpupool-gpu-training"]
    scoped = quotas[1]
    live = live_of(scoped)
    live["spec"]["hard"]["pods"] = "10"
    assert gp.plan(live, scoped) == []
    live["spec"]["hard"]["requests.nvidia.com/gpu"] = "3"
    del live["spec"]["scopeSelector"]
    changes = gp.plan(live, scoped)
    assert [(c.field, c.before, c.after, c.action) for c in changes] == [
        ("spec.hard.requests.nvidia.com/gpu", "3", "2", "update"),
        ("spec.scopeSelector", None, scoped["spec"]["scopeSelector"], "replace")]
    assert gp.patch_body(scoped, changes) == {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}


def test_default_quota_of_a_tenant_without_quotas():
    [q] = gp.resource_quotas({"namespace": "t", "gpus": 3, "mig": {"nvidia.com/mig-1g.10gb": 2}}, "gpu-quota",
                             "nvidia.com/gpu", ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"])
    assert q["spec"]["hard"] == {"requests.nvidia.com/gpu": "3", "requests.nvidia.com/mig-1g.10gb": "2",
                                 "requests.nvidia.com/mig-2g.20gb": "0"}


KUEUE = {"gpu_scheduling_policy_tenants": [TENANT],
         "gpu_scheduling_policy_training_node_labels": {"gpupool.vcf/pool": "gpu-a100-mig"},
         "gpu_scheduling_policy_training_resources": {"nvidia.com/mig-1g.10gb": 14}}


def test_kueue_objects_are_the_role_builders_manifests_in_write_order():
    objs = gp.kueue_objects(KUEUE)
    assert [gp.object_name(o) for o in objs] == ["resource_flavor gpu-training", "cluster_queue gpu-training",
                                                 "local_queue team-a/training"]
    assert gp.kueue_objects(dict(KUEUE, gpu_scheduling_policy_kueue=False)) == []
    assert [o["kind"] for o in gp.wanted_objects([], [], kueue=KUEUE)] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]


def test_kueue_plan_compares_only_what_the_collection_sets():
    rf, cq, lq = gp.kueue_objects(KUEUE)
    live = live_of(cq)
    live["spec"]["fairSharing"] = {"weight": "1"}  # not the collection's
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 14  # the same, as a number
    assert gp.plan(live, cq) == []
    live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "7"
    live["spec"]["stopPolicy"] = "Hold"
    changes = gp.plan(live, cq)
    assert [(c.field, c.action) for c in changes] == [("spec.stopPolicy", "update"), ("spec.resourceGroups", "update")]
    assert gp.patch_body(cq, changes) == {"spec": {"stopPolicy": "None", "resourceGroups": cq["spec"]["resourceGroups"]}}
    live = live_of(rf)
    live["spec"]["nodeLabels"]["other/label"] = "x"
    assert gp.plan(live, rf) == []
    live = live_of(lq, spec={"clusterQueue": "elsewhere"})
    [change] = gp.plan(live, lq)
    assert (change.field, change.before, change.after, change.action) == (
        "spec.clusterQueue", "elsewhere", "gpu-training", "replace")


def test_adopt_records_an_object_made_by_hand_without_it_nothing_changes_owner():
    ns = gp.wanted_objects([], [TENANT])[0]
    live = live_of(ns)
    live["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "someone-else"
    assert gp.plan(live, ns) == []
    [change] = gp.plan(live, ns, adopt=True)
    assert (change.field, change.before, change.after, change.action) == (
        "metadata.labels.app.kubernetes.io/managed-by", "someone-else", "gpupool.vcf", "update")
    assert gp.adopting([change]) and gp.patch_body(ns, [change]) == {
        "metadata": {"labels": {"app.kubernetes.io/managed-by": "gpupool.vcf"}}}
    owned = live_of(ns)
    owned["metadata"]["labels"].update(gp.created(ns)["metadata"]["labels"])
    assert gp.plan(owned, ns, adopt=True) == []  # already the collection's
    assert gp.plan(None, ns, adopt=True)[0].action == "create"
    # a design's tenant labels may name the collection: that is not a label change, ownership is adopt's
    assert gp.plan(live, _objects_with_label(ns)) == []


def _objects_with_label(ns):
    out = copy.deepcopy(ns)
    out["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "gpupool.vcf"
    return out


# -- finding iff change --------------------------------------------------------------------------

LABEL = st.sampled_from(["true", "false", "x", None])
QUANTITY = st.sampled_from(["0", "1", "2", "4", None])


@st.composite
def pairs(draw):
    """A design (one class, one tenant with two quotas) and a live cluster drawn around it."""
    pc = {"name": "gpu-training", "value": draw(st.sampled_from([1000, 100000])),
          "preemption_policy": draw(st.sampled_from(["Never", "PreemptLowerPriority"])),
          "description": draw(st.sampled_from(["training", "other"]))}
    tenant = {"namespace": "team-a", "training": draw(st.booleans()),
              "quotas": [{"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": draw(st.sampled_from(["2", "4"]))}},
                         {"name": "gpupool-gpu-training", "hard": {"requests.nvidia.com/gpu": "2"},
                          "priority_class": "gpu-training"}]}
    kueue = {"gpu_scheduling_policy_tenants": [tenant],
             "gpu_scheduling_policy_training_node_labels": {"gpupool.vcf/pool": "gpu-a100-mig"},
             "gpu_scheduling_policy_training_resources": {"nvidia.com/mig-1g.10gb": draw(st.sampled_from([7, 14]))}}
    live = {}
    for obj in gp.wanted_objects([pc], [tenant], kueue=kueue):
        if draw(st.integers(0, 4)) == 0:
            continue  # absent
        have = copy.deepcopy(obj)
        if obj["kind"] == "ResourceFlavor":
            have["spec"]["nodeLabels"] = {"gpupool.vcf/pool": draw(st.sampled_from(["gpu-a100-mig", "other"]))}
        elif obj["kind"] == "ClusterQueue":
            have["spec"]["queueingStrategy"] = draw(st.sampled_from(["StrictFIFO", "BestEffortFIFO"]))
            have["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = draw(
                st.sampled_from(["7", "14"]))
            if draw(st.booleans()):
                have["spec"].pop("stopPolicy")
        elif obj["kind"] == "LocalQueue":
            have["spec"]["clusterQueue"] = draw(st.sampled_from(["gpu-training", "other"]))
        elif obj["kind"] == "PriorityClass":
            have["value"] = draw(st.sampled_from([1000, 100000]))
            have["preemptionPolicy"] = draw(st.sampled_from(["Never", "PreemptLowerPriority"]))
            have["description"] = draw(st.sampled_from(["training", "other", None]))
        elif obj["kind"] == "Namespace":
            for k in ("gpupool.vcf/tenant", "gpupool.vcf/training"):
                value = draw(LABEL)
                if value is None:
                    have["metadata"]["labels"].pop(k)
                else:
                    have["metadata"]["labels"][k] = value
        else:
            value = draw(QUANTITY)
            have["spec"]["hard"] = {} if value is None else {"requests.nvidia.com/gpu": value}
            if draw(st.booleans()):
                have["spec"].pop("scopeSelector", None)
        if draw(st.booleans()):  # made by hand, or before the collection labelled what it made
            have["metadata"]["labels"].pop("app.kubernetes.io/managed-by", None)
        live[gp.key(obj)] = have
    return pc, tenant, kueue, draw(st.booleans()), live


@settings(settings.get_profile("gpupool-guest-plan"))
@given(pairs())
def test_a_finding_exactly_where_the_plan_has_a_change(pair):
    pc, tenant, kueue, adopt, live = pair
    planned = set()
    for obj in gp.wanted_objects([pc], [tenant], kueue=kueue):
        if gp.plan(live.get(gp.key(obj)), obj, adopt):
            # the quotas and LocalQueue of a namespace to be created are part of its one finding
            absent = obj["kind"] in ("ResourceQuota", "LocalQueue") and ("Namespace", "", tenant["namespace"]) not in live
            planned.add("namespace %s" % tenant["namespace"] if absent else gp.object_name(obj))
    derived = {"roles": {"gpu_scheduling_policy": dict(kueue, gpu_scheduling_policy_priority_classes=[pc],
                                                       gpu_scheduling_policy_adopt=adopt)}}
    findings = _audit_guest.audit_guest(derived, **_audit_guest.live_guest_objects(live))
    assert set(f["object"] for f in findings) == planned
    # an object made by hand is object_not_owned (info) exactly where the plan adopts it
    assert set(f["object"] for f in findings if f["rule"] == "object_not_owned") == set(
        gp.object_name(o) for o in gp.wanted_objects([pc], [tenant], kueue=kueue)
        if gp.adopting(gp.plan(live.get(gp.key(o)), o, adopt)) and not (
            o["kind"] in ("ResourceQuota", "LocalQueue") and ("Namespace", "", tenant["namespace"]) not in live))
    assert all(f["severity"] == "info" and f["link"] == "guest" for f in findings if f["rule"] == "object_not_owned")


# -- the gpu_operator role's objects -------------------------------------------------------------

OPERATOR = {"gpu_operator_namespace": "gpu-operator", "gpu_operator_time_slicing": {"notebook": {"replicas": 4}},
            "gpu_operator_driver_version": "550.127.05"}


def test_operator_objects_in_write_order_only_those_the_inputs_want():
    assert [gp.object_name(o) for o in gp.operator_objects(OPERATOR)] == [
        "config_map gpu-operator/gpupool-device-plugin-config", "config_map gpu-operator/gpupool-dcgm-metrics",
        "cluster_policy cluster-policy"]
    bare = dict(OPERATOR, gpu_operator_time_slicing={}, gpu_operator_dcgm_metrics=[])
    assert [o["kind"] for o in gp.operator_objects(bare)] == ["ClusterPolicy"]
    assert gp.operator_objects(OPERATOR, kinds=("ConfigMap",))[0]["data"]["notebook"].startswith("flags:\n")


def test_device_plugin_config_compared_by_what_it_sets_metrics_by_their_fields():
    plugin, dcgm, _cp = gp.operator_objects(OPERATOR)
    live = live_of(plugin)
    # the same configuration in another YAML layout, and a key of someone else's: no change
    live["data"]["notebook"] = json_text(gp.parse_config(plugin["data"]["notebook"]))
    live["data"]["extra"] = "x: 1\n"
    assert gp.plan(live, plugin) == []
    live["data"]["notebook"] = live["data"]["notebook"].replace('"replicas": 4', '"replicas": 2')
    del live["data"]["default"]
    changes = gp.plan(live, plugin)
    assert [(c.field, c.action) for c in changes] == [("data.default", "update"), ("data.notebook", "update")]
    assert gp.patch_body(plugin, changes) == {"data": {"default": plugin["data"]["default"],
                                                       "notebook": plugin["data"]["notebook"]}}
    live = live_of(dcgm)
    live["data"]["dcgm-metrics.csv"] = live["data"]["dcgm-metrics.csv"].replace("# DCGM field", "# another comment")
    assert gp.plan(live, dcgm) == []
    live["data"]["dcgm-metrics.csv"] = "DCGM_FI_DEV_FB_USED, gauge, used\n"
    [change] = gp.plan(live, dcgm)
    assert (change.field, change.after) == ("data.dcgm-metrics.csv", dcgm["data"]["dcgm-metrics.csv"])


def json_text(config):
    import json
    return json.dumps(config, indent=4)


def test_cluster_policy_planned_field_by_field_never_created_never_adopted():
    cp = gp.operator_objects(OPERATOR, kinds=("ClusterPolicy",))[0]
    assert "secretName" not in cp["spec"]["driver"]["licensingConfig"]  # none given: not set
    assert [(c.field, c.action) for c in gp.plan(None, cp, adopt=True)] == [("object", "missing")]
    live = live_of(cp)
    assert not gp.owned(live)  # the chart's object, without the collection's label
    live["spec"]["driver"].update(version="535.0", useOpenKernelModules=True)  # the latter is not the role's
    live["spec"]["migManager"] = {"enabled": True}
    changes = gp.plan(live, cp, adopt=True)
    assert [(c.field, c.before, c.after) for c in changes] == [("spec.driver.version", "535.0", "550.127.05")]
    assert gp.patch_body(cp, changes) == {"spec": {"driver": {"version": "550.127.05"}}}
    named = gp.cluster_policy(dict(gp._objects.role_inputs("gpu_operator", OPERATOR),
                                   gpu_operator_licensing_secret_name="licensing-config-0123456789"))
    assert named["spec"]["driver"]["licensingConfig"] == {"nlsEnabled": True, "secretName": "licensing-config-0123456789"}


def test_the_audit_judges_the_licensing_secret_name_by_the_designs_name_or_its_hash_form():
    op = dict(OPERATOR, gpu_operator_licensing_secret_name="licensing-config")
    live = copy.deepcopy(gp.cluster_policy(gp._objects.role_inputs("gpu_operator", op))["spec"])
    derived = {"roles": {"gpu_operator": op}}
    for name, found in (("licensing-config", []), ("licensing-config-0123456789", []),
                        ("other", ["cluster_policy_changed"])):
        live["driver"]["licensingConfig"]["secretName"] = name
        findings = _audit_guest.audit_guest(derived, cluster_policy={"exists": True, "spec": live})
        assert [f["rule"] for f in findings] == found, name


@st.composite
def operator_pairs(draw):
    """The gpu_operator role's inputs and a live ConfigMap pair and ClusterPolicy drawn around them."""
    op = {"gpu_operator_namespace": "gpu-operator", "gpu_operator_driver_version": "550.127.05",
          "gpu_operator_time_slicing": draw(st.sampled_from([{}, {"notebook": {"replicas": 4}}])),
          "gpu_operator_mig_strategy": draw(st.sampled_from(["single", "mixed"])),
          "gpu_operator_allow_mig_strategy_change": True}
    if draw(st.booleans()):
        op["gpu_operator_dcgm_metrics"] = []
    live = {}
    for obj in gp.operator_objects(op):
        if draw(st.integers(0, 4)) == 0:
            continue
        have = copy.deepcopy(obj)
        if obj["kind"] == "ClusterPolicy":
            have["spec"]["driver"]["version"] = draw(st.sampled_from(["550.127.05", "535.0"]))
            have["spec"]["mig"]["strategy"] = draw(st.sampled_from(["single", "mixed"]))
            if draw(st.booleans()):
                have["spec"]["dcgmExporter"].pop("podLabelAllowlistRegex")
        elif "notebook" in obj["data"]:
            have["data"]["notebook"] = have["data"]["notebook"].replace("replicas: 4", "replicas: %d" % draw(
                st.sampled_from([2, 4])))
            if draw(st.booleans()):
                have["data"].pop("default")
        else:
            have["data"]["dcgm-metrics.csv"] = draw(st.sampled_from([
                have["data"]["dcgm-metrics.csv"], "DCGM_FI_DEV_FB_USED, gauge, used\n"]))
        live[gp.key(obj)] = have
    return op, live


@settings(settings.get_profile("gpupool-guest-plan"))
@given(operator_pairs())
def test_an_operator_finding_exactly_where_the_plan_has_a_change(pair):
    op, live = pair
    planned = set(gp.object_name(o) for o in gp.operator_objects(op) if gp.plan(live.get(gp.key(o)), o))
    key = ("ClusterPolicy", "", "cluster-policy")
    cms = dict((name, dict(exists=("ConfigMap", "gpu-operator", name) in live, data=dict(
        (k, gp.parse_config(v) if k != "dcgm-metrics.csv" else v)  # as the audit's reader gives them
        for k, v in live.get(("ConfigMap", "gpu-operator", name), {}).get("data", {}).items())))
        for name in ("gpupool-device-plugin-config", "gpupool-dcgm-metrics"))
    findings = _audit_guest.audit_guest(
        {"roles": {"gpu_operator": op}}, cluster_policy=dict(exists=key in live, spec=(live.get(key) or {}).get("spec")),
        device_plugin_config=cms["gpupool-device-plugin-config"], dcgm_metrics_config=cms["gpupool-dcgm-metrics"])
    assert set(f["object"] for f in findings) == planned


def test_licensing_secret_plan_shows_hashes_never_the_data_and_keeps_others_keys():
    data = {"gridd.conf": "RmVhdHVyZVR5cGU9MQo=", "client_configuration_token.tok": "dG9rZW4="}
    ns, secret = gp.licensing_objects("gpu-operator", "licensing-config", data)
    assert secret["metadata"]["name"] == "licensing-config-%s" % gp.secret_hash(data)
    assert gp.plan(None, ns)[0].after["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf"}
    [create] = gp.plan(None, secret)
    assert "dG9rZW4=" not in repr(create) and gp.created(secret)["data"] == data
    live = live_of(secret)
    live["data"]["other"] = "eA=="
    assert gp.plan(live, secret) == []
    live["data"]["client_configuration_token.tok"] = "b3RoZXI="
    del live["metadata"]["labels"]["gpupool.vcf/licensing"]
    changes = gp.plan(live, secret)
    assert [(c.field, c.after) for c in changes] == [
        ("data.client_configuration_token.tok", gp.secret_text("dG9rZW4=")), ("metadata.labels.gpupool.vcf/licensing", "true")]
    assert "b3RoZXI=" not in repr(changes) and "dG9rZW4=" not in repr(changes)
    assert gp.patch_body(secret, changes) == {"data": {"client_configuration_token.tok": "dG9rZW4="},
                                              "metadata": {"labels": {"gpupool.vcf/licensing": "true"}}}


@st.composite
def licensing_pairs(draw):
    """The Secrets of the operator namespace and the name the ClusterPolicy names (or none)."""
    names = ["licensing-config", "licensing-config-0123456789", "licensing-config-abcdefabcd", "other"]
    present = sorted(set(draw(st.lists(st.sampled_from(names), max_size=3))))
    return present, draw(st.sampled_from([None] + names))


@settings(settings.get_profile("gpupool-guest-plan"))
@given(licensing_pairs())
def test_a_licensing_secret_finding_exactly_where_its_plan_has_a_change(pair):
    present, in_use = pair
    found = [n for n in present if _audit_guest.licensing_secret_matches(n, "licensing-config")]
    name = in_use or (found[0] if found else "licensing-config")
    want = gp.licensing_secret("gpu-operator", name, {})
    planned = set([gp.object_name(want)] if gp.plan(live_of(want) if name in present else None, want) else [])
    spec = None if in_use is None else {"driver": {"licensingConfig": {"secretName": in_use}}}
    findings = _audit_guest.audit_guest({"roles": {"gpu_operator": {"gpu_operator_licensing_secret_name": "licensing-config"}}},
                                        secrets={"gpu-operator": present}, licensing_secret_in_use=in_use)
    assert set(f["object"] for f in findings if f["rule"] == "licensing_secret_missing") == planned
    assert spec is None or planned == ({"secret gpu-operator/%s" % in_use} if in_use not in present else set())


KUEUE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
integrations:
  frameworks:
  - batch/job
"""
WAIT = {"gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout": "10m"}


def test_kueue_configuration_gets_wait_for_pods_ready_every_other_setting_kept():
    assert gp.kueue_config_map({}) == []  # no timeout: Kueue's configuration is left alone
    [want] = gp.kueue_config_map(WAIT)
    assert gp.object_name(want) == "config_map kueue-system/kueue-manager-config"
    assert [(c.field, c.action) for c in gp.plan(None, want, adopt=True)] == [
        ("data.controller_manager_config.yaml", "missing")]
    live = live_of(want, data={"controller_manager_config.yaml": KUEUE_CONFIG, "other": "x"})
    [change] = gp.plan(live, want, adopt=True)  # never adopted: Kueue's installation's object
    assert change.before == KUEUE_CONFIG and change.action == "update"
    written = gp.parse_config(change.after)
    assert written["waitForPodsReady"] == {"timeout": "10m", "blockAdmission": True}
    assert written["integrations"] == {"frameworks": ["batch/job"]} and list(written)[:2] == ["apiVersion", "kind"]
    assert gp.patch_body(want, [change]) == {"data": {"controller_manager_config.yaml": change.after}}
    live["data"]["controller_manager_config.yaml"] = change.after.replace("10m", "600s")  # the same duration
    assert gp.plan(live, want) == []
    live["data"]["controller_manager_config.yaml"] = "kind: ConfigMap\n"
    with pytest.raises(ValueError):
        gp.plan(live, want)


@settings(settings.get_profile("gpupool-guest-plan"))
@given(st.sampled_from([None, KUEUE_CONFIG, KUEUE_CONFIG + "waitForPodsReady:\n  timeout: 5m\n",
                        KUEUE_CONFIG + "waitForPodsReady:\n  timeout: 10m\n  blockAdmission: true\n"]),
       st.sampled_from(["10m", "5m"]))
def test_a_kueue_configuration_finding_exactly_where_its_plan_has_a_change(text, timeout):
    policy = dict(WAIT, gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout=timeout)
    [want] = gp.kueue_config_map(policy)
    live = live_of(want, data={} if text is None else {"controller_manager_config.yaml": text})
    planned = set(gp.object_name(want) for _c in gp.plan(live, want))
    findings = _audit_guest.audit_guest({"roles": {"gpu_scheduling_policy": policy}}, kueue={
        "served": True, "configuration": None if text is None else gp.parse_config(text)})
    assert set(f["object"] for f in findings if f["rule"] == "kueue_config_changed") == planned


# -- the notebook culler -------------------------------------------------------------------------

CRONJOB = {"gpu_scheduling_policy_culling": "cronjob", "gpu_scheduling_policy_culling_idle_minutes": 60,
           "gpu_scheduling_policy_culling_pools": {"notebooks": 60, "notebooks-long": 720}}
KUBEFLOW = {"gpu_scheduling_policy_culling": "kubeflow", "gpu_scheduling_policy_culling_idle_minutes": 90}


def test_culling_objects_in_write_order_from_the_builder_the_filter_uses():
    objs = gp.culling_objects(CRONJOB, "print('x')\n")
    assert [gp.object_name(o) for o in objs] == [
        "namespace gpupool-system", "service_account gpupool-system/gpupool-notebook-culler",
        "cluster_role gpupool-notebook-culler", "cluster_role_binding gpupool-notebook-culler",
        "config_map gpupool-system/gpupool-notebook-culler", "cronjob gpupool-system/gpupool-notebook-culler"]
    built = gp._objects.culling_manifests(gp._objects.role_inputs("gpu_scheduling_policy", CRONJOB), "print('x')\n")
    assert [dict(o, metadata=dict(o["metadata"], labels={})) for o in built] == objs[1:]
    assert all(gp.plan(None, o)[0].after["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf"}
               for o in objs)
    # the audit's: the script is not its to know, the ConfigMap is planned by its name only
    assert gp.culling_objects(CRONJOB)[4]["data"] == {}
    assert gp.culling_objects(dict(CRONJOB, gpu_scheduling_policy_culling="none")) == []
    [deployment] = gp.culling_objects(KUBEFLOW)
    assert gp.object_name(deployment) == "deployment kubeflow/notebook-controller-deployment"
    assert deployment["spec"] == {"template": {"spec": {"containers": [{"name": "manager", "env": [
        {"name": "ENABLE_CULLING", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "90"},
        {"name": "IDLENESS_CHECK_PERIOD", "value": "10"}]}]}}}
    assert gp.culling_mechanism({}) == "cronjob" and gp.culling_mechanism({}, kubeflow=True) == "kubeflow"
    with pytest.raises(ValueError, match="must be resolved first"):
        gp.culling_objects({})


def served(obj):
    """`obj` as the API server keeps it: the collection's label, a resourceVersion, defaults of its own."""
    out = gp.created(copy.deepcopy(obj))
    out["metadata"].update(resourceVersion="3", uid="u-3")
    if obj["kind"] == "CronJob":
        out["spec"].update(suspend=False, startingDeadlineSeconds=None)
        pod = out["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        pod.update(dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
        pod["containers"][0].update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
    return out


def test_culler_plans_compare_what_the_collection_sets_the_servers_defaults_stay_out():
    objs = gp.culling_objects(CRONJOB, "print('x')\n")
    assert [gp.plan(served(o), o) for o in objs] == [[]] * len(objs)
    ns, account, role, binding, script, job = objs
    live = served(job)
    live["spec"]["schedule"] = "*/30 * * * *"
    live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "600"
    changes = gp.plan(live, job)
    assert [(c.field, c.action) for c in changes] == [("spec.schedule", "update"), ("spec.jobTemplate", "update")]
    assert gp.patch_body(job, changes) == {"spec": {"schedule": job["spec"]["schedule"],
                                                    "jobTemplate": job["spec"]["jobTemplate"]}}
    assert gp.cron_job_settings(live)["env"]["CULL_IDLE_MINUTES"] == "600"
    live = served(role)
    live["rules"][1]["verbs"] = ["get", "list", "watch"]
    [change] = gp.plan(live, role)
    assert (change.field, change.action) == ("rules", "update") and gp.patch_body(role, [change]) == {"rules": role["rules"]}
    live = served(binding)
    live["roleRef"]["name"] = "other"
    live["subjects"][0]["namespace"] = "elsewhere"
    assert [(c.field, c.action) for c in gp.plan(live, binding)] == [("roleRef", "replace"), ("subjects", "update")]
    live = served(script)
    live["data"]["culler.py"] = "print('y')\n"
    [change] = gp.plan(live, script)
    assert (change.field, change.before, change.after) == ("data.culler.py", "print('y')\n", "print('x')\n")
    assert gp.plan(live, gp.culling_objects(CRONJOB)[4]) == []  # known by name only
    assert gp.plan(served(account), account) == [] and gp.plan(None, account)[0].action == "create"
    live = served(ns)
    live["metadata"]["labels"] = {"kubernetes.io/metadata.name": "gpupool-system"}
    assert gp.plan(live, ns) == [] and gp.adopting(gp.plan(live, ns, adopt=True))


def test_kubeflow_controller_plans_only_its_env_variables_never_made_never_adopted():
    [want] = gp.culling_objects(KUBEFLOW)
    assert [(c.field, c.action) for c in gp.plan(None, want, adopt=True)] == [("object", "missing")]
    live = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "notebook-controller-deployment", "namespace": "kubeflow", "resourceVersion": "9"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "manager", "image": "nc:1", "env": [
                    {"name": "ENABLE_CULLING", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "1440"},
                    {"name": "OTHER", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}]},
                {"name": "proxy", "image": "p:1"}]}}}}
    changes = gp.plan(live, want, adopt=True)
    prefix = "spec.template.spec.containers[manager].env."
    assert [(c.field, c.before, c.after) for c in changes] == [(prefix + "CULL_IDLE_TIME", "1440", "90"),
                                                               (prefix + "IDLENESS_CHECK_PERIOD", None, "10")]
    body = gp.patch_body(want, changes, live)
    manager, proxy = body["spec"]["template"]["spec"]["containers"]
    assert manager["env"] == [{"name": "ENABLE_CULLING", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "90"},
                              {"name": "OTHER", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}},
                              {"name": "IDLENESS_CHECK_PERIOD", "value": "10"}]
    assert manager["image"] == "nc:1" and proxy == {"name": "proxy", "image": "p:1"} and list(body) == ["spec"]
    assert live["spec"]["template"]["spec"]["containers"][0]["env"][1]["value"] == "1440"  # the read is not changed
    live["spec"]["template"]["spec"]["containers"] = [{"name": "proxy"}]
    assert [(c.field, c.action) for c in gp.plan(live, want)] == [("spec.template.spec.containers[manager]", "missing")]


def test_the_audits_read_of_the_culler_as_live_objects():
    objs = gp.culling_objects(CRONJOB)
    job = gp._objects.culling_cronjob(gp._objects.role_inputs("gpu_scheduling_policy", CRONJOB))
    read = gp.culling_read(objs, {"exists": True, "schedule": job["schedule"], "image": job["image"], "env": job["env"]})
    assert sorted(read) == sorted(gp.key(o) for o in objs) and [gp.plan(read[gp.key(o)], o) for o in objs] == [[]] * 6
    read = gp.culling_read(objs, {"exists": False})
    assert gp.key(objs[-1]) not in read and len(read) == 5  # the others not read: not judged
    read = gp.culling_read(objs, {"objects": [served(objs[0])]})
    assert list(read) == [gp.key(objs[0])]
    [want] = gp.culling_objects(KUBEFLOW)
    read = gp.culling_read([want], {"kubeflow": True, "exists": True, "env": {"CULL_IDLE_TIME": "1440"}})
    assert [c.field.rsplit(".", 1)[1] for c in gp.plan(read[gp.key(want)], want)] == [
        "ENABLE_CULLING", "CULL_IDLE_TIME", "IDLENESS_CHECK_PERIOD"]


@st.composite
def culling_pairs(draw):
    """The role's culling inputs, whether Kubeflow's Notebook CRD is there, and the culler's live objects drawn
    around what the role writes (absent, changed, made by hand)."""
    policy = {"gpu_scheduling_policy_culling": draw(st.sampled_from(["cronjob", "kubeflow", "auto"])),
              "gpu_scheduling_policy_culling_idle_minutes": draw(st.sampled_from([60, 240])),
              "gpu_scheduling_policy_culling_check_minutes": draw(st.sampled_from([5, 10])),
              "gpu_scheduling_policy_culling_pools": draw(st.sampled_from([{}, {"notebooks": 60}]))}
    kubeflow = draw(st.booleans())
    resolved = dict(policy, gpu_scheduling_policy_culling=gp.culling_mechanism(policy, kubeflow))
    live = []
    for obj in gp.culling_objects(resolved, "print('x')\n"):
        if draw(st.integers(0, 4)) == 0:
            continue  # absent
        have = served(obj)
        if obj["kind"] == "ClusterRole" and draw(st.booleans()):
            have["rules"] = have["rules"][:draw(st.integers(0, 2))]
        elif obj["kind"] == "ClusterRoleBinding":
            have["roleRef"]["name"] = draw(st.sampled_from(["gpupool-notebook-culler", "other"]))
            have["subjects"][0]["namespace"] = draw(st.sampled_from(["gpupool-system", "elsewhere"]))
        elif obj["kind"] == "ConfigMap":
            have["data"]["culler.py"] = draw(st.sampled_from(["print('x')\n", "print('edited')\n"]))
        elif obj["kind"] == "CronJob":
            have["spec"]["schedule"] = draw(st.sampled_from(["*/5 * * * *", "*/10 * * * *"]))
            container = have["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
            container["image"] = draw(st.sampled_from([container["image"], "python:3.11-alpine"]))
            container["env"][0]["value"] = draw(st.sampled_from(["60", "240"]))
            if draw(st.booleans()):
                container["env"] = container["env"][:3]  # an older CronJob, without the pool times
        elif obj["kind"] == "Deployment":
            have["metadata"]["labels"] = {"app": "notebook-controller"}
            container = have["spec"]["template"]["spec"]["containers"][0]
            container["name"] = draw(st.sampled_from(["manager", "manager", "other"]))
            kept = [e for e in container["env"] if draw(st.booleans())]
            container["env"] = kept + [{"name": "USE_ISTIO", "value": "true"}]
            if container["env"] and draw(st.booleans()):
                container["env"][0] = dict(container["env"][0], value="1440")
        if obj["kind"] != "Deployment" and draw(st.booleans()):  # made by hand
            have["metadata"]["labels"].pop("app.kubernetes.io/managed-by", None)
        live.append(have)
    return policy, kubeflow, draw(st.booleans()), live


@settings(settings.get_profile("gpupool-guest-plan"))
@given(culling_pairs())
def test_a_culling_finding_exactly_where_the_culler_plan_has_a_change(pair):
    policy, kubeflow, adopt, live = pair
    resolved = dict(policy, gpu_scheduling_policy_culling=gp.culling_mechanism(policy, kubeflow))
    have = dict((gp.key(o), o) for o in live)
    planned, missing_ns = set(), set()
    for want in gp.culling_objects(resolved):  # as the audit knows them: the script by the ConfigMap's name only
        if want["metadata"].get("namespace") in missing_ns:
            continue  # part of the namespace's finding
        changes = gp.plan(have.get(gp.key(want)), want, adopt)
        if changes:
            planned.add(gp.object_name(want))
            if want["kind"] == "Namespace" and changes[0].action == "create":
                missing_ns.add(want["metadata"]["name"])
    derived = {"roles": {"gpu_scheduling_policy": dict(policy, gpu_scheduling_policy_adopt=adopt)}}
    findings = _audit_guest.audit_guest(derived, culling={"kubeflow": resolved["gpu_scheduling_policy_culling"] ==
                                                          "kubeflow", "objects": live})
    assert set(f["object"] for f in findings) == planned
    assert all(f["rule"] in ("notebook_culling_missing", "notebook_culling_changed", "object_not_owned")
               for f in findings)
    # the converge plans the same, and the script besides (the role's file: guest_objects is handed it)
    for want, written in zip(gp.culling_objects(resolved), gp.culling_objects(resolved, "print('x')\n")):
        converge = gp.plan(have.get(gp.key(want)), written, adopt)
        audit = gp.plan(have.get(gp.key(want)), want, adopt)
        assert [c for c in converge if not c.field.startswith("data.")] == [
            c for c in audit if not c.field.startswith("data.")] or converge[0].action == "create"
