"""Import paths for every test: the collection as ``ansible_collections.gpupool.vcf`` (through
the ``.build/collections`` symlink tree the Makefile also uses), the repository root (for
``tests.lib``), ``tests/sim`` (the simulator launchers) and ``tests/sim/dls`` (the DLS double).

Parallel runs (pytest-xdist, ``-n N --dist loadfile --no-loadscope-reorder``, as the Makefile
runs them): a test file is one unit of work, so its module-scoped simulators start once, on one
worker; every worker starts its own simulators (free ports, folders of their own). The files that
take longest are handed out first, so the workers finish together.

Markers (registered in pytest.ini, where ``--strict-markers`` makes any other an error): every test
gets those of the rows of ``MARKER_TABLE`` whose pattern matches its file, so ``pytest -m esxi``
runs the ESXi link's tests and ``pytest -m "not sim and not k8s"`` the ones that need neither the
vSphere simulator nor the Kubernetes rig. tests/unit/test_markers.py holds the table to every
test file.
"""
import os
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.join(_REPO, ".build", "collections")
_LINK = os.path.join(_ROOT, "ansible_collections", "gpupool", "vcf")
if not os.path.lexists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    try:
        os.symlink(_REPO, _LINK)
    except FileExistsError:  # another test process made it first
        pass
for _path in (_ROOT, _REPO, os.path.join(_REPO, "tests", "sim"), os.path.join(_REPO, "tests", "sim", "dls")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# the files that take longest (30 s to 3 min each on two cores), longest first; the others
# follow in collection order
SLOW_FIRST = (
    "tests/integration/test_awx_runner_chain.py",
    "tests/integration/test_drift_catalogue.py",
    "tests/integration/test_site_class_revision.py",
    "tests/integration/test_fault_suite.py",
    "tests/integration/k8s/test_gpu_policy_roles.py",
    "tests/integration/k8s/test_gpu_usage_chargeback.py",
    "tests/integration/test_gpu_usage_vgpu_vms.py",
    "tests/integration/k8s/test_kueue_gang_admission.py",
    "tests/integration/k8s/test_roll_drains_guest_nodes.py",
    "tests/integration/k8s/test_mig_mode_drained_roll.py",
    "tests/integration/test_host_rebuild.py",
    "tests/integration/k8s/test_faults_k8s.py",
    "tests/integration/k8s/test_ownership_k8s.py",
    "tests/integration/test_no_secret_leak.py",
    "tests/integration/test_faults_dls.py",
    "tests/integration/test_site_chain.py",
    "tests/integration/test_multi_vcenter_chain.py",
    "tests/integration/test_esxi_gpu_host_role.py",
    "tests/integration/test_gpu_pool_audit.py",
    "tests/integration/test_roll_with_vgpu_vms.py",
    "tests/integration/test_nls_appliance_sim.py",
    "tests/integration/k8s/test_fidelity.py",
    "tests/integration/k8s/test_game_day_kueue.py",
    "tests/integration/k8s/test_gpu_operator_guest_driver.py",
    "tests/integration/k8s/test_pool_ready_replace.py",
    "tests/integration/k8s/test_node_pool_class_shapes.py",
    "tests/integration/k8s/test_profile_change_rollout.py",
    "tests/integration/k8s/test_gpu_capacity_knee.py",
)


from tests.lib.markers import markers_of  # noqa: E402  pylint: disable=wrong-import-position

_MARKS_OF_FILE = {}


def pytest_itemcollected(item):
    """Every test gets the markers of its file (getattr on pytest.mark: --strict-markers holds them to pytest.ini)."""
    path = str(item.path)
    if path not in _MARKS_OF_FILE:
        rel = os.path.relpath(path, os.path.join(_REPO, "tests")).replace(os.sep, "/")
        _MARKS_OF_FILE[path] = markers_of(rel)
    for name in _MARKS_OF_FILE[path]:
        item.add_marker(getattr(pytest.mark, name))


def pytest_collection_modifyitems(items):
    """In an xdist worker: the slow files first (every worker sorts its collection alike)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = dict((path, i) for i, path in enumerate(SLOW_FIRST))
    items.sort(key=lambda item: rank.get(os.path.relpath(str(item.path), _REPO).replace(os.sep, "/"), len(rank)))


# seconds per test file (setup, call and teardown of its tests, module fixtures included), summed
# where the reports arrive (the xdist controller, or the one process); the slowest are printed at
# the end of the run, so every `make test` says where its time went
_FILE_SECONDS = {}
SLOWEST_FILES_SHOWN = 25


def pytest_runtest_logreport(report):
    """Add the report's duration to its file's total."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + (report.duration or 0.0)


def pytest_terminal_summary(terminalreporter):
    """The slowest test files with their seconds, and what all the files took together."""
    if not _FILE_SECONDS or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slowest = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES_SHOWN]
    terminalreporter.write_sep("-", "slowest %d test files (seconds, all their tests)" % len(slowest))
    for path, seconds in slowest:
        terminalreporter.write_line("%8.1f  %s" % (seconds, path))
    terminalreporter.write_line("%8.1f  in all, %d files" % (sum(_FILE_SECONDS.values()), len(_FILE_SECONDS)))
