"""The generated Prometheus rules checked and unit-tested by Prometheus's own promtool (built from
the rig's pinned Prometheus module by tests/sim/k8s/build.sh into .sim/bin/promtool):
`promtool check rules` on the example design's rules and on a second design's (other pools, no
notebooks, four tenants), and `promtool test rules` with input series and eval times showing that
the SLO burn alert fires when the admission wait stays over the pool's bound for its window and not
before, and that the pending-GPU-pods alert fires and resolves."""
import json
import subprocess

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from tests.lib.paths import ROOT

PROMTOOL = ROOT / ".sim" / "bin" / "promtool"
DESIGNS = {"example": ROOT / "examples" / "design.yml", "second": ROOT / "tests" / "lib" / "observability_design.yml"}
GPU = 'resource="nvidia_com_gpu"'


def plain(value):
    return json.loads(json.dumps(value))


def write_rules(tmp_path, design):
    rules = _prom_rules.rule_file(yaml.safe_load(DESIGNS[design].read_text()))
    path = tmp_path / ("%s-rules.yml" % design)
    path.write_text(yaml.safe_dump(plain(rules), sort_keys=False, width=100000))
    return rules, path


def promtool(*args):
    assert PROMTOOL.exists(), "promtool is missing: make sim-build (tests/sim/k8s/build.sh) builds it"
    return subprocess.run([str(PROMTOOL)] + list(args), capture_output=True, text=True, timeout=120, check=False)


def alert(rules, group, name):
    found = [r for g in rules["groups"] if g["name"] == group for r in g["rules"] if r.get("alert") == name]
    assert len(found) == 1, (group, name)
    return found[0]


def test_promtool_checks_the_rules_of_both_designs(tmp_path):
    for design in DESIGNS:
        rules, path = write_rules(tmp_path, design)
        out = promtool("check", "rules", str(path))
        count = sum(len(g["rules"]) for g in rules["groups"])
        assert out.returncode == 0, out.stdout + out.stderr
        assert "SUCCESS: %d rules found" % count in out.stdout, out.stdout


def test_promtool_refuses_a_broken_expression(tmp_path):
    """The check is real: the same file with one expression broken fails."""
    rules, path = write_rules(tmp_path, "example")
    rules["groups"][1]["rules"][0]["expr"] += " +"
    path.write_text(yaml.safe_dump(plain(rules), sort_keys=False, width=100000))
    out = promtool("check", "rules", str(path))
    assert out.returncode != 0 and "parse error" in (out.stdout + out.stderr).lower(), out.stdout + out.stderr


def bucket(le, values):
    return {"series": 'kueue_admission_wait_time_seconds_bucket{cluster_queue="gpupool-training",'
                      'priority_class="gpu-training",le="%s"}' % le, "values": values}


