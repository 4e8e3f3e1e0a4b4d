"""The guest-side license truth (pure/_guest_license.py) and the licensing link's findings from it: driver pods
as the API serializes them and nvidia-smi -q text written by hand, no I/O; the rig's nvidia-smi double's output
parses to what its state file says."""
import datetime
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_licensing, _guest_license as gl
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
NOW = datetime.datetime(2026, 12, 6, 21, 0, 0)

SMI = """
==============NVSMI LOG==============

Timestamp                                 : Sun Dec  6 21:00:00 2026
Driver Version                            : 550.127.05

Attached GPUs                             : 2
GPU 00000000:02:00.0
    Product Name                          : GRID A100-4C
    vGPU Software Licensed Product
        Product Name                      : NVIDIA Virtual Compute Server
        License Status                    : Licensed (Expiry: 2027-11-29 23:59:59 GMT)
GPU 00000000:03:00.0
    Product Name                          : GRID A100-4C
    vGPU Software Licensed Product
        Product Name                      : NVIDIA Virtual Compute Server
        License Status                    : %s
"""


def pod(name, node, phase="Running", containers=("nvidia-driver-ctr", "nvidia-peermem-ctr"), default=None):
    meta = {"name": name, "namespace": "gpu-operator"}
    if default:
        meta["annotations"] = {"kubectl.kubernetes.io/default-container": default}
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
            "status": {"phase": phase}}


def series(**values):
    return [{"metric": {"__name__": "DCGM_FI_DEV_VGPU_LICENSE_STATUS", "Hostname": node, "gpu": str(i)},
             "value": [1764504000.0, v]} for node, vs in values.items() for i, v in enumerate(vs)]


def rules(findings):
    return [(f["rule"], f["object"]) for f in findings]


def test_the_running_driver_pod_of_each_node_is_the_one_read():
    pods = [pod("d-old", "gpu-1", phase="Pending"), pod("d-new", "gpu-1"), pod("d-2", "gpu-2", phase="Pending"),
            pod("unbound", None)]
    by_node = gl.driver_pods_by_node(pods)
    assert {n: p["metadata"]["name"] for n, p in by_node.items()} == {"gpu-1": "d-new", "gpu-2": "d-2"}


def test_the_container_is_the_pods_default_else_the_driver_container():
    assert gl.driver_container(pod("d", "n")) == "nvidia-driver-ctr"
    assert gl.driver_container(pod("d", "n", containers=("a", "nvidia-driver-ctr"), default="a")) == "a"
    # an annotation naming no container of the pod is not followed
    assert gl.driver_container(pod("d", "n", default="gone")) == "nvidia-driver-ctr"


def test_a_node_with_every_vgpu_licensed_reads_licensed_and_one_unlicensed_vgpu_is_named():
    ok = gl.reading(pod("d", "gpu-1"), output=SMI % "Licensed (Expiry: 2027-11-29 23:59:59 GMT)", now=NOW)
    assert (ok["state"], ok["gpus"], ok["licensed_gpus"]) == ("licensed", 2, 2)
    bad = gl.reading(pod("d", "gpu-1"), output=SMI % "Unlicensed (Restricted)", now=NOW)
    assert (bad["state"], bad["gpus"], bad["licensed_gpus"]) == ("unlicensed", 2, 1)
    assert bad["message"] == "1 of 2 vGPU(s) not licensed (00000000:03:00.0 Unlicensed (Restricted))"


def test_an_expired_license_is_unlicensed():
    got = gl.reading(pod("d", "gpu-1"), output=SMI % "Licensed (Expiry: 2026-12-01 00:00:00 GMT)", now=NOW)
    assert got["state"] == "unlicensed" and got["licensed_gpus"] == 1


@pytest.mark.parametrize("kw, says", [
    (dict(pod=None), "no GPU Operator driver pod"),
    (dict(error="exit 9: boom"), "failed: exit 9: boom"),
    (dict(output="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."), "does not answer"),
    (dict(output="Driver Version : 550.127.05\n"), "lists no GPU"),
])
def test_no_pod_a_failed_exec_no_driver_and_no_gpu_are_unknown(kw, says):
    the_pod = kw.pop("pod", pod("d", "gpu-1"))
    got = gl.reading(the_pod, now=NOW, **kw)
    assert got["state"] == "unknown" and says in got["message"]


