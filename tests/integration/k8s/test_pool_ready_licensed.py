"""pool_ready's ``licensed`` step through a real Prometheus on the rig with metrics.

The DCGM double serves ``DCGM_FI_DEV_VGPU_LICENSE_STATUS`` for the GPUs running pods hold (one
device per requested GPU; a real exporter serves every GPU of the node), so a pod holds one of the
node's two GPUs; the double's workload file says unlicensed (0) until the test writes licensed (1).
The step must be reached only after that, once Prometheus has scraped it, and the probe pod then
takes the other GPU.
"""
from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path

import yaml
from k8s_fixtures import wait_for
from k8s_metrics_fixtures import k8s_metrics_rig  # noqa: F401  pylint: disable=unused-import
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_module
from tests.integration.k8s.test_pool_ready_replace import module_running

RIG_DCGM_WORKLOAD = Path(tempfile.mkdtemp(prefix="pool-ready-dcgm-")) / "workload.yml"
RIG_DCGM_WORKLOAD.write_text(yaml.safe_dump({"default": {"license_status": 0}}))
TAINT = "gpupool.vcf/pool-ready-licensed"
POLL = 0.5


def test_licensed_waits_for_the_license_status_in_prometheus(k8s_metrics_rig):  # noqa: F811  pylint: disable=redefined-outer-name
    rig = k8s_metrics_rig
    core = client.CoreV1Api(rig.api_client())
    name = "prl-%s" % uuid.uuid4().hex[:6]
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
    core.create_node({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                                   "labels": {"kubernetes.io/hostname": name, "type": "kwok", "gpupool.vcf/pool": name}},
                      "spec": {"taints": [{"key": TAINT, "value": "yes", "effect": "NoSchedule"}]},
                      "status": {"capacity": capacity, "allocatable": capacity}})
    try:
        core.create_namespaced_pod("default", {
            "metadata": {"name": "%s-holder" % name},
            "spec": {"nodeName": name, "terminationGracePeriodSeconds": 0,
                     "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "c", "image": "sim/cuda:12", "resources": {
                         "limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}})
        wait_for("holder Running", lambda: core.read_namespaced_pod("%s-holder" % name, "default").status.phase
                 == "Running")
        box = {}
        args = dict(kubeconfig=str(rig.kubeconfig), nodes=[name], node_selector={"gpupool.vcf/pool": name},
                    tolerations=[{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                    skip=["validated"], prometheus_url=rig.prometheus_url, poll_interval=POLL, timeout=90)
        thread = threading.Thread(target=lambda: box.update(res=run_module("gpupool.vcf.pool_ready", args,
                                                                           env=rig.env)[0]))
        thread.start()
        wait_for("the module running", module_running, timeout=120)
        time.sleep(4)  # the module waits for the license
        made = time.time()
        Path(rig.dcgm_workload).write_text(yaml.safe_dump({"default": {"license_status": 1}}))  # the rig's copy
        thread.join(120)
        res = box["res"]
        assert not res.get("failed"), res.get("msg")
        steps = dict((s["name"], s) for s in res["steps"])
        assert steps["licensed"]["state"] == "reached"
        assert steps["licensed"]["detail"] == "licensed: %s (1 GPUs)" % name
        start = steps["ready"]["reached_at"] - steps["ready"]["at"]
        assert start < made <= steps["licensed"]["reached_at"] <= made + 1 + POLL + 5, (made, steps["licensed"])
        assert steps["probe_pod"]["state"] == "reached" and steps["probe_pod"]["reached_at"] > made
    finally:
        try:
            core.delete_node(name)
        except ApiException:
            pass
        try:
            core.delete_namespaced_pod("%s-holder" % name, "default", grace_period_seconds=0)
        except ApiException:
            pass
