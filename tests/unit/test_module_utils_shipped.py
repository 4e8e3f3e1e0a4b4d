"""The walk of tests/bench/bench_module_utils_shipped.py over a tiny fake collection: it follows
module_utils imports transitively (absolute, relative, ``from package import module``, a name of a
module, imports inside functions), ships the package __init__.py files, ignores other imports and
names that are no file, and counts lines."""
import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_module_utils_shipped.py"
MU = "ansible_collections.gpupool.vcf.plugins.module_utils"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_module_utils_shipped", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path):
    utils = "plugins/module_utils/"
    write(tmp_path, utils + "__init__.py", "")
    write(tmp_path, utils + "pure/__init__.py", "")
    write(tmp_path, utils + "runner/__init__.py", "# the runner room\n")
    write(tmp_path, utils + "k8s/__init__.py", "")
    # a.py -> b.py (relative) -> c.py (function body, name of a module); d.py imported by nobody
    write(tmp_path, utils + "pure/_a.py", "from ._b import helper\nimport json\n")
    write(tmp_path, utils + "pure/_b.py", "def helper():\n    from %s.pure._c import deep\n    return deep\n" % MU)
    write(tmp_path, utils + "pure/_c.py", "deep = 1\nfrom ansible.module_utils.basic import AnsibleModule\n")
    write(tmp_path, utils + "pure/_d.py", "x = 1\n" * 50)
    write(tmp_path, utils + "runner/_run.py", "from ..pure import _a\nfrom %s.pure import missing_name\n" % MU)
    write(tmp_path, utils + "k8s/_client.py", "from %s.pure._a import helper\n" % MU)
    write(tmp_path, "plugins/modules/__init__.py", "")
    write(tmp_path, "plugins/modules/small.py", "from %s.pure._c import deep\n" % MU)
    write(tmp_path, "plugins/modules/big.py",
          "import %s.k8s._client\nfrom %s.runner import _run\n\n\ndef main():\n    pass\n" % (MU, MU))
    write(tmp_path, "plugins/modules/plain.py", "from ansible.module_utils.basic import AnsibleModule\n")
    return tmp_path


def names(bench, root, module):
    utils = root / "plugins" / "module_utils"
    return sorted(str(f.relative_to(utils)) for f in bench.shipped(root / "plugins" / "modules" / module, utils))


def test_the_walk_is_transitive(bench, tree):
    assert names(bench, tree, "small.py") == ["__init__.py", "pure/__init__.py", "pure/_c.py"]
    assert names(bench, tree, "big.py") == [
        "__init__.py", "k8s/__init__.py", "k8s/_client.py", "pure/__init__.py", "pure/_a.py", "pure/_b.py",
        "pure/_c.py", "runner/__init__.py", "runner/_run.py"]
    assert names(bench, tree, "plain.py") == []


def test_figures_count_files_and_lines_most_first(bench, tree):
    rows = bench.figures(tree)
    assert [tuple(row[:4]) for row in rows] == [
        ("big", 9, 1 + 1 + 2 + 2 + 3 + 2, 6),  # k8s/_client 1, runner 1 + 2, pure/_a 2, _b 3, _c 2
        ("small", 3, 2, 1),
        ("plain", 0, 0, 1),
    ]


def test_the_figure_of_this_collection_runs(bench):
    rows = bench.figures(bench.ROOT)
    assert rows and all(row[1] > 0 for row in rows)
    by_name = dict((row[0], row) for row in rows)
    runner = bench.ROOT / "plugins" / "module_utils" / "runner" / "_runner.py"
    assert runner in by_name["vm_class"][4]
