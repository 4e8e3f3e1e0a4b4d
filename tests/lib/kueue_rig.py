"""What the Kueue tests on the Kubernetes rig share: the rig's nodes (a gang-scheduled training pool of
4-GPU nodes and a system node), a rig started with the real Kueue controller, the gpu_scheduling_policy
inputs derive() makes of a design, the play that applies them as site.yml does, and a Job submitted
suspended to a LocalQueue as Kueue's webhook would have labelled it; for the rig of the k8s folder, a one-pod
Job and a queue (ResourceFlavor, ClusterQueue, LocalQueue) made and removed around a test.

tests/conftest.py puts tests/sim (k8s_rig) on the import path.
"""
import contextlib
import copy
import json

import k8s_rig
import pytest
import yaml
from kubernetes import client, dynamic

from tests.lib.paths import ROOT

GPU = "nvidia.com/gpu"


def training_nodes(count):
    """The rig's nodes: ``count`` training nodes of 4 H100s, tainted for the pool, and one system node."""
    return {
        "defaults": {"cpu": "8", "memory": "32Gi", "labels": {"kubernetes.io/os": "linux"}},
        "pools": [
            {"name": "training", "count": count, "vmClass": "gpu-training", "cpu": "32", "memory": "384Gi",
             "capacity": {GPU: "4"},
             "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                        "nvidia.com/gpu.count": "4"},
             "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"},
                        {"key": "gpupool.vcf/pool", "value": "training", "effect": "NoSchedule"}]},
            {"name": "system", "count": 1},
        ],
    }


@contextlib.contextmanager
def kueue_rig(tmp, nodes):
    """A rig running Kueue on the nodes ``nodes`` (written to ``tmp``/nodes.yml), stopped on leaving;
    a rig that does not start fails the test."""
    nodes_file = tmp / "nodes.yml"
    nodes_file.write_text(yaml.safe_dump(nodes))
    try:
        rig = k8s_rig.start(nodes_file=nodes_file, kueue=True)
    except k8s_rig.RigError as exc:
        pytest.fail("the Kubernetes rig did not start: %s" % exc, pytrace=False)
    try:
        yield rig
    finally:
        rig.stop()


def example_design():
    return yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def derived_inputs(design=None):
    """The gpu_scheduling_policy inputs derive() makes of ``design`` (default: the example design), as plain data."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive  # pylint: disable=import-outside-toplevel
    return json.loads(json.dumps(derive(design or example_design())["roles"]["gpu_scheduling_policy"]))


def role_play(inputs, **overrides):
    """The gpu_scheduling_policy role with the derived inputs one to one, as site.yml passes them, and
    ``overrides`` (role variables) on top."""
    return [{"hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "gpu_scheduling_policy", "ansible.builtin.import_role": {"name": "gpupool.vcf.gpu_scheduling_policy"},
        "vars": dict(copy.deepcopy(inputs), **overrides)}]}]


def queued_job(name, local_queue, pods, gpus, backoff_limit=0, grace_seconds=None):
    """A Job of ``pods`` pods of ``gpus`` GPUs each for the LocalQueue ``local_queue``, created suspended with
    the queue label (as Kueue's webhook makes it); ``grace_seconds``: the pods' termination grace period."""
    pod = {"restartPolicy": "Never", "priorityClassName": "gpu-training",
           "containers": [{"name": "main", "image": "registry.invalid/train:1",
                           "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
    if grace_seconds is not None:
        pod["terminationGracePeriodSeconds"] = grace_seconds
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": local_queue}},
            "spec": {"suspend": True, "parallelism": pods, "completions": pods, "backoffLimit": backoff_limit,
                     "template": {"spec": pod}}}


def pool_job(name, local_queue, limits):
    """A one-pod Job for the LocalQueue ``local_queue`` with the resource ``limits``, created suspended with the
    queue label."""
    return {"metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": local_queue}},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "sim/train:1", "resources": {"limits": limits}}]}}}}


@contextlib.contextmanager
def gpu_queue(api, namespace, api_version, flavor, cluster_queue, pool, resource, quota, toleration):
    """Kueue objects of ``api_version`` for a test: the ResourceFlavor ``flavor`` (the nodes of pool ``pool``,
    with ``toleration``), the ClusterQueue ``cluster_queue`` for the namespace with ``quota`` of ``resource``,
    and the LocalQueue "gpus" in it. On leaving, the namespace's Jobs and these objects are deleted."""
    resources = dynamic.DynamicClient(api).resources
    resources.get(api_version=api_version, kind="ResourceFlavor").create(body={
        "apiVersion": api_version, "kind": "ResourceFlavor", "metadata": {"name": flavor},
        "spec": {"nodeLabels": {"gpupool.vcf/pool": pool}, "tolerations": [toleration]}})
    resources.get(api_version=api_version, kind="ClusterQueue").create(body={
        "apiVersion": api_version, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                 "resourceGroups": [{"coveredResources": [resource], "flavors": [
                     {"name": flavor, "resources": [{"name": resource, "nominalQuota": quota}]}]}]}})
    resources.get(api_version=api_version, kind="LocalQueue").create(namespace=namespace, body={
        "apiVersion": api_version, "kind": "LocalQueue", "metadata": {"name": "gpus"},
        "spec": {"clusterQueue": cluster_queue}})
    try:
        yield
    finally:
        client.BatchV1Api(api).delete_collection_namespaced_job(namespace, propagation_policy="Background")
        resources.get(api_version=api_version, kind="LocalQueue").delete(namespace=namespace, name="gpus")
        resources.get(api_version=api_version, kind="ClusterQueue").delete(name=cluster_queue)
        resources.get(api_version=api_version, kind="ResourceFlavor").delete(name=flavor)
