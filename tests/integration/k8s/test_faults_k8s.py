"""Faults of the Kubernetes API during real vks_node_pool, vks_gpu_node_pools and gpu_pool_audit
runs, injected by the fault proxy in front of the rig's API server (tests/sim/k8s_proxy.py): each
run either survives and converges, or fails within its request timeout naming the Cluster and
what was left, never with a traceback; a plain rerun after the fault is cleared converges with
nothing lost."""
from __future__ import annotations

import base64
import hashlib
import json
import pathlib
import socket
import tempfile
import time

import pytest
import yaml
from kubernetes import client, dynamic

from tests.lib import chain
from tests.lib.ansible_run import run_module, run_playbook

CAPI = "cluster.x-k8s.io"
MODULE = "gpupool.vcf.vks_node_pool"
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
POOLS = [{"name": "inference", "replicas": 2, "vm_class": "vmclass-h100-80c",
          "labels": {"gpupool.vcf/workload": "inference"}, "taints": [TAINT]}]


@pytest.fixture
def proxy(k8s_rig):
    with k8s_rig.fault_proxy() as p:
        yield p


def _clusters(api):
    return dynamic.DynamicClient(api).resources.get(api_version=f"{CAPI}/v1beta2", kind="Cluster")


def _create(api, ns, name):
    cpu = {"class": "node-pool", "name": "cpu", "replicas": 2,
           "variables": {"overrides": [{"name": "vmClass", "value": "best-effort-large"}]}}
    _clusters(api).create(namespace=ns, body={
        "apiVersion": f"{CAPI}/v1beta2", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"topology": {"classRef": {"name": "builtin-generic-v3.4.0", "namespace": "vmware-system-vks-public"},
                              "version": "v1.35.5+vmware.1-vkr.1", "controlPlane": {"replicas": 1},
                              "workers": {"machineDeployments": [cpu]},
                              "variables": [{"name": "vmClass", "value": "best-effort-large"},
                                            {"name": "storageClass", "value": "gold"}]}}})


def _cluster(api, ns, name):
    obj = _clusters(api).get(namespace=ns, name=name).to_dict()
    return obj, {m["name"]: m for m in obj["spec"]["topology"]["workers"]["machineDeployments"]}


def _path(ns, name):
    return rf"^/apis/{CAPI}/v1beta2/namespaces/{ns}/clusters/{name}$"


def args(ns, name, **kw):
    a = {"namespace": ns, "cluster_name": name, "node_pools": POOLS, "request_timeout": 2}
    a.update(kw)
    return a


def run(module_args, env, **kw):
    start = time.monotonic()
    res, play = run_module(MODULE, module_args, env=env, **kw)
    return res, play, time.monotonic() - start


def no_traceback(res, play):
    assert "Traceback" not in json.dumps(res) and "MODULE FAILURE" not in json.dumps(res), res
    assert "Traceback" not in play.stdout


def converged(env, module_args, api, ns, name):
    """A plain rerun (no fault) leaves the pool as asked and the other pool as it was; then nothing to do."""
    res = run_module(MODULE, module_args, env=env)[0]
    assert not res.get("failed"), res
    obj, mds = _cluster(api, ns, name)
    assert mds["inference"]["replicas"] == 2 and mds["cpu"]["replicas"] == 2
    assert obj["spec"]["topology"]["controlPlane"]["replicas"] == 1
    again = run_module(MODULE, module_args, env=env)[0]
    assert again.get("changed") is False, again
    return res


def test_503_twice_on_the_cluster_read_is_survived(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "c503")
    proxy.fail(_path(k8s_namespace, "c503"), status=503, times=2, method="GET")  # fault: the first two reads
    res = run(args(k8s_namespace, "c503"), proxy.env)[0]
    assert res.get("changed") is True and not res.get("failed"), res
    assert proxy.count("GET", _path(k8s_namespace, "c503")) == 3
    assert [r[2] for r in proxy.requests if r[0] == "GET" and r[1].endswith("/c503")][:3] == \
        ["fail 503", "fail 503", "forward"]
    assert "inference" in _cluster(k8s_api, k8s_namespace, "c503")[1]
    converged(proxy.env, args(k8s_namespace, "c503"), k8s_api, k8s_namespace, "c503")


