# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The name rules of the pool design: design_name_safe, dns_label, label_syntax (positive and negative)."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import RULES, DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    dns_label_problem,
    dns_label_suggestion,
    file_name_problem,
    file_name_suggestion,
    label_key_problem,
    label_value_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
NAME_RULES = ("design_name_safe", "dns_label", "label_syntax")


@pytest.fixture
def design():
    return copy.deepcopy(EXAMPLE)


def pool(d, name):
    return [p for p in d["pools"] if p["name"] == name][0]


def rename_pool(d, old, new):
    pool(d, old)["name"] = new
    for tenant in d["tenants"]:
        quota = tenant.get("gpu_quota") or {}
        if old in quota:
            quota[new] = quota.pop(old)


def named(d, rule):
    return [f for f in validate(d) if f.rule == rule]


def one(d, rule):
    found = named(d, rule)
    assert len(found) == 1, [str(f) for f in validate(d)]
    return found[0]


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "gpu-inference", "team-a", "x1", "1x", "a" * 63, "a-b-c", "0"])
def test_dns_label_accepts(name):
    assert dns_label_problem(name) is None


@pytest.mark.parametrize("name, reason", [
    ("GPU_Inference", "upper-case letters; characters '_'"),
    ("Team_A", "upper-case letters"),
    ("-a", "starts with '-'"),
    ("a-", "ends with '-'"),
    ("a.b", "characters '.'"),
    ("a b", "characters ' '"),
    ("a" * 64, "64 characters, over 63"),
    ("", "empty"),
    (None, "empty"),
    ("caf\u00e9", "characters"),
])
def test_dns_label_refuses(name, reason):
    assert reason in dns_label_problem(name)


@pytest.mark.parametrize("name, suggestion", [
    ("GPU_Inference", "gpu-inference"),
    ("Team_A", "team-a"),
    ("--x--", "x"),
    ("a..b", "a-b"),
    ("___", "gpupool"),
    ("A" * 70, "a" * 63),
])
def test_dns_label_suggestion(name, suggestion):
    assert dns_label_suggestion(name) == suggestion
    assert dns_label_problem(dns_label_suggestion(name)) is None


def test_dns_label_suggestion_respects_a_shorter_limit():
    assert dns_label_suggestion("a" * 30 + "-" + "b" * 30, 31) == "a" * 30
    assert len(dns_label_suggestion("x" * 80, 52)) == 52


@pytest.mark.parametrize("name", ["lab-gpupool", "Lab.GPU_pool-2", "x", "a..b"])
def test_file_name_accepts(name):
    assert file_name_problem(name) is None


@pytest.mark.parametrize("name, reason", [
    ("../../x", "a path separator"),
    ("/etc/passwd", "a path separator"),
    ("a\\b", "a path separator"),
    ("..", "starts with '.'"),
    (".hidden", "starts with '.'"),
    ("-rf", "starts with '-'"),
    ("pool.", "ends with '.'"),
    ("a\0b", "a NUL character"),
    ("my pool", "white space"),
    ("tab\tname", "white space"),
    ("a:b", "characters ':'"),
    ("", "empty"),
    ("x" * 64, "over 63"),
])
def test_file_name_refuses(name, reason):
    assert reason in file_name_problem(name)


@pytest.mark.parametrize("name, suggestion", [("../../x", "x"), ("my pool", "my-pool"), ("..", "gpupool"),
                                              ("a\0b", "a-b")])
def test_file_name_suggestion(name, suggestion):
    assert file_name_suggestion(name) == suggestion
    assert file_name_problem(suggestion) is None


@pytest.mark.parametrize("key", ["nvidia.com/gpu", "gpupool.vcf/pool", "tier", "a_b.c-d", "example.com/X"])
def test_label_key_accepts(key):
    assert label_key_problem(key) is None


@pytest.mark.parametrize("key", ["", "Bad Key", "/x", "Example.com/x", "example.com/", "a/b/c", "-x", "x" * 64])
def test_label_key_refuses(key):
    assert label_key_problem(key)


@pytest.mark.parametrize("value", ["", "present", "A_b.c-9", "v" * 63])
def test_label_value_accepts(value):
    assert label_value_problem(value) is None


