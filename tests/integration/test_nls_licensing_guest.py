"""Role nls_licensing on a Linux guest, against localhost under a temporary root, with a stand-in
nvidia-smi printing a realistic sample; module nvidia_license_info on the same samples."""
import stat
from pathlib import Path

from tests.lib.ansible_run import run_module, run_playbook

FIX = Path(__file__).resolve().parents[1] / "unit" / "plugins" / "modules" / "fixtures" / "nvidia_smi"


def fake_smi(tmp_path, sample, rc=0):
    script = tmp_path / f"nvidia-smi-{sample}"
    script.write_text(f"#!/bin/sh\ncat '{FIX / (sample + '.txt')}'\nexit {rc}\n")
    script.chmod(0o755)
    return str(script)


def play(root, token, smi, **extra):
    vars_ = {"nls_licensing_token_src": str(token), "nls_licensing_root": str(root),
             "nls_licensing_restart": False, "nls_licensing_nvidia_smi": smi,
             "nls_licensing_verify_retries": 0, "nls_licensing_verify_delay": 0}
    vars_.update(extra)
    return [{"hosts": "localhost", "gather_facts": False,
             "roles": [dict(role="gpupool.vcf.nls_licensing", **vars_)]}]


def changed(run):
    return sorted(n.split(" : ", 1)[-1] for n, r in run.tasks if r.get("changed"))


def test_guest_licensing_converge_rerun_check_diff(tmp_path):
    root = tmp_path / "root"
    token = tmp_path / "client_configuration_token_11-29-2026.tok"
    token.write_text("eyJhbGciOiJIUzI1NiJ9.secret-token-content.sig\n")
    smi = fake_smi(tmp_path, "licensed")
    old = root / "etc/nvidia/ClientConfigToken/client_configuration_token_01-01-2025.tok"
    old.parent.mkdir(parents=True)
    old.write_text("old token\n")
    check = run_playbook(play(root, token, smi), check=True, diff=True)
    assert check.rc == 0, check.stdout[-3000:]
    assert old.exists() and not (root / "etc/nvidia/gridd.conf").exists()
    run = run_playbook(play(root, token, smi), diff=True)
    assert run.rc == 0, run.stdout[-3000:]
    assert changed(check) == changed(run)
    assert "Client configuration token" in changed(run) and "The gridd.conf licensing settings" in changed(run)
    tok = root / "etc/nvidia/ClientConfigToken/client_configuration_token.tok"
    assert stat.S_IMODE(tok.stat().st_mode) == 0o600 and tok.read_text() == token.read_text()
    assert not old.exists()
    assert "FeatureType=1" in (root / "etc/nvidia/gridd.conf").read_text().splitlines()
    assert "secret-token-content" not in run.stdout  # no_log on the token
    handler = [r for n, r in run.tasks if n.endswith("Restart nvidia-gridd")]
    assert handler and handler[0].get("skipped")  # notified, skipped by nls_licensing_restart=false
    state = run.result("gpupool.vcf.nls_licensing : License state")
    assert state["licensed"] and state["gpus"][0]["licensed_product"] == "NVIDIA Virtual Compute Server"
    again = run_playbook(play(root, token, smi))
    assert again.rc == 0 and again.stats["changed"] == 0, changed(again)


def test_guest_licensing_fails_when_unlicensed_or_no_driver(tmp_path):
    token = tmp_path / "t.tok"
    token.write_text("token\n")
    run = run_playbook(play(tmp_path / "r1", token, fake_smi(tmp_path, "unlicensed")))
    assert run.rc != 0
    assert "Not licensed: Unlicensed (Restricted)" in run.result("gpupool.vcf.nls_licensing : Every GPU is licensed")["msg"]
    run = run_playbook(play(tmp_path / "r2", token, fake_smi(tmp_path, "no_driver", rc=9)))
    assert run.rc != 0
    assert "No NVIDIA driver" in run.result("gpupool.vcf.nls_licensing : Every GPU is licensed")["msg"]


def test_nvidia_license_info_module(tmp_path):
    res = run_module("gpupool.vcf.nvidia_license_info", {"nvidia_smi": fake_smi(tmp_path, "expired")})[0]
    assert res["changed"] is False and res["driver_present"] and not res["licensed"]
    assert res["gpus"][0]["expired"] is True
    res = run_module("gpupool.vcf.nvidia_license_info", {"nvidia_smi": "nvidia-smi-not-installed"})[0]
    assert res["driver_present"] is False and "not found" in res["message"]
    no_driver = {"nvidia_smi": fake_smi(tmp_path, "no_driver", rc=9)}
    res = run_module("gpupool.vcf.nvidia_license_info", no_driver, check=True)[0]
    assert res["driver_present"] is False and not res.get("failed")
