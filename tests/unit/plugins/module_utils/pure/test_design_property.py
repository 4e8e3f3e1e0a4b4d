# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Property-based pass over the design schema: a random mutation of examples/design.yml (a value
replaced by one of any type, a key deleted, a list item duplicated, a random string inserted) is
either valid - and gpu_pool_design then derives every link's inputs - or refused by gpu_pool_design
with findings (the module's own logic, PoolDesign.result, which site.yml runs before any link); it
never raises anything else. The validation is pure (no system is asked), and a design with schema
errors is refused by every module that takes a design before its first request as well.

Reproducible: the ``gpupool-design`` profile derandomizes the examples and keeps no example
database; its example count keeps the test well under 20 seconds.
"""

import copy
import pathlib

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import Finding
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import normalized_design
from ansible_collections.gpupool.vcf.plugins.modules.gpu_pool_design import PoolDesign

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())

settings.register_profile("gpupool-design", max_examples=200, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# values of any type a YAML file can hold, with the edges that break bounds
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([0, -1, 1, 2 ** 31, -2 ** 31 - 1, 10 ** 9 + 1, 10 ** 18]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.5, 1.5, 100.0, 150.0]),
    st.text(max_size=40), st.sampled_from(["", " ", "kube-system", "system-x", "Bad Class", "x" * 5000,
                                           "550.90.07 ; rm -rf /", "gpu-inference", "inference", "default"]),
)


def _containers(inner):
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4))


VALUES = st.recursive(SCALARS, _containers, max_leaves=8)


def _paths(node, prefix=()):
    """Every place in the design: (path to the container, key or index)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix, key
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield prefix, index
            yield from _paths(value, prefix + (index,))


PLACES = list(_paths(EXAMPLE))
CONTAINERS = sorted(set(p for p, _k in PLACES), key=repr) + [()]


def _at(design, path):
    node = design
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated(draw):
    design = copy.deepcopy(EXAMPLE)
    for _step in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["replace", "delete", "duplicate", "insert"]))
        if kind in ("replace", "delete"):
            path, key = draw(st.sampled_from(PLACES))
            try:
                container = _at(design, path)
            except (KeyError, IndexError, TypeError):
                continue
            # the place may be gone after an earlier step (a deleted key, a replaced container)
            if not isinstance(container, (dict, list)) or \
                    key not in (container if isinstance(container, dict) else range(len(container))):
                continue
            if kind == "replace":
                container[key] = draw(VALUES)
            else:
                del container[key]
        else:
            path = draw(st.sampled_from(CONTAINERS))
            try:
                container = _at(design, path)
            except (KeyError, IndexError, TypeError):
                continue
            if isinstance(container, list) and container:
                if kind == "duplicate":
                    container.insert(draw(st.integers(0, len(container))), copy.deepcopy(
                        container[draw(st.integers(0, len(container) - 1))]))
                else:
                    container.append(draw(st.text(max_size=30)))
            elif isinstance(container, dict):
                if kind == "duplicate" and container:
                    key = draw(st.sampled_from(sorted(container, key=repr)))
                    container["%s-copy" % key] = copy.deepcopy(container[key])
                else:
                    container[draw(st.text(max_size=20))] = draw(st.text(max_size=30))
    return design


class _Module:
    """What PoolDesign reads of its module: the params."""

    def __init__(self, design):
        self.params = dict(design=design, design_file=None, fail_on_error=True)


@settings(settings.get_profile("gpupool-design"))
@given(mutated())
def test_a_mutated_design_is_valid_or_refused_with_findings(design):
    findings = validate(design)
    assert isinstance(findings, list) and all(isinstance(f, Finding) for f in findings)
    for finding in findings:
        assert isinstance(finding.message, str) and len(str(finding)) < 5000
    errors = [f for f in findings if f.severity == "error"]
    pool_design = PoolDesign(_Module(design))
    if errors:
        # gpu_pool_design (site.yml's first task) fails with them: no link runs
        with pytest.raises(Failure) as caught:
            pool_design.result(design, None)
        assert caught.value.msg.startswith("The pool design has %d error(s)" % len(errors))
        assert len(caught.value.msg) < 60000
        if any(f.rule == "schema" for f in errors):
            # and every other module that takes a design refuses it before its first request
            with pytest.raises(Failure, match="The design has errors"):
                normalized_design({"design": design})
        return
    result = pool_design.result(design, None)
    assert set(result["derived"]["roles"]) >= {"supervisor_gpu_tenancy", "gpu_operator", "gpu_scheduling_policy"}
