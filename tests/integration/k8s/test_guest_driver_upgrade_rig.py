"""A guest driver upgrade of a pool of three GPU nodes carrying an inference Deployment (3 replicas, one GPU
each) with a PodDisruptionBudget (maxUnavailable 1), on the rig: the gpu_operator role installs the real GPU
Operator chart, then changes driver.version; the upgrade controller double (tests/sim/k8s/driver_upgrade_double.py:
the rig runs no operator) moves the nodes through nvidia.com/gpu-driver-upgrade-state as the ClusterPolicy's
upgradePolicy allows and evicts through the real Eviction API, so the apiserver holds the PDB. The role waits for
every node and reports per-node step times. A watcher samples the pods and the nodes' states on its own: at most
one node upgrades at a time, no inference pod stays Pending longer than the pool's bound, every node runs the new
driver and is schedulable again. Check mode names the nodes and changes nothing; a node the double holds in
one state makes the role fail naming it."""
from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from k8s_fixtures import wait_for
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from tests.lib.ansible_run import run_playbook
from tests.lib.paths import gpu_operator_chart, gpu_operator_chart_missing

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "sim" / "k8s"))
import driver_upgrade_double  # noqa: E402

CHART = gpu_operator_chart() or ROOT.parent / "shared" / "charts" / "gpu-operator"
U = uuid.uuid4().hex[:5]
NS = f"gpu-op-upg-{U}"
APPS = f"serving-upg-{U}"
POOL = f"upg-{U}"
NODES = [f"{POOL}-{i}" for i in range(3)]
SELECTOR = {"gpupool.vcf/pool": POOL}
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
STATE = driver_upgrade_double.STATE
BUSY = driver_upgrade_double.BUSY
STEP = 1.0  # seconds the double keeps each state at least
# the pool's bound on a pod's Pending time (its slo.wait_seconds in a design): an evicted replica waits for its
# node to come back - pod-restart, validation and uncordon, STEP each, plus the scheduler - far below it
POOL_BOUND_S = 30.0
OLD, NEW, NEWER = "550.90.07", "550.127.05", "550.144.03"


def play(version, step_timeout=60):
    run_vars = {"gpu_operator_namespace": NS, "gpu_operator_vgpu_guest": True,
                "gpu_operator_driver_repository": "registry.example.com/nvaie",
                "gpu_operator_driver_image": "vgpu-guest-driver", "gpu_operator_driver_version": version,
                "gpu_operator_licensing_secret_name": "licensing-config", "gpu_operator_mig_strategy": "single",
                "gpu_operator_chart_ref": str(CHART), "gpu_operator_upgrade_crd": False,
                # as derive() gives it for guest.driver_upgrade {max_parallel: 1, step_timeout_s: ...}
                "gpu_operator_driver_upgrade": {"max_parallel": 1, "drain_timeout_s": 120, "honour_pdbs": True,
                                                "step_timeout_s": step_timeout},
                "gpu_operator_driver_upgrade_node_selector": SELECTOR,
                "gpu_operator_driver_upgrade_poll_interval": 0.25,
                "gpu_operator_extra_values": {"node-feature-discovery": {"master": {"serviceAccount": {
                    "name": f"nfd-master-{U}"}}}}}
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "gpu_operator", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_operator"},
         "vars": run_vars}]}]


def failed(run):
    return [res.get("msg") for _name, res in run.tasks if res.get("failed")]


def task(run, name):
    return next(res for n, res in run.tasks if n.endswith(name))


class Watcher:
    """Samples the inference pods (Pending: no node yet) and the pool's upgrade states every 0.2 s."""

    def __init__(self, core):
        self.core, self.stop = core, threading.Event()
        self.pending_since, self.pending = {}, {}  # pod: first seen Pending; pod: seconds Pending
        self.max_busy, self.busy_seen = 0, []
        self.transitions = {}  # node: [(state, first seen)]
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                pods = self.core.list_namespaced_pod(APPS, label_selector="app=llm").items
                nodes = self.core.list_node(label_selector="gpupool.vcf/pool=%s" % POOL).items
            except ApiException:
                continue
            for pod in pods:
                name = pod.metadata.name
                if pod.metadata.deletion_timestamp:
                    continue
                if not pod.spec.node_name:
                    self.pending_since.setdefault(name, now)
                    self.pending[name] = now - self.pending_since[name]
                elif name in self.pending_since:
                    self.pending[name] = now - self.pending_since.pop(name)
            for n in nodes:
                seen = self.transitions.setdefault(n.metadata.name, [])
                state = (n.metadata.labels or {}).get(STATE, "")
                if not seen or seen[-1][0] != state:
                    seen.append((state, now))
            busy = sorted(n.metadata.name for n in nodes if (n.metadata.labels or {}).get(STATE) in BUSY)
            self.max_busy = max(self.max_busy, len(busy))
            if busy and busy not in self.busy_seen:
                self.busy_seen.append(busy)
            time.sleep(0.2)

    def steps(self, node):
        """[(state, seconds)] of the node's states from upgrade-required to upgrade-done, as sampled."""
        seen = self.transitions.get(node, [])
        start = next(i for i, (state, _t) in enumerate(seen) if state == "upgrade-required")
        return [(state, round(seen[i + 1][1] - t, 1)) for i, (state, t) in enumerate(seen[start:-1], start)]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)


