"""The collection's REST calls and the simulator's answers against VMware's published contract.

One simulator records every REST request it receives and its answer (``-rest-log``, through
VSPHERESIM_REST_LOG); one playbook runs the modules that use the vSphere Automation API
(vm_class in both request forms, supervisor_namespace with its access entries and both create
forms, vlcm_component with a depot import, a refused depot, a commit and a remediation,
gpu_host_info reading the driver from the image compliance, gpu_pool_audit's vSphere link)
and removes what it made. Each
recorded exchange is then matched to an operation of the ``vmware-vcenter`` bindings and
checked against its input and output types (tests/lib/rest_contract.py). Any mismatch fails
the test with the request and the field; a request no operation matches fails it too. A
second test calls what the simulator serves beyond the collection's calls, and its error
answers, and checks those the same way.
"""
import collections

import pytest

from tests.lib import rest_contract
from tests.lib.ansible_run import ROOT, run_playbook
from tests.lib.helpers import rest

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % NEW
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True, "lifecycle": "vlcm",
         "hosts": [{"prefix": "esx-c", "count": 2, "gpu": {"model": "H100-80GB", "count": 2},
                    "driver_version": OLD}]},
        {"name": "plain", "hosts": [{"name": "esx-plain"}]},
    ],
}
VSAN = "vSAN Default Storage Policy"
DESIGN = str(ROOT / "examples" / "design.yml")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, monkeypatch_module):
    """A simulator that logs every REST exchange; yields (sim, log path)."""
    import vsphere_sim

    log = tmp_path_factory.mktemp("rest-contract") / "rest.jsonl"
    monkeypatch_module.setenv("VSPHERESIM_REST_LOG", str(log))
    sim = vsphere_sim.start(FLEET, reboot_seconds=0.2)
    try:
        yield sim, log
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def task(name, module, args, **extra):
    out = {"name": name, module: args}
    out.update(extra)
    return out


def playbook(cluster_moid):
    ns = "gpupool.vcf.supervisor_namespace"
    vmc = "gpupool.vcf.vm_class"
    vlcm = "gpupool.vcf.vlcm_component"
    return [{
        "name": "every REST call of the collection", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            task("class config_spec", vmc, {"name": "gpu-small", "cpu_count": 4, "memory_mb": 16384,
                                            "vgpu_profiles": ["nvidia_h100-1-10c"], "cluster": "gpu-h100",
                                            "description": "inference"}),
            task("class update", vmc, {"name": "gpu-small", "cpu_count": 8}),
            task("class devices", vmc, {"name": "gpu-legacy", "cpu_count": 4, "memory_mb": 16384,
                                        "api_form": "devices", "cluster": "gpu-h100",
                                        "vgpu_profiles": ["nvidia_h100-40c", "nvidia_h100-40c"]}),
            task("namespace create", ns, {
                "name": "team-a", "cluster": "gpu-h100", "description": "Team A",
                "vm_classes": ["gpu-small"], "content_libraries": ["vm-images"],
                "storage_policies": [{"policy": VSAN, "limit_mib": 102400}],
                "limits": {"memory_mib": 65536, "cpu_mhz": 20000, "storage_mib": 204800},
                "access": [{"subject": "team-a", "domain": "example.com", "type": "GROUP", "role": "EDIT"}]}),
            task("namespace update", ns, {"name": "team-a", "vm_classes": ["gpu-legacy"]}),
            task("namespace access", ns, {"name": "team-a", "access": [
                {"subject": "team-a", "domain": "example.com", "type": "GROUP", "role": "VIEW"},
                {"subject": "alice", "domain": "vsphere.local", "role": "OWNER"}]}),
            task("namespace purge access", ns, {"name": "team-a", "purge_access": True, "access": [
                {"subject": "alice", "domain": "vsphere.local", "role": "OWNER"}]}),
            task("namespace by supervisor", ns, {"name": "team-b", "supervisor": cluster_moid,
                                                 "vm_classes": ["gpu-small"]}),
            task("depot without the component", vlcm,
                 {"cluster": "gpu-h100", "version": NEW, "depot_url": "https://depot.example.com/vendor-addon.zip"},
                 ignore_errors=True),
            task("image and remediation", vlcm, {"cluster": "gpu-h100", "version": NEW, "depot_url": DEPOT,
                                                 "remediate": True, "remediate_timeout": 300}),
            task("driver from the image", "gpupool.vcf.gpu_host_info", {"cluster": "gpu-h100", "gather": ["driver"]}),
            task("audit of the vSphere link", "gpupool.vcf.gpu_pool_audit", {"design_file": DESIGN, "links": ["vsphere"]}),
            task("namespace a gone", ns, {"name": "team-a", "state": "absent"}),
            task("namespace b gone", ns, {"name": "team-b", "state": "absent"}),
            task("class gone", vmc, {"name": "gpu-small", "state": "absent"}),
            task("legacy class gone", vmc, {"name": "gpu-legacy", "state": "absent"}),
        ],
    }]


