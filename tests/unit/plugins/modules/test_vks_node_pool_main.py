"""vks_node_pool through main(): the arguments parsed by AnsibleModule (the node pools' and taints'
suboptions, the Kubernetes connection options), the Supervisor's Cluster API and the guest's nodes
replaced by fakes. Check mode is a dry-run PUT that predicts the real run, a rerun is idempotent, --diff
shows the node pools and the record before and after, bad input is refused before the Supervisor is
reached, a failed PUT names the Cluster and says what it left."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.modules import vks_node_pool
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import K8S, run_main
from tests.unit.plugins.modules.test_runner_pinning_pools_gpu import CPU, GPU, FakeCluster, cluster

API_KEY = "k8s-token-never-shown"
LABELS = {"gpupool.vcf/pool": "inference"}
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# the ClusterClass: a machineDeployment class, a vmClass variable and one for the node pools' labels
LABELLED_CLASS = {"spec": {"workers": {"machineDeployments": [{"class": "node-pool"}]},
                           "variables": [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
                                         {"name": "nodePoolLabels", "schema": {"openAPIV3Schema": {
                                             "type": "object", "additionalProperties": {"type": "string"}}}}]}}


class Supervisor(FakeCluster):
    """The fake Cluster; ``opened`` counts the connections the module made to the Supervisor."""

    opened = 0

    def __init__(self, params, namespace, name):
        Supervisor.opened += 1
        FakeCluster.__init__(self, params, namespace, name)

    def read_class(self, version, ref):
        return LABELLED_CLASS


class Nodes:
    """The guest cluster's nodes: ``nodes`` is what list() answers."""

    nodes = []

    def __init__(self, params):
        pass

    def list(self):
        return [dict(n) for n in Nodes.nodes]


def node(name, vm_class, ready=True):
    return dict(metadata=dict(name=name, labels=dict(LABELS, **{INSTANCE_TYPE: vm_class})),
                spec={}, status=dict(conditions=[dict(type="Ready", status="True" if ready else "False")]))


@pytest.fixture
def vks(monkeypatch):
    FakeCluster.obj, FakeCluster.puts, FakeCluster.errors = cluster(CPU), [], []
    Supervisor.opened, Nodes.nodes = 0, []
    monkeypatch.setattr(vks_node_pool, "VksClusterApi", Supervisor)
    monkeypatch.setattr(vks_node_pool, "GuestNodes", Nodes)
    return FakeCluster


def run(*node_pools, **params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    args = dict(K8S, api_key=API_KEY, cluster_name="gpu-workloads", namespace="gpu-platform", node_pools=list(node_pools))
    args.update(params)
    return run_main(vks_node_pool, args, **flags)


def pools_of(obj):
    return [md["name"] for md in obj["spec"]["topology"]["workers"]["machineDeployments"]]


def test_check_mode_is_a_dry_run_that_predicts_the_real_run_and_the_rerun_changes_nothing(vks):
    check = run(GPU, check_mode=True, diff=True)
    assert vks.puts == [True] and pools_of(vks.obj) == ["cpu"]  # the Supervisor validated it, nothing stored
    real = run(GPU, diff=True)
    assert real == check and real["changed"] is True and vks.puts == [True, False]
    assert pools_of(vks.obj) == ["cpu", "inference"] and real["owned"] == ["inference"] and real["kept_foreign"] == []
    assert real["diff"]["before"] == {"machineDeployments": [CPU], "owned": []}
    assert real["diff"]["after"] == {"machineDeployments": real["machine_deployments"], "owned": ["inference"]}
    assert real["api_version"] == "cluster.x-k8s.io/v1beta2"
    assert missing_keys(real, vks_node_pool, "success", "changed and diff mode") == []
    again = run(GPU, diff=True)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"] and vks.puts == [True, False]
    assert again["machine_deployments"] == real["machine_deployments"]
    assert shows([check, real, again], API_KEY) == []


def test_a_replica_change_is_one_put_and_the_diff_shows_it(vks):
    run(GPU)
    check = run(dict(GPU, replicas=3), check_mode=True, diff=True)
    assert vks.puts == [False, True]
    real = run(dict(GPU, replicas=3), diff=True)
    assert real == check and vks.puts == [False, True, False]
    replicas = [dict((md["name"], md.get("replicas")) for md in real["diff"][side]["machineDeployments"])
                for side in ("before", "after")]
    assert replicas == [{"cpu": 2, "inference": 1}, {"cpu": 2, "inference": 3}]


def test_wait_rollout_reports_the_pools_and_the_classes_in_use(vks):
    pool = dict(GPU, labels=LABELS)
    Nodes.nodes = [node("inference-1", GPU["vm_class"])]
    check = run(pool, check_mode=True, wait_rollout=True, rollout_poll=1)
    real = run(pool, wait_rollout=True, rollout_poll=1)
    assert missing_keys(real, vks_node_pool, "success", "with wait_rollout") == []
    assert dict(real, rollout_seconds=None) == dict(check, rollout_seconds=None)  # check mode waits for nothing
    assert real["rollout"] == [dict(pool="inference", vm_class=GPU["vm_class"], replicas=1, ready=1, left=[], done=True)]
    assert real["classes_in_use"] == [GPU["vm_class"]]


def test_bad_input_is_refused_before_the_supervisor_is_reached(vks):
    res = run(GPU, dict(GPU))
    assert res["failed"] is True and "node_pools[1].name 'inference' is given twice" in res["msg"]
    res = run(dict(GPU, replicas=-1))
    assert res["failed"] is True and "node_pools[0].replicas" in res["msg"]
    res = run(purge=True)
    assert res["failed"] is True and "node_pools is empty and purge is true" in res["msg"]
    res = run(dict(GPU, taints=[dict(key="nvidia.com/gpu", effect="Sometimes")]))
    assert res["failed"] is True and "value of effect must be one of: " in res["msg"]
    res = run(dict(GPU, vm_class="vmclass-h100-80c"), wait_rollout=True)
    assert res["msg"] == "wait_rollout needs the labels of node pool(s) inference to tell their nodes; nothing was changed"
    res = run(GPU, request_timeout=0)
    assert res["failed"] is True and "request_timeout" in res["msg"]
    assert Supervisor.opened == 0 and vks.puts == []
    assert shows(res, API_KEY) == []


def test_a_failed_put_names_the_cluster_and_what_it_left(vks):
    vks.errors = [K8sError("the API server answered 500 three times", status=500, attempts=3)]
    res = run(GPU)
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == ("Unable to update the node pools of Cluster gpu-platform/gpu-workloads: the API server "
                          "answered 500 three times; the Cluster was not changed (its node pools are as before); "
                          "a rerun converges")
    assert res["machine_deployments"] == [CPU] and pools_of(vks.obj) == ["cpu"]
    vks.errors = [K8sError("timed out", kind="timeout", attempts=3)]
    assert "its answer was lost" in run(GPU)["msg"]
    vks.obj = None
    res = run(GPU)
    assert res["msg"] == "Unable to read Cluster gpu-platform/gpu-workloads: not found"
    assert shows(res, API_KEY) == []
