"""The notebook culler's main loop, once, on the rig with metrics: two notebook StatefulSets on GPU
nodes, both Jupyter servers idle for hours, one GPU computing (the DCGM double serves its engine
activity 0.9) and one doing nothing (0.0), scraped by the rig's real Prometheus.

The culler runs as the CronJob would run it: its script, the env of the CronJob the role builds
(``culling_manifests``), the culler's own ServiceAccount and ClusterRole (a token of that account,
not the rig's admin), plus what a pod gets from its kubelet (API server address, the account's
token and CA in a folder: SERVICE_ACCOUNT_DIR) and the Jupyter status URL of a small server of this
test that stands in for the notebooks' Jupyter servers (NOTEBOOK_STATUS_URL).

First with Prometheus unreachable: nothing is culled, both pods get a Warning Event and the run
exits 1. Then with the rig's Prometheus: only the idle notebook is scaled to 0, its PVC stays
(Bound), its pod gets a Normal Event ``Culled``; the computing one keeps running.
"""
import datetime
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import
from kubernetes import client

from tests.lib.helpers import prom, wait

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
SCRIPT = ROOT / "roles" / "gpu_scheduling_policy" / "files" / "notebook_culler.py"
RIG_DCGM_WORKLOAD = HERE / "notebook_culling_dcgm.yml"
NS = "nb-team"
CULLER_NS = "gpupool-system"
CULLER = "gpupool-notebook-culler"
CLASS = "notebook-manual"
LAST_ACTIVITY = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=3)).strftime(
    "%Y-%m-%dT%H:%M:%S.%fZ")


def culler_objects(prometheus_url):
    from tests.lib.ansible_run import COLLECTIONS
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
    policy = objs.role_inputs("gpu_scheduling_policy", {
        "gpu_scheduling_policy_culling": "cronjob", "gpu_scheduling_policy_culling_idle_minutes": 1,
        "gpu_scheduling_policy_culling_namespace": CULLER_NS,
        "gpu_scheduling_policy_culling_prometheus_url": prometheus_url})
    return objs.culling_manifests(policy, SCRIPT.read_text())


def notebook(name):
    labels = {"app": name, "gpupool.vcf/workload": "notebook"}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"gpupool.vcf/pool": "gpu-h100"}, "terminationGracePeriodSeconds": 0,
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                         "containers": [{"name": "notebook", "image": "registry.example.com/jupyter:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                         "volumeMounts": [{"name": "data", "mountPath": "/home/jovyan"}]}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": CLASS,
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


def volume(claim):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-" + claim}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": CLASS,
        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/srv/notebooks/" + claim},
        "claimRef": {"namespace": NS, "name": claim}}}


class Jupyter(http.server.BaseHTTPRequestHandler):
    """/<namespace>/<pod>/api/status of idle Jupyter servers (Jupyter Server's fields)."""
    asked = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        parts = self.path.strip("/").split("/")
        if len(parts) != 4 or parts[2:] != ["api", "status"]:
            self.send_error(404)
            return
        Jupyter.asked.append("/".join(parts[:2]))
        body = json.dumps({"started": LAST_ACTIVITY, "last_activity": LAST_ACTIVITY, "connections": 0,
                           "kernels": 0}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def jupyter():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jupyter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d/{namespace}/{pod}/api/status" % server.server_address[1]
    finally:
        server.shutdown()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_culler(rig, sa_dir, status_url, prometheus_url):
    [job] = [o for o in culler_objects(prometheus_url) if o["kind"] == "CronJob"]
    [container] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    env = dict((e["name"], e["value"]) for e in container["env"])  # what the CronJob gives
    host, port = rig.server.rsplit("//", 1)[1].rsplit(":", 1)
    env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port, SERVICE_ACCOUNT_DIR=str(sa_dir),
               NOTEBOOK_STATUS_URL=status_url, PATH=os.environ.get("PATH", ""))
    return subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60,
                          check=False), env