def forget_discovery(kubeconfig):
    """The kubernetes client keeps API discovery per server URL in a file of the temp folder
    (``osrcp-<md5 of the URL>.json``); a proxy port an earlier run used would skip discovery."""
    server = yaml.safe_load(pathlib.Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    name = "osrcp-%s.json" % hashlib.md5(server.encode("utf-8"), usedforsecurity=False).hexdigest()
    path = pathlib.Path(tempfile.gettempdir(), name)
    path.unlink(missing_ok=True)
    return path


def test_503_twice_during_api_discovery_is_survived(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "disco")
    # fault: the first requests of the run - API discovery of a server the client has not seen
    cache = forget_discovery(proxy.kubeconfig)
    proxy.fail(r"^/apis$", status=503, times=2)
    res = run(args(k8s_namespace, "disco"), proxy.env)[0]
    assert res.get("changed") is True, res
    assert proxy.count("GET", r"^/apis$") >= 3
    assert cache.exists()  # the run wrote the cache this test removed: the name is the client's


def test_stalled_cluster_read_fails_within_the_timeout_then_rerun_converges(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "stall")
    rv = _cluster(k8s_api, k8s_namespace, "stall")[0]["metadata"]["resourceVersion"]
    proxy.stall(_path(k8s_namespace, "stall"), seconds=120, times=100, method="GET")  # fault: every read hangs
    res, play, took = run(args(k8s_namespace, "stall"), proxy.env)
    assert res.get("failed"), res
    no_traceback(res, play)
    assert res["msg"] == ("Unable to read Cluster %s/stall: the API server at %s did not answer within 2 s (3 attempts)"
                          % (k8s_namespace, proxy.url)), res["msg"]
    # three attempts of 2 s, backoff under 1.5 s, and ansible-playbook's own start (about 2 s here)
    assert took < 20, took
    assert proxy.count("GET", _path(k8s_namespace, "stall")) == 3
    assert _cluster(k8s_api, k8s_namespace, "stall")[0]["metadata"]["resourceVersion"] == rv
    proxy.clear()
    converged(proxy.env, args(k8s_namespace, "stall"), k8s_api, k8s_namespace, "stall")


def test_5xx_on_the_write_fails_clearly_nothing_half_written_rerun_converges(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "wr")
    before, mds_before = _cluster(k8s_api, k8s_namespace, "wr")
    proxy.fail(_path(k8s_namespace, "wr"), status=500, times=100, method="PUT")  # fault: at the write, every time
    res, play, took = run(args(k8s_namespace, "wr"), proxy.env)
    assert res.get("failed") and took < 30, res
    no_traceback(res, play)
    assert res["msg"].startswith("Unable to update the node pools of Cluster %s/wr: the API server at %s answered "
                                 "500 Internal Server Error three times (injected fault" % (k8s_namespace, proxy.url))
    assert "the Cluster was not changed" in res["msg"] and "a rerun converges" in res["msg"], res["msg"]
    assert proxy.count("PUT", _path(k8s_namespace, "wr")) == 3
    after, mds_after = _cluster(k8s_api, k8s_namespace, "wr")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] and mds_after == mds_before
    proxy.clear()
    converged(proxy.env, args(k8s_namespace, "wr"), k8s_api, k8s_namespace, "wr")


def test_one_5xx_on_the_write_is_survived(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "wr1")
    proxy.fail(_path(k8s_namespace, "wr1"), status=503, times=1, method="PUT")  # fault: the first write only
    res = run(args(k8s_namespace, "wr1"), proxy.env)[0]
    assert res.get("changed") is True, res
    assert proxy.count("PUT", _path(k8s_namespace, "wr1")) == 2
    converged(proxy.env, args(k8s_namespace, "wr1"), k8s_api, k8s_namespace, "wr1")


def test_write_stored_but_answer_lost_is_not_applied_twice(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "lost")
    # fault: the write reaches the API server and is stored, the client gets a 503 instead of the answer
    proxy.fail(_path(k8s_namespace, "lost"), status=503, times=1, method="PUT", forward=True)
    res = run(args(k8s_namespace, "lost"), proxy.env)[0]
    assert res.get("changed") is True and not res.get("failed"), res
    # the repeat carried the old resourceVersion: 409, re-read, nothing left to do
    assert proxy.count("PUT", _path(k8s_namespace, "lost")) == 2
    mds = _cluster(k8s_api, k8s_namespace, "lost")[1]
    assert list(mds) == ["cpu", "inference"]
    converged(proxy.env, args(k8s_namespace, "lost"), k8s_api, k8s_namespace, "lost")


def test_dropped_connection_on_the_read_is_survived(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "reset")
    proxy.reset(_path(k8s_namespace, "reset"), times=1, method="GET")  # fault: the first read's connection drops
    res = run(args(k8s_namespace, "reset"), proxy.env)[0]
    assert res.get("changed") is True, res


def _kubeconfig_pointing_at(src, dest, server):
    cfg = yaml.safe_load(src.read_text())
    cfg["clusters"][0]["cluster"]["server"] = server
    dest.write_text(yaml.safe_dump(cfg))
    dest.chmod(0o600)
    return dest


