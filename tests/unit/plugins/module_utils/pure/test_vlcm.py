"""Pure vLCM image logic: depot content, version resolution, compliance views."""
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
            "status": "NON_COMPLIANT", "current_version": OLD, "target_version": OLD}}},
        "host-2": {"status": "UNAVAILABLE", "components": {}},
    }}
    view = _vlcm.compliance_view(answer, {"host-1": "esx-01"}, "NVD-AIE-800")
    assert view == {"esx-01": {"status": "NON_COMPLIANT", "current_version": OLD, "desired_version": OLD},
                    "host-2": {"status": "UNAVAILABLE", "current_version": None, "desired_version": None}}
    assert _vlcm.predict_compliance(view, NEW)["esx-01"]["status"] == "NON_COMPLIANT"
    fixed = _vlcm.predict_compliance(view, NEW, remediated=True)
    assert fixed["esx-01"] == {"status": "COMPLIANT", "current_version": NEW, "desired_version": NEW}
    assert fixed["host-2"]["status"] == "UNAVAILABLE"
