"""The vSphere 8 / 9 capability table: which calls the clients choose by the negotiated API version."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _api_capabilities as caps


@pytest.mark.parametrize("version, expected", [
    ("8.0.3.0", False), ("8.0.2.0", False), ("9.0.0.0", True), ("9.1.0.0", True), ("10.0.0.0", True),
    (None, False), ("", False), ("garbage", False),
])
def test_supervisor_summaries_by_version(version, expected):
    assert caps.supports(version, "supervisor_summaries") is expected
    assert caps.supports(version, "image_only_driver") is expected
    assert caps.supports(version, "vcenter_capacity") is expected


def test_an_unknown_capability_is_an_error():
    with pytest.raises(KeyError, match="unknown vSphere API capability 'nope'"):
        caps.supports("9.1.0.0", "nope")


def test_table_says_since_and_what():
    t = caps.table("9.1.0.0")
    assert t["supervisor_summaries"]["supported"] and t["supervisor_summaries"]["since"] == "9.0"
    assert "Clusters.list" in t["supervisor_summaries"]["what"]
    assert not any(v["supported"] for v in caps.table("8.0.3.0").values())


def test_supervisor_rows_one_per_cluster_of_each_supervisor():
    items = [{"supervisor": "sv-1", "info": {"name": "sv-east", "config_status": "RUNNING", "kubernetes_status": "READY",
                                             "stats": {"cpu_used": 0}}},
             {"supervisor": "sv-2", "info": {"name": "sv-west", "config_status": "ERROR", "kubernetes_status": "ERROR"}},
             {"supervisor": "sv-3", "info": {"name": "sv-empty"}}]
    topologies = {"sv-1": [{"zone": "z1", "clusters": ["domain-c1"]}, {"zone": "z2", "clusters": ["domain-c2", "domain-c1"]}],
                  "sv-2": [{"zone": "z3", "clusters": ["domain-c9"]}], "sv-3": []}
    rows = caps.supervisor_rows(items, topologies, {"domain-c1": "gpu-a", "domain-c2": "gpu-b"})
    assert [(r["cluster"], r["cluster_name"], r["supervisor"]) for r in rows] == [
        ("domain-c1", "gpu-a", "sv-1"), ("domain-c2", "gpu-b", "sv-1"), ("domain-c9", None, "sv-2")]
    assert rows[0]["config_status"] == "RUNNING" and rows[0]["supervisor_name"] == "sv-east" and rows[0]["stats"] == {"cpu_used": 0}
    assert rows[2]["kubernetes_status"] == "ERROR"


@pytest.mark.parametrize("version, managed, refused", [
    ("9.1.0.0", True, True), ("9.0.0.0", True, True), ("9.1.0.0", False, False), ("8.0.3.0", True, False),
])
def test_direct_install_refusal(version, managed, refused):
    why = caps.direct_install_refusal(version, "esx-1", "gpu-a", managed, "550.90.05")
    if refused:
        assert "vlcm_component (cluster: gpu-a, version: 550.90.05)" in why and "Nothing was changed" in why
        assert "host esx-1 is in cluster gpu-a" in why
    else:
        assert why is None
