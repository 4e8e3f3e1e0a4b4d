"""Notebook culling from the design: idle minutes per notebook pool and the mechanism, derived into
the gpu_scheduling_policy role's inputs, written by the CronJob builder and judged by the audit."""
import copy
import datetime
import importlib.util
import json
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_plan as gp
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
SCRIPT = ROOT / "roles" / "gpu_scheduling_policy" / "files" / "notebook_culler.py"
_spec = importlib.util.spec_from_file_location("notebook_culler_for_design", SCRIPT)
culler = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(culler)


def design(**guest_culling):
    d = copy.deepcopy(EXAMPLE)
    notebooks = [p for p in d["pools"] if p["shape"] == "notebooks"][0]
    second = copy.deepcopy(notebooks)
    second.update(name="notebooks-long", culling={"idle_minutes": 720})
    second["node_pool"] = dict(second["node_pool"], replicas=1)
    d["pools"].append(second)
    if guest_culling:
        d.setdefault("guest", {})["culling"] = guest_culling
    return d


def culling_inputs(d):
    return dict((k, v) for k, v in derive(d)["roles"]["gpu_scheduling_policy"].items() if "culling" in k)


def test_schema_defaults():
    n, findings = normalize(copy.deepcopy(EXAMPLE))
    assert findings == []
    assert n["guest"]["culling"] == {"mechanism": "auto", "idle_minutes": 240, "check_minutes": 10, "prometheus_url": None}
    assert [p["culling"] for p in n["pools"]] == [{"idle_minutes": None}] * len(n["pools"])


def test_example_derives_the_defaults_for_its_notebook_pool():
    assert culling_inputs(EXAMPLE) == {
        "gpu_scheduling_policy_culling": "auto", "gpu_scheduling_policy_culling_idle_minutes": 240,
        "gpu_scheduling_policy_culling_check_minutes": 10, "gpu_scheduling_policy_culling_pools": {"notebooks": 240},
        "gpu_scheduling_policy_culling_prometheus_url": ""}


def test_idle_minutes_per_pool_and_the_shortest_as_the_one_time():
    got = culling_inputs(design(idle_minutes=90, check_minutes=5, mechanism="cronjob"))
    assert got == {"gpu_scheduling_policy_culling": "cronjob", "gpu_scheduling_policy_culling_idle_minutes": 90,
                   "gpu_scheduling_policy_culling_check_minutes": 5,
                   "gpu_scheduling_policy_culling_pools": {"notebooks": 90, "notebooks-long": 720},
                   "gpu_scheduling_policy_culling_prometheus_url": ""}


def test_the_prometheus_for_gpu_activity_comes_from_the_design():
    url = "https://prometheus.monitoring.svc:9090/"
    got = culling_inputs(design(mechanism="cronjob", prometheus_url=url))
    assert got["gpu_scheduling_policy_culling_prometheus_url"] == url


@pytest.mark.parametrize("url, why", [
    ("prometheus:9090", "the scheme is not http or https"),
    ("ftp://prometheus/", "the scheme is not http or https"),
    ("http:///api", "it names no host"),
    ("http://prom etheus/", "it holds white space"),
])
def test_a_prometheus_url_that_is_not_one_is_refused_with_the_reason(url, why):
    _n, findings = normalize(design(mechanism="cronjob", prometheus_url=url))
    assert [f for f in findings if "guest.culling.prometheus_url" in f.object + f.message and why in f.message], findings


def test_no_notebook_pool_or_mechanism_none_means_no_culling():
    d = copy.deepcopy(EXAMPLE)
    d["pools"] = [p for p in d["pools"] if p["shape"] != "notebooks"]
    for t in d.get("tenants") or []:
        t.get("gpu_quota", {}).pop("notebooks", None)
    got = culling_inputs(d)
    assert got["gpu_scheduling_policy_culling"] == "none" and got["gpu_scheduling_policy_culling_pools"] == {}
    got = culling_inputs(design(mechanism="none"))
    assert got["gpu_scheduling_policy_culling"] == "none" and got["gpu_scheduling_policy_culling_pools"] == {}


def test_a_bad_idle_time_is_a_schema_error():
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
    d = design(idle_minutes=0)
    d["pools"][-1]["culling"]["idle_minutes"] = "long"
    found = dict((f.object, f) for f in validate(d) if f.rule == "schema")
    assert "guest.culling.idle_minutes" in found and "pools.notebooks-long.culling.idle_minutes" in found


