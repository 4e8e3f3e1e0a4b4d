"""playbooks/pool_ready.yml on the rig: a node is replaced (deleted, created again Not Ready) and each
step until the capacity is in service is made true by the test, one after the other, at known times.

The GPU Operator's validator is a real DaemonSet (the operator's own selector, the node label
``nvidia.com/gpu.deploy.operator-validator=true`` that the operator sets on GPU nodes), whose pods the
DaemonSet controller creates, the scheduler binds and kwok runs; the GPU is advertised when the test
writes the node's allocatable, as the device plugin's registration makes the kubelet do; the
inference endpoint is a small local HTTP server that answers 503 until the test lets it serve, then
streams server-sent events as an OpenAI-compatible server does. Each step's ``reached_at`` must come
after the moment the test made it true and within a poll of it: the module really waits for each.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from k8s_fixtures import wait_for
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import ROOT, run_playbook

PLAYBOOK = ROOT / "playbooks" / "pool_ready.yml"
TAINT = "gpupool.vcf/pool-ready-test"
DEPLOY_LABEL = "nvidia.com/gpu.deploy.operator-validator"
POWER = "gpupool.vcf/sim-power"
POLL = 0.5
FIRST_CHUNK_DELAY = 0.3


def uid():
    return uuid.uuid4().hex[:6]


class Endpoint:
    """An OpenAI-compatible streaming completions endpoint: 503 until `serving`, then SSE chunks."""

    def __init__(self):
        self.serving = False
        self.requests = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append((time.time(), body))
                if not endpoint.serving:
                    self.send_response(503)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
                time.sleep(FIRST_CHUNK_DELAY)  # the model's prefill
                for text in ("Hel", "lo"):
                    chunk = {"id": "c1", "object": "text_completion", "choices": [{"index": 0, "text": text}]}
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/v1/completions" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def endpoint():
    e = Endpoint()
    yield e
    e.stop()


@pytest.fixture
def pool(k8s_api, k8s_namespace):
    """A pool label, a validator DaemonSet for it in the test namespace, and the nodes to clean up."""
    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    name = "pr-%s" % uid()
    app = "nvidia-operator-validator-%s" % name  # the operator's label, made unique to this test
    apps.create_namespaced_daemon_set(k8s_namespace, {
        "metadata": {"name": "nvidia-operator-validator"},
        "spec": {"selector": {"matchLabels": {"app": app}},
                 "template": {"metadata": {"labels": {"app": app}}, "spec": {
                     "nodeSelector": {DEPLOY_LABEL: "true", "gpupool.vcf/pool": name},
                     "tolerations": [{"operator": "Exists"}],
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "nvidia-operator-validator", "image": "sim/gpu-operator-validator"}]}}}})
    nodes = []
    yield dict(name=name, app=app, ns=k8s_namespace, nodes=nodes, core=core)
    for node in nodes:
        try:
            core.delete_node(node)
        except ApiException:
            pass


def make_node(core, name, pool, ready, gpus=0, validator=False):
    """A kwok node of the pool; not ready: kwok leaves it without a Ready condition (its VM is off)."""
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    labels = {"kubernetes.io/hostname": name, "type": "kwok", "gpupool.vcf/pool": pool}
    if validator:
        labels[DEPLOY_LABEL] = "true"
    annotations = {"kwok.x-k8s.io/node": "fake"}
    if not ready:
        annotations[POWER] = "off"
    core.create_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "labels": labels, "annotations": annotations},
                      "spec": {"taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]},
                      "status": {"capacity": capacity, "allocatable": capacity}})


def is_ready(core, name):
    try:
        conds = core.read_node(name).status.conditions or []
    except ApiException:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in conds)


def extra_vars(k8s_rig, pool, tmp_path, **more):
    out = dict(pool_ready_kubeconfig=str(k8s_rig.kubeconfig), pool_ready_nodes=pool["nodes"],
               pool_ready_node_selector={"gpupool.vcf/pool": pool["name"]},
               pool_ready_tolerations=[{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
               pool_ready_probe_namespace=pool["ns"], pool_ready_poll_interval=POLL, pool_ready_timeout=90,
               pool_ready_output_dir=str(tmp_path), pool_ready_name="report",
               pool_ready_validator_selector="app=%s" % pool["app"], pool_ready_validator_namespace=pool["ns"])
    out.update(more)
    return out


def play_in_background(k8s_rig, variables):
    box = {}
    thread = threading.Thread(target=lambda: box.update(res=run_playbook(PLAYBOOK, env=k8s_rig.env,
                                                                         extra_vars=variables, timeout=300)))
    thread.start()
    return thread, box


def module_running():
    """Whether a pool_ready module process runs (ansible-playbook starts it as AnsiballZ_pool_ready.py)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"AnsiballZ_pool_ready" in cmdline.read_bytes():
                return True
        except OSError:
            pass
    return False