def test_every_rest_exchange_fits_the_vendor_contract(recorded):
    sim, log = recorded
    client = rest(sim)
    try:
        client.post("/api/content/local-library", {"name": "vm-images", "type": "LOCAL"})
        moid = next(c["cluster"] for c in client.get("/api/vcenter/namespace-management/clusters")
                    if c["cluster_name"] == "gpu-h100")
    finally:
        client.close()

    res = run_playbook(playbook(moid), env=dict(sim.env))
    assert res.data is not None, res.stderr[-3000:]
    results = dict(res.tasks)
    for name, result in res.tasks:
        if name != "depot without the component":
            assert not result.get("failed"), (name, result.get("msg"))
    refused = results["depot without the component"]
    assert refused.get("failed") and "does not offer component NVD-AIE-800" in refused["msg"], refused
    assert results["image and remediation"]["remediated"] is True
    assert {h["driver"]["source"] for h in results["driver from the image"]["hosts"]} == {"image"}
    assert results["audit of the vSphere link"]["audited"] == ["vsphere"]

    entries = rest_contract.read_log(log)
    contract = rest_contract.load()
    mismatches, exempt = contract.check_all(entries)
    calls = collections.Counter("%s %s" % (e["method"], e["path"]) for e in entries)
    print("%d exchanges, %d distinct calls, %d operations in the bindings" % (len(entries), len(calls), len(contract)))
    for key, reason in sorted(set(exempt)):
        print("not in the bindings: %s (%s)" % (key, reason))
    assert not mismatches, "\n".join(str(m) for m in mismatches)
    # the run did reach what it is meant to check
    ops = set(op.id for op in (contract.operation_of(e) for e in entries) if op is not None)
    for wanted in ("com.vmware.cis.session.create",
                   "com.vmware.cis.session.delete",
                   "com.vmware.vcenter.namespace_management.clusters.list",
                   "com.vmware.vcenter.namespace_management.virtual_machine_classes.list",
                   "com.vmware.vcenter.namespace_management.virtual_machine_classes.get",
                   "com.vmware.vcenter.namespace_management.virtual_machine_classes.delete",
                   "com.vmware.vcenter.namespaces.instances.get",
                   "com.vmware.vcenter.namespaces.instances.delete",
                   "com.vmware.vcenter.storage.policies.list",
                   "com.vmware.content.library.list",
                   "com.vmware.content.library.get",
                   "com.vmware.content.local_library.create",
                   "com.vmware.esx.settings.clusters.enablement.software.get",
                   "com.vmware.esx.settings.clusters.software.get",
                   "com.vmware.esx.settings.clusters.software.drafts.create",
                   "com.vmware.esx.settings.clusters.software.drafts.software.components.update",
                   "com.vmware.esx.settings.depots.offline.list",
                   "com.vmware.esx.settings.depots.offline.content.get",
                   "com.vmware.vcenter.namespace_management.virtual_machine_classes.create",
                   "com.vmware.vcenter.namespace_management.virtual_machine_classes.update",
                   "com.vmware.vcenter.namespaces.instances.create",
                   "com.vmware.vcenter.namespaces.instances.create_v2",
                   "com.vmware.vcenter.namespaces.instances.update",
                   "com.vmware.vcenter.namespaces.access.create",
                   "com.vmware.vcenter.namespaces.access.set",
                   "com.vmware.vcenter.namespaces.access.delete",
                   "com.vmware.esx.settings.depots.offline.create",
                   "com.vmware.esx.settings.depots.offline.delete",
                   "com.vmware.esx.settings.clusters.software.drafts.commit",
                   "com.vmware.esx.settings.clusters.software.apply",
                   "com.vmware.esx.settings.clusters.software.compliance.get",
                   "com.vmware.cis.tasks.get"):
        assert wanted in ops, (wanted, sorted(ops))