def test_cronjob_carries_the_pool_times():
    policy = objs.role_inputs("gpu_scheduling_policy", derive(design(mechanism="cronjob", idle_minutes=60))
                              ["roles"]["gpu_scheduling_policy"])
    job = objs.culling_cronjob(policy)
    assert job["schedule"] == "*/10 * * * *"
    assert job["env"]["CULL_IDLE_MINUTES"] == "60"
    assert json.loads(job["env"]["CULL_POOL_IDLE_MINUTES"]) == {"notebooks": 60, "notebooks-long": 720}
    assert job["env"]["POOL_LABEL"] == "gpupool.vcf/pool"
    role = [m for m in objs.culling_manifests(policy, "pass") if m["kind"] == "ClusterRole"][0]
    assert "nodes" in role["rules"][0]["resources"]  # the culler reads the pool off the pod's node
    # the role's defaults alone (no pools): no per-pool variables, as before
    assert "CULL_POOL_IDLE_MINUTES" not in objs.culling_cronjob(objs.role_inputs("gpu_scheduling_policy", {}))["env"]


def _live(derived):
    _op, policy = _audit_guest.guest_inputs(derived)
    cj = objs.culling_cronjob(policy)
    return dict(exists=True, schedule=cj["schedule"], image=cj["image"], env=dict(cj["env"]))


def test_audit_judges_the_design_timeout():
    derived = derive(design(mechanism="cronjob"))
    live = _live(derived)
    assert _audit_guest.audit_guest(derived, culling=live) == []
    # the CronJob as a design with other times wrote it: each pool's time is judged
    other = _live(derive(design(mechanism="cronjob", idle_minutes=30)))
    out = _audit_guest.audit_guest(derived, culling=other)
    assert [(f["rule"], f["object"]) for f in out] == [
        ("notebook_culling_changed", "cronjob gpupool-system/gpupool-notebook-culler")]
    assert "env.CULL_IDLE_MINUTES 30 (design 240)" in out[0]["message"]
    assert "CULL_POOL_IDLE_MINUTES" in out[0]["message"]
    # an older CronJob without the pool times
    old = dict(live, env=dict((k, v) for k, v in live["env"].items() if k not in ("CULL_POOL_IDLE_MINUTES",
                                                                                  "POOL_LABEL")))
    out = _audit_guest.audit_guest(derived, culling=old)
    assert out and "CULL_POOL_IDLE_MINUTES unset" in out[0]["message"]
    # no culling in the design: nothing is expected
    assert _audit_guest.audit_guest(derive(design(mechanism="none")), culling=dict(exists=False)) == []


def test_culler_uses_the_pool_of_the_pods_node():
    pools = {"notebooks": 60, "notebooks-long": 720}
    labels = {"n1": {"gpupool.vcf/pool": "notebooks-long"}, "n2": {"gpupool.vcf/pool": "inference"}, "n3": {}}
    read = []

    def node_labels(name):
        read.append(name)
        return labels[name]

    def pod(node):
        return {"spec": {"nodeName": node}} if node else {"spec": {}}
    assert culler.idle_minutes_of(pod("n1"), pools, "gpupool.vcf/pool", 240, node_labels) == 720
    assert culler.idle_minutes_of(pod("n2"), pools, "gpupool.vcf/pool", 240, node_labels) == 240
    assert culler.idle_minutes_of(pod("n3"), pools, "gpupool.vcf/pool", 240, node_labels) == 240
    assert culler.idle_minutes_of(pod(None), pools, "gpupool.vcf/pool", 240, node_labels) == 240
    assert culler.idle_minutes_of(pod("n1"), {}, "gpupool.vcf/pool", 240, node_labels) == 240
    assert read == ["n1", "n2", "n3"]
    now = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)
    # two hours idle: stopped on the 60-minute pool, kept on the 720-minute one
    assert culler.is_idle("2026-11-30T10:00:00Z", now, 60) and not culler.is_idle("2026-11-30T10:00:00Z", now, 720)