def test_sources_disagree_only_when_both_know_and_differ():
    licensed = gl.reading(pod("d", "gpu-1"), output=SMI % "Licensed (Expiry: 2027-11-29 23:59:59 GMT)", now=NOW)
    unlicensed = gl.reading(pod("d", "gpu-1"), output=SMI % "Unlicensed (Restricted)", now=NOW)
    assert gl.disagreement(licensed, [1.0, 1.0]) is None
    assert gl.disagreement(licensed, []) is None            # no series: DCGM knows nothing
    assert gl.disagreement(gl.reading(None), [0.0]) is None  # the guest knows nothing
    assert "says unlicensed" in gl.disagreement(unlicensed, [1.0, 1.0])
    assert "exporter's license status says unlicensed (2 series: 1, 0)" in gl.disagreement(licensed, [1.0, 0.0])


def test_auto_uses_the_driver_pods_only_where_there_are_some():
    assert gl.use_driver_pods("auto", [pod("d", "n")]) and not gl.use_driver_pods("auto", [])
    assert gl.use_driver_pods("driver_pod", []) and not gl.use_driver_pods("dcgm", [pod("d", "n")])


def test_the_audit_judges_each_node_by_its_driver_pod_and_names_a_disagreement():
    readings = {
        "gpu-1": gl.reading(pod("d1", "gpu-1"), output=SMI % "Licensed (Expiry: 2027-11-29 23:59:59 GMT)", now=NOW),
        "gpu-2": gl.reading(pod("d2", "gpu-2"), output=SMI % "Unlicensed (Restricted)", now=NOW),
    }
    nodes = ["gpu-1", "gpu-2", "gpu-3"]  # gpu-3 runs no driver pod
    # DCGM says gpu-1 is unlicensed and gpu-2 licensed: both disagree with nvidia-smi
    got = _audit_licensing.audit_licensing(DERIVED, license_series=series(**{"gpu-1": ["0"], "gpu-2": ["1", "1"]}),
                                           gpu_nodes=nodes, guest_licenses=readings)
    assert rules(got) == [("license_sources_disagree", "node gpu-1"), ("gpu_node_unlicensed_guest", "node gpu-2"),
                          ("license_sources_disagree", "node gpu-2"), ("gpu_node_license_unknown_guest", "node gpu-3")]
    assert [f["severity"] for f in got] == ["warning", "error", "warning", "warning"]
    assert "driver pod d2: 1 of 2 vGPU(s) not licensed" in got[1]["message"]
    # without Prometheus the driver pods alone judge, and the check counts as made
    alone = _audit_licensing.audit_licensing(DERIVED, gpu_nodes=nodes, guest_licenses=readings)
    assert rules(alone) == [("gpu_node_unlicensed_guest", "node gpu-2"), ("gpu_node_license_unknown_guest", "node gpu-3")]


def test_the_rig_double_prints_what_its_state_file_says(tmp_path):
    state = {"driver_version": "535.216.01", "gpus": [
        {"pci_bus_id": "00000000:02:00.0", "license_status": "Licensed (Expiry: 2027-01-02 03:04:05 GMT)"},
        {"pci_bus_id": "00000000:04:00.0", "license_status": "Unlicensed (Unrestricted)"}]}
    (tmp_path / "s.json").write_text(json.dumps(state))
    env = dict(os.environ, GPUPOOL_SIM_NVIDIA_SMI_STATE=str(tmp_path / "s.json"))
    double = str(ROOT / "tests" / "sim" / "nvidia_smi_double.py")
    out = subprocess.run([sys.executable, double, "-q"], env=env, capture_output=True, text=True, check=True).stdout
    got = gl.reading(pod("d", "n"), output=out, now=NOW)
    assert got["facts"]["driver_version"] == "535.216.01"
    assert [(g["pci_bus_id"], g["licensed"], g["expiry"]) for g in got["facts"]["gpus"]] == [
        ("00000000:02:00.0", True, "2027-01-02T03:04:05Z"), ("00000000:04:00.0", False, None)]
    # an option nvidia-smi does not take is refused; a driver that is not loaded fails as nvidia-smi does
    assert subprocess.run([sys.executable, double, "-x"], env=env, capture_output=True, check=False).returncode == 2
    (tmp_path / "s.json").write_text(json.dumps({"driver": False}))
    r = subprocess.run([sys.executable, double, "-q"], env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 9 and gl.reading(pod("d", "n"), output=r.stdout)["state"] == "unknown"
