# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import copy
import json
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _design_schema
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_capacity import (
    Context,
    derived_mig_geometry,
    offered_profiles,
    pack,
    profile_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import (
    RULES,
    DesignError,
    Finding,
    errors,
    summarize,
    warnings,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize

from tests.lib.design_edit import EXAMPLE, cluster, example, pool, tenant

ROOT = pathlib.Path(__file__).resolve().parents[5]


def derive_geometry(d):
    """Each cluster's MIG geometry as the capacity model derives it (for a design that need not be valid)."""
    ctx = Context(normalize(d)[0])
    return dict((name, derived_mig_geometry(ctx, c)) for name, c in ctx.clusters.items())


@pytest.fixture
def design():
    return example()


def only(findings, rule):
    found = [f for f in findings if f.rule == rule]
    assert found, "rule %s not reported; got %s" % (rule, [str(f) for f in findings])
    return found


# ---------------------------------------------------------------------------------------
# the example
# ---------------------------------------------------------------------------------------


def test_example_validates_clean():
    assert validate(EXAMPLE) == []


def test_example_is_not_modified_by_validation():
    before = copy.deepcopy(EXAMPLE)
    validate(EXAMPLE)
    derive(EXAMPLE)
    assert EXAMPLE == before


def test_every_rule_is_documented_and_has_a_severity():
    for name, (severity, doc) in RULES.items():
        assert severity in ("error", "warning") and doc
        assert name == name.lower() and " " not in name
    docs = (ROOT / "docs" / "design.md").read_text()
    for name in RULES:
        assert "`%s`" % name in docs, "docs/design.md does not explain rule %s" % name


# ---------------------------------------------------------------------------------------
# one test per rule: it triggers, on the right object, with a fix
# ---------------------------------------------------------------------------------------


def test_schema_unknown_key_wrong_type_missing_required_bad_choice(design):
    pool(design, "inference")["vgpu_profil"] = "x"
    pool(design, "training")["gpus_per_node"] = "four"
    del pool(design, "notebooks")["sharing"]
    cluster(design, "gpu-h100")["scheduler"]["policy"] = "round_robin"
    found = only(validate(design), "schema")
    by_object = {f.object: f for f in found}
    assert "did you mean 'vgpu_profile'" in by_object["pools.inference.vgpu_profil"].fix
    assert "not a whole number" in by_object["pools.training.gpus_per_node"].message
    assert "required" in by_object["pools.notebooks.sharing"].message
    assert "best_effort" in by_object["clusters.gpu-h100.scheduler.policy"].fix
    assert all(f.severity == "error" for f in found)


def test_schema_not_a_mapping():
    found = validate(["not", "a", "design"])
    assert all(f.rule == "schema" for f in found)
    assert "not a mapping" in [f for f in found if f.object == "design"][0].message


def test_unique_names(design):
    design["pools"].append(copy.deepcopy(pool(design, "notebooks")))
    found = only(validate(design), "unique_names")
    assert {f.object for f in found} == {"pools.notebooks", "vm_classes.gpu-notebooks",
                                         "node_pools.gpu-workloads/notebooks"}
    assert all("own name" in f.fix for f in found)


def test_unknown_reference(design):
    pool(design, "inference")["cluster"] = "gpu-a100"
    tenant(design, "research")["gpu_quota"]["finetune"] = 2
    pool(design, "training")["priority"] = "urgent"
    found = only(validate(design), "unknown_reference")
    messages = " | ".join(str(f) for f in found)
    assert "cluster gpu-a100 is not in clusters" in messages and "use one of gpu-h100, gpu-l40s" in messages
    assert "pool finetune" in messages and "priority urgent" in messages


def test_gpu_model_known(design):
    cluster(design, "gpu-l40s")["gpu"]["model"] = "RTX-9000"
    f = only(validate(design), "gpu_model_known")[0]
    assert f.object == "clusters.gpu-l40s" and "L40S" in f.fix


def test_profile_offered_wrong_model(design):
    pool(design, "notebooks")["vgpu_profile"] = "nvidia_h100-10c"
    f = only(validate(design), "profile_offered")[0]
    assert f.object == "pools.notebooks"
    assert "not offered by L40S" in f.message
    assert "nvidia_l40s-8c" in f.fix


def test_profile_offered_size_not_offered(design):
    pool(design, "notebooks")["vgpu_profile"] = "nvidia_l40s-7c"
    f = only(validate(design), "profile_offered")[0]
    assert "no 7 GB time-sliced C profile" in f.message


def test_profile_offered_bad_name_and_bad_mig(design):
    pool(design, "notebooks")["vgpu_profile"] = "l40s-8c"
    pool(design, "inference")["vgpu_profile"] = "nvidia_h100-3-30c"
    found = only(validate(design), "profile_offered")
    assert {f.object for f in found} == {"pools.notebooks", "pools.inference"}


def test_sharing_matches_profile(design):
    pool(design, "inference")["vgpu_profile"] = "nvidia_h100-40c"   # time-sliced, sharing mig
    pool(design, "training")["vgpu_profile"] = "nvidia_h100-40c"    # half a card, sharing full_card
    found = only(validate(design), "sharing_matches_profile")
    by_object = {f.object: f for f in found}
    assert "not MIG-backed" in by_object["pools.inference"].message
    assert "nvidia_h100-3-40c" in by_object["pools.inference"].fix
    assert "40 GB of a 80 GB card" in by_object["pools.training"].message
    assert "nvidia_h100-80c" in by_object["pools.training"].fix


def test_mig_mix_fits_per_card(design):
    pool(design, "inference")["per_card"] = 3
    f = only(validate(design), "mig_mix_fits")[0]
    assert f.object == "pools.inference" and "at most 2" in f.fix


def test_mig_mix_fits_cluster_mix(design):
    cluster(design, "gpu-h100")["mig_mix"] = {"nvidia_h100-3-40c": 2, "nvidia_h100-1-10c": 1}
    design["pools"].append({
        "name": "embedding", "shape": "inference", "cluster": "gpu-h100", "sharing": "mig",
        "vgpu_profile": "nvidia_h100-1-10c", "vm_class": {"cpu": 4, "memory_gb": 16},
        "node_pool": {"replicas": 1}})
    tenant(design, "team-search")["gpu_quota"]["embedding"] = 1
    found = only(validate(design), "mig_mix_fits")
    assert found[0].object == "clusters.gpu-h100" and "does not fit" in found[0].message
    assert "7 compute slices" in found[0].fix


def test_inference_not_time_sliced(design):
    p = pool(design, "inference")
    p.update(sharing="time_sliced", vgpu_profile="nvidia_h100-40c")
    p.pop("per_card")
    f = only(validate(design), "inference_not_time_sliced")[0]
    assert f.object == "pools.inference" and "mig" in f.fix


def test_training_multi_gpu_needs_full_card_and_gang(design):
    p = pool(design, "training")
    p["training"]["gang_scheduling"] = False
    f = only(validate(design), "training_multi_gpu")[0]
    assert "gang_scheduling is off" in f.message and "gang_scheduling true" in f.fix
    p["training"]["gang_scheduling"] = True
    p.update(sharing="time_sliced", vgpu_profile="nvidia_h100-40c")
    f = only(validate(design), "training_multi_gpu")[0]
    assert "not full_card" in f.message and "full_card" in f.fix


def test_single_gpu_training_may_share(design):
    p = pool(design, "training")
    p["training"] = {"gpus_per_job": 1, "gang_scheduling": False}
    assert not [f for f in validate(design) if f.rule == "training_multi_gpu"]


def test_notebook_preemptible(design):
    pool(design, "notebooks")["priority"] = "gpu-inference"
    f = only(validate(design), "notebook_preemptible")[0]
    assert f.object == "pools.notebooks" and "not preemptible" in f.message
    assert "gpu-notebook" in f.fix


def test_notebook_preemptible_when_training_never_preempts(design):
    design["priorities"]["gpu-training"]["preemption_policy"] = "Never"
    f = only(validate(design), "notebook_preemptible")[0]
    assert "gpu-training cannot preempt" in f.message


def test_node_pool_gpu_taint(design):
    pool(design, "notebooks")["node_pool"]["taints"] = [{"key": "gpupool.vcf/pool", "value": "notebooks"}]
    f = only(validate(design), "node_pool_gpu_taint")[0]
    assert f.object == "pools.notebooks" and "nvidia.com/gpu" in f.fix


def test_node_pool_profile_label(design):
    pool(design, "training")["node_pool"]["labels"] = {"nvidia.com/vgpu.profile": None}
    f = only(validate(design), "node_pool_profile_label")[0]
    assert f.object == "pools.training" and "remove nvidia.com/vgpu.profile" in f.fix


def test_tenant_gpu_quota(design):
    del tenant(design, "research")["gpu_quota"]
    tenant(design, "team-search")["gpu_quota"] = {"inference": 0}
    found = only(validate(design), "tenant_gpu_quota")
    assert {f.object for f in found} == {"tenants.research", "tenants.team-search"}
    assert "gpu_quota" in found[0].fix


def test_quota_exceeds_pool_is_a_warning(design):
    tenant(design, "team-search")["gpu_quota"]["inference"] = 9
    found = validate(design)
    f = only(found, "quota_exceeds_pool")[0]
    assert f.severity == "warning" and "lower gpu_quota.inference to 4" in f.fix
    assert errors(found) == [] and warnings(found) == [f]


def test_driver_version_pinned(design):
    del cluster(design, "gpu-h100")["driver"]["version"]
    cluster(design, "gpu-l40s")["driver"]["version"] = "550.*"
    found = only(validate(design), "driver_version_pinned")
    assert {f.object for f in found} == {"clusters.gpu-h100", "clusters.gpu-l40s"}
    assert "550.90.05-1OEM" in found[0].fix


def test_driver_source(design):
    del cluster(design, "gpu-h100")["driver"]["bundle"]
    cluster(design, "gpu-l40s")["driver"].update(lifecycle="vlcm", bundle=None)
    found = only(validate(design), "driver_source")
    assert {f.object for f in found} == {"clusters.gpu-h100", "clusters.gpu-l40s"}
    assert any("depot" in f.fix for f in found)


def test_driver_source_bundle_of_another_version(design):
    cluster(design, "gpu-h100")["driver"]["version"] = "550.54.10-1OEM.800.1.0.20613240"
    f = only(validate(design), "driver_source")[0]
    assert "not for version" in f.message


def test_driver_versions_mixed_is_a_warning(design):
    cluster(design, "gpu-l40s")["driver"]["version"] = "535.183.04-1OEM.800.1.0.20613240"
    cluster(design, "gpu-l40s")["driver"]["bundle"] = "[LocalDS_0] drivers/NVD-AIE-800_535.183.04.zip"
    # a guest driver of the older branch (R535) runs on both: the R550 hosts support the branch before theirs
    design["guest"]["driver"]["version"] = "535.183.06"
    found = validate(design)
    f = only(found, "driver_versions_mixed")[0]
    assert f.severity == "warning" and "535: gpu-l40s" in f.message and not errors(found)


def test_driver_version_read_as_the_esxi_link_reads_it(design):
    """The design's version is parsed by _esxi.parse_driver_version, as the role and the audit parse it."""
    # a form the old pattern let through and the ESXi link refuses (one-digit branch)
    cluster(design, "gpu-h100")["driver"]["version"] = "5.90.05"
    assert {f.object for f in only(validate(design), "driver_version_pinned")} == {"clusters.gpu-h100"}
    # short and full forms are both versions the link can pin
    cluster(design, "gpu-h100")["driver"]["version"] = "550.90.05"
    assert not [f for f in validate(design) if f.rule == "driver_version_pinned"]


def test_driver_source_compares_versions_as_esxi_host_driver_does(design):
    driver = cluster(design, "gpu-h100")["driver"]
    # 550.90.5 is 550.90.05: esxi_host_driver installs this bundle, so the design rule accepts it
    driver["version"] = "550.90.5-1OEM.800.1.0.20613240"
    assert not [f for f in validate(design) if f.rule == "driver_source"]
    # a build of another driver in the bundle's name is refused on both sides
    driver["version"] = "550.90.07-1OEM.800.1.0.20613240"
    f = only(validate(design), "driver_source")[0]
    assert "not for version 550.90.07-1OEM" in f.message and "holds 550.90.05" in f.message


def test_driver_branches_compared_as_numbers(design):
    cluster(design, "gpu-l40s")["driver"]["version"] = "0550.90.05"
    cluster(design, "gpu-l40s")["driver"]["bundle"] = "[LocalDS_0] drivers/NVD-AIE-800_550.90.05.zip"
    assert not [f for f in validate(design) if f.rule == "driver_versions_mixed"]


def test_graphics_shared_direct(design):
    cluster(design, "gpu-l40s")["graphics"]["type"] = "shared"
    f = only(validate(design), "graphics_shared_direct")[0]
    assert f.fix == "set graphics.type shared_direct"


def test_scheduler_valid(design):
    cluster(design, "gpu-l40s")["scheduler"] = {"policy": "best_effort", "time_slice_ms": 3}
    cluster(design, "gpu-h100")["scheduler"] = {"policy": "fixed_share", "time_slice_ms": 45}
    found = only(validate(design), "scheduler_valid")
    assert {f.object for f in found} == {"clusters.gpu-h100", "clusters.gpu-l40s"}


def test_cluster_capacity(design):
    pool(design, "notebooks")["node_pool"]["replicas"] = 40      # 40 / 6 per card = 7 cards > 6
    f = only(validate(design), "cluster_capacity")[0]
    assert f.object == "clusters.gpu-l40s" and "notebooks: 4 short" in f.message
    assert "add hosts" in f.fix


def test_multi_gpu_nodes_need_the_cards_on_one_host(design):
    # 3 training nodes of 4 cards and 4 inference nodes: 14 cards of 16, but each training node
    # needs a whole host, so the inference nodes share the fourth host: it fits
    pool(design, "training")["node_pool"]["replicas"] = 3
    assert not [f for f in validate(design) if f.rule == "cluster_capacity"]
    pool(design, "training")["gpus_per_node"] = 3      # 3 cards per node, one left per host
    pool(design, "training")["node_pool"]["replicas"] = 4
    pool(design, "inference")["node_pool"]["replicas"] = 10   # needs 5 cards, 4 single cards left
    f = only(validate(design), "cluster_capacity")[0]
    assert "inference: 2 short" in f.message


def test_spare_capacity(design):
    pool(design, "training")["node_pool"]["replicas"] = 3    # 12 + 2 cards: fits 4 hosts, not 3
    found = validate(design)
    f = only(found, "spare_capacity")[0]
    assert f.object == "pools.inference"
    # training fills hosts 1-3, inference the MIG GPUs 0 and 1 of host 4: losing host 4 strands it
    assert derive_geometry(design)["gpu-h100"] == [[], [], [], [0, 1]]
    assert ("losing host 4 of gpu-h100 (in name order; 4 GPUs, MIG on GPUs 0, 1) leaves 4 of its 4 node VMs "
            "without a GPU in MIG mode (they need 2 GPUs in MIG mode; the other hosts have 0 free)") == f.message
    assert "add a host" in f.fix
    assert not [x for x in found if x.rule == "cluster_capacity"]


def test_spare_rule_only_for_clusters_with_inference(design):
    pool(design, "notebooks")["node_pool"]["replicas"] = 36    # 6 cards of 6: no spare, no inference
    assert validate(design) == []


def test_model_fits_framebuffer(design):
    pool(design, "inference")["model"] = {"weights_gb": 30, "kv_cache_gb": 20}
    f = only(validate(design), "model_fits_framebuffer")[0]
    assert "50.0 GB does not fit the 40 GB of nvidia_h100-3-40c" in f.message
    assert "nvidia_h100-7-80c" in f.fix


# ---------------------------------------------------------------------------------------
# all at once
# ---------------------------------------------------------------------------------------


def test_every_violation_is_reported_at_once(design):
    p = pool(design, "inference")
    p.update(sharing="time_sliced", vgpu_profile="nvidia_h100-40c", model={"weights_gb": 60})
    p.pop("per_card")
    pool(design, "training")["training"]["gang_scheduling"] = False
    pool(design, "notebooks")["priority"] = "gpu-inference"
    pool(design, "notebooks")["node_pool"]["taints"] = []
    del tenant(design, "research")["gpu_quota"]
    del cluster(design, "gpu-l40s")["driver"]["version"]
    design["bogus"] = 1
    found = validate(design)
    rules = {f.rule for f in found}
    assert {"schema", "inference_not_time_sliced", "training_multi_gpu", "notebook_preemptible",
            "node_pool_gpu_taint", "tenant_gpu_quota", "driver_version_pinned",
            "model_fits_framebuffer"} <= rules
    # stable order: rule order, then object
    order = list(RULES)
    assert [order.index(f.rule) for f in found] == sorted(order.index(f.rule) for f in found)
    message = summarize(found)
    assert message.startswith("The pool design has %d error(s): " % len(errors(found)))
    assert "tenant_gpu_quota: tenants.research: " in message and "(fix: " in message
    with pytest.raises(DesignError) as exc:
        derive(design)
    assert len(exc.value.findings) == len(errors(found))


def test_finding_shape():
    f = Finding("tenant_gpu_quota", "tenants.x", "no quota", "set gpu_quota")
    assert f.to_dict() == {"rule": "tenant_gpu_quota", "severity": "error", "object": "tenants.x",
                           "message": "no quota", "fix": "set gpu_quota"}
    assert str(f) == "tenant_gpu_quota: tenants.x: no quota (fix: set gpu_quota)"


# ---------------------------------------------------------------------------------------
# normalization, catalog helpers, packing
# ---------------------------------------------------------------------------------------


def test_defaults_filled(design):
    for p in design["pools"]:
        for key in ("priority", "per_card"):
            p.pop(key, None)
    d, findings = normalize(design)
    assert findings == []
    inference = [p for p in d["pools"] if p["name"] == "inference"][0]
    assert inference["priority"] == "gpu-inference"
    assert inference["vm_class"]["name"] == "gpu-inference"
    assert inference["node_pool"] == {"name": "inference", "vks_cluster": "gpu-workloads", "replicas": 4,
                                      "labels": {}, "taints": None}
    assert d["clusters"][0]["drs"] == {"pinning": True, "behavior": "partiallyAutomated"}
    assert d["tenants"][0]["namespace"] == "team-search"
    assert d["tenants"][0]["storage_policy"] == "vSAN Default Storage Policy"
    assert set(d["priorities"]) == {"gpu-inference", "gpu-training", "gpu-notebook"}


def test_offered_profiles():
    h100 = offered_profiles("H100-80GB")
    assert "nvidia_h100-80c" in h100 and "nvidia_h100-3-40c" in h100 and "nvidia_h100-1-10cme" in h100
    assert not any(n.endswith("q") for n in h100)
    l40s = offered_profiles("L40S")
    assert "nvidia_l40s-8c" in l40s and "nvidia_l40s-1q" in l40s and "nvidia_l40s-2c" not in l40s
    assert profile_problem("nvidia_h100xm-1-10c", "H100-80GB") is None
    assert "not MIG-backed" not in (profile_problem("grid_a100d-3-40c", "H100-80GB") or "")


def test_pack_keeps_a_node_on_one_host():
    p = {"name": "t"}
    used, unplaced = pack([(p, 4, 1)] * 2, hosts=2, gpus_per_host=3)
    assert used == 0 and unplaced == [p, p]
    q = {"name": "m"}
    used, unplaced = pack([(q, 1, 2)] * 5, hosts=1, gpus_per_host=4)
    assert used == 3 and unplaced == []


# ---------------------------------------------------------------------------------------
# derivation of the example
# ---------------------------------------------------------------------------------------


def test_derive_esxi():
    esxi = derive(EXAMPLE)["esxi"]["clusters"]
    h100 = esxi["gpu-h100"]
    assert h100["driver_version"] == "550.90.05-1OEM.800.1.0.20613240"
    assert h100["lifecycle"] == "direct" and h100["driver_bundle"].startswith("[LocalDS_0] drivers/NVD-AIE-800_")
    assert h100["graphics_type"] == "shared_direct" and h100["assignment_policy"] == "performance"
    assert h100["scheduler"] == {"policy": "best_effort", "time_slice_ms": None} and h100["rmpvmrl"] == "0x00000000"
    assert h100["mig_mode"] == "enabled"
    # training on the full cards of hosts 1 and 2, inference on MIG GPUs 0-1 of host 3, host 4 the spare
    assert h100["mig_geometry"] == [[], [], [0, 1], [0, 1]]
    assert h100["min_gpus"] == 2         # 4 inference nodes on 2 cards; training (preemptible) is drained
    l40s = esxi["gpu-l40s"]
    assert l40s["scheduler"]["policy"] == "best_effort" and l40s["mig_mode"] == "disabled"
    assert l40s["mig_geometry"] == [[], [], []]
    assert l40s["min_gpus"] == 0         # notebooks only: preemptible


def test_derive_vsphere():
    vs = derive(EXAMPLE)["vsphere"]
    classes = {c["name"]: c for c in vs["vm_classes"]}
    assert classes["gpu-training"]["vgpu_profiles"] == ["nvidia_h100-80c"] * 4
    assert classes["gpu-inference"]["memory_mb"] == 65536 and classes["gpu-inference"]["memory_reservation"] == 100
    namespaces = {n["name"]: n for n in vs["namespaces"]}
    assert namespaces["gpu-platform"]["vm_classes"] == ["gpu-inference", "gpu-training", "gpu-notebooks"]
    assert namespaces["team-search"]["vm_classes"] == ["gpu-inference"]
    assert namespaces["research"]["access"][1] == {"subject": "auditors", "type": "GROUP",
                                                   "domain": "vsphere.local", "role": "VIEW"}
    assert namespaces["team-vision"]["limits"]["cpu_mhz"] == 200000
    assert vs["drs_pinning"] == [{"name": "gpu-h100", "behavior": "partiallyAutomated"},
                                 {"name": "gpu-l40s", "behavior": "partiallyAutomated"}]


def test_derive_vks():
    vks = derive(EXAMPLE)["vks"]["clusters"]["gpu-workloads"]
    pools = {p["name"]: p for p in vks["node_pools"]}
    inference = pools["inference"]
    assert inference["replicas"] == 4 and inference["vm_class"] == "gpu-inference"
    assert inference["labels"]["nvidia.com/vgpu.profile"] == "nvidia_h100-3-40c"
    assert inference["labels"]["gpupool.vcf/pool"] == "inference"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in inference["taints"]
    assert {"key": "gpupool.vcf/pool", "value": "inference", "effect": "NoSchedule"} in inference["taints"]
    assert pools["notebooks"]["labels"]["nvidia.com/device-plugin.config"] == "notebooks"
    assert pools["notebooks"]["failure_domain"] == "gpu-l40s"


def test_derive_guest_roles():
    """The guest roles' inputs, built from the design itself (no manifests in between)."""
    derived = derive(EXAMPLE)
    assert "guest" not in derived
    policy = derived["roles"]["gpu_scheduling_policy"]
    classes = {c["name"]: c for c in policy["gpu_scheduling_policy_priority_classes"]}
    assert classes["gpu-inference"]["value"] > classes["gpu-training"]["value"] > classes["gpu-notebook"]["value"]
    assert classes["gpu-notebook"]["preemption_policy"] == "Never"
    quotas = {(t["namespace"], q["name"]): q for t in policy["gpu_scheduling_policy_tenants"] for q in t["quotas"]}
    assert quotas[("team-vision", "gpupool-gpus")] == {"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": "18"}}
    assert quotas[("research", "gpupool-gpu-notebook")] == {
        "name": "gpupool-gpu-notebook", "hard": {"requests.nvidia.com/gpu": "16"}, "priority_class": "gpu-notebook"}
    tenants = {t["namespace"]: t for t in policy["gpu_scheduling_policy_tenants"]}
    assert [n for n, t in tenants.items() if t["training"]] == ["team-vision", "research"]
    assert tenants["team-search"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf",
                                                "gpupool.vcf/design": EXAMPLE["name"]}
    assert policy["gpu_scheduling_policy_kueue"] is True
    [queue] = policy["gpu_scheduling_policy_kueue_queues"]
    assert (queue["name"], queue["local_queue"]) == ("gpupool-training", "training")
    assert queue["namespaces"] == ["team-vision", "research"]
    assert queue["resources"] == {"cpu": 64, "memory": "768Gi", "nvidia.com/gpu": 8}
    assert queue["node_labels"] == {"gpupool.vcf/pool": "training"}
    assert {"key": "gpupool.vcf/pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in \
        queue["tolerations"]
    assert policy["gpu_scheduling_policy_kueue_cohort"] == "gpupool"
    assert policy["gpu_scheduling_policy_kueue_preemption"] == {"within_cluster_queue": "LowerPriority",
                                                                "reclaim_within_cohort": "Any"}
    assert policy["gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout"] == "10m"
    operator = derived["roles"]["gpu_operator"]
    assert operator["gpu_operator_time_slicing"] == {"notebooks": {
        "replicas": 4, "resources": ["nvidia.com/gpu"], "rename_by_default": False,
        "fail_requests_greater_than_one": True}}
    assert operator["gpu_operator_mig_strategy"] == "single" and operator["gpu_operator_mig_manager_enabled"] is False
    assert operator["gpu_operator_licensing_secret_name"] == "licensing-config"
    nls = derived["roles"]["nls_licensing"]
    assert (nls["nls_licensing_secret_prefix"], nls["nls_licensing_feature_type"],
            nls["nls_licensing_operator_namespace"]) == ("licensing-config", 1, operator["gpu_operator_namespace"])


def test_mixed_mig_strategy_is_a_design_error_in_vgpu_guests(design):
    """mixed advertises nvidia.com/mig-<profile>; a vGPU guest only ever sees nvidia.com/gpu."""
    design["guest"]["mig_strategy"] = "mixed"
    found = only(validate(design), "mig_strategy_vgpu")
    assert [(f.severity, f.object) for f in found] == [("error", "guest.mig_strategy")]
    assert "plain nvidia.com/gpu" in found[0].message and "inference" in found[0].message
    assert "guest.mig_strategy auto" in found[0].fix
    with pytest.raises(DesignError):
        derive(design)
    for strategy in ("auto", "none", "single"):
        design["guest"]["mig_strategy"] = strategy
        assert not [f for f in validate(design) if f.rule == "mig_strategy_vgpu"]


def rules_of(findings, rule):
    return [f for f in findings if f.rule == rule]


def test_example_guest_driver_is_of_the_hosts_release_branch():
    """550.90.07 (R550, vGPU 17) on the example's 550.90.05 hosts: no finding of the guest driver rules."""
    found = validate(EXAMPLE)
    assert EXAMPLE["guest"]["driver"]["version"].startswith("550.")
    assert not rules_of(found, "guest_driver_matches_host") and not rules_of(found, "guest_driver_set")


def test_guest_driver_set_is_a_warning_with_the_fields_to_add(design):
    del design["guest"]["driver"]
    f = only(validate(design), "guest_driver_set")[0]
    assert f.severity == "warning" and f.object == "guest" and "refuses" in f.message
    assert all(k in f.fix for k in ("repository", "image", "version", "pull_secret"))
    # no host release in the table: the fix names no version; a host of vGPU 19.0 gets its guest driver named
    assert "580.65.06" not in f.fix
    for c in design["clusters"]:
        c["driver"]["version"] = "580.65.05-1OEM.800.1.0.20613240"
        c["driver"]["bundle"] = "[LocalDS_0] drivers/NVD-AIE-800_580.65.05-1OEM.800.1.0.20613240_1.zip"
    assert "580.65.06 for 580.65.05" in only(validate(design), "guest_driver_set")[0].fix
    assert derive(design)["roles"]["gpu_operator"]["gpu_operator_driver_version"] == ""


@pytest.mark.parametrize("guest,verdict", [
    ("550.54.14", None),        # same branch R550: no finding
    ("535.183.06", None),       # the branch before the host's (R535, vGPU 16)
    ("580.65.06", "newer"),     # a later branch than the host's: the vGPU does not load
    ("525.85.05", "older"),     # two branches before (vGPU 15 on vGPU 17)
    ("470.256.02", "unknown"),  # R470 is not in the table: a warning, nothing guessed
    ("latest", "bad"),
])
def test_guest_driver_matches_host(design, guest, verdict):
    design["guest"]["driver"]["version"] = guest
    found = rules_of(validate(design), "guest_driver_matches_host")
    if verdict is None:
        assert found == []
        return
    if verdict == "bad":
        assert [(f.severity, f.object) for f in found] == [("error", "guest.driver")]
        return
    assert sorted(f.object for f in found) == ["clusters.gpu-h100", "clusters.gpu-l40s"]
    f = found[0]
    if verdict == "unknown":
        assert f.severity == "warning" and "R470 is not in the release table" in f.message
        assert "release notes" in f.fix
        assert not errors(validate(design))
        return
    assert f.severity == "error" and "vGPU would not load" in f.message
    assert ("newer than the vGPU Manager" if verdict == "newer" else "2 release branches older") in f.message
    assert "branch R550" in f.fix
    with pytest.raises(DesignError):
        derive(design)


def test_guest_driver_matches_each_cluster_and_names_the_release_pair(design):
    """Each cluster's host driver is judged; a host of a listed release gets its guest driver in the fix."""
    c = cluster(design, "gpu-l40s")
    c["driver"]["version"] = "580.65.05-1OEM.800.1.0.20613240"
    c["driver"]["bundle"] = "[LocalDS_0] drivers/NVD-AIE-800_580.65.05-1OEM.800.1.0.20613240_1.zip"
    design["guest"]["driver"]["version"] = "580.65.06"
    found = rules_of(validate(design), "guest_driver_matches_host")
    assert [f.object for f in found] == ["clusters.gpu-h100"]  # vGPU 19.0 guest on R550 hosts; fine on 19.0 hosts
    design["guest"]["driver"]["version"] = "550.90.07"
    found = rules_of(validate(design), "guest_driver_matches_host")
    # R550 (vGPU 17) on the R580 (vGPU 19) hosts is two branches older: R570 lies between
    assert [f.object for f in found] == ["clusters.gpu-l40s"]
    assert "2 release branches older" in found[0].message
    assert "set guest.driver.version to 580.65.06, the Linux guest driver of the host driver's release" == found[0].fix


def test_guest_driver_fields_and_pull_secret_name(design):
    design["guest"]["driver"] = {"version": "550.90.07", "pull_secret": "Bad_Name"}
    found = validate(design)
    assert any(f.rule == "schema" and f.object == "guest.driver.repository" for f in found)
    assert any(f.rule == "dns_label" and "image pull Secret" in f.message for f in found)


def test_derive_gives_gpu_operator_the_guest_driver():
    op = derive(EXAMPLE)["roles"]["gpu_operator"]
    driver = EXAMPLE["guest"]["driver"]
    assert (op["gpu_operator_driver_repository"], op["gpu_operator_driver_image"], op["gpu_operator_driver_version"],
            op["gpu_operator_driver_pull_secrets"]) == (driver["repository"], driver["image"], driver["version"],
                                                        [driver["pull_secret"]])
    assert op["gpu_operator_vgpu_guest"] is True and op["gpu_operator_allow_mig_strategy_change"] is False
    design = copy.deepcopy(EXAMPLE)
    design["guest"]["driver"].pop("pull_secret")
    design["guest"]["allow_mig_strategy_change"] = True
    op = derive(design)["roles"]["gpu_operator"]
    assert op["gpu_operator_driver_pull_secrets"] == [] and op["gpu_operator_allow_mig_strategy_change"] is True


def test_every_role_gets_its_own_variables():
    """derive() names each role's inputs as the role's argument spec does, so a playbook passes them on as they are."""
    derived = derive(EXAMPLE)
    for role, given in derived["roles"].items():
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        options = set().union(*(set(ep.get("options") or {}) for ep in spec.values()))
        entries = list(given.values()) if role == "esxi_gpu_host" else given if isinstance(given, list) else [given]
        for entry in entries:
            assert sorted(set(entry) - options) == [], (role, sorted(set(entry) - options))
    assert sorted(derived["roles"]["esxi_gpu_host"]) == sorted(derived["esxi"]["clusters"])
    h100 = derived["roles"]["esxi_gpu_host"]["gpu-h100"]
    assert h100["esxi_gpu_host_driver_version"] == derived["esxi"]["clusters"]["gpu-h100"]["driver_version"]
    tenancy = derived["roles"]["supervisor_gpu_tenancy"]
    # the summary's report keys (pool, kind, supervisor) are no role input
    assert [sorted(c) for c in tenancy["supervisor_gpu_tenancy_vm_classes"]][0] == sorted(
        ["name", "cpu_count", "memory_mb", "vgpu_profiles", "profiling", "memory_reservation", "cluster", "description"])
    assert all("kind" not in n and "supervisor" not in n for n in tenancy["supervisor_gpu_tenancy_namespaces"])


def test_json_schema_matches_the_schema():
    js = _design_schema.json_schema()
    assert js["required"] == ["supervisor", "vks_clusters", "clusters", "pools"]
    pool_props = js["properties"]["pools"]["items"]["properties"]
    assert pool_props["sharing"]["enum"] == ["mig", "full_card", "time_sliced"]
    assert js["properties"]["pools"]["items"]["additionalProperties"] is False
    json.dumps(js)


def test_docs_explain_every_field():
    docs = (ROOT / "docs" / "design.md").read_text()

    def walk(spec, path):
        for key, sub in spec.get("options", {}).items():
            here = "%s.%s" % (path, key) if path else key
            yield here
            if sub["type"] == "dict":
                yield from walk(sub, here)
            if sub["type"] == "list" and sub.get("elements") == "dict":
                yield from walk(sub, here + "[]")
            if sub["type"] == "map" and isinstance(sub.get("values"), dict):
                yield from walk(sub["values"], here + ".<name>")

    missing = [p for p in walk(_design_schema.DESIGN_SCHEMA, "") if "`%s`" % p not in docs]
    assert missing == []


def test_derive_vks_role_matches_the_vks_summary():
    derived = derive(EXAMPLE)
    pools = derived["roles"]["vks_gpu_node_pools"]
    assert [(p["vks_gpu_node_pools_cluster_name"], p["vks_gpu_node_pools_namespace"]) for p in pools] == \
        [("gpu-workloads", "gpu-platform")]
    want = derived["vks"]["clusters"]["gpu-workloads"]["node_pools"]
    assert [(p["name"], p["replicas"], p["vm_class"], p["labels"], p["taints"]) for p in
            pools[0]["vks_gpu_node_pools_node_pools"]] == \
        [(p["name"], p["replicas"], p["vm_class"], p["labels"], p["taints"]) for p in want]


def test_derive_roles_without_gang_training():
    design = copy.deepcopy(EXAMPLE)
    for pool in design["pools"]:
        if pool["name"] == "training":
            pool["training"] = {"gpus_per_job": 1, "gang_scheduling": False}
    policy = derive(design)["roles"]["gpu_scheduling_policy"]
    assert policy["gpu_scheduling_policy_kueue"] is False
    assert policy["gpu_scheduling_policy_kueue_queues"] == []
    # no gang-scheduled pool: Kueue's configuration is left alone
    assert policy["gpu_scheduling_policy_kueue_wait_for_pods_ready_timeout"] == ""
