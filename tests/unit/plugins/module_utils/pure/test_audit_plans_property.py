# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Property-based: the audit's findings are the converge's plan changes, object by object.

Over generated live states against examples/design.yml, an object has a finding exactly when the
plan its converging module makes from the same live state and the role's inputs has a change for
it: DRS pinning (``_drs.plan_pinning``, as drs_gpu_pinning plans), node pools
(``_cluster_class.plan_machine_deployments`` on a real ClusterClass, as vks_node_pool plans), VM
classes and namespaces (the vm_class and supervisor_namespace comparators) and ESXi hosts
(``_esxi.host_plan``, as the esxi_gpu_host role plans). The plans are computed here the way each
module computes them, not through the audit.

Reproducible: the ``gpupool-audit-plans`` profile derandomizes the examples and keeps no example
database.
"""

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_vks, _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _cluster_class as cc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _drs, _esxi, _namespace, _vm_class
from tests.lib.audit_live import DERIVED, FULL, OLD, host
from tests.lib.paths import ROOT

PINNING_RULES = set(_audit_esxi.PINNING_RULE_BY_CHANGE)
NODE_POOL_RULES = {"node_pool_missing", "node_pool_changed", "node_pool_labels_changed", "node_pool_taints_changed",
                   "node_pool_class_lacks"}
HOST_RULES = set(_audit_esxi.ESXI_RULE_BY_FIELD.values())

settings.register_profile("gpupool-audit-plans", max_examples=150, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile("gpupool-audit-plans")


def objects(findings, rules):
    return set(f["object"] for f in findings if f["rule"] in rules)


# --- ESXi hosts and DRS pinning -------------------------------------------------------------------

def good_hosts():
    hosts = [host("esx-h100-0%d" % i, "gpu-h100") for i in range(1, 5)]
    return hosts + [host("esx-l40s-0%d" % i, "gpu-l40s") for i in range(1, 4)]


OVERRIDES = st.one_of(st.none(), st.fixed_dictionaries(dict(
    behavior=st.sampled_from(["manual", "partiallyAutomated", "fullyAutomated"]), enabled=st.booleans())))


@settings(PROFILE)
@given(st.lists(OVERRIDES, min_size=0, max_size=8), st.data())
def test_a_gpu_vm_has_a_pinning_finding_exactly_where_the_pinning_plan_changes_it(overrides, data):
    hosts = good_hosts()
    vms, current = [], {}
    for i, have in enumerate(overrides):
        vm = dict(name="vm-%02d" % i, moid="vm-%d" % (100 + i), vgpu_profiles=["nvidia_h100-3-40c"])
        hosts[data.draw(st.integers(0, 3))]["vgpu_vms"].append(vm)
        vms.append(vm)
        if have is not None:
            current[vm["moid"]] = have
    drs = {"gpu-h100": dict(enabled=True, overrides_enabled=True, overrides=current),
           "gpu-l40s": dict(enabled=True, overrides_enabled=True, overrides={})}
    found = objects(_audit_esxi.audit_esxi(DERIVED, hosts, drs), PINNING_RULES)
    # the drs_gpu_pinning module's plan, with the options the role passes for the cluster
    entry = [c for c in _audit.role_inputs(DERIVED, "drs_gpu_pinning")["drs_gpu_pinning_clusters"]
             if c["name"] == "gpu-h100"][0]
    plan = _drs.plan_pinning(vms, [dict(o, moid=m) for m, o in current.items()], behavior=entry["behavior"],
                             exclude=[], purge_stale=True, owned=set())
    assert found == set("vm %s" % e["name"] for e in plan.add + plan.edit)


HOST_DRIFT = st.fixed_dictionaries(dict(
    version=st.sampled_from([FULL, OLD]),
    default_type=st.sampled_from(["shared_direct", "shared"]),
    device_type=st.sampled_from(["shared_direct", "shared"]),
    policy=st.sampled_from([None, "performance", "consolidation"]),
    options=st.sampled_from([None, "", "NVreg_RegistryDwords=RmPVMRL=0x01"]),
    reboot_pending=st.sampled_from([[], ["staged driver not running"]]),
    maintenance_by_collection=st.booleans(),
    connection_state=st.sampled_from(["connected", "connected", "disconnected"]),
))


@settings(PROFILE)
@given(st.lists(HOST_DRIFT, min_size=4, max_size=4))
def test_a_gpu_host_has_a_finding_exactly_where_its_host_plan_has_an_item(drifts):
    hosts = good_hosts()
    for h, drift in zip(hosts, drifts):
        h["driver"] = dict(version=drift["version"].split("-")[0], full_version=drift["version"])
        h["graphics"]["default_type"] = drift["default_type"]
        h["graphics"]["device_types"] = {"0000:3b:00.0": drift["device_type"]}
        if drift["policy"] is not None:
            h["graphics"]["assignment_policy"] = drift["policy"]
        if drift["options"] is not None:
            h["nvidia_module_options"] = drift["options"]
        h["reboot_pending"] = drift["reboot_pending"]
        h["connection_state"] = drift["connection_state"]
        if drift["maintenance_by_collection"]:
            h.update(maintenance_mode=True, maintenance_by_collection="esxi_gpu_host")
    found = objects(_audit_esxi.audit_esxi(DERIVED, hosts, None), HOST_RULES)
    want = _audit.role_inputs(DERIVED, "esxi_gpu_host")
    # the findings' objects are the objects of the plan's changes (one plan type: _plan.Change)
    planned = set(i.object for h in hosts
                  for i in _esxi.host_plan(h, driver=True, **_audit_esxi.esxi_role_inputs(want[h["cluster"]]))
                  if i.field in _audit_esxi.ESXI_RULE_BY_FIELD)
    assert found == planned


# --- node pools -------------------------------------------------------------------------------------

CLASSES = dict((o["metadata"]["name"], o)
               for doc in yaml.safe_load_all((ROOT / "tests" / "sim" / "k8s" / "supervisor.yml").read_text())
               for o in ((doc or {}).get("items") or [doc or {}]) if o.get("kind") == "ClusterClass")
WITHOUT_TAINTS = copy.deepcopy(CLASSES["builtin-generic-v3.1.0"])
WITHOUT_TAINTS["spec"]["variables"] = [v for v in WITHOUT_TAINTS["spec"]["variables"] if v["name"] != "nodePoolTaints"]
SHAPES = [CLASSES[n] for n in sorted(CLASSES)] + [WITHOUT_TAINTS]
EXPECTED = _audit_vks._vks_expected(DERIVED)
CLUSTER, _NS, POOLS = EXPECTED[0]
TAINTS = [dict(key="nvidia.com/gpu", value="present", effect="NoSchedule"),
          dict(key="gpupool.vcf/pool", value=POOLS[0]["name"], effect="NoSchedule"),
          dict(key="other", value="x", effect="NoExecute")]


def live_pool(pool, data, plan):
    """A pool as it may be found: the design's, each field kept or changed (taints only where the class
    holds them)."""
    labels = dict(pool["labels"])
    if data.draw(st.booleans()):
        labels = dict((k, v) for k, v in labels.items() if data.draw(st.booleans()))
        if data.draw(st.booleans()):
            labels["extra"] = "x"
    design = list(pool["taints"])
    # the design's, reordered, one dropped, one added, none, or any other choice of the three
    taints = data.draw(st.one_of(st.sampled_from([design, design[::-1], design[:1], design + [TAINTS[2]], []]),
                                 st.permutations(TAINTS).flatmap(lambda ts: st.integers(0, 3).map(lambda n: ts[:n]))))
    return dict(name=pool["name"],
                replicas=data.draw(st.sampled_from([pool["replicas"], 0, pool["replicas"] + 1])),
                vm_class=data.draw(st.sampled_from([pool["vm_class"], "best-effort-large"])),
                labels=labels, taints=taints if plan.get("taints") else None)


@settings(PROFILE)
@given(st.sampled_from(SHAPES), st.data())
def test_a_node_pool_has_a_finding_exactly_where_vks_node_pool_plans_a_change(cls, data):
    plan = cc.variable_plan(cls)
    raw, read = {}, {}
    for pool in POOLS:
        if data.draw(st.integers(0, 5)) == 0:
            continue  # missing
        md = cc.apply_pool(None, live_pool(pool, data, plan), plan, "node-pool")
        raw[pool["name"]] = md
        read[pool["name"]] = cc.read_pool(md, {}, plan)
    live = {CLUSTER: dict(namespace=_NS, machine_deployments=read)}
    found = objects(_audit_vks.audit_vks(DERIVED, live), NODE_POOL_RULES)
    planned = set()
    for pool in POOLS:
        current = [raw[pool["name"]]] if pool["name"] in raw else []
        try:
            after = cc.plan_machine_deployments(current, [pool], plan, "node-pool")
        except cc.PlanError:
            planned.add(pool["name"])  # refused: the class cannot hold the pool
            continue
        if after != current:
            planned.add(pool["name"])
    assert found == set("node_pool %s/%s" % (CLUSTER, p) for p in planned)


# --- VM classes and namespaces ----------------------------------------------------------------------

TENANCY = _audit.role_inputs(DERIVED, "supervisor_gpu_tenancy")


def live_class(want, data):
    after = _audit_vsphere.vm_class_plan(want, None)[0]
    if data.draw(st.booleans()):
        after["cpu_count"] = data.draw(st.sampled_from([after["cpu_count"], 2, after["cpu_count"] * 2]))
    if data.draw(st.booleans()):
        after["memory_mb"] = data.draw(st.sampled_from([after["memory_mb"], 4096]))
    if data.draw(st.booleans()):
        after["description"] = data.draw(st.sampled_from([after["description"], "", "hand made"]))
    if data.draw(st.booleans()):
        after["vgpu_profiles"] = data.draw(st.sampled_from([[], list(after["vgpu_profiles"]), ["nvidia_h100-80c"]]))
    if data.draw(st.booleans()):
        after["memory_reservation"] = data.draw(st.sampled_from([100, 0]))
    return after


def live_namespace(want, data, classes):
    after = _audit_vsphere.namespace_plan(want, _namespace.empty(want["cluster"]), None, classes)[0]
    if data.draw(st.booleans()):
        after["description"] = data.draw(st.sampled_from([after["description"], "", "hand made"]))
    if data.draw(st.booleans()):
        after["vm_classes"] = sorted(set(c for c in after["vm_classes"] if data.draw(st.booleans()))
                                     | set(data.draw(st.lists(st.sampled_from(sorted(classes) + ["best-effort-small"]),
                                                              max_size=2))))
    if data.draw(st.booleans()):
        after["access"] = [a for a in after["access"] if data.draw(st.booleans())]
    return after


@settings(PROFILE)
@given(st.data())
def test_a_vm_class_or_namespace_has_a_finding_exactly_where_its_module_plans_a_change(data):
    classes = {}
    for want in TENANCY["supervisor_gpu_tenancy_vm_classes"]:
        if data.draw(st.integers(0, 5)):
            classes[want["name"]] = live_class(want, data)
    classes["best-effort-small"] = _vm_class.normalize(dict(cpu_count=2, memory_MB=4096))
    gpu = list(_vm_class.with_vgpu(classes))
    namespaces = {}
    for want in TENANCY["supervisor_gpu_tenancy_namespaces"]:
        if data.draw(st.integers(0, 5)):
            namespaces[want["name"]] = live_namespace(want, data, gpu)
    out = _audit_vsphere.audit_vsphere(DERIVED, classes, namespaces)
    planned = set()
    for want in TENANCY["supervisor_gpu_tenancy_vm_classes"]:
        have = classes.get(want["name"])
        if have is None or _audit_vsphere.vm_class_plan(want, have)[1]:
            planned.add("vm_class %s" % want["name"])
    for want in TENANCY["supervisor_gpu_tenancy_namespaces"]:
        have = namespaces.get(want["name"])
        if have is None or _audit_vsphere.namespace_plan(want, have, None, gpu)[1]:
            planned.add("namespace %s" % want["name"])
    # info findings (such as an object made by hand) are no change
    assert set(f["object"] for f in out if f["severity"] != "info") == planned
