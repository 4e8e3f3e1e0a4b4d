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


@pytest.mark.parametrize("call", [lambda: q.erlang_c(0, 1.0), lambda: q.erlang_c(1.5, 1.0),
                                  lambda: q.mean_wait(2, 1.0, 10.0), lambda: q.wait_percentile(2, 0.5, 1.0, 100),
                                  lambda: q.knee(2, 0.0, 10.0, 95)])
def test_bad_input_is_refused(call):
    with pytest.raises(q.QueueingError):
        call()
