"""Reserved VM classes end to end against the vSphere simulator: a design of two tenants reserving VM
classes of two pools in two zones, derived as site.yml derives it and written by the tenancy role
(the Supervisor's zone bindings, then each tenant namespace's zones), on a 9.1 and an 8.0.3 presentation.

On 9.1 the bindings and the namespace zones hold the figures summed here by hand, a rerun changes
nothing, and --check of a design that adds a zone predicts the run that follows (the same tasks changed,
the same results, no write while checking). The simulator refuses a reservation of a class that does not
exist and a count the zone's cards cannot hold. On 8.0.3 the role is refused before any change: the
simulator counts no write. Every REST exchange of the 9.1 run, the namespace create with zones[] (v2)
included, is checked against VMware's published 9.1 bindings (tests/lib/rest_contract.py).
"""
import copy
import json

import pytest

from tests.lib import design_edit, rest_contract
from tests.lib.ansible_run import COLLECTIONS, run_module, run_playbook
from tests.lib.helpers import rest

OLD = "550.54.10-1OEM.800.1.0.20613240"
# 4 H100 cards a host, the first two in MIG mode (the inference pool's MIG-backed profile), two full
H100 = {"model": "H100-80GB", "count": 4}
# the Supervisor's cluster and a second H100 cluster: zone-gpu-h100 and zone-gpu-h100b (one zone per cluster)
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True,
         "hosts": [{"prefix": "esx-a", "count": 6, "gpu": H100, "mig": [0, 1], "driver_version": OLD}]},
        {"name": "gpu-h100b", "hosts": [{"prefix": "esx-b", "count": 2, "gpu": H100, "mig": [0, 1], "driver_version": OLD}]},
    ],
}
ZONE_A, ZONE_B = "zone-gpu-h100", "zone-gpu-h100b"
BINDINGS = "/api/vcenter/namespace-management/supervisors/%s/zones/bindings"


def design():
    """The example cut to the H100 cluster (6 hosts), its two pools and two tenants, each reserving: team-search
    inference VMs in both zones, team-vision a training VM in zone A."""
    d = design_edit.example()
    d["clusters"] = [c for c in d["clusters"] if c["name"] == "gpu-h100"]
    d["clusters"][0]["hosts"] = 6
    d["pools"] = [p for p in d["pools"] if p["name"] in ("inference", "training")]
    design_edit.pool(d, "training")["node_pool"]["replicas"] = 1
    d["tenants"] = [t for t in d["tenants"] if t["name"] in ("team-search", "team-vision")]
    design_edit.tenant(d, "team-vision")["gpu_quota"] = {"training": 8, "inference": 2}
    design_edit.tenant(d, "team-search")["vm_reservations"] = [
        {"pool": "inference", "zone": ZONE_A, "count": 2}, {"pool": "inference", "zone": ZONE_B, "count": 1}]
    design_edit.tenant(d, "team-vision")["vm_reservations"] = [{"pool": "training", "zone": ZONE_A, "count": 1}]
    design_edit.tenant(d, "team-vision")["disallow_unreserved_direct_path_usage"] = True
    return d


def tenancy(d):
    """The tenancy role's variables as site.yml passes them (gpu_pool_design's derive)."""
    import sys
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive  # pylint: disable=import-outside-toplevel
    return json.loads(json.dumps(derive(copy.deepcopy(d))["roles"]["supervisor_gpu_tenancy"]))


def play(d):
    t = tenancy(d)
    return [{
        "name": "tenancy", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.vsphere": {}},
        "roles": [{"role": "gpupool.vcf.supervisor_gpu_tenancy",
                   "supervisor_gpu_tenancy_vm_classes": t["supervisor_gpu_tenancy_vm_classes"],
                   "supervisor_gpu_tenancy_namespaces": t["supervisor_gpu_tenancy_namespaces"],
                   "supervisor_gpu_tenancy_zone_bindings": t["supervisor_gpu_tenancy_zone_bindings"]}],
    }]


def writes(stats):
    """{"METHOD path": n} of the REST writes (the session left out) and the SOAP methods that change something."""
    rest_writes = dict((k, n) for k, n in stats["rest"]["paths"].items()
                       if not k.startswith("GET ") and k.split(" ", 1)[1] not in ("/api/session", "/rest/com/vmware/cis/session"))
    soap = [m for m in stats["soap"]["methods"] if m.endswith("_Task") or m in ("SetField", "AddCustomFieldDef")]
    return rest_writes, soap