def test_the_role_hands_guest_objects_the_inputs_the_audit_builds_the_culler_from():
    """The culling objects the audit expects are those guest_objects builds from the role's culling tasks: each task
    passes the role's variables unchanged (the mechanism resolved), and the audit builds from the same variables."""
    import jinja2
    env = jinja2.Environment()
    tasks = yaml.safe_load((ROOT / "roles" / "gpu_scheduling_policy" / "tasks" / "culling.yml").read_text())
    for mechanism, name, kinds in (
            ("kubeflow", "Kubeflow notebook controller culling settings", ["Deployment"]),
            ("cronjob", "Culling CronJob, its script and its permissions",
             ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob"])):
        policy = json.loads(json.dumps(objs.role_inputs("gpu_scheduling_policy", derive(design(
            mechanism=mechanism, idle_minutes=90))["roles"]["gpu_scheduling_policy"])))  # plain data, as the role has it
        task = [t for t in tasks if t["name"] == name][0]
        assert task["when"] == "gpu_scheduling_policy__culler == '%s'" % mechanism
        module = task["gpupool.vcf.guest_objects"]
        assert module["culling"] == "{{ gpu_scheduling_policy__culling_inputs }}"
        given = task["vars"]["gpu_scheduling_policy__culling_inputs"]
        values = dict(policy, gpu_scheduling_policy__culler=mechanism)
        # each value as Ansible templates it: the text of the expression, read back as YAML
        rendered = dict((k, yaml.safe_load(env.from_string(v).render(**values)) if env.from_string(v).render(**values)
                         else "") for k, v in given.items())  # an empty text stays empty, as Ansible keeps it
        assert rendered == dict((k, policy[k]) for k in given)  # the role's variables, one to one
        assert set(module["kinds"]) == set(o["kind"] for o in gp.culling_objects(policy, "x")) == set(kinds)
        # what the audit's plan wants is what the module is handed
        assert gp.culling_objects(rendered) == gp.culling_objects(policy)
    [want] = gp.culling_objects(dict(policy, gpu_scheduling_policy_culling="kubeflow"))
    assert [e["value"] for e in want["spec"]["template"]["spec"]["containers"][0]["env"]] == ["true", "90", "10"]


def test_audit_judges_kubeflow_culling():
    derived = derive(design(mechanism="kubeflow", idle_minutes=90))
    _op, policy = _audit_guest.guest_inputs(derived)
    [deployment] = gp.culling_objects(policy)
    want = {"env": dict((e["name"], e["value"]) for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"])}
    live = dict(kubeflow=True, exists=True, env=dict(want["env"], OTHER="kept"))
    assert _audit_guest.audit_guest(derived, culling=live) == []
    live["env"]["CULL_IDLE_TIME"] = "1440"  # Kubeflow's own default
    out = _audit_guest.audit_guest(derived, culling=live)
    assert [(f["rule"], f["object"]) for f in out] == [
        ("notebook_culling_changed", "deployment kubeflow/notebook-controller-deployment")]
    assert "env.CULL_IDLE_TIME 1440 (design 90)" in out[0]["message"]
    out = _audit_guest.audit_guest(derived, culling=dict(kubeflow=True, exists=False))
    assert [(f["rule"], f["severity"]) for f in out] == [("notebook_culling_missing", "warning")]
    assert "cronjob" in out[0]["fix"]
    # with auto the role patches Kubeflow where its CRD is installed: the same expectation
    auto = derive(design(idle_minutes=90))
    assert _audit_guest.audit_guest(auto, culling=dict(kubeflow=True, exists=True, env=dict(want["env"]))) == []
    # with cronjob the controller is not the role's: a live one is not judged, the CronJob is
    out = _audit_guest.audit_guest(derive(design(mechanism="cronjob")), culling=dict(kubeflow=True, exists=False))
    assert [(f["rule"], f["object"]) for f in out] == [
        ("notebook_culling_missing", "cronjob gpupool-system/gpupool-notebook-culler")]


def test_prometheus_url_goes_into_the_cronjob_and_events_into_the_role():
    """gpu_scheduling_policy_culling_prometheus_url: the CronJob's PROMETHEUS_URL when set, absent when empty (the
    culler then goes by Jupyter alone); the ClusterRole lets the culler create Events; a bad URL stops the plan."""
    policy = objs.role_inputs("gpu_scheduling_policy", {"gpu_scheduling_policy_culling": "cronjob"})
    with_url = dict(policy, gpu_scheduling_policy_culling_prometheus_url="http://prometheus.monitoring:9090")
    assert "PROMETHEUS_URL" not in objs.culling_cronjob(policy)["env"]
    assert objs.culling_cronjob(with_url)["env"]["PROMETHEUS_URL"] == "http://prometheus.monitoring:9090"
    [role] = [o for o in gp.culling_objects(with_url, "x") if o["kind"] == "ClusterRole"]
    assert {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]} in role["rules"]
    for bad in ("prometheus:9090", 9090):
        try:
            gp.culling_objects(dict(policy, gpu_scheduling_policy_culling_prometheus_url=bad), "x")
        except ValueError as e:
            assert "gpu_scheduling_policy_culling_prometheus_url must be an http:// or https:// URL" in str(e)
        else:
            raise AssertionError("accepted %r" % (bad,))
