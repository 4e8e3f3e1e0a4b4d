"""pure._lease: every decision a run makes about a GPU cluster's run lease."""
import json

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _lease

NOW = 1767607200  # 2026-01-05T10:00:00Z
ME = "ops@ctl:100-aaaa"
OTHER = "awx-job-4711"


def lease(holder, start, expiry):
    return dict(holder=holder, start=start, expiry=expiry)


def test_stamps_round_trip():
    assert _lease.stamp(NOW) == "2026-01-05T10:00:00Z"
    assert _lease.parse_stamp("2026-01-05T10:00:00Z") == NOW
    assert _lease.parse_stamp("yesterday") is None


def test_record_round_trip_and_unreadable_values():
    text = _lease.format_lease(lease(ME, NOW, NOW + 60))
    assert json.loads(text) == {"holder": ME, "start": "2026-01-05T10:00:00Z", "expiry": "2026-01-05T10:01:00Z"}
    assert _lease.parse_lease(text) == lease(ME, NOW, NOW + 60)
    assert _lease.parse_lease("") is None and _lease.format_lease(None) == ""
    for bad in ("{", "[]", '{"holder": "x"}', '{"holder": "x", "start": "now", "expiry": "later"}'):
        assert _lease.parse_lease(bad) == {"unreadable": bad}


def test_run_id_from_awx_or_the_controller():
    assert _lease.run_id({"JOB_ID": "4711"}, "ops", "ctl", 100, "aaaa") == "awx-job-4711"
    assert _lease.run_id({}, "ops", "ctl", 100, "aaaa") == "ops@ctl:100-aaaa"
    assert _lease.run_id({"JOB_ID": " "}, None, None, 7, "b") == "unknown@localhost:7-b"


def test_free_lease_is_taken_for_ttl():
    d = _lease.decide("gpu-h100", None, ME, NOW, ttl=600)
    assert d["action"] == _lease.TAKE and d["write"]
    assert d["after"] == lease(ME, NOW, NOW + 600)


def test_unreadable_record_is_taken():
    d = _lease.decide("gpu-h100", {"unreadable": "junk"}, ME, NOW)
    assert d["action"] == _lease.TAKE and d["after"]["holder"] == ME


def test_own_lease_is_renewed_keeping_its_start():
    d = _lease.decide("gpu-h100", lease(ME, NOW - 100, NOW + 50), ME, NOW, ttl=600)
    assert d["action"] == _lease.RENEW and d["write"]
    assert d["after"] == lease(ME, NOW - 100, NOW + 600)


def test_own_lease_with_at_least_90_percent_of_the_ttl_left_is_left_alone():
    for left in (540, 599, 600):  # 90 % of the ttl of 600 s, more, the whole ttl
        d = _lease.decide("gpu-h100", lease(ME, NOW - 10, NOW + left), ME, NOW, ttl=600)
        assert d["action"] == _lease.NONE and not d["write"], left
        assert d["after"] == d["before"] == lease(ME, NOW - 10, NOW + left)
        assert "not renewed" in d["reason"] and "90 %" in d["reason"]
        predicted = _lease.decide("gpu-h100", lease(ME, NOW - 10, NOW + left), ME, NOW, ttl=600, check_mode=True)
        assert predicted["action"] == _lease.NONE and predicted["after"] == d["after"]


def test_own_lease_is_renewed_under_90_percent_left_or_above_the_ttl_asked():
    under = _lease.decide("gpu-h100", lease(ME, NOW - 61, NOW + 539), ME, NOW, ttl=600)
    assert under["action"] == _lease.RENEW and under["write"] and under["after"] == lease(ME, NOW - 61, NOW + 600)
    assert "539 s were left, under 90 %" in under["reason"]
    # a lease written with the default ttl, a call with a shorter one: it is written with the shorter expiry
    shorter = _lease.decide("gpu-h100", lease(ME, NOW, NOW + _lease.DEFAULT_TTL), ME, NOW, ttl=600)
    assert shorter["action"] == _lease.RENEW and shorter["after"]["expiry"] == NOW + 600
    assert "more than the ttl of 600 s" in shorter["reason"]
    # a longer ttl asked than the lease has left (under 90 % of it): renewed to the longer one
    longer = _lease.decide("gpu-h100", lease(ME, NOW, NOW + 600), ME, NOW, ttl=900)
    assert longer["action"] == _lease.RENEW and longer["after"]["expiry"] == NOW + 900
    assert _lease.needs_renewal(lease(ME, NOW, NOW + 540), NOW, 600) is False
    assert _lease.needs_renewal(lease(ME, NOW, NOW + 539), NOW, 600) is True


def test_own_expired_lease_is_renewed_too():
    d = _lease.decide("gpu-h100", lease(ME, NOW - 1000, NOW - 1), ME, NOW, ttl=600)
    assert d["action"] == _lease.RENEW and d["after"]["expiry"] == NOW + 600


