# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The M/G/c knee against an independent reference: a discrete-event simulation of a c-server
FCFS queue written here (not the module's code), Poisson arrivals, job durations of a balanced
two-phase hyperexponential distribution of mean 1 and coefficient of variation 2 (a variance four
times the exponential's; seeded random).

FCFS with c servers is simulated by the Kiefer-Wolfowitz recursion (tests/lib/fcfs_queue.py, shared
with the knee test on the rig): the jobs in arrival order, each starting when the earliest free
server frees (or at once), its wait the difference.

What it shows, for c in 1, 2, 4, 8 at the knee utilization (p90 wait of the M/G/c model at
``TARGET`` service times): the M/M/c mean wait misses the simulated one by a factor above 2
(it ignores the durations' spread), the Allen-Cunneen one is within ``TOLERANCE``. The
approximation is exact for c = 1 (Pollaczek-Khinchine) and known to err on the high side for
several servers and a high CV; measured here, over the seeds tried, it is from 1 % below to 17 %
above the simulated mean (the test prints its figures), so the tolerance is 20 %. And the M/M/c
knee is misplaced: at its knee the simulated p90 wait is more than twice the target; at the
M/G/c knee it is within 30 % below to 15 % above the target (the exponential tail approximation
is mostly conservative).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import math
import random

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing as q
from tests.lib.fcfs_queue import fcfs_waits, percentile

CV = 2.0
TARGET = 5.0  # seconds of p90 wait, durations of mean 1 s
PERCENTILE = 90.0
TOLERANCE = 0.20
JOBS, WARM_UP = 300000, 30000


def hyperexponential(rng, cv):
    """A draw of durations of mean 1 and coefficient of variation ``cv`` (> 1): two exponential
    phases with balanced means (p / mu1 = (1 - p) / mu2)."""
    c2 = cv * cv
    p = (1.0 + math.sqrt((c2 - 1.0) / (c2 + 1.0))) / 2.0

    def draw():
        if rng.random() < p:
            return rng.expovariate(2.0 * p)
        return rng.expovariate(2.0 * (1.0 - p))
    return draw


def simulate(c, rho, seed, jobs=JOBS, warm_up=WARM_UP):
    """The waits (sorted) of ``jobs`` jobs after ``warm_up`` at utilization ``rho`` on ``c`` FCFS servers."""
    rng = random.Random(seed)
    draw = hyperexponential(rng, CV)
    rate = c * rho  # arrivals per second for durations of mean 1
    waits = fcfs_waits(c, ((rng.expovariate(rate), draw()) for _i in range(jobs + warm_up)))[warm_up:]
    waits.sort()
    return waits


def test_the_simulated_durations_have_the_stated_cv():
    rng = random.Random(3)
    draw = hyperexponential(rng, CV)
    cv, mean, n = q.cv_from_durations([draw() for _i in range(200000)])
    assert n == 200000 and mean == pytest.approx(1.0, rel=0.03) and cv == pytest.approx(CV, rel=0.05)


@pytest.mark.parametrize("c", [1, 2, 4, 8])
def test_allen_cunneen_matches_the_simulation_where_mmc_does_not(c):
    rho = q.knee(c, 1.0, TARGET, PERCENTILE, cv=CV)
    waits = simulate(c, rho, seed=41 + c)
    simulated = sum(waits) / len(waits)
    mmc, mgc = q.mean_wait(c, rho, 1.0), q.mean_wait(c, rho, 1.0, cv=CV)
    print("c=%d knee %.3f: simulated mean wait %.3f s, M/M/c %.3f s (%+.0f %%), M/G/c %.3f s (%+.0f %%); "
          "simulated p90 %.2f s, M/G/c p90 %.2f s" % (
              c, rho, simulated, mmc, (mmc / simulated - 1) * 100, mgc, (mgc / simulated - 1) * 100,
              percentile(waits, PERCENTILE), q.wait_percentile(c, rho, 1.0, PERCENTILE, cv=CV)))
    assert simulated / mmc > 2.0
    assert mgc == pytest.approx(simulated, rel=TOLERANCE)
    # the tail approximation's p90 is the target at the knee; the simulated one near it
    assert 0.7 * TARGET <= percentile(waits, PERCENTILE) <= 1.15 * TARGET


@pytest.mark.parametrize("c", [1, 4])
def test_the_mmc_knee_is_past_the_real_one(c):
    rho = q.knee(c, 1.0, TARGET, PERCENTILE)
    assert rho > q.knee(c, 1.0, TARGET, PERCENTILE, cv=CV)
    waits = simulate(c, rho, seed=7 + c, jobs=100000, warm_up=10000)
    print("c=%d M/M/c knee %.3f: simulated p90 %.2f s against a target of %g s" % (
        c, rho, percentile(waits, PERCENTILE), TARGET))
    assert percentile(waits, PERCENTILE) > 2 * TARGET


def test_the_fit_recovers_the_cv_from_simulated_waits():
    # waits of an M/G/2 (CV 2) at three loads, set against M/M/2 with the known service time:
    # the waits' service time over the real one is (1 + cv^2) / 2, so cv_from_waits gives the CV back
    # (within what Allen-Cunneen errs at c = 2)
    rows = []
    for k, rho in enumerate((0.4, 0.55, 0.7)):
        waits = simulate(2, rho, seed=90 + k, jobs=100000, warm_up=10000)
        rows.append((rho, sum(waits) / len(waits), len(waits)))
    fit = q.fit_service(2, rows)
    cv = q.cv_from_waits(1.0, fit["service_s"])
    print("M/G/2 waits: M/M/c fit %.3f s, implied CV %.2f; RMS M/M/c %.3f s, M/G/c %.3f s" % (
        fit["service_s"], cv, q.wait_rms(2, rows, 1.0), q.wait_rms(2, rows, 1.0, cv=CV)))
    assert cv == pytest.approx(CV, rel=0.15)
    assert q.wait_rms(2, rows, 1.0, cv=CV) < q.wait_rms(2, rows, 1.0) / 3
