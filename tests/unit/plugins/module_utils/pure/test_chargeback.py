"""Chargeback arithmetic, prices and rendering (pure/_chargeback.py) on hand-made Prometheus answers."""
import csv
import io
import pathlib
import xml.etree.ElementTree as ET

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback as cb
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _inputs
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback_inputs import gpu_usage_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize

ROOT = pathlib.Path(__file__).resolve().parents[5]


def sample(value, **labels):
    return {"metric": labels, "value": [1000.0, str(value)]}


def design(chargeback):
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    d["chargeback"] = chargeback
    normalized, findings = normalize(d)
    assert [f for f in findings if f.severity == "error"] == []
    return normalized


def test_durations_and_times():
    assert cb.parse_duration("1h30m") == 5400
    assert cb.parse_duration("30d") == 30 * 86400
    assert cb.parse_duration("90") == 90
    for bad in ("", "5x", "m5", "1h 30m"):
        with pytest.raises(cb.ChargebackError):
            cb.parse_duration(bad)
    assert cb.parse_time("now", 1000) == 1000
    assert cb.parse_time("now-10m", 1000) == 400
    assert cb.parse_time("2026-11-01", 0) == 1793491200
    assert cb.parse_time("2026-11-01T00:00:00Z", 0) == 1793491200
    assert cb.parse_time("2026-11-01T01:00:00+01:00", 0) == 1793491200
    with pytest.raises(cb.ChargebackError):
        cb.parse_time("yesterday", 0)
    with pytest.raises(cb.ChargebackError):
        cb.period(100, 50, 10)
    with pytest.raises(cb.ChargebackError):
        cb.period(100, 105, 10)


def test_queries_join_requests_to_the_node_labels_kube_state_metrics_exports():
    q = cb.queries(3600, 60)
    assert q["allocation"].startswith("sum_over_time((sum by (namespace, pool, profile, resource) ")
    assert q["allocation"].endswith(")[3600s:60s])")
    assert 'kube_pod_container_resource_requests{resource=~"nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.+"}' \
        in q["allocation"]
    assert 'kube_pod_status_phase{phase="Running"} == 1' in q["allocation"]
    assert '"label_gpupool_vcf_pool"' in q["allocation"] and '"label_nvidia_com_vgpu_profile"' in q["allocation"]
    assert 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod!=""}' in q["engine_sum"] and "Hostname" in q["engine_sum"]
    assert cb.ksm_label("nvidia.com/vgpu.profile") == "label_nvidia_com_vgpu_profile"


def test_resource_names_back_from_kube_state_metrics():
    assert cb.resource_name("nvidia_com_gpu") == "nvidia.com/gpu"
    assert cb.resource_name("nvidia_com_gpu_shared") == "nvidia.com/gpu.shared"
    assert cb.resource_name("nvidia_com_mig_1g_10gb") == "nvidia.com/mig-1g.10gb"
    assert cb.resource_name("nvidia_com_mig_1g_10gb_me") == "nvidia.com/mig-1g.10gb+me"


def test_profile_share_of_a_card():
    assert cb.profile_share("nvidia_h100-80c", "H100-80GB") == (1.0, 1)
    assert cb.profile_share("nvidia_h100-3-40c", "H100-80GB") == (0.5, 2)
    assert cb.profile_share("nvidia_h100-1-10c", "H100-80GB") == (1.0 / 7, 7)
    assert cb.profile_share("nvidia_l40s-8c", "L40S") == (1.0 / 6, 6)


def test_price_table_from_card_cost_and_given_profile_prices():
    t = cb.price_table(design({"currency": "EUR", "card_hour": {"H100-80GB": 4.2, "L40S": 1.2},
                               "profile_hour": {"nvidia_h100-80c": 5.0}}))
    assert t["currency"] == "EUR"
    inference, training, notebooks = t["pools"]["inference"], t["pools"]["training"], t["pools"]["notebooks"]
    assert inference["unit_price"] == pytest.approx(2.1) and inference["source"].startswith("card_hour H100-80GB x 1/2")
    assert training["unit_price"] == 5.0 and training["source"] == "profile_hour"
    # an 8 GB slice of a 48 GB L40S is a sixth of the card, and 4 guest replicas share it
    assert notebooks["profile_price"] == pytest.approx(0.2) and notebooks["unit_price"] == pytest.approx(0.05)
    assert cb.price_table(design(None)) is None


