"""The Grafana dashboards of a design as plain data: one per pool and one for the platform, the design's
thresholds (SLO bound, knee, slots), expressions that read only the rules' series and the exporters'."""
import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _dashboards, _prom_rules
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from tests.lib.paths import ROOT
from tests.lib.promql_series import series

DESIGNS = {"example": ROOT / "examples" / "design.yml", "second": ROOT / "tests" / "lib" / "observability_design.yml"}
POOL_PANELS = ["SM active", "DRAM active", "Framebuffer used", "GPU-hours per tenant and profile (last hour)",
               "GPU slots offered", "Spare GPU slots", "Allocated share of the pool vs its knee"]


def design(name="example"):
    return yaml.safe_load(DESIGNS[name].read_text())


def board(boards, uid):
    found = [b for b in boards if b["uid"] == uid]
    assert len(found) == 1, uid
    return found[0]


def panel(b, title):
    found = [p for p in b["panels"] if p["title"] == title]
    assert len(found) == 1, title
    return found[0]


def alert(rules, pool, name):
    return [r for g in rules["groups"] if g["name"].endswith("-" + pool) for r in g["rules"] if r.get("alert") == name]


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_one_dashboard_per_pool_and_the_platform(name):
    d = design(name)
    boards = _dashboards.dashboards(d)
    assert [b["uid"] for b in boards] == ["gpupool-%s-platform" % d["name"]] + [
        "gpupool-%s-%s" % (d["name"], p["name"]) for p in d["pools"]]
    for pool, b in zip(d["pools"], boards[1:]):
        titles = [p["title"] for p in b["panels"]]
        if pool["shape"] == "inference" or pool.get("slo", {}).get("first_token_seconds"):
            # the latency panel first, SM active beside it (two timeseries a row), then the wait
            assert titles[:2] == [_dashboards.LATENCY_PANEL, "SM active"], titles
            titles = [titles[2], "SM active"] + titles[3:]
        assert titles[0].startswith("p") and "wait" in titles[0], titles
        assert titles[1:] == POOL_PANELS


def test_thresholds_are_the_designs():
    d = design()
    rules = _prom_rules.rule_file(d)
    boards = _dashboards.dashboards(d)
    training = board(boards, "gpupool-lab-gpupool-training")
    wait = training["panels"][0]
    assert wait["targets"][0]["expr"] == 'pool:gpupool_admission_wait_seconds:p95{pool="training"}'
    burn = alert(rules, "training", "GpuPoolSloBurn")[0]
    assert burn["expr"].endswith("> %s" % _prom_rules._num(wait["thresholds"][0][0]))  # pylint: disable=protected-access
    assert wait["thresholds"] == [(3600.0, "red")] and wait["base"] == "green"
    knee = panel(training, "Allocated share of the pool vs its knee")
    past = alert(rules, "training", "GpuPoolPastKnee")[0]
    assert past["expr"].endswith("> %s" % _prom_rules._num(knee["thresholds"][0][0]))  # pylint: disable=protected-access
    assert 0.3 < knee["thresholds"][0][0] < 0.4
    slots = panel(training, "GPU slots offered")
    assert slots["thresholds"] == [(8.0, "green")] and slots["base"] == "red"
    # a pool without an SLO bound or knee has neither threshold, and its alerts are absent too
    inference = board(boards, "gpupool-lab-gpupool-inference")
    assert panel(inference, "p95 pod scheduling wait")["thresholds"] == [] and not alert(rules, "inference", "GpuPoolSloBurn")
    assert panel(inference, _dashboards.LATENCY_PANEL)["thresholds"] == [] and not alert(rules, "inference", "GpuPoolFirstTokenSlo")
    assert panel(inference, "Allocated share of the pool vs its knee")["thresholds"] == []
    assert not alert(rules, "inference", "GpuPoolPastKnee")


