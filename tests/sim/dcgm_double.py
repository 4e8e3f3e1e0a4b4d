#!/usr/bin/env python3
"""A stand-in for dcgm-exporter on the Kubernetes rig: the GPUs only (see tests/sim/k8s/README.md,
section Metrics).

The rig has no GPUs, so nothing can measure framebuffer use or engine activity. This double
serves, in the Prometheus text format, the series one dcgm-exporter per GPU node would serve for
the GPU pods that run there: it lists the rig's Running pods that request a GPU resource
(``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-<profile>``), gives each GPU
of each container one device (or MIG instance), and takes the values from a workload file:

    default: {fb_used_mib: 1024, engine_active: 0.25, gpu_util: 30, license_status: 1}
    pods:
      - namespace: team-a            # optional; every namespace when absent
        pod: train-*                 # fnmatch pattern on the pod name
        fb_used_mib: 40000
        engine_active: 0.8
        gpu_util: 90

Metric and label names are dcgm-exporter's (the sources are listed in the rig README):
``DCGM_FI_DEV_FB_USED``/``DCGM_FI_DEV_FB_FREE`` (MiB), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio),
``DCGM_FI_DEV_GPU_UTIL`` (percent; not served for MIG instances, as DCGM does not report it
there), ``DCGM_FI_DEV_VGPU_LICENSE_STATUS``; labels ``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` (MIG only), ``Hostname`` and the pod
labels ``namespace``, ``pod``, ``container`` (dcgm-exporter with DCGM_EXPORTER_KUBERNETES=true).

One process serves every node (``Hostname`` tells them apart), as Prometheus would see one
exporter per node after relabelling. The workload file is read again when it changes, so a test
can change the values while the rig runs.

    python3 tests/sim/dcgm_double.py --kubeconfig K --port P [--workload FILE]
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import http.server
import os
import re
import sys
import threading
import time
from pathlib import Path

import yaml

GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
MIG_PREFIX = "nvidia.com/mig-"
DEFAULT = {"fb_used_mib": 1024, "engine_active": 0.25, "gpu_util": 30, "license_status": 1}
# framebuffer of a device when the node says nothing (nvidia.com/gpu.memory, MiB)
DEFAULT_FB_MIB = 81559
_MIG_GB = re.compile(r"^(\d+)g\.(\d+)gb")

HELP = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpu_util"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", None),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", "engine_active"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", "license_status"),
)


class Workload:
    """The workload file, re-read when its modification time changes."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        self.mtime = None
        self.default = dict(DEFAULT)
        self.rules: list[dict] = []

    def values(self, namespace: str, pod: str) -> dict:
        self._reload()
        out = dict(self.default)
        for rule in self.rules:
            if rule.get("namespace") not in (None, namespace):
                continue
            if not fnmatch.fnmatchcase(pod, str(rule.get("pod", "*"))):
                continue
            out.update({k: v for k, v in rule.items() if k in DEFAULT})
            break
        return out

    def _reload(self):
        if not self.path or not self.path.exists():
            return
        mtime = self.path.stat().st_mtime_ns
        if mtime == self.mtime:
            return
        spec = yaml.safe_load(self.path.read_text()) or {}
        self.default = dict(DEFAULT, **(spec.get("default") or {}))
        self.rules = list(spec.get("pods") or [])
        self.mtime = mtime


