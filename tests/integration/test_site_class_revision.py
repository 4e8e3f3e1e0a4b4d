"""site.yml with supervisor.vm_class_revisions over the whole chain: the inference pool's vGPU profile
changes in the design (3g.40gb to 4g.40gb) and site.yml makes it a drain-and-reconfigure - a new class
<class>-r<hex> offered by the namespaces, the node pool moved to it, Cluster API's rollout waited for (the
rollout double replaces the pool's kwok nodes, draining each), the old class taken out of the namespaces
and deleted - and the audit judges the result clean with the same resolution of the class name.
(vSphere simulator, Kubernetes rig with the rollout double, DLS double.)"""
from __future__ import annotations

import copy
import sys

import pytest
import yaml
from kubernetes import client, dynamic

from tests.lib import chain
from tests.integration.test_supervisor_namespace import raw
from tests.lib.helpers import rest
from tests.lib.ansible_run import ROOT, run_module, run_playbook

sys.path.insert(0, str(ROOT / "tests" / "sim" / "k8s"))
import rollout_double  # noqa: E402

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class  # noqa: E402

SITE = ROOT / "playbooks" / "site.yml"
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NS, CLUSTER, POOL = "gpu-platform", "gpu-workloads", "inference"
OLD, NEW = "nvidia_h100-3-40c", "nvidia_h100-4-40c"
REBOOT_SECONDS = 0.2
# the rollout double's least spacing of two steps: none, as nothing here looks at a rollout midway (each new node is
# still Ready before an old one is drained, one surge node at a time)
ROLLOUT_STEP = 0


def design(path, profile):
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    d = copy.deepcopy(d)
    d["supervisor"]["vm_class_revisions"] = True
    pool = [p for p in d["pools"] if p["name"] == POOL][0]
    pool["vgpu_profile"] = profile
    pool["per_card"] = 2 if profile == OLD else 1
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def changed(run):
    return sum(s.get("changed", 0) for s in ((run.data or {}).get("stats") or {}).values())


def live_classes(vsphere):
    c = rest(vsphere)
    try:
        return dict((x["id"], x) for x in c.get(CLASSES))
    finally:
        c.close()


def namespace_classes(vsphere, derived):
    return dict((ns["name"], sorted(raw(vsphere, ns["name"])["vm_service_spec"]["vm_classes"]))
                for ns in derived["vsphere"]["namespaces"])


def md_class(api):
    obj = dynamic.DynamicClient(api).resources.get(api_version=chain.CAPI, kind="Cluster").get(namespace=NS, name=CLUSTER)
    md = [m for m in obj.to_dict()["spec"]["topology"]["workers"]["machineDeployments"] if m["name"] == POOL][0]
    return {o["name"]: o["value"] for o in md["variables"]["overrides"]}["vmClass"]


def pool_nodes(api):
    return dict((n.metadata.name, n.metadata.labels.get("node.kubernetes.io/instance-type"))
                for n in client.CoreV1Api(api).list_node(label_selector="gpupool.vcf/pool=%s" % POOL).items)


@pytest.fixture(scope="module")
def vsphere():
    """The example fleet, its hosts back 0.2 s after a reboot (the first converge reboots esx-h100-04 for its driver;
    how long a host stays down is not what this module tests, the roll's steps and waits are kept)."""
    import vsphere_sim
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml", reboot_seconds=REBOOT_SECONDS)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def chain_up(vsphere, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("revision")
    with chain.platform(vsphere.env, tmp) as up:
        yield up + (tmp,)


def test_profile_change_through_site_yml(vsphere, chain_up):
    rig, _dls, env, extra, tmp = chain_up
    api = rig.api_client()
    before = design(tmp / "before.yml", OLD)
    after = design(tmp / "after.yml", NEW)
    base = [c for c in chain.derived(before)["vsphere"]["vm_classes"] if c["pool"] == POOL][0]["name"]
    want = [c for c in chain.derived(after)["vsphere"]["vm_classes"] if c["pool"] == POOL][0]
    new = _vm_class.revision_name(base, want)

    # the pool converged on its first profile: classes under their design names, nothing to retire
    # the chain's first converge (the whole test takes about 280 s on a quiet machine) once ran past 900 s on a
    # machine loaded by other test runs
    run = run_playbook(SITE, env=env, extra_vars=dict(extra, gpupool_design_file=str(before)), timeout=1800)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-3000:]
    assert md_class(api) == base and base in live_classes(vsphere)
    # the kwok nodes that stand for the pool's machines, as the double's MachineDeployment owns them
    core = client.CoreV1Api(api)
    for name in pool_nodes(api):
        core.patch_node(name, {"metadata": {"annotations": {
            rollout_double.ADOPT: "%s/%s/%s" % (NS, CLUSTER, POOL)}}})
    old_nodes = set(pool_nodes(api))

    with rollout_double.running(rig.kubeconfig, tmp / "double.log", namespace=NS, step=ROLLOUT_STEP):
        # check mode: the ordered steps, nothing made
        run = run_playbook(SITE, env=env, check=True, diff=True, extra_vars=dict(extra, gpupool_design_file=str(after)))
        assert run.rc == 0, run.stdout[-4000:] + run.stderr[-3000:]
        steps = run.result("gpupool.vcf.supervisor_gpu_tenancy : Profile changes, in the order they are made")["msg"]
        assert list(steps) == [new]
        assert [s.split(" ")[0] for s in steps[new]] == ["create", "add", "move", "wait", "remove", "delete"]
        assert new not in live_classes(vsphere) and md_class(api) == base

        # the change: new class, namespaces, node pool, rollout waited for, old class retired
        run = run_playbook(SITE, env=env, extra_vars=dict(extra, gpupool_design_file=str(after)))
        assert run.rc == 0, run.stdout[-4000:] + run.stderr[-3000:]
    classes = live_classes(vsphere)
    assert new in classes and base not in classes
    assert classes[new]["description"].endswith(NEW)
    assert md_class(api) == new
    nodes = pool_nodes(api)
    assert len(nodes) == 4 and set(nodes.values()) == {new} and not (set(nodes) & old_nodes)
    offered = namespace_classes(vsphere, chain.derived(after))
    assert all(base not in c for c in offered.values()) and any(new in c for c in offered.values())
    log = (tmp / "double.log").read_text()
    assert log.count("created node") == 4 and log.count("drained and deleted node") == 4, log

    # a rerun changes nothing, and the audit finds the vSphere and VKS links clean
    run = run_playbook(SITE, env=env, extra_vars=dict(extra, gpupool_design_file=str(after)))
    assert run.rc == 0 and changed(run) == 0, [
        (name, res.get("diff") or res.get("msg")) for name, res in run.tasks if res.get("changed")]
    res, _run = run_module("gpupool.vcf.gpu_pool_audit", {
        "design_file": str(after), "supervisor_kubeconfig": str(rig.kubeconfig), "links": ["vsphere", "vks"]}, env=env)
    assert not res.get("failed"), res.get("msg")
    assert [f for f in res["findings"] if f["severity"] != "info"] == []
