# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guest_objects through main() (``run_main``: AnsibleModule parses the arguments) with a fake client
layer: check mode predicts the first run's changes exactly, the run makes exactly those writes (with
their preconditions), a second run changes nothing, an immutable field of an object the collection
created is a delete and create, and one of an object it did not create is refused before any write;
the same for Kueue's ResourceFlavors, ClusterQueues and LocalQueues."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.modules import guest_objects
from tests.lib.module_main import run_main

TENANTS = [{"namespace": "team-a", "training": True,
            "quotas": [{"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": 4}},
                       {"name": "gpupool-gpu-training", "hard": {"requests.nvidia.com/gpu": 2},
                        "priority_class": "gpu-training"}]},
           {"namespace": "team-b", "gpus": 1}]
CLASSES = [{"name": "gpu-training", "value": 100000, "description": "training"}]


def merge_patch(target, patch):
    """RFC 7386, as the API server applies a merge patch: mappings merged, None removes, the rest replaced."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeApi:
    """GuestObjectsApi over a dict of live objects; every write is recorded and applied as the server
    would, refusing a stale resourceVersion or uid."""

    store = {}
    calls = []
    versions = None

    def __init__(self, params, versions=None):
        assert params["kubeconfig"] == "/k"
        FakeApi.versions = versions

    def read(self, kinds, namespaces=None, names=None):
        FakeApi.calls.append(("read", tuple(kinds)) + tuple(tuple(given) for given in (namespaces, names) if given))
        return dict((k, copy.deepcopy(v)) for k, v in FakeApi.store.items() if k[0] in kinds and (
            k[0] != "ConfigMap" or k[1] in namespaces) and (k[0] != "Secret" or k[1:] in names))

    @staticmethod
    def _key(kind, ns, name):
        return kind, ns or "", name

    def create(self, obj):
        key = self._key(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        FakeApi.calls.append(("create",) + key)
        if key in FakeApi.store:
            raise K8sError("409 AlreadyExists", status=409)
        if key[1] and ("Namespace", "", key[1]) not in FakeApi.store:
            raise K8sError("404 namespace %s not found" % key[1], status=404)
        obj = copy.deepcopy(obj)
        obj["metadata"].update(resourceVersion="1", uid="uid-%s" % key[2])
        FakeApi.store[key] = obj

    def patch(self, kind, name, ns, version, body):
        key = self._key(kind, ns, name)
        FakeApi.calls.append(("patch",) + key + (body,))
        live = FakeApi.store[key]
        if live["metadata"]["resourceVersion"] != version:
            raise K8sError("409 Conflict", status=409)
        merge_patch(live, body)
        live["metadata"]["resourceVersion"] = str(int(version) + 1)

    def delete(self, kind, name, ns, uid, version):
        key = self._key(kind, ns, name)
        FakeApi.calls.append(("delete",) + key)
        live = FakeApi.store[key]
        assert (live["metadata"]["uid"], live["metadata"]["resourceVersion"]) == (uid, version)
        del FakeApi.store[key]


@pytest.fixture
def api(monkeypatch):
    FakeApi.store, FakeApi.calls = {}, []
    monkeypatch.setattr(guest_objects, "GuestObjectsApi", FakeApi)
    return FakeApi


def run(check=False, **params):
    args = dict(kubeconfig="/k", priority_classes=CLASSES, tenants=TENANTS)
    args.update(params)
    return run_main(guest_objects, args, check_mode=check, diff=True, sessions=False)


def test_check_predicts_the_first_run_and_a_second_run_changes_nothing(api):
    predicted = run(check=True)
    assert predicted["changed"] and [c for c in api.calls if c[0] != "read"] == []
    assert predicted["names"] == ["gpu-training", "team-a", "team-a/gpupool-gpus", "team-a/gpupool-gpu-training",
                                  "team-b", "team-b/gpu-quota"]
    first = run()
    assert first["changes"] == predicted["changes"] and first["changed"]
    assert [c[0] for c in api.calls if c[0] != "read"] == ["create"] * 6
    ns = api.store[("Namespace", "", "team-a")]
    assert ns["metadata"]["labels"] == {"gpupool.vcf/tenant": "true", "gpupool.vcf/training": "true",
                                        "app.kubernetes.io/managed-by": "gpupool.vcf"}
    assert api.store[("ResourceQuota", "team-b", "gpu-quota")]["spec"] == {"hard": {"requests.nvidia.com/gpu": "1"}}
    again = run()
    assert not again["changed"] and again["changes"] == []


def test_drift_is_patched_field_by_field_with_the_resource_version(api):
    run()
    api.store[("ResourceQuota", "team-a", "gpupool-gpus")]["spec"]["hard"].update({"requests.nvidia.com/gpu": "40",
                                                                                   "pods": "10"})
    api.store[("Namespace", "", "team-a")]["metadata"]["labels"]["gpupool.vcf/training"] = "false"
    api.calls = []
    predicted = run(check=True)
    assert [(c["object"], c["field"], c["before"], c["after"]) for c in predicted["changes"]] == [
        ("namespace team-a", "metadata.labels.gpupool.vcf/training", "false", "true"),
        ("resource_quota team-a/gpupool-gpus", "spec.hard.requests.nvidia.com/gpu", "40", "4")]
    assert run()["changes"] == predicted["changes"]
    assert [c for c in api.calls if c[0] == "patch"] == [
        ("patch", "Namespace", "", "team-a", {"metadata": {"labels": {"gpupool.vcf/training": "true"}}}),
        ("patch", "ResourceQuota", "team-a", "gpupool-gpus", {"spec": {"hard": {"requests.nvidia.com/gpu": "4"}}})]
    assert api.store[("ResourceQuota", "team-a", "gpupool-gpus")]["spec"]["hard"]["pods"] == "10"  # not ours


def test_immutable_value_replaces_only_what_the_collection_created(api):
    run()
    classes = [dict(CLASSES[0], value=200000)]
    api.calls = []
    out = run(priority_classes=classes, kinds=["PriorityClass"])
    assert out["changes"][0]["action"] == "replace"
    assert [c[0] for c in api.calls] == ["read", "delete", "create"]
    assert api.store[("PriorityClass", "", "gpu-training")]["value"] == 200000
    # one made by hand (no managed-by label) is refused before any write
    del api.store[("PriorityClass", "", "gpu-training")]["metadata"]["labels"]
    api.calls = []
    out = run(priority_classes=CLASSES, kinds=["PriorityClass"])
    assert out["failed"] and "not created by this collection" in out["msg"] and "Nothing was changed" in out["msg"]
    assert [c[0] for c in api.calls] == ["read"]


# -- Kueue ---------------------------------------------------------------------------------------

KV = "kueue.x-k8s.io/v1beta2"
KUEUE = {"gpu_scheduling_policy_tenants": TENANTS,
         "gpu_scheduling_policy_training_node_labels": {"gpupool.vcf/pool": "gpu-a100-mig"},
         "gpu_scheduling_policy_training_resources": {"nvidia.com/mig-1g.10gb": 14}}


def kueue_run(check=False, **params):
    args = dict(priority_classes=[], tenants=[], kinds=["ResourceFlavor", "ClusterQueue", "LocalQueue"], kueue=KUEUE)
    args.update(params)
    return run(check=check, **args)


def test_kueue_objects_check_predicts_the_run_and_a_rerun_changes_nothing(api):
    run(kinds=["Namespace"])  # the tenants' namespaces
    api.calls = []
    predicted = kueue_run(check=True)
    assert predicted["changed"] and [c[0] for c in api.calls] == ["read"]
    assert api.calls[0] == ("read", ("ResourceFlavor", "ClusterQueue", "LocalQueue"))
    assert FakeApi.versions == {"ResourceFlavor": KV, "ClusterQueue": KV, "LocalQueue": KV}
    assert predicted["objects"] == ["resource_flavor gpu-training", "cluster_queue gpu-training",
                                    "local_queue team-a/training"]  # team-a is the one training tenant
    first = kueue_run()
    assert first["changes"] == predicted["changes"]
    assert [c[0] for c in api.calls if c[0] != "read"] == ["create"] * 3
    cq = api.store[("ClusterQueue", "", "gpu-training")]
    assert cq["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf"}
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"gpupool.vcf/training": "true"}}
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "14"}]
    assert api.store[("LocalQueue", "team-a", "training")]["spec"] == {"clusterQueue": "gpu-training"}
    again = kueue_run()
    assert not again["changed"] and again["changes"] == []


def test_kueue_drift_patches_only_the_changed_spec_fields_kueue_defaults_stay(api):
    run(kinds=["Namespace"])
    kueue_run()
    cq = api.store[("ClusterQueue", "", "gpu-training")]
    cq["spec"]["queueingStrategy"] = "BestEffortFIFO"
    cq["spec"]["preemption"]["withinClusterQueue"] = "LowerPriority"
    cq["spec"]["fairSharing"] = {"weight": "1"}  # Kueue's or someone's: not the collection's
    api.store[("ResourceFlavor", "", "gpu-training")]["spec"]["nodeLabels"]["other/label"] = "x"
    api.calls = []
    predicted = kueue_run(check=True)
    assert [(c["object"], c["field"], c["action"]) for c in predicted["changes"]] == [
        ("cluster_queue gpu-training", "spec.queueingStrategy", "update"),
        ("cluster_queue gpu-training", "spec.preemption", "update")]
    done = kueue_run()
    assert done["changes"] == predicted["changes"] and not done.get("failed")
    [patch] = [c for c in api.calls if c[0] == "patch"]
    assert patch[:4] == ("patch", "ClusterQueue", "", "gpu-training")
    assert patch[4] == {"spec": {"queueingStrategy": "StrictFIFO", "preemption": {
        "withinClusterQueue": "Never", "reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}}}}
    assert api.store[("ClusterQueue", "", "gpu-training")]["spec"]["fairSharing"] == {"weight": "1"}
    assert kueue_run()["changes"] == []


def test_local_queue_cluster_queue_is_immutable_replaced_only_when_the_collection_made_it(api):
    run(kinds=["Namespace"])
    kueue_run()
    moved = dict(KUEUE, gpu_scheduling_policy_training_cluster_queue="gpu-training-2")
    api.calls = []
    out = kueue_run(kueue=moved, kinds=["LocalQueue"])
    assert [(c["field"], c["before"], c["after"], c["action"]) for c in out["changes"]] == [
        ("spec.clusterQueue", "gpu-training", "gpu-training-2", "replace")]
    assert [c[0] for c in api.calls] == ["read", "delete", "create"]
    assert api.store[("LocalQueue", "team-a", "training")]["spec"] == {"clusterQueue": "gpu-training-2"}
    del api.store[("LocalQueue", "team-a", "training")]["metadata"]["labels"]
    api.calls = []
    out = kueue_run(kinds=["LocalQueue"])
    assert out["failed"] and "not created by this collection" in out["msg"]
    assert [c[0] for c in api.calls] == ["read"]


def test_local_queue_in_a_namespace_the_run_creates_is_planned_as_a_create(api):
    out = run(check=True, priority_classes=[], kinds=["Namespace", "LocalQueue"], kueue=KUEUE)
    assert out["objects"] == ["namespace team-a", "namespace team-b", "local_queue team-a/training"]
    assert [c[0] for c in api.calls] == ["read"]
    assert run(priority_classes=[], kinds=["Namespace", "LocalQueue"], kueue=KUEUE)["changes"] == out["changes"]
    assert ("LocalQueue", "team-a", "training") in api.store


def test_bad_kueue_inputs_are_refused_before_any_read(api):
    out = kueue_run(kueue={"kueue_queues": []})
    assert out["failed"] and "gpu_scheduling_policy role's inputs" in out["msg"] and api.calls == []
    out = kueue_run(kueue=dict(KUEUE, gpu_scheduling_policy_kueue_preemption={"within_cluster_queue": "Always"}))
    assert out["failed"] and "within_cluster_queue must be one of" in out["msg"] and api.calls == []


# -- adopt ---------------------------------------------------------------------------------------

def test_adopt_labels_objects_made_by_hand_a_change_check_mode_shows_without_it_nothing_changes_owner(api):
    run(kinds=["Namespace"])
    run()
    kueue_run()
    for key in [("PriorityClass", "", "gpu-training"), ("ResourceQuota", "team-a", "gpupool-gpus"),
                ("Namespace", "", "team-b"), ("ClusterQueue", "", "gpu-training")]:
        del api.store[key]["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert run()["changes"] == [] and kueue_run()["changes"] == []  # without adopt: nothing changes owner
    api.calls = []
    predicted = run(check=True, adopt=True)
    assert [(c["object"], c["field"], c["before"], c["after"]) for c in predicted["changes"]] == [
        ("priority_class gpu-training", "metadata.labels.app.kubernetes.io/managed-by", None, "gpupool.vcf"),
        ("resource_quota team-a/gpupool-gpus", "metadata.labels.app.kubernetes.io/managed-by", None, "gpupool.vcf"),
        ("namespace team-b", "metadata.labels.app.kubernetes.io/managed-by", None, "gpupool.vcf")]
    assert predicted["adopted"] == ["priority_class gpu-training", "resource_quota team-a/gpupool-gpus",
                                    "namespace team-b"]
    assert [c[0] for c in api.calls] == ["read"]
    done = run(adopt=True)
    assert done["changes"] == predicted["changes"] and done["adopted"] == predicted["adopted"]
    assert [c[4] for c in api.calls if c[0] == "patch"] == [
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": "gpupool.vcf"}}}] * 3
    assert api.store[("ResourceQuota", "team-a", "gpupool-gpus")]["spec"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert run(adopt=True)["changes"] == []
    assert kueue_run(adopt=True)["adopted"] == ["cluster_queue gpu-training"]
    assert kueue_run(adopt=True)["changes"] == []


def test_adopt_with_drift_patches_the_fields_and_the_label_in_one_patch(api):
    run()
    key = ("ResourceQuota", "team-b", "gpu-quota")
    api.store[key]["metadata"]["labels"] = {"someone/else": "x"}
    api.store[key]["spec"]["hard"]["requests.nvidia.com/gpu"] = "9"
    api.calls = []
    out = run(adopt=True, kinds=["ResourceQuota"])
    assert [c["field"] for c in out["changes"]] == [
        "spec.hard.requests.nvidia.com/gpu", "metadata.labels.app.kubernetes.io/managed-by"]
    [patch] = [c for c in api.calls if c[0] == "patch"]
    assert patch[4] == {"spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
                        "metadata": {"labels": {"app.kubernetes.io/managed-by": "gpupool.vcf"}}}
    assert api.store[key]["metadata"]["labels"] == {"someone/else": "x", "app.kubernetes.io/managed-by": "gpupool.vcf"}


OPERATOR = {"gpu_operator_namespace": "gpu-operator", "gpu_operator_time_slicing": {"notebook": {"replicas": 4}},
            "gpu_operator_driver_version": "550.127.05", "gpu_operator_licensing_secret_name": "licensing-config-0a"}


def chart_cluster_policy(api):
    """The ClusterPolicy as the chart leaves it: fields the role sets and fields only the chart sets."""
    api.store[("ClusterPolicy", "", "cluster-policy")] = {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy", "resourceVersion": "3", "uid": "cp-1", "labels": {"app": "gpu-operator"}},
        "spec": {"driver": {"enabled": True, "repository": "nvcr.io/nvidia", "image": "driver", "version": "535.0",
                            "licensingConfig": {"nlsEnabled": True, "secretName": "licensing-config-0a"},
                            "useOpenKernelModules": False,
                            # the chart's default values (values.yaml): drain off, a quarter of the nodes at once
                            "upgradePolicy": {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%",
                                              "waitForCompletion": {"timeoutSeconds": 0},
                                              "podDeletion": {"force": False, "timeoutSeconds": 300,
                                                              "deleteEmptyDir": False},
                                              "drain": {"enable": False, "force": False, "timeoutSeconds": 300,
                                                        "deleteEmptyDir": False}}},
                 "mig": {"strategy": "single"}, "migManager": {"enabled": False},
                 "dcgmExporter": {"enabled": True, "enablePodLabels": True, "config": {"name": "gpupool-dcgm-metrics"},
                                  "podLabelAllowlistRegex": ["^app$"]},
                 "devicePlugin": {"enabled": True, "config": {"name": "gpupool-device-plugin-config",
                                                              "default": "default"}}}}


def test_operator_config_maps_check_predicts_the_run_a_rerun_changes_nothing(api):
    api.store[("Namespace", "", "gpu-operator")] = {"kind": "Namespace", "metadata": {"name": "gpu-operator"}}
    predicted = run(check=True, priority_classes=[], tenants=[], kinds=["ConfigMap"], gpu_operator=OPERATOR)
    assert predicted["names"] == ["gpu-operator/gpupool-device-plugin-config", "gpu-operator/gpupool-dcgm-metrics"]
    assert [c for c in api.calls if c[0] != "read"] == []
    assert api.calls == [("read", ("ConfigMap",), ("gpu-operator",))]
    first = run(priority_classes=[], tenants=[], kinds=["ConfigMap"], gpu_operator=OPERATOR)
    assert first["changes"] == predicted["changes"]
    cm = api.store[("ConfigMap", "gpu-operator", "gpupool-device-plugin-config")]
    assert "replicas: 4" in cm["data"]["notebook"] and cm["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert not run(priority_classes=[], tenants=[], kinds=["ConfigMap"], gpu_operator=OPERATOR)["changed"]
    # drift: one key's replicas, and the metrics file lost a counter; others' keys stay
    cm["data"]["notebook"] = cm["data"]["notebook"].replace("replicas: 4", "replicas: 2")
    cm["data"]["someone-elses"] = "x"
    dcgm = api.store[("ConfigMap", "gpu-operator", "gpupool-dcgm-metrics")]
    dcgm["data"]["dcgm-metrics.csv"] = "DCGM_FI_DEV_FB_USED, gauge, used\n"
    api.calls = []
    again = run(priority_classes=[], tenants=[], kinds=["ConfigMap"], gpu_operator=OPERATOR)
    assert [(c["object"], c["field"]) for c in again["changes"]] == [
        ("config_map gpu-operator/gpupool-device-plugin-config", "data.notebook"),
        ("config_map gpu-operator/gpupool-dcgm-metrics", "data.dcgm-metrics.csv")]
    patches = [c for c in api.calls if c[0] == "patch"]
    assert [sorted(p[4]["data"]) for p in patches] == [["notebook"], ["dcgm-metrics.csv"]]
    assert cm["data"]["someone-elses"] == "x" and "replicas: 4" in cm["data"]["notebook"]
    assert not run(priority_classes=[], tenants=[], kinds=["ConfigMap"], gpu_operator=OPERATOR)["changed"]


def test_cluster_policy_fields_are_merge_patched_one_by_one_others_never_touched(api):
    chart_cluster_policy(api)
    predicted = run(check=True, priority_classes=[], tenants=[], kinds=["ClusterPolicy"], gpu_operator=OPERATOR)
    assert api.versions == {"ClusterPolicy": "nvidia.com/v1"}
    assert [(c["field"], c["before"], c["after"]) for c in predicted["changes"]] == [
        ("spec.driver.version", "535.0", "550.127.05"),
        # the role's upgrade policy over the chart's defaults: one node at a time, drained
        ("spec.driver.upgradePolicy.maxUnavailable", "25%", 1),
        ("spec.driver.upgradePolicy.drain.enable", False, True),
        ("spec.dcgmExporter.podLabelAllowlistRegex", ["^app$"], [
            "^app$", "^app\\.kubernetes\\.io/name$", "^gpupool\\.vcf/.*$", "^kueue\\.x-k8s\\.io/queue-name$"])]
    done = run(priority_classes=[], tenants=[], kinds=["ClusterPolicy"], gpu_operator=OPERATOR)
    assert done["changes"] == predicted["changes"]
    [patch] = [c for c in api.calls if c[0] == "patch"]
    assert patch[4] == {"spec": {"driver": {"version": "550.127.05", "upgradePolicy": {
        "maxUnavailable": 1, "drain": {"enable": True}}}, "dcgmExporter": {
        "podLabelAllowlistRegex": predicted["changes"][3]["after"]}}}
    live = api.store[("ClusterPolicy", "", "cluster-policy")]
    assert live["spec"]["driver"]["useOpenKernelModules"] is False and live["spec"]["migManager"] == {"enabled": False}
    assert live["spec"]["driver"]["upgradePolicy"]["drain"]["deleteEmptyDir"] is False  # the chart's, kept
    assert "app.kubernetes.io/managed-by" not in live["metadata"]["labels"]  # the chart's: never labelled
    assert not run(priority_classes=[], tenants=[], kinds=["ClusterPolicy"], gpu_operator=OPERATOR, adopt=True)["changed"]


def test_a_missing_cluster_policy_fails_without_a_write(api):
    res = run(priority_classes=[], tenants=[], kinds=["ClusterPolicy"], gpu_operator=OPERATOR)
    assert res["failed"] and "does not exist" in res["msg"] and "chart" in res["msg"]
    assert [c for c in api.calls if c[0] != "read"] == []


def test_gpu_operator_inputs_by_their_names_only(api):
    res = run(priority_classes=[], tenants=[], gpu_operator={"namespace": "x"})
    assert res["failed"] and "gpu_operator role's inputs" in res["msg"] and api.calls == []


TOKEN = "Y2xpZW50LWNvbmZpZ3VyYXRpb24tdG9rZW4="  # base64 of a client configuration token
LICENSING = {"namespace": "gpu-operator", "data": {"gridd.conf": "RmVhdHVyZVR5cGU9MQo=",
                                                   "client_configuration_token.tok": TOKEN}}


def test_licensing_secret_named_by_its_content_never_shown_check_predicts_the_run(api):
    predicted = run(check=True, priority_classes=[], tenants=[], kinds=["Namespace", "Secret"], licensing=LICENSING)
    name = predicted["licensing_secret_name"]
    assert name.startswith("licensing-config-") and len(name) == len("licensing-config-") + 10
    assert predicted["objects"] == ["namespace gpu-operator", "secret gpu-operator/%s" % name]
    assert TOKEN not in repr(predicted)  # not in changes, diff or names
    assert api.calls == [("read", ("Namespace", "Secret"), (("gpu-operator", name),))]
    first = run(priority_classes=[], tenants=[], kinds=["Namespace", "Secret"], licensing=LICENSING)
    assert first["changes"] == predicted["changes"] and TOKEN not in repr(first)
    secret = api.store[("Secret", "gpu-operator", name)]
    assert secret["data"] == LICENSING["data"] and secret["type"] == "Opaque"
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf", "gpupool.vcf/licensing": "true"}
    assert api.store[("Namespace", "", "gpu-operator")]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpupool.vcf"}
    assert not run(priority_classes=[], tenants=[], kinds=["Namespace", "Secret"], licensing=LICENSING)["changed"]
    # the token edited behind the collection's back: patched back, shown as hashes only
    secret["data"]["client_configuration_token.tok"] = "b3RoZXI="
    api.calls = []
    again = run(priority_classes=[], tenants=[], kinds=["Namespace", "Secret"], licensing=LICENSING)
    [change] = again["changes"]
    assert change["field"] == "data.client_configuration_token.tok" and change["after"].startswith("(secret data, sha256 ")
    assert TOKEN not in repr(again) and "b3RoZXI=" not in repr(again)
    [patch] = [c for c in api.calls if c[0] == "patch"]
    assert patch[4]["data"] == {"client_configuration_token.tok": TOKEN}
    # a new token is a new Secret; the old one is left (pruning is the role's)
    rotated = dict(LICENSING, data=dict(LICENSING["data"], **{"client_configuration_token.tok": "bmV3"}))
    second = run(priority_classes=[], tenants=[], kinds=["Namespace", "Secret"], licensing=rotated)
    assert second["licensing_secret_name"] != name and ("Secret", "gpu-operator", name) in api.store


def test_licensing_points_the_cluster_policy_at_the_secret_only_its_licensing_fields(api):
    chart_cluster_policy(api)
    res = run(priority_classes=[], tenants=[], kinds=["ClusterPolicy"], licensing=dict(LICENSING, cluster_policy=True))
    name = res["licensing_secret_name"]
    assert [(c["field"], c["before"], c["after"]) for c in res["changes"]] == [
        ("spec.driver.licensingConfig.secretName", "licensing-config-0a", name)]
    [patch] = [c for c in api.calls if c[0] == "patch"]
    assert patch[4] == {"spec": {"driver": {"licensingConfig": {"secretName": name}}}}
    assert api.store[("ClusterPolicy", "", "cluster-policy")]["spec"]["driver"]["version"] == "535.0"
    both = run(priority_classes=[], tenants=[], kinds=["ClusterPolicy"], gpu_operator=OPERATOR,
               licensing=dict(LICENSING, cluster_policy=True))
    assert both["failed"] and "not both" in both["msg"]


KUEUE_CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: false\n"


def test_kueue_configuration_check_predicts_the_patch_a_rerun_changes_nothing(api):
    key = ("ConfigMap", "kueue-system", "kueue-manager-config")
    api.store[key] = {"kind": "ConfigMap", "metadata": {"name": key[2], "namespace": key[1], "resourceVersion": "4"},
                      "data": {"controller_manager_config.yaml": KUEUE_CONFIG}}
    kueue = {"gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout": "10m"}
    predicted = run(check=True, priority_classes=[], tenants=[], kinds=["ConfigMap"], kueue=kueue)
    assert predicted["objects"] == ["config_map kueue-system/kueue-manager-config"]
    done = run(priority_classes=[], tenants=[], kinds=["ConfigMap"], kueue=kueue)
    assert done["changes"] == predicted["changes"]
    text = api.store[key]["data"]["controller_manager_config.yaml"]
    assert "blockAdmission: true" in text and "manageJobsWithoutQueueName: false" in text
    assert "app.kubernetes.io/managed-by" not in (api.store[key]["metadata"].get("labels") or {})
    assert not run(priority_classes=[], tenants=[], kinds=["ConfigMap"], kueue=kueue, adopt=True)["changed"]
    del api.store[key]
    missing = run(priority_classes=[], tenants=[], kinds=["ConfigMap"], kueue=kueue)
    assert missing["failed"] and "Kueue's installation makes it" in missing["msg"]


# -- the notebook culler -------------------------------------------------------------------------

SCRIPT = "import sys\nprint('culling')\n"
CULLING = {"gpu_scheduling_policy_culling": "cronjob", "gpu_scheduling_policy_culling_idle_minutes": 120,
           "gpu_scheduling_policy_culling_check_minutes": 5}
CULLER_KINDS = ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob"]
CULLER = "gpupool-notebook-culler"


def culling_run(check=False, **params):
    args = dict(priority_classes=[], tenants=[], kinds=CULLER_KINDS, culling=CULLING, culler_script=SCRIPT)
    args.update(params)
    return run(check=check, **args)


def test_culler_in_a_namespace_the_run_creates_check_predicts_every_create_a_rerun_changes_nothing(api):
    predicted = culling_run(check=True)
    assert [c[0] for c in api.calls] == ["read"]
    assert FakeApi.versions == {"ServiceAccount": "v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
                                "ClusterRoleBinding": "rbac.authorization.k8s.io/v1", "CronJob": "batch/v1"}
    assert predicted["objects"] == [
        "namespace gpupool-system", "service_account gpupool-system/%s" % CULLER, "cluster_role %s" % CULLER,
        "cluster_role_binding %s" % CULLER, "config_map gpupool-system/%s" % CULLER, "cronjob gpupool-system/%s" % CULLER]
    assert set(c["action"] for c in predicted["changes"]) == {"create"}
    first = culling_run()
    assert first["changes"] == predicted["changes"]
    assert [c[:2] for c in api.calls if c[0] != "read"] == [("create", k) for k in CULLER_KINDS]
    for key, obj in api.store.items():
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpupool.vcf", key
    assert api.store[("ConfigMap", "gpupool-system", CULLER)]["data"] == {"culler.py": SCRIPT}
    job = api.store[("CronJob", "gpupool-system", CULLER)]["spec"]
    assert job["schedule"] == "*/5 * * * *"
    env = job["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CULL_IDLE_MINUTES", "value": "120"} in env
    again = culling_run()
    assert not again["changed"] and again["changes"] == []


def test_culler_drift_is_patched_field_by_field_what_the_server_adds_stays(api):
    culling_run()
    job = api.store[("CronJob", "gpupool-system", CULLER)]
    job["spec"]["schedule"] = "*/30 * * * *"
    job["spec"]["suspend"] = False  # the server's default: not the collection's
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolicy"] = "IfNotPresent"  # defaulted: never compared
    container["env"][0]["value"] = "9999"
    role = api.store[("ClusterRole", "", CULLER)]
    role["rules"] = role["rules"][:1]
    api.store[("ConfigMap", "gpupool-system", CULLER)]["data"]["culler.py"] = "print('edited by hand')\n"
    api.calls = []
    predicted = culling_run(check=True)
    assert [(c["object"], c["field"], c["action"]) for c in predicted["changes"]] == [
        ("cluster_role %s" % CULLER, "rules", "update"),
        ("config_map gpupool-system/%s" % CULLER, "data.culler.py", "update"),
        ("cronjob gpupool-system/%s" % CULLER, "spec.schedule", "update"),
        ("cronjob gpupool-system/%s" % CULLER, "spec.jobTemplate", "update")]
    done = culling_run()
    assert done["changes"] == predicted["changes"]
    patches = [c for c in api.calls if c[0] == "patch"]
    assert [p[1] for p in patches] == ["ClusterRole", "ConfigMap", "CronJob"]
    assert len(patches[0][4]["rules"]) == 4 and patches[1][4] == {"data": {"culler.py": SCRIPT}}
    assert sorted(patches[2][4]["spec"]) == ["jobTemplate", "schedule"]
    assert api.store[("CronJob", "gpupool-system", CULLER)]["spec"]["suspend"] is False
    assert culling_run()["changes"] == []


def test_culler_binding_role_ref_is_replaced_only_when_the_collection_made_it(api):
    culling_run()
    key = ("ClusterRoleBinding", "", CULLER)
    api.store[key]["roleRef"]["name"] = "elsewhere"
    api.calls = []
    out = culling_run(kinds=["ClusterRoleBinding"])
    assert [(c["field"], c["action"]) for c in out["changes"]] == [("roleRef", "replace")]
    assert [c[0] for c in api.calls] == ["read", "delete", "create"]
    assert api.store[key]["roleRef"]["name"] == CULLER
    api.store[key]["roleRef"]["name"] = "elsewhere"
    del api.store[key]["metadata"]["labels"]
    api.calls = []
    out = culling_run(kinds=["ClusterRoleBinding"])
    assert out["failed"] and "not created by this collection" in out["msg"] and [c[0] for c in api.calls] == ["read"]


KUBEFLOW = {"gpu_scheduling_policy_culling": "kubeflow", "gpu_scheduling_policy_culling_idle_minutes": 120}
CONTROLLER = ("Deployment", "kubeflow", "notebook-controller-deployment")


def kubeflow_controller(api, containers=None):
    api.store[CONTROLLER] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": CONTROLLER[2], "namespace": CONTROLLER[1], "resourceVersion": "5", "uid": "d-1",
                     "labels": {"app": "notebook-controller"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": containers if containers is not None else [
            {"name": "manager", "image": "notebook-controller:1",
             "env": [{"name": "USE_ISTIO", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "1440"}]},
            {"name": "sidecar", "image": "sidecar:1"}]}}}}


def kubeflow_run(check=False, **params):
    args = dict(priority_classes=[], tenants=[], kinds=["Deployment"], culling=KUBEFLOW)
    args.update(params)
    return run(check=check, **args)


def test_kubeflow_controller_env_patched_back_its_other_settings_kept_never_labelled(api):
    kubeflow_controller(api)
    predicted = kubeflow_run(check=True, adopt=True)
    assert FakeApi.versions == {"Deployment": "apps/v1"}
    field = "spec.template.spec.containers[manager].env."
    assert [(c["field"], c["before"], c["after"]) for c in predicted["changes"]] == [
        (field + "ENABLE_CULLING", None, "true"), (field + "CULL_IDLE_TIME", "1440", "120"),
        (field + "IDLENESS_CHECK_PERIOD", None, "10")]
    assert predicted["adopted"] == [] and [c[0] for c in api.calls] == ["read"]
    done = kubeflow_run(adopt=True)
    assert done["changes"] == predicted["changes"]
    [patch] = [c for c in api.calls if c[0] == "patch"]
    manager, sidecar = patch[4]["spec"]["template"]["spec"]["containers"]
    assert manager["env"] == [{"name": "USE_ISTIO", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "120"},
                              {"name": "ENABLE_CULLING", "value": "true"}, {"name": "IDLENESS_CHECK_PERIOD", "value": "10"}]
    assert manager["image"] == "notebook-controller:1" and sidecar == {"name": "sidecar", "image": "sidecar:1"}
    live = api.store[CONTROLLER]
    assert live["metadata"]["labels"] == {"app": "notebook-controller"} and live["spec"]["replicas"] == 1
    assert not kubeflow_run(adopt=True)["changed"]


@pytest.mark.parametrize("containers", [None, [{"name": "other", "image": "x"}]])
def test_a_missing_kubeflow_controller_or_container_fails_before_any_write(api, containers):
    if containers is not None:
        kubeflow_controller(api, containers)
    out = kubeflow_run()
    assert out["failed"] and "Kubeflow's notebook controller makes it" in out["msg"] and "Nothing was changed" in out["msg"]
    assert [c[0] for c in api.calls] == ["read"]
    assert CONTROLLER not in api.store or api.store[CONTROLLER]["spec"]["template"]["spec"]["containers"] == containers


@pytest.mark.parametrize("params, text", [
    (dict(culling=dict(CULLING, gpu_scheduling_policy_culling="auto")), "auto must be resolved first"),
    (dict(culler_script=None), "needs culler_script"),
    (dict(culling=dict(CULLING, gpu_scheduling_policy_culling_idle_minutes=0)),
     "gpu_scheduling_policy_culling_idle_minutes must be 1 or more, not 0"),
    (dict(culling=dict(CULLING, gpu_scheduling_policy_culling_pools={"notebooks": "long"})),
     "gpu_scheduling_policy_culling_pools.notebooks must be a whole number"),
    (dict(culling=dict(CULLING, gpu_scheduling_policy_culling="sometimes")), "must be one of auto, cronjob"),
    (dict(culling=dict(CULLING, gpu_scheduling_policy_culling_port=70000)),
     "gpu_scheduling_policy_culling_port must be from 1 to 65535, not 70000"),
    (dict(culling={"culling": "cronjob"}), "gpu_scheduling_policy role's inputs"),
])
def test_bad_culling_inputs_are_refused_before_any_read(api, params, text):
    out = culling_run(**params)
    assert out["failed"] and text in out["msg"], out["msg"]
    assert api.calls == []


def test_the_operators_namespace_labelled_only_when_this_run_creates_it_and_written_once(api):
    predicted = run(check=True, priority_classes=[], tenants=[], kinds=["Namespace", "ConfigMap"], gpu_operator=OPERATOR)
    assert predicted["objects"] == ["namespace gpu-operator", "config_map gpu-operator/gpupool-device-plugin-config",
                                    "config_map gpu-operator/gpupool-dcgm-metrics"]
    assert run(priority_classes=[], tenants=[], kinds=["Namespace", "ConfigMap"],
               gpu_operator=OPERATOR)["changes"] == predicted["changes"]
    assert api.store[("Namespace", "", "gpu-operator")]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpupool.vcf"}
    api.store[("Namespace", "", "gpu-operator")]["metadata"]["labels"] = {"team": "platform"}  # one found: left alone
    assert run(priority_classes=[], tenants=[], kinds=["Namespace"], gpu_operator=OPERATOR)["changes"] == []
    del api.store[("Namespace", "", "gpu-operator")]
    api.calls = []
    both = run(priority_classes=[], tenants=[], kinds=["Namespace"], gpu_operator=OPERATOR, licensing=LICENSING)
    assert both["objects"] == ["namespace gpu-operator"] and [c[0] for c in api.calls] == ["read", "create"]
