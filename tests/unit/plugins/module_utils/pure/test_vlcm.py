"""Pure vLCM image logic: depot content, version resolution, compliance views."""
from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vlcm
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import EsxiError

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"

CONTENT = {"metadata_bundles": {"NVD-AIE-800_x.zip": [{"independent_components": {
    "NVD-AIE-800": {"versions": [{"version": NEW}, {"version": OLD}]},
    "other": {"versions": [{"version": "1.0"}]}}}]}}


def test_depot_versions():
    assert _vlcm.depot_versions(CONTENT, "NVD-AIE-800") == [NEW, OLD]
    assert _vlcm.depot_versions(CONTENT, "NVD-AIE-900") == []
    assert _vlcm.depot_versions(None, "NVD-AIE-800") == []


def test_resolve_version():
    assert _vlcm.resolve_version(NEW, [OLD, NEW], "c") == NEW
    assert _vlcm.resolve_version("550.90.05", [OLD, NEW], "c") == NEW
    with pytest.raises(_vlcm.VlcmError, match="ambiguous"):
        _vlcm.resolve_version("550.90.05", [NEW, NEW.replace("1OEM", "2OEM")], "c")
    with pytest.raises(_vlcm.VlcmError, match="no imported depot offers component c at version 560.28.03"):
        _vlcm.resolve_version("560.28.03", [OLD], "c")
    with pytest.raises(EsxiError):
        _vlcm.resolve_version("latest", [OLD], "c")


def test_compliance_view_and_prediction():
    answer = {"hosts": {
        "host-1": {"status": "NON_COMPLIANT", "components": {"NVD-AIE-800": {
            "status": "NON_COMPLIANT", "current": {"version": OLD}, "target": {"version": OLD}}}},
        "host-2": {"status": "UNAVAILABLE", "components": {}},
    }}
    view = _vlcm.compliance_view(answer, {"host-1": "esx-01"}, "NVD-AIE-800")
    assert view == {"esx-01": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": OLD},
                    "host-2": {"status": "UNAVAILABLE", "current_version": None, "desired_version": None}}
    assert _vlcm.predict_compliance(view, NEW)["esx-01"]["status"] == "NON_COMPLIANT"
    fixed = _vlcm.predict_compliance(view, NEW, remediated=True)
    assert fixed["esx-01"] == {"status": "COMPLIANT", "current_version": NEW, "desired_version": NEW}
    assert fixed["host-2"]["status"] == "UNAVAILABLE"


