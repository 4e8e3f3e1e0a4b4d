# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How every client of the collection repeats a call after a transient failure (pure: the
clients sleep, this only says how long): bounded exponential backoff with jitter, the HTTP
answers that mean "not now", and the words of a retry message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

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


def times(count):
    """once, twice, three times, 4 times."""
    return TIMES.get(count, "%d times" % count)


def seconds(value):
    """30 for 30.0, 2.5 for 2.5."""
    if value is None:
        return "?"
    return ("%d" % value) if float(value).is_integer() else ("%s" % value)
