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

Model: M/G/c (``cv`` given, the coefficient of variation of the job durations: their standard
deviation over their mean). The Allen-Cunneen approximation (A. O. Allen, Probability,
Statistics, and Queueing Theory with Computer Science Applications, 2nd ed., Academic Press
1990) scales the M/M/c mean wait by ``(ca^2 + cs^2) / 2``; arrivals are Poisson
here (``ca^2 = 1``), so ``Wq = (1 + cv^2) / 2 * C(c, a) * S / (c (1 - rho))``. It is exact for
c = 1 (the Pollaczek-Khinchine formula) and for exponential durations (cv = 1: M/M/c, so every
function here gives its M/M/c result when ``cv`` is left at 1). Its tail keeps the probability of
waiting at ``C(c, a)`` and takes the wait of those that wait as exponential with the scaled mean
(an exponential conditional-wait approximation, exact for M/M/c; W. Whitt, Approximations for the
GI/G/m queue, Production and Operations Management 2(2), 1993, discusses such approximations of the
probability of waiting and the conditional wait): ``P(wait > t) = C(c, a) exp(-t C(c, a) / Wq)``,
so every percentile wait is the M/M/c one times ``(1 + cv^2) / 2``. Heavy-tailed durations make
the real tail longer than exponential at the far percentiles; the mean is the better-founded
figure (the unit tests set both against a discrete-event simulation).

