"""discover() is the inverse of derive() on the vSphere side: derive(example) -> the live state the readers
would return for it -> discover -> a design whose derived VM classes and namespaces are the example's."""
import copy
import pathlib

import pytest
import yaml

import json

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace as nsu
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as _objects
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._discover import (
    DiscoverError, apply_guest, apply_vks, discover, render)

ROOT = pathlib.Path(__file__).resolve().parents[5]
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def live_of(derived):
    """(hosts, vm_classes, namespaces, storage_policies, drs) as the vSphere readers give them for a
    platform built to ``derived``."""
    hosts = []
    profiles = {}
    for vc in derived["vsphere"]["vm_classes"]:
        profiles.setdefault(vc["cluster"], set()).update(vc["vgpu_profiles"])
    for name, c in derived["esxi"]["clusters"].items():
        geometry = c["mig_geometry"]
        for n in range(c["hosts"]):
            host = "%s-esx-%02d" % (name, n)
            mig = geometry.get(host, []) if isinstance(geometry, dict) else (geometry[n] if n < len(geometry) else [])
            hosts.append(dict(
                name=host, cluster=name, gpu_count=c["gpus_per_host"], connection_state="connected",
                gpus=[dict(index=i, model=c["gpu_model"], mig="enabled" if i in mig else "disabled") for i in range(c["gpus_per_host"])],
                graphics=dict(default_type=c["graphics_type"], assignment_policy=c["assignment_policy"]),
                driver=dict(full_version=c["driver_version"], source="host",
                            packages=[dict(name=c["component"], version=c["driver_version"], vendor="NVIDIA")]),
                scheduler=dict(policy=c["scheduler"]["policy"], time_slice_ms=c["scheduler"]["time_slice_ms"]),
                vgpu_profiles=sorted(profiles.get(name, ())), vgpu_vms=[]))
    classes = dict((vc["name"], dict(cpu_count=vc["cpu_count"], memory_mb=vc["memory_mb"], cpu_reservation=0,
                                     memory_reservation=100, description=vc["description"],
                                     vgpu_profiles=list(vc["vgpu_profiles"])))
                   for vc in derived["vsphere"]["vm_classes"])
    classes["best-effort-small"] = dict(cpu_count=2, memory_mb=4096, vgpu_profiles=[], description="")
    namespaces = {}
    for ns in derived["vsphere"]["namespaces"]:
        namespaces[ns["name"]] = dict(
            cluster=ns["cluster"], description=ns["description"], vm_classes=sorted(ns["vm_classes"]),
            content_libraries=[], storage_policies=dict(("pol-" + s["policy"], s["limit_mib"])
                                                        for s in ns["storage_policies"]),
            limits=dict(ns["limits"]), access=sorted((dict(a) for a in ns["access"]), key=nsu.access_key))
    policies = dict(("pol-" + s["policy"], s["policy"]) for ns in derived["vsphere"]["namespaces"]
                    for s in ns["storage_policies"])
    return hosts, classes, namespaces, policies, {}


def vsphere_objects(derived):
    classes = sorted((vc["name"], vc["cpu_count"], vc["memory_mb"], tuple(vc["vgpu_profiles"]), vc["description"])
                     for vc in derived["vsphere"]["vm_classes"])
    namespaces = sorted((ns["name"], ns["kind"], ns["description"], tuple(sorted(ns["vm_classes"])),
                         tuple((s["policy"], s["limit_mib"]) for s in ns["storage_policies"]),
                         tuple(sorted(ns["limits"].items())),
                         tuple(sorted(tuple(sorted(a.items())) for a in ns["access"])))
                        for ns in derived["vsphere"]["namespaces"])
    return classes, namespaces


def discovered(design=None):
    want = derive(copy.deepcopy(design or DESIGN))
    found, notes = discover(*live_of(want), name=want["design"])
    return want, found, notes


def test_the_discovered_design_derives_the_example_vsphere_objects():
    want, found, _notes = discovered()
    assert vsphere_objects(derive(found)) == vsphere_objects(want)


def test_the_discovered_design_derives_the_example_esxi_inputs():
    want, found, _notes = discovered()
    keys = ("gpu_model", "hosts", "gpus_per_host", "driver_version", "lifecycle", "graphics_type",
            "assignment_policy", "scheduler", "rmpvmrl", "mig_geometry", "mig_mode")
    got = derive(found)["esxi"]["clusters"]
    for name, c in want["esxi"]["clusters"].items():
        assert dict((k, got[name][k]) for k in keys if k != "mig_geometry") == \
            dict((k, c[k]) for k in keys if k != "mig_geometry")
        assert mig_hosts(name, got[name]["mig_geometry"]) == mig_hosts(name, c["mig_geometry"])


def mig_hosts(cluster, geometry):
    """{host name: GPU indexes in MIG mode} of derive()'s geometry in either form (hosts without MIG left out)."""
    if isinstance(geometry, dict):
        return dict((h, list(g)) for h, g in geometry.items() if g)
    return dict(("%s-esx-%02d" % (cluster, n), list(g)) for n, g in enumerate(geometry) if g)


