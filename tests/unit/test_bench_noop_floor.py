"""The floor of tests/bench/bench_noop_site.py: per link the reads it must do, each once (the ESXi link's GPU
inventory of each cluster, one module call's floor for any other link that talks to vCenter, one list of each
Kubernetes resource the link read), and the counting proxy's group/version of a resource path."""
import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / ("%s.py" % name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return load("bench_noop_site")


@pytest.mark.parametrize("path, version", [
    ("/api/v1/nodes", "v1"),
    ("/api/v1/namespaces/gpu-operator/pods", "v1"),
    ("/apis/nvidia.com/v1/clusterpolicies", "nvidia.com/v1"),
    ("/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/clusters/c1", "cluster.x-k8s.io/v1beta1"),
    ("/api", None),
    ("/apis/nvidia.com", None),
    ("/version", None),
])
def test_the_counting_proxy_names_the_group_version_of_a_path(path, version):
    assert load("k8s_counting_proxy").api_version(path) == version


def test_the_esxi_links_floor_is_the_inventory_of_each_gpu_cluster(bench):
    tasks = bench.link_reads("Link 1 of 5: ESXi hosts", {"RetrievePropertiesEx": 3}, [], ["gpu-a", "gpu-b"], "kc", {})
    assert [(t["name"], t["gpupool.vcf.gpu_host_info"]) for t in tasks] == [
        ("inventory gpu-a", {"cluster": "gpu-a"}), ("inventory gpu-b", {"cluster": "gpu-b"})]


def test_another_link_on_vcenter_gets_one_module_calls_floor_and_one_list_per_resource(bench):
    tasks = bench.link_reads("Link 4 of 5: VKS", {"Login": 1}, ["clusters", "nodes"], ["gpu-a"], "kc",
                             {"clusters": "cluster.x-k8s.io/v1beta1"})
    assert tasks[0] == {"name": "one retrieval", "bench_floor_call": {}}
    lists = [t["kubernetes.core.k8s_info"] for t in tasks[1:]]
    assert lists == [{"kind": "clusters", "api_version": "cluster.x-k8s.io/v1beta1", "kubeconfig": "kc"},
                     {"kind": "nodes", "api_version": "v1", "kubeconfig": "kc"}]


def test_a_link_that_reads_nothing_gets_no_floor_play(bench):
    rows = [("Validate the pool design", 4, 1.0, {}, {}), ("Link 5 of 5: guest cluster", 9, 2.0, {}, {"list": 2})]
    plays = bench.floor_play(13, rows, {"Link 5 of 5: guest cluster": ["nodes"]}, ["gpu-a"], "kc", {})
    assert [p["name"] for p in plays] == ["floor: pings", "floor: Link 5 of 5: guest cluster"]
    assert len(plays[0]["tasks"]) == 13 and len(plays[1]["tasks"]) == 1
