"""Roles gpu_scheduling_policy, gpu_operator and nls_licensing (Kubernetes part) against the rig:
one converge for the module (check, converge, rerun, diff), then behaviour through the real
scheduler, quota admission and Kueue."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from k8s_fixtures import wait_for
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_playbook
from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing

ROOT = Path(__file__).resolve().parents[3]
CHART = gpu_operator_chart() or ROOT.parent / "shared" / "charts" / "gpu-operator"
GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
KV = "kueue.x-k8s.io/v1beta2"
U = uuid.uuid4().hex[:5]
NAMES = {
    "infer": f"t-infer-{U}", "quota": f"t-quota-{U}", "train": f"t-train-{U}", "operator": f"gpu-op-{U}",
    "pc_inference": f"gpu-inference-{U}", "pc_training": f"gpu-training-{U}", "pc_notebook": f"gpu-notebook-{U}",
    "flavor": f"training-{U}", "cq": f"training-{U}", "culling_ns": f"gpupool-system-{U}",
}


def _role(name, vars_, tasks_from="main"):
    return {"name": f"role {name} {tasks_from}", "ansible.builtin.import_role": {
        "name": f"gpupool.vcf.{name}", "tasks_from": tasks_from}, "vars": vars_}


def nls_play(token):
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [
        _role("nls_licensing", {"nls_licensing_token_src": str(token),
                                "nls_licensing_operator_namespace": NAMES["operator"]}, "kubernetes")]}]


def play(rig, kueue, token):
    n = NAMES
    roles = [
        {"role": "gpupool.vcf.gpu_scheduling_policy",
         "gpu_scheduling_policy_inference_priority_class": n["pc_inference"],
         "gpu_scheduling_policy_training_priority_class": n["pc_training"],
         "gpu_scheduling_policy_notebook_priority_class": n["pc_notebook"],
         "gpu_scheduling_policy_mig_resources": [MIG],
         "gpu_scheduling_policy_tenants": [
             {"namespace": n["infer"], "gpus": 2},
             {"namespace": n["quota"], "gpus": 1},
             {"namespace": n["train"], "gpus": 0, "mig": {MIG: 14}, "training": True}],
         "gpu_scheduling_policy_manage_nodes": True,
         "gpu_scheduling_policy_node_pools": [
             {"pool": "gpu-h100", "labels": {"gpupool.vcf/workload": "inference"},
              "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]},
             {"pool": "gpu-a100-mig", "labels": {"gpupool.vcf/workload": "training"}}],
         "gpu_scheduling_policy_kueue": kueue,
         "gpu_scheduling_policy_training_flavor": n["flavor"],
         "gpu_scheduling_policy_training_cluster_queue": n["cq"],
         "gpu_scheduling_policy_training_node_labels": {"gpupool.vcf/pool": "gpu-a100-mig"},
         "gpu_scheduling_policy_training_resources": {MIG: 7},
         "gpu_scheduling_policy_culling_namespace": n["culling_ns"]},
        {"role": "gpupool.vcf.gpu_operator",
         "gpu_operator_namespace": n["operator"],
         "gpu_operator_chart_ref": str(CHART),
         "gpu_operator_upgrade_crd": False,
         "gpu_operator_driver_repository": "registry.example.com/nvaie",
         "gpu_operator_driver_image": "vgpu-guest-driver",
         "gpu_operator_driver_version": "550.127.05",
         "gpu_operator_driver_pull_secrets": ["ngc-registry"],
         "gpu_operator_licensing_secret_name": "{{ nls_licensing_secret_name }}",
         "gpu_operator_mig_strategy": "mixed",
         "gpu_operator_time_slicing": {"notebook": {"replicas": 4}},
         "gpu_operator_extra_values": {"node-feature-discovery": {"master": {"serviceAccount": {
             "name": f"nfd-master-{U}"}}}}},
    ]
    tasks = [_role("gpu_scheduling_policy", {k: v for k, v in roles[0].items() if k != "role"}),
             nls_play(token)[0]["tasks"][0],
             _role("gpu_operator", {k: v for k, v in roles[1].items() if k != "role"})]
    return [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("nls")
    (d / "first.tok").write_text("first-client-configuration-token\n")
    (d / "second.tok").write_text("second-client-configuration-token\n")
    return d


@pytest.fixture(scope="module")
def converged(k8s_rig, k8s_api, token_dir):
    if not (CHART / "Chart.yaml").is_file():
        pytest.fail(gpu_operator_chart_missing(), pytrace=False)
    p = play(k8s_rig, k8s_rig.kueue, token_dir / "first.tok")
    runs = {"check": run_playbook(p, env=k8s_rig.env, check=True, diff=True)}
    runs["converge"] = run_playbook(p, env=k8s_rig.env, diff=True)
    runs["again"] = run_playbook(p, env=k8s_rig.env)
    try:
        yield runs
    finally:
        k8s_rig.helm("uninstall", "gpu-operator", "--namespace", NAMES["operator"], "--no-hooks", check=False)
        sched = client.SchedulingV1Api(k8s_api)
        core = client.CoreV1Api(k8s_api)
        for key in ("pc_inference", "pc_training", "pc_notebook"):
            try:
                sched.delete_priority_class(NAMES[key])
            except ApiException:
                pass
        for key in ("infer", "quota", "train", "operator", "culling_ns"):
            try:
                core.delete_namespace(NAMES[key])
            except ApiException:
                pass
        if k8s_rig.kueue:
            dyn = dynamic.DynamicClient(k8s_api)
            for kind, key in (("ClusterQueue", "cq"), ("ResourceFlavor", "flavor")):
                try:
                    dyn.resources.get(api_version=KV, kind=kind).delete(name=NAMES[key])
                except ApiException:
                    pass


def _failed(run):
    return [(name, res.get("msg")) for name, res in run.tasks if res.get("failed")]


def test_converge_rerun_check_and_diff(converged, k8s_rig, k8s_api):
    for mode, run in converged.items():
        assert run.rc == 0, (mode, _failed(run), run.stdout[-2000:], run.stderr[-2000:])
    assert converged["check"].stats["changed"] > 0
    assert converged["converge"].stats["changed"] > 0
    assert converged["again"].stats["changed"] == 0, [n for n, r in converged["again"].tasks if r.get("changed")]
    # check mode predicted what the converge then changed, task by task
    # (objects in a namespace the run creates cannot be dry-run: a stand-in task reports them)
    predicted = {n.replace(" (in a namespace this run creates)", "")
                 for n, r in converged["check"].tasks if r.get("changed")}
    done = {n for n, r in converged["converge"].tasks if r.get("changed")}
    # the operator namespace: both nls_licensing and gpu_operator would create it in check mode,
    # the first one does in the real run
    assert done <= predicted
    assert predicted - done <= {"gpupool.vcf.gpu_operator : Namespace of the release"}
    # (kubernetes.core.k8s gives before/after for updates, not creations: see the rotation test)
    # the PriorityClasses, tenant namespaces, quotas and Kueue objects: check mode's plan is the converge's,
    # field by field
    guest = [n for n, _r in converged["converge"].tasks if n.endswith((
        ": PriorityClasses, tenant namespaces and GPU quotas",
        ": Kueue ResourceFlavor, ClusterQueue and LocalQueues of each training pool"))]
    assert len(guest) == (2 if k8s_rig.kueue else 1), guest
    for name in guest:
        assert dict(converged["check"].tasks)[name]["changes"] == dict(converged["converge"].tasks)[name]["changes"]
        assert dict(converged["again"].tasks)[name]["changes"] == []


def test_priority_classes_and_quota_objects(converged, k8s_api):
    sched = client.SchedulingV1Api(k8s_api)
    inf = sched.read_priority_class(NAMES["pc_inference"])
    train = sched.read_priority_class(NAMES["pc_training"])
    nb = sched.read_priority_class(NAMES["pc_notebook"])
    assert inf.value > train.value > nb.value
    assert inf.preemption_policy == "PreemptLowerPriority" and nb.preemption_policy == "Never"
    q = client.CoreV1Api(k8s_api).read_namespaced_resource_quota("gpu-quota", NAMES["train"])
    assert q.spec.hard == {f"requests.{GPU}": "0", f"requests.{MIG}": "14"}
    q = client.CoreV1Api(k8s_api).read_namespaced_resource_quota("gpu-quota", NAMES["quota"])
    assert q.spec.hard == {f"requests.{GPU}": "1", f"requests.{MIG}": "0"}
    node = client.CoreV1Api(k8s_api).read_node("gpu-h100-0")
    assert node.metadata.labels["gpupool.vcf/workload"] == "inference"


def _pod(name, resources=None, tolerations=None, node=None, priority_class=None, cpu="100m"):
    spec = {"containers": [{"name": "main", "image": "registry.invalid/x:1",
                            "resources": {"limits": dict(resources or {}), "requests": {"cpu": cpu}}}],
            "tolerations": tolerations or [], "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _phase(core, ns, name):
    try:
        p = core.read_namespaced_pod(name, ns)
    except ApiException as e:
        if e.status == 404:
            return "Gone"
        raise
    return p.status.phase


def test_cpu_pods_never_land_on_gpu_nodes(converged, k8s_api):
    core = client.CoreV1Api(k8s_api)
    ns = NAMES["infer"]
    for i in range(4):
        core.create_namespaced_pod(ns, _pod(f"cpu-{i}"))
    core.create_namespaced_pod(ns, {**_pod("cpu-on-gpu-node"), "spec": {
        **_pod("x")["spec"], "nodeSelector": {"gpupool.vcf/pool": "gpu-h100"}}})
    try:
        wait_for("CPU pods Running", lambda: all(_phase(core, ns, f"cpu-{i}") == "Running" for i in range(4)))
        for i in range(4):
            assert core.read_namespaced_pod(f"cpu-{i}", ns).spec.node_name == "cpu-0"
        time.sleep(2)
        p = core.read_namespaced_pod("cpu-on-gpu-node", ns)
        assert p.spec.node_name is None and p.status.phase == "Pending"
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)


def test_tenant_over_gpu_quota_is_rejected(converged, k8s_api):
    core = client.CoreV1Api(k8s_api)
    ns = NAMES["quota"]
    wait_for("quota status", lambda: (core.read_namespaced_resource_quota("gpu-quota", ns).status.hard or {}))
    try:
        core.create_namespaced_pod(ns, _pod("first", {GPU: "1"}, [GPU_TOLERATION]))
        with pytest.raises(ApiException) as e:
            core.create_namespaced_pod(ns, _pod("second", {GPU: "1"}, [GPU_TOLERATION]))
        assert e.value.status == 403 and "exceeded quota" in e.value.body
        with pytest.raises(ApiException) as e:  # no MIG for this tenant
            core.create_namespaced_pod(ns, _pod("mig", {MIG: "1"}, [GPU_TOLERATION]))
        assert e.value.status == 403 and "exceeded quota" in e.value.body
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)


def test_inference_preempts_notebook_never_the_reverse(converged, k8s_api):
    core = client.CoreV1Api(k8s_api)
    ns = NAMES["infer"]
    node = "gpu-h100-0"
    try:
        core.create_namespaced_pod(ns, _pod("notebook", {GPU: "1"}, [GPU_TOLERATION], node, NAMES["pc_notebook"]))
        wait_for("notebook Running", lambda: _phase(core, ns, "notebook") == "Running")
        core.create_namespaced_pod(ns, _pod("inference", {GPU: "1"}, [GPU_TOLERATION], node, NAMES["pc_inference"]))
        wait_for("notebook preempted", lambda: _phase(core, ns, "notebook") == "Gone")
        wait_for("inference Running", lambda: _phase(core, ns, "inference") == "Running")
        # the reverse: a notebook on the now full node waits, the inference pod stays
        core.create_namespaced_pod(ns, _pod("notebook-2", {GPU: "1"}, [GPU_TOLERATION], node, NAMES["pc_notebook"]))
        time.sleep(4)
        assert _phase(core, ns, "inference") == "Running"
        assert _phase(core, ns, "notebook-2") == "Pending"
    finally:
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)


def test_two_whole_pool_training_jobs_admitted_one_at_a_time(converged, k8s_rig, k8s_api):
    if not k8s_rig.kueue:
        pytest.fail("the rig was started without Kueue (GPUPOOL_K8S_KUEUE=0)", pytrace=False)
    ns = NAMES["train"]
    batch = client.BatchV1Api(k8s_api)
    core = client.CoreV1Api(k8s_api)
    try:
        for name in ("train-a", "train-b"):
            batch.create_namespaced_job(ns, {
                "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "training"}},
                "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
                    "restartPolicy": "Never", "priorityClassName": NAMES["pc_training"],
                    "containers": [{"name": "main", "image": "registry.invalid/train:1",
                                    "resources": {"limits": {MIG: "7"}}}]}}}})
            time.sleep(1.1)

        def running():
            return sorted(j.metadata.name for j in batch.list_namespaced_job(ns).items if not j.spec.suspend)

        assert wait_for("one Job admitted", running) == ["train-a"]
        pods = wait_for("train-a pod Running", lambda: [
            p for p in core.list_namespaced_pod(ns, label_selector="job-name=train-a").items
            if p.status.phase == "Running"])
        assert pods[0].spec.node_name.startswith("gpu-a100-mig-")
        time.sleep(3)
        assert running() == ["train-a"]
        core.patch_namespaced_pod(pods[0].metadata.name, ns,
                                  {"metadata": {"annotations": {"gpupool.vcf/sim-complete": "true"}}})
        wait_for("train-b admitted", lambda: "train-b" in running(), timeout=60)
    finally:
        batch.delete_collection_namespaced_job(ns, propagation_policy="Background")


def test_cluster_policy_holds_licensing_mig_and_time_slicing(converged, k8s_api):
    cp = dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    spec = cp.get(name="cluster-policy").to_dict()["spec"]
    assert spec["driver"]["licensingConfig"]["secretName"].startswith("licensing-config-")
    assert spec["driver"]["repository"] == "registry.example.com/nvaie"
    assert spec["driver"]["version"] == "550.127.05"
    assert spec["mig"]["strategy"] == "mixed"
    assert spec["migManager"]["enabled"] is False
    assert spec["devicePlugin"]["config"]["name"] == "gpupool-device-plugin-config"
    assert spec["dcgmExporter"]["serviceMonitor"]["enabled"] is False  # no Prometheus operator CRDs
    cm = client.CoreV1Api(k8s_api).read_namespaced_config_map("gpupool-device-plugin-config", NAMES["operator"])
    assert "replicas: 4" in cm.data["notebook"] and "default" in cm.data
    facts = [r for n, r in converged["converge"].tasks if n.endswith("ClusterPolicy state")]
    assert facts[0]["ansible_facts"]["gpu_operator_cluster_policy"]["exists"] is True


def test_licensing_secret_and_rotation(converged, k8s_rig, k8s_api, token_dir):
    core = client.CoreV1Api(k8s_api)
    cp = dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy")
    first = cp.get(name="cluster-policy").spec.driver.licensingConfig.secretName
    secret = core.read_namespaced_secret(first, NAMES["operator"])
    assert set(secret.data) == {"gridd.conf", "client_configuration_token.tok"}
    import base64
    assert "FeatureType=1" in base64.b64decode(secret.data["gridd.conf"]).decode()
    assert base64.b64decode(secret.data["client_configuration_token.tok"]).decode() == "first-client-configuration-token"
    secret_tasks = [r for n, r in converged["converge"].tasks if n.endswith(": Licensing Secret for the GPU Operator")]
    assert secret_tasks and "first-client-configuration-token" not in converged["converge"].stdout
    # rotation: a new token is a new Secret name, and the ClusterPolicy points at it
    run = run_playbook(nls_play(token_dir / "second.tok"), env=k8s_rig.env, diff=True)
    assert run.rc == 0, run.stdout[-2000:]
    second = cp.get(name="cluster-policy").spec.driver.licensingConfig.secretName
    patch = run.result("gpupool.vcf.nls_licensing : Point the ClusterPolicy at the Secret")
    assert patch["changed"]
    # planned field by field: only the licensing Secret's name of the ClusterPolicy changes
    assert [(c["field"], c["before"], c["after"]) for c in patch["changes"]] == [
        ("spec.driver.licensingConfig.secretName", first, second)]
    assert second != first and second.startswith("licensing-config-")
    assert base64.b64decode(core.read_namespaced_secret(second, NAMES["operator"]).data[
        "client_configuration_token.tok"]).decode() == "second-client-configuration-token"
    core.read_namespaced_secret(first, NAMES["operator"])  # kept for pods not yet redeployed
    again = run_playbook(nls_play(token_dir / "second.tok"), env=k8s_rig.env)
    assert again.rc == 0 and again.stats["changed"] == 0


def test_kubeflow_notebook_controller_culling(k8s_rig, k8s_api, k8s_namespace):
    """With Kubeflow, its notebook controller's own culling settings are switched on."""
    apps = client.AppsV1Api(k8s_api)
    labels = {"app": "notebook-controller"}
    apps.create_namespaced_deployment(k8s_namespace, {
        "metadata": {"name": "notebook-controller-deployment"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [
                {"name": "manager", "image": "registry.invalid/notebook-controller:1",
                 "env": [{"name": "USE_ISTIO", "value": "true"}, {"name": "CULL_IDLE_TIME", "value": "1440"}]},
                {"name": "sidecar", "image": "registry.invalid/sidecar:1"}]}}}})
    pc = {f"gpu_scheduling_policy_{k}_priority_class": f"kf-{k}-{U}" for k in ("inference", "training", "notebook")}
    p = [{"hosts": "localhost", "gather_facts": False, "roles": [dict(
        role="gpupool.vcf.gpu_scheduling_policy", gpu_scheduling_policy_kueue=False,
        gpu_scheduling_policy_culling="kubeflow", gpu_scheduling_policy_culling_idle_minutes=120,
        gpu_scheduling_policy_kubeflow_controller_namespace=k8s_namespace, **pc)]}]
    try:
        run = run_playbook(p, env=k8s_rig.env)
        assert run.rc == 0, _failed(run)
        again = run_playbook(p, env=k8s_rig.env)
        assert again.rc == 0 and again.stats["changed"] == 0
    finally:
        for name in pc.values():
            try:
                client.SchedulingV1Api(k8s_api).delete_priority_class(name)
            except ApiException:
                pass
    spec = apps.read_namespaced_deployment("notebook-controller-deployment", k8s_namespace).spec.template.spec
    env = {e.name: e.value for e in spec.containers[0].env}
    assert env == {"USE_ISTIO": "true", "CULL_IDLE_TIME": "120", "ENABLE_CULLING": "true", "IDLENESS_CHECK_PERIOD": "10"}
    assert spec.containers[1].name == "sidecar" and not spec.containers[1].env
