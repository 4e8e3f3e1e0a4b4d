"""_design_input: the design of a module's design / design_file option, read one way."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _design_input


def test_design_wins_over_nothing_and_a_file_is_parsed(tmp_path):
    assert _design_input.given_design({"design": {"name": "lab"}, "design_file": None}) == {"name": "lab"}
    assert _design_input.given_design({"design": None, "design_file": None}) is None
    path = tmp_path / "d.yml"
    path.write_text("name: lab\npools: []\n")
    assert _design_input.given_design({"design": None, "design_file": str(path)}) == {"name": "lab", "pools": []}


def test_unreadable_and_unparsable_files_are_named(tmp_path):
    with pytest.raises(Failure, match=r"Unable to read design file .*/missing.yml"):
        _design_input.load_design_file(str(tmp_path / "missing.yml"))
    bad = tmp_path / "bad.yml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(Failure, match=r"Unable to parse design file .*/bad.yml"):
        _design_input.load_design_file(str(bad))


def test_schema_errors_are_refused_each_named():
    with pytest.raises(Failure) as err:
        _design_input.normalized_design({"design": {"name": "lab", "pools": "none"}})
    assert err.value.msg.startswith("The design has errors; fix them first (gpu_pool_design): ")
    assert "pools" in err.value.msg and err.value.result["findings"]
    assert _design_input.normalized_design({"design": None, "design_file": None}) is None


class FakeModule:
    def __init__(self, params):
        self.params = params
        self.failed = None

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise SystemExit(1)


def test_module_design_ends_the_module_with_the_message():
    module = FakeModule({"design": {"name": "lab", "pools": "none"}, "design_file": None})
    with pytest.raises(SystemExit):
        _design_input.module_design(module)
    assert module.failed["msg"].startswith("The design has errors") and module.failed["findings"]
    raw = FakeModule({"design": {"name": "lab", "pools": "none"}, "design_file": None})
    assert _design_input.module_design(raw, normalized=False) == {"name": "lab", "pools": "none"}
