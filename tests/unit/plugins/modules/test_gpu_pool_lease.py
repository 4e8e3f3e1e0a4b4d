"""gpu_pool_lease on the runner over a fake record store: two runs on one pool, the wait, check mode,
the read-back after a parallel write, release. The decisions themselves: tests/unit/.../pure/test_lease.py."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _lease
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_lease
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from tests.lib.fake_module import Exited, FakeModule
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main
from tests.lib.clock import Clock

NOW = 1767607200  # 2026-01-05T10:00:00Z


class Store:
    """The clusters' records on "vCenter"; ``on_write`` runs after each write (a parallel run)."""

    def __init__(self, records=None):
        self.records = dict(records or {"gpu-h100": "", "gpu-l40s": ""})
        self.on_write = None


@pytest.fixture
def store(monkeypatch):
    box = Store()

    class Leases:
        def __init__(self, client, clusters, field=_lease.LEASE_FIELD):
            self.clusters, self.reads, self.writes = clusters, 0, 0

        def read(self):
            self.reads += 1
            return dict((c, box.records[c]) for c in self.clusters)

        def write(self, cluster, text):
            self.writes += 1
            box.records[cluster] = text
            if box.on_write:
                box.on_write(cluster)

    monkeypatch.setattr(gpu_pool_lease, "ClusterLeases", Leases)
    return box


def run(holder, clock, check_mode=False, **params):
    p = dict(clusters=["gpu-h100", "gpu-l40s"], state="acquired", holder=holder, ttl=600, wait=0)
    p.update(params)
    module = FakeModule(p, check_mode=check_mode)
    with pytest.raises(Exited) as out:
        Runner(module, gpu_pool_lease.PoolLease(module, sleep=clock.sleep, clock=clock)).run()
    return out.value.result


def test_second_run_refused_naming_the_holder_while_the_first_holds(store):
    clock = Clock(NOW)
    first = run("run-a", clock)
    assert first["changed"] and not first.get("failed")
    assert [(x["cluster"], x["action"]) for x in first["leases"]] == [("gpu-h100", "take"), ("gpu-l40s", "take")]
    assert first["requests"] == {"reads": 2, "writes": 2, "waited": 0}  # read, write each, read back
    before = dict(store.records)
    clock.now += 60
    second = run("run-b", clock)
    assert second["failed"]
    msg = second["msg"]
    assert msg.startswith("Unable to take the run lease of GPU clusters gpu-h100, gpu-l40s: GPU cluster gpu-h100 is leased by run run-a")
    assert "since 2026-01-05T10:00:00Z, until 2026-01-05T10:10:00Z" in msg and "nothing was changed" in msg
    assert store.records == before


def test_taken_over_after_expiry_and_renewed_by_its_holder(store):
    clock = Clock(NOW)
    run("run-a", clock)
    clock.now += 600  # the expiry
    took = run("run-b", clock)
    assert [x["action"] for x in took["leases"]] == ["take_over", "take_over"]
    assert _lease.parse_lease(store.records["gpu-h100"])["holder"] == "run-b"
    clock.now += 10
    again = run("run-b", clock, ttl=900)
    assert [x["action"] for x in again["leases"]] == ["renew", "renew"]
    assert again["leases"][0]["after"] == {"holder": "run-b", "start": "2026-01-05T10:10:00Z", "expiry": "2026-01-05T10:25:10Z"}


def test_wait_reads_again_until_the_other_lease_expires(store):
    clock = Clock(NOW)
    run("run-a", clock)
    waited = run("run-b", clock, wait=3600)
    assert not waited.get("failed") and [x["action"] for x in waited["leases"]] == ["take_over", "take_over"]
    assert sum(clock.slept) == 600 and max(clock.slept) <= 30
    assert waited["requests"]["waited"] == 600


def test_wait_shorter_than_the_lease_ends_refused(store):
    clock = Clock(NOW)
    run("run-a", clock)
    out = run("run-b", clock, wait=45)
    assert out["failed"] and "leased by run run-a" in out["msg"] and sum(clock.slept) == 45


