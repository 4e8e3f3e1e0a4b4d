from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_vcenter as cv


def ours(**profiles):
    return {"gpu-a": {"profiles": dict((p.replace("_", "-"), dict(total=t, used=u, free=f))
                                       for p, (t, u, f) in profiles.items())}}


def test_available_from_9_0_only():
    assert cv.available("9.0.0.0") and cv.available("9.1.0.0")
    assert not cv.available("8.0.3.0") and not cv.available(None) and not cv.available("")
    assert "8.0.3.0" in cv.not_available_message("8.0.3.0") and "9.0" in cv.not_available_message("8.0.3.0")


def test_agreeing_figures_give_no_finding():
    theirs = {"gpu-a": {"p-1": dict(max=8, consumed=5, remaining=3, unused_reservation=0)}}
    assert cv.compare(ours(p_1=(8, 5, 3)), theirs) == []


def test_each_differing_field_is_a_finding():
    theirs = {"gpu-a": {"p-1": dict(max=8, consumed=5, remaining=1, unused_reservation=2)}}
    found = cv.compare(ours(p_1=(8, 5, 3)), theirs)
    assert [(f["cluster"], f["profile"], f["field"], f["ours"], f["vcenter"]) for f in found] == [
        ("gpu-a", "p-1", "free/remaining", 3, 1)]
    assert found[0]["message"] == "gpu-a p-1: our free is 3, vCenter's remaining is 1"
    theirs = {"gpu-a": {"p-1": dict(max=7, consumed=4, remaining=3, unused_reservation=0)}}
    assert [f["field"] for f in cv.compare(ours(p_1=(8, 5, 3)), theirs)] == ["total/max", "used/consumed"]


def test_unknown_profile_and_one_sided_rows():
    theirs = {"gpu-a": {"p-1": {"unknown": "not offered"}}, "gpu-b": {"p-2": dict(max=1, consumed=0, remaining=1)}}
    found = cv.compare(ours(p_1=(8, 5, 3)), theirs)
    assert [(f["profile"], f["field"], f["ours"], f["vcenter"]) for f in found] == [("p-1", "unknown", 8, None)]
    assert "not offered" in found[0]["message"]


def test_unknown_profile_without_slots_of_ours_is_no_finding():
    theirs = {"gpu-a": {"p-1": {"unknown": "not offered"}}}
    assert cv.compare(ours(p_1=(0, 0, 0)), theirs) == []


def test_beside_and_host_findings():
    mine = ours(p_1=(8, 5, 3), p_2=(4, 0, 4))
    theirs = {"gpu-a": {"p-1": dict(max=8, consumed=5, remaining=1, unused_reservation=2), "p-2": {"unknown": "why"}}}
    rows = cv.beside(mine, theirs)["gpu-a"]
    assert dict(rows["p-1"]["ours"]) == dict(total=8, used=5, free=3)
    assert dict(rows["p-1"]["vcenter"]) == dict(max=8, consumed=5, remaining=1, unused_reservation=2)
    assert rows["p-2"]["vcenter"] is None and rows["p-2"]["unknown"] == "why"
    assert cv.beside(mine, {}) == {}
    hosts = {"esx-1": mine["gpu-a"]}
    found = cv.host_findings(hosts, {"esx-1": theirs["gpu-a"]}, {"esx-1": "gpu-a"})
    assert [(f["cluster"], f["host"], f["profile"], f["field"]) for f in found] == [
        ("gpu-a", "esx-1", "p-1", "free/remaining"), ("gpu-a", "esx-1", "p-2", "unknown")]
    assert found[0]["message"] == "host esx-1 p-1: our free is 3, vCenter's remaining is 1"


def test_markdown_lines():
    text = cv.markdown({"read": False, "reason": "not on 8.0.3.0"}, [])
    assert "## vCenter's own figures" in text and "Not read: not on 8.0.3.0." in text
    vc = {"read": True, "api_version": "9.1.0.0", "calls": 1,
          "clusters": cv.beside(ours(p_1=(8, 5, 3)), {"gpu-a": {"p-1": dict(max=8, consumed=5, remaining=1,
                                                                            unused_reservation=2)}})}
    found = cv.compare(ours(p_1=(8, 5, 3)), {"gpu-a": {"p-1": dict(max=8, consumed=5, remaining=1)}})
    text = cv.markdown(vc, found)
    assert "| p-1 | 8 / 8 | 5 / 5 | 3 / 1 | 2 |" in text
    assert "- gpu-a p-1: our free is 3, vCenter's remaining is 1" in text