def events(core, pod):
    return [(e.type, e.reason, e.source.component) for e in core.list_namespaced_event(
        NS, field_selector="involvedObject.name=%s" % pod).items if e.source and e.source.component == CULLER]


def test_only_the_idle_notebook_is_culled(k8s_metrics_rig, jupyter, tmp_path):
    rig = k8s_metrics_rig
    api = rig.api_client()
    core, apps, storage = client.CoreV1Api(api), client.AppsV1Api(api), client.StorageV1Api(api)
    # the culler's account and permissions as the role writes them
    core.create_namespace({"metadata": {"name": CULLER_NS}})
    rig.apply([o for o in culler_objects(rig.prometheus_url)
               if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")])
    token = core.create_namespaced_service_account_token(CULLER, CULLER_NS, {"spec": {"expirationSeconds": 600}})
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(token.status.token)
    (sa_dir / "ca.crt").write_bytes((rig.data_dir / "pki" / "ca.crt").read_bytes())

    # two notebooks with their volumes
    core.create_namespace({"metadata": {"name": NS}})
    storage.create_storage_class({"metadata": {"name": CLASS}, "provisioner": "kubernetes.io/no-provisioner",
                                  "volumeBindingMode": "Immediate"})
    for name in ("nb-idle", "nb-busy"):
        core.create_persistent_volume(volume("data-%s-0" % name))
        apps.create_namespaced_stateful_set(NS, notebook(name))
    wait("both notebook pods Running", lambda: sorted(
        p.metadata.name for p in core.list_namespaced_pod(NS).items
        if p.status.phase == "Running" and p.status.pod_ip) == ["nb-busy-0", "nb-idle-0"])
    wait("both GPUs' engine activity in Prometheus", lambda: prom(
        rig, 'count(DCGM_FI_PROF_GR_ENGINE_ACTIVE{namespace="%s"}) == 2' % NS))

    # Prometheus unreachable: the GPU state of both is unknown, both kept, both told, the run fails
    down, env = run_culler(rig, sa_dir, jupyter, "http://127.0.0.1:%d" % free_port())
    assert env["CULL_IDLE_MINUTES"] == "1" and env["NOTEBOOK_SELECTOR"] == "gpupool.vcf/workload=notebook"
    assert down.returncode == 1, down.stdout + down.stderr
    assert "Traceback" not in down.stderr, down.stderr
    assert [apps.read_namespaced_stateful_set(n, NS).spec.replicas for n in ("nb-idle", "nb-busy")] == [1, 1]
    for pod in ("nb-idle-0", "nb-busy-0"):
        assert wait("the Warning Event on %s" % pod, lambda p=pod: events(core, p)) == [
            ("Warning", "CullCheckFailed", CULLER)]
    assert sorted(Jupyter.asked) == ["nb-team/nb-busy-0", "nb-team/nb-idle-0"]

    # with the rig's Prometheus: only the notebook whose GPU does nothing is stopped
    ran, env = run_culler(rig, sa_dir, jupyter, rig.prometheus_url)
    assert env["PROMETHEUS_URL"] == rig.prometheus_url
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "culled statefulset nb-team/nb-idle: Jupyter idle, GPU idle" in ran.stdout, ran.stdout
    assert "nb-busy" not in ran.stdout, ran.stdout
    assert apps.read_namespaced_stateful_set("nb-idle", NS).spec.replicas == 0
    assert apps.read_namespaced_stateful_set("nb-busy", NS).spec.replicas == 1
    wait("nb-idle-0 gone", lambda: [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["nb-busy-0"])
    assert core.read_namespaced_pod("nb-busy-0", NS).status.phase == "Running"
    claim = core.read_namespaced_persistent_volume_claim("data-nb-idle-0", NS)
    assert claim.status.phase == "Bound" and claim.metadata.deletion_timestamp is None
    assert ("Normal", "Culled", CULLER) in events(core, "nb-idle-0")
    assert events(core, "nb-busy-0") == [("Warning", "CullCheckFailed", CULLER)]  # only the first run's