The knee of a pool is the utilization at which that percentile wait reaches the SLO target:
the wait grows without bound as ``rho`` nears 1, and the knee is where it crosses the target.
``service_from_load`` measures ``S`` from the samples by Little's law (busy server-seconds over
the jobs that came): the service time the knee uses. ``fit_service`` finds the ``S`` that fits
the measured (utilization, mean wait) samples best, by weighted least squares of
``Wq = S * f(rho)`` with ``f(rho) = (1 + cv^2) / 2 * C(c, c rho) / (c (1 - rho))``; samples at
``rho >= 1`` (a saturated window: the measured utilization cannot say how far beyond 1 the
offered load was) and at ``rho <= 0`` are left out. ``wait_rms`` is the fit error of a model:
the RMS of the measured mean waits against the modelled ones. ``cv_from_durations`` measures the
coefficient of variation from the job durations; ``cv_from_waits`` the one the waits imply (the
waits' service time over the measured one is ``(1 + cv^2) / 2``).

Limits (docs/capacity.md): the models assume a stationary arrival rate within each window, jobs
that take one slot-group each (a gang of several GPUs is one server of ``gpus_per_job`` GPUs),
FCFS order, and enough samples below saturation to fit; few samples give a loose fit, which
``fit_service`` reports as its RMS error.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import math

MODEL = "M/M/c (Erlang C)"
MODEL_MGC = "M/G/c (Allen-Cunneen)"


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


def scale(cv):
    """The Allen-Cunneen factor ``(1 + cv^2) / 2`` of Poisson arrivals and durations of
    coefficient of variation ``cv`` (1 for exponential durations)."""
    if isinstance(cv, bool) or not isinstance(cv, (int, float)) or not 0 <= cv < float("inf"):
        raise QueueingError("the coefficient of variation must be a number of at least 0, not %r" % (cv,))
    return (1.0 + cv * cv) / 2.0


def _factor(c, rho, cv=1.0):
    """``f(rho) = (1 + cv^2) / 2 * C(c, c rho) / (c (1 - rho))``: the mean wait in units of the service time."""
    return scale(cv) * erlang_c(c, c * rho) / (c * (1.0 - rho))


def mean_wait(c, rho, service, cv=1.0):
    """The mean queueing wait at utilization ``rho`` (0 <= rho < 1) with mean service time ``service``
    and durations of coefficient of variation ``cv`` (1: M/M/c)."""
    _check_rho(rho)
    return service * _factor(_servers(c), rho, cv)


def wait_percentile(c, rho, service, percentile, cv=1.0):
    """The wait ``percentile`` (0-100, exclusive) of the jobs stays below, at utilization ``rho``
    (the tail approximation of the module's docstring when ``cv`` is not 1)."""
    _check_rho(rho)
    tail = _tail(percentile)
    factor = scale(cv)
    prob = erlang_c(_servers(c), c * rho)
    if prob <= tail:
        return 0.0
    return factor * service / (c * (1.0 - rho)) * math.log(prob / tail)


def _check_rho(rho):
    if not 0 <= rho < 1:
        raise QueueingError("utilization %r is outside [0, 1): the queue does not settle at or above 1" % (rho,))


def _tail(percentile):
    if not 0 < percentile < 100:
        raise QueueingError("the percentile must be above 0 and below 100, not %r" % (percentile,))
    return 1.0 - percentile / 100.0


def knee(c, service, target, percentile, tolerance=1e-6, cv=1.0):
    """The utilization (0-1) at which the ``percentile`` wait reaches ``target`` seconds, for
    durations of coefficient of variation ``cv`` (1: M/M/c).

    The percentile wait rises monotonically with the utilization, from 0 to infinity as
    utilization nears 1, so the crossing is found by bisection to ``tolerance``."""
    c = _servers(c)
    _tail(percentile)
    scale(cv)
    if service <= 0:
        raise QueueingError("the service time must be positive, not %r" % (service,))
    if target <= 0:
        return 0.0
    low, high = 0.0, 1.0
    while high - low > tolerance:
        mid = (low + high) / 2.0
        if wait_percentile(c, mid, service, percentile, cv) >= target:
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


def _usable(rho, wait, count):
    return count > 0 and 0 < rho < 1 and wait is not None and wait >= 0


def fit_service(c, samples, cv=1.0):
    """The service time ``S`` that fits ``samples`` best: ``[(utilization, mean wait, count)]``,
    for durations of coefficient of variation ``cv`` (1: M/M/c).

    Weighted least squares of ``wait = S * f(utilization)`` (weights: the count of waits in
    the sample): ``S = sum(n W f) / sum(n f^2)``. Returns a dict: ``service_s`` (None when no
    sample can carry the fit: every one saturated, idle or without queueing), ``used`` and
    ``left_out`` (saturated or empty samples), ``rms_s`` (the weighted RMS of the residuals in
    seconds)."""
    c = _servers(c)
    used, left_out = [], 0
    scale(cv)
    for rho, wait, count in samples:
        if not _usable(rho, wait, count):
            left_out += 1
            continue
        used.append((count, wait, _factor(c, rho, cv)))
    den = sum(n * f * f for n, _w, f in used)
    if not used or den <= 0:
        return dict(service_s=None, used=len(used), left_out=left_out, rms_s=None)
    service = sum(n * w * f for n, w, f in used) / den
    weight = sum(n for n, _w, _f in used)
    rms = math.sqrt(sum(n * (w - service * f) ** 2 for n, w, f in used) / weight)
    return dict(service_s=service, used=len(used), left_out=left_out, rms_s=rms)


def wait_rms(c, samples, service, cv=1.0):
    """The fit error of a model: the RMS (weighted by the counts) of the measured mean waits of
    ``samples`` (``[(utilization, mean wait, count)]``, the usable ones as in ``fit_service``)
    against the model's mean waits with service time ``service`` and durations of coefficient of
    variation ``cv``; None without a usable sample."""
    c = _servers(c)
    used = [(rho, w, n) for rho, w, n in samples if _usable(rho, w, n)]
    if not used:
        return None
    return math.sqrt(sum(n * (w - mean_wait(c, rho, service, cv)) ** 2 for rho, w, n in used)
                     / float(sum(n for _r, _w, n in used)))


def cv_from_durations(durations):
    """(coefficient of variation, mean, count) of job ``durations`` (seconds): the sample standard
    deviation (n - 1) over the mean; the CV is None with fewer than two positive durations."""
    values = [float(d) for d in durations if d is not None and d > 0]
    n = len(values)
    if n < 2:
        return None, (values[0] if values else None), n
    mean = sum(values) / n
    var = sum((d - mean) ** 2 for d in values) / (n - 1)
    return math.sqrt(var) / mean, mean, n


def cv_from_waits(service, wait_fit_service):
    """The coefficient of variation the waits imply: ``(1 + cv^2) / 2`` is the service time that fits
    the waits under M/M/c (``wait_fit_service``) over the measured one (``service``), so
    ``cv = sqrt(2 k - 1)``; 0 when the waits are shorter than even constant durations give
    (``k < 1/2``), None when either is not known."""
    if not service or service <= 0 or wait_fit_service is None:
        return None
    k = wait_fit_service / float(service)
    return math.sqrt(max(0.0, 2.0 * k - 1.0))


__all__ = ["MODEL", "MODEL_MGC", "QueueingError", "cv_from_durations", "cv_from_waits", "erlang_c", "fit_service",
           "knee", "mean_wait", "scale", "service_from_load", "wait_percentile", "wait_rms"]