def probe_pods(core, ns):
    return core.list_namespaced_pod(ns, label_selector="gpupool.vcf/probe=pool-ready").items


def test_replaced_node_each_step_timed_in_order(k8s_rig, pool, endpoint, tmp_path):
    core, name = pool["core"], "%s-node-1" % pool["name"]
    pool["nodes"].append(name)
    # the node as it was, in service; then replaced: deleted and registered again, Not Ready, without the
    # operator's deploy label or the GPU (NFD and the device plugin have not run on the new VM yet)
    make_node(core, name, pool["name"], ready=True, gpus=1, validator=True)
    wait_for("old node Ready", lambda: is_ready(core, name))
    core.delete_node(name)
    wait_for("old node gone", lambda: name not in [n.metadata.name for n in core.list_node().items])
    core.delete_collection_namespaced_pod(pool["ns"], label_selector="app=%s" % pool["app"], grace_period_seconds=0)
    wait_for("old validator pod gone", lambda: core.list_namespaced_pod(
        pool["ns"], label_selector="app=%s" % pool["app"]).items == [])
    make_node(core, name, pool["name"], ready=False)
    time.sleep(1)
    assert not is_ready(core, name)

    started = time.time()
    thread, box = play_in_background(k8s_rig, extra_vars(k8s_rig, pool, tmp_path, pool_ready_inference_url=endpoint.url,
                                                         pool_ready_inference_model="tiny"))
    made = {}
    wait_for("the module running", module_running, timeout=120)
    time.sleep(3)  # the module polls the first step
    made["ready"] = time.time()
    core.patch_node(name, {"metadata": {"annotations": {POWER: None}}})
    wait_for("new node Ready", lambda: is_ready(core, name))
    time.sleep(3)
    made["validated"] = time.time()
    core.patch_node(name, {"metadata": {"labels": {DEPLOY_LABEL: "true"}}})
    time.sleep(3)
    made["advertised"] = time.time()
    gpus = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
    core.patch_node_status(name, {"status": {"capacity": gpus, "allocatable": gpus}})
    time.sleep(4)  # the probe pod runs and is removed meanwhile; the endpoint is not serving yet
    made["first_token"] = time.time()
    endpoint.serving = True
    thread.join(240)
    res = box["res"]
    assert res.rc == 0, res.stdout[-3000:]

    result = res.result("Wait for each step and time it")
    steps = dict((s["name"], s) for s in result["steps"])
    assert [s["name"] for s in result["steps"]] == ["ready", "validated", "advertised", "licensed", "probe_pod",
                                                    "first_token"]
    start = steps["ready"]["reached_at"] - steps["ready"]["at"]
    assert started <= start < made["ready"], "the module was waiting before the node became Ready"
    for step in ("ready", "validated", "advertised", "first_token"):
        # reached after the test made it true, and within a poll (plus the request and the kwok/controller lag)
        assert made[step] <= steps[step]["reached_at"] <= made[step] + POLL + 8, (step, made[step], steps[step])
    # it waited for the Ready condition: it was running before the node became Ready, and reached it after
    assert steps["ready"]["seconds"] == steps["ready"]["at"] >= made["ready"] - start - 0.01  # rounding
    reached = [s["reached_at"] for s in result["steps"] if s["state"] == "reached"]
    assert reached == sorted(reached)
    ats = [s["at"] for s in result["steps"]]
    assert ats == sorted(ats)
    assert abs(sum(s["seconds"] for s in result["steps"]) - result["total_seconds"]) < 0.1
    assert steps["licensed"]["state"] == "skipped"
    assert "DCGM_FI_DEV_VGPU_LICENSE_STATUS" in steps["licensed"]["detail"]
    assert "Prometheus" in steps["licensed"]["detail"]
    assert steps["validated"]["detail"] == "validator pod Ready on %s" % name
    assert steps["advertised"]["detail"] == "nvidia.com/gpu allocatable: %s 1" % name
    assert steps["probe_pod"]["state"] == "reached" and ("Running on %s" % name) in steps["probe_pod"]["detail"]
    assert steps["probe_pod"]["reached_at"] > steps["advertised"]["reached_at"]
    # the endpoint answered 503 until serving; the time to first token is the stream's, not the wait's
    assert len(endpoint.requests) >= 2 and endpoint.requests[-1][1]["stream"] is True
    assert endpoint.requests[-1][1]["model"] == "tiny"
    assert FIRST_CHUNK_DELAY <= result["time_to_first_token"] < FIRST_CHUNK_DELAY + 2
    assert result["seconds"]["first_token"] >= 2.5
    # the probe pod is gone, the reports hold the same times
    wait_for("probe pod removed", lambda: probe_pods(pool["core"], pool["ns"]) == [], timeout=30)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steps"] == result["steps"] and report["seconds"] == result["seconds"]
    markdown = (tmp_path / "report.md").read_text()
    assert "| ready | reached | %.2f |" % steps["ready"]["seconds"] in markdown
    assert markdown.rstrip().endswith("In service after %.2f s." % result["total_seconds"])
    printed = res.result("Time each step took")["msg"]
    assert printed[0].startswith("ready reached %s" % steps["ready"]["seconds"]), printed


