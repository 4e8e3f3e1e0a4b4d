"""The vSphere links of the chain against an 8.0.3 and a 9.1 presentation of the simulator, and which
REST calls differ.

A design other than the example (its GPU cluster renamed gpu-east, whose Supervisor holds the
namespaces, managed by a vLCM image in the fleet) is preflighted; a namespace is made and removed on
its Supervisor; a direct driver install on a host of the image-managed cluster is planned (check
mode). Each run's REST exchanges come from the simulator's log (-rest-log); the calls of one run
that the other does not send are listed and asserted: on 8.0.3 the cluster-keyed Clusters.list, on
9.1 the per-Supervisor Summary.list and Topology.get and the image check of the install, which
9.1 refuses before any change. The 9.1 simulator counts the deprecated calls a client sends: none.
"""
import json
import re

import pytest
import yaml

from tests.lib import design_edit, rest_contract
from tests.lib.ansible_run import run_playbook
from tests.lib.helpers import rest

OLD = "550.54.10-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [
        {"name": "gpu-east", "supervisor": True, "lifecycle": "vlcm",
         "hosts": [{"prefix": "esx-e", "count": 2, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": OLD}]},
        {"name": "gpu-l40s", "hosts": [{"prefix": "esx-l", "count": 1, "gpu": {"model": "L40S", "count": 2},
                                        "driver_version": OLD}]},
    ],
}
BUNDLE = "[LocalDS_0] drivers/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23785416.zip"


def east_design(tmp_path):
    """The example design with its H100 cluster renamed gpu-east and a name of its own."""
    text = yaml.safe_dump(design_edit.example(), sort_keys=False).replace("gpu-h100", "gpu-east")
    design = yaml.safe_load(text)
    design["name"] = "east-gpupool"
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(design, sort_keys=False))
    return path


def playbook(design_file):
    return [{
        "name": "the vSphere links", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "preflight", "gpupool.vcf.gpu_pool_preflight": {"design_file": str(design_file)}},
            {"name": "namespace", "gpupool.vcf.supervisor_namespace": {"name": "east-team", "cluster": "gpu-east"}},
            {"name": "namespace gone", "gpupool.vcf.supervisor_namespace": {"name": "east-team", "state": "absent"}},
            {"name": "direct driver",
             "gpupool.vcf.esxi_host_driver": {"host": "esx-e01", "version": "550.90.05", "bundle": BUNDLE},
             "check_mode": True, "ignore_errors": True},
        ],
    }]


ID = re.compile(r"/(domain-c\d+|host-\d+)(?=/|$)")


def calls(log):
    """{"METHOD path"} of a REST log, object ids as {id}; the session calls left out."""
    out = set()
    for line in log.read_text().splitlines():
        e = json.loads(line)
        if e["path"] in ("/api/session", "/rest/com/vmware/cis/session"):
            continue
        out.add("%s %s" % (e["method"], ID.sub("/{id}", e["path"])))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import vsphere_sim

    out = {}
    tmp = tmp_path_factory.mktemp("vsphere9")
    design = east_design(tmp)
    for version in ("8.0.3", "9.1"):
        log = tmp / ("rest-%s.jsonl" % version)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("VSPHERESIM_REST_LOG", str(log))
            sim = vsphere_sim.start(FLEET, reboot_seconds=0.2, api_version=version)
        try:
            res = run_playbook(playbook(design), env=dict(sim.env))
            out[version] = dict(tasks=dict(res.tasks), calls=calls(log), stats=sim.stats(), stderr=res.stderr,
                                entries=rest_contract.read_log(log))
        finally:
            sim.stop()
    return out


SUMMARIES = "GET /api/vcenter/namespace-management/supervisors/summaries"
TOPOLOGY = "GET /api/vcenter/namespace-management/supervisors/{id}/topology"
CLUSTERS = "GET /api/vcenter/namespace-management/clusters"
ENABLEMENT = "GET /api/esx/settings/clusters/{id}/enablement/software"


def test_the_calls_that_differ_between_8_0_3_and_9_1(runs):
    old, new = runs["8.0.3"], runs["9.1"]
    for run in (old, new):
        assert run["tasks"], run["stderr"][-3000:]
        for name in ("preflight", "namespace", "namespace gone"):
            assert not run["tasks"][name].get("failed"), (name, run["tasks"][name].get("msg"))
    only_old, only_new = sorted(old["calls"] - new["calls"]), sorted(new["calls"] - old["calls"])
    print("only on 8.0.3: %s" % only_old)
    print("only on 9.1:   %s" % only_new)
    print("on both:       %d calls" % len(old["calls"] & new["calls"]))
    assert only_old == [CLUSTERS] and CLUSTERS not in new["calls"]
    assert only_new == sorted([SUMMARIES, TOPOLOGY, ENABLEMENT])
    # the 9.1 presentation serves the deprecated calls and counts them: the collection sends none
    assert new["stats"]["rest"]["deprecated"] == {}
    assert old["stats"]["rest"]["deprecated"] == {}


def test_a_direct_install_on_an_image_cluster_is_refused_on_9_1_only(runs):
    old, new = runs["8.0.3"]["tasks"]["direct driver"], runs["9.1"]["tasks"]["direct driver"]
    assert not old.get("failed") and old["plan"] == "upgrade", old
    assert new.get("failed") and "managed by a vLCM image" in new["msg"] and "vlcm_component" in new["msg"], new
    assert not new.get("changed")
    # refused from reads only: no SOAP write on 9.1
    methods = runs["9.1"]["stats"]["soap"]["methods"]
    assert not [m for m in methods if m.endswith("_Task") or m in ("SetField", "AddCustomFieldDef")], methods


def test_every_exchange_of_both_runs_fits_the_bindings(runs):
    contract = rest_contract.load()
    for version in ("8.0.3", "9.1"):
        mismatches, _exempt = contract.check_all(runs[version]["entries"])
        assert not mismatches, "\n".join(str(m) for m in mismatches)
    ops = set(op.id for op in (contract.operation_of(e) for e in runs["9.1"]["entries"]) if op is not None)
    assert {"com.vmware.vcenter.namespace_management.supervisors.summary.list",
            "com.vmware.vcenter.namespace_management.supervisors.topology.get"} <= ops, sorted(ops)


def test_9_1_serves_a_deprecated_call_and_counts_it():
    import vsphere_sim

    for version, counted in (("8.0.3", False), ("9.1", True)):
        sim = vsphere_sim.start(FLEET, api_version=version)
        try:
            client = rest(sim)
            try:
                listed = client.get("/api/vcenter/namespace-management/clusters")
                summaries = client.get("/api/vcenter/namespace-management/supervisors/summaries")
            finally:
                client.close()
            assert [c["cluster_name"] for c in listed] == ["gpu-east"]
            assert [i["info"]["name"] for i in summaries["items"]] == ["gpu-east"]
            assert ("messages" in summaries["items"][0]["info"]) is counted  # Summary.Info.messages: API 9.1.0.0
            deprecated = sim.stats()["rest"]["deprecated"]
            assert deprecated == ({CLUSTERS: 1} if counted else {}), deprecated
        finally:
            sim.stop()
