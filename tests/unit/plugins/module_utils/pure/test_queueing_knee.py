# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The M/M/c knee against values worked out by hand.

Erlang C by the textbook sum, C(c, a) = (a^c / c!) (c / (c - a)) / (sum_{k<c} a^k / k! + (a^c / c!) (c / (c - a))):
  c=1, a=0.5:  C = rho = 0.5
  c=2, a=1:    (1/2 * 2) / (1 + 1 + 1) = 1/3
  c=2, a=1.5:  (1.125 * 4) / (1 + 1.5 + 4.5) = 4.5 / 7 = 0.642857...
  c=4, a=3:    (81/24 * 4) / (1 + 3 + 4.5 + 4.5 + 13.5) = 13.5 / 26.5 = 0.509434...
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import math

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _queueing as q


@pytest.mark.parametrize("c, a, want", [(1, 0.5, 0.5), (2, 1.0, 1 / 3.0), (2, 1.5, 4.5 / 7), (4, 3.0, 13.5 / 26.5),
                                        (3, 0.0, 0.0), (2, 2.0, 1.0)])
def test_erlang_c_hand_values(c, a, want):
    assert q.erlang_c(c, a) == pytest.approx(want, rel=1e-12)


def test_erlang_c_large_pool_stays_finite():
    # 512 servers at 95 %: the textbook sum overflows a float (a^c / c!), the recursion does not
    value = q.erlang_c(512, 0.95 * 512)
    assert 0 < value < 1


def test_mean_wait_mm1_and_mm2():
    # M/M/1: Wq = rho S / (1 - rho) = 0.5 * 10 / 0.5 = 10
    assert q.mean_wait(1, 0.5, 10.0) == pytest.approx(10.0)
    # M/M/2 at rho 0.75 (a = 1.5): Wq = C S / (c (1 - rho)) = (4.5/7) * 20 / 0.5
    assert q.mean_wait(2, 0.75, 20.0) == pytest.approx(4.5 / 7 * 40.0)


def test_wait_percentile_by_hand():
    # M/M/1, rho 0.5, S 10: P(W > t) = 0.5 exp(-0.05 t); 95th: t = 20 ln(0.5 / 0.05) = 20 ln 10
    assert q.wait_percentile(1, 0.5, 10.0, 95) == pytest.approx(20 * math.log(10))
    # C(2, 1) = 1/3 < 1 - 0.5: the median job does not wait at all
    assert q.wait_percentile(2, 0.5, 10.0, 50) == 0.0


def test_knee_is_where_the_percentile_crosses_the_target():
    assert q.knee(1, 10.0, 20 * math.log(10), 95) == pytest.approx(0.5, abs=1e-5)
    # M/M/4, S 60 s, 99th percentile at most 120 s: check the crossing itself
    rho = q.knee(4, 60.0, 120.0, 99)
    assert q.wait_percentile(4, rho, 60.0, 99) == pytest.approx(120.0, rel=1e-3)
    assert q.wait_percentile(4, rho - 0.01, 60.0, 99) < 120.0 < q.wait_percentile(4, rho + 0.01, 60.0, 99)
    # more servers at the same service time and target: a later knee (the pooling effect)
    assert q.knee(16, 60.0, 120.0, 99) > rho
    assert q.knee(4, 60.0, 0.0, 99) == 0.0


def test_fit_service_recovers_the_service_time():
    # M/M/2 at rho 0.5: f = C(2, 1) / (2 * 0.5) = 1/3, so a 10 s mean wait means S = 30 s
    fit = q.fit_service(2, [(0.5, 10.0, 4)])
    assert fit["service_s"] == pytest.approx(30.0) and fit["rms_s"] == pytest.approx(0.0, abs=1e-9)
    samples = [(rho, q.mean_wait(3, rho, 45.0), n) for rho, n in ((0.3, 5), (0.6, 8), (0.8, 3))]
    samples += [(1.0, 900.0, 6), (0.0, 0.0, 2), (0.7, 5.0, 0)]  # saturated, idle, empty: left out
    fit = q.fit_service(3, samples)
    assert fit["service_s"] == pytest.approx(45.0) and fit["used"] == 3 and fit["left_out"] == 3


def test_fit_service_weighted_least_squares_by_hand():
    # M/M/1: f(rho) = rho / (1 - rho): f(0.5) = 1, f(0.75) = 3
    # S = (2*4*1 + 1*12*3) / (2*1 + 1*9) = 44 / 11 = 4; residuals 0 and 0
    fit = q.fit_service(1, [(0.5, 4.0, 2), (0.75, 12.0, 1)])
    assert fit["service_s"] == pytest.approx(4.0)
    # residuals: 6-4*1=2 (n 2) and 9-4*3... S = (2*6*1 + 1*9*3) / 11 = 39/11
    fit = q.fit_service(1, [(0.5, 6.0, 2), (0.75, 9.0, 1)])
    s = 39 / 11.0
    assert fit["service_s"] == pytest.approx(s)
    assert fit["rms_s"] == pytest.approx(math.sqrt((2 * (6 - s) ** 2 + (9 - 3 * s) ** 2) / 3))


