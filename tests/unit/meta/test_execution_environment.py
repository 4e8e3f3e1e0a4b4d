"""The execution environment metadata points at real files (ansible-builder itself runs on the example in
tests/integration/test_execution_environment_build.py)."""
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_collection_ee_metadata_points_at_real_files():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["version"] == 1
    for key in ("python", "system"):
        assert (ROOT / meta["dependencies"][key]).is_file()
