# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run per pool at a time: the run lease the collection keeps on each GPU cluster (pure: no I/O).

A changing run (site.yml, host_rebuild.yml) takes a lease on every GPU cluster it changes before
its first change, renews it where a long play starts and releases it at its end and on its failure
path. The lease is a record in the cluster's custom attribute ``gpupool.vcf.run-lease``: compact
JSON ``{"expiry": "<UTC>", "holder": "<run id>", "start": "<UTC>"}`` (times as
``YYYY-MM-DDTHH:MM:SSZ``); an empty value is no lease.

:func:`decide` says, per cluster, what a run does with the record it read: take a free lease,
renew its own when less than 90 % of the ttl is left, take over another run's expired one, refuse another
run's lease that has not expired, release its own, or leave the record alone (check mode, nothing to release,
its own lease with enough time left). A refusal
names the holder, its start and its expiry and how to go on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json

LEASE_FIELD = "gpupool.vcf.run-lease"

# Longer than any single module call of a run can last, so that a run killed while a module works
# (ansible-core's workers and their modules go on after the controller is killed) keeps the pool
# until that orphaned module has ended: the longest wait of one call is a vLCM remediation
# (esxi_gpu_host_vlcm_remediate_timeout, 7200 s); a direct install's evacuation, install and reboot
# waits are each 1800 s. Three hours cover the longest with an hour to spare.
DEFAULT_TTL = 10800
MIN_TTL = 60

# A run's own lease is renewed only when less than this share of the ttl asked is left (or more than the
# whole ttl: a shorter ttl asked). A rerun within the first tenth of the ttl after a write leaves the
# record alone (changed false); after any call the lease still has at least 90 % of the ttl, which with
# the default (9720 s) outlasts the longest single module call (7200 s).
RENEW_BELOW_PERCENT = 90

TAKE = "take"
RENEW = "renew"
TAKE_OVER = "take_over"
REFUSE = "refuse"
RELEASE = "release"
NONE = "none"

ACQUIRED = "acquired"
RELEASED = "released"

_STAMP = "%Y-%m-%dT%H:%M:%SZ"
_EPOCH = datetime.datetime(1970, 1, 1)


class LeaseError(Exception):
    """A lease the run may not take or release (another run's), or a bad lease input."""


def stamp(seconds):
    """Epoch seconds as the record's UTC text."""
    return (_EPOCH + datetime.timedelta(seconds=int(seconds))).strftime(_STAMP)


def parse_stamp(text):
    """The record's UTC text as epoch seconds (None when it is not one)."""
    try:
        moment = datetime.datetime.strptime(str(text), _STAMP)
    except ValueError:
        return None
    return (moment - _EPOCH).total_seconds()


def run_id(environ, user, host, pid, token):
    """The holder a run writes: ``awx-job-<id>`` under AWX / Automation Controller (JOB_ID in the
    environment of the job), else ``<user>@<controller host>:<pid>-<token>`` (``token``: a random
    part, so that two runs of one user on one controller never share a lease)."""
    job = str((environ or {}).get("JOB_ID") or "").strip()
    if job:
        return "awx-job-%s" % job
    return "%s@%s:%s-%s" % (user or "unknown", host or "localhost", pid, token)


def parse_lease(value):
    """The record as a dict with ``holder``, ``start`` and ``expiry`` (epoch seconds), or None when
    there is no lease. A value that is not such a record (written by hand, cut short) reads as
    ``{"unreadable": value}``: it is nobody's lease and is replaced."""
    if not value:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("holder"):
        start, expiry = parse_stamp(data.get("start")), parse_stamp(data.get("expiry"))
        if start is not None and expiry is not None:
            return dict(holder=str(data["holder"]), start=start, expiry=expiry)
    return dict(unreadable=value)


def format_lease(lease):
    """The record as written: compact JSON of a lease, "" for None (no lease)."""
    if not lease:
        return ""
    return json.dumps(dict(holder=lease["holder"], start=stamp(lease["start"]), expiry=stamp(lease["expiry"])),
                      sort_keys=True, separators=(",", ":"))


def view(lease):
    """A lease as a result shows it (times as UTC text), None for no lease."""
    if not lease:
        return None
    if "unreadable" in lease:
        return dict(unreadable=lease["unreadable"])
    return dict(holder=lease["holder"], start=stamp(lease["start"]), expiry=stamp(lease["expiry"]))


def _held_by_other(lease, holder):
    return bool(lease) and "unreadable" not in lease and lease["holder"] != holder


def refusal(cluster, lease, now):
    """The sentence of a refused lease: who holds it, since when, until when, and how to go on."""
    left = int(max(0, lease["expiry"] - now))
    return ("GPU cluster %s is leased by run %s (since %s, until %s, %d s from now; custom attribute %s): "
            "another run is changing this pool. Wait for that run to end (the wait option, gpupool_lease_wait "
            "in the playbooks), or, if it was killed, rerun after %s: its lease has expired by then and is "
            "taken over" % (cluster, lease["holder"], stamp(lease["start"]), stamp(lease["expiry"]), left,
                            LEASE_FIELD, stamp(lease["expiry"])))