def make_node(core, name):
    capacity = {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"}
    labels = dict(SELECTOR, **{"kubernetes.io/hostname": name, "type": "kwok", "nvidia.com/gpu.present": "true"})
    metadata = {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels}
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": metadata,
                      "spec": {"taints": [TAINT]}, "status": {"capacity": capacity, "allocatable": capacity}})


def running_replicas(core):
    pods = core.list_namespaced_pod(APPS, label_selector="app=llm").items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


@pytest.fixture(scope="module")
def pool(k8s_rig, k8s_api, tmp_path_factory):
    if not (CHART / "Chart.yaml").is_file():
        pytest.fail(gpu_operator_chart_missing(), pytrace=False)
    core, apps, policy = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api), client.PolicyV1Api(k8s_api)
    logs = tmp_path_factory.mktemp("driver-upgrade")
    for name in NODES:
        make_node(core, name)
    try:
        wait_for("the pool's nodes Ready", lambda: all(any(c.type == "Ready" and c.status == "True" for c in (
            core.read_node(n).status.conditions or [])) for n in NODES), timeout=60)
        installed = run_playbook(play(OLD), env=k8s_rig.env)
        assert installed.rc == 0, (failed(installed), installed.stdout[-2000:])
        core.create_namespace({"metadata": {"name": APPS}})
        gpu = {"name": "llm", "image": "registry.example.com/llm:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        apps.create_namespaced_deployment(APPS, {"metadata": {"name": "llm"}, "spec": {
            "replicas": 3, "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": {"labels": {"app": "llm"}}, "spec": {
                "containers": [gpu], "nodeSelector": SELECTOR,
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}})
        policy.create_namespaced_pod_disruption_budget(APPS, {"metadata": {"name": "llm"}, "spec": {
            "maxUnavailable": 1, "selector": {"matchLabels": {"app": "llm"}}}})
        wait_for("3 inference replicas Running", lambda: len(running_replicas(core)) == 3, timeout=60)
        wait_for("the PDB allowing one disruption", lambda: (policy.read_namespaced_pod_disruption_budget(
            "llm", APPS).status.disruptions_allowed or 0) == 1, timeout=60)
        yield {"core": core, "logs": logs}
    finally:
        k8s_rig.helm("uninstall", "gpu-operator", "--namespace", NS, "--no-hooks", check=False)
        for name in (NS, APPS):
            try:
                core.delete_namespace(name)
            except ApiException:
                pass
        for name in NODES:
            try:
                core.delete_node(name)
            except ApiException:
                pass


