"""The guest link's rule table gives every rule its fix (the 4th element), and every guest finding carries its
rule's fix from there: one drift per rule on the guest cluster site.yml leaves, and each finding's fix is the
table's, with the node, its taints or the pool's profile in the format fields of a fix that names them."""
import copy
import re
import string

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _audit_report
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _k8s_objects as objs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.unit.plugins.module_utils.pure.test_audit import DERIVED, full_guest
from tests.unit.plugins.module_utils.pure.test_audit_guest_driver import EXAMPLE, SECRET


def fields(fix):
    return [name for _text, name, _spec, _conv in string.Formatter().parse(fix) if name]


def pattern(fix):
    """The fix of the table as a pattern: each format field stands for some text."""
    return "^%s$" % "".join(re.escape(text) + ("(?P<%s>.+?)" % name if name else "")
                            for text, name, _spec, _conv in string.Formatter().parse(fix))


def test_every_guest_rule_has_its_fix_in_the_table_and_the_catalogue():
    assert all(len(entry) == 4 and entry[1] == "guest" and entry[3] for entry in _audit_guest.RULES.values())
    for rule, entry in _audit_guest.RULES.items():
        assert _audit_report.RULES[rule] == entry[:3] and _audit_report.FIXES[rule] == entry[3]
    # only these fixes name the object a finding is about
    assert dict((r, fields(e[3])) for r, e in _audit_guest.RULES.items() if fields(e[3])) == {
        "gpu_node_untainted": ["node", "taints"], "gpu_node_profile_label_missing": ["profile"]}
    assert len(_audit_guest.NOT_OWNED) == 4 and _audit_guest.NOT_OWNED[:2] == ("info", "guest")


def test_a_fix_with_format_fields_takes_the_findings_and_an_explicit_fix_is_kept():
    found = _audit_guest.finding("gpu_node_untainted", "node n-1", "m", node="n-1", taints="a=b:NoSchedule")
    assert found["fix"].endswith("kubectl taint nodes n-1 a=b:NoSchedule for this node now")
    assert _audit_guest.finding("kueue_missing", "kueue x", "m")["fix"] == _audit_guest.RULES["kueue_missing"][3]
    assert _audit_guest.finding("kueue_missing", "kueue x", "m", "do this")["fix"] == "do this"
    with pytest.raises(KeyError):  # a field the finding does not give is an error, not a fix with a hole
        _audit_guest.finding("gpu_node_profile_label_missing", "node n-1", "m")


def _quota(live, change):
    ns = sorted(live["resource_quotas"])[0]
    name = sorted(live["resource_quotas"][ns])[0]
    change(live["resource_quotas"][ns], name)


def _first(mapping):
    return mapping[sorted(mapping)[0]]


def _local_queue(live, change):
    ns = sorted(live["kueue"]["local_queues"])[0]
    change(live["kueue"]["local_queues"][ns], sorted(live["kueue"]["local_queues"][ns])[0])


