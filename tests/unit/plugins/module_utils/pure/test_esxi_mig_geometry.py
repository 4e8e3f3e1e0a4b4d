# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The per-card MIG geometry: resolved to host names, and what a host's GPUs need to match it."""

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import (
    EsxiError,
    mig_geometry_for,
    mig_geometry_plan,
)

HOSTS = ["esx-04", "esx-02", "esx-01", "esx-03"]


def rows(current, pending=None, supported=None):
    pending = current if pending is None else pending
    return [dict(index=i, pci_id="0000:%02x:00.0" % i, current=c, pending=p,
                 supported=True if supported is None else supported[i])
            for i, (c, p) in enumerate(zip(current, pending))]


def test_positions_follow_host_names_in_order():
    assert mig_geometry_for([[], [], [1, 0], [0, 1]], HOSTS) == {
        "esx-01": [], "esx-02": [], "esx-03": [0, 1], "esx-04": [0, 1]}


def test_hosts_beyond_the_positions_run_no_mig_and_extra_positions_are_ignored():
    assert mig_geometry_for([[2]], HOSTS)["esx-04"] == []
    assert mig_geometry_for([[0], [1], [2], [3], [0]], HOSTS) == {
        "esx-01": [0], "esx-02": [1], "esx-03": [2], "esx-04": [3]}


def test_a_mapping_names_hosts_and_the_others_run_none():
    assert mig_geometry_for({"esx-03": [3, 3]}, HOSTS) == {"esx-01": [], "esx-02": [], "esx-03": [3], "esx-04": []}


@pytest.mark.parametrize("empty", [None, [], {}])
def test_no_geometry_means_no_mig(empty):
    assert mig_geometry_for(empty, HOSTS) == dict((h, []) for h in HOSTS)


@pytest.mark.parametrize("geometry, words", [
    ({"esx-09": [0]}, "esx-09"),
    ([[-1]], "0 or more"),
    ([["0"]], "GPU indexes"),
    ([[True]], "GPU indexes"),
    ("0,1", "list per host position"),
])
def test_bad_geometry_is_refused_with_its_reason(geometry, words):
    with pytest.raises(EsxiError, match=words):
        mig_geometry_for(geometry, HOSTS)


def test_plan_turns_on_and_off_only_what_differs():
    plan = mig_geometry_plan(rows([True, False, True, False]), [0, 1])
    assert plan["enable"] == [1]
    assert plan["disable"] == [2]
    assert plan["reset"] == [1, 2]
    assert plan["before"] == {0: True, 1: False, 2: True, 3: False}
    assert plan["after"] == {0: True, 1: True, 2: False, 3: False}


def test_plan_of_a_host_at_the_geometry_is_empty():
    plan = mig_geometry_plan(rows([True, True, False, False]), [1, 0])
    assert (plan["enable"], plan["disable"], plan["reset"]) == ([], [], [])


def test_a_pending_mode_is_not_set_again_but_still_needs_its_reset():
    plan = mig_geometry_plan(rows([False, False], pending=[True, False]), [0])
    assert plan["enable"] == [] and plan["reset"] == [0]


def test_gpus_without_mig_are_left_alone_and_cannot_be_asked_for_it():
    gpus = rows([False, False], supported=[False, False])
    assert mig_geometry_plan(gpus, [])["reset"] == []
    with pytest.raises(EsxiError, match="GPU 1 cannot run MIG"):
        mig_geometry_plan(gpus, [1])


def test_an_index_the_host_lacks_is_refused():
    with pytest.raises(EsxiError, match="no GPU with index 7"):
        mig_geometry_plan(rows([False] * 4), [7])
