"""gpu_capacity's guest part on the Kubernetes rig (real scheduler, kwok nodes, the real Kueue
controller) next to the vSphere simulator: pending GPU pods per pool, by node selector and by
required node affinity, and the Kueue admission wait per LocalQueue and ClusterQueue."""
import time
import uuid

from k8s_fixtures import wait_for
from kubernetes import client, dynamic

from tests.lib.ansible_run import run_module
from tests.lib.kueue_rig import gpu_queue, pool_job

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [{"name": "gpu-h100", "hosts": [
        {"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": DRIVER}]}],
    "vms": [{"name": "node-a", "host": "esx-h100-01", "vgpu": ["nvidia_h100-80c"]},
            {"name": "node-b", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"]}],
}
GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
KV = "kueue.x-k8s.io/v1beta2"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def pod(name, limits, selector=None, affinity_pool=None):
    spec = {"restartPolicy": "Never", "tolerations": [GPU_TOLERATION],
            "containers": [{"name": "main", "image": "sim/gpu:1", "resources": {"limits": limits}}]}
    if selector:
        spec["nodeSelector"] = {"gpupool.vcf/pool": selector}
    if affinity_pool:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpupool.vcf/pool", "operator": "In", "values": [affinity_pool]}]}]}}}
    return {"metadata": {"name": name}, "spec": spec}


def unschedulable(core, ns, names):
    def check():
        done = []
        for p in core.list_namespaced_pod(ns).items:
            conds = p.status.conditions or []
            if p.metadata.name in names and any(c.type == "PodScheduled" and c.status == "False" for c in conds):
                done.append(p.metadata.name)
        return sorted(done) == sorted(names)
    return check


def test_pending_gpu_pods_and_kueue_waits(vsphere_env, k8s_rig, k8s_api, k8s_namespace):
    assert k8s_rig.kueue, "the rig runs Kueue (GPUPOOL_K8S_KUEUE=0 turns it off)"
    core = client.CoreV1Api(k8s_api)
    batch = client.BatchV1Api(k8s_api)
    dyn = dynamic.DynamicClient(k8s_api)
    uid = uuid.uuid4().hex[:6]
    # pool labels no node carries: these pods stay Pending, and no other test counts under them
    wide, mig = "capacity-wide-%s" % uid, "capacity-mig-%s" % uid
    core.create_namespaced_pod(k8s_namespace, pod("wide-1", {GPU: "2"}, selector=wide))
    core.create_namespaced_pod(k8s_namespace, pod("wide-2", {GPU: "3"}, selector=wide))
    core.create_namespaced_pod(k8s_namespace, pod("mig-1", {MIG: "8"}, affinity_pool=mig))
    core.create_namespaced_pod(k8s_namespace, pod("cpu-only", {"cpu": "1"}, selector=wide))  # no GPU: not counted
    wait_for("the scheduler to give up on the pods", unschedulable(
        core, k8s_namespace, ["wide-1", "wide-2", "mig-1", "cpu-only"]))

    flavor, cq = "capacity-%s" % uid, "capacity-%s" % uid
    with gpu_queue(k8s_api, k8s_namespace, KV, flavor, cq, "gpu-h100", GPU, 1, GPU_TOLERATION):
        for name in ("train-a", "train-b"):
            batch.create_namespaced_job(k8s_namespace, pool_job(name, "gpus", {GPU: "1"}))
            time.sleep(1.1)  # creation timestamps have 1 s resolution: train-a queues first

        def workloads():
            items = dyn.resources.get(api_version=KV, kind="Workload").get(namespace=k8s_namespace).to_dict()["items"]
            admitted = [w for w in items if any(c["type"] == "Admitted" and c["status"] == "True"
                                                for c in (w.get("status") or {}).get("conditions") or [])]
            return len(items) == 2 and len(admitted) == 1
        wait_for("two Workloads, one admitted (quota of 1 GPU)", workloads)
        started = time.time()

        res = run_module("gpupool.vcf.gpu_capacity", {"kubeconfig": str(k8s_rig.kubeconfig)}, env=vsphere_env)[0]
        assert not res.get("failed"), res.get("msg")
        assert res["spare"]["gpu-h100"]["ok"] is True  # node-a and node-b: one card each, one free card each
        pending = dict((e["pool"], e) for e in res["guest"]["pending_pods"])
        assert pending[wide]["pods"] == 2 and pending[wide]["gpus"] == {GPU: 5}
        assert pending[wide]["reasons"] == {"Unschedulable": 2}
        assert pending[mig]["pods"] == 1 and pending[mig]["gpus"] == {MIG: 8}
        assert 0 <= pending[wide]["oldest_wait_s"] <= time.time() - started + 120

        kueue = res["guest"]["kueue"]
        [lq] = [q for q in kueue["local_queues"] if q["queue"] == "%s/gpus" % k8s_namespace]
        assert lq["cluster_queue"] == cq
        assert (lq["pending"], lq["admitted"]) == (1, 1)
        assert lq["admission_wait"]["count"] == 1 and 0 <= lq["admission_wait"]["max_s"] <= 60
        assert lq["oldest_pending_s"] is not None and lq["oldest_pending_s"] >= 1  # train-b waits since its creation
        [cqe] = [q for q in kueue["cluster_queues"] if q["queue"] == cq]
        assert (cqe["pending"], cqe["admitted"]) == (1, 1)
        assert "| %s | 2 | %s: 5 |" % (wide, GPU) in res["markdown"]
        assert "| %s | 1 |" % cq in res["markdown"]


def test_unreachable_guest_cluster_fails_clearly(vsphere_env, tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    res = run_module("gpupool.vcf.gpu_capacity", {"kubeconfig": str(bad)}, env=vsphere_env)[0]
    assert res.get("failed") and res["msg"].startswith("Unable to use kubeconfig %s" % bad), res["msg"]
