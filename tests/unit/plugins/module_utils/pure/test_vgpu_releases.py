"""_vgpu_releases: which Linux guest driver NVIDIA supports on which Virtual GPU Manager."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vgpu_releases as rel


def test_every_entry_names_a_source():
    for entry in list(rel.BRANCHES.values()) + list(rel.RELEASES):
        assert entry.source in rel.SOURCES
    for release in rel.RELEASES:
        branch = rel.branch_of(release.guest)
        assert branch is not None and release.version.split(".")[0] == str(branch.major)
        if release.host:
            assert rel.version_numbers(release.host)[0] == rel.version_numbers(release.guest)[0]
    majors = sorted(b.major for b in rel.BRANCHES.values())
    assert majors == sorted(set(majors))  # one branch per major release


def test_releases_as_the_sources_list_them():
    assert rel.release_of("580.65.05-1OEM.800.1.0.20613240", "host").version == "19.0"
    assert rel.release_of("580.65.06", "guest").version == "19.0"
    assert rel.release_of("580.82.07", "guest").version == "19.1"
    assert rel.release_of("525.85.07", "host").version == "15.1"
    assert rel.release_of("550.90.05", "host") is None  # no source at hand lists it: nothing guessed
    assert rel.matching_guest("580.65.05-1OEM.800.1.0.20613240") == "580.65.06"
    assert rel.matching_guest("550.90.05") is None
    assert rel.branch_of("550.90.05-1OEM.800.1.0.20613240").major == 17
    assert rel.branch_of("470.256.02") is None and rel.branch_of("latest") is None


@pytest.mark.parametrize("host,guest,verdict,words", [
    ("580.65.05", "580.65.06", True, "same release"),
    ("525.85.07", "525.60.13", True, "same release branch"),           # 15.1 host, 15.0 guest
    ("550.90.05-1OEM.800.1.0.20613240", "550.54.14", True, "same release branch"),
    ("550.90.05", "535.183.06", True, "branch after the guest driver's"),
    ("580.65.05", "570.211.01", True, "branch after the guest driver's"),
    ("550.90.05", "580.65.06", False, "newer than the vGPU Manager"),
    ("580.65.05", "550.90.07", False, "2 release branches older"),
    ("550.90.05", "525.85.05", False, "2 release branches older"),
    ("550.90.05", "470.256.02", None, "R470 is not in the release table"),
    ("390.12", "470.256.02", None, "R390, R470 is not in the release table"),
    ("550.90.05", "x", None, "not a driver version"),
])
def test_guest_supported(host, guest, verdict, words):
    got, reason = rel.guest_supported(host, guest)
    assert got is verdict and words in reason, reason


def test_long_term_support_rule_applies_between_known_lts_branches_only(monkeypatch):
    # only R535 is marked long-term support in the sources: an R580 host with an R535 guest is three branches older
    assert rel.guest_supported("580.65.05", "535.183.06")[0] is False
    branches = dict(rel.BRANCHES)
    branches[580] = rel.Branch(580, 19, True, "vsphere-r580")
    monkeypatch.setattr(rel, "BRANCHES", branches)
    verdict, reason = rel.guest_supported("580.65.05", "535.183.06")
    assert verdict is True and "long-term support branch after" in reason
    branches[570] = rel.Branch(570, 18, True, "azure-aks-gpu")  # an LTS branch between: not the previous LTS
    assert rel.guest_supported("580.65.05", "535.183.06")[0] is False
