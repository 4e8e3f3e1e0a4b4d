"""Notebook culling from the design on the Kubernetes rig: the culling inputs derive() gives the
gpu_scheduling_policy role (per notebook pool idle minutes, the mechanism), written by the role's
culling tasks as site.yml passes them, judged by the audit's guest link; a changed pool time is
reported and repaired; bad per-pool minutes stop the role before any change."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_module, run_playbook

ROOT = Path(__file__).resolve().parents[3]
CULLER = "gpupool-notebook-culler"
NS = "gpupool-system"  # the role's default culling namespace, which the audit expects


def design():
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    notebooks = [p for p in d["pools"] if p["shape"] == "notebooks"][0]
    notebooks["culling"] = {"idle_minutes": 60}
    longer = copy.deepcopy(notebooks)
    longer.update(name="notebooks-long", culling={"idle_minutes": 720})
    longer["node_pool"] = dict(longer["node_pool"], replicas=1)
    d["pools"].append(longer)
    d.setdefault("guest", {})["culling"] = {"mechanism": "cronjob", "check_minutes": 5}
    return d


def culling_play(inputs):
    """The role's culling tasks with the derived inputs, one to one."""
    role_vars = dict((k, v) for k, v in inputs.items() if "culling" in k)
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "culling", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_scheduling_policy",
                                                           "tasks_from": "culling"},
        "vars": role_vars}]}]


@pytest.fixture(scope="module")
def design_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("culling") / "design.yml"
    path.write_text(yaml.safe_dump(design()))
    return path


@pytest.fixture(scope="module")
def inputs():
    import sys
    from tests.lib.ansible_run import COLLECTIONS
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
    return json.loads(json.dumps(derive(design())["roles"]["gpu_scheduling_policy"]))  # plain data, as YAML


@pytest.fixture(scope="module")
def culled(k8s_rig, k8s_api, inputs):
    core = client.CoreV1Api(k8s_api)
    try:
        core.read_namespace(NS)
        pytest.fail("namespace %s exists already on the rig" % NS, pytrace=False)
    except ApiException as exc:
        assert exc.status == 404
    run = run_playbook(culling_play(inputs), env=k8s_rig.env)
    try:
        yield run
    finally:
        rbac = client.RbacAuthorizationV1Api(k8s_api)
        for fn in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                fn(CULLER)
            except ApiException:
                pass
        try:
            core.delete_namespace(NS)
        except ApiException:
            pass


def culling_findings(k8s_rig, design_file):
    args = {"design_file": str(design_file), "links": ["guest"], "kubeconfig": str(k8s_rig.kubeconfig)}
    res = run_module("gpupool.vcf.gpu_pool_audit", args, env={"K8S_AUTH_KUBECONFIG": "", "VMWARE_HOST": ""})[0]
    assert not res.get("failed"), res.get("msg")
    return [f for f in res["findings"] if f["rule"].startswith("notebook_culling")]


