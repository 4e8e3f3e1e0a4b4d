"""supervisor_namespace's zones (reserved VM classes) through main(), the namespace API replaced by a fake that
keeps what vCenter keeps: the zones' ZoneSpecs, of which a read returns only the zone names (InfoV2.zones).
Check mode predicts the real run, a rerun changes nothing, a zone added to an existing namespace is one update
with that zone alone, the v2 create carries the zones, rewrite_zones writes a zone the namespace has, and a
vCenter older than API 9.0 or a bad reservation is refused before any call that changes something."""
import pytest

from ansible_collections.gpupool.vcf.plugins.modules import supervisor_namespace
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.modules.test_runner_modules import FakeNamespaces

PASSWORD = "vc-pw-never-shown"
TEAM = dict(name="team-a", cluster="gpu-h100", vm_classes=["gpu-inference"], description="gpupool tenant a")
ZONES = [dict(zone="zone-a", vm_class="gpu-inference", count=2), dict(zone="zone-b", vm_class="gpu-inference", count=1)]


class Zoned(FakeNamespaces):
    """The fake store with zones: {namespace: {zone: ZoneSpec}}; ``version`` the vCenter's API."""

    version = "9.1.0.0"
    kept = {}
    draining = set()

    def api_version(self):
        return Zoned.version

    def zones(self, name):   # the API's read: names only, as InfoV2.zones has them
        return [dict(zone=z, type="WORKLOAD", marked_for_removal=z in Zoned.draining)
                for z in sorted(Zoned.kept.get(name, {}))]

    def create(self, body, by_supervisor=False):
        body = dict(body)
        specs = body.pop("zones", None)
        FakeNamespaces.create(self, body, by_supervisor)
        if specs is not None:
            FakeNamespaces.calls[-1] += (sorted(s["name"] for s in specs),)
            for spec in specs:
                Zoned.kept.setdefault(body["namespace"], {})[spec["name"]] = spec

    def update(self, name, body):
        body = dict(body)
        specs = body.pop("zones", None)
        if body:
            FakeNamespaces.update(self, name, body)
        if specs is not None:
            FakeNamespaces.calls.append(("zones", name, sorted(s["name"] for s in specs)))
            for spec in specs:
                Zoned.kept.setdefault(name, {})[spec["name"]] = spec


@pytest.fixture
def api(monkeypatch):
    FakeNamespaces.store, FakeNamespaces.calls = {}, []
    Zoned.version, Zoned.kept, Zoned.draining = "9.1.0.0", {}, set()
    monkeypatch.setattr(supervisor_namespace, "NamespaceApi", Zoned)
    return Zoned


def run(check_mode=False, diff=False, **params):
    return run_main(supervisor_namespace, dict(VSPHERE, password=PASSWORD, **params), check_mode=check_mode, diff=diff)


def spec(zone, counts, disallow=False):
    return dict(name=zone, vm_reservations=[dict(reserved_vm_class=c, count=n) for c, n in counts],
                disallow_unreserved_direct_path_usage=disallow)


def test_a_new_namespace_gets_its_zones_in_one_update_and_a_rerun_changes_nothing(api):
    check = run(check_mode=True, diff=True, vm_reservations=ZONES, **TEAM)
    assert FakeNamespaces.calls == [] and api.kept == {}
    real = run(diff=True, vm_reservations=ZONES, **TEAM)
    assert real == check and real["changed"] is True
    # the v1 create (cluster) has no zones: they follow in one update
    assert FakeNamespaces.calls == [("create", "team-a", False), ("zones", "team-a", ["zone-a", "zone-b"])]
    assert api.kept["team-a"] == {"zone-a": spec("zone-a", [("gpu-inference", 2)]),
                                  "zone-b": spec("zone-b", [("gpu-inference", 1)])}
    assert real["zones"] == [spec("zone-a", [("gpu-inference", 2)]), spec("zone-b", [("gpu-inference", 1)])]
    assert real["zones_unverified"] == [] and real["diff"]["after"]["zones"] == real["zones"]
    again = run(vm_reservations=ZONES, **TEAM)
    assert again["changed"] is False and len(FakeNamespaces.calls) == 2
    assert again["zones_unverified"] == ["zone-a", "zone-b"]