def test_others_unexpired_lease_is_refused_naming_holder_start_expiry_and_the_way_on():
    d = _lease.decide("gpu-h100", lease(OTHER, NOW - 60, NOW + 3540), ME, NOW)
    assert d["action"] == _lease.REFUSE and not d["write"]
    assert d["after"] == d["before"]
    text = d["reason"]
    for part in ("gpu-h100", OTHER, "2026-01-05T09:59:00Z", "2026-01-05T10:59:00Z", "3540 s", "Wait", "expired",
                 "taken over", _lease.LEASE_FIELD):
        assert part in text, (part, text)


def test_others_expired_lease_is_taken_over():
    d = _lease.decide("gpu-h100", lease(OTHER, NOW - 7200, NOW), ME, NOW, ttl=600)  # expiry at now: expired
    assert d["action"] == _lease.TAKE_OVER and d["write"]
    assert d["after"] == lease(ME, NOW, NOW + 600)
    assert OTHER in d["reason"]


def test_check_mode_writes_nothing_and_refuses_nothing():
    taken = _lease.decide("gpu-h100", None, ME, NOW, check_mode=True)
    assert taken["action"] == _lease.TAKE and not taken["write"]
    held = _lease.decide("gpu-h100", lease(OTHER, NOW, NOW + 60), ME, NOW, check_mode=True)
    assert held["action"] == _lease.REFUSE and not held["write"] and held["reason"].startswith("check mode: ")
    decisions = _lease.decide_all({"a": lease(OTHER, NOW, NOW + 60), "b": None}, ME, NOW, check_mode=True)
    assert [(d["cluster"], d["action"], d["write"]) for d in decisions] == [("a", "refuse", False), ("b", "take", False)]
    released = _lease.decide("gpu-h100", lease(ME, NOW, NOW + 60), ME, NOW, state=_lease.RELEASED, check_mode=True)
    assert released["action"] == _lease.RELEASE and not released["write"]


def test_release_of_own_clears_free_is_left_alone():
    own = _lease.decide("gpu-h100", lease(ME, NOW, NOW + 60), ME, NOW, state=_lease.RELEASED)
    assert own["action"] == _lease.RELEASE and own["write"] and own["after"] is None
    free = _lease.decide("gpu-h100", None, ME, NOW, state=_lease.RELEASED)
    assert free["action"] == _lease.NONE and not free["write"]


@pytest.mark.parametrize("expiry", [NOW + 60, NOW - 60])
def test_release_of_anothers_lease_is_refused(expiry):
    d = _lease.decide("gpu-h100", lease(OTHER, NOW - 120, expiry), ME, NOW, state=_lease.RELEASED)
    assert d["action"] == _lease.REFUSE and not d["write"]
    assert OTHER in d["reason"] and "only its own" in d["reason"]
    with pytest.raises(_lease.LeaseError):
        _lease.decide_all({"gpu-h100": lease(OTHER, NOW - 120, expiry)}, ME, NOW, state=_lease.RELEASED)


def test_one_refused_cluster_refuses_all_before_any_write():
    leases = {"gpu-h100": None, "gpu-l40s": lease(OTHER, NOW, NOW + 60)}
    with pytest.raises(_lease.LeaseError) as err:
        _lease.decide_all(leases, ME, NOW)
    assert "gpu-l40s" in str(err.value) and OTHER in str(err.value) and "nothing was changed" in str(err.value)
    ok = _lease.decide_all({"gpu-l40s": None, "gpu-h100": lease(ME, NOW, NOW + 1)}, ME, NOW)
    assert [(d["cluster"], d["action"]) for d in ok] == [("gpu-h100", "renew"), ("gpu-l40s", "take")]


@pytest.mark.parametrize("kwargs", [dict(ttl=59), dict(ttl="600"), dict(state="held")])
def test_bad_inputs_are_refused(kwargs):
    with pytest.raises(_lease.LeaseError):
        _lease.decide("gpu-h100", None, ME, NOW, **kwargs)
    with pytest.raises(_lease.LeaseError):
        _lease.decide("gpu-h100", None, "", NOW)


@pytest.mark.parametrize("holder", ["", " ", "a\nb", "x" * 201])
def test_bad_holders(holder):
    with pytest.raises(_lease.LeaseError):
        _lease.validate_holder(holder)


def test_wait_until_the_other_lease_expires_or_the_deadline():
    held = {"a": lease(OTHER, NOW, NOW + 10), "b": lease(OTHER, NOW, NOW + 100)}
    assert _lease.wait_left(held, ME, NOW, NOW + 600) == 30.0  # at most 30 s at a time
    assert _lease.wait_left(held, ME, NOW + 95, NOW + 600) == 5.0  # until the latest expiry
    assert _lease.wait_left(held, ME, NOW, NOW + 3) == 3.0  # until the deadline
    assert _lease.wait_left(held, ME, NOW, NOW) is None  # no wait asked
    assert _lease.wait_left({"a": lease(OTHER, NOW - 10, NOW)}, ME, NOW, NOW + 600) is None  # expired
    assert _lease.wait_left({"a": lease(ME, NOW, NOW + 60), "b": None}, ME, NOW, NOW + 600) is None  # own / free
