"""What the knee tests on the Kubernetes rig with metrics share (tests/integration/k8s/test_gpu_capacity_knee*.py):
a seeded workload of 1-GPU pods on the example design's inference pool, each created at its arrival time,
held for its holding time after the test sees it bound, then deleted; and gpu_capacity's knee read from
the rig's Prometheus through playbooks/capacity.yml with the design's inference pool given an ``slo``.
"""
import copy
import json
import math
import time

import yaml
from kubernetes import client

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback import GPU_RESOURCES
from tests.lib.ansible_run import run_playbook
from tests.lib.helpers import prom, wait
from tests.lib.paths import ROOT

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
# the simulator's fleet of the knee tests (the vsphere fixture reads a test module's FLEET)
FLEET = {
    "clusters": [{"name": "gpu-h100", "hosts": [
        # inference-0's 3g.40gb instance needs a GPU in MIG mode: the first card of esx-h100-01
        {"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": DRIVER, "mig": [0]},
        {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": DRIVER}]}],
    "vms": [{"name": "inference-0", "host": "esx-h100-01", "vgpu": ["nvidia_h100-3-40c"]}],
}

# seconds the range of capacity_knee reaches back before the first pod beyond the time until the playbook starts
PLAYBOOK_MARGIN = 300


def epoch(value):
    """Whole seconds of a Kubernetes timestamp (the client gives datetimes)."""
    return int(value.timestamp())


def poisson_arrivals(rng, phases):
    """Arrival times (seconds from the start) of a Poisson process of ``phases``: [(seconds, arrivals per second)]."""
    out, t0 = [], 0.0
    for length, rate in phases:
        t = t0
        while True:
            t += rng.expovariate(rate)
            if t >= t0 + length:
                break
            out.append(t)
        t0 += length
    return out


def gpu_pod(name, label):
    """A 1-GPU pod for the inference pool's nodes, labelled ``app: <label>``."""
    return {"metadata": {"name": name, "labels": {"app": label}},
            "spec": {"nodeSelector": {"gpupool.vcf/pool": "inference"}, "terminationGracePeriodSeconds": 0,
                     "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "registry.example.com/serve:1",
                                     "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


def scheduled_at(p):
    for c in p.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "True":
            return epoch(c.last_transition_time)
    return None


def wait_for_gpu_capacity(rig, timeout=60):
    """Waits until the rig's Prometheus holds three scrapes of the GPUs the nodes offer (kube-state-metrics'
    ``kube_node_status_allocatable``), the first at least two seconds old. A pod's creation time is
    whole seconds, truncated: one created in the second of the first scrape reads as before it, and
    falls in a window the knee has no capacity for (the module leaves such windows out)."""
    expr = 'min(count_over_time(kube_node_status_allocatable{resource=~"%s"}[5m]))' % GPU_RESOURCES
    wait("three scrapes of the nodes' GPUs in Prometheus at %s" % rig.prometheus_url,
         lambda: any(float(r["value"][1]) >= 3 for r in prom(rig, expr)), timeout=timeout, interval=0.3)


def run_workload(rig, namespace, due, holds, label, drain=240):
    """Waits for the rig's Prometheus to hold the GPU capacity (``wait_for_gpu_capacity``), then creates pod
    ``<label>-NNN`` at ``due[NNN]`` seconds from now, deletes it ``holds[NNN]`` seconds after the test sees it bound,
    until every pod is done (or ``drain`` seconds after the last arrival: then it fails).

    Returns (record, held): record {pod: (created, scheduled, deleted)} in epoch seconds from the API
    (created and scheduled whole seconds, scheduled the PodScheduled time of the binding, checked unchanged
    at the deletion; deleted the test's clock), held {pod: seconds from the test
    seeing it bound to its deletion} (the GPU holding time as the test measures it, to a poll of 0.1 s)."""
    wait_for_gpu_capacity(rig)
    core = client.CoreV1Api(rig.api_client())
    core.create_namespace({"metadata": {"name": namespace}})
    start = time.monotonic()
    record, bound, deleted, held = {}, {}, set(), {}
    made = 0
    deadline = start + (due[-1] if due else 0) + drain
    while time.monotonic() < deadline:
        now = time.monotonic()
        while made < len(due) and now - start >= due[made]:
            core.create_namespaced_pod(namespace, gpu_pod("%s-%03d" % (label, made), label))
            made += 1
        for p in core.list_namespaced_pod(namespace, label_selector="app=%s" % label).items:
            name = p.metadata.name
            if name in deleted:
                continue
            if name not in bound and p.spec.node_name and scheduled_at(p) is not None:
                bound[name] = now
                record[name] = [epoch(p.metadata.creation_timestamp), scheduled_at(p), None]
            if name in bound and now - bound[name] >= holds[int(name.rsplit("-", 1)[1])]:
                # kube-state-metrics gives the PodScheduled time the pod has last, the record the one of its
                # binding: they agree only if the start keeps it (as the kubelet does; the rig's kwok stage)
                assert scheduled_at(p) == record[name][1], "%s: PodScheduled moved from %d to %d after the binding" % (
                    name, record[name][1], scheduled_at(p))
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                record[name][2] = time.time()
                held[name] = time.monotonic() - bound[name]
                deleted.add(name)
        if made == len(due) and len(deleted) == len(due):
            break
        time.sleep(0.1)
    assert len(deleted) == len(due), "the workload did not finish: %d of %d pods done" % (len(deleted), len(due))
    time.sleep(3)  # a few scrapes after the last deletion
    return dict((k, tuple(v)) for k, v in record.items()), held


def capacity_knee(rig, env, tmp_path, record, slo, window, step="1s"):
    """Runs playbooks/capacity.yml against the rig's Prometheus over a range that holds every pod of
    ``record`` (whole windows of ``window`` seconds), the example design's inference pool given ``slo``.
    Returns (the report's knee of the inference pool, the playbook's result, its output folder, its wall seconds)."""
    first = min(c for c, _s, _d in record.values())
    # the module's range ends when it reads its clock, after the playbook's start and first tasks: 6-53 s on the
    # shared 2-core machine (at 53 s the range began after the first 3 pods); windows before the workload have no
    # pods and, before the rig, no series, so a wide margin costs nothing
    span = int(math.ceil((time.time() - first + PLAYBOOK_MARGIN) / window)) * window
    design = copy.deepcopy(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
    [inference] = [p for p in design["pools"] if p["name"] == "inference"]
    inference["slo"] = dict(slo)
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(design))
    out = tmp_path / "out"
    t0 = time.monotonic()
    res = run_playbook(ROOT / "playbooks" / "capacity.yml", env=env, extra_vars={
        "capacity_design_file": str(path), "capacity_output_dir": str(out),
        "capacity_prometheus_url": rig.prometheus_url, "capacity_knee_range": "%ds" % span,
        "capacity_knee_window": "%ds" % window, "capacity_knee_step": step})
    took = time.monotonic() - t0
    assert res.rc == 0, res.stdout[-3000:]
    report = json.loads((out / "gpu-capacity.json").read_text())
    return report["knee"]["inference"], res, out, took