def test_service_time_by_littles_law():
    # 4 servers, 100 s windows: 0.5 x 4 x 100 + 0.75 x 4 x 100 = 500 busy server-seconds over 25 jobs
    assert q.service_from_load(4, 100, [(0.5, 10), (0.75, 15)]) == pytest.approx(20.0)
    assert q.service_from_load(4, 100, [(0.5, 0)]) is None


def test_fit_without_usable_samples():
    assert q.fit_service(2, [(1.0, 50.0, 3)])["service_s"] is None
    assert q.fit_service(2, [])["service_s"] is None


def test_mgc_mean_wait_is_pollaczek_khinchine_at_one_server():
    # M/G/1: Wq = rho S (1 + cv^2) / (2 (1 - rho)): rho 0.5, S 10, cv 2 -> 0.5 * 10 * 5 / 1 = 25
    assert q.mean_wait(1, 0.5, 10.0, cv=2.0) == pytest.approx(25.0)
    # M/D/1 (cv 0): half the M/M/1 wait
    assert q.mean_wait(1, 0.5, 10.0, cv=0.0) == pytest.approx(5.0)
    # M/G/2 at rho 0.75, cv 3: the M/M/2 wait (4.5/7 * 40) times (1 + 9) / 2
    assert q.mean_wait(2, 0.75, 20.0, cv=3) == pytest.approx(4.5 / 7 * 40.0 * 5)
    assert q.scale(1.0) == 1.0 and q.scale(0) == 0.5


def test_mgc_percentile_and_knee():
    # the exponential conditional wait with the scaled mean: the M/M/c percentile times (1 + cv^2) / 2
    assert q.wait_percentile(1, 0.5, 10.0, 95, cv=2.0) == pytest.approx(2.5 * 20 * math.log(10))
    assert q.wait_percentile(2, 0.5, 10.0, 50, cv=3.0) == 0.0  # P(wait) = 1/3 is unchanged
    # cv 1 is M/M/c: the existing callers' knees stay where they were
    assert q.knee(4, 60.0, 120.0, 99, cv=1.0) == q.knee(4, 60.0, 120.0, 99)
    # M/G/1 p95 at rho 0.5, S 10, cv 2 is 50 ln 10: the knee for that target is 0.5
    assert q.knee(1, 10.0, 50 * math.log(10), 95, cv=2.0) == pytest.approx(0.5, abs=1e-5)
    # spread durations: an earlier knee; constant ones: a later one
    assert q.knee(4, 60.0, 120.0, 99, cv=2.5) < q.knee(4, 60.0, 120.0, 99) < q.knee(4, 60.0, 120.0, 99, cv=0.0)


def test_fit_and_its_error_under_each_model():
    # M/G/1 waits with S 4 and cv 2 (f = 2.5 rho / (1 - rho)): 10 at rho 0.5, 30 at rho 0.75
    rows = [(0.5, 10.0, 2), (0.75, 30.0, 1), (1.0, 99.0, 5)]
    assert q.fit_service(1, rows, cv=2.0)["service_s"] == pytest.approx(4.0)
    # under M/M/1 the same waits fit S = 10 (2.5 times the real one): cv_from_waits says 2
    mmc = q.fit_service(1, rows)
    assert mmc["service_s"] == pytest.approx(10.0) and q.cv_from_waits(4.0, mmc["service_s"]) == pytest.approx(2.0)
    assert q.wait_rms(1, rows, 4.0, cv=2.0) == pytest.approx(0.0, abs=1e-9)
    # M/M/1 with the measured S 4 models 4 and 12: residuals 6 (n 2) and 18 (n 1)
    assert q.wait_rms(1, rows, 4.0) == pytest.approx(math.sqrt((2 * 36 + 324) / 3.0))
    assert q.wait_rms(1, [(1.0, 5.0, 3)], 4.0) is None
    # waits shorter than constant durations give: cv 0; nothing known: None
    assert q.cv_from_waits(10.0, 4.0) == 0.0 and q.cv_from_waits(None, 4.0) is None
    assert q.cv_from_waits(10.0, None) is None


def test_cv_from_durations():
    # 1 and 3: mean 2, sample standard deviation sqrt(2)
    assert q.cv_from_durations([1.0, 3.0, None, 0]) == (pytest.approx(math.sqrt(2) / 2), 2.0, 2)
    assert q.cv_from_durations([5.0]) == (None, 5.0, 1)
    assert q.cv_from_durations([]) == (None, None, 0)


@pytest.mark.parametrize("call", [lambda: q.erlang_c(0, 1.0), lambda: q.erlang_c(1.5, 1.0),
                                  lambda: q.mean_wait(2, 1.0, 10.0), lambda: q.wait_percentile(2, 0.5, 1.0, 100),
                                  lambda: q.knee(2, 0.0, 10.0, 95), lambda: q.mean_wait(2, 0.5, 1.0, cv=-1),
                                  lambda: q.knee(2, 1.0, 10.0, 95, cv="2"), lambda: q.scale(float("nan")),
                                  lambda: q.fit_service(2, [(0.5, 1.0, 1)], cv=True)])
def test_bad_input_is_refused(call):
    with pytest.raises(q.QueueingError):
        call()
