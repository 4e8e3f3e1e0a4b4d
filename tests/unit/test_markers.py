"""The markers of tests/lib/markers.py's MARKER_TABLE (applied by tests/conftest.py): every test file gets a link or area marker, every
marker is registered in pytest.ini, every row names files that exist, a file gets ``sim`` / ``k8s``
exactly when its code starts the vSphere simulator / the Kubernetes rig, and ``-m`` selects by them."""
import ast
import configparser
import fnmatch
import pathlib
import subprocess
import sys

from tests.lib import markers as conftest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
NEEDS = {"sim", "k8s"}
TEST_FILES = sorted(p.relative_to(TESTS).as_posix() for folder in ("unit", "integration") for p in (TESTS / folder).rglob("test_*.py"))
SIM_ARGS = {"vsphere", "vsphere_env"}
K8S_ARGS = {"k8s_rig", "k8s_api", "k8s_namespace", "k8s_metrics_rig", "k8s_rig_instance"}


def registered():
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    return {line.split(":")[0].strip() for line in ini["pytest"]["markers"].splitlines() if line.strip()}


def needs(relpath):
    """What the file's code starts: the vSphere simulator, the Kubernetes rig (from its fixtures and calls)."""
    src = (TESTS / relpath).read_text()
    args = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args.update(a.arg for a in node.args.args)
    out = set()
    if args & SIM_ARGS or "vsphere_sim" in src or "vsphere_with_ssh" in src or "chain.platform(" in src:
        out.add("sim")
    if args & K8S_ARGS or "k8s_fixtures" in src or "chain.platform(" in src:
        out.add("k8s")
    return out


def test_every_test_file_has_a_link_or_area_marker():
    assert [f for f in TEST_FILES if not set(conftest.markers_of(f)) - NEEDS] == []


def test_every_marker_of_the_table_is_registered():
    used = {name for row in conftest.MARKER_TABLE for name in row[1]}
    assert used - registered() == set()
    assert {"esxi", "vsphere", "vks", "guest", "licensing", "sim", "k8s"} <= used


def test_every_row_matches_a_test_file():
    assert [row[0] for row in conftest.MARKER_TABLE if not fnmatch.filter(TEST_FILES, row[0])] == []


def test_sim_and_k8s_exactly_where_the_code_starts_them():
    wrong = dict((f, (sorted(set(conftest.markers_of(f)) & NEEDS), sorted(needs(f)))) for f in TEST_FILES
                 if f.startswith("integration/") and set(conftest.markers_of(f)) & NEEDS != needs(f))
    assert wrong == {}
    assert [f for f in TEST_FILES if f.startswith("unit/") and set(conftest.markers_of(f)) & NEEDS] == []


def test_minus_m_selects_by_the_table_and_an_unknown_marker_is_an_error():
    files = ["tests/unit/plugins/module_utils/pure/test_esxi.py", "tests/unit/plugins/module_utils/pure/test_drs.py"]
    run = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "esxi"] + files,
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    picked = {line.split("::")[0] for line in run.stdout.splitlines() if "::" in line}
    assert picked == {files[0]}
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    assert "--strict-markers" in ini["pytest"]["addopts"].split()
