# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API's timestamps (RFC 3339) as instants (pure: no I/O).

The API server writes ``metav1.Time`` as ``2026-11-30T16:00:00Z`` and ``metav1.MicroTime`` with six
digits of fraction; the kubernetes client's typed models give a ``datetime``, and a record made from
one (an annotation written before the reads went by path) holds ``+00:00`` where the API writes
``Z``. Every reader that compares or counts such times parses them here, so that the same instant
is the same value whichever way it was read.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import datetime
import re

_PATTERN = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:?\d{2})$")


def instant(value):
    """An aware UTC ``datetime`` of an RFC 3339 timestamp (text) or of a ``datetime`` (naive taken
    as UTC); None for anything else, empty or not a timestamp."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=datetime.timezone.utc)
        return value.astimezone(datetime.timezone.utc)
    if not isinstance(value, str):
        return None
    m = _PATTERN.match(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    zone = m.group(8)
    offset = datetime.timedelta(0)
    if zone not in ("Z", "z"):
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        if zone[0] == "-":
            offset = -offset
    try:
        moment = datetime.datetime(year, month, day, hour, minute, second, micro,
                                   tzinfo=datetime.timezone(offset))
    except ValueError:  # a day or an hour out of range
        return None
    return moment.astimezone(datetime.timezone.utc)


def epoch_seconds(value):
    """Whole seconds since the epoch of ``value`` (``instant``), the fraction dropped as
    ``metav1.Time`` drops it; None when it is no timestamp."""
    moment = instant(value)
    if moment is None:
        return None
    return float(calendar.timegm(moment.utctimetuple()))


__all__ = ["epoch_seconds", "instant"]
