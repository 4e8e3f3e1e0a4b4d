"""nvidia_license_info through main(): nvidia-smi is a script in the test's folder that prints a recorded
``nvidia-smi -q`` and logs each call, so the module's own command line, parsing and result are the product's."""
import os
import stat

import pytest

from ansible_collections.gpupool.vcf.plugins.modules import nvidia_license_info
from tests.lib.module_docs import missing_keys, secret_options
from tests.lib.module_main import run_main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia_smi")


@pytest.fixture
def smi(tmp_path):
    """A fake nvidia-smi: ``use(fixture, rc)`` sets what it prints and its exit status; ``calls()`` its argv."""
    log = tmp_path / "calls.log"
    script = tmp_path / "nvidia-smi"

    class Smi:
        path = str(script)

        @staticmethod
        def use(fixture, rc=0, to_stderr=False):
            out = os.path.join(FIXTURES, fixture)
            script.write_text("#!/bin/sh\necho \"$@\" >> '%s'\ncat '%s'%s\nexit %d\n" % (
                log, out, " >&2" if to_stderr else "", rc))
            script.chmod(script.stat().st_mode | stat.S_IXUSR)

        @staticmethod
        def calls():
            return log.read_text().splitlines() if log.exists() else []

    Smi.use("licensed.txt")
    return Smi


def test_a_licensed_guest_is_reported_with_every_documented_key(smi):
    result = run_main(nvidia_license_info, dict(nvidia_smi=smi.path))
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(nvidia_license_info, result) == []
    assert result["changed"] is False and result["driver_present"] is True and result["licensed"] is True
    assert result["driver_version"] == "550.127.05"
    [gpu] = result["gpus"]
    assert gpu["pci_bus_id"] == "00000000:02:00.0" and gpu["licensed"] is True and gpu["expired"] is False
    assert gpu["licensed_product"] == "NVIDIA Virtual Compute Server"
    assert smi.calls() == ["-q"]


def test_check_mode_reads_the_same_and_a_rerun_changes_nothing(smi):
    smi.use("two_gpus_one_unlicensed.txt")
    real = run_main(nvidia_license_info, dict(nvidia_smi=smi.path))
    checked = run_main(nvidia_license_info, dict(nvidia_smi=smi.path), check_mode=True)
    again = run_main(nvidia_license_info, dict(nvidia_smi=smi.path))
    assert checked == real == again
    assert real["changed"] is False and real["licensed"] is False
    assert [g["licensed"] for g in real["gpus"]] == [True, False]
    assert len(smi.calls()) == 3  # an info module: check mode runs nvidia-smi as well


def test_diff_mode_gives_no_diff_for_an_info_module(smi):
    result = run_main(nvidia_license_info, dict(nvidia_smi=smi.path), diff=True)
    assert "diff" not in result and result["changed"] is False


def test_an_empty_command_is_refused_before_nvidia_smi_runs(smi):
    result = run_main(nvidia_license_info, dict(nvidia_smi="  "))
    assert result["failed"] is True
    assert result["msg"].startswith("Invalid input for nvidia_license_info: nvidia_smi must not be empty."), result
    assert result["invalid_input"] == ["nvidia_smi must not be empty"]
    assert smi.calls() == []


def test_a_driver_that_does_not_answer_is_reported_not_failed(smi):
    smi.use("no_driver.txt", rc=9)
    result = run_main(nvidia_license_info, dict(nvidia_smi=smi.path))
    assert not result.get("failed"), result.get("msg")
    assert result["driver_present"] is False and result["licensed"] is False and result["gpus"] == []
    assert "NVIDIA driver" in result["message"], result["message"]
    assert missing_keys(nvidia_license_info, result) == []


def test_a_failing_nvidia_smi_with_a_report_on_stderr_is_not_taken_for_a_licensed_driver(smi):
    smi.use("licensed.txt", rc=3, to_stderr=True)
    result = run_main(nvidia_license_info, dict(nvidia_smi=smi.path))
    assert not result.get("failed"), result.get("msg")
    assert result["driver_present"] is False and result["message"], result


def test_no_nvidia_smi_on_the_path_means_no_driver(smi, tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = run_main(nvidia_license_info, dict())
    assert not result.get("failed"), result.get("msg")
    assert result["driver_present"] is False and result["message"] == "nvidia-smi not found: no NVIDIA driver installed"
    assert smi.calls() == []


def test_the_module_takes_no_secret():
    assert secret_options(nvidia_license_info.ARGUMENT_SPEC) == []
