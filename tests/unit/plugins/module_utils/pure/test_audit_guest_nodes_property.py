# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Property-based: the audit's GPU node findings are the Node plan's changes, node by node.

Over generated guest nodes against the pools of examples/design.yml, a node has ``gpu_node_untainted`` exactly when
the Node plan (``_guest_node_plan``, as guest_objects plans the nodes of each pool) has a taint change for it, and
``gpu_node_profile_label_missing`` exactly when it has a change of the vGPU profile label; the finding names the
taints the plan adds or corrects. The wanted state is the design's: each pool's taints (the GPU taint first) and
its profile label; a GPU node of no pool of the design wants the GPU taint. The plans are computed here the way
the module computes them (one list of the nodes, planned pool by pool), not through the audit.
"""

import pathlib

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_node_plan as gnp
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
POOLS = _audit.design_pools(DERIVED)
PROFILE = "nvidia.com/vgpu.profile"
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
RULES = {"gpu_node_untainted", "gpu_node_profile_label_missing"}

settings.register_profile("gpupool-audit-nodes", max_examples=150, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
SETTINGS = settings.get_profile("gpupool-audit-nodes")


def wanted_pools():
    """The design's pools as the Node plan's pools: the profile label, the GPU taint first, then the pool's."""
    out = []
    for name, pool in POOLS.items():
        taints = [gnp.taint(t) for t in pool.get("taints") or []]
        if not any(t["key"] == GPU["key"] for t in taints):
            taints.insert(0, GPU)
        out.append({"pool": name, "labels": {PROFILE: pool["labels"][PROFILE]}, "taints": taints})
    return out


WANTED = wanted_pools()
DESIGN_TAINTS = [t for p in WANTED for t in p["taints"]]


@st.composite
def gpu_node(draw, index):
    pool = draw(st.sampled_from(sorted(POOLS) + [None, None]))
    labels = {}
    if pool is not None:
        labels["gpupool.vcf/pool"] = pool
        labels.update(draw(st.sampled_from([{}, {PROFILE: POOLS[pool]["labels"][PROFILE]}, {PROFILE: "nvidia_a100-1-5c"}])))
    capacity = draw(st.sampled_from([{}, {"nvidia.com/gpu": "1"}, {"nvidia.com/mig-1g.10gb": "7"}]))
    taints = []
    for taint in draw(st.lists(st.sampled_from(DESIGN_TAINTS + [{"key": "dedicated", "effect": "NoExecute"}]),
                               max_size=4, unique_by=gnp.taint_id)):
        taints.append(dict(taint, value=draw(st.sampled_from([taint.get("value"), "other", None]))))
    return {"name": "node-%d" % index, "labels": labels, "capacity": capacity, "taints": taints}


NODES = st.integers(0, 6).flatmap(lambda n: st.tuples(*[gpu_node(i) for i in range(n)]))


def plan(nodes):
    """The Node plan of the GPU nodes: each pool's, and the GPU taint on a GPU node of no pool."""
    live = [gnp.api_node(n) for n in nodes if _audit.is_gpu_node(n, POOLS)]
    changes = gnp.plan_pools(live, WANTED)
    for node in live:
        if node["metadata"]["labels"].get("gpupool.vcf/pool") not in POOLS:
            changes += gnp.plan_node(node, {}, [GPU])
    return changes


def _objects(findings, rule):
    return set(f["object"] for f in findings if f["rule"] == rule)


@SETTINGS
@given(NODES)
def test_a_gpu_node_has_a_finding_exactly_where_the_node_plan_has_a_change(nodes):
    findings = _audit_guest.audit_guest(DERIVED, nodes=list(nodes))
    changes = plan(nodes)
    assert _objects(findings, "gpu_node_untainted") == set(c.object for c in changes if c.field.startswith("spec.taints."))
    assert _objects(findings, "gpu_node_profile_label_missing") == set(
        c.object for c in changes if c.field == "metadata.labels.%s" % PROFILE)
    assert set(c.field.split(".")[0] for c in changes) <= {"spec", "metadata"}
    for finding in findings:
        if finding["rule"] == "gpu_node_untainted":
            for change in changes:
                if change.object == finding["object"] and change.field.startswith("spec.taints."):
                    assert _audit.taint_text(change.after) in finding["message"]


def test_the_property_sees_drift_and_no_drift():
    """The generated nodes cover both sides: a node as the design wants plans nothing and has no finding."""
    pool = WANTED[0]
    good = {"name": "good", "labels": dict(pool["labels"], **{"gpupool.vcf/pool": pool["pool"]}), "capacity": {},
            "taints": list(pool["taints"])}
    bad = {"name": "bad", "labels": {"gpupool.vcf/pool": pool["pool"]}, "capacity": {}, "taints": []}
    stray = {"name": "stray", "labels": {}, "capacity": {"nvidia.com/gpu": "1"}, "taints": [GPU]}
    findings = [f for f in _audit_guest.audit_guest(DERIVED, nodes=[good, bad, stray]) if f["rule"] in RULES]
    assert sorted((f["rule"], f["object"]) for f in findings) == [
        ("gpu_node_profile_label_missing", "node bad"), ("gpu_node_untainted", "node bad")]
    assert plan([good, stray]) == []
