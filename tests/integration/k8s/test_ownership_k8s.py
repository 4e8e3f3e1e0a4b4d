"""The Kubernetes side removes only what the collection made (the rig):

* vks_node_pool records the node pools it creates in the Cluster's annotation gpupool.vcf/node-pools
  and purges only those: a pool added by hand survives, with the module and with the role;
* nls_licensing labels its Secrets app.kubernetes.io/managed-by=gpupool.vcf and keeps the newest
  three it made, never the one the ClusterPolicy references, never a Secret without the label;
* the namespaces and objects the roles create carry the label.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from k8s_fixtures import wait_for
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_module, run_playbook
from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing

ROOT = Path(__file__).resolve().parents[3]
CHART = gpu_operator_chart() or ROOT.parent / "shared" / "charts" / "gpu-operator"
CAPI = "cluster.x-k8s.io/v1beta2"
MANAGED = {"app.kubernetes.io/managed-by": "gpupool.vcf"}
OWNED = "gpupool.vcf/node-pools"
M = "gpupool.vcf.vks_node_pool"


def _clusters(api):
    return dynamic.DynamicClient(api).resources.get(api_version=CAPI, kind="Cluster")


def _create_cluster(api, ns, name):
    cpu = {"class": "node-pool", "name": "cpu", "replicas": 1,
           "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}}
    _clusters(api).create(namespace=ns, body={
        "apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": name},
        "spec": {"topology": {
            "classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
            "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": [cpu]},
            "variables": [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]}}})


def _cluster(api, ns, name):
    obj = _clusters(api).get(namespace=ns, name=name).to_dict()
    pools = [m["name"] for m in obj["spec"]["topology"]["workers"]["machineDeployments"]]
    return pools, (obj["metadata"].get("annotations") or {}).get(OWNED)


def _add_pool_by_hand(api, ns, name, pool):
    obj = _clusters(api).get(namespace=ns, name=name).to_dict()
    obj["spec"]["topology"]["workers"]["machineDeployments"].append(
        {"class": "node-pool", "name": pool, "replicas": 1,
         "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}})
    obj["metadata"].pop("managedFields", None)
    _clusters(api).replace(namespace=ns, body=obj)


def test_node_pool_purge_removes_only_pools_the_module_created(k8s_rig, k8s_api, k8s_namespace):
    ns, env = k8s_namespace, k8s_rig.env
    _create_cluster(k8s_api, ns, "owned")
    args = {"namespace": ns, "cluster_name": "owned", "node_pools": [{"name": "inference", "replicas": 1}]}
    res = run_module(M, args, env=env, check=True, diff=True)[0]
    assert res["changed"] and res["owned"] == ["inference"], res
    assert res["diff"]["before"]["owned"] == [] and res["diff"]["after"]["owned"] == ["inference"]
    assert _cluster(k8s_api, ns, "owned") == (["cpu"], None)  # check mode stores nothing
    res = run_module(M, args, env=env)[0]
    assert res["changed"] and res["owned"] == ["inference"], res
    assert _cluster(k8s_api, ns, "owned") == (["cpu", "inference"], "inference")

    # a pool added by hand, and the pre-existing one, survive purge
    _add_pool_by_hand(k8s_api, ns, "owned", "by-hand")
    res = run_module(M, {**args, "purge": True}, env=env)[0]
    assert res["changed"] is False and res["kept_foreign"] == ["by-hand", "cpu"], res
    assert _cluster(k8s_api, ns, "owned") == (["cpu", "inference", "by-hand"], "inference")

    # the design moves on: the pool the module created goes, the others stay
    moved = {**args, "purge": True, "node_pools": [{"name": "training", "replicas": 1}]}
    res = run_module(M, moved, env=env, check=True, diff=True)[0]
    assert res["changed"] and res["diff"]["after"]["owned"] == ["training"]
    assert [m["name"] for m in res["machine_deployments"]] == ["cpu", "by-hand", "training"]
    res = run_module(M, moved, env=env)[0]
    assert res["changed"] and res["owned"] == ["training"] and res["kept_foreign"] == ["by-hand", "cpu"]
    assert _cluster(k8s_api, ns, "owned") == (["cpu", "by-hand", "training"], "training")
    res = run_module(M, moved, env=env)[0]
    assert res["changed"] is False


def test_role_purge_keeps_a_pool_added_by_hand(k8s_rig, k8s_api, k8s_namespace):
    ns = k8s_namespace
    _create_cluster(k8s_api, ns, "roles")

    def play(pools):
        return [{"hosts": "localhost", "gather_facts": False,
                 "module_defaults": {"group/gpupool.vcf.k8s": {"kubeconfig": str(k8s_rig.kubeconfig)}},
                 "roles": [{"role": "gpupool.vcf.vks_gpu_node_pools", "vks_gpu_node_pools_cluster_name": "roles",
                            "vks_gpu_node_pools_namespace": ns, "vks_gpu_node_pools_purge": True,
                            "vks_gpu_node_pools_node_pools": pools}]}]

    run = run_playbook(play([{"name": "gpu-a", "replicas": 1, "gpu": False}]))
    assert run.rc == 0, run.stdout[-3000:]
    _add_pool_by_hand(k8s_api, ns, "roles", "by-hand")
    for attempt in ("converge", "again"):
        run = run_playbook(play([{"name": "gpu-b", "replicas": 1, "gpu": False}]))
        assert run.rc == 0, run.stdout[-3000:]
        assert _cluster(k8s_api, ns, "roles") == (["cpu", "by-hand", "gpu-b"], "gpu-b"), attempt
    assert run.stats["changed"] == 0


# --- licensing Secrets ----------------------------------------------------------------------

def _cluster_policy_crd(api):
    if not (CHART / "Chart.yaml").is_file():
        pytest.fail(gpu_operator_chart_missing(), pytrace=False)
    crd = yaml.safe_load((CHART / "crds" / "nvidia.com_clusterpolicies.yaml").read_text())
    dynamic.DynamicClient(api).resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").server_side_apply(
        body=crd, name=crd["metadata"]["name"], field_manager="ownership-test", force_conflicts=True)
    ext = client.ApiextensionsV1Api(api)
    wait_for("CRD established", lambda: any(
        c.type == "Established" and c.status == "True"
        for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []))
    return dynamic.DynamicClient(api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")


@pytest.fixture
def cluster_policy(k8s_api):
    """A ClusterPolicy of this test's own (none may exist: the GPU Operator tests remove theirs)."""
    cps = _cluster_policy_crd(k8s_api)
    try:
        cps.get(name="cluster-policy")
        pytest.fail("a ClusterPolicy cluster-policy exists already; this test needs its own", pytrace=False)
    except ApiException as exc:
        assert exc.status == 404
    required = ("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter",
                "operator", "toolkit")
    spec = dict((k, {}) for k in required)
    cps.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                     "spec": spec})
    try:
        yield cps
    finally:
        cps.delete(name="cluster-policy")