def test_promtool_unit_tests_slo_burn_and_pending_pods(tmp_path):
    rules, path = write_rules(tmp_path, "example")
    burn = alert(rules, "gpupool-lab-gpupool-training", "GpuPoolSloBurn")
    assert burn["expr"] == 'pool:gpupool_admission_wait_seconds:p95{pool="training"} > 3600'
    pending = alert(rules, "gpupool-lab-gpupool-notebooks", "GpuPodsPending")
    assert pending["for"] == "15m"
    # training: one admission a minute; for an hour each waited 300 s, then each waits 5000 s. The p95
    # over 30 minutes crosses 3600 s two minutes or so after the change and stays there; the alert
    # waits slo_for (10m). Once the window holds only slow admissions, the p95 is 3600 + 0.95 * 3600
    # s (interpolated in the (3600, 7200] bucket): 1h 57m 0s.
    fast_then_none, all_along = "0+1x60 60+0x60", "0+1x120"
    series = [bucket("60", "0x120"), bucket("600", fast_then_none), bucket("3600", fast_then_none),
              bucket("7200", all_along), bucket("+Inf", all_along)]
    burn_labels = {"pool": "training", "severity": "critical"}
    burn_annotations = {"summary": burn["annotations"]["summary"],
                        "description": burn["annotations"]["description"].replace(
                            "{{ $value | humanizeDuration }}", "1h 57m 0s")}
    # notebooks: pod research/nb-1 requests one GPU and is Pending for 30 minutes, then Running
    pod = 'namespace="research",pod="nb-1"'
    series += [
        {"series": "kube_pod_container_resource_requests{%s,container=\"nb\",%s,unit=\"integer\",node=\"\"}" % (pod, GPU),
         "values": "1x120"},
        {"series": 'kube_pod_status_phase{%s,phase="Pending"}' % pod, "values": "1x30 0x89"},
        {"series": 'kube_pod_status_phase{%s,phase="Running"}' % pod, "values": "0x30 1x89"},
        {"series": 'kube_pod_info{%s,priority_class="gpu-notebook",node=""}' % pod, "values": "1x120"},
        # a Running pod of the same class never alerts
        {"series": "kube_pod_container_resource_requests{namespace=\"research\",pod=\"nb-2\",container=\"nb\",%s,"
                   "unit=\"integer\",node=\"w1\"}" % GPU, "values": "1x120"},
        {"series": 'kube_pod_status_phase{namespace="research",pod="nb-2",phase="Pending"}', "values": "0x120"},
        {"series": 'kube_pod_info{namespace="research",pod="nb-2",priority_class="gpu-notebook",node="w1"}',
         "values": "1x120"},
    ]
    pending_alert = {"exp_labels": {"pool": "notebooks", "severity": "warning", "namespace": "research", "pod": "nb-1"},
                     "exp_annotations": {
                         "summary": "GPU pod research/nb-1 pending on pool notebooks",
                         "description": pending["annotations"]["description"].replace(
                             "{{ $labels.namespace }}/{{ $labels.pod }}", "research/nb-1").replace("{{ $value }}", "1")}}
    tests = {
        "rule_files": [str(path)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "55m", "alertname": "GpuPoolSloBurn", "exp_alerts": []},
                # over the bound already, but not yet for slo_for
                {"eval_time": "66m", "alertname": "GpuPoolSloBurn", "exp_alerts": []},
                {"eval_time": "100m", "alertname": "GpuPoolSloBurn",
                 "exp_alerts": [{"exp_labels": burn_labels, "exp_annotations": burn_annotations}]},
                {"eval_time": "10m", "alertname": "GpuPodsPending", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "GpuPodsPending", "exp_alerts": [pending_alert]},
                {"eval_time": "40m", "alertname": "GpuPodsPending", "exp_alerts": []},
            ],
            "promql_expr_test": [
                {"expr": 'pool:gpupool_admission_wait_seconds:p95{pool="training"}', "eval_time": "100m",
                 "exp_samples": [{"labels": 'pool:gpupool_admission_wait_seconds:p95{pool="training"}',
                                  "value": 7020}]},
            ],
        }],
    }
    test_file = tmp_path / "rules-test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False, width=100000))
    out = promtool("test", "rules", str(test_file))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout, out.stdout


def test_promtool_unit_test_fails_on_a_wrong_expectation(tmp_path):
    """The unit test above can fail: the SLO burn alert expected at 66 minutes is not there."""
    _rules, path = write_rules(tmp_path, "example")
    series = [bucket("3600", "0+1x60 60+0x60"), bucket("+Inf", "0+1x120")]
    tests = {"rule_files": [str(path)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "66m", "alertname": "GpuPoolSloBurn",
                             "exp_alerts": [{"exp_labels": {"pool": "training", "severity": "critical"}}]}]}]}
    test_file = tmp_path / "rules-test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False, width=100000))
    out = promtool("test", "rules", str(test_file))
    assert out.returncode != 0 and "GpuPoolSloBurn" in (out.stdout + out.stderr), out.stdout + out.stderr


TTFT_P99 = 'pool:gpupool_inference_time_to_first_token_seconds:p99{pool="inference"}'


def latency_design(tmp_path, bound=1.0):
    """The example design with a latency bound on its inference pool, and its rule file."""
    d = yaml.safe_load(DESIGNS["example"].read_text())
    d["pools"][0]["slo"] = {"first_token_seconds": bound}
    rules = _prom_rules.rule_file(d)
    path = tmp_path / "latency-rules.yml"
    path.write_text(yaml.safe_dump(plain(rules), sort_keys=False, width=100000))
    return rules, path


def interpolated(lower, upper, q=0.99):
    """Prometheus's histogram_quantile when every observation of the window lies in one bucket (lower, upper]."""
    return lower + (upper - lower) * q