def test_probe_pod_that_cannot_schedule_is_the_step_named(k8s_rig, pool, tmp_path):
    core, name = pool["core"], "%s-node-2" % pool["name"]
    pool["nodes"].append(name)
    make_node(core, name, pool["name"], ready=True, gpus=1, validator=True)
    wait_for("node Ready", lambda: is_ready(core, name))
    # the node's one GPU is held by another pod: the probe cannot be placed
    core.create_namespaced_pod(pool["ns"], {
        "metadata": {"name": "holder"},
        "spec": {"nodeName": name, "terminationGracePeriodSeconds": 0,
                 "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                 "containers": [{"name": "c", "image": "sim/cuda:12",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}})
    wait_for("holder Running", lambda: core.read_namespaced_pod("holder", pool["ns"]).status.phase == "Running")

    res = run_playbook(PLAYBOOK, env=k8s_rig.env, timeout=300,
                       extra_vars=extra_vars(k8s_rig, pool, tmp_path, pool_ready_step_timeouts={"probe_pod": 6}))
    result = res.result("Wait for each step and time it")
    assert res.rc != 0, json.dumps(result["steps"])
    msg = result["msg"]
    assert msg.startswith("Unable to bring nodes %s into service: step probe_pod not reached within 6 s" % name), msg
    assert "Insufficient nvidia.com/gpu" in msg, msg
    assert "reached: ready after" in msg and "validated after" in msg and "advertised after" in msg, msg
    states = [(s["name"], s["state"]) for s in result["steps"]]
    assert states == [("ready", "reached"), ("validated", "reached"), ("advertised", "reached"),
                      ("licensed", "skipped"), ("probe_pod", "not_reached"), ("first_token", "not_started")]
    probe = [s for s in result["steps"] if s["name"] == "probe_pod"][0]
    assert 6 <= probe["seconds"] < 6 + POLL + 3, probe
    assert res.result("In service")["msg"] == msg
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steps"] == result["steps"]
    assert "Not in service: probe_pod." in (tmp_path / "report.md").read_text()
    wait_for("probe pod removed after the failure", lambda: probe_pods(core, pool["ns"]) == [], timeout=30)


def test_without_a_kubeconfig_it_says_it_skipped_and_host_rebuild_ends_with_it(tmp_path):
    res = run_playbook(PLAYBOOK, extra_vars=dict(pool_ready_nodes=["n-1"], pool_ready_output_dir=str(tmp_path)))
    assert res.rc == 0, res.stdout[-2000:]
    assert res.result("Say why nothing is timed")["msg"] == (
        "pool_ready skipped: no guest kubeconfig given (pool_ready_kubeconfig)")
    # the design lookup of pool_ready_pool is skipped without one; the message is the one task run, then the play ends
    assert [task[0] for task in res.tasks if not task[1].get("skipped")] == ["Say why nothing is timed"]
    assert res.tasks[-1][0] == "Say why nothing is timed"
    assert list(tmp_path.iterdir()) == []
    last = yaml.safe_load((ROOT / "playbooks" / "host_rebuild.yml").read_text())[-1]
    assert last["ansible.builtin.import_playbook"] == "pool_ready.yml"
    assert "host_rebuild__vgpu_vms" in last["vars"]["pool_ready_nodes"]
