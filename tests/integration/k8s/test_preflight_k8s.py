"""gpu_pool_preflight's Kubernetes links (vks, guest) on the session's Kubernetes rig, every request through
the recording proxy (tests/sim/k8s_proxy.py), with the vSphere links on the simulator of the example fleet."""
import pathlib

from tests.integration.test_preflight_playbook import writes
from tests.lib.ansible_run import run_module

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_kubernetes_links_read_only_through_the_recording_proxy(vsphere, k8s_rig):
    """The vks and guest links against the Kubernetes rig (Kueue installed), every request through the
    recording proxy: Kueue's CRDs are found, the design's VKS cluster is named as missing, and no verb but
    get, list or watch (HTTP GET) reached the API server."""
    with k8s_rig.fault_proxy() as proxy:
        args = dict(design_file=str(ROOT / "examples" / "design.yml"), kubeconfig=str(proxy.kubeconfig),
                    supervisor_kubeconfig=str(proxy.kubeconfig))
        vsphere.reset_stats()
        res = run_module("gpupool.vcf.gpu_pool_preflight", args, env=dict(vsphere.env, **proxy.env))[0]
        requests = list(proxy.requests)
    assert not res.get("failed"), res.get("msg")
    assert res["links"]["guest"] == dict(go=True, status="go", reasons=[])
    # the rig is shared by the files of this folder: whether an earlier file left the design's VKS cluster there
    # depends on the order they ran in, so the vks link is held to what the rig has now
    vks = res["links"]["vks"]
    assert vks["go"] is not None, vks
    if not vks["go"]:
        assert vks["reasons"] and all("gpu-platform/gpu-workloads" in r for r in vks["reasons"]), vks
        assert res["go"] is False
    assert requests and all(method == "GET" for method, _path, _done in requests), requests
    assert any("customresourcedefinitions" in path for _m, path, _d in requests)
    assert writes(vsphere.stats()) == ([], [])