def test_check_mode_takes_none_and_reports_the_holder(store):
    clock = Clock(NOW)
    free = run("run-a", clock, check_mode=True)
    assert store.records == {"gpu-h100": "", "gpu-l40s": ""}
    assert free["requests"]["writes"] == 0 and [x["action"] for x in free["leases"]] == ["take", "take"]
    run("run-a", clock)
    held = run("run-b", clock, check_mode=True, wait=3600)
    assert not held.get("failed") and clock.slept == []  # no wait in check mode
    assert held["held_by_others"]["gpu-l40s"]["holder"] == "run-a"


def test_parallel_writer_wins_and_this_run_is_refused(store):
    clock = Clock(NOW)

    def parallel(cluster):
        if cluster == "gpu-l40s":
            store.records[cluster] = _lease.format_lease(dict(holder="run-z", start=NOW, expiry=NOW + 600))

    store.on_write = parallel
    out = run("run-a", clock)
    assert out["failed"] and "gpu-l40s" in out["msg"] and "run-z" in out["msg"] and "parallel run" in out["msg"]
    assert out["holder"] == "run-a"


def test_release_own_and_refuse_anothers(store):
    clock = Clock(NOW)
    run("run-a", clock)
    refused = run("run-b", clock, state="released")
    assert refused["failed"] and "only its own" in refused["msg"]
    done = run("run-a", clock, state="released")
    assert [x["action"] for x in done["leases"]] == ["release", "release"]
    assert store.records == {"gpu-h100": "", "gpu-l40s": ""}
    nothing = run("run-a", clock, state="released")
    assert not nothing["changed"] and nothing["requests"]["writes"] == 0


def test_default_holder_is_the_awx_job_or_the_controller_process(store, monkeypatch):
    monkeypatch.setenv("JOB_ID", "4711")
    out = run(None, Clock(NOW))
    assert out["holder"] == "awx-job-4711"
    monkeypatch.delenv("JOB_ID")
    assert "@" in gpu_pool_lease.default_holder() and gpu_pool_lease.default_holder() != gpu_pool_lease.default_holder()


# -- through main(): the arguments parsed by AnsibleModule, the clock of the run frozen --------

PASSWORD = "vc-pw-never-shown"
HELD = {"holder": "run-a", "start": "2026-01-05T10:00:00Z", "expiry": "2026-01-05T13:00:00Z"}  # the default ttl
PAIR = {"gpu-h100": HELD, "gpu-l40s": HELD}


@pytest.fixture
def main_clock(monkeypatch):
    """The clock and sleep PoolLease takes by default, for every run through main()."""
    clock = Clock(NOW)
    monkeypatch.setattr(gpu_pool_lease.PoolLease.__init__, "__defaults__", (clock.sleep, clock))
    return clock


def lease(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, password=PASSWORD, clusters=["gpu-h100", "gpu-l40s"], holder="run-a")
    args.update(params)
    return run_main(gpu_pool_lease, args, check_mode=check_mode, diff=diff)


def without_requests(result):
    return dict((k, v) for k, v in result.items() if k != "requests")


def test_main_check_mode_predicts_the_take_and_diff_shows_the_records(store, main_clock):
    check = lease(check_mode=True, diff=True)
    assert store.records == {"gpu-h100": "", "gpu-l40s": ""} and check["requests"]["writes"] == 0
    real = lease(diff=True)
    assert without_requests(real) == without_requests(check) and real["changed"] is True
    assert real["requests"] == {"reads": 2, "writes": 2, "waited": 0.0}  # a read, a write per cluster, the read-back
    assert real["diff"] == dict(before={"gpu-h100": None, "gpu-l40s": None}, after=PAIR)
    assert [(x["cluster"], x["action"]) for x in real["leases"]] == [("gpu-h100", "take"), ("gpu-l40s", "take")]
    assert _lease.parse_lease(store.records["gpu-l40s"])["holder"] == "run-a"
    assert missing_keys(real, gpu_pool_lease, "always") == []
    # a rerun of the holder at once leaves its lease alone (all of the ttl left): nothing written, not changed
    predicted = lease(check_mode=True, diff=True)
    again = lease(diff=True)
    assert without_requests(again) == without_requests(predicted) and again["changed"] is False
    assert [x["action"] for x in again["leases"]] == ["none", "none"] and again["diff"] == dict(before=PAIR, after=PAIR)
    assert again["requests"] == {"reads": 1, "writes": 0, "waited": 0.0}  # no write, so no read-back
    assert _lease.parse_lease(store.records["gpu-h100"]) == _lease.parse_lease(_lease.format_lease(
        dict(holder="run-a", start=NOW, expiry=NOW + _lease.DEFAULT_TTL)))
    assert shows([check, real, predicted, again], PASSWORD) == []


