"""Every module is run through its main() by a unit-test file of its own under tests/unit/plugins/modules
(tests/lib/module_main.run_main), as a user's task would run it: the argument spec, its defaults and the
module's own checks are exercised, not only its resource class. The file is test_<module>.py, or
test_<module>_<what>.py where an integration test already has the plain name (test file names are unique)."""
import ast

import pytest

from tests.lib.paths import ROOT

MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
TESTS = ROOT / "tests" / "unit" / "plugins" / "modules"


def main_runs(path):
    """The first argument of each run_main call in ``path`` (a module object's name)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "run_main":
            if node.args and isinstance(node.args[0], ast.Name):
                out.add(node.args[0].id)
    return out


@pytest.mark.parametrize("module", MODULES)
def test_module_runs_through_main_in_its_own_test_file(module):
    files = sorted(TESTS.glob("test_%s.py" % module)) + sorted(TESTS.glob("test_%s_*.py" % module))
    assert files, "%s has no unit-test file tests/unit/plugins/modules/test_%s.py" % (module, module)
    assert any(module in main_runs(f) or main_runs(f) & {"module", "mod"} for f in files), (
        "no test file of %s (%s) runs it through main() (tests/lib/module_main.run_main)"
        % (module, ", ".join(f.name for f in files)))