def test_the_simulators_other_answers_fit_the_contract_too(recorded):
    """What the simulator serves beyond the collection's calls (draft reads, depot and namespace
    listings, access entries, the session) and its error answers: refused image calls on a
    cluster without an image, unknown objects, a killed session."""
    sim, log = recorded
    seen = len(rest_contract.read_log(log)) if log.exists() else 0
    client = rest(sim)
    try:
        clusters = dict((c["cluster_name"], c["cluster"]) for c in
                        client.get("/api/vcenter/namespace-management/clusters"))
        moid = clusters["gpu-h100"]
        software = "/api/esx/settings/clusters/%s/software" % moid
        draft = client.post(software + "/drafts")
        client.get("%s/drafts/%s" % (software, draft))
        client.get(software + "/drafts")
        client.delete("%s/drafts/%s" % (software, draft))
        for depot in client.get("/api/esx/settings/depots/offline") or {}:
            client.get("/api/esx/settings/depots/offline/%s" % depot)
        client.post("/api/vcenter/namespaces/instances", {
            "cluster": moid, "namespace": "team-c",
            "access_list": [{"subject_type": "USER", "domain": "vsphere.local", "subject": "bob", "role": "VIEW"}]})
        client.get("/api/vcenter/namespaces/instances")
        client.get("/api/vcenter/namespaces/instances/team-c/access/vsphere.local/bob", params={"type": "USER"})
        client.delete("/api/vcenter/namespaces/instances/team-c")
        client.get("/api/session")
        for path in ("/api/vcenter/namespace-management/virtual-machine-classes/no-such-class",
                     "/api/vcenter/namespaces/instances/no-such-namespace",
                     "/api/esx/settings/clusters/domain-c999/software"):
            with pytest.raises(Exception, match="not found"):
                client.get(path)
        plain = _cluster_moid(sim, "plain")
        with pytest.raises(Exception, match="has no desired software"):
            client.get("/api/esx/settings/clusters/%s/software" % plain)
        sim.kill_sessions()
        client.get("/api/vcenter/storage/policies")  # a 401, then a new session
        assert client.relogins == 1
    finally:
        client.close()

    entries = rest_contract.read_log(log)[seen:]
    assert sorted(set(e["status"] for e in entries)) == [200, 201, 204, 401, 404]
    mismatches, _exempt = rest_contract.load().check_all(entries)
    assert not mismatches, "\n".join(str(m) for m in mismatches)


def _cluster_moid(sim, name):
    """A cluster's moid over SOAP (the REST listing names the Supervisors only)."""
    import ssl

    from pyVim.connect import Disconnect, SmartConnect
    from pyVmomi import vim

    from tests.lib.vim_objects import find_object

    si = SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                      sslContext=ssl.create_default_context(cafile=sim.ca_file))
    try:
        return find_object(si, vim.ClusterComputeResource, name)._moId
    finally:
        Disconnect(si)