def _uuid(*parts: str) -> str:
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _label_value(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _model_name(node_labels: dict) -> str:
    """dcgm-exporter's modelName is NVML's device name: "NVIDIA H100 80GB HBM3" on a card,
    "GRID A100-8C"-like for a vGPU; the rig's nodes carry GPU feature discovery's product label
    (spaces made dashes), which is turned back."""
    product = node_labels.get("nvidia.com/gpu.product", "NVIDIA-GPU")
    if product.startswith("GRID-"):
        return "GRID " + product[len("GRID-"):]
    return product.replace("-", " ")


def devices(pods: list, nodes: dict, workload: Workload) -> list[dict]:
    """One entry per GPU (or MIG instance) that a Running pod's container holds."""
    out = []
    per_node: dict[str, int] = {}
    for pod in sorted(pods, key=lambda p: (p.spec.node_name or "", p.metadata.namespace, p.metadata.name)):
        node = pod.spec.node_name
        if not node or (pod.status.phase or "") != "Running" or pod.metadata.deletion_timestamp:
            continue
        labels = nodes.get(node, {})
        fb_total = int(labels.get("nvidia.com/gpu.memory", DEFAULT_FB_MIB))
        values = workload.values(pod.metadata.namespace, pod.metadata.name)
        for c in pod.spec.containers:
            requests = dict((c.resources.requests or {}) if c.resources else {})
            requests.update((c.resources.limits or {}) if c.resources else {})
            for resource, qty in sorted(requests.items()):
                mig = resource[len(MIG_PREFIX):] if resource.startswith(MIG_PREFIX) else None
                if resource not in GPU_RESOURCES and mig is None:
                    continue
                for _ in range(int(str(qty))):
                    index = per_node.get(node, 0)
                    per_node[node] = index + 1
                    dev_fb = fb_total
                    if mig:
                        m = _MIG_GB.match(mig)
                        dev_fb = int(m.group(2)) * 1024 if m else fb_total
                    used = min(int(values["fb_used_mib"]), dev_fb)
                    labels_out = {
                        "gpu": str(0 if mig else index), "UUID": _uuid(node, str(0 if mig else index)),
                        "pci_bus_id": "00000000:%02X:00.0" % (0x3B + (0 if mig else index)),
                        "device": "nvidia%d" % (0 if mig else index), "modelName": _model_name(labels),
                    }
                    if mig:
                        labels_out.update(GPU_I_PROFILE=mig, GPU_I_ID=str(index))
                    labels_out.update(Hostname=node, container=c.name, namespace=pod.metadata.namespace,
                                      pod=pod.metadata.name)
                    out.append({"labels": labels_out, "mig": bool(mig),
                                "values": dict(values, fb_used_mib=used, fb_free=dev_fb - used)})
    return out


def render(devs: list[dict]) -> str:
    lines = []
    for name, kind, text, key in HELP:
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s %s" % (name, kind))
        for d in devs:
            if name == "DCGM_FI_DEV_GPU_UTIL" and d["mig"]:
                continue  # DCGM reports no GPU_UTIL for MIG instances
            value = d["values"]["fb_free"] if key is None else d["values"][key]
            labels = ",".join('%s="%s"' % (k, _label_value(v)) for k, v in d["labels"].items())
            lines.append("%s{%s} %s" % (name, labels, value))
    return "\n".join(lines) + "\n"


class Double:
    def __init__(self, kubeconfig: str, workload: str | None):
        from kubernetes import client, config
        self.core = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        self.workload = Workload(workload)
        self.lock = threading.Lock()
        self.scrapes = 0

    def metrics(self) -> str:
        with self.lock:
            nodes = {n.metadata.name: n.metadata.labels or {} for n in self.core.list_node().items}
            pods = self.core.list_pod_for_all_namespaces(field_selector="status.phase=Running").items
            self.scrapes += 1
            return render(devices(pods, nodes, self.workload))


def serve(double: Double, port: int, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.split("?")[0] == "/health":
                body, status = b"ok\n", 200
            elif self.path.split("?")[0] == "/metrics":
                try:
                    body, status = double.metrics().encode(), 200
                except Exception as e:  # noqa: BLE001 - an exporter answers 500 and goes on
                    body, status = ("%s\n" % e).encode(), 500
            else:
                body, status = b"not found\n", 404
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return http.server.ThreadingHTTPServer((host, port), Handler)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workload", default=os.environ.get("GPUPOOL_DCGM_WORKLOAD"))
    args = ap.parse_args(argv)
    server = serve(Double(args.kubeconfig, args.workload), args.port)
    print("dcgm double: serving on 127.0.0.1:%d at %s" % (args.port, time.strftime("%H:%M:%S")), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