def test_a_latency_bound_is_the_latency_panels_threshold_and_its_alerts():
    d = design()
    d["pools"][0]["slo"] = {"first_token_seconds": 1.5}
    rules = _prom_rules.rule_file(d)
    latency = panel(board(_dashboards.dashboards(d), "gpupool-lab-gpupool-inference"), _dashboards.LATENCY_PANEL)
    assert [t["expr"] for t in latency["targets"]] == [
        'pool:gpupool_inference_time_to_first_token_seconds:p99{pool="inference"}',
        'pool:gpupool_inference_request_seconds:p99{pool="inference"}']
    assert latency["thresholds"] == [(1.5, "red")] and latency["unit"] == "s"
    slo = alert(rules, "inference", "GpuPoolFirstTokenSlo")[0]
    assert slo["expr"] == latency["targets"][0]["expr"] + " > 1.5"
    assert alert(rules, "inference", "GpuPoolLatencyProbeFailing")
    # a training pool gets no latency panel without a bound
    training = board(_dashboards.dashboards(d), "gpupool-lab-gpupool-training")
    assert _dashboards.LATENCY_PANEL not in [p["title"] for p in training["panels"]]


def test_a_measured_knee_moves_the_threshold():
    boards = _dashboards.dashboards(design(), {"knees": {"inference": 0.6}})
    inference = board(boards, "gpupool-lab-gpupool-inference")
    assert panel(inference, "Allocated share of the pool vs its knee")["thresholds"] == [(0.6, "red")]


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_every_expression_reads_only_known_series(name):
    d = design(name)
    recorded = set(r["record"] for g in _prom_rules.rule_file(d)["groups"] for r in g["rules"] if "record" in r)
    known = recorded | set(s for names in _dashboards.SOURCE_SERIES.values() for s in names)
    exprs = _dashboards.expressions(_dashboards.dashboards(d))
    read = set()
    for uid, title, expr in exprs:
        names = series(expr)
        assert names, (uid, title, expr)
        assert names <= known, (uid, title, sorted(names - known))
        read |= names
    # the per-pool panels read the recording rules the design makes, the raw fields only on the platform
    assert {"pool:gpupool_sm_active:avg", "pool:gpupool_dram_active:avg", "pool:gpupool_fb_used_mib:sum",
            "namespace_pool_profile:gpupool_gpu_hours:1h", "pool:gpupool_utilization:ratio"} <= read


def test_the_series_scanner_sees_an_unknown_series():
    assert series('sum by (pool) (foo_bar{pool="x"} * on (node) group_left (pool) baz[5m]) > 1e3') == {"foo_bar", "baz"}
    assert series('count(DCGM_FI_DEV_VGPU_LICENSE_STATUS == 0) or vector(0)') == {"DCGM_FI_DEV_VGPU_LICENSE_STATUS"}


def test_config_map_for_the_sidecar():
    b = _dashboards.dashboards(design())[0]
    cm = _dashboards.config_map(b, "{}", namespace="grafana", label="dash", label_value="yes")
    assert cm["metadata"] == {"name": b["uid"], "namespace": "grafana", "labels": {
        "app.kubernetes.io/managed-by": "gpupool.vcf", "gpupool.vcf/design": "lab-gpupool", "dash": "yes"}}
    assert cm["data"] == {"%s.json" % b["uid"]: "{}"}


@pytest.mark.parametrize("kwargs, message", [
    ({"namespace": "Not_A_Namespace"}, "not a Kubernetes namespace"),
    ({"label": ""}, "label ''"),
    ({"label_value": 1}, "label value 1"),
])
def test_config_map_refuses_bad_names(kwargs, message):
    with pytest.raises(_prom_rules.RulesError, match=message):
        _dashboards.config_map(_dashboards.dashboards(design())[0], "{}", **kwargs)


def test_bad_design_and_options_are_refused():
    bad = design()
    bad["pools"][0]["priority"] = "no-such-class"
    with pytest.raises(DesignError):
        _dashboards.dashboards(bad)
    with pytest.raises(_prom_rules.RulesError, match="knees: no pool nowhere"):
        _dashboards.dashboards(design(), {"knees": {"nowhere": 0.5}})
    with pytest.raises(_prom_rules.RulesError, match="wait_window"):
        _dashboards.dashboards(design(), {"wait_window": "soon"})


def test_long_names_keep_a_grafana_uid():
    d = design()
    d["pools"][0]["name"] = "inference-" + "x" * 40
    uid = _dashboards._uid("gpupool", d["name"], d["pools"][0]["name"])  # pylint: disable=protected-access
    assert len(uid) == 40 and uid.startswith("gpupool-lab-gpupool-inference")