def _bad_kubeconfig(case, rig, kubeconfig, module_args):
    """Write the kubeconfig of one bad case; returns the text the message must hold."""
    if case == "garbage":
        kubeconfig.write_text("{{{ this is not a kubeconfig")
    elif case == "no-context":
        kubeconfig.write_text(rig.kubeconfig.read_text())
        module_args["context"] = "nowhere"
        return "cannot use kubeconfig %s (context nowhere)" % kubeconfig
    elif case == "unreachable":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        _kubeconfig_pointing_at(rig.kubeconfig, kubeconfig, f"https://127.0.0.1:{port}")
        return "connection refused (3 attempts)"
    elif case == "wrong-ca":
        cfg = yaml.safe_load(rig.kubeconfig.read_text())
        other = (rig.data_dir / "pki" / "apiserver.crt").read_bytes()  # not the CA that signed it
        cfg["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(other).decode()
        kubeconfig.write_text(yaml.safe_dump(cfg))
        return "TLS with the API server"
    return "cannot use kubeconfig %s" % kubeconfig


def test_bad_kubeconfig_is_a_clear_error(k8s_rig, k8s_api, k8s_namespace, tmp_path):
    _create(k8s_api, k8s_namespace, "cfg")
    rv = _cluster(k8s_api, k8s_namespace, "cfg")[0]["metadata"]["resourceVersion"]
    for case in ("missing", "garbage", "no-context", "unreachable", "wrong-ca"):
        module_args = args(k8s_namespace, "cfg")
        kubeconfig = tmp_path / ("kubeconfig-" + case)
        want = _bad_kubeconfig(case, k8s_rig, kubeconfig, module_args)
        module_args["kubeconfig"] = str(kubeconfig)
        res, play, took = run(module_args, k8s_rig.env)
        assert res.get("failed"), (case, res)
        no_traceback(res, play)
        assert want in res["msg"] and "Cluster %s/cfg" % k8s_namespace in res["msg"], (case, res["msg"])
        assert took < 20, (case, took)
    assert _cluster(k8s_api, k8s_namespace, "cfg")[0]["metadata"]["resourceVersion"] == rv


def test_request_timeout_must_be_positive(k8s_rig, k8s_namespace, proxy):
    for value in (0, -1):
        res = run(args(k8s_namespace, "any", request_timeout=value), proxy.env)[0]
        assert res.get("failed") and "request_timeout" in res["msg"], res
    assert proxy.requests == []


def test_role_survives_503_on_the_cluster_read(k8s_rig, k8s_api, k8s_namespace, proxy):
    _create(k8s_api, k8s_namespace, "role")
    play = [{"hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/gpupool.vcf.k8s": {"kubeconfig": str(proxy.kubeconfig), "request_timeout": 5}},
             "roles": [{"role": "gpupool.vcf.vks_gpu_node_pools",
                        "vks_gpu_node_pools_cluster_name": "role",
                        "vks_gpu_node_pools_namespace": k8s_namespace,
                        "vks_gpu_node_pools_node_pools": [{"name": "inference", "replicas": 2,
                                                           "vm_class": "vmclass-h100-80c"}]}]}]
    task = "gpupool.vcf.vks_gpu_node_pools : Node pools of VKS cluster %s/role" % k8s_namespace
    proxy.fail(_path(k8s_namespace, "role"), status=503, times=2, method="GET")  # fault: during the role's task
    r = run_playbook(play)
    assert r.rc == 0, r.stdout[-3000:]
    assert r.result(task)["changed"] is True
    again = run_playbook(play)
    assert again.rc == 0 and again.result(task)["changed"] is False


def test_audit_survives_503_twice_and_names_the_cluster_when_it_persists(k8s_rig, k8s_api, proxy, tmp_path):
    vks = next(iter(chain.derived()["vks"]["clusters"].values()))
    ns, name = vks["namespace"], vks["name"]
    core = client.CoreV1Api(k8s_api)
    if ns not in [n.metadata.name for n in core.list_namespace().items]:
        core.create_namespace({"metadata": {"name": ns}})
    if name not in [c["metadata"]["name"] for c in _clusters(k8s_api).get(namespace=ns).to_dict().get("items") or []]:
        _create(k8s_api, ns, name)
    audit = {"design_file": str(chain.DESIGN), "links": ["vks"], "supervisor_kubeconfig": str(proxy.kubeconfig),
             "request_timeout": 2}
    proxy.fail(_path(ns, name), status=503, times=2, method="GET")  # fault: the first two reads of the Cluster
    res = run_module("gpupool.vcf.gpu_pool_audit", audit, env=proxy.env)[0]
    assert not res.get("failed") and res["audited"] == ["vks"], res
    proxy.fail(_path(ns, name), status=503, times=100, method="GET")  # fault: every read of the Cluster
    res, play = run_module("gpupool.vcf.gpu_pool_audit", audit, env=proxy.env)
    assert res.get("failed"), res
    no_traceback(res, play)
    assert res["msg"].startswith("Unable to audit link vks: could not read VKS cluster %s/%s: the API server at %s "
                                 "answered 503 Service Unavailable three times" % (ns, name, proxy.url)), res["msg"]
    proxy.clear()
    res = run_module("gpupool.vcf.gpu_pool_audit", audit, env=proxy.env)[0]
    assert not res.get("failed") and res["audited"] == ["vks"], res
    bad = dict(audit, supervisor_kubeconfig=str(tmp_path / "missing"))
    res, play = run_module("gpupool.vcf.gpu_pool_audit", bad, env=proxy.env)
    assert res.get("failed") and "cannot use kubeconfig %s" % (tmp_path / "missing") in res["msg"], res
    no_traceback(res, play)
