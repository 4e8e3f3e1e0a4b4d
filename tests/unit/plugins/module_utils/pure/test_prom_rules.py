"""The Prometheus rules of a design (pure/_prom_rules.py): per pool what the design asks for, every
alert with pool/severity labels and summary/description annotations, bounds from the design, bad
input refused. promtool checks and unit-tests the same files in tests/integration/test_promtool_rules.py."""
import copy
import re

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import design_knee
from tests.lib.paths import ROOT


def design(name="examples/design.yml"):
    return yaml.safe_load((ROOT / name).read_text())


def alerts(rules, name=None):
    return [r for g in rules["groups"] for r in g["rules"] if "alert" in r and (name is None or r["alert"] == name)]


def by_pool(rules, name):
    return {a["labels"]["pool"]: a for a in alerts(rules, name)}


@pytest.mark.parametrize("path", ["examples/design.yml", "tests/lib/observability_design.yml"])
def test_every_alert_has_pool_severity_summary_and_description(path):
    rules = _prom_rules.rule_file(design(path))
    assert alerts(rules)
    for a in alerts(rules):
        assert a["labels"]["pool"] and a["labels"]["severity"] in ("critical", "warning"), a
        assert a["annotations"]["summary"] and a["annotations"]["description"], a
    names = [r.get("record") or r.get("alert") for g in rules["groups"] for r in g["rules"]]
    for record in ("namespace_pool_profile:gpupool_gpu_hours:1h", "pool:gpupool_gpus_allocated:sum",
                   "pool:gpupool_gpus_used:sum", "pool:gpupool_sm_active:avg", "pool:gpupool_dram_active:avg",
                   "pool:gpupool_fb_used_mib:sum"):
        assert names.count(record) == 1, record
    assert all(g["interval"] == "1m" for g in rules["groups"])


def test_example_design_pools():
    rules = _prom_rules.rule_file(design())
    groups = [g["name"] for g in rules["groups"]]
    assert groups == ["gpupool-lab-gpupool-usage", "gpupool-lab-gpupool-inference", "gpupool-lab-gpupool-training",
                      "gpupool-lab-gpupool-notebooks", "gpupool-lab-gpupool-hosts"]
    # only the training pool has an SLO: its burn alert reads Kueue's admission wait of its ClusterQueue
    burn = by_pool(rules, "GpuPoolSloBurn")
    assert list(burn) == ["training"]
    assert burn["training"]["expr"] == 'pool:gpupool_admission_wait_seconds:p95{pool="training"} > 3600'
    wait = [r for g in rules["groups"] for r in g["rules"] if r.get("record") == "pool:gpupool_admission_wait_seconds:p95"]
    assert wait[0]["expr"] == ('histogram_quantile(0.95, sum by (le) (rate(kueue_admission_wait_time_seconds_bucket'
                               '{cluster_queue="gpupool-training"}[30m])))')
    # the knee of the training pool is the design's (M/M/c, rule slo_knee)
    pool = [p for p in _prom_rules._design(design())["pools"] if p["name"] == "training"][0]
    knee = design_knee(pool)["knee"]
    past = by_pool(rules, "GpuPoolPastKnee")
    assert list(past) == ["training"]
    assert float(re.search(r"> ([0-9.]+)$", past["training"]["expr"]).group(1)) == pytest.approx(knee, abs=1e-6)
    # the notebooks' idle alert: culling timeout (30 min by default) plus one culler check
    idle = by_pool(rules, "GpuNotebookIdle")
    assert list(idle) == ["notebooks"]
    d = _prom_rules._design(design())
    minutes = d["guest"]["culling"]["idle_minutes"] + d["guest"]["culling"]["check_minutes"]
    assert "[%s:]" % _prom_rules._duration(minutes * 60) in idle["notebooks"]["expr"]
    assert "> %d" % (minutes * 60) in idle["notebooks"]["expr"]
    # pending pods: the pool's SLO bound where it has one, else pending_for
    pending = by_pool(rules, "GpuPodsPending")
    assert {p: a["for"] for p, a in pending.items()} == {"inference": "15m", "training": "1h", "notebooks": "15m"}
    assert 'priority_class="gpu-notebook"' in pending["notebooks"]["expr"]
    assert set(by_pool(rules, "GpuNodeUnlicensed")) == {"inference", "training", "notebooks"}
    assert set(by_pool(rules, "GpuNodeLicenseUnknown")) == {"inference", "training", "notebooks"}
    mixed = alerts(rules, "GpuHostDriverMixed")
    assert sorted(a["labels"]["cluster"] for a in mixed) == ["gpu-h100", "gpu-l40s"]
    assert [a["labels"]["pool"] for a in mixed if a["labels"]["cluster"] == "gpu-h100"] == ["inference,training"]