def test_the_v2_create_carries_the_zones(api):
    res = run(name="team-v2", supervisor="domain-c9", vm_reservations=ZONES[:1], disallow_unreserved_direct_path_usage=True)
    assert res["changed"] is True
    assert FakeNamespaces.calls == [("create", "team-v2", True, ["zone-a"])]
    assert api.kept["team-v2"]["zone-a"] == spec("zone-a", [("gpu-inference", 2)], disallow=True)


def test_an_added_zone_is_one_update_with_that_zone_alone(api):
    run(vm_reservations=ZONES[:1], **TEAM)
    more = ZONES + [dict(zone="zone-b", vm_class="gpu-training", count=3)]
    check = run(check_mode=True, diff=True, vm_reservations=more, **TEAM)
    assert len(FakeNamespaces.calls) == 2
    real = run(diff=True, vm_reservations=more, **TEAM)
    assert real == check and real["changed_fields"] == ["zone"]
    assert FakeNamespaces.calls[2:] == [("zones", "team-a", ["zone-b"])]
    assert api.kept["team-a"]["zone-b"] == spec("zone-b", [("gpu-inference", 1), ("gpu-training", 3)])
    assert real["diff"]["before"]["zones"] == ["zone-a"]


def test_rewrite_zones_writes_a_zone_the_namespace_has(api):
    run(vm_reservations=ZONES, **TEAM)
    three = [dict(ZONES[0], count=3), ZONES[1]]
    # without rewrite_zones a count changed in a zone the namespace has is not seen: nothing to compare with
    assert run(vm_reservations=three, **TEAM)["changed"] is False
    res = run(vm_reservations=three, rewrite_zones=True, **TEAM)
    assert res["changed"] is True and FakeNamespaces.calls[-1] == ("zones", "team-a", ["zone-a", "zone-b"])
    assert api.kept["team-a"]["zone-a"] == spec("zone-a", [("gpu-inference", 3)])


@pytest.mark.parametrize("version", ["8.0.3.0", "8.0.2.0", None])
def test_an_older_vcenter_is_refused_before_any_call(api, version):
    api.version = version
    res = run(vm_reservations=ZONES, **TEAM)
    assert res["failed"] and "reserved VM classes need vSphere API 9.0 or later" in res["msg"]
    assert FakeNamespaces.calls == [] and FakeNamespaces.store == {}
    # without vm_reservations the namespace itself is made as before
    assert run(**TEAM)["changed"] is True and FakeNamespaces.calls == [("create", "team-a", False)]


def test_bad_reservations_are_refused_before_any_call(api):
    twice = [ZONES[0], dict(ZONES[0], count=1)]
    res = run(vm_reservations=twice, **TEAM)
    assert res["failed"] and "given twice" in res["msg"] and FakeNamespaces.calls == []
    res = run(vm_reservations=[dict(ZONES[0], count=-1)], **TEAM)
    assert res["failed"] and "count" in res["msg"] and FakeNamespaces.calls == []


def test_a_zone_marked_for_removal_is_refused_before_any_change(api):
    run(vm_reservations=ZONES, **TEAM)
    api.draining = {"zone-b"}
    res = run(vm_reservations=[ZONES[1], dict(zone="zone-c", vm_class="gpu-inference", count=1)], **TEAM)
    assert res["failed"] and "zone zone-b of namespace team-a is marked for removal" in res["msg"], res["msg"]
    assert len(FakeNamespaces.calls) == 2 and "zone-c" not in api.kept["team-a"]
    # a zone being drained that the entry does not name is no reason to stop
    assert run(vm_reservations=[dict(zone="zone-c", vm_class="gpu-inference", count=1)], **TEAM)["changed"] is True