def test_the_audit_of_the_vsphere_link_with_the_discovered_design_is_clean():
    want, found, _notes = discovered()
    _hosts, classes, namespaces, policies, _drs = live_of(want)
    assert _audit_vsphere.audit_vsphere(derive(found), classes, namespaces, policies) == []


def test_descriptions_of_a_platform_built_by_hand_are_kept_and_the_audit_is_clean():
    want = derive(copy.deepcopy(DESIGN))
    hosts, classes, namespaces, policies, drs = live_of(want)
    classes["gpu-inference"]["description"] = "serving on H100 slices"
    classes["gpu-training"]["description"] = ""
    namespaces["gpu-platform"]["description"] = "made by the platform team"
    tenant = sorted(n for n in namespaces if n != "gpu-platform")[0]
    namespaces[tenant]["description"] = ""
    found, _notes = discover(hosts, classes, namespaces, policies, drs, name=want["design"])
    by_class = dict((p["vm_class"]["name"], p["vm_class"]) for p in found["pools"])
    assert by_class["gpu-inference"]["description"] == "serving on H100 slices"
    assert by_class["gpu-training"]["description"] == ""
    assert "description" not in by_class["gpu-notebooks"]  # the derived text: no key written
    assert found["vks_clusters"][0]["description"] == "made by the platform team"
    assert [t["description"] for t in found["tenants"] if t["name"] == tenant] == [""]
    assert _audit_vsphere.audit_vsphere(derive(found), classes, namespaces, policies) == []


def test_mig_geometry_is_per_gpu_and_a_second_model_stays_in_its_cluster():
    want, found, _notes = discovered()
    h100 = [c for c in found["clusters"] if c["name"] == "gpu-h100"][0]
    expected = mig_hosts("gpu-h100", want["esxi"]["clusters"]["gpu-h100"]["mig_geometry"])
    assert expected and dict(h100["mig_geometry"]) == expected
    l40s = [c for c in found["clusters"] if c["name"] == "gpu-l40s"][0]
    assert "mig_geometry" not in l40s and l40s["gpu"]["model"] == "L40S"
    assert dict((p["name"], (p["cluster"], p["sharing"])) for p in found["pools"]) == {
        "inference": ("gpu-h100", "mig"), "training": ("gpu-h100", "full_card"), "notebooks": ("gpu-l40s", "time_sliced")}


def test_what_the_platform_cannot_say_has_a_comment_and_the_yaml_reads_back():
    _want, found, notes = discovered()
    text = render(found, notes, header=["discovered"])
    assert yaml.safe_load(text) == json.loads(json.dumps(found))
    assert "# the schema requires it and the vSphere side does not say: 0 chosen" in text
    assert "ResourceQuota" in text and "slo, model and training" in text


def test_a_platform_without_gpu_hosts_is_refused_with_a_clear_message():
    hosts = [dict(name="esx-1", cluster="c", gpu_count=0, gpus=[])]
    with pytest.raises(DiscoverError, match="no host with an NVIDIA GPU"):
        discover(hosts, {}, {})


def test_a_platform_without_vgpu_classes_is_refused():
    want = derive(copy.deepcopy(DESIGN))
    hosts, _classes, namespaces, policies, drs = live_of(want)
    with pytest.raises(DiscoverError, match="no VM class has a vGPU profile"):
        discover(hosts, {"small": dict(cpu_count=2, memory_mb=4096, vgpu_profiles=[])}, namespaces, policies, drs)


def test_render_reads_back_keys_and_values_yaml_would_misread():
    data = {"a: b": "x: y", "on": "yes", "nvidia.com/gpu": [0, 1], "empty": [], "none": None, "n": {"true": 1},
            "items": [{"k": "v", "l": [1]}, "plain"]}
    notes = {("items", 0): "first", ("items", 0, "l"): "inner", ("a: b",): "odd key"}
    text = render(data, notes)
    assert yaml.safe_load(text) == data
    assert "  # first\n  - k:" in text and "# odd key\n\"a: b\":" in text


def vks_live(derived):
    """read_vks's answer for a Supervisor whose node pools are the derived ones."""
    return dict((name, dict(namespace=c["namespace"], machine_deployments=dict(
        (np["name"], dict(replicas=np["replicas"], vm_class=np["vm_class"], labels=dict(np["labels"]),
                          taints=[dict(t) for t in np["taints"]])) for np in c["node_pools"])))
        for name, c in derived["vks"]["clusters"].items())


def node_pools(derived):
    return dict((name, sorted((np["name"], np["replicas"], np["vm_class"], tuple(sorted(np["labels"].items())),
                               tuple(tuple(t.items()) for t in np["taints"])) for np in c["node_pools"]))
                for name, c in derived["vks"]["clusters"].items())