def test_design_times_written_and_audited(culled, k8s_rig, k8s_api, inputs, design_file):
    assert culled.rc == 0, culled.stdout[-3000:]
    assert inputs["gpu_scheduling_policy_culling_pools"] == {"notebooks": 60, "notebooks-long": 720}
    batch = client.BatchV1Api(k8s_api)
    job = batch.read_namespaced_cron_job(CULLER, NS)
    env = dict((e.name, e.value) for e in job.spec.job_template.spec.template.spec.containers[0].env)
    assert job.spec.schedule == "*/5 * * * *"
    assert env["CULL_IDLE_MINUTES"] == "60"
    assert json.loads(env["CULL_POOL_IDLE_MINUTES"]) == {"notebooks": 60, "notebooks-long": 720}
    assert env["POOL_LABEL"] == "gpupool.vcf/pool"
    role = client.RbacAuthorizationV1Api(k8s_api).read_cluster_role(CULLER)
    assert "nodes" in role.rules[0].resources
    assert culling_findings(k8s_rig, design_file) == []

    # someone lengthens the pool times by hand: the audit names it against the design
    container = job.spec.job_template.spec.template.spec.containers[0]
    for e in container.env:
        if e.name == "CULL_POOL_IDLE_MINUTES":
            e.value = json.dumps({"notebooks": 600, "notebooks-long": 720})
    batch.replace_namespaced_cron_job(CULLER, NS, job)
    found = culling_findings(k8s_rig, design_file)
    assert [(f["rule"], f["object"]) for f in found] == [
        ("notebook_culling_changed", "cronjob %s/%s" % (NS, CULLER))]
    assert "env.CULL_POOL_IDLE_MINUTES" in found[0]["message"] and '"notebooks": 60' in found[0]["message"]

    # the role repairs it; a rerun changes nothing
    repair = run_playbook(culling_play(inputs), env=k8s_rig.env)
    assert repair.rc == 0 and repair.stats.get("changed", 0) >= 1, repair.stdout[-3000:]
    assert culling_findings(k8s_rig, design_file) == []
    again = run_playbook(culling_play(inputs), env=k8s_rig.env)
    assert again.rc == 0 and again.stats.get("changed", 0) == 0, [t for t, r in again.tasks if r.get("changed")]


def test_bad_pool_minutes_stop_the_role_before_any_change(k8s_rig, inputs):
    role_vars = dict((k, v) for k, v in inputs.items())
    role_vars["gpu_scheduling_policy_culling_pools"] = {"notebooks": 0, "notebooks-long": "long"}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "policy", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_scheduling_policy"},
        "vars": role_vars}]}]
    run = run_playbook(play, env=k8s_rig.env)
    assert run.rc != 0
    text = run.stdout + run.stderr
    assert "gpu_scheduling_policy_culling_pools: idle minutes must be whole numbers, 1 or more" in text
    assert "notebooks-long" in text and "notebooks" in text and "Nothing was changed" in text


def test_kubeflow_controller_judged_against_the_design(k8s_rig, k8s_api, tmp_path):
    """Mechanism kubeflow: the audit judges Kubeflow's notebook controller's culling settings against
    the design (the shortest notebook pool's minutes), and the role's culling tasks set them."""
    d = design()
    d["guest"]["culling"]["mechanism"] = "kubeflow"
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(d))
    import sys
    from tests.lib.ansible_run import COLLECTIONS
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
    inputs = json.loads(json.dumps(derive(d)["roles"]["gpu_scheduling_policy"]))
    assert inputs["gpu_scheduling_policy_culling"] == "kubeflow"
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    try:
        core.read_namespace("kubeflow")
        pytest.fail("namespace kubeflow exists already on the rig", pytrace=False)
    except ApiException as exc:
        assert exc.status == 404
    core.create_namespace({"metadata": {"name": "kubeflow"}})
    try:
        obj = "deployment kubeflow/notebook-controller-deployment"
        assert [(f["rule"], f["object"]) for f in culling_findings(k8s_rig, path)] == [
            ("notebook_culling_missing", obj)]
        labels = {"app": "notebook-controller"}
        apps.create_namespaced_deployment("kubeflow", {
            "metadata": {"name": "notebook-controller-deployment"},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "manager", "image": "registry.invalid/notebook-controller:1",
                                         "env": [{"name": "CULL_IDLE_TIME", "value": "1440"}]}]}}}})
        found = culling_findings(k8s_rig, path)
        assert [(f["rule"], f["object"]) for f in found] == [("notebook_culling_changed", obj)]
        assert "env.CULL_IDLE_TIME 1440 (design 60)" in found[0]["message"]
        assert "env.ENABLE_CULLING unset (design true)" in found[0]["message"]
        run = run_playbook(culling_play(inputs), env=k8s_rig.env)
        assert run.rc == 0, run.stdout[-3000:]
        assert culling_findings(k8s_rig, path) == []
    finally:
        core.delete_namespace("kubeflow")