def test_second_design_no_notebooks_shared_priority():
    rules = _prom_rules.rule_file(design("tests/lib/observability_design.yml"))
    assert not alerts(rules, "GpuNotebookIdle")
    burn = by_pool(rules, "GpuPoolSloBurn")
    assert sorted(burn) == ["batch", "serving"]
    # serving is not Kueue-gated: its SLO reads the pods' scheduling wait, at the design's percentile
    assert burn["serving"]["expr"] == 'pool:gpupool_scheduling_wait_seconds:p99{pool="serving"} > 120'
    assert burn["batch"]["expr"] == 'pool:gpupool_admission_wait_seconds:p90{pool="batch"} > 1800'
    # batch has no job_seconds: its knee is the planned utilization; experiments has none
    past = by_pool(rules, "GpuPoolPastKnee")
    assert past["batch"]["expr"].endswith("> 0.5") and "experiments" not in past
    # batch and experiments share gpu-batch: one pending alert for both, bound by batch's SLO
    pending = by_pool(rules, "GpuPodsPending")
    assert sorted(pending) == ["batch,experiments", "serving"]
    assert pending["batch,experiments"]["for"] == "30m" and pending["serving"]["for"] == "2m"


def test_options_and_measured_knees():
    rules = _prom_rules.rule_file(design(), {"slo_for": "5m", "wait_window": "1h", "knees": {"notebooks": 0.7}})
    assert by_pool(rules, "GpuPoolSloBurn")["training"]["for"] == "5m"
    assert "[1h]" in [r for g in rules["groups"] for r in g["rules"]
                      if r.get("record") == "pool:gpupool_admission_wait_seconds:p95"][0]["expr"]
    assert by_pool(rules, "GpuPoolPastKnee")["notebooks"]["expr"].endswith("> 0.7")


@pytest.mark.parametrize("options, message", [
    ({"slo_for": "10 minutes"}, "slo_for.*not a duration"),
    ({"slo_for": 600}, "slo_for.*not a duration"),
    ({"windw": "1h"}, "unknown rule option.*windw"),
    ({"knees": {"training": 1.5}}, "knees.training.*not a utilization"),
    ({"knees": {"nowhere": 0.5}}, "knees: no pool nowhere"),
    ("1h", "not a mapping"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(_prom_rules.RulesError, match=message):
        _prom_rules.rule_file(design(), options)


def test_an_invalid_design_is_refused_with_its_errors():
    bad = copy.deepcopy(design())
    bad["pools"][0]["vgpu_profile"] = "nvidia_h100-9-99c"
    with pytest.raises(DesignError):
        _prom_rules.rule_file(bad)


def test_prometheus_rule_object():
    obj = _prom_rules.prometheus_rule(design(), name="gpu-rules", namespace="observability")
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpupool.vcf"
    assert obj["spec"] == _prom_rules.rule_file(design())
    with pytest.raises(_prom_rules.RulesError, match="not a Kubernetes object name"):
        _prom_rules.prometheus_rule(design(), name="Bad_Name")


def test_dropped_alerts_say_why():
    assert "client_token_expiring" in _prom_rules.DROPPED
    assert "no Prometheus series" in _prom_rules.DROPPED["client_token_expiring"]
