"""pure/_rfc3339: the Kubernetes API's timestamps as instants, whichever way they were read."""
import calendar
import datetime

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._rfc3339 import epoch_seconds, instant

UTC = datetime.timezone.utc
NOON = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
NOON_S = float(calendar.timegm((2026, 11, 30, 12, 0, 0)))


@pytest.mark.parametrize("text", [
    "2026-11-30T12:00:00Z",          # metav1.Time as the API server writes it
    "2026-11-30T12:00:00+00:00",     # the typed client's datetime written back as text
    "2026-11-30t12:00:00z",          # RFC 3339 allows the lower case
    "2026-11-30 12:00:00Z",          # and a space for the T
    "2026-11-30T13:00:00+01:00",
    "2026-11-30T07:30:00-04:30",
    "2026-11-30T13:00:00+0100",
    " 2026-11-30T12:00:00Z ",
])
def test_the_same_instant_in_every_form(text):
    assert instant(text) == NOON
    assert epoch_seconds(text) == NOON_S


def test_fractions_kept_by_instant_and_dropped_by_epoch_seconds():
    assert instant("2026-11-30T12:00:00.123456Z") == NOON.replace(microsecond=123456)
    assert instant("2026-11-30T12:00:00.5Z") == NOON.replace(microsecond=500000)
    assert instant("2026-11-30T12:00:00.123456789Z") == NOON.replace(microsecond=123456)  # nanoseconds cut
    assert epoch_seconds("2026-11-30T12:00:00.999999Z") == NOON_S


def test_datetimes_of_the_typed_client():
    assert instant(NOON) == NOON
    assert instant(NOON.replace(tzinfo=None)) == NOON  # naive: UTC, as the client's deserializer means it
    east = NOON.astimezone(datetime.timezone(datetime.timedelta(hours=9)))
    assert instant(east) == NOON and instant(east).utcoffset() == datetime.timedelta(0)
    assert epoch_seconds(NOON) == NOON_S


@pytest.mark.parametrize("value", [
    None, "", "yesterday", "2026-11-30", "2026-11-30T12:00:00",  # a time with no zone names no instant
    "2026-11-30T12:00Z", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-30T24:00:00Z",
    "2026-11-30T12:00:00+1:00", 1796666581, ["2026-11-30T12:00:00Z"],
])
def test_anything_else_is_no_instant(value):
    assert instant(value) is None
    assert epoch_seconds(value) is None
