# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The input checks of the roles used alone (``_role_inputs.role_errors``, the ``role_input_errors``
filter of their first task): each bad input named, the rules the design has checked the same way,
and what the design derives for the roles accepted."""

import copy
import json
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.filter.role_inputs import role_input_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _design_schema
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._role_inputs import ROLE_CHECKS, role_errors

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def _defaults(role):
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def _inputs(role, **changes):
    variables = _defaults(role)
    variables.update(changes)
    return variables


@pytest.mark.parametrize("role", sorted(ROLE_CHECKS))
def test_the_defaults_and_the_derived_inputs_of_the_example_are_accepted(role):
    assert role_errors(role, _defaults(role)) == []
    derived = derive(EXAMPLE)["roles"][role]
    assert role_errors(role, dict(_defaults(role), **derived)) == []


@pytest.mark.parametrize("role", sorted(ROLE_CHECKS))
def test_every_role_with_checks_calls_them_first(role):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    first = tasks[0]
    assert "ansible.builtin.assert" in first
    assert "role_input_errors('%s')" % role in json.dumps(first)


CASES = [
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_tenants=[{"namespace": "Team_X", "gpus": 1}]),
     ["gpu_scheduling_policy_tenants[0].namespace 'Team_X'", "upper-case letters"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_tenants=[{"namespace": "team-a", "gpus": 1},
                                                                  {"namespace": "team-a", "gpus": 2}]),
     ["namespace 'team-a' is given twice"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_tenants=[{"namespace": "kube-system", "gpus": 1}]),
     ["'kube-system' is not a tenant's namespace"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_tenants=[{"namespace": "t", "gpus": 10 ** 9}]),
     ["gpus must be a whole number from 0 to 100000"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_inference_priority=2000000000),
     ["gpu_scheduling_policy_inference_priority_class value", "above 1000000000"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_inference_priority="2000000000"),
     ["above 1000000000"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_notebook_priority=-2147483649),
     ["below -2147483648"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_training_priority_class="system-node-critical"),
     ["reserved for Kubernetes' own PriorityClasses"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_priority_classes=[
        {"name": "a", "value": 1}, {"name": "a", "value": 2}, {"name": "Bad Name", "value": 3},
        {"name": "b", "value": 4, "description": "d" * 2000}]),
     ["PriorityClass 'a' is given twice", "'Bad Name'", "description is too long"]),
    ("gpu_scheduling_policy", dict(gpu_scheduling_policy_tenants=[
        {"namespace": "t", "quotas": [{"name": "q", "hard": {"requests.nvidia.com/gpu": -1}}]}]),
     ["quotas[0].hard.requests.nvidia.com/gpu must be 0 or more"]),
    ("gpu_operator", dict(gpu_operator_time_slicing={"notebooks": {"replicas": 0}}),
     ["gpu_operator_time_slicing.notebooks.replicas", "from 2 to 256", "not 0"]),
    ("gpu_operator", dict(gpu_operator_time_slicing={"notebooks": {}}), ["replicas", "not None"]),
    ("gpu_operator", dict(gpu_operator_time_slicing={"bad key": {"replicas": 4}}), ["label value"]),
    ("gpu_operator", dict(gpu_operator_driver_version="550.90.07 ; rm -rf /"), ["not an OCI image tag"]),
    ("gpu_operator", dict(gpu_operator_driver_repository="Nvcr.io/Nvidia"), ["not an OCI image repository"]),
    ("gpu_operator", dict(gpu_operator_namespace="GPU Operator"), ["gpu_operator_namespace 'GPU Operator'"]),
    ("supervisor_gpu_tenancy", dict(supervisor_gpu_tenancy_vm_classes=[
        {"name": "gpu-a", "cpu_count": 0, "memory_mb": 10 ** 9}, {"name": "GPU_B", "cpu_count": 769}]),
     ["[0].cpu_count must be a whole number from 1 to 768", "[0].memory_mb", "'GPU_B'", "[1].cpu_count"]),
    ("supervisor_gpu_tenancy", dict(supervisor_gpu_tenancy_vm_classes=[{"name": "a"}, {"name": "a"}]),
     ["VM class 'a' is given twice"]),
    ("supervisor_gpu_tenancy", dict(supervisor_gpu_tenancy_namespaces=[
        {"name": "default"}, {"name": "t", "limits": {"cpu_mhz": -1}}, {"name": "t"}]),
     ["'default' is not a tenant's namespace", "limits.cpu_mhz", "namespace 't' is given twice"]),
    ("supervisor_gpu_tenancy", dict(supervisor_gpu_tenancy_namespaces=[{"name": "vmware-system-x"}]),
     ["reserved for the Supervisor's own namespaces"]),
    ("supervisor_gpu_tenancy", dict(supervisor_gpu_tenancy_namespaces=[{"name": "t", "description": "x" * 5000000}]),
     ["description is too long: 5000000 characters, over 1024"]),
    ("drs_gpu_pinning", dict(drs_gpu_pinning_clusters=[{"name": ""}, {"name": "c", "vms": ["", "vm"]}]),
     ["drs_gpu_pinning_clusters[0].name must not be empty", "[1].vms must not hold empty names"]),
    ("drs_gpu_pinning", dict(drs_gpu_pinning_clusters=[{"name": "c"}, {"name": "c"}]), ["cluster 'c' is given twice"]),
    ("nls_licensing", dict(nls_licensing_gridd_options={"ServerAddress": "dls\nFeatureType=0"}),
     ["nls_licensing_gridd_options.ServerAddress", "spans lines"]),
    ("nls_licensing", dict(nls_licensing_gridd_options={"FeatureType=0\nX": "1"}), ["is not a gridd.conf setting name"]),
    ("nls_licensing", dict(nls_licensing_keep_secrets=0), ["nls_licensing_keep_secrets must be 1 or more", "not 0"]),
    ("nls_licensing", dict(nls_licensing_verify_retries="many"), ["nls_licensing_verify_retries must be 0 or more"]),
    ("nls_licensing", dict(nls_licensing_token_name="../../etc/shadow"), ["must be a file name in the token folder"]),
    ("nls_licensing", dict(nls_licensing_operator_namespace="GPU_Operator"), ["nls_licensing_operator_namespace"]),
    ("nls_licensing", dict(nls_licensing_secret_prefix="s" * 250), ["nls_licensing_secret_prefix", "at most 242"]),
]


@pytest.mark.parametrize("role, changes, words", CASES, ids=["%s-%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_a_bad_role_input_is_named(role, changes, words):
    errors = role_errors(role, _inputs(role, **changes))
    text = "; ".join(errors)
    for word in words:
        assert word in text, text
    assert len(text) < 3000


def test_the_role_and_the_design_share_the_bounds():
    """One rule, one bound: a value the design refuses, the role refuses too, and the other way round."""
    low, high = _design_schema.TIME_SLICING_REPLICAS
    for replicas, ok in ((low - 1, False), (low, True), (high, True), (high + 1, False)):
        design = copy.deepcopy(EXAMPLE)
        design["pools"][2]["guest_time_slicing"]["replicas"] = replicas
        design_ok = not [f for f in validate(design) if f.rule == "schema"]
        role_ok = not role_errors("gpu_operator", _inputs("gpu_operator", gpu_operator_time_slicing={
            "notebooks": {"replicas": replicas}}))
        assert design_ok is role_ok is ok, replicas
    for value, ok in ((1000000000, True), (1000000001, False), (-2147483648, True), (-2147483649, False)):
        design = copy.deepcopy(EXAMPLE)
        design["priorities"]["gpu-notebook"]["value"] = value
        design_ok = not [f for f in validate(design) if f.rule == "schema"]
        role_ok = not role_errors("gpu_scheduling_policy", _inputs("gpu_scheduling_policy",
                                                                   gpu_scheduling_policy_notebook_priority=value))
        assert design_ok is role_ok is ok, value
    for namespace in ("kube-system", "default", "vmware-system-vks-public", "kube-anything"):
        design = copy.deepcopy(EXAMPLE)
        design["tenants"][0]["namespace"] = namespace
        assert any(f.rule == "reserved_name" for f in validate(design)), namespace
        assert role_errors("gpu_scheduling_policy", _inputs("gpu_scheduling_policy", gpu_scheduling_policy_tenants=[
            {"namespace": namespace, "gpus": 1}])), namespace


def test_the_filter_refuses_what_is_not_a_mapping_and_an_unknown_role():
    from ansible.errors import AnsibleFilterError

    assert role_input_errors({"drs_gpu_pinning_clusters": []}, "drs_gpu_pinning") == []
    with pytest.raises(AnsibleFilterError, match="mapping"):
        role_input_errors(["x"], "drs_gpu_pinning")
    with pytest.raises(AnsibleFilterError, match="no input checks for role nope"):
        role_input_errors({}, "nope")


@pytest.mark.parametrize("params, words", [
    (dict(clusters=["gpu-h100"], state="acquired", ttl=0, wait=0), ["ttl must be 60 or more seconds, not 0"]),
    (dict(clusters=["gpu-h100", ""], state="acquired", ttl=600, wait=0), ["clusters must not hold empty names"]),
    (dict(clusters=[], state="acquired", ttl=600, wait=0), ["clusters must name at least one cluster"]),
    (dict(clusters=["c"], state="acquired", ttl=600, wait=-1), ["wait must be 0 or more"]),
    (dict(clusters=["c"], state="acquired", ttl=600, wait=0, holder="a\nb"), ["holder must be one line"]),
])
def test_the_lease_options_are_checked_before_any_request(params, words):
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import check
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._lease_inputs import gpu_pool_lease_errors

    text = "; ".join(check("gpu_pool_lease", params, gpu_pool_lease_errors))
    for word in words:
        assert word in text, text
    assert check("gpu_pool_lease", dict(clusters=["c"], state="released", ttl=0, wait=0), gpu_pool_lease_errors) == []
