"""gpu_pool_design through ansible-playbook: the example design, a broken one, check mode."""
import copy
import pathlib

import yaml

from tests.lib.ansible_run import run_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE_FILE = ROOT / "examples" / "design.yml"
EXAMPLE = yaml.safe_load(EXAMPLE_FILE.read_text())


def test_example_design_file_is_clean_and_derived():
    res, _playbook = run_module("gpupool.vcf.gpu_pool_design", {"design_file": str(EXAMPLE_FILE)})
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    assert res["findings"] == [] and res["errors"] == []
    derived = res["derived"]
    assert derived["esxi"]["clusters"]["gpu-h100"]["driver_version"] == "550.90.05-1OEM.800.1.0.20613240"
    assert derived["esxi"]["clusters"]["gpu-h100"]["min_gpus"] == 2   # the protected (inference) cards
    pools = {p["name"]: p for p in derived["vks"]["clusters"]["gpu-workloads"]["node_pools"]}
    assert pools["inference"]["labels"]["nvidia.com/vgpu.profile"] == "nvidia_h100-3-40c"
    assert res["design"]["pools"][0]["vm_class"]["name"] == "gpu-inference"


def test_check_mode_gives_the_same_result():
    res, _playbook = run_module("gpupool.vcf.gpu_pool_design", {"design": EXAMPLE}, check=True)
    assert not res.get("failed"), res.get("msg")
    assert res["derived"]["roles"]["gpu_operator"]["gpu_operator_mig_strategy"] == "single"
    assert res["derived"]["roles"]["esxi_gpu_host"]["gpu-h100"]["esxi_gpu_host_min_gpus"] == 2


def broken():
    d = copy.deepcopy(EXAMPLE)
    for p in d["pools"]:
        if p["name"] == "notebooks":
            p["priority"] = "gpu-inference"
        if p["name"] == "training":
            p["training"]["gang_scheduling"] = False
    del d["tenants"][2]["gpu_quota"]
    d["tenants"][0]["gpu_quota"]["inference"] = 99
    return d


def test_errors_fail_with_every_error_listed():
    res, _playbook = run_module("gpupool.vcf.gpu_pool_design", {"design": broken()})
    assert res["failed"]
    assert res["msg"].startswith("The pool design has 3 error(s): ")
    for part in ("training_multi_gpu: pools.training: ", "notebook_preemptible: pools.notebooks: ",
                 "tenant_gpu_quota: tenants.research: ", "(fix: "):
        assert part in res["msg"]
    assert {f["rule"] for f in res["errors"]} == {"training_multi_gpu", "notebook_preemptible", "tenant_gpu_quota"}
    assert res["derived"] is None
    assert any(w.startswith("quota_exceeds_pool: tenants.team-search") for w in res.get("warnings", []))


def test_fail_on_error_false_reports_without_failing():
    res, _playbook = run_module("gpupool.vcf.gpu_pool_design", {"design": broken(), "fail_on_error": False}, check=True)
    assert not res.get("failed")
    assert len(res["errors"]) == 3 and len(res["findings"]) == 4
    assert [f for f in res["findings"] if f["severity"] == "warning"][0]["rule"] == "quota_exceeds_pool"


def test_unreadable_file():
    res, _playbook = run_module("gpupool.vcf.gpu_pool_design", {"design_file": str(ROOT / "examples" / "missing.yml")})
    assert res["failed"] and "Unable to read design file" in res["msg"]
