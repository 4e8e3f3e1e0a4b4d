"""The what-if HTML report opens in headless Chromium and draws: its chart has one bar per pool and design with a
wait (width proportional to the p95 wait, its colour painted), its tables one row per pool and design and per
pool, tenant and design, and per pool a chart of the GPUs in use with a step path per design (its height and
length those of the hand-computed series, its colour painted) beside the knee figures. The report comes from
the replay outcomes of a known record (pure/_what_if.py)."""
import math

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _what_if as wi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _workload_record as wr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.lib import browser
from tests.lib.paths import ROOT

RECORD = wr.check_record({"schema": wr.SCHEMA, "version": 1, "workloads": [
    {"name": "first", "tenant": "team-vision", "pool": "training", "gpus": 4, "arrival": 0, "duration": 7200},
    {"name": "second", "tenant": "research", "pool": "training", "gpus": 4, "arrival": 60, "duration": 7200},
    {"name": "serve", "tenant": "team-search", "pool": "inference", "gpus": 1, "arrival": 0, "duration": 600}]})


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    pools = wi.design_pools(design, derive(design))
    at_once = {"first": {"submitted": 0.0, "admitted": 0.5, "running": 0.5, "finished": 12.5},
               "second": {"submitted": 0.1, "admitted": 0.6, "running": 0.6, "finished": 12.6},
               "serve": {"submitted": 0.0, "admitted": 0.0, "running": 0.25, "finished": 1.25}}
    later = dict(at_once, second={"submitted": 0.1, "admitted": 12.5, "running": 12.5, "finished": 24.5})
    current = wi.summary(wi.outcomes(RECORD, at_once, 600, 13.0), pools)
    proposed = wi.summary(wi.outcomes(RECORD, later, 600, 25.0), pools)
    path = tmp_path_factory.mktemp("what-if") / "what-if.html"
    path.write_text(wi.html_report(current, proposed, wi.compression_note(600, 0.25)))
    return browser.open_reports([path])[str(path)], current, proposed


def test_the_chart_draws_a_bar_per_pool_and_design(page):
    opened, current, proposed = page
    assert opened.title == "What if: current and proposed design"
    rows = [(pool, label, side["pools"][pool]["wait_p95"]) for pool in ("inference", "training")
            for label, side in (("current", current), ("proposed", proposed))]
    assert [r[2] for r in rows] == [150.0, 150.0, 300.0, 7440.0]
    chart = browser.assert_bars_drawn(opened, "wait-chart", rows)
    assert len(chart["bars"]) == 4
    browser.assert_pixels(opened, chart)


def test_the_tables_have_a_row_per_pool_tenant_and_design(page):
    opened = page[0]
    # per pool: header + 2 pools x 2 designs; per tenant: header + 3 tenants x 2 designs
    assert opened.table_rows == [5, 7]


def _hand_knee_two_servers(service, target, scale):
    """The utilization where the p95 wait of 2 servers reaches ``target``: Erlang C of 2 servers is
    2 rho^2 / (1 + rho), the wait of those that wait exponential of mean ``scale`` S / (2 (1 - rho))."""
    def p95(rho):
        prob = 2 * rho * rho / (1 + rho)
        return 0.0 if prob <= 0.05 else scale * service / (2 * (1 - rho)) * math.log(prob / 0.05)
    low, high = 0.0, 1.0 - 1e-12
    for _step in range(80):
        mid = (low + high) / 2.0
        low, high = (low, mid) if p95(mid) >= target else (mid, high)
    return low


def test_a_usage_chart_per_pool_draws_a_step_path_per_design_beside_the_knee(page):
    opened = page[0]
    assert {"usage-training", "usage-inference"} <= set(opened.charts), sorted(opened.charts)
    chart = opened.charts["usage-training"]
    paths = dict((p["design"], p) for p in chart["paths"])
    assert sorted(paths) == ["current", "proposed"] and len(chart["paths"]) == 2
    # by hand: current runs both 4-GPU jobs at once (8 GPUs from 360 to 7500 s, the last ends at 7560 s),
    # proposed one after the other (4 GPUs from 300 to 14700 s)
    assert (paths["current"]["max"], paths["proposed"]["max"]) == (8, 4)
    for p in paths.values():
        assert p["length"] > 0 and p["box"]["w"] > 0 and p["box"]["h"] > 0, p
        assert chart["box"]["x"] <= p["box"]["x"] and p["box"]["x"] + p["box"]["w"] <= chart["box"]["x"] + chart["box"]["w"]
    cur, pro = paths["current"]["box"], paths["proposed"]["box"]
    assert abs(cur["h"] - 2 * pro["h"]) <= 1.5, (cur, pro)  # both from 0 GPUs: 8 against 4
    assert abs(cur["w"] - pro["w"] * 7560 / 14700.0) <= 1.5, (cur, pro)  # both from 0 s, to 7560 and 14700 s
    assert pro["w"] >= 0.7 * chart["box"]["w"], (pro, chart["box"])  # the longer replay spans the plot's width
    width, height, pixels = opened.screenshot()
    scale = opened.device_pixel_ratio or 1
    for p in paths.values():  # the top of each step is painted in its design's colour
        x, y = int((p["box"]["x"] + p["box"]["w"] / 2) * scale), int(p["box"]["y"] * scale)
        want = browser.hex_rgb(p["stroke"])
        assert min(max(abs(g - w) for g, w in zip(pixels[yy][x], want)) for yy in (y - 1, y, y + 1)) <= 40, p
    # the knee figures: 2 servers of 4 GPUs, 7200 s run times of CV 0 (Allen-Cunneen 1/2), p95 wait <= 3600 s
    knee = _hand_knee_two_servers(7200, 3600, 0.5)
    text = opened.text
    assert "knee %.1f %% (M/G/2, service 7200 s, CV 0.00, p95 wait <= 3600 s)" % (knee * 100) in text, text[-2000:]
    # the utilization of each design: 57600 GPU-seconds over 8 GPUs and 7560 s (current) or 14700 s (proposed)
    assert "current: %.1f %% of 8 GPUs" % (57600 / 7560.0 / 8 * 100) in text
    assert "proposed: %.1f %% of 8 GPUs" % (57600 / 14700.0 / 8 * 100) in text
    assert "no knee: the pool has no slo.wait_seconds" in text  # inference has no SLO