def decide(cluster, lease, holder, now, state=ACQUIRED, ttl=DEFAULT_TTL, check_mode=False):
    """What run ``holder`` does with the ``lease`` (:func:`parse_lease`) of ``cluster`` at ``now``.

    Returns {"cluster", "action", "before", "after", "write", "reason"}: ``after`` is the lease the
    record holds afterwards (None: no lease), ``write`` whether the record is written, ``reason`` a
    sentence (the refusal's for ``refuse``). ``state`` ``acquired``: take a free (or unreadable)
    lease, renew the run's own (see :func:`needs_renewal`; else ``none``: the record is left as it is),
    take over another's that has expired (its expiry is at or before ``now``), refuse another's that has not;
    ``released``: clear the run's own, leave no lease alone, refuse another's. In check mode nothing is
    written and nothing refused: the decision says what a real run would do and who holds the lease.
    """
    if not holder:
        raise LeaseError("a lease needs a holder (the run id)")
    if state not in (ACQUIRED, RELEASED):
        raise LeaseError("state must be %s or %s, not %s" % (ACQUIRED, RELEASED, state))
    if state == ACQUIRED and (not isinstance(ttl, int) or ttl < MIN_TTL):
        raise LeaseError("ttl must be at least %d seconds, not %s" % (MIN_TTL, ttl))
    other = _held_by_other(lease, holder)
    expired = other and lease["expiry"] <= now
    if state == ACQUIRED:
        fresh = dict(holder=holder, start=now, expiry=now + ttl)
        own = not other and bool(lease) and "unreadable" not in lease
        if own and not needs_renewal(lease, now, ttl):
            out = dict(action=NONE, after=lease, reason=(
                "holds its lease until %s (%d s left, at least %d %% of the ttl of %d s): not renewed"
                % (stamp(lease["expiry"]), lease["expiry"] - now, RENEW_BELOW_PERCENT, ttl)))
        elif own:
            fresh["start"] = lease["start"]
            left = lease["expiry"] - now
            if left <= 0:
                why = "it had expired"
            elif left > ttl:
                why = "%d s were left, more than the ttl of %d s" % (left, ttl)
            else:
                why = "%d s were left, under %d %% of the ttl of %d s" % (left, RENEW_BELOW_PERCENT, ttl)
            out = dict(action=RENEW, after=fresh,
                       reason="renews its lease until %s (%s)" % (stamp(fresh["expiry"]), why))
        elif not other:
            out = dict(action=TAKE, after=fresh, reason="takes the free lease until %s" % stamp(fresh["expiry"]))
        elif expired:
            out = dict(action=TAKE_OVER, after=fresh,
                       reason="takes over the lease of run %s, expired at %s" % (lease["holder"], stamp(lease["expiry"])))
        else:
            out = dict(action=REFUSE, after=lease, reason=refusal(cluster, lease, now))
    else:
        if other:
            out = dict(action=REFUSE, after=lease,
                       reason=("the lease of GPU cluster %s is held by run %s (since %s, until %s), not by run %s: "
                               "a run releases only its own lease" % (cluster, lease["holder"], stamp(lease["start"]),
                                                                      stamp(lease["expiry"]), holder)))
        elif lease:
            out = dict(action=RELEASE, after=None, reason="releases its lease")
        else:
            out = dict(action=NONE, after=None, reason="holds no lease")
    out.update(cluster=cluster, before=lease)
    out["write"] = out["action"] in (TAKE, RENEW, TAKE_OVER, RELEASE) and not check_mode
    if check_mode and out["action"] == REFUSE:
        out["reason"] = "check mode: %s" % out["reason"]
    return out


def needs_renewal(lease, now, ttl):
    """Whether the run's own ``lease`` is written again at ``now`` for ``ttl``: when less than
    RENEW_BELOW_PERCENT % of ``ttl`` is left (expired included), or more than ``ttl`` (a shorter ttl is
    asked than the one it was written with). Else a rerun leaves it alone."""
    left = lease["expiry"] - now
    return left * 100 < ttl * RENEW_BELOW_PERCENT or left > ttl


def decide_all(leases, holder, now, state=ACQUIRED, ttl=DEFAULT_TTL, check_mode=False):
    """:func:`decide` for every cluster of ``leases`` ({cluster: lease}), in name order. Outside check
    mode one refused cluster refuses them all, before any write (:class:`LeaseError` with every
    refusal's sentence and "nothing was changed")."""
    decisions = [decide(c, leases[c], holder, now, state, ttl, check_mode) for c in sorted(leases)]
    refused = [d for d in decisions if d["action"] == REFUSE]
    if refused and not check_mode:
        raise LeaseError("%s; nothing was changed" % "; ".join(d["reason"] for d in refused))
    return decisions


def wait_left(leases, holder, now, deadline):
    """Seconds to sleep before reading again while another run holds an unexpired lease of ``leases``
    and ``deadline`` (epoch seconds) is not passed: until the earliest of the deadline and the latest
    expiry among them, at most 30 s at a time, at least 1 s. None when there is nothing to wait for
    (no lease of another run unexpired) or the deadline has come."""
    held = [lease["expiry"] for lease in leases.values() if _held_by_other(lease, holder) and lease["expiry"] > now]
    if not held or now >= deadline:
        return None
    return max(1.0, min(30.0, deadline - now, max(held) - now))


def validate_holder(holder):
    """A holder given by the user: printable, one line, at most 200 characters."""
    text = str(holder or "")
    if not text.strip() or len(text) > 200 or any(ord(ch) < 32 for ch in text):
        raise LeaseError("holder must be one line of 1 to 200 printable characters")
    return text


__all__ = ["ACQUIRED", "DEFAULT_TTL", "LEASE_FIELD", "LeaseError", "MIN_TTL", "NONE", "REFUSE", "RELEASE", "RELEASED",
           "RENEW", "RENEW_BELOW_PERCENT", "TAKE", "TAKE_OVER", "decide", "decide_all", "format_lease", "needs_renewal",
           "parse_lease", "parse_stamp", "refusal", "run_id", "stamp", "validate_holder", "view", "wait_left"]
