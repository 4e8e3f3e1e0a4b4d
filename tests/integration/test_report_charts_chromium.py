"""The HTML reports open in headless Chromium and their charts draw: each chart has a box on the
page, one bar per data row (its width proportional to its value, its colour painted at its
centre in a screenshot), one line per tenant with a point per bucket. Chromium is Debian's
(`make browser`); without it these tests fail and say how to get it.

Reports: the chargeback page (pods and vGPU VMs) the module renders from a report of known rows
(pure/_chargeback.py, from Prometheus and vSphere answers made here), and the audit's HTML page
(pure/_audit_report.py), which holds tables and no chart: it must render them, every finding a row.
The chargeback page a real module run writes is opened by tests/integration/test_gpu_usage_vgpu_vms.py.
"""
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_report
from tests.lib import browser

ROOT = pathlib.Path(__file__).resolve().parents[2]
START, END, STEP = 1_790_000_000.0, 1_790_000_000.0 + 7 * 86400, 300.0
# (namespace, pool, profile, ksm resource, GPU-hours)
POD_ROWS = [("team-a", "inference", "nvidia_h100-3-40c", "nvidia_com_mig_3g_40gb", 84.0),
            ("team-a", "notebooks", "nvidia_l40s-8c", "nvidia_com_gpu", 12.5),
            ("team-b", "training", "nvidia_h100-80c", "nvidia_com_gpu", 300.0),
            ("team-b", "notebooks", "nvidia_l40s-8c", "nvidia_com_gpu", 3.25),
            ("team-c", "inference", "nvidia_h100-3-40c", "nvidia_com_mig_3g_40gb", 40.0),
            ("team-c", "(none)", "(none)", "nvidia_com_gpu", 0.0)]  # a row without hours draws no bar
DESIGN = {"clusters": [{"name": "gpu-h100", "gpu": {"model": "H100-80GB"}},
                       {"name": "gpu-l40s", "gpu": {"model": "L40S"}}],
          "pools": [{"name": "inference", "cluster": "gpu-h100", "vgpu_profile": "nvidia_h100-3-40c"},
                    {"name": "training", "cluster": "gpu-h100", "vgpu_profile": "nvidia_h100-80c"},
                    {"name": "notebooks", "cluster": "gpu-l40s", "vgpu_profile": "nvidia_l40s-8c",
                     "guest_time_slicing": {"replicas": 4}}],
          "chargeback": {"currency": "EUR", "card_hour": {"H100-80GB": 4.0, "L40S": 1.2}}}


def chargeback_report():
    scale = STEP / 3600.0
    alloc = [{"metric": {"namespace": ns, "pool": pool, "profile": prof, "resource": res},
              "value": [END, repr(hours / scale)]} for ns, pool, prof, res, hours in POD_ROWS]
    size, first, last = _chargeback.buckets(START, END, STEP)
    times = [first + i * size for i in range(int((last - first) // size) + 1)]
    matrix = [{"metric": {"namespace": ns}, "values": [[t, repr((i % 5 + k) * 3.0)] for i, t in enumerate(times)]}
              for k, ns in enumerate(("team-a", "team-b", "team-c"))]
    table = _chargeback.price_table(DESIGN)
    vms = [dict(moid="vm-%d" % i, name=name, resource_pool=pool, powered_on=on, boot_time=START - 3600,
                profiles=profiles)
           for i, (name, pool, on, profiles) in enumerate([
               ("viz-01", "rp-a", True, ["nvidia_l40s-24c"]),
               ("sim-01", "rp-a", True, ["nvidia_h100-80c", "nvidia_h100-80c"]),
               ("lab-01", "rp-root", True, ["nvidia_l40s-8c"]),
               ("parked-01", "rp-b", False, ["nvidia_h100-80c"])])]
    pools = {"rp-root": ("Resources", None), "rp-ns": ("Namespaces", "rp-root"), "rp-a": ("team-a", "rp-ns"),
             "rp-b": ("team-b", "rp-ns")}
    transitions = {"vm-2": [(START + 86400, False), (START + 2 * 86400, True)]}
    vm = _chargeback.vm_usage(vms, pools, transitions, START, END, table)
    return _chargeback.report({"allocation": alloc}, matrix, START, END, STEP, size, table, vm), len(times)


def audit_page(tmp_path):
    findings = [dict(rule="driver_off_design", severity="error", link="host", object="esx-h100-04",
                     message="driver 550.54.10 <> 550.90.05 & more", fix="run site.yml"),
                dict(rule="notebook_culling_missing", severity="warning", link="guest", object="kubeflow",
                     message="no culling", fix="set culling")]
    summary = dict(severity=dict(error=1, warning=1, info=0),
                   link=dict(host=dict(error=1, warning=0, info=0), guest=dict(error=0, warning=1, info=0)))
    path = tmp_path / "audit.html"
    path.write_text(_audit_report.render("example", findings, summary, ["host", "guest"], "html"))
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chromium")
    rep, buckets = chargeback_report()
    cb = tmp / "chargeback.html"
    cb.write_text(_chargeback.html_text(rep))
    audit = audit_page(tmp)
    opened = browser.open_reports([cb, audit])
    return dict(chargeback=(opened[str(cb)], rep, buckets), audit=opened[str(audit)])


def test_chargeback_tenant_bars(pages):
    page, rep = pages["chargeback"][:2]
    assert page.title == "GPU usage and chargeback"
    chart = browser.assert_bars_drawn(page, "chart-tenants",
                                      [(r["namespace"], r["profile"], r["gpu_hours"]) for r in rep["rows"]])
    assert len(chart["bars"]) == 5  # six rows, one of them without hours
    # the stacks: a tenant's bars end to end on one line, the longest tenant's bar the full plot
    team_b = sorted((b for b in chart["bars"] if b["group"] == "team-b"), key=lambda b: b["box"]["x"])
    assert abs(team_b[0]["box"]["x"] + team_b[0]["box"]["w"] - team_b[1]["box"]["x"]) < 0.6
    assert len(set(round(b["box"]["y"]) for b in team_b)) == 1
    browser.assert_pixels(page, chart)


def test_chargeback_timeline_lines(pages):
    page, rep, buckets = pages["chargeback"]
    chart = page.charts["chart-timeline"]
    assert chart["box"]["w"] > 0 and chart["box"]["h"] > 0
    assert len(chart["lines"]) == len(rep["timeline"]) == 3
    for line in chart["lines"]:
        assert line["points"] == buckets and line["length"] > 0 and line["box"]["w"] > 0, line


def test_chargeback_vm_bars(pages):
    page, rep = pages["chargeback"][:2]
    rows = [(r["namespace"], r["profile"], r["vgpu_hours"]) for r in rep["vm_rows"]]
    assert len(rows) == 4 and sum(1 for r in rows if r[2] > 0) == 3  # parked-01 was off all along
    chart = browser.assert_bars_drawn(page, "chart-vms", rows)
    browser.assert_pixels(page, chart)
    # the tables drew too: totals per tenant, pool and profile, every pod row, the VM rows
    assert page.table_rows == [3, 4, 4, 6, 4]  # pools and profiles include (none)


def test_audit_page_renders_its_tables(pages):
    page = pages["audit"]
    assert page.title == "GPU pool audit: example" and page.charts == {}
    # the link summary (header + 2 links) and the findings (header + 2)
    assert page.table_rows == [3, 3]


def test_missing_chromium_fails_with_the_way_to_get_it(monkeypatch):
    monkeypatch.setattr(browser, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(AssertionError, match="make browser"):
        browser.driver()
