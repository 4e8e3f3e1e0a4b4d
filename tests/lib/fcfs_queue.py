"""A discrete-event simulation of a c-server FCFS queue, the tests' reference for the queueing models of
plugins/module_utils/pure/_queueing.py (written apart from them: it models nothing, it serves jobs).

FCFS with c servers follows the Kiefer-Wolfowitz recursion: the jobs in arrival order, each starting
when the earliest free server frees (or at once when one is free), its wait the difference.
"""
import heapq


def fcfs_waits(c, jobs):
    """The waits of ``jobs`` (an iterable of (time since the previous arrival, duration), in arrival order)
    on ``c`` FCFS servers, in arrival order."""
    free = [0.0] * c
    now, waits = 0.0, []
    for gap, duration in jobs:
        now += gap
        first = heapq.heappop(free)
        wait = first - now if first > now else 0.0
        heapq.heappush(free, now + wait + duration)
        waits.append(wait)
    return waits


def percentile(waits, p):
    """The wait ``p`` % of the (sorted) ``waits`` stay at or below (the nearest rank above)."""
    return waits[min(len(waits) - 1, int(p / 100.0 * len(waits)))]
