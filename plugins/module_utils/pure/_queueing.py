# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The queueing knee of a GPU pool (pure, standard library only).

Model: M/M/c. A pool is ``c`` servers (its GPU slots divided by the GPUs one job holds),
jobs arrive at random (Poisson) and hold their GPUs for an exponentially distributed time of
mean ``S`` (the service time). At utilization ``rho`` (offered load ``a = c * rho`` Erlangs)
a job waits with probability ``C(c, a)`` (Erlang C), and the wait of those that wait is
exponential with rate ``c (1 - rho) / S``, so

* the mean wait is ``Wq = C(c, a) * S / (c (1 - rho))``;
* ``P(wait > t) = C(c, a) * exp(-c (1 - rho) t / S)``, and the wait at percentile ``p`` is
  ``S / (c (1 - rho)) * ln(C(c, a) / (1 - p))`` when ``C(c, a) > 1 - p``, else 0.

The knee of a pool is the utilization at which that percentile wait reaches the SLO target:
the wait grows without bound as ``rho`` nears 1, and the knee is where it crosses the target.
``service_from_load`` measures ``S`` from the samples by Little's law (busy server-seconds over
the jobs that came): the service time the knee uses. ``fit_service`` finds the ``S`` that fits
the measured (utilization, mean wait) samples best, by weighted least squares of
``Wq = S * f(rho)`` with ``f(rho) = C(c, c rho) / (c (1 - rho))``; samples at ``rho >= 1`` (a
saturated window: the measured utilization cannot say how far beyond 1 the offered load was)
and at ``rho <= 0`` are left out. Where the two differ much, the queue does not wait the way
M/M/c says (bursts, windows too short for the queue to settle, heavy-tailed job sizes).

Limits (docs/capacity.md): the model assumes a stationary arrival rate within each window,
exponential job durations (real job sizes are often heavier tailed: the waits are then longer
than modelled, Kingman's G/G/1 approximation scales the wait by ``(ca^2 + cs^2) / 2``), jobs
that take one slot-group each (a gang of several GPUs is one server of ``gpus_per_job`` GPUs),
and enough samples below saturation to fit; few samples give a loose fit, which
``fit_service`` reports as its RMS error.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import math

MODEL = "M/M/c (Erlang C)"


class QueueingError(ValueError):
    """Input the model cannot use."""


def _servers(c):
    if isinstance(c, bool) or not isinstance(c, int) or c < 1:
        raise QueueingError("the number of servers must be a whole number of at least 1, not %r" % (c,))
    return c


def erlang_c(c, a):
    """Probability that a job waits in M/M/c with ``c`` servers and offered load ``a`` Erlangs (a < c).

    Computed through the Erlang B recursion ``B(k) = a B(k-1) / (k + a B(k-1))`` and
    ``C = c B / (c - a (1 - B))``, which stays exact for large ``c``."""
    c = _servers(c)
    if a < 0:
        raise QueueingError("the offered load must not be negative, not %r" % (a,))
    if a >= c:
        return 1.0
    if a == 0:
        return 0.0
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


def _factor(c, rho):
    """``f(rho) = C(c, c rho) / (c (1 - rho))``: the mean wait in units of the service time."""
    return erlang_c(c, c * rho) / (c * (1.0 - rho))


def mean_wait(c, rho, service):
    """The mean queueing wait at utilization ``rho`` (0 <= rho < 1) with mean service time ``service``."""
    _check_rho(rho)
    return service * _factor(_servers(c), rho)


def wait_percentile(c, rho, service, percentile):
    """The wait ``percentile`` (0-100, exclusive) of the jobs stays below, at utilization ``rho``."""
    _check_rho(rho)
    tail = _tail(percentile)
    prob = erlang_c(_servers(c), c * rho)
    if prob <= tail:
        return 0.0
    return service / (c * (1.0 - rho)) * math.log(prob / tail)


def _check_rho(rho):
    if not 0 <= rho < 1:
        raise QueueingError("utilization %r is outside [0, 1): the queue does not settle at or above 1" % (rho,))


def _tail(percentile):
    if not 0 < percentile < 100:
        raise QueueingError("the percentile must be above 0 and below 100, not %r" % (percentile,))
    return 1.0 - percentile / 100.0


def knee(c, service, target, percentile, tolerance=1e-6):
    """The utilization (0-1) at which the ``percentile`` wait reaches ``target`` seconds.

    The percentile wait rises monotonically with the utilization, from 0 to infinity as
    utilization nears 1, so the crossing is found by bisection to ``tolerance``."""
    c = _servers(c)
    _tail(percentile)
    if service <= 0:
        raise QueueingError("the service time must be positive, not %r" % (service,))
    if target <= 0:
        return 0.0
    low, high = 0.0, 1.0
    while high - low > tolerance:
        mid = (low + high) / 2.0
        if wait_percentile(c, mid, service, percentile) >= target:
            high = mid
        else:
            low = mid
    return low


def service_from_load(c, window, samples):
    """The mean service time the samples measure, by Little's law on the servers: the busy
    server-seconds of all windows (utilization x ``c`` x ``window``) over the jobs that came in
    them; ``samples``: ``[(utilization, jobs)]``. None without jobs."""
    c = _servers(c)
    jobs = sum(n for _rho, n in samples)
    if jobs <= 0:
        return None
    return sum(max(0.0, rho) * c * window for rho, _n in samples) / float(jobs)


def fit_service(c, samples):
    """The service time ``S`` that fits ``samples`` best: ``[(utilization, mean wait, count)]``.

    Weighted least squares of ``wait = S * f(utilization)`` (weights: the count of waits in
    the sample): ``S = sum(n W f) / sum(n f^2)``. Returns a dict: ``service_s`` (None when no
    sample can carry the fit: every one saturated, idle or without queueing), ``used`` and
    ``left_out`` (saturated or empty samples), ``rms_s`` (the weighted RMS of the residuals in
    seconds)."""
    c = _servers(c)
    used, left_out = [], 0
    for rho, wait, count in samples:
        if count <= 0 or rho <= 0 or rho >= 1 or wait is None or wait < 0:
            left_out += 1
            continue
        used.append((count, wait, _factor(c, rho)))
    den = sum(n * f * f for n, _w, f in used)
    if not used or den <= 0:
        return dict(service_s=None, used=len(used), left_out=left_out, rms_s=None)
    service = sum(n * w * f for n, w, f in used) / den
    weight = sum(n for n, _w, _f in used)
    rms = math.sqrt(sum(n * (w - service * f) ** 2 for n, w, f in used) / weight)
    return dict(service_s=service, used=len(used), left_out=left_out, rms_s=rms)


__all__ = ["MODEL", "QueueingError", "erlang_c", "fit_service", "knee", "mean_wait", "service_from_load",
           "wait_percentile"]
