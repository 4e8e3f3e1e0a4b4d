# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every value of the design bounded: the cases of the bad-input matrix as unit tests of the
pure validation (no system), the schema walked for a bound on every field, the design file's
size and aliases, and the length of every message."""

import copy
import pathlib
import time

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _design_names
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import Finding, summarize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import (
    DESIGN_FILE_MAX,
    DESIGN_SCHEMA,
    FORMATS,
    json_schema,
    normalize,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import load_design_file

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def _errors(design):
    return [f for f in validate(design) if f.severity == "error"]


def _set(path, value):
    """The example with the value at ``path`` (dotted; list indexes as numbers) replaced."""
    design = copy.deepcopy(EXAMPLE)
    node = design
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return design


def test_the_example_is_within_every_bound():
    assert _errors(EXAMPLE) == []


# (the value's path in the example, the bad value, the rule, the finding's object, words of the message)
CASES = [
    ("priorities.gpu-inference.value", 2000000000, "schema", "priorities.gpu-inference.value",
     ["2000000000", "maximum 1000000000"]),
    ("priorities.gpu-inference.value", -2147483649, "schema", "priorities.gpu-inference.value",
     ["minimum -2147483648"]),
    ("tenants.0.gpu_quota.inference", -1, "schema", "tenants.team-search.gpu_quota.inference", ["minimum 0"]),
    ("tenants.0.description", "x" * 5000000, "schema", "tenants.team-search.description",
     ["5000000 characters", "bound of 1024"]),
    ("tenants.0.namespace", "kube-system", "reserved_name", "tenants.team-search", ["kube-system", "system namespace"]),
    ("tenants.0.namespace", "default", "reserved_name", "tenants.team-search", ["default"]),
    ("tenants.0.namespace", "vmware-system-vks-public", "reserved_name", "tenants.team-search", ["vmware-system-"]),
    ("tenants.0.name", "kube-public", "reserved_name", "tenants.kube-public", ["tenants[0].name"]),
    ("vks_clusters.0.namespace", "kube-node-lease", "reserved_name", "vks_clusters.gpu-workloads",
     ["kube-node-lease"]),
    ("pools.1.slo.percentile", 150, "schema", "pools.training.slo.percentile", ["150", "above 0 and below 100"]),
    ("pools.1.slo.percentile", 0, "schema", "pools.training.slo.percentile", ["above 0"]),
    ("pools.1.slo.planned_utilization", 3, "schema", "pools.training.slo.planned_utilization", ["maximum 1"]),
    ("pools.1.slo.planned_utilization", -0.1, "schema", "pools.training.slo.planned_utilization", ["minimum 0"]),
    ("pools.1.slo.wait_seconds", 0, "schema", "pools.training.slo.wait_seconds", ["above 0"]),
    ("tenants.0.limits.cpu_mhz", -1, "schema", "tenants.team-search.limits.cpu_mhz", ["minimum 0"]),
    ("tenants.0.limits.memory_mib", -1, "schema", "tenants.team-search.limits.memory_mib", ["minimum 0"]),
    ("tenants.0.limits.storage_mib", -5, "schema", "tenants.team-search.limits.storage_mib", ["minimum 0"]),
    ("vks_clusters.0.storage_class", "Bad Class", "schema", "vks_clusters.gpu-workloads.storage_class",
     ["'Bad Class'", "DNS subdomain"]),
    ("guest.driver.version", "550.90.07 ; rm -rf /", "schema", "guest.driver.version", ["OCI image tag"]),
    ("guest.driver.version", ".550", "schema", "guest.driver.version", ["OCI image tag"]),
    ("guest.driver.version", "5" * 129, "schema", "guest.driver.version", ["129 characters"]),
    ("guest.driver.repository", "Registry.example.com/NVAIE", "schema", "guest.driver.repository",
     ["OCI image repository"]),
    ("guest.driver.repository", "registry.example.com:99999/nvaie", "schema", "guest.driver.repository",
     ["port 99999"]),
    ("guest.driver.repository", "registry.example.com/nvaie:550", "schema", "guest.driver.repository",
     ["OCI image repository"]),
    ("guest.driver.image", "vgpu guest driver", "schema", "guest.driver.image", ["OCI repository path"]),
    ("pools.2.guest_time_slicing.replicas", 0, "schema", "pools.notebooks.guest_time_slicing.replicas",
     ["minimum 2"]),
    ("pools.2.guest_time_slicing.replicas", 100000, "schema", "pools.notebooks.guest_time_slicing.replicas",
     ["maximum 256"]),
    ("pools.0.vm_class.cpu", 769, "schema", "pools.inference.vm_class.cpu", ["maximum 768"]),
    ("pools.0.node_pool.replicas", 10 ** 9, "schema", "pools.inference.node_pool.replicas", ["maximum 1000"]),
    ("clusters.0.hosts", 97, "schema", "clusters.gpu-h100.hosts", ["maximum 96"]),
    ("pools.0.model.weights_gb", float("nan"), "schema", "pools.inference.model.weights_gb", ["finite"]),
    ("pools.0.model.kv_cache_gb", float("inf"), "schema", "pools.inference.model.kv_cache_gb", ["finite"]),
    ("pools.0.model.weights_gb", -1, "schema", "pools.inference.model.weights_gb", ["minimum 0"]),
    ("clusters.0.waivers", {"gpu_vms_pinned": "y" * 2000}, "schema", "clusters.gpu-h100.waivers.gpu_vms_pinned",
     ["2000 characters"]),
    ("pools.0.node_pool.labels", dict(("k%d" % i, "v") for i in range(65)), "schema",
     "pools.inference.node_pool.labels", ["items 65", "maximum 64"]),
    ("tenants", [dict(EXAMPLE["tenants"][0], name="t%d" % i) for i in range(1001)], "schema", "tenants",
     ["items 1001", "maximum 1000"]),
    ("vcenters", {"vc-a": {"port": 0}}, "schema", "vcenters.vc-a.port", ["minimum 1"]),
]


@pytest.mark.parametrize("path, value, rule, obj, words", CASES,
                         ids=["%s=%s" % (c[0], _design_names.shown(c[1], 24)) for c in CASES])
def test_a_value_out_of_bounds_is_an_error_naming_the_field_and_the_bound(path, value, rule, obj, words):
    errors = _errors(_set(path, value))
    mine = [f for f in errors if f.rule == rule and f.object == obj]
    assert mine, [str(f) for f in errors]
    for word in words:
        assert word in mine[0].message, mine[0].message
    for finding in errors:
        assert len(str(finding)) < 1000, str(finding)[:200]


def test_priority_class_names_of_the_system_are_refused():
    design = copy.deepcopy(EXAMPLE)
    design["priorities"]["system-node-critical"] = {"value": 10}
    [finding] = [f for f in _errors(design) if f.rule == "reserved_name"]
    assert finding.object == "priorities.system-node-critical"
    assert "system-" in finding.message and "'gpu-node-critical'" in finding.fix


def test_a_priority_class_of_one_billion_is_a_user_class():
    design = _set("priorities.gpu-inference.value", 1000000000)
    assert [f for f in _errors(design) if f.rule == "schema"] == []


def test_two_tenants_on_one_namespace_are_refused():
    design = _set("tenants.1.namespace", "team-search")
    assert any(f.rule == "unique_names" and "team-search" in f.message for f in _errors(design))


def test_every_field_of_the_schema_is_bounded():
    """The systematic pass: each number has a range, each string a length, each list and map a size."""
    unbounded = []

    def walk(spec, path):
        if isinstance(spec, str):
            spec = {"type": spec}
        kind = spec["type"]
        if kind == "either":
            for form in spec["forms"]:
                walk(form, path)
            return
        if kind in ("int", "float") and not spec.get("choices"):
            low = spec.get("min") if spec.get("min") is not None else spec.get("above")
            high = spec.get("max") if spec.get("max") is not None else spec.get("below")
            if low is None or high is None:
                unbounded.append(path)
        if kind == "str" and not spec.get("choices") and "max_len" not in spec:
            unbounded.append(path)
        if kind in ("list", "map") and spec.get("max") is None:
            unbounded.append(path)
        if spec.get("format") is not None:
            assert spec["format"] in FORMATS, path
        if kind == "dict":
            for key, sub in spec.get("options", {}).items():
                walk(sub, "%s.%s" % (path, key))
        elif kind == "list":
            elements = spec.get("elements", "str")
            walk({"type": "dict", "options": spec.get("options", {})} if elements == "dict" else elements, path + "[]")
        elif kind == "map":
            walk(spec.get("values", "str"), path + ".<name>")

    walk(DESIGN_SCHEMA, "design")
    assert unbounded == []


def test_the_json_schema_carries_the_bounds():
    js = json_schema()
    value = js["properties"]["priorities"]["additionalProperties"]["properties"]["value"]
    assert value["minimum"] == -2147483648 and value["maximum"] == 1000000000
    slo = js["properties"]["pools"]["items"]["properties"]["slo"]["properties"]
    assert slo["percentile"]["exclusiveMinimum"] == 0 and slo["percentile"]["exclusiveMaximum"] == 100
    assert js["properties"]["tenants"]["maxItems"] == 1000
    assert js["properties"]["tenants"]["items"]["properties"]["description"]["maxLength"] == 1024
    quota = js["properties"]["tenants"]["items"]["properties"]["gpu_quota"]
    assert quota["maxProperties"] == 256 and quota["additionalProperties"]["minimum"] == 0


@pytest.mark.parametrize("ref, ok", [
    ("registry.example.com/nvaie", True), ("localhost:5000/a/b", True), ("nvcr.io/nvidia", True),
    ("nvaie", True), ("a__b/c-d.e", True), ("a___b", False), ("A/b", False), ("reg.io:0/x", False),
    ("reg.io/", False), ("/x", False), ("x/", False), ("-a", False), ("a..b", False),
])
def test_oci_repository_grammar(ref, ok):
    assert (_design_names.oci_repository_problem(ref) is None) is ok


@pytest.mark.parametrize("ref, ok", [
    ("nvcr.io/nvidia/driver:550.90.07-ubuntu22.04", True), ("localhost:5000/x:t", True), ("x", True),
    ("x@sha256:" + "a" * 64, True), ("x:t@sha256:abc", True), ("x:-t", False), ("x:t@nodigest", False),
    ("x:" + "t" * 129, False), ("X:t", False),
])
def test_oci_reference_grammar(ref, ok):
    assert (_design_names.oci_reference_problem(ref) is None) is ok


def test_shown_truncates_every_value():
    assert _design_names.shown("x" * 10) == repr("x" * 10)
    text = _design_names.shown([["x"] * 1000] * 1000)
    assert len(text) == 80 and text.endswith("...")


def test_a_finding_and_a_summary_are_bounded():
    finding = Finding("schema", "design", "m" * 10 ** 6, "f" * 10 ** 6)
    assert len(finding.message) == 2000 and finding.message.endswith("...")
    summary = summarize([Finding("schema", "x%d" % i, "bad", "fix") for i in range(500)])
    assert "500 error(s)" in summary and "and 480 more" in summary and len(summary) < 2000


def _bomb(levels, width=9):
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append("a%d: &a%d [%s]" % (level, level, ", ".join(["*a%d" % (level - 1)] * width)))
    return "\n".join(lines) + "\nname: *a%d\n" % levels


def test_an_alias_bomb_file_is_refused_quickly_with_a_short_message(tmp_path):
    path = tmp_path / "bomb.yml"
    path.write_text(_bomb(9))
    assert len(path.read_bytes()) < 1000
    start = time.monotonic()
    with pytest.raises(Failure) as caught:
        load_design_file(str(path))
    assert time.monotonic() - start < 2
    assert "alias" in caught.value.msg and "line 2" in caught.value.msg and len(caught.value.msg) < 300


def test_any_alias_is_refused(tmp_path):
    path = tmp_path / "design.yml"
    path.write_text("supervisor: &s {storage_policy: x}\nother: *s\n")
    with pytest.raises(Failure, match="YAML alias at line 2"):
        load_design_file(str(path))


def test_an_expanded_alias_bomb_given_as_a_mapping_is_refused_by_size():
    shared = ["lol"]
    for _level in range(9):
        shared = [shared] * 9       # shares one list: cheap in memory, 9**9 values when walked
    start = time.monotonic()
    findings = validate({"name": shared})
    assert time.monotonic() - start < 2
    assert [(f.rule, f.object) for f in findings] == [("schema", "design")]
    assert "more than 100000 values" in findings[0].message


def test_a_deeply_nested_design_is_refused():
    deep = "x"
    for _level in range(40):
        deep = [deep]
    findings = validate(dict(EXAMPLE, name=deep))
    assert [f.message for f in findings if f.rule == "schema"] == ["the design is nested more than 32 deep"]


def test_the_design_file_size_is_bounded_before_parsing(tmp_path):
    path = tmp_path / "big.yml"
    path.write_text("name: x\n# %s\n" % ("y" * DESIGN_FILE_MAX))
    with pytest.raises(Failure, match="over the bound of 1048576 bytes"):
        load_design_file(str(path))
    path.write_text((ROOT / "examples" / "design.yml").read_text())
    assert load_design_file(str(path)) == EXAMPLE


def test_a_parse_error_message_is_bounded(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("name: [%s\n" % ("x" * 100000))
    with pytest.raises(Failure) as caught:
        load_design_file(str(path))
    assert len(caught.value.msg) < 600


def test_a_huge_wrong_value_is_shown_short():
    findings = validate(dict(EXAMPLE, name=["x" * 1000] * 1000))
    [finding] = [f for f in findings if f.object == "name"]
    assert "is not a string" in finding.message and len(finding.message) < 150


def test_an_overlong_map_key_is_refused_and_shown_short():
    design = copy.deepcopy(EXAMPLE)
    design["priorities"]["p" * 10000] = {"value": 1}
    [finding] = [f for f in validate(design) if f.rule == "schema"]
    assert "10000 characters" in finding.message and len(str(finding)) < 1000


def test_normalize_of_a_refused_value_leaves_it_out():
    d, findings = normalize(_set("tenants.0.limits.cpu_mhz", -1))
    assert d["tenants"][0]["limits"]["cpu_mhz"] is None and findings