def _point(cps, name):
    cps.patch(name="cluster-policy", content_type="application/merge-patch+json",
              body={"spec": {"driver": {"licensingConfig": {"secretName": name, "nlsEnabled": True}}}})


def _referenced(cps):
    return cps.get(name="cluster-policy").to_dict()["spec"]["driver"]["licensingConfig"]["secretName"]


def _licensing_play(token, ns, update=True):
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "licensing", "ansible.builtin.import_role": {"name": "gpupool.vcf.nls_licensing",
                                                              "tasks_from": "kubernetes"},
         "vars": {"nls_licensing_token_src": str(token), "nls_licensing_operator_namespace": ns,
                  "nls_licensing_update_cluster_policy": update}}]}]


def test_licensing_secrets_pruned_beyond_three_never_referenced_or_unlabelled(k8s_rig, k8s_api, k8s_namespace,
                                                                              cluster_policy, tmp_path):
    ns, env, cps = k8s_namespace, k8s_rig.env, cluster_policy
    core = client.CoreV1Api(k8s_api)
    # a Secret of the same name form without the label (made by someone else) is never touched
    core.create_namespaced_secret(ns, {"metadata": {"name": "licensing-config-0000000000"},
                                       "data": {"x": "eA=="}})

    def secrets():
        return sorted(s.metadata.name for s in core.list_namespaced_secret(ns).items
                      if s.metadata.name.startswith("licensing-config-"))

    made = []
    for i in range(1, 6):
        (tmp_path / ("t%d.tok" % i)).write_text("client-configuration-token-%d\n" % i)

    def run(i, update=True):
        result = run_playbook(_licensing_play(tmp_path / ("t%d.tok" % i), ns, update), env=env)
        assert result.rc == 0, result.stdout[-3000:]
        name = result.result("gpupool.vcf.nls_licensing : Licensing Secret name (content hash)")[
            "ansible_facts"]["nls_licensing_secret_name"]
        if name not in made:
            made.append(name)
            time.sleep(1.1)  # creation times are in whole seconds
        return result

    for i in (1, 2, 3):
        run(i)
    assert secrets() == sorted(made + ["licensing-config-0000000000"])
    for name in made:
        assert core.read_namespaced_secret(name, ns).metadata.labels["app.kubernetes.io/managed-by"] == "gpupool.vcf"
    assert _referenced(cps) == made[2]

    # an administrator points the ClusterPolicy back at the first Secret; the role leaves it be
    _point(cps, made[0])
    run(4, update=False)
    assert secrets() == sorted(made + ["licensing-config-0000000000"])  # the 4th is kept, the 1st referenced
    result = run(5, update=False)
    assert result.result("gpupool.vcf.nls_licensing : Licensing Secrets beyond the newest 3")[
        "ansible_facts"]["nls_licensing_pruned_secrets"] == [made[1]]
    assert secrets() == sorted([made[0], made[2], made[3], made[4], "licensing-config-0000000000"])
    again = run(5, update=False)
    assert again.stats["changed"] == 0

    # the role points the ClusterPolicy at the newest; the old reference goes on the run after
    run(5)
    assert _referenced(cps) == made[4] and made[0] in secrets()
    run(5)
    assert secrets() == sorted([made[2], made[3], made[4], "licensing-config-0000000000"])
    again = run(5)
    assert again.stats["changed"] == 0
    assert "client-configuration-token-5" not in again.stdout