DRIFTS = [
    ("gpu_node_untainted", lambda live: live["nodes"][0].update(taints=[])),
    ("gpu_node_profile_label_missing", lambda live: live["nodes"][2]["labels"].pop("nvidia.com/vgpu.profile")),
    ("node_pool_no_nodes", lambda live: live.update(nodes=live["nodes"][1:])),
    ("guest_namespace_missing", lambda live: live["namespaces"].remove(sorted(live["namespace_labels"])[0])),
    ("guest_namespace_labels_changed", lambda live: _first(live["namespace_labels"]).clear()),
    ("gpu_quota_missing", lambda live: _quota(live, lambda quotas, name: quotas.pop(name))),
    ("gpu_quota_changed", lambda live: _quota(live, lambda quotas, name: quotas[name].update(
        dict((k, "999") for k in quotas[name])))),
    ("priority_class_missing", lambda live: live["priority_classes"].pop(sorted(live["priority_classes"])[0])),
    ("priority_class_changed", lambda live: _first(live["priority_classes"]).update(description="changed by hand")),
    ("licensing_secret_missing", lambda live: live.update(secrets={"gpu-operator": []})),
    ("cluster_policy_missing", lambda live: live.update(cluster_policy=dict(exists=False))),
    ("cluster_policy_changed", lambda live: live["cluster_policy"]["spec"]["driver"].update(version="1.2.3")),
    ("mig_strategy_changed", lambda live: live["cluster_policy"]["spec"].update(mig={"strategy": "mixed"})),
    ("time_slicing_config_missing", lambda live: live.update(device_plugin_config=dict(exists=False))),
    ("time_slicing_config_changed", lambda live: live["device_plugin_config"]["data"].update(notebooks={
        "version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 99}]}}})),
    # a notebooks node whose device plugin started with one replica: it advertises its one card
    ("device_plugin_capacity", lambda live: [n for n in live["nodes"] if n["name"] == "notebooks-0"][0].update(
        labels=dict([n for n in live["nodes"] if n["name"] == "notebooks-0"][0]["labels"], **{"nvidia.com/gpu.count": "1"}),
        allocatable={"nvidia.com/gpu": "1"})),
    ("dcgm_metrics_config_missing", lambda live: live.update(dcgm_metrics_config=dict(exists=False))),
    ("dcgm_metrics_config_changed", lambda live: live.update(dcgm_metrics_config=dict(exists=True, data={
        "dcgm-metrics.csv": "DCGM_FI_DEV_FB_USED, gauge, used\n"}))),
    ("kueue_missing", lambda live: live["kueue"].update(served=False)),
    ("resource_flavor_missing", lambda live: live["kueue"]["resource_flavors"].clear()),
    ("resource_flavor_changed", lambda live: _first(live["kueue"]["resource_flavors"]).update(tolerations=[])),
    ("cluster_queue_missing", lambda live: live["kueue"]["cluster_queues"].clear()),
    ("cluster_queue_changed", lambda live: _first(live["kueue"]["cluster_queues"]).update(queueingStrategy="x")),
    ("local_queue_missing", lambda live: _local_queue(live, lambda queues, name: queues.pop(name))),
    ("local_queue_changed", lambda live: _local_queue(live, lambda queues, name: queues[name].update(
        clusterQueue="another"))),
    ("kueue_config_changed", lambda live: live["kueue"].update(configuration=None)),
    ("kueue_config_changed", lambda live: live["kueue"]["configuration"].pop("waitForPodsReady")),
    ("notebook_culling_missing", lambda live: live.update(culling=dict(exists=False))),
    ("notebook_culling_changed", lambda live: live["culling"].update(schedule="0 0 * * *")),
]


def drifted(derived, drift):
    live = full_guest(derived)
    drift(live)
    return _audit_guest.audit_guest(derived, **live)


@pytest.mark.parametrize("rule, drift", DRIFTS, ids=["%s-%d" % (r, i) for i, (r, _d) in enumerate(DRIFTS)])
def test_each_drift_is_its_rules_finding_with_the_tables_fix(rule, drift):
    derived = copy.deepcopy(DERIVED)
    out = drifted(derived, drift)
    assert rule in [f["rule"] for f in out]
    for f in out:
        fix = _audit_guest.RULES[f["rule"]][3]
        match = re.match(pattern(fix), f["fix"])
        assert match, (f["rule"], f["fix"])
        if "node" in fields(fix):  # the node and the taints its message names
            assert f["object"] == "node %s" % match.group("node")
            assert all(t in f["message"] for t in match.group("taints").split())
        if "profile" in fields(fix):
            assert f["message"].endswith("the pool's profile is %s" % match.group("profile"))


def test_the_drifts_reach_every_guest_rule():
    assert sorted(set(r for r, _d in DRIFTS) | {"guest_driver_missing"}) == sorted(_audit_guest.RULES)


def test_a_design_without_a_guest_driver_and_an_object_to_adopt_carry_the_tables_fix():
    design = copy.deepcopy(EXAMPLE)
    del design["guest"]["driver"]
    derived = derive(design)
    spec = objs.cluster_policy_spec(dict(_audit_guest.guest_inputs(derived)[0], gpu_operator_licensing_secret_name=SECRET))
    [found] = [f for f in _audit_guest.audit_guest(derived, cluster_policy=dict(exists=True, spec=spec))
               if f["rule"] == "guest_driver_missing"]
    assert found["fix"] == _audit_guest.RULES["guest_driver_missing"][3]
    derived = copy.deepcopy(DERIVED)
    derived["roles"]["gpu_scheduling_policy"]["gpu_scheduling_policy_adopt"] = True
    live = full_guest(derived)
    out = _audit_guest.audit_guest(derived, object_labels={}, **dict(live, namespace_labels=dict(
        (ns, {}) for ns in live["namespace_labels"])))
    not_owned = [f for f in out if f["rule"] == "object_not_owned"]
    assert not_owned and all(f["link"] == "guest" and f["fix"] == _audit_guest.NOT_OWNED[3] for f in not_owned)
