"""supervisor_zone_binding through main(): the Supervisor's zone bindings replaced by a fake store. Check mode
predicts the real run, a rerun changes nothing, reservations of classes the collection does not manage stay,
and a vCenter older than API 9.0 or a bad reservation is refused before any call that changes something."""
import pytest

from ansible_collections.gpupool.vcf.plugins.modules import supervisor_zone_binding
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main

PASSWORD = "vc-pw-never-shown"


class Bindings:
    """The fake bindings store of one vCenter: {supervisor: {zone: Info}}; ``calls`` the writes."""

    version = "9.0.0.0"
    store = {}
    calls = []

    def __init__(self, rest, soap=None, api_version=None):
        self.rest, self.soap = rest, soap

    def api_version(self):
        return Bindings.version

    def list(self, supervisor):
        return [dict(b) for _zone, b in sorted(Bindings.store.get(supervisor, {}).items())]

    def create(self, supervisor, specs):
        Bindings.calls.append(("create", supervisor, [s["zone"] for s in specs]))
        for spec in specs:
            assert spec["type"] == "WORKLOAD"
            Bindings.store.setdefault(supervisor, {})[spec["zone"]] = dict(
                zone=spec["zone"], type="WORKLOAD", namespaces=[], marked_for_removal=False,
                resource_allocation=dict(vm_reservations=[dict(r) for r in spec["resource_allocation"]["vm_reservations"]]))

    def update(self, supervisor, zone, vm_reservations):
        Bindings.calls.append(("update", supervisor, zone))
        Bindings.store[supervisor][zone]["resource_allocation"] = dict(vm_reservations=[dict(r) for r in vm_reservations])


@pytest.fixture
def bindings(monkeypatch):
    Bindings.version, Bindings.store, Bindings.calls = "9.0.0.0", {}, []
    monkeypatch.setattr(supervisor_zone_binding, "ZoneBindingApi", Bindings)
    return Bindings


def run(check_mode=False, diff=False, **params):
    return run_main(supervisor_zone_binding, dict(VSPHERE, password=PASSWORD, **params), check_mode=check_mode, diff=diff)


WANT = dict(supervisor="sv-1", managed_classes=["gpu-inference", "gpu-training"],
            reservations=[dict(zone="zone-a", vm_class="gpu-inference", count=2),
                          dict(zone="zone-b", vm_class="gpu-training", count=1)])


def test_check_mode_predicts_the_create_and_the_rerun_changes_nothing(bindings):
    check = run(check_mode=True, diff=True, **WANT)
    assert bindings.calls == [] and bindings.store == {}
    real = run(diff=True, **WANT)
    assert real == check and real["changed"] is True
    assert bindings.calls == [("create", "sv-1", ["zone-a", "zone-b"])]
    assert real["bindings"] == [dict(zone="zone-a", vm_reservations=[dict(reserved_vm_class="gpu-inference", count=2)]),
                                dict(zone="zone-b", vm_reservations=[dict(reserved_vm_class="gpu-training", count=1)])]
    assert missing_keys(real, supervisor_zone_binding, "always", "with --diff") == []
    again = run(diff=True, **WANT)
    assert again["changed"] is False and again["changes"] == [] and len(bindings.calls) == 1
    assert shows([check, real, again], PASSWORD) == []


def test_a_changed_count_is_one_update_and_foreign_classes_stay(bindings):
    run(**WANT)
    bindings.store["sv-1"]["zone-a"]["resource_allocation"]["vm_reservations"].append(
        dict(reserved_vm_class="someone-elses", count=3))
    more = dict(WANT)
    more["reservations"] = [dict(zone="zone-a", vm_class="gpu-inference", count=3),
                            dict(zone="zone-b", vm_class="gpu-training", count=0)]
    check = run(check_mode=True, diff=True, **more)
    real = run(diff=True, **more)
    assert real == check and [(c["object"], c["field"]) for c in real["changes"]] == [
        ("supervisor sv-1 zone zone-a", "vm_reservations"), ("supervisor sv-1 zone zone-b", "vm_reservations")]
    assert bindings.calls[1:] == [("update", "sv-1", "zone-a"), ("update", "sv-1", "zone-b")]
    assert bindings.store["sv-1"]["zone-a"]["resource_allocation"]["vm_reservations"] == [
        dict(reserved_vm_class="gpu-inference", count=3), dict(reserved_vm_class="someone-elses", count=3)]
    assert bindings.store["sv-1"]["zone-b"]["resource_allocation"]["vm_reservations"] == []
    assert run(**more)["changed"] is False


def test_an_older_api_is_refused_before_any_change(bindings):
    bindings.version = "8.0.3.0"
    out = run(**WANT)
    assert out["failed"] is True and bindings.calls == [] and bindings.store == {}
    assert "need vSphere API 9.0 or later" in out["msg"] and "8.0.3.0" in out["msg"] and "nothing was changed" in out["msg"]


@pytest.mark.parametrize("bad, words", [
    (dict(zone="zone-a", vm_class="gpu-inference", count=-1), "Invalid input for supervisor_zone_binding: reservations[2].count"),
    (dict(zone=" ", vm_class="gpu-inference", count=1), "reservations[2].zone"),
    (dict(zone="zone-a", vm_class="gpu-inference", count=1), "given twice"),
])
def test_bad_reservations_are_refused_before_any_call(bindings, bad, words):
    args = dict(WANT)
    args["reservations"] = WANT["reservations"] + [bad]
    out = run(**args)
    assert out["failed"] is True and words in out["msg"] and bindings.calls == []


class Supervisors:
    """The Supervisor summaries: one Supervisor on cluster gpu-h100; ``reads`` counts the lookups."""

    reads = 0

    def __init__(self, rest, soap=None, api_version=None):
        pass

    def supervisors(self):
        Supervisors.reads += 1
        return [dict(cluster="domain-c9", cluster_name="gpu-h100", supervisor="domain-c9")]


def test_the_supervisor_is_found_by_its_cluster_and_an_unknown_one_is_refused(bindings, monkeypatch):
    Supervisors.reads = 0
    monkeypatch.setattr(supervisor_zone_binding, "NamespaceApi", Supervisors)
    by_cluster = dict(WANT, cluster="gpu-h100")
    del by_cluster["supervisor"]
    res = run(**by_cluster)
    assert res["changed"] is True and res["supervisor"] == "domain-c9"
    assert bindings.calls == [("create", "domain-c9", ["zone-a", "zone-b"])]
    res = run(**{**by_cluster, "cluster": "gpu-l40s"})
    assert res["failed"] and "cluster gpu-l40s has no Supervisor" in res["msg"] and "gpu-h100" in res["msg"]
    assert len(bindings.calls) == 1
    # on API 8.x the refusal comes first: not even the summaries are read
    bindings.version, reads = "8.0.3.0", Supervisors.reads
    res = run(**by_cluster)
    assert res["failed"] and "need vSphere API 9.0" in res["msg"] and Supervisors.reads == reads