@pytest.mark.parametrize("value", ["x y", "-x", "x.", "v" * 64, 3])
def test_label_value_refuses(value):
    assert label_value_problem(value)


# ---------------------------------------------------------------------------------------
# the rules on a design
# ---------------------------------------------------------------------------------------


def test_the_rules_come_first_after_the_schema():
    assert list(RULES)[:4] == ["schema", "design_name_safe", "dns_label", "label_syntax"]
    assert all(RULES[r][0] == "error" for r in NAME_RULES)


def test_example_has_no_name_finding(design):
    assert [f for f in validate(design) if f.rule in NAME_RULES] == []


@pytest.mark.parametrize("name", ["../../x", "/abs", "..", ".", "-x", "a b", "a\0b", "x" * 64])
def test_design_name_safe_refuses(design, name):
    design["name"] = name
    finding = one(design, "design_name_safe")
    assert finding.object == "name" and repr(name) in finding.message and "token" in finding.message
    assert "use " in finding.fix
    with pytest.raises(DesignError):
        derive(design)


def test_design_name_safe_suggests(design):
    design["name"] = "../../x"
    assert "use 'x'" in one(design, "design_name_safe").fix


@pytest.mark.parametrize("name", ["lab-gpupool", "Lab_Pool.2"])
def test_design_name_safe_accepts(design, name):
    design["name"] = name
    assert named(design, "design_name_safe") == []
    assert derive(design)["design"] == name


def test_pool_name(design):
    rename_pool(design, "inference", "GPU_Inference")
    finding = one(design, "dns_label")
    assert finding.object == "pools.GPU_Inference"
    assert "pool name 'GPU_Inference' (pools[0].name)" in finding.message
    assert "upper-case letters" in finding.message
    assert finding.fix.startswith("use 'gpu-inference'")


def test_tenant_name_and_derived_namespace_reported_once(design):
    design["tenants"][0]["name"] = "Team_A"
    finding = one(design, "dns_label")
    assert finding.object == "tenants.Team_A" and "tenants[0].name" in finding.message
    assert "'team-a'" in finding.fix


def test_tenant_namespace_given(design):
    design["tenants"][0]["namespace"] = "Search_NS"
    finding = one(design, "dns_label")
    assert "tenant namespace 'Search_NS' (tenants[0].namespace)" in finding.message
    assert "'search-ns'" in finding.fix


def test_vks_cluster_and_its_namespace(design):
    design["vks_clusters"][0]["name"] = "GPU.Workloads"
    design["vks_clusters"][0]["namespace"] = "gpu_platform"
    found = named(design, "dns_label")
    messages = " ".join(f.message for f in found)
    assert "VKS cluster name 'GPU.Workloads' (vks_clusters[0].name)" in messages
    assert "vSphere namespace 'gpu_platform' (vks_clusters[0].namespace)" in messages
    assert {f.fix.split(" (")[0] for f in found} == {"use 'gpu-workloads'", "use 'gpu-platform'"}


def test_vm_class_and_node_pool_given(design):
    pool(design, "inference")["vm_class"]["name"] = "GPU-Small"
    pool(design, "inference")["node_pool"]["name"] = "infer_pool"
    found = named(design, "dns_label")
    messages = " ".join(f.message for f in found)
    assert "VM class name 'GPU-Small' (pools[0].vm_class.name)" in messages
    assert "VKS node pool name 'infer_pool' (pools[0].node_pool.name)" in messages


def test_derived_vm_class_over_63_characters(design):
    long_name = "p" * 60
    rename_pool(design, "inference", long_name)
    finding = one(design, "dns_label")
    assert "VM class name 'gpu-%s'" % long_name in finding.message
    assert "derived from pools[0].name as gpu-<pools[0].name>" in finding.message
    assert "64 characters, over 63" in finding.message
    assert "at most 59 characters" in finding.fix and "vm_class.name" in finding.fix


def test_derived_vm_class_at_63_characters_passes(design):
    rename_pool(design, "inference", "p" * 59)
    assert named(design, "dns_label") == []


def test_derived_vm_class_given_explicitly_is_not_derived(design):
    rename_pool(design, "inference", "p" * 60)
    pool(design, "p" * 60)["vm_class"]["name"] = "gpu-short"
    assert named(design, "dns_label") == []


