"""The DCGM exporter double's exposition (tests/sim/dcgm_double.py) without a rig: one device per
requested GPU of a Running pod, MIG instances with GPU_I_PROFILE and no GPU_UTIL, values from the
workload file (re-read when it changes), and text Prometheus's format accepts."""
import os
import re
import time

import dcgm_double
from kubernetes.client import (V1Container, V1ObjectMeta, V1Pod, V1PodSpec, V1PodStatus,
                               V1ResourceRequirements)

NODES = {"mig-0": {"nvidia.com/gpu.product": "GRID-H100-3-40C"},
         "full-0": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}}
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (-?[0-9.e+]+)$')


def pod(ns, name, node, resources, phase="Running"):
    return V1Pod(metadata=V1ObjectMeta(namespace=ns, name=name),
                 spec=V1PodSpec(node_name=node, containers=[
                     V1Container(name="main", resources=V1ResourceRequirements(limits=resources))]),
                 status=V1PodStatus(phase=phase))


def series(text):
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, line
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def test_devices_labels_and_values(tmp_path):
    workload = tmp_path / "w.yml"
    workload.write_text("default: {engine_active: 0.1}\npods:\n  - {namespace: a, pod: 'serve-*', "
                        "fb_used_mib: 20480, engine_active: 0.9}\n")
    w = dcgm_double.Workload(str(workload))
    pods = [pod("a", "serve-1", "mig-0", {"nvidia.com/mig-3g.40gb": "1"}),
            pod("b", "train", "full-0", {"nvidia.com/gpu": "2", "cpu": "1"}),
            pod("b", "pending", None, {"nvidia.com/gpu": "1"}, phase="Pending"),
            pod("b", "cpu-only", "full-0", {"cpu": "1"})]
    got = series(dcgm_double.render(dcgm_double.devices(pods, NODES, w)))
    fb = [(labels["pod"], labels.get("GPU_I_PROFILE"), labels["Hostname"], v)
          for name, labels, v in got if name == "DCGM_FI_DEV_FB_USED"]
    assert fb == [("train", None, "full-0", 1024), ("train", None, "full-0", 1024), ("serve-1", "3g.40gb", "mig-0", 20480)]
    free = [v for name, labels, v in got if name == "DCGM_FI_DEV_FB_FREE" and labels["pod"] == "serve-1"]
    assert free == [40 * 1024 - 20480]
    util = [labels["pod"] for name, labels, v in got if name == "DCGM_FI_DEV_GPU_UTIL"]
    assert util == ["train", "train"]  # none for the MIG instance
    serve = [labels for name, labels, v in got if labels["pod"] == "serve-1"][0]
    assert serve["modelName"] == "GRID H100-3-40C" and serve["namespace"] == "a" and serve["container"] == "main"
    assert {labels["gpu"] for name, labels, v in got if labels["pod"] == "train"} == {"0", "1"}
    engine = dict((labels["pod"], v) for name, labels, v in got if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert engine == {"serve-1": 0.9, "train": 0.1}
    # a new workload file is read on the next scrape
    time.sleep(0.01)
    workload.write_text("default: {engine_active: 0.7}\npods: []\n")
    os.utime(workload, ns=(time.time_ns(), time.time_ns() + 10 ** 9))
    got = series(dcgm_double.render(dcgm_double.devices(pods, NODES, w)))
    assert {v for name, labels, v in got if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} == {0.7}
