"""The pure part of the vGPU VM-hours (pure/_chargeback.py): powered-on time from power events,
the vSphere Namespace of a resource pool, rows and prices per namespace and profile."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback as cb

S, E = 1000.0, 2000.0


@pytest.mark.parametrize("transitions, on_now, boot, expected", [
    ([], True, None, 1000.0),                       # on all along, no event left
    ([], True, 1500.0, 500.0),                      # on since its boot inside the period
    ([], True, 2500.0, 0.0),                        # booted after the period
    ([], False, None, 0.0),                         # off all along
    ([(1200.0, False)], False, None, 200.0),        # on until 1200
    ([(1300.0, True)], True, 100.0, 700.0),         # on from 1300 (the event wins over the boot time)
    ([(1100.0, False), (1400.0, True), (1600.0, False)], False, None, 100.0 + 200.0),
    ([(1100.0, True), (2100.0, False)], False, None, 900.0),   # events after the period only bound it
    ([(2100.0, True)], True, None, 0.0),            # off through the period, on after it
    ([(2100.0, False)], False, None, 1000.0),       # on through the period, off after it
    ([(900.0, True), (1500.0, False)], False, None, 500.0),    # an event before the start is ignored
])
def test_on_seconds(transitions, on_now, boot, expected):
    assert cb.on_seconds(transitions, on_now, S, E, boot) == pytest.approx(expected)


POOLS = {"rp-root": ("Resources", None), "rp-ns": ("Namespaces", "rp-root"), "rp-a": ("team-a", "rp-ns"),
         "rp-a-child": ("tkc-1", "rp-a"), "rp-other": ("batch", "rp-root"), "rp-loop": ("x", "rp-loop")}


def test_namespace_of_a_resource_pool():
    assert cb.vsphere_namespace("rp-a", POOLS) == "team-a"
    assert cb.vsphere_namespace("rp-a-child", POOLS) == "team-a"  # a pool inside a namespace
    assert cb.vsphere_namespace("rp-other", POOLS) is None
    assert cb.vsphere_namespace("rp-root", POOLS) is None
    assert cb.vsphere_namespace("rp-loop", POOLS) is None and cb.vsphere_namespace(None, POOLS) is None


def table():
    design = {"clusters": [{"name": "c", "gpu": {"model": "H100-80GB"}}],
              "pools": [], "chargeback": {"currency": "EUR", "card_hour": {"H100-80GB": 4.0, "L40S": 1.2},
                                          "profile_hour": {"nvidia_h100-80c": 5.0}}}
    return cb.price_table(design)


def test_profile_prices():
    t = table()
    assert cb.profile_price("nvidia_h100-80c", t) == (5.0, "profile_hour")
    assert cb.profile_price("nvidia_h100-1-10c", t) == (pytest.approx(4.0 / 7), "card_hour H100-80GB x 1/7")
    assert cb.profile_price("nvidia_l40s-8c", t) == (pytest.approx(0.2), "card_hour L40S x 1/6")
    assert cb.profile_price("grid_a100d-40c", t)[0] is None
    assert cb.profile_price("nvidia_h100-80c", None) == (None, "no chargeback prices in the design")


def test_vm_usage_rows_and_report():
    vms = [dict(moid="vm-1", name="a-train", resource_pool="rp-a", powered_on=True, boot_time=0.0,
                profiles=["nvidia_h100-80c", "nvidia_h100-80c"]),
           dict(moid="vm-2", name="a-serve", resource_pool="rp-a-child", powered_on=False, boot_time=None,
                profiles=["nvidia_h100-1-10c"]),
           dict(moid="vm-3", name="tkc-w-1", resource_pool="rp-a", powered_on=True, boot_time=0.0,
                profiles=["nvidia_h100-80c"]),
           dict(moid="vm-4", name="loose", resource_pool="rp-other", powered_on=True, boot_time=1500.0,
                profiles=["nvidia_l40s-8c"]),
           dict(moid="vm-5", name="plain", resource_pool="rp-a", powered_on=True, boot_time=0.0, profiles=[])]
    transitions = {"vm-2": [(1360.0, False)]}
    records, rows, left = cb.vm_usage(vms, POOLS, transitions, S, E, table(), exclude=["tkc-*"])
    assert left == ["tkc-w-1"] and [r["name"] for r in records] == ["a-serve", "a-train", "loose"]
    got = dict(((r["namespace"], r["profile"]), (r["vms"], r["vgpu_hours"], r["cost"])) for r in rows)
    assert got == {("team-a", "nvidia_h100-80c"): (1, pytest.approx(2000 / 3600.0), pytest.approx(2000 / 3600.0 * 5)),
                   ("team-a", "nvidia_h100-1-10c"): (1, pytest.approx(0.1), pytest.approx(0.1 * 4 / 7)),
                   ("(none)", "nvidia_l40s-8c"): (1, pytest.approx(500 / 3600.0), pytest.approx(500 / 3600.0 * 0.2))}
    rep = cb.report({}, [], S, E, 60.0, 600.0, table(), (records, rows, left))
    assert rep["vms_read"] and rep["vgpu_vm_hours"] == pytest.approx((2000 + 360 + 500) / 3600.0)
    assert rep["total_cost"] == pytest.approx(rep["vm_cost"]) and rep["cost"] == 0
    assert [t["namespace"] for t in rep["vm_by_namespace"]] == ["(none)", "team-a"]
    csv_rows = cb.csv_text(rep).splitlines()
    assert csv_rows[0].endswith(",kind") and len([r for r in csv_rows if r.endswith(",vm")]) == 3
    page = cb.html_text(rep)
    assert page.count('data-segment=') == 3 and "tkc-w-1" in page
    # without vSphere: the keys are there, empty
    bare = cb.report({}, [], S, E, 60.0, 600.0, None)
    assert (bare["vms_read"], bare["vm_rows"], bare["vm_cost"], bare["total_cost"]) == (False, [], None, None)
    assert 'id="chart-vms"' not in cb.html_text(bare)


def test_node_names_and_query():
    vec = [{"metric": {"node": "n1"}, "value": [0, "1"]}, {"metric": {"node": "n0"}, "value": [0, "1"]},
           {"metric": {}, "value": [0, "1"]}]
    assert cb.node_names(vec) == ["n0", "n1"]
    assert cb.nodes_query(86400) == "count by (node) (last_over_time(kube_node_info[86400s]))"
