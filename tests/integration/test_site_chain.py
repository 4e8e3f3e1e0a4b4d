"""site.yml over the whole chain: check mode predicts without changing anything, and a failing
link is named and stops the chain (vSphere simulator, Kubernetes rig, DLS double)."""
import pathlib

import pytest

from tests.lib import chain
from tests.lib.ansible_run import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]

SITE = ROOT / "playbooks" / "site.yml"
FLEET = ROOT / "examples" / "fleet.yml"


@pytest.fixture(scope="module")
def pool(vsphere, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chain")
    with chain.platform(vsphere.env, tmp) as (rig, dls, env, extra):
        yield rig, dls, env, extra, tmp


def snapshot(vsphere, rig):
    """What site.yml would change: host drivers, the VKS cluster's pools, the guest's objects."""
    from kubernetes import client, dynamic
    api = rig.api_client()
    core = client.CoreV1Api(api)
    clusters = dynamic.DynamicClient(api).resources.get(api_version=chain.CAPI, kind="Cluster")
    cluster = clusters.get(namespace="gpu-platform", name="gpu-workloads").to_dict()
    return {
        "drivers": {h: vsphere.host_state(h).get("driver_version") for h in ("esx-h100-01", "esx-h100-04")},
        "cluster": cluster["spec"]["topology"],
        "namespaces": sorted(n.metadata.name for n in core.list_namespace().items),
        "priority_classes": sorted(p.metadata.name for p in client.SchedulingV1Api(api).list_priority_class().items),
        "secrets": sorted("%s/%s" % (s.metadata.namespace, s.metadata.name)
                          for s in core.list_secret_for_all_namespaces().items),
        "helm": rig.helm("list", "-A", "-q").stdout.split(),
    }


def test_check_mode_predicts_changes_and_changes_nothing(vsphere, pool):
    rig, _dls, env, extra, tmp = pool
    before = snapshot(vsphere, rig)
    run = run_playbook(SITE, env=env, check=True, diff=True, extra_vars=extra)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stats.get("changed", 0) > 0
    names = [name for name, _result in run.tasks]
    for task in ("Node pools of each VKS cluster of the design", "Client configuration token from the DLS appliance",
                 "PriorityClasses, tenant quotas and Kueue queues of the design"):
        assert task in names
    assert snapshot(vsphere, rig) == before
    assert not list((tmp / "tokens").glob("*.tok"))


def test_failing_link_is_named_and_later_links_do_not_run(vsphere, pool, tmp_path):
    rig, _dls, env, extra, _tmp = pool
    bad = tmp_path / "supervisor.kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    extra = dict(extra, gpupool_supervisor_kubeconfig=str(bad))
    for key in [k for k in extra if k.startswith("gpupool_dls_")]:
        del extra[key]  # no DLS: the licensing link is skipped, with its message
    run = run_playbook(SITE, env=env, extra_vars=extra)
    assert run.rc != 0
    names = [name for name, _result in run.tasks]
    skipped = run.result("Say why the licensing link is skipped")
    assert "Link 'licensing' skipped: no DLS appliance" in skipped["msg"]
    failed = run.result("Stop at the VKS link")
    assert failed["failed"]
    assert failed["msg"].startswith("Link 'VKS' failed: ") and failed["msg"].endswith("Later links were not run.")
    assert not any(n.startswith(("Say why the guest link", "GPU Operator with", "PriorityClasses, tenant"))
                   for n in names)
    from kubernetes import client
    assert "gpu-operator" not in [n.metadata.name for n in client.CoreV1Api(rig.api_client()).list_namespace().items]
