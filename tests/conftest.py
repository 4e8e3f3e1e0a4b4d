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
import fnmatch
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


# (pattern over the test file's path below tests/, markers): a file gets the markers of every row
# that matches it. The links: esxi, vsphere, vks, guest, licensing; design (the design and what it
# derives for every link), collection (layout, metadata, playbook wiring, runner, AWX, tooling);
# what a test needs: sim (the vSphere simulator), k8s (the Kubernetes rig).
MARKER_TABLE = (
    # where the test lives
    ("integration/k8s/*", ("guest",)),
    ("unit/meta/*", ("collection",)),
    ("unit/playbooks/*", ("collection",)),
    ("unit/test_*.py", ("collection",)),
    ("unit/test_rest_contract_checker.py", ("collection", "vsphere")),
    ("integration/test_awx_*", ("collection",)),
    ("unit/plugins/module_utils/runner/*", ("collection",)),
    ("unit/plugins/doc_fragments/*", ("collection",)),
    ("unit/plugins/module_utils/dls/*", ("licensing",)),
    ("unit/plugins/module_utils/k8s/*", ("guest",)),
    ("unit/plugins/module_utils/prometheus/*", ("guest",)),
    ("unit/plugins/module_utils/vsphere/*", ("vsphere",)),
    # the ESXi link: host driver, vLCM, graphics, vGPU mode and scheduler, MIG, host rolls
    ("*esxi*", ("esxi",)),
    ("*gpu_host_info*", ("esxi",)),
    ("*vlcm*", ("esxi",)),
    ("*host_rebuild*", ("esxi",)),
    ("*mig_*", ("esxi",)),
    ("*vgpu_mode*", ("esxi",)),
    ("*vgpu_releases*", ("esxi",)),
    ("*direct_path*", ("esxi",)),
    ("*gpu_inventory*", ("esxi",)),
    ("*/test_nvidia.py", ("esxi",)),
    ("*/test_resume.py", ("esxi",)),
    ("*roll_*", ("esxi",)),
    ("*/test_capacity.py", ("esxi", "design")),
    ("*/test_runner_pinning_pools_gpu.py", ("esxi", "vsphere", "vks")),
    # the vCenter link: VM classes, namespaces, tenancy, DRS pinning, the vSphere clients and simulator
    ("*vm_class*", ("vsphere",)),
    ("*namespace*", ("vsphere",)),
    ("*supervisor*", ("vsphere",)),
    ("*drs*", ("vsphere",)),
    ("*vsphere*", ("vsphere",)),
    ("*rest_contract*", ("vsphere",)),
    ("*vgpu_vms*", ("vsphere",)),
    ("integration/test_never_twice.py", ("vsphere",)),
    ("*run_lease*", ("vsphere",)),
    ("*/test_lease.py", ("vsphere",)),
    ("*/test_gpu_pool_lease.py", ("vsphere",)),
    ("*/test_retry.py", ("vsphere", "guest", "licensing")),
    ("*/test_gpu_capacity.py", ("vsphere",)),
    ("*/test_fault_suite.py", ("esxi", "vsphere")),
    # the VKS link: node pools and ClusterClass shapes on the Supervisor
    ("*vks*", ("vks",)),
    ("*node_pool*", ("vks",)),
    ("*cluster_class*", ("vks",)),
    ("*class_revision*", ("vks", "vsphere")),
    ("*/test_rollout_logic.py", ("vks",)),
    # the guest cluster: GPU Operator, scheduling policy, Kueue, culling, drains, readiness, usage
    ("*gpu_operator*", ("guest",)),
    ("*guest*", ("guest",)),
    ("*cluster_policy*", ("guest",)),
    ("*k8s*", ("guest",)),
    ("*drain*", ("guest",)),
    ("*pool_ready*", ("guest",)),
    ("*kueue*", ("guest",)),
    ("*game_day*", ("guest",)),
    ("*queueing*", ("guest",)),
    ("*capacity_knee*", ("guest",)),
    ("*capacity_live*", ("guest", "vsphere")),
    ("*chargeback*", ("guest",)),
    ("*gpu_usage*", ("guest", "vsphere")),
    ("*cull*", ("guest",)),
    ("*prom*", ("guest",)),
    ("*dcgm*", ("guest",)),
    ("*report_charts*", ("guest", "vsphere")),
    # NVIDIA licensing: the DLS appliance, the client token, the license status
    ("*dls*", ("licensing",)),
    ("*nls*", ("licensing",)),
    ("*licens*", ("licensing",)),
    # the design and what it derives for every link; the audit and the chains that cross every link
    ("*design*", ("design",)),
    ("*role_inputs*", ("design",)),
    ("*discover*", ("design",)),
    ("*preflight*", ("design",)),
    ("unit/plugins/module_utils/pure/test_inputs.py", ("design",)),
    ("unit/plugins/filter/test_failure_filter.py", ("collection",)),
    ("unit/plugins/filter/test_option_bool_filter.py", ("collection",)),
    ("unit/plugins/modules/test_runner_modules.py", ("collection", "esxi", "vsphere", "vks", "guest", "licensing")),
    ("*audit*", ("design",)),
    ("unit/plugins/module_utils/pure/test_audit.py", ("esxi", "vsphere", "vks", "guest")),
    ("*/test_bad_inputs.py", ("design", "esxi", "vsphere", "vks", "guest", "licensing")),
    ("*_chain.py", ("esxi", "vsphere", "vks", "guest", "licensing")),
    ("*/test_drift_catalogue.py", ("esxi", "vsphere", "vks", "guest", "licensing")),
    ("*/test_no_secret_leak.py", ("esxi", "vsphere", "vks", "guest", "licensing")),
    ("*/test_site_cluster_failure.py", ("esxi", "vsphere", "vks", "guest")),
    ("*/test_gpu_pool_audit.py", ("esxi", "vsphere", "vks", "guest", "licensing")),
    ("*/test_gpu_pool_audit_per_gpu.py", ("esxi",)),
    ("*/test_gpu_pool_audit_class_reads.py", ("vks", "vsphere")),
    ("*/test_gpu_pool_audit_vcenters.py", ("vsphere",)),
    ("*/test_fidelity.py", ("collection",)),
    # what the test needs: the vSphere simulator (sim), the Kubernetes rig (k8s)
    ("integration/test_awx_runner_chain.py", ("sim",)),
    ("integration/test_bad_inputs.py", ("sim",)),
    ("integration/test_drift_catalogue.py", ("sim",)),
    ("integration/test_drs_*", ("sim",)),
    ("integration/test_esxi_*", ("sim",)),
    ("integration/test_fault_suite.py", ("sim",)),
    ("integration/*gpu_pool_discover*", ("sim",)),
    ("integration/test_preflight*", ("sim",)),
    ("integration/test_gpu_capacity.py", ("sim",)),
    ("integration/test_gpu_host_info*", ("sim",)),
    ("integration/test_gpu_pool_audit.py", ("sim",)),
    ("integration/test_gpu_pool_audit_per_gpu.py", ("sim",)),
    ("integration/test_gpu_usage_vgpu_vms.py", ("sim",)),
    ("integration/test_host_rebuild.py", ("sim",)),
    ("integration/test_multi_vcenter_chain.py", ("sim",)),
    ("integration/test_never_twice.py", ("sim",)),
    ("integration/test_nls_appliance_sim.py", ("sim",)),
    ("integration/test_no_secret_leak.py", ("sim",)),
    ("integration/test_rest_contract.py", ("sim",)),
    ("integration/test_roll_with_vgpu_vms.py", ("sim",)),
    ("integration/test_run_lease.py", ("sim",)),
    ("integration/test_site_chain.py", ("sim",)),
    ("integration/test_site_class_revision.py", ("sim",)),
    ("integration/test_site_cluster_failure.py", ("sim",)),
    ("integration/test_supervisor_*", ("sim",)),
    ("integration/test_vlcm_component.py", ("sim",)),
    ("integration/test_vm_class*", ("sim",)),
    ("integration/test_vsphere_*", ("sim",)),
    ("integration/k8s/test_gpu_capacity_*", ("sim",)),
    ("integration/k8s/test_mig_mode_drained_roll.py", ("sim",)),
    ("integration/k8s/test_preflight_k8s.py", ("sim",)),
    ("integration/k8s/test_profile_change_rollout.py", ("sim",)),
    ("integration/k8s/test_roll_drains_guest_nodes.py", ("sim",)),
    ("integration/test_awx_runner_chain.py", ("k8s",)),
    ("integration/test_drift_catalogue.py", ("k8s",)),
    ("integration/test_gpu_pool_audit.py", ("k8s",)),
    ("integration/test_no_secret_leak.py", ("k8s",)),
    ("integration/test_site_chain.py", ("k8s",)),
    ("integration/test_site_class_revision.py", ("k8s",)),
    ("integration/k8s/test_[!d]*", ("k8s",)),
    ("integration/k8s/test_drain_*", ("k8s",)),
)

_MARKS_OF_FILE = {}


def markers_of(relpath):
    """The markers MARKER_TABLE gives the test file at ``relpath`` (below tests/, with /), sorted."""
    out = set()
    for pattern, names in MARKER_TABLE:
        if fnmatch.fnmatchcase(relpath, pattern):
            out.update(names)
    return sorted(out)


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