def test_main_rerun_renews_once_under_90_percent_of_the_ttl_is_left(store, main_clock):
    lease()
    main_clock.now += _lease.DEFAULT_TTL // 10  # 1080 s on: 90 % left, still not renewed
    kept = lease()
    assert kept["changed"] is False and [x["action"] for x in kept["leases"]] == ["none", "none"]
    main_clock.now += 1  # under 90 % left
    predicted = lease(check_mode=True)
    renewed = lease(diff=True)
    assert renewed["changed"] is True and predicted["changed"] is True
    assert [x["action"] for x in renewed["leases"]] == ["renew", "renew"] == [x["action"] for x in predicted["leases"]]
    assert renewed["diff"]["after"]["gpu-h100"] == {"holder": "run-a", "start": "2026-01-05T10:00:00Z",
                                                    "expiry": "2026-01-05T13:18:01Z"}
    assert renewed["requests"]["writes"] == 2


def test_main_release_is_predicted_then_idempotent(store, main_clock):
    lease()
    check = lease(check_mode=True, diff=True, state="released")
    assert _lease.parse_lease(store.records["gpu-h100"])["holder"] == "run-a"
    real = lease(diff=True, state="released")
    assert without_requests(real) == without_requests(check) and real["changed"] is True
    assert real["diff"] == dict(before=PAIR, after={"gpu-h100": None, "gpu-l40s": None})
    assert store.records == {"gpu-h100": "", "gpu-l40s": ""}
    again = lease(state="released")
    assert again["changed"] is False and again["requests"]["writes"] == 0
    assert [x["action"] for x in again["leases"]] == ["none", "none"]


def test_main_another_runs_lease_is_refused_naming_its_holder(store, main_clock):
    lease()
    before = dict(store.records)
    res = lease(holder="run-b")
    assert res["failed"] is True and "changed" not in res
    assert res["msg"].startswith("Unable to take the run lease of GPU clusters gpu-h100, gpu-l40s: GPU cluster gpu-h100 "
                                 "is leased by run run-a")
    assert store.records == before


def test_main_bad_input_is_refused_before_vcenter_is_read(store, main_clock, monkeypatch):
    opened = []
    monkeypatch.setattr(gpu_pool_lease, "ClusterLeases", lambda *a, **k: opened.append(a))
    res = lease(clusters=["gpu-h100", ""], wait=-5)
    assert res["failed"] is True and res["msg"].startswith("Invalid input for gpu_pool_lease: ")
    assert "clusters must not hold empty names (item 1)" in res["invalid_input"] and len(res["invalid_input"]) == 2
    res = lease(state="taken")
    assert res["failed"] is True and "value of state must be one of: acquired, released, got: taken" in res["msg"]
    res = run_main(gpu_pool_lease, dict(VSPHERE, holder="run-a"))
    assert res["failed"] is True and res["msg"] == "missing required arguments: clusters"
    assert opened == [] and shows(res, PASSWORD) == []


def test_main_a_failed_write_names_the_cluster_and_what_was_written(store, main_clock):
    def refuse(cluster):
        if cluster == "gpu-l40s":
            raise VsphereError("SetField refused: NoPermission")

    store.on_write = refuse  # gpu-l40s is written after gpu-h100: the first write stands
    res = lease()
    assert res["failed"] is True and res["changed"] is True and res["written"] == ["gpu-h100"]
    assert res["msg"].startswith("Unable to write the run lease of GPU cluster gpu-l40s: SetField refused: NoPermission")
    assert _lease.parse_lease(store.records["gpu-h100"])["holder"] == "run-a"
    assert shows(res, PASSWORD) == []
