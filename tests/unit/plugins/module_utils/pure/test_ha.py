"""pure/_ha: the HA plan of one cluster (admission control of the spare rule, restart priority per pool VM),
over generated live states: a converged cluster plans nothing, only what the record holds (or adopt) is
changed, what someone else set is reported and left, the admission percentages keep the spare host."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _ha

settings.register_profile("gpupool-ha", max_examples=200, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = settings.get_profile("gpupool-ha")

POOLS = [dict(name="inference", vgpu_profile="nvidia_h100-3-40c", node_pool="inference", vm_class="gpu-inference",
              restart_priority="highest"),
         dict(name="training", vgpu_profile="nvidia_h100-80c", node_pool="training", vm_class="gpu-training",
              restart_priority="medium"),
         dict(name="notebooks", vgpu_profile="nvidia_h100-80c", node_pool="notebooks", vm_class="gpu-notebooks",
              restart_priority="lowest")]
VMS = [dict(moid="vm-1", name="inference-0", vgpu_profiles=["nvidia_h100-3-40c"]),
       dict(moid="vm-2", name="inference-1", vgpu_profiles=["nvidia_h100-3-40c"]),
       dict(moid="vm-3", name="training-a", vgpu_profiles=["nvidia_h100-80c"] * 4),
       dict(moid="vm-4", name="notebooks-b", vgpu_profiles=["nvidia_h100-80c"]),
       dict(moid="vm-5", name="mystery", vgpu_profiles=["nvidia_h100-80c"]),   # two pools share it, neither named
       dict(moid="vm-6", name="web-01", vgpu_profiles=[])]
WANTED = dict(cluster="gpu-h100", pools=POOLS, admission_control=_ha.admission_policy(4), adopt=False, exclude=[])
SPARE = dict(kind="resources", failover_level=1, cpu_percent=25, memory_percent=25, auto=False)

OVERRIDE = st.sampled_from([None] + list(_ha.PRIORITIES) + [_ha.CLUSTER_DEFAULT])
POLICY = st.sampled_from([None, SPARE, dict(SPARE, cpu_percent=50), dict(kind="slots", failover_level=1),
                          dict(kind="hosts", failover_level=1), dict(SPARE, auto=True)])
LIVE = st.fixed_dictionaries(dict(
    overrides=st.fixed_dictionaries(dict((vm["moid"], OVERRIDE) for vm in VMS)),
    enabled=st.booleans(), admission=st.booleans(), policy=POLICY,
    owned=st.sets(st.sampled_from([vm["moid"] for vm in VMS] + [_ha.CLUSTER_TOKEN])),
    adopt=st.booleans(), manage_admission=st.booleans(),
))


def live_of(draw):
    overrides = dict((m, p) for m, p in draw["overrides"].items() if p is not None)
    return dict(vms=VMS, overrides=overrides, owned=set(draw["owned"]),
                das=dict(enabled=draw["enabled"], admission_control_enabled=draw["admission"], policy=draw["policy"]))


def wanted_of(draw):
    return dict(WANTED, adopt=draw["adopt"], admission_control=WANTED["admission_control"] if draw["manage_admission"] else None)


def applied(live, plan):
    """The live state after the module applied ``plan`` (the reconfigure and the record)."""
    overrides = dict(live["overrides"])
    for e in plan.add + plan.edit:
        overrides[e["moid"]] = e["priority"]
    for e in plan.remove:
        del overrides[e["moid"]]
    das = live["das"]
    if plan.admission is not None:
        want = plan.admission
        das = dict(enabled=True, admission_control_enabled=True,
                   policy=dict(kind="resources", auto=False, **dict((k, want[k]) for k in _ha.POLICY_KEYS)))
    return dict(vms=live["vms"], overrides=overrides, das=das, owned=set(plan.owned_after))


@settings(PROFILE)
@given(LIVE)
def test_after_the_plan_is_applied_the_rerun_plans_nothing(draw):
    live, wanted = live_of(draw), wanted_of(draw)
    plan = _ha.plan(live, wanted)
    again = _ha.plan(applied(live, plan), wanted)
    assert again.changes() == [], again.changes()


@settings(PROFILE)
@given(LIVE)
def test_only_what_the_record_holds_is_changed_unless_adopt(draw):
    live, wanted = live_of(draw), wanted_of(draw)
    plan = _ha.plan(live, wanted)
    for e in plan.edit:
        assert e["moid"] in live["owned"] or wanted["adopt"], e
    for e in plan.remove:
        assert e["moid"] in live["owned"], e
    if plan.admission is not None:
        assert _ha.CLUSTER_TOKEN in live["owned"] or wanted["adopt"] or not live["das"]["enabled"]
    # what someone else set that differs is named and left
    for vm in VMS[:4]:
        have, pool = live["overrides"].get(vm["moid"]), _ha.pool_of(POOLS, vm)
        foreign = have is not None and have != pool["restart_priority"] and vm["moid"] not in live["owned"]
        named = any(t.startswith("VM %s:" % vm["name"]) for t in plan.kept_foreign)
        assert named == (foreign and not wanted["adopt"]), (vm, have, plan.kept_foreign)
    # the VMs no pool claims are never touched
    touched = set(e["moid"] for e in plan.add + plan.edit)
    assert not touched & {"vm-5", "vm-6"} and "mystery" in plan.unmatched


@settings(PROFILE)
@given(LIVE)
def test_every_change_is_a_field_of_the_plan_and_check_mode_sees_it(draw):
    live, wanted = live_of(draw), wanted_of(draw)
    plan = _ha.plan(live, wanted)
    changes = plan.changes()
    assert bool(changes) == (plan.reconfigure or plan.record_changed)
    fields = set((c.field, c.action) for c in changes)
    assert fields <= {("ha_admission_control", "update"), ("ha_restart_priority", "create"),
                      ("ha_restart_priority", "update"), ("ha_restart_priority", "delete"), ("ha_owned", "update")}


def test_a_fresh_cluster_gets_the_spare_rule_and_every_pool_vm_its_priority():
    live = dict(vms=VMS, overrides={}, das=dict(enabled=False, admission_control_enabled=False, policy=None), owned=set())
    plan = _ha.plan(live, WANTED)
    assert plan.admission == dict(ha_enabled=True, admission_control=True, policy="resources", failover_level=1,
                                  cpu_percent=25, memory_percent=25)
    assert plan.priorities == {"inference-0": "highest", "inference-1": "highest", "training-a": "medium",
                               "notebooks-b": "lowest"}
    assert plan.owned_names(plan.owned_after) == ["cluster", "inference-0", "inference-1", "notebooks-b", "training-a"]


def test_an_admission_control_someone_set_is_reported_and_left():
    live = dict(vms=VMS, overrides={}, owned=set(),
                das=dict(enabled=True, admission_control_enabled=True, policy=dict(kind="hosts", failover_level=1)))
    plan = _ha.plan(live, WANTED)
    assert plan.admission is None and _ha.CLUSTER_TOKEN not in plan.owned_after
    assert [t for t in plan.kept_foreign if t.startswith("cluster gpu-h100:")]
    adopted = _ha.plan(live, dict(WANTED, adopt=True))
    assert adopted.admission["cpu_percent"] == 25 and _ha.CLUSTER_TOKEN in adopted.owned_after


def test_an_owned_override_on_a_vm_that_left_the_pools_is_removed_and_dropped_from_the_record():
    live = dict(vms=VMS, overrides={"vm-6": "highest"}, owned={"vm-6"},
                das=dict(enabled=False, admission_control_enabled=False, policy=None))
    plan = _ha.plan(live, dict(WANTED, admission_control=None))
    assert [e["name"] for e in plan.remove] == ["web-01"] and "vm-6" not in plan.owned_after
    foreign = _ha.plan(dict(live, owned=set()), dict(WANTED, admission_control=None))
    assert foreign.remove == []


@pytest.mark.parametrize("hosts,percent", [(2, 50), (3, 34), (4, 25), (6, 17), (96, 2)])
def test_the_percentages_keep_one_host_of_the_cluster(hosts, percent):
    policy = _ha.admission_policy(hosts)
    assert policy == dict(failover_level=1, cpu_percent=percent, memory_percent=percent)
    assert percent * hosts >= 100 > (percent - 1) * hosts


@pytest.mark.parametrize("bad", [dict(restart_priority="urgent"), dict(restart_priority=None)])
def test_a_bad_priority_is_refused(bad):
    with pytest.raises(_ha.HaPlanError, match="restart_priority"):
        _ha.plan(dict(vms=VMS, overrides={}, das={}, owned=set()), dict(WANTED, pools=[dict(POOLS[0], **bad)]))


def test_a_cluster_of_one_host_keeps_no_spare_and_bad_policies_are_named():
    with pytest.raises(_ha.HaPlanError, match="at least one host more"):
        _ha.admission_policy(1)
    assert _ha.policy_errors(dict(failover_level=0, cpu_percent=101, memory_percent=25)) == [
        "admission_control.failover_level must be a whole number of 1 or more, not 0",
        "admission_control.cpu_percent must be from 1 to 100, not 101"]
