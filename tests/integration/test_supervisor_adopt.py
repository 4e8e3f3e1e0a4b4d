"""Adoption of a VM class and a namespace made by hand (vSphere simulator, through ansible-playbook).

Both are made through the vSphere Automation API directly, as an administrator would. Without
adopt they stay foreign: vm_class and supervisor_namespace leave their description (the owner
record, the mark ``gpupool ``) alone. With adopt the description gets the mark: check mode
predicts it, --diff shows it, and a rerun is unchanged.
"""
import pytest

from tests.lib.ansible_run import run_module
from tests.lib.vsphere_api import h100_supervisor, logged_in

FLEET = {"clusters": [h100_supervisor()]}
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NS = "/api/vcenter/namespaces/instances"


@pytest.fixture(scope="module")
def hand_made(vsphere):
    """A VM class and a namespace that match the design but were made by hand."""
    with logged_in(vsphere) as c:
        c.post(CLASSES, {"id": "gpu-hand", "cpu_count": 4, "memory_MB": 16384, "description": "made by hand"})
        clusters = dict((x["cluster_name"], x["cluster"]) for x in c.get("/api/vcenter/namespace-management/clusters"))
        c.post(NS, {"cluster": clusters["gpu-h100"], "namespace": "team-hand", "description": "made by hand"})


def described(sim, path):
    with logged_in(sim) as c:
        return c.get(path).get("description")


CLASS = {"name": "gpu-hand", "cpu_count": 4, "memory_mb": 16384, "description": "gpupool hand: inference"}
NAMESPACE = {"name": "team-hand", "cluster": "gpu-h100", "description": "gpupool tenant hand"}
CASES = [("gpupool.vcf.vm_class", CLASS, CLASSES + "/gpu-hand"), ("gpupool.vcf.supervisor_namespace", NAMESPACE, NS + "/team-hand")]


@pytest.mark.parametrize("module,args,path", CASES, ids=["vm_class", "namespace"])
def test_hand_made_object_stays_foreign_without_adopt_and_becomes_own_with_it(
        vsphere, vsphere_env, hand_made, module, args, path):
    res, _play = run_module(module, args, env=vsphere_env)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and described(vsphere, path) == "made by hand"

    res, _play = run_module(module, dict(args, adopt=True), env=vsphere_env, check=True, diff=True)
    assert res["changed"] is True and res["changed_fields"] == ["description"]
    assert res["diff"]["before"]["description"] == "made by hand"
    assert res["diff"]["after"]["description"] == args["description"]
    assert described(vsphere, path) == "made by hand"  # check mode writes nothing

    res, _play = run_module(module, dict(args, adopt=True), env=vsphere_env)
    assert res["changed"] is True and described(vsphere, path) == args["description"]
    res, _play = run_module(module, dict(args, adopt=True), env=vsphere_env)
    assert res["changed"] is False
    # once the collection's, a run without adopt keeps it so
    res, _play = run_module(module, args, env=vsphere_env)
    assert res["changed"] is False and described(vsphere, path) == args["description"]


def test_adopt_marks_a_description_that_lacks_the_mark(vsphere, vsphere_env, hand_made):
    with logged_in(vsphere) as c:
        c.post(CLASSES, {"id": "gpu-plain", "cpu_count": 2, "memory_MB": 8192, "description": "team a"})
    args = {"name": "gpu-plain", "cpu_count": 2, "memory_mb": 8192, "description": "team a", "adopt": True}
    res, _play = run_module("gpupool.vcf.vm_class", args, env=vsphere_env)
    assert res["changed"] is True and described(vsphere, CLASSES + "/gpu-plain") == "gpupool team a"
    res, _play = run_module("gpupool.vcf.vm_class", args, env=vsphere_env)
    assert res["changed"] is False