def test_promtool_unit_tests_first_token_slo_and_probe_failing(tmp_path):
    rules, path = latency_design(tmp_path)
    slo = alert(rules, "gpupool-lab-gpupool-inference", "GpuPoolFirstTokenSlo")
    failing = alert(rules, "gpupool-lab-gpupool-inference", "GpuPoolLatencyProbeFailing")
    assert slo["expr"] == TTFT_P99 + " > 1"
    ttft, request = "gpupool_inference_time_to_first_token_seconds", "gpupool_inference_request_seconds"

    def buckets(name, values):
        return [{"series": '%s_bucket{pool="inference",le="%s"}' % (name, le), "values": v} for le, v in values]

    # one probe a minute. TTFT: 30 minutes in (0.25, 0.5], 30 minutes in (1, 2.5], 30 minutes in (0.25, 0.5]
    # again; every request in (2.5, 5]. The connection fails once a minute from minute 60 on.
    fast_slow_fast, all_along = "0+1x30 30+0x30 30+1x30", "0+1x90"
    series = buckets(ttft, [("0.25", "0x90"), ("0.5", fast_slow_fast), ("1", fast_slow_fast), ("2.5", all_along),
                            ("+Inf", all_along)])
    series += buckets(request, [("2.5", "0x90"), ("5", all_along), ("+Inf", all_along)])
    series.append({"series": 'gpupool_inference_probe_failures_total{pool="inference",reason="connect"}',
                   "values": "0x60 1+1x30"})
    slow = interpolated(1, 2.5)  # 2.485 s
    labels = {"pool": "inference", "severity": "critical"}
    annotations = {"summary": slo["annotations"]["summary"],
                   "description": slo["annotations"]["description"].replace("{{ $value | humanizeDuration }}", "2.485s")}
    failing_alert = {"exp_labels": {"pool": "inference", "severity": "warning"},
                     "exp_annotations": {"summary": failing["annotations"]["summary"],
                                         "description": failing["annotations"]["description"].replace("{{ $value }}", "5")}}
    tests = {"rule_files": [str(path)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        # rounded to 0.1 ms: promtool compares samples exactly, and the interpolation's last bit is Prometheus's
        "promql_expr_test": [
            {"expr": "round(%s, 0.0001)" % TTFT_P99, "eval_time": "20m",
             "exp_samples": [{"labels": '{pool="inference"}', "value": round(interpolated(0.25, 0.5), 4)}]},
            {"expr": "round(%s, 0.0001)" % TTFT_P99, "eval_time": "45m",
             "exp_samples": [{"labels": '{pool="inference"}', "value": round(slow, 4)}]},
            {"expr": 'round(pool:gpupool_inference_request_seconds:p99{pool="inference"}, 0.0001)', "eval_time": "45m",
             "exp_samples": [{"labels": '{pool="inference"}', "value": round(interpolated(2.5, 5), 4)}]},
        ],
        "alert_rule_test": [
            {"eval_time": "25m", "alertname": "GpuPoolFirstTokenSlo", "exp_alerts": []},
            # over the bound from minute 31, not yet for slo_for (10m)
            {"eval_time": "36m", "alertname": "GpuPoolFirstTokenSlo", "exp_alerts": []},
            {"eval_time": "50m", "alertname": "GpuPoolFirstTokenSlo",
             "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}]},
            # fast again from minute 60: the window holds only fast probes by minute 66
            {"eval_time": "70m", "alertname": "GpuPoolFirstTokenSlo", "exp_alerts": []},
            {"eval_time": "50m", "alertname": "GpuPoolLatencyProbeFailing", "exp_alerts": []},
            {"eval_time": "80m", "alertname": "GpuPoolLatencyProbeFailing", "exp_alerts": [failing_alert]},
        ],
    }]}
    test_file = tmp_path / "latency-test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False, width=100000))
    out = promtool("test", "rules", str(test_file))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout, out.stdout
    # the same test with the alert expected while the probes are still fast fails
    tests["tests"][0]["alert_rule_test"] = [{"eval_time": "25m", "alertname": "GpuPoolFirstTokenSlo",
                                             "exp_alerts": [{"exp_labels": labels}]}]
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False, width=100000))
    out = promtool("test", "rules", str(test_file))
    assert out.returncode != 0 and "GpuPoolFirstTokenSlo" in out.stdout + out.stderr, out.stdout + out.stderr
