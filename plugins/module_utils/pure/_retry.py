# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How every client of the collection repeats a call after a transient failure (pure: the
clients sleep, this only says how long): bounded exponential backoff with jitter, the HTTP
answers that mean "not now", a Retry-After header read, which answers allow a change to be
sent again, and the words of a retry message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
from datetime import datetime, timedelta, tzinfo
from email.utils import parsedate_tz, mktime_tz

ATTEMPTS = 3
BACKOFF_BASE = 0.5
BACKOFF_CAP = 8.0
# answers that say "not now" rather than "no": retried on idempotent calls
TRANSIENT_STATUS = (429, 500, 502, 503, 504)
TIMES = {1: "once", 2: "twice", 3: "three times"}


def backoff_delay(attempt, retry_after=None, base=BACKOFF_BASE, cap=BACKOFF_CAP, rand=random.random):
    """Seconds to wait after failed attempt `attempt` (1, 2, ...): the step doubles from `base`
    up to `cap`, with jitter (between half and all of the step); at least what a Retry-After
    header asked, within `cap`."""
    step = min(cap, base * 2 ** (attempt - 1))
    delay = step * (0.5 + rand() / 2)
    if retry_after:
        delay = max(delay, min(cap, retry_after))
    return delay


def backoff_delays(initial=0.5, maximum=10.0, rand=random.random):
    """Endless delays of the same backoff from `initial` up to `maximum` seconds."""
    attempt = 1
    while True:
        yield backoff_delay(attempt, base=initial, cap=maximum, rand=rand)
        attempt += 1


class _UTC(tzinfo):
    """UTC (kept here so the module imports on every Python ansible-test checks)."""

    def utcoffset(self, dt):
        return timedelta(0)

    def tzname(self, dt):
        return "UTC"

    def dst(self, dt):
        return timedelta(0)


UTC = _UTC()
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def retry_after_seconds(value, now):
    """Seconds a ``Retry-After`` header value asks the client to wait, or None when the header
    is absent or unreadable. RFC 9110 section 10.2.3: either delta-seconds (a non-negative
    integer) or an HTTP-date; a date in the past asks for 0. ``now`` is an aware datetime."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if text.isdigit():
        return float(int(text))
    parsed = parsedate_tz(text)
    if parsed is None:
        return None
    try:
        when = EPOCH + timedelta(seconds=mktime_tz(parsed))
    except (OverflowError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds())


def retry_after_delay(retry_after, remaining):
    """How long to sleep before the repeat a Retry-After asked for, within the ``remaining``
    seconds of the call's deadline; None when the deadline leaves no time for a repeat."""
    if remaining <= 0:
        return None
    return max(0.0, min(float(retry_after), float(remaining)))


def change_may_repeat(status=None, retry_after=None, unsent=False):
    """Whether a change (POST, PATCH, PUT, DELETE) may be sent again after a failed attempt: only
    where it provably did not reach the server. ``unsent``: the connection was refused (or never
    opened), so nothing was sent. Else only a 503 that carries a readable Retry-After
    (``retry_after`` in seconds, from :func:`retry_after_seconds`): the server's own word that it
    did not take the request. A 502 or 504 (a gateway that may have forwarded it), a 503 without
    Retry-After, any other status, a reset or a read timeout may all come after the change was
    carried out."""
    if unsent:
        return True
    return status == 503 and retry_after is not None


def times(count):
    """once, twice, three times, 4 times."""
    return TIMES.get(count, "%d times" % count)


def seconds(value):
    """30 for 30.0, 2.5 for 2.5."""
    if value is None:
        return "?"
    return ("%d" % value) if float(value).is_integer() else ("%s" % value)
