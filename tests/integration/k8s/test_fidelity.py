"""Fidelity of the Kubernetes test rig: each test passes against a real control plane and
fails against a dictionary-backed fake (no conflicts, validation, admission, scheduler,
preemption or queueing)."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from k8s_fixtures import wait_for

from tests.lib.kueue_rig import gpu_queue, pool_job
from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing
import yaml
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[3]
CHART = gpu_operator_chart() or ROOT.parent / "shared" / "charts" / "gpu-operator"
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def uid() -> str:
    return uuid.uuid4().hex[:6]


def pod(name, resources=None, tolerations=None, node=None, priority_class=None, annotations=None):
    spec = {"containers": [{"name": "main", "image": "sim/cuda:12",
                            "resources": {"limits": resources or {}}}],
            "tolerations": tolerations or [], "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}


def phase(core, ns, name):
    try:
        return core.read_namespaced_pod(name, ns).status.phase
    except ApiException as e:
        if e.status == 404:
            return "Gone"
        raise


def require_chart():
    if not (CHART / "Chart.yaml").is_file():
        pytest.fail(gpu_operator_chart_missing(), pytrace=False)


def apply_chart_crd(api, filename):
    require_chart()
    crd = yaml.safe_load((CHART / "crds" / filename).read_text())
    dynamic.DynamicClient(api).resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition").server_side_apply(
        body=crd, name=crd["metadata"]["name"], field_manager="fidelity-test", force_conflicts=True)
    ext = client.ApiextensionsV1Api(api)
    wait_for("CRD established", lambda: any(
        c.type == "Established" and c.status == "True"
        for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []))
    return crd


# --- API machinery -------------------------------------------------------------------------

def test_stale_resource_version_is_a_conflict(k8s_api, k8s_namespace):
    core = client.CoreV1Api(k8s_api)
    cm = core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    stale = cm.metadata.resource_version
    core.patch_namespaced_config_map("cm", k8s_namespace, {"data": {"a": "2"}})
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("cm", k8s_namespace, {
            "metadata": {"name": "cm", "resourceVersion": stale}, "data": {"a": "3"}})
    assert e.value.status == 409


def test_server_side_apply_field_manager_conflict(k8s_api, k8s_namespace):
    cms = dynamic.DynamicClient(k8s_api).resources.get(api_version="v1", kind="ConfigMap")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"owner": "a"}}
    cms.server_side_apply(body=body, namespace=k8s_namespace, name="ssa", field_manager="manager-a")
    body["data"]["owner"] = "b"
    with pytest.raises(ApiException) as e:
        cms.server_side_apply(body=body, namespace=k8s_namespace, name="ssa", field_manager="manager-b")
    assert e.value.status == 409
    assert "manager-a" in e.value.body
    cms.server_side_apply(body=body, namespace=k8s_namespace, name="ssa", field_manager="manager-b",
                          force_conflicts=True)
    assert cms.get(namespace=k8s_namespace, name="ssa").data.owner == "b"


def test_priority_class_value_is_immutable(k8s_api):
    sched = client.SchedulingV1Api(k8s_api)
    name = f"fidelity-{uid()}"
    sched.create_priority_class({"metadata": {"name": name}, "value": 1000})
    try:
        with pytest.raises(ApiException) as e:
            sched.patch_priority_class(name, {"value": 2000})
        assert e.value.status == 422
        assert "may not be changed" in e.value.body
    finally:
        sched.delete_priority_class(name)


def test_invalid_taint_effect_is_rejected(k8s_api):
    core = client.CoreV1Api(k8s_api)
    with pytest.raises(ApiException) as e:
        core.create_node({"metadata": {"name": f"bad-taint-{uid()}"},
                          "spec": {"taints": [{"key": GPU, "value": "present", "effect": "Sometimes"}]}})
    assert e.value.status == 422
    assert "effect" in e.value.body


def test_namespace_deletion_is_finished_by_the_controller_manager(k8s_api):
    core = client.CoreV1Api(k8s_api)
    ns = f"doomed-{uid()}"
    core.create_namespace({"metadata": {"name": ns}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    core.delete_namespace(ns)
    assert core.read_namespace(ns).status.phase == "Terminating"

    def gone():
        try:
            core.read_namespace(ns)
        except ApiException as e:
            return e.status == 404
        return False

    wait_for("namespace removed", gone, timeout=60)


def test_custom_resource_pruning_and_status_subresource(k8s_api, k8s_namespace):
    clusters = dynamic.DynamicClient(k8s_api).resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
    body = _cluster("pruned", "builtin-generic-v3.4.0",
                    [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}])
    body["spec"]["topology"]["notAField"] = True
    body["status"] = {"phase": "Provisioned"}
    obj = clusters.create(body=body, namespace=k8s_namespace)
    assert "notAField" not in obj.spec.topology
    assert not obj.get("status")  # status is a subresource: ignored on create
    obj = obj.to_dict()
    obj["status"] = {"phase": "Provisioned"}
    clusters.status.replace(body=obj, namespace=k8s_namespace)
    assert clusters.get(namespace=k8s_namespace, name="pruned").status.phase == "Provisioned"


# --- GPU Operator chart and CRDs -----------------------------------------------------------

def test_cluster_policy_rejected_by_crd_schema(k8s_api):
    apply_chart_crd(k8s_api, "nvidia.com_clusterpolicies.yaml")
    cp = dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    name = f"fidelity-{uid()}"
    with pytest.raises(ApiException) as e:
        cp.create(body={"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": name},
                        "spec": {"driver": {"enabled": "yes please"}}})
    assert e.value.status == 422
    assert "spec.driver.enabled" in e.value.body


def test_gpu_operator_chart_installs_with_helm(k8s_rig, k8s_api, k8s_namespace):
    require_chart()
    rel = "gpu-operator"
    k8s_rig.helm("install", rel, str(CHART), "--namespace", k8s_namespace,
                 "--set", "operator.upgradeCRD=false",
                 "--set", "dcgmExporter.serviceMonitor.enabled=false",
                 timeout=300)
    try:
        status = k8s_rig.helm("status", rel, "--namespace", k8s_namespace, "-o", "json")
        assert '"status":"deployed"' in status.stdout.replace(" ", "")
        apps = client.AppsV1Api(k8s_api)
        deps = {d.metadata.name for d in apps.list_namespaced_deployment(k8s_namespace).items}
        assert "gpu-operator" in deps
        cp = dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
        assert cp.get(name="cluster-policy").spec.mig.strategy in ("single", "mixed", "none")
        core = client.CoreV1Api(k8s_api)
        wait_for("the operator pod Running", lambda: any(
            p.status.phase == "Running"
            for p in core.list_namespaced_pod(k8s_namespace, label_selector="app=gpu-operator").items),
            timeout=60)
    finally:
        k8s_rig.helm("uninstall", rel, "--namespace", k8s_namespace, "--no-hooks", check=False)


# --- quota, taints, priority ---------------------------------------------------------------

def test_pod_over_gpu_quota_is_rejected(k8s_api, k8s_namespace):
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_resource_quota(k8s_namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {f"requests.{GPU}": "1"}}})
    wait_for("quota status", lambda: (core.read_namespaced_resource_quota("gpus", k8s_namespace)
                                      .status.hard or {}).get(f"requests.{GPU}"))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(k8s_namespace, pod("two-gpus", {GPU: "2"}, [GPU_TOLERATION]))
    assert e.value.status == 403
    assert "exceeded quota" in e.value.body
    core.create_namespaced_pod(k8s_namespace, pod("one-gpu", {GPU: "1"}, [GPU_TOLERATION]))


def test_pod_without_toleration_never_lands_on_tainted_gpu_node(k8s_api, k8s_namespace):
    core = client.CoreV1Api(k8s_api)
    core.create_namespaced_pod(k8s_namespace, pod("no-toleration", {GPU: "1"}))
    core.create_namespaced_pod(k8s_namespace, pod("tolerates", {GPU: "1"}, [GPU_TOLERATION]))
    wait_for("tolerating pod Running", lambda: phase(core, k8s_namespace, "tolerates") == "Running")

    def unschedulable():
        p = core.read_namespaced_pod("no-toleration", k8s_namespace)
        return next((c for c in p.status.conditions or []
                     if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"), None)

    cond = wait_for("scheduler to give up on the pod without toleration", unschedulable)
    assert "untolerated taint" in cond.message and GPU in cond.message
    time.sleep(2)
    p = core.read_namespaced_pod("no-toleration", k8s_namespace)
    assert p.spec.node_name is None and p.status.phase == "Pending"


def test_high_priority_pod_preempts_low_priority_on_full_gpu_node(k8s_api, k8s_namespace):
    core = client.CoreV1Api(k8s_api)
    sched = client.SchedulingV1Api(k8s_api)
    low, high = f"low-{uid()}", f"high-{uid()}"
    sched.create_priority_class({"metadata": {"name": low}, "value": 100})
    sched.create_priority_class({"metadata": {"name": high}, "value": 100000})
    node = "gpu-h100-0"
    try:
        core.create_namespaced_pod(k8s_namespace, pod("batch", {GPU: "1"}, [GPU_TOLERATION], node, low))
        wait_for("low-priority pod Running", lambda: phase(core, k8s_namespace, "batch") == "Running")
        core.create_namespaced_pod(k8s_namespace, pod("urgent", {GPU: "1"}, [GPU_TOLERATION], node, high))
        wait_for("low-priority pod preempted", lambda: phase(core, k8s_namespace, "batch") == "Gone")
        wait_for("high-priority pod Running", lambda: phase(core, k8s_namespace, "urgent") == "Running")
        assert core.read_namespaced_pod("urgent", k8s_namespace).spec.node_name == node
    finally:
        core.delete_collection_namespaced_pod(k8s_namespace, grace_period_seconds=0)
        sched.delete_priority_class(low)
        sched.delete_priority_class(high)


# --- the kubelet's pod status --------------------------------------------------------------

def test_started_pod_keeps_the_scheduled_time_of_its_binding(k8s_api, k8s_namespace):
    """The kubelet keeps a condition's lastTransitionTime while its status holds, so a pod started
    after its binding is still scheduled when it was bound (kube-state-metrics'
    kube_pod_status_scheduled_time: gpu_capacity's scheduling waits). The pod carries a PodScheduled
    time a minute old into its binding (the binding keeps a True condition's time), so a start that
    wrote its own time shows, however soon after the binding it comes."""
    core = client.CoreV1Api(k8s_api)
    name = f"bound-{uid()}"
    body = pod(name, tolerations=[{"operator": "Exists"}])
    body["spec"]["schedulerName"] = "fidelity-none"  # no scheduler of that name: the test binds it
    core.create_namespaced_pod(k8s_namespace, body)
    then = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time()) - 60))
    core.patch_namespaced_pod_status(name, k8s_namespace, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": then}]}})
    node = next(n.metadata.name for n in core.list_node().items if not n.spec.unschedulable)
    core.create_namespaced_binding(k8s_namespace, {"metadata": {"name": name},
                                                   "target": {"kind": "Node", "name": node}},
                                   _preload_content=False)
    wait_for("the bound pod Running", lambda: phase(core, k8s_namespace, name) == "Running")
    p = core.read_namespaced_pod(name, k8s_namespace)
    scheduled = [c for c in p.status.conditions if c.type == "PodScheduled"]
    assert [(c.status, c.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ")) for c in scheduled] == [("True", then)]
    started = next(c for c in p.status.conditions if c.type == "Ready").last_transition_time
    assert (started - scheduled[0].last_transition_time).total_seconds() >= 59, "the start writes its own time"


# --- Supervisor (VKS) Cluster API objects --------------------------------------------------

def _cluster(name, cls, variables, overrides=None):
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"topology": {
                "classRef": {"name": cls, "namespace": "vmware-system-vks-public"},
                "version": "v1.35.5+vmware.1-vkr.1",
                "controlPlane": {"replicas": 1},
                "workers": {"machineDeployments": [{
                    "class": "node-pool", "name": "gpu", "replicas": 2,
                    "metadata": {"labels": {"gpupool.vcf/pool": "gpu"}},
                    "variables": {"overrides": overrides or []}}]},
                "variables": variables}}}


def test_clusterclass_variable_with_wrong_type_is_rejected(k8s_rig, k8s_api, k8s_namespace):
    dyn = dynamic.DynamicClient(k8s_api)
    ccs = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="ClusterClass")
    bad_class = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
                 "metadata": {"name": "bad"},
                 "spec": {"variables": [{"name": "vmClass", "required": True,
                                         "schema": {"openAPIV3Schema": {"type": "strnig"}}}]}}
    with pytest.raises(ApiException) as e:
        ccs.create(body=bad_class, namespace=k8s_namespace)
    assert e.value.status == 422 and "openAPIV3Schema.type" in e.value.body

    clusters = dyn.resources.get(api_version="cluster.x-k8s.io/v1beta2", kind="Cluster")
    good = [{"name": "vmClass", "value": "best-effort-large"}, {"name": "storageClass", "value": "gold"}]
    gpu_override = [{"name": "vmClass", "value": "vmclass-h100-80c"},
                    {"name": "node", "value": {"labels": {"nvidia.com/gpu.present": "true"},
                                               "taints": [{"key": GPU, "value": "present",
                                                           "effect": "NoSchedule"}]}}]
    clusters.create(body=_cluster("ok", "builtin-generic-v3.4.0", good, gpu_override), namespace=k8s_namespace)
    wrong_type = [{"name": "vmClass", "value": 42}, {"name": "storageClass", "value": "gold"}]
    with pytest.raises(ApiException) as e:
        clusters.create(body=_cluster("wrong-type", "builtin-generic-v3.4.0", wrong_type), namespace=k8s_namespace)
    assert e.value.status == 422 and "wrong type for ClusterClass builtin-generic-v3.4.0: vmClass" in e.value.body
    # per-pool overrides are checked the same way
    with pytest.raises(ApiException) as e:
        clusters.create(body=_cluster("wrong-override", "builtin-generic-v3.4.0", good,
                                      [{"name": "vmClass", "value": {"name": "vmclass-h100-80c"}}]),
                        namespace=k8s_namespace)
    assert e.value.status == 422 and "wrong type for ClusterClass builtin-generic-v3.4.0: vmClass" in e.value.body
    # the legacy class has no variable for taints: a taint request fails clearly
    with pytest.raises(ApiException) as e:
        clusters.create(body=_cluster("legacy", "tanzukubernetescluster", good, gpu_override),
                        namespace=k8s_namespace)
    assert e.value.status == 422 and "not defined by ClusterClass tanzukubernetescluster: node" in e.value.body
    # a missing required variable
    with pytest.raises(ApiException) as e:
        clusters.create(body=_cluster("no-vars", "builtin-generic-v3.4.0", []), namespace=k8s_namespace)
    assert e.value.status == 422 and "requires variables" in e.value.body


# --- Kueue ---------------------------------------------------------------------------------

def test_kueue_admits_whole_pool_jobs_one_at_a_time(k8s_rig, k8s_api, k8s_namespace):
    if not k8s_rig.kueue:
        pytest.fail("the rig was started without Kueue (GPUPOOL_K8S_KUEUE=0)", pytrace=False)
    dyn = dynamic.DynamicClient(k8s_api)
    kv = "kueue.x-k8s.io/v1beta1"
    flavor, cq = f"a100-mig-{uid()}", f"pool-{uid()}"
    batch = client.BatchV1Api(k8s_api)
    core = client.CoreV1Api(k8s_api)
    with gpu_queue(k8s_api, k8s_namespace, kv, flavor, cq, "gpu-a100-mig", MIG, 7, GPU_TOLERATION):
        workloads_api = dyn.resources.get(api_version=kv, kind="Workload")

        def workload_of(job):
            return [w for w in workloads_api.get(namespace=k8s_namespace).items
                    if any(o.name == job for o in w.metadata.get("ownerReferences") or [])]

        for name in ("train-a", "train-b"):
            batch.create_namespaced_job(k8s_namespace, pool_job(name, "gpus", {MIG: "7"}))
            # Kueue queues by its Workload's creation time (1 s resolution): train-b's Job is made only once
            # train-a's Workload exists and a second has passed, however late a loaded machine's Kueue makes it
            wait_for("the Workload of %s" % name, lambda job=name: workload_of(job))
            time.sleep(1.1)

        def running():
            return sorted(j.metadata.name for j in batch.list_namespaced_job(k8s_namespace).items
                          if not j.spec.suspend)

        assert wait_for("one Job admitted", running) == ["train-a"]
        pods = wait_for("train-a pod Running", lambda: [
            p for p in core.list_namespaced_pod(k8s_namespace, label_selector="job-name=train-a").items
            if p.status.phase == "Running"])
        assert pods[0].spec.node_name.startswith("gpu-a100-mig-")  # flavor's node labels and toleration
        time.sleep(3)
        assert running() == ["train-a"], "both whole-pool Jobs admitted at once"
        workloads = dyn.resources.get(api_version=kv, kind="Workload").get(namespace=k8s_namespace).items
        pending = [w for w in workloads if not any(
            c.type == "Admitted" and c.status == "True" for c in (w.status or {}).get("conditions") or [])]
        assert len(pending) == 1
        # train-a finishes: its quota goes back and train-b is admitted
        core.patch_namespaced_pod(pods[0].metadata.name, k8s_namespace,
                                  {"metadata": {"annotations": {"gpupool.vcf/sim-complete": "true"}}})
        wait_for("train-a complete", lambda: (batch.read_namespaced_job("train-a", k8s_namespace)
                                              .status.succeeded or 0) == 1)
        wait_for("train-b admitted", lambda: "train-b" in running(), timeout=60)
