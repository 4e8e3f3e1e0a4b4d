"""playbooks/observability.yml applies the latency probe's objects on the rig the way the collection owns
guest objects: with the probe on, a ConfigMap (the program, the first-chunk file, config.json), a
Deployment and a Service with the prometheus.io annotations (no Prometheus Operator CRD yet); a rerun
changes nothing; once the ServiceMonitor CRD exists the same run makes a ServiceMonitor and takes the
annotations off; with the probe off the objects of the collection and this design go, an object made by
hand with the same name label stays."""
import json

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.filter.latency_probe import latency_probe_manifests
from tests.lib.ansible_run import run_playbook
from tests.lib.helpers import wait
from tests.lib.paths import ROOT

PLAYBOOK = ROOT / "playbooks" / "observability.yml"
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
NAME = "gpupool-latency-probe"
CRD = "servicemonitors.monitoring.coreos.com"
ENDPOINTS = {"inference": {"url": "http://llm.serving.svc:8000/v1/completions", "model": "llama-3-8b"}}


def changed(run):
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stats["changed"]


def service_monitor_crd():
    """A ServiceMonitor CRD as the Prometheus Operator names it (its schema left open: the rig runs no operator)."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                               "singular": "servicemonitor"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def monitors(custom, ns):
    return custom.list_namespaced_custom_object("monitoring.coreos.com", "v1", ns, "servicemonitors")["items"]


def test_probe_objects_applied_owned_switched_and_removed(k8s_rig, k8s_api, k8s_namespace, tmp_path):
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    ext, custom = client.ApiextensionsV1Api(k8s_api), client.CustomObjectsApi(k8s_api)
    ns = k8s_namespace
    extra = {"observability_output_dir": str(tmp_path), "observability_dashboards": False,
             "observability_kubeconfig": str(k8s_rig.kubeconfig), "observability_latency_probe": True,
             "observability_latency_probe_endpoints": ENDPOINTS, "observability_latency_probe_namespace": ns}
    assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) > 0
    program = (ROOT / "playbooks" / "files" / "gpupool_latency_probe.py").read_text()
    made = latency_probe_manifests(DESIGN, ENDPOINTS, program, namespace=ns, interval_seconds=30.0, timeout_seconds=30.0)
    want = {o["kind"]: o for o in made}
    cm = core.read_namespaced_config_map(NAME, ns)
    assert cm.data == want["ConfigMap"]["data"]
    assert json.loads(cm.data["config.json"])["pools"]["inference"]["model"] == "llama-3-8b"
    deploy = apps.read_namespaced_deployment(NAME, ns)
    svc = core.read_namespaced_service(NAME, ns)
    for obj in (cm, deploy, svc):
        assert obj.metadata.labels == {"app.kubernetes.io/managed-by": "gpupool.vcf", "gpupool.vcf/design": "lab-gpupool",
                                       "app.kubernetes.io/name": NAME}
    assert deploy.spec.template.metadata.annotations == want["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert deploy.spec.template.spec.containers[0].image == "python:3.12-slim"
    assert svc.metadata.annotations["prometheus.io/scrape"] == "true"
    assert svc.metadata.annotations["prometheus.io/port"] == "9108"

    assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) == 0

    # an object made by hand with the probe's name label but not the collection's: never touched
    core.create_namespaced_config_map(ns, {"metadata": {"name": "by-hand", "labels": {"app.kubernetes.io/name": NAME}},
                                           "data": {"x": "y"}})
    ext.create_custom_resource_definition(service_monitor_crd())
    try:
        wait("the ServiceMonitor CRD served", lambda: _served(custom, ns), timeout=30)
        assert changed(run_playbook(PLAYBOOK, extra_vars=extra)) > 0
        mons = monitors(custom, ns)
        assert [m["metadata"]["name"] for m in mons] == [NAME]
        assert mons[0]["spec"]["selector"]["matchLabels"] == want["Service"]["spec"]["selector"]
        assert mons[0]["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
        assert not (core.read_namespaced_service(NAME, ns).metadata.annotations or {}).get("prometheus.io/scrape")

        assert changed(run_playbook(PLAYBOOK, extra_vars=dict(extra, observability_latency_probe=False))) > 0
        assert not monitors(custom, ns)
        for read in (lambda: core.read_namespaced_config_map(NAME, ns), lambda: apps.read_namespaced_deployment(NAME, ns),
                     lambda: core.read_namespaced_service(NAME, ns)):
            assert _gone(read)
        assert core.read_namespaced_config_map("by-hand", ns).data == {"x": "y"}
    finally:
        ext.delete_custom_resource_definition(CRD)


def _served(custom, ns):
    try:
        monitors(custom, ns)
        return True
    except ApiException:
        return False


def _gone(read):
    try:
        read()
    except ApiException as exc:
        return exc.status == 404
    return False