def test_the_vks_node_pools_read_back_derive_the_same_node_pools():
    design = copy.deepcopy(DESIGN)
    design["pools"][0]["node_pool"].update(name="llm", labels={"team": "search"},
                                           taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                                   {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}])
    want, found, notes = discovered(design)
    apply_vks(found, notes, vks_live(want))
    assert node_pools(derive(found)) == node_pools(want)
    assert not [k for k in notes if k[-1] == "replicas"]
    inference = [p for p in found["pools"] if p["name"] == "inference"][0]
    assert inference["node_pool"]["labels"] == {"team": "search"}
    assert inference["node_pool"]["taints"][1] == {"key": "dedicated", "value": "llm", "effect": "NoSchedule"}
    assert "labels" not in [p for p in found["pools"] if p["name"] == "training"][0]["node_pool"]


def guest_live(derived):
    """read_guest_design's answer for a guest cluster the roles built from ``derived``."""
    op, policy = _audit_guest.guest_inputs(derived)
    quotas = dict((t["namespace"], [dict(name=q["name"], hard=dict(q["hard"]), priority_class=q.get("priority_class"))
                                    for q in t["quotas"]]) for t in policy["gpu_scheduling_policy_tenants"])
    pcs = dict((pc["name"], dict(value=pc["value"], preemptionPolicy=pc["preemption_policy"],
                                 description=pc["description"]))
               for pc in policy["gpu_scheduling_policy_priority_classes"])
    pcs["system-cluster-critical"] = dict(value=2000000000, preemptionPolicy="PreemptLowerPriority", description="")
    kueue = _objects.kueue_objects(policy)
    job = _objects.culling_cronjob(policy)
    return dict(priority_classes=pcs, resource_quotas=quotas, cluster_policy=_objects.cluster_policy_spec(op),
                kueue=dict(kueue["cluster_queues"]) if kueue else {},
                culling=dict(exists=True, schedule=job["schedule"], image=job["image"], env=job["env"]) if job else None)


def guest_roles(derived):
    op, policy = _audit_guest.guest_inputs(derived)
    policy = json.loads(json.dumps(policy))  # order of tenants, their quotas and a queue's namespaces aside
    for queue in policy["gpu_scheduling_policy_kueue_queues"]:
        queue["namespaces"] = sorted(queue["namespaces"])
    policy["gpu_scheduling_policy_tenants"] = sorted(
        (dict(t, quotas=sorted(t["quotas"], key=lambda q: q["name"])) for t in policy["gpu_scheduling_policy_tenants"]),
        key=lambda t: t["namespace"])
    keys = ("gpu_operator_driver_repository", "gpu_operator_driver_image", "gpu_operator_driver_version",
            "gpu_operator_driver_pull_secrets", "gpu_operator_mig_strategy")
    return (dict((k, op[k]) for k in keys), json.loads(json.dumps(dict(
        (k, v) for k, v in policy.items() if k.startswith("gpu_scheduling_policy_") and k != "gpu_scheduling_policy_tenants"
        and (k.endswith("priority_classes") or "kueue" in k or "culling" in k)))),
        json.loads(json.dumps([(t["namespace"], t["quotas"]) for t in policy["gpu_scheduling_policy_tenants"]])))


@pytest.mark.parametrize("change", ["example", "own"])
def test_the_guest_objects_read_back_derive_the_same_guest_objects(change):
    design = copy.deepcopy(DESIGN)
    if change == "own":  # values of a platform's own: priorities, cohort, culling, quota, guest driver
        design["priorities"] = {"gpu-training": {"value": 70000, "preemption_policy": "PreemptLowerPriority",
                                                 "description": "Batch jobs"}}
        design["guest"]["driver"] = {"repository": "registry.lab/nv", "version": "550.90.07"}
        design["guest"].setdefault("kueue", {})["cohort"] = "research"
        design["guest"]["culling"] = {"check_minutes": 5}
        design["tenants"][0]["gpu_quota"] = dict((k, v + 3) for k, v in design["tenants"][0]["gpu_quota"].items())
    want, found, notes = discovered(design)
    apply_vks(found, notes, vks_live(want))
    apply_guest(found, notes, guest_live(want))
    assert guest_roles(derive(found)) == guest_roles(want)
    assert not [k for k in notes if k[-1] == "gpu_quota"]
    assert "system-cluster-critical" not in found.get("priorities", {})


def test_quotas_that_do_not_tell_pools_apart_keep_the_note():
    want, found, notes = discovered()
    live = guest_live(want)
    for quotas in live["resource_quotas"].values():
        quotas[:] = [dict(name="gpus", hard={"requests.nvidia.com/gpu": "9"}, priority_class=None)]
    apply_guest(found, notes, live)
    several = [t for i, t in enumerate(found["tenants"]) if len(t["gpu_quota"]) > 1]
    assert several and [k for k in notes if k[-1] == "gpu_quota"]