def test_derived_kueue_names_of_gang_pool(design):
    long_name = "t" * 56
    rename_pool(design, "training", long_name)
    finding = one(design, "dns_label")
    assert "Kueue ClusterQueue and ResourceFlavor name 'gpupool-%s'" % long_name in finding.message
    assert "at most 55 characters" in finding.fix


def test_derived_kueue_names_only_for_gang_pools(design):
    rename_pool(design, "training", "t" * 56)
    pool(design, "t" * 56)["training"] = {"gpus_per_job": 1, "gang_scheduling": False}
    assert named(design, "dns_label") == []


def test_priority_class_name(design):
    design["priorities"]["Gpu_Batch"] = {"value": 10}
    finding = one(design, "dns_label")
    assert finding.object == "priorities.Gpu_Batch" and "PriorityClass name 'Gpu_Batch'" in finding.message
    assert "'gpu-batch'" in finding.fix


def test_derived_resource_quota_of_a_used_priority(design):
    long_name = "g" * 56
    design["priorities"][long_name] = {"value": 60000}
    pool(design, "training")["priority"] = long_name
    finding = one(design, "dns_label")
    assert "ResourceQuota name 'gpupool-%s'" % long_name in finding.message
    design["priorities"]["h" * 60] = {"value": 5}   # unused: no quota is derived from it
    assert len(named(design, "dns_label")) == 1


@pytest.mark.parametrize("key, value, what", [
    ("operator_namespace", "GPU_Operator", "GPU Operator namespace"),
    ("time_slicing_config", "Time.Slicing", "time-slicing ConfigMap name"),
])
def test_guest_names(design, key, value, what):
    design.setdefault("guest", {})[key] = value
    finding = one(design, "dns_label")
    assert finding.object == "guest" and "%s %r (guest.%s)" % (what, value, key) in finding.message


def test_kueue_cohort(design):
    design["guest"]["kueue"] = {"cohort": "GPU pool"}
    assert "'gpu-pool'" in one(design, "dns_label").fix


def test_licensing_secret_leaves_room_for_the_hash(design):
    design["guest"]["licensing"]["secret_name"] = "s" * 52
    assert named(design, "dns_label") == []
    design["guest"]["licensing"]["secret_name"] = "s" * 53
    finding = one(design, "dns_label")
    assert "53 characters, over 52" in finding.message and "content hash" in finding.fix


def test_every_bad_name_at_once(design):
    design["name"] = "../../x"
    rename_pool(design, "inference", "GPU_Inference")
    design["tenants"][1]["name"] = "Team_A"
    found = validate(design)
    assert [f.rule for f in found if f.rule in NAME_RULES] == ["design_name_safe", "dns_label", "dns_label"]
    with pytest.raises(DesignError) as exc:
        derive(design)
    assert "GPU_Inference" in str(exc.value) and "'gpu-inference'" in str(exc.value)


def test_node_labels_and_taints(design):
    node_pool = pool(design, "notebooks")["node_pool"]
    node_pool["labels"] = {"Bad Key": "ok", "example.com/tier": "x y", "fine": "v", "gpupool.vcf/drop": None}
    node_pool["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                           {"key": "bad key", "value": "v", "effect": "NoSchedule"},
                           {"key": "ok", "value": "-bad", "effect": "NoSchedule"}]
    found = named(design, "label_syntax")
    messages = [f.message for f in found]
    assert len(found) == 4, messages
    assert any("node label key 'Bad Key'" in m for m in messages)
    assert any("node label example.com/tier value 'x y'" in m for m in messages)
    assert any("taint key 'bad key'" in m for m in messages)
    assert any("taint ok value '-bad'" in m for m in messages)
    assert all(f.object == "pools.notebooks" and f.fix for f in found)


def test_valid_labels_and_taints_pass(design):
    node_pool = pool(design, "notebooks")["node_pool"]
    node_pool["labels"] = {"example.com/tier": "gold", "team": ""}
    node_pool["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                           {"key": "dedicated", "value": None, "effect": "NoExecute"}]
    assert named(design, "label_syntax") == []