def test_prediction_of_a_remediation_of_some_hosts():
    view = {"esx-01": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": NEW},
            "esx-02": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": NEW}}
    one = _vlcm.predict_compliance(view, NEW, remediated=True, hosts=["esx-02"])
    assert one["esx-01"]["status"] == "NON_COMPLIANT" and one["esx-01"]["current_version"] == OLD
    assert one["esx-02"] == {"status": "COMPLIANT", "current_version": NEW, "desired_version": NEW}


# --- the driver of a host read from its cluster's image compliance ----------------------------

SCAN = "2026-11-30T13:22:55.123Z"


def side(version):
    """One side of a ComponentCompliance as the API gives it (absent: no such component)."""
    return None if version is None else {"version": version, "details": {"display_name": "c", "vendor": "NVIDIA"}}


def host_compliance(status="COMPLIANT", comp_status="COMPLIANT", current=NEW, target=NEW, **extra):
    host = {"status": status, "scan_time": SCAN, "components": {
        "NVD-AIE-800": {"status": comp_status, "current": side(current), "target": side(target)},
        "nvd-gpu-mgmt-daemon": {"status": "COMPLIANT", "current": side("1.0"), "target": side("1.0")}}}
    host.update(extra)
    return {"status": status, "hosts": {"host-1": host}}


def test_a_compliant_host_runs_the_image_driver():
    component, version = _vlcm.image_driver(host_compliance(), "host-1")
    assert component == "NVD-AIE-800"
    assert (version.short, version.text) == ("550.90.05", NEW)
    booted = datetime(2026, 11, 30, 13, 0, tzinfo=timezone.utc)
    assert _vlcm.image_driver(host_compliance(impact="NO_IMPACT"), "host-1", boot_time=booted)[0] == "NVD-AIE-800"


@pytest.mark.parametrize("answer", [
    host_compliance(status="NON_COMPLIANT", comp_status="NON_COMPLIANT", current=OLD),
    host_compliance(status="UNAVAILABLE"),
    host_compliance(status="INCOMPATIBLE"),
    # compliant but the host needs a reboot or maintenance mode to run it
    host_compliance(impact="REBOOT_REQUIRED"),
    host_compliance(impact="MAINTENANCE_MODE_REQUIRED"),
    # the component says otherwise than the host status
    host_compliance(comp_status="NON_COMPLIANT"),
    host_compliance(current=OLD),
    host_compliance(current=None),
    host_compliance(target=None),
    host_compliance(target="latest", current="latest"),
    {"hosts": {"host-1": {"status": "COMPLIANT", "components": {}}}},  # no NVIDIA driver in the image
    {"hosts": {"host-2": host_compliance()["hosts"]["host-1"]}},  # the host is not in the answer
    {},
    None,
])
def test_anything_short_of_running_the_image_means_read_the_host(answer):
    assert _vlcm.image_driver(answer, "host-1") is None


def test_two_driver_components_are_not_guessed_between():
    answer = host_compliance()
    second = {"status": "COMPLIANT", "current": side(OLD), "target": side(OLD)}
    answer["hosts"]["host-1"]["components"]["NVD-VGPU-800"] = second
    assert _vlcm.image_driver(answer, "host-1") is None


def test_a_host_that_owes_a_reboot_does_not_run_the_image():
    assert _vlcm.image_driver(host_compliance(), "host-1", reboot_required=True) is None


def test_a_compliance_older_than_the_last_boot_is_not_trusted():
    after = datetime(2026, 11, 30, 13, 22, 56, tzinfo=timezone.utc)
    before = datetime(2026, 11, 30, 13, 22, 55, 100000, tzinfo=timezone.utc)
    assert _vlcm.image_driver(host_compliance(), "host-1", boot_time=after) is None
    assert _vlcm.image_driver(host_compliance(), "host-1", boot_time=before) is not None
    # the host's own scan time first, else the cluster's; none at all: not trusted once the boot is known
    answer = host_compliance()
    del answer["hosts"]["host-1"]["scan_time"]
    assert _vlcm.image_driver(answer, "host-1", boot_time=before) is None
    answer["scan_time"] = SCAN
    assert _vlcm.image_driver(answer, "host-1", boot_time=before) is not None
    # a boot time in another zone is compared in UTC
    cet = timezone(timedelta(hours=1))
    assert _vlcm.image_driver(answer, "host-1", boot_time=datetime(2026, 11, 30, 14, 22, 56, tzinfo=cet)) is None
    assert _vlcm.image_driver(answer, "host-1", boot_time=datetime(2026, 11, 30, 14, 22, 55, tzinfo=cet)) is not None


def test_parse_time():
    assert _vlcm.parse_time(SCAN) == datetime(2026, 11, 30, 13, 22, 55, 123000)
    assert _vlcm.parse_time("2026-11-30T13:22:55Z") == datetime(2026, 11, 30, 13, 22, 55)
    assert _vlcm.parse_time("2026-11-30T14:22:55.5+01:00") == datetime(2026, 11, 30, 13, 22, 55, 500000)
    assert _vlcm.parse_time("2026-11-30T12:22:55-0100") == datetime(2026, 11, 30, 13, 22, 55)
    assert _vlcm.parse_time("yesterday") is None and _vlcm.parse_time(None) is None and _vlcm.parse_time(5) is None


def test_driver_component_names():
    assert _vlcm.is_driver_component("NVD-AIE-800") and _vlcm.is_driver_component("NVD-VGPU-800")
    assert not _vlcm.is_driver_component("nvd-gpu-mgmt-daemon")
    assert not _vlcm.is_driver_component("nmlx5-core") and not _vlcm.is_driver_component(None)