def test_licensing_keep_secrets_below_one_fails_before_any_change(k8s_rig, k8s_namespace, tmp_path):
    token = tmp_path / "t.tok"
    token.write_text("tok\n")
    play = _licensing_play(token, k8s_namespace)
    play[0]["tasks"][0]["vars"]["nls_licensing_keep_secrets"] = 0
    run = run_playbook(play, env=k8s_rig.env)
    assert run.rc != 0
    failed = [r for _n, r in run.tasks if r.get("failed")]
    assert "nls_licensing_keep_secrets must be 1 or more" in failed[0]["msg"]
    assert not [n for n, r in run.tasks if r.get("changed")]


def test_namespaces_the_roles_create_are_labelled_those_they_find_are_not(k8s_rig, k8s_api, k8s_namespace, tmp_path):
    """gpu_scheduling_policy and nls_licensing: a namespace they create carries the label, one that
    existed keeps its labels; the quota, queues and culling objects carry it."""
    core = client.CoreV1Api(k8s_api)
    fresh = "%s-new" % k8s_namespace[:50]
    token = tmp_path / "t.tok"
    token.write_text("tok\n")
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "policy", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_scheduling_policy"},
         "vars": {"gpu_scheduling_policy_priority_classes": [
                      {"name": "%s-pc" % fresh, "value": 100}],
                  "gpu_scheduling_policy_tenants": [{"namespace": k8s_namespace, "gpus": 1},
                                                    {"namespace": fresh, "gpus": 1}],
                  "gpu_scheduling_policy_kueue": False, "gpu_scheduling_policy_culling": "none"}},
        {"name": "licensing", "ansible.builtin.import_role": {"name": "gpupool.vcf.nls_licensing",
                                                              "tasks_from": "kubernetes"},
         "vars": {"nls_licensing_token_src": str(token), "nls_licensing_operator_namespace": fresh,
                  "nls_licensing_update_cluster_policy": False}}]}]
    try:
        for attempt in ("converge", "again"):
            run = run_playbook(play, env=k8s_rig.env)
            assert run.rc == 0, (attempt, run.stdout[-3000:])
        assert run.stats["changed"] == 0
        assert core.read_namespace(fresh).metadata.labels.get("app.kubernetes.io/managed-by") == "gpupool.vcf"
        assert "app.kubernetes.io/managed-by" not in core.read_namespace(k8s_namespace).metadata.labels
        quota = core.read_namespaced_resource_quota("gpu-quota", k8s_namespace)
        assert quota.metadata.labels == MANAGED
    finally:
        core.delete_namespace(fresh)
        try:
            client.SchedulingV1Api(k8s_api).delete_priority_class("%s-pc" % fresh)
        except ApiException:
            pass
