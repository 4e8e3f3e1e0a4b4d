"""The what-if HTML report opens in headless Chromium and draws: its chart has one bar per pool and design with a
wait (width proportional to the p95 wait, its colour painted), and its tables one row per pool and design and per
pool, tenant and design. The report comes from the replay outcomes of a known record (pure/_what_if.py)."""
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
