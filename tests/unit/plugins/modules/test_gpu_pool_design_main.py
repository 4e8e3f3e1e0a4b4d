"""gpu_pool_design through main(): the arguments parsed by AnsibleModule (design or design_file, one of
them), the example design (examples/design.yml) judged and derived. An info module without a client: check
mode gives the same result, nothing is ever changed, a design with an error fails naming its rule (or is
reported with fail_on_error false), bad input and an unreadable file are refused before anything is judged."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_design
from tests.lib.module_contract import missing_keys
from tests.lib.module_main import run_main

EXAMPLE = pathlib.Path(__file__).resolve().parents[4] / "examples" / "design.yml"
WRONG_CLUSTER = dict(rule="unknown_reference", severity="error", object="pools.inference",
                     message="cluster gpu-a100 is not in clusters", fix="use one of gpu-h100, gpu-l40s")


@pytest.fixture(scope="module")
def design():
    return yaml.safe_load(EXAMPLE.read_text())


def run(check_mode=False, **params):
    return run_main(gpu_pool_design, params, check_mode=check_mode)


def wrong_cluster(design):
    bad = copy.deepcopy(design)
    bad["pools"][0]["cluster"] = "gpu-a100"
    return bad


def test_the_example_design_is_derived_the_same_from_the_file_the_dict_and_in_check_mode(design):
    real = run(design_file=str(EXAMPLE))
    assert real["changed"] is False and "failed" not in real and real["errors"] == []
    assert missing_keys(real, gpu_pool_design, "always") == []
    assert run(check_mode=True, design_file=str(EXAMPLE)) == real
    assert run(design=design) == real
    derived = real["derived"]
    assert derived and real["design"]["name"] == "lab-gpupool"
    assert [f["severity"] for f in real["findings"]].count("error") == 0


def test_a_design_with_an_error_fails_naming_the_rule(design):
    res = run(design=wrong_cluster(design))
    assert res["failed"] is True and res["changed"] is False
    assert res["msg"] == ("The pool design has 1 error(s): unknown_reference: pools.inference: cluster gpu-a100 is not "
                          "in clusters (fix: use one of gpu-h100, gpu-l40s)")
    assert res["errors"] == [WRONG_CLUSTER] and WRONG_CLUSTER in res["findings"] and res["derived"] is None
    assert missing_keys(res, gpu_pool_design, "always") == []


def test_fail_on_error_false_reports_the_error_without_failing(design):
    check = run(check_mode=True, design=wrong_cluster(design), fail_on_error=False)
    res = run(design=wrong_cluster(design), fail_on_error=False)
    assert res == check and "failed" not in res and res["changed"] is False
    assert res["errors"] == [WRONG_CLUSTER] and res["derived"] is None and res["design"]["pools"][0]["cluster"] == "gpu-a100"


def test_bad_input_is_refused_before_anything_is_judged(design, tmp_path):
    res = run(design=design, design_file=str(EXAMPLE))
    assert res["failed"] is True and res["msg"] == "parameters are mutually exclusive: design|design_file"
    res = run()
    assert res["failed"] is True and res["msg"] == "one of the following is required: design, design_file"
    res = run(design_file="")
    assert res["failed"] is True and res["invalid_input"] == ["design_file must not be empty"]
    missing = tmp_path / "nope.yml"
    res = run(design_file=str(missing))
    assert res["failed"] is True and res["msg"].startswith("Unable to read design file %s: " % missing)
    assert "findings" not in res and "derived" not in res
    aliased = tmp_path / "aliased.yml"
    aliased.write_text("version: 1\nname: &n lab\nvcenter: {hostname: *n}\n")
    res = run(design_file=str(aliased))
    assert res["failed"] is True and "a YAML alias at" in res["msg"] and "the design takes no aliases" in res["msg"]