def answers():
    return {
        "allocation": [
            sample(120, namespace="team-a", pool="inference", profile="nvidia_h100-3-40c", resource="nvidia_com_gpu"),
            sample(60, namespace="team-b", pool="training", profile="nvidia_h100-80c", resource="nvidia_com_gpu"),
            sample(30, namespace="team-b", resource="nvidia_com_mig_1g_10gb"),
        ],
        "engine_sum": [sample(60, namespace="team-a", pool="inference", profile="nvidia_h100-3-40c")],
        "engine_count": [sample(120, namespace="team-a", pool="inference", profile="nvidia_h100-3-40c")],
        "fb_used": [sample(100, namespace="team-a", pool="inference", profile="nvidia_h100-3-40c")],
        "fb_total": [sample(400, namespace="team-a", pool="inference", profile="nvidia_h100-3-40c")],
    }


def test_rows_hours_efficiency_and_cost_by_hand():
    table = cb.price_table(design({"card_hour": {"H100-80GB": 4.0}}))
    rep = cb.report(answers(), [{"metric": {"namespace": "team-a"}, "values": [[1060, "60"], [1120, "60"]]}],
                    0, 7200, 60, 60, table)
    a, b_mig, b_train = rep["rows"]
    # 120 samples of one GPU every 60 s = 2 GPU-hours
    assert (a["namespace"], a["gpu_hours"], a["engine_active"], a["fb_used_ratio"]) == ("team-a", 2.0, 0.5, 0.25)
    assert a["unit_price"] == 2.0 and a["cost"] == 4.0
    expected = ("(none)", "nvidia.com/mig-1g.10gb", 0.5, None)
    assert (b_mig["pool"], b_mig["resource"], b_mig["gpu_hours"], b_mig["cost"]) == expected
    assert b_mig["price_source"].startswith("no price")
    assert b_train["gpu_hours"] == 1.0 and b_train["cost"] == 4.0 and b_train["engine_active"] is None
    assert [(t["namespace"], t["gpu_hours"], t["cost"]) for t in rep["by_tenant"]] == [("team-a", 2.0, 4.0),
                                                                                       ("team-b", 1.5, 4.0)]
    assert rep["gpu_hours"] == 3.5 and rep["cost"] == 8.0
    assert rep["timeline"]["team-a"][0] == ["1970-01-01T00:17:40Z", 1.0]


def test_csv_and_html():
    rep = cb.report(answers(), [{"metric": {"namespace": "team-a"}, "values": [[60, "60"], [120, "30"]]}],
                    0, 7200, 60, 60, None)
    parsed = list(csv.DictReader(io.StringIO(cb.csv_text(rep))))
    assert [r["namespace"] for r in parsed] == ["team-a", "team-b", "team-b"]
    assert parsed[0]["gpu_hours"] == "2.0000" and parsed[0]["cost"] == ""
    page = cb.html_text(rep)
    svgs = [ET.fromstring(s[:s.index("</svg>") + 6]) for s in page.split("<svg")[1:] for s in ["<svg" + s]]
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in svgs[0].iter(ns + "rect") if r.get("class") == "bar"]
    assert sorted(float(r.get("data-value")) for r in bars) == [0.5, 1.0, 2.0]
    assert len(list(svgs[1].iter(ns + "polyline"))) == 1
    assert "<script" not in page


def test_gpu_usage_inputs():
    good = dict(prometheus_url="https://p", start="now-30d", end="now", step="5m")
    assert _inputs.check("gpu_usage", good, gpu_usage_errors) == []
    assert _inputs.check("gpu_usage", dict(good, prometheus_url="p:9090"), gpu_usage_errors) == [
        "prometheus_url must be an http:// or https:// URL, not 'p:9090'"]
    assert "step must be a whole number of seconds, 1 or more, not '0.5s'" in _inputs.check(
        "gpu_usage", dict(good, step="0.5s"), gpu_usage_errors)
    assert any(e.startswith("start: 'last month' is not a time") for e in _inputs.check(
        "gpu_usage", dict(good, start="last month"), gpu_usage_errors))
