"""The rig's real Prometheus loads the rules generated from the example design and evaluates them on
series the test controls: a notebook pod of PriorityClass gpu-notebook asking for more GPUs than any
node has stays Pending, kube-state-metrics reports it, GpuPodsPending goes pending, then fires
(labels pool=notebooks, severity, the pod), and resolves once the pod is gone. The windows are the
filter's options, shortened so the test takes seconds: the expressions are the design's."""
import json
import signal
import time
import urllib.request

import yaml
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import
from kubernetes import client

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from tests.lib.helpers import prom, wait
from tests.lib.paths import ROOT

OPTIONS = {"interval": "1s", "pending_for": "8s"}


def api(rig, path):
    with urllib.request.urlopen(rig.prometheus_url + path, timeout=10) as answer:
        return json.loads(answer.read())["data"]


def pending_alerts(rig):
    return [a for a in api(rig, "/api/v1/alerts")["alerts"] if a["labels"].get("alertname") == "GpuPodsPending"]


def evaluated(rig):
    """The rule groups once every rule has been evaluated at least once, else None."""
    groups = api(rig, "/api/v1/rules")["groups"]
    return groups if all(r["health"] != "unknown" for g in groups for r in g["rules"]) else None


def load_rules(rig):
    rules = _prom_rules.rule_file(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()), OPTIONS)
    path = rig.data_dir / "gpupool-rules.yml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(rules)), sort_keys=False, width=100000))
    config_path = rig.data_dir / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    config["rule_files"] = [str(path)]
    config_path.write_text(yaml.safe_dump(config))
    rig.procs["prometheus"].send_signal(signal.SIGHUP)  # Prometheus reloads its configuration on SIGHUP
    names = set(g["name"] for g in rules["groups"])
    wait("the generated rule groups in Prometheus",
         lambda: names <= set(g["name"] for g in api(rig, "/api/v1/rules")["groups"]), timeout=30)
    return rules


def test_pending_gpu_pod_alert_fires_and_resolves(k8s_metrics_rig):
    rig = k8s_metrics_rig
    load_rules(rig)
    # every rule evaluates without an error (a many-to-many match, a bad label) on the rig's series
    groups = wait("every rule evaluated", lambda: evaluated(rig), timeout=30)
    errors = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"]
    assert not errors, errors
    assert not pending_alerts(rig)

    core = client.CoreV1Api(rig.api_client())
    client.SchedulingV1Api(rig.api_client()).create_priority_class(
        {"metadata": {"name": "gpu-notebook"}, "value": 1000, "preemptionPolicy": "Never"})
    core.create_namespace({"metadata": {"name": "research"}})
    core.create_namespaced_pod("research", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nb-1"},
        "spec": {"priorityClassName": "gpu-notebook", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "nb", "image": "registry.example.com/notebook:1",
                                 "resources": {"requests": {"nvidia.com/gpu": "64"}, "limits": {"nvidia.com/gpu": "64"}}}]}})
    wait("the Pending pod in Prometheus",
         lambda: prom(rig, 'kube_pod_info{namespace="research",pod="nb-1",priority_class="gpu-notebook"}'
                           ' and on (namespace, pod) (kube_pod_status_phase{phase="Pending"} == 1)'))
    created = time.monotonic()
    first = wait("GpuPodsPending pending or firing", lambda: pending_alerts(rig), timeout=30, interval=0.2)
    assert first[0]["state"] == "pending", first  # not before pending_for
    firing = wait("GpuPodsPending firing",
                  lambda: [a for a in pending_alerts(rig) if a["state"] == "firing"], timeout=40, interval=0.5)
    assert time.monotonic() - created >= 8 - 2, "fired before pending_for"  # the rig scrapes every second
    labels = firing[0]["labels"]
    assert (labels["pool"], labels["severity"], labels["namespace"], labels["pod"]) == (
        "notebooks", "warning", "research", "nb-1"), labels
    assert firing[0]["annotations"]["summary"] == "GPU pod research/nb-1 pending on pool notebooks"
    assert float(firing[0]["value"]) == 64

    core.delete_namespaced_pod("nb-1", "research", grace_period_seconds=0)
    wait("GpuPodsPending resolved", lambda: not pending_alerts(rig), timeout=60, interval=0.5)
