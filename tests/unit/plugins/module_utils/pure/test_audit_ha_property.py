"""The audit's HA findings (esxi link) are the ha_gpu_restart plan's changes: over generated HA states of the
example design's clusters (with ha.manage), one finding per change of the plan the role would make, by the
rule of its field and action, and one ha_setting_foreign per setting the plan leaves; none on a converged
cluster."""
import copy
import pathlib

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_scope, _ha
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[5]
DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
for _cluster in DESIGN["clusters"]:
    _cluster["ha"] = {"manage": True}
DERIVED = derive(DESIGN)
HA_RULES = set(_audit_esxi.HA_RULE_BY_CHANGE) | {"ha_setting_foreign"}
settings.register_profile("gpupool-audit-ha", max_examples=150, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("gpupool-audit-ha")

VMS = {"gpu-h100": [dict(moid="vm-1", name="inference-0", vgpu_profiles=["nvidia_h100-3-40c"]),
                    dict(moid="vm-2", name="llm-inference-01", vgpu_profiles=["nvidia_h100-3-40c"]),
                    dict(moid="vm-3", name="training-0", vgpu_profiles=["nvidia_h100-80c"] * 4),
                    dict(moid="vm-4", name="embedding-01", vgpu_profiles=["nvidia_h100-1-10c"] * 2)],
       "gpu-l40s": [dict(moid="vm-11", name="notebooks-0", vgpu_profiles=["nvidia_l40s-8c"])]}
MOIDS = [vm["moid"] for vms in VMS.values() for vm in vms]


def hosts():
    return [dict(name="esx-%s" % cluster, cluster=cluster, gpu_count=4, vgpu_vms=copy.deepcopy(vms))
            for cluster, vms in VMS.items()]


STATE = st.fixed_dictionaries(dict(
    overrides=st.dictionaries(st.sampled_from(MOIDS + ["vm-99"]), st.sampled_from(_ha.PRIORITIES), max_size=6),
    owned=st.sets(st.sampled_from(MOIDS + ["vm-99", _ha.CLUSTER_TOKEN]), max_size=6),
    enabled=st.booleans(),
    policy=st.sampled_from([None, dict(kind="resources", failover_level=1, cpu_percent=25, memory_percent=25, auto=False),
                            dict(kind="resources", failover_level=1, cpu_percent=34, memory_percent=34, auto=False),
                            dict(kind="slots", failover_level=1)]),
))


def state_of(draw):
    return dict(das=dict(enabled=draw["enabled"], admission_control_enabled=draw["policy"] is not None,
                         policy=draw["policy"]),
                overrides=dict(draw["overrides"]), owned=set(draw["owned"]))


@settings(PROFILE)
@given(st.fixed_dictionaries(dict((c, STATE) for c in VMS)))
def test_an_ha_finding_exactly_where_the_role_plan_has_a_change(draws):
    ha = dict((c, state_of(d)) for c, d in draws.items())
    found = [(f["rule"], f["object"]) for f in _audit_scope.audit_esxi(DERIVED, hosts(), drs={}, ha=ha)
             if f["rule"] in HA_RULES]
    want = []
    for entry in _audit.role_inputs(DERIVED, "ha_gpu_restart")["ha_gpu_restart_clusters"]:
        live = dict(ha[entry["name"]], vms=VMS[entry["name"]])
        plan = _ha.plan(live, dict(cluster=entry["name"], pools=entry["pools"],
                                   admission_control=entry["admission_control"], exclude=[], adopt=False))
        rule_of = dict((v, k) for k, v in _audit_esxi.HA_RULE_BY_CHANGE.items())
        want += [(rule_of[(c.field, c.action)], c.object.replace("VM ", "vm ", 1)) for c in plan.changes()]
        want += [("ha_setting_foreign", t.split(":")[0].replace("VM ", "vm ", 1)) for t in plan.kept_foreign]
    assert sorted(found) == sorted(want)


def test_a_converged_cluster_has_no_ha_finding_and_a_drift_has_one():
    ha = {}
    for entry in _audit.role_inputs(DERIVED, "ha_gpu_restart")["ha_gpu_restart_clusters"]:
        policy = dict(kind="resources", auto=False, **entry["admission_control"])
        plan = _ha.plan(dict(vms=VMS[entry["name"]], overrides={}, das={}, owned=set()),
                        dict(cluster=entry["name"], pools=entry["pools"], admission_control=entry["admission_control"]))
        ha[entry["name"]] = dict(das=dict(enabled=True, admission_control_enabled=True, policy=policy),
                                 overrides=dict((e["moid"], e["priority"]) for e in plan.add), owned=plan.owned_after)
    assert [f for f in _audit_scope.audit_esxi(DERIVED, hosts(), drs={}, ha=ha) if f["rule"] in HA_RULES] == []
    assert ha["gpu-h100"]["overrides"] == {"vm-1": "highest", "vm-2": "highest", "vm-3": "medium"}
    ha["gpu-h100"]["overrides"]["vm-3"] = "low"
    ha["gpu-l40s"]["das"]["policy"] = dict(ha["gpu-l40s"]["das"]["policy"], cpu_percent=10)
    found = [f for f in _audit_scope.audit_esxi(DERIVED, hosts(), drs={}, ha=ha) if f["rule"] in HA_RULES]
    assert [(f["rule"], f["object"]) for f in found] == [("ha_restart_priority_off_design", "vm training-0"),
                                                         ("ha_admission_control_off_design", "cluster gpu-l40s")]
    assert "restarts at priority low; the design says medium" in found[0]["message"]
    assert found[1]["fix"].startswith("run the ha_gpu_restart role")
    # without the HA read (a design that manages no HA) there is no HA finding
    assert [f for f in _audit_scope.audit_esxi(DERIVED, hosts(), drs={}) if f["rule"] in HA_RULES] == []


def test_the_design_derives_the_spare_rule_and_the_pools_priorities():
    entries = dict((c["name"], c) for c in DERIVED["vsphere"]["ha"])
    assert entries["gpu-h100"]["admission_control"] == dict(cpu_percent=25, failover_level=1, memory_percent=25)
    assert entries["gpu-l40s"]["admission_control"] == dict(cpu_percent=34, failover_level=1, memory_percent=34)
    assert entries["gpu-h100"]["spare_gpus"] == 4  # one host of 4 H100s
    assert [(p["name"], p["restart_priority"]) for p in entries["gpu-h100"]["pools"]] == [
        ("inference", "highest"), ("training", "medium")]
    vc = list(DERIVED["vcenters"].values())[0]
    assert vc["roles"]["ha_gpu_restart"] == DERIVED["roles"]["ha_gpu_restart"]
    plain = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
    assert plain["roles"]["ha_gpu_restart"] == {"ha_gpu_restart_clusters": []}