def task(res, name):
    """The result of a role task by its name (the callback prefixes the role's)."""
    hits = [r for n, r in res.tasks if n == name or n.endswith(" : " + name)]
    assert hits, [task[0] for task in res.tasks]
    return hits[0]


def counts(items):
    return dict((i["reserved_vm_class"], i["count"]) for i in items or [])


def supervisor_id(client):
    return client.get("/api/vcenter/namespace-management/supervisors/summaries")["items"][0]["supervisor"]


def refused(client, method, path, body):
    """(HTTP status, message) of a call the simulator must refuse."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestError
    try:
        client.request(method, path, body)
    except VsphereNotFound as err:   # the client's own type for a 404
        return 404, str(err)
    except VsphereRestError as err:
        return err.status, str(err)
    raise AssertionError("%s %s was answered, not refused" % (method, path))


@pytest.fixture(scope="module")
def run91(tmp_path_factory):
    import vsphere_sim

    log = tmp_path_factory.mktemp("reserved") / "rest.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VSPHERESIM_REST_LOG", str(log))
        sim = vsphere_sim.start(FLEET, reboot_seconds=0.2, api_version="9.1")
    try:
        out = dict(first=run_playbook(play(design()), env=dict(sim.env)))
        out["after_first"] = sim.stats()["zones"]
        out["again"] = run_playbook(play(design()), env=dict(sim.env))
        # one more zone for team-vision: two inference VMs in zone B
        more = design()
        design_edit.tenant(more, "team-vision")["vm_reservations"].append({"pool": "inference", "zone": ZONE_B, "count": 2})
        sim.reset_stats()
        out["check"] = run_playbook(play(more), env=dict(sim.env), check=True, diff=True)
        out["check_writes"] = writes(sim.stats())
        out["real"] = run_playbook(play(more), env=dict(sim.env), diff=True)
        out["zones"] = sim.stats()["zones"]
        client = rest(sim)
        try:
            sup = supervisor_id(client)
            out["supervisor"] = sup
            out["bindings"] = client.get(BINDINGS % sup)["zones"]
            out["v2"] = client.get("/api/vcenter/namespaces/instances/v2/team-vision")
            # the vendor's refusals: a class that does not exist, a count the zone's cards cannot hold
            out["no_class"] = refused(client, "PATCH", "%s/%s/bindings" % (BINDINGS.rsplit("/", 1)[0] % sup, ZONE_B),
                                      {"resource_allocation": {"vm_reservations": [
                                          {"reserved_vm_class": "no-such-class", "count": 1}]}})
            out["too_many"] = refused(client, "PATCH", "%s/%s/bindings" % (BINDINGS.rsplit("/", 1)[0] % sup, ZONE_B),
                                      {"resource_allocation": {"vm_reservations": [
                                          {"reserved_vm_class": "gpu-training", "count": 2}]}})
            out["bindings_after_refusals"] = client.get(BINDINGS % sup)["zones"]
            # drift by hand: zone A keeps one inference VM fewer (and the training VM)
            client.request("PATCH", "%s/%s/bindings" % (BINDINGS.rsplit("/", 1)[0] % sup, ZONE_A),
                           {"resource_allocation": {"vm_reservations": [
                               {"reserved_vm_class": "gpu-inference", "count": 1},
                               {"reserved_vm_class": "gpu-training", "count": 1}]}})
        finally:
            client.close()
        # the audit names the drift from the role's own plan; the role repairs it; the audit is clean again
        audit = {"design": more, "links": ["vsphere"]}
        out["drift_audit"] = run_module("gpupool.vcf.gpu_pool_audit", audit, env=dict(sim.env))[0]
        out["repair"] = run_playbook(play(more), env=dict(sim.env))
        out["clean_audit"] = run_module("gpupool.vcf.gpu_pool_audit", audit, env=dict(sim.env))[0]
        # zones[] on the v2 create (CreateSpecV2.zones), through the module
        out["v2_create"] = run_playbook([{
            "name": "v2", "hosts": "localhost", "gather_facts": False,
            "tasks": [{"name": "create with zones", "gpupool.vcf.supervisor_namespace": {
                "name": "team-v2", "supervisor": sup, "vm_classes": ["gpu-inference"],
                "vm_reservations": [{"zone": ZONE_A, "vm_class": "gpu-inference", "count": 0}]}}]}],
            env=dict(sim.env))
        out["zones_v2"] = sim.stats()["zones"]["namespaces"].get("team-v2")
        out["entries"] = rest_contract.read_log(log)
    finally:
        sim.stop()
    return out


def by_zone(bindings):
    return dict((b["zone"], counts(b["resource_allocation"]["vm_reservations"])) for b in bindings)


def test_site_tenancy_writes_the_bindings_and_namespace_zones_on_9_1(run91):
    first = run91["first"]
    assert first.rc == 0, first.stdout[-4000:]
    # hand sums of the design: zone A inference 2 (search) + training 1 (vision); zone B inference 1 (search)
    zones = run91["after_first"]
    sup = run91["supervisor"]
    assert zones["bindings"][sup] == {ZONE_A: {"gpu-inference": 2, "gpu-training": 1}, ZONE_B: {"gpu-inference": 1}}
    assert zones["namespaces"]["team-search"] == {
        ZONE_A: {"vm_reservations": {"gpu-inference": 2}, "disallow_unreserved_direct_path_usage": False},
        ZONE_B: {"vm_reservations": {"gpu-inference": 1}, "disallow_unreserved_direct_path_usage": False}}
    assert zones["namespaces"]["team-vision"] == {
        ZONE_A: {"vm_reservations": {"gpu-training": 1}, "disallow_unreserved_direct_path_usage": True}}
    again = run91["again"]
    assert again.rc == 0 and again.stats.get("changed") == 0, again.stdout[-4000:]


def test_check_mode_predicts_the_added_zone_exactly(run91):
    check, real = run91["check"], run91["real"]
    assert check.rc == 0 and real.rc == 0, (check.stdout[-3000:], real.stdout[-3000:])
    assert run91["check_writes"] == ({}, []), run91["check_writes"]
    assert check.stats.get("changed") == real.stats.get("changed") == 2   # the binding of zone B, team-vision's zones
    for name in ("Reserved VM classes on the Supervisors' zone bindings (vSphere API 9.0 and later)", "Namespaces of the tenants"):
        predicted = [(r.get("changed"), r.get("bindings"), r.get("zones")) for r in task(check, name)["results"]]
        done = [(r.get("changed"), r.get("bindings"), r.get("zones")) for r in task(real, name)["results"]]
        assert predicted == done, name
    # vCenter returns no reservations of a namespace zone: the zones a namespace had are reported unverified
    unverified = dict((r["__supervisor_gpu_tenancy_ns"]["name"], r.get("zones_unverified"))
                      for r in task(real, "Namespaces of the tenants")["results"])
    assert unverified == {"gpu-platform": None, "team-search": [ZONE_A, ZONE_B], "team-vision": [ZONE_A]}, unverified
    # zone B: 1 (search) + 2 (vision) inference VMs
    assert by_zone(run91["bindings"]) == {ZONE_A: {"gpu-inference": 2, "gpu-training": 1}, ZONE_B: {"gpu-inference": 3}}
    assert run91["zones"]["namespaces"]["team-vision"][ZONE_B] == {
        "vm_reservations": {"gpu-inference": 2}, "disallow_unreserved_direct_path_usage": True}
    # 9.1's reserved/used split per cluster: the zone's cluster, all reserved, nothing used
    b = [x for x in run91["bindings"] if x["zone"] == ZONE_B][0]
    alloc = [r["cluster_allocation"] for r in b["resource_allocation"]["vm_reservations"]]
    assert [list(a.values()) for a in alloc] == [[{"reserved": 3, "used": 0}]]
    # InfoV2.zones lists the zones, not their reservations
    assert run91["v2"]["zones"] == [{"zone": ZONE_A, "type": "WORKLOAD", "marked_for_removal": False},
                                    {"zone": ZONE_B, "type": "WORKLOAD", "marked_for_removal": False}]


def test_the_simulator_refuses_an_unknown_class_and_a_count_the_zone_cannot_hold(run91):
    status, msg = run91["no_class"]
    assert status == 404 and "VM class no-such-class not found" in msg, msg
    # zone B: two hosts, each with 2 H100 cards out of MIG mode; a training VM takes 4 full cards
    # (nvidia_h100-80c): 2 VMs need 8, the zone holds 4
    status, msg = run91["too_many"]
    assert status == 400 and "need 8 vGPUs of profile nvidia_h100-80c" in msg and "at most 4" in msg, msg
    assert by_zone(run91["bindings_after_refusals"]) == by_zone(run91["bindings"])


def test_the_audit_names_a_binding_drifted_by_hand_and_the_role_repairs_it(run91):
    drift = run91["drift_audit"]
    assert not drift.get("failed"), drift.get("msg")
    found = [(f["rule"], f["object"]) for f in drift["findings"] if f["rule"].startswith("zone_binding")]
    assert found == [("zone_binding_reservations_changed", "zone binding gpu-h100/%s" % ZONE_A)], drift["findings"]
    message = [f["message"] for f in drift["findings"] if f["rule"].startswith("zone_binding")][0]
    assert "reserves gpu-inference x1, gpu-training x1; after the role: gpu-inference x2, gpu-training x1" in message
    assert run91["repair"].rc == 0
    changed = [name for name, r in run91["repair"].tasks if r.get("changed")]
    assert len(changed) == 1 and "Reserved VM classes on the Supervisors' zone bindings" in changed[0], changed
    clean = run91["clean_audit"]
    assert not clean.get("failed") and not [f for f in clean["findings"] if f["rule"].startswith("zone_binding")]


def test_a_namespace_created_with_zones_on_the_v2_create(run91):
    res = run91["v2_create"]
    assert res.rc == 0, res.stdout[-3000:]
    assert run91["zones_v2"] == {ZONE_A: {"vm_reservations": {}, "disallow_unreserved_direct_path_usage": False}}
    posts = [e for e in run91["entries"] if e["method"] == "POST" and e["path"].endswith("/instances/v2")]
    assert len(posts) == 1 and posts[0]["request_body"]["zones"] == [
        {"name": ZONE_A, "vm_reservations": [], "disallow_unreserved_direct_path_usage": False}], posts


def test_every_exchange_fits_the_9_1_bindings(run91):
    contract = rest_contract.load()
    mismatches, _exempt = contract.check_all(run91["entries"])
    assert not mismatches, "\n".join(str(m) for m in mismatches)
    ops = set(op.id for op in (contract.operation_of(e) for e in run91["entries"]) if op is not None)
    assert {"com.vmware.vcenter.namespace_management.supervisors.zones.bindings.list",
            "com.vmware.vcenter.namespace_management.supervisors.zones.bindings.create",
            "com.vmware.vcenter.namespace_management.supervisors.zones.bindings.update",
            "com.vmware.vcenter.namespaces.instances.update",
            "com.vmware.vcenter.namespaces.instances.create_v2",
            "com.vmware.vcenter.namespaces.instances.get_v2"} <= ops, sorted(ops)


def test_8_0_3_refuses_before_any_change(tmp_path):
    import vsphere_sim

    log = tmp_path / "rest.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VSPHERESIM_REST_LOG", str(log))
        sim = vsphere_sim.start(FLEET, reboot_seconds=0.2, api_version="8.0.3")
    try:
        res = run_playbook(play(design()), env=dict(sim.env))
        assert res.rc != 0
        assert "reserved VM classes need vSphere API 9.0 or later" in res.stdout and "8.0.3.0" in res.stdout, res.stdout[-3000:]
        assert writes(sim.stats()) == ({}, [])
        # 8.0.3 serves no zone bindings at all
        client = rest(sim)
        try:
            cluster = client.get("/api/vcenter/namespace-management/clusters")[0]["cluster"]
            status, _msg = refused(client, "GET", BINDINGS % cluster, None)
        finally:
            client.close()
        assert status == 404
    finally:
        sim.stop()
    # the refusal, as every other exchange of the run, is an answer the bindings declare
    mismatches, _exempt = rest_contract.load().check_all(rest_contract.read_log(log))
    assert not mismatches, "\n".join(str(m) for m in mismatches)