def test_guest_driver_upgrade_rolls_one_node_at_a_time_under_the_pdb_and_the_pending_bound(pool, k8s_rig, k8s_api):
    core = pool["core"]
    with driver_upgrade_double.running(k8s_rig.kubeconfig, pool["logs"] / "double.log",
                                       node_selector="gpupool.vcf/pool=%s" % POOL, step=STEP):
        wait_for("the double taking the nodes as upgraded to %s" % OLD, lambda: all(
            (core.read_node(n).metadata.labels or {}).get(STATE) == "upgrade-done" for n in NODES), timeout=30)
        started = time.monotonic()
        with Watcher(core) as watch:
            run = run_playbook(play(NEW), env=k8s_rig.env)
            wall = time.monotonic() - started
            wait_for("3 replicas Running again", lambda: len(running_replicas(core)) == 3, timeout=30)
    assert run.rc == 0, (failed(run), (pool["logs"] / "double.log").read_text()[-3000:], run.stdout[-2000:])
    spec = dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get(
        name="cluster-policy").to_dict()["spec"]
    assert spec["driver"]["version"] == NEW
    up = spec["driver"]["upgradePolicy"]
    assert (up["autoUpgrade"], up["maxParallelUpgrades"], up["maxUnavailable"]) == (True, 1, 1)
    assert (up["drain"]["enable"], up["drain"]["force"], up["podDeletion"]["force"]) == (True, False, False)
    assert up["drain"]["timeoutSeconds"] == 120
    result = task(run, "Guest driver upgrade, node by node")
    assert result["states"] == {n: "upgrade-done" for n in NODES}
    for name in NODES:
        node = core.read_node(name)
        assert node.metadata.annotations[driver_upgrade_double.DRIVER] == NEW
        assert not node.spec.unschedulable
        # every state of NVIDIA's flow, in its order, as the watcher sampled it
        states = [st for st, _s in watch.steps(name)]
        assert states == ["upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required",
                          "drain-required", "pod-restart-required", "validation-required", "uncordon-required"], (
            name, watch.transitions[name])
    # the watcher's own samples: one node at a time, each in its turn, nobody Pending past the bound
    assert watch.max_busy == 1, watch.busy_seen
    order = [b[0] for b in watch.busy_seen]
    assert sorted(order) == NODES
    # the role saw the nodes the controller had not finished before its wait began, in the same order, and
    # timed each state it saw whole as the watcher did (both sample every 0.2-0.25 s, the double every 0.3 s)
    assert result["order"] == order[len(order) - len(result["order"]):]
    for name in result["order"]:
        seen = dict(watch.steps(name))
        for step in result["steps"][name][1:-1]:
            assert abs(step["seconds"] - seen[step["state"]]) < 1.0, (name, step, seen)
    assert len(watch.pending) >= 3, watch.pending  # each node's replica was evicted and waited for a GPU
    longest = max(watch.pending.values())
    assert longest < POOL_BOUND_S, watch.pending
    print("\nguest driver upgrade %s -> %s, 3 nodes, maxParallelUpgrades 1, double step %.1f s, role wall %.1f s"
          % (OLD, NEW, STEP, wall))
    for name in order:
        steps = watch.steps(name)
        print("  %s: %s (node %.1f s)" % (name, ", ".join("%s %.1f s" % st for st in steps),
                                          sum(sec for _st, sec in steps)))
    print("  role's wait saw %s; its times: %s" % (result["order"], result["node_seconds"]))
    print("  longest Pending of an inference pod: %.1f s (bound %.0f s); per pod: %s" % (
        longest, POOL_BOUND_S, ", ".join("%.1f" % v for v in sorted(watch.pending.values()))))


def test_guest_driver_upgrade_check_mode_then_a_stuck_node_fails_the_role_naming_it(pool, k8s_rig, k8s_api):
    core = pool["core"]
    stuck = NODES[1]
    with driver_upgrade_double.running(k8s_rig.kubeconfig, pool["logs"] / "double-stuck.log",
                                       node_selector="gpupool.vcf/pool=%s" % POOL, step=0.5, stick=[stuck],
                                       stick_state="cordon-required"):
        wait_for("the pool at rest", lambda: all((core.read_node(n).metadata.labels or {}).get(STATE) in (
            "upgrade-done", "") for n in NODES), timeout=30)
        # check mode: says which nodes the upgrade would take, changes nothing, waits for nothing
        checked = run_playbook(play(NEWER, step_timeout=8), env=k8s_rig.env, check=True)
        assert checked.rc == 0, (failed(checked), checked.stdout[-2000:])
        said = task(checked, "What the driver upgrade would change")["msg"]
        assert "from %s to %s" % (NEW, NEWER) in said and "1 at a time" in said
        assert all(n in said for n in NODES), said
        assert dynamic.DynamicClient(k8s_api).resources.get(api_version="nvidia.com/v1", kind="ClusterPolicy").get(
            name="cluster-policy").to_dict()["spec"]["driver"]["version"] == NEW
        assert all((core.read_node(n).metadata.labels or {}).get(STATE) == "upgrade-done" for n in NODES)
        started = time.monotonic()
        run = run_playbook(play(NEWER, step_timeout=8), env=k8s_rig.env)
        wall = time.monotonic() - started
    assert run.rc != 0
    msg = " ".join(m for m in failed(run) if m)
    assert "node %s has been cordon-required for" % stuck in msg and "(bound 8 s)" in msg, msg
    assert NEWER in msg and STATE in msg
    others = [n for n in NODES if n != stuck and "node %s" % n in msg]
    assert others == [], msg
    print("\nstuck node %s named after %.1f s: %s" % (stuck, wall, msg[:200]))
