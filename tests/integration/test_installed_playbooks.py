"""site.yml and audit.yml as users run them: by FQCN from the collection installed out of the built
tarball (`ansible-galaxy collection install`), with the checkout on no path: not on the collections
path, not the working folder, not on PYTHONPATH. One start of the chain's simulators (vSphere, the
Kubernetes rig as Supervisor and guest, the DLS double) serves both playbooks.

`ansible-playbook gpupool.vcf.site --check` must succeed and predict changes; `ansible-playbook
gpupool.vcf.audit` must succeed, write its report beside the installed copy (its default: the
playbook folder's parent) and give, word for word, the report the checkout's audit.yml gives on
the same platform.
"""
import json
import pathlib
import subprocess

import pytest

from tests.integration.test_dist_artifact import VENV_BIN, build_and_install
from tests.lib import chain
from tests.lib.ansible_run import COLLECTIONS, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def platform(vsphere, tmp_path_factory):
    """(installed collection root, env of the installed copy, playbook variables, folder outside the
    checkout to run from)."""
    work = tmp_path_factory.mktemp("installed")
    _tarball, root, env = build_and_install(work)
    (work / "chain").mkdir()
    with chain.platform(vsphere.env, work / "chain") as (rig, _dls, chain_env, extra):
        env = dict(env, **chain_env)
        extra = dict(extra, audit_kubeconfig=str(rig.kubeconfig), audit_supervisor_kubeconfig=str(rig.kubeconfig))
        yield root, env, extra, work


def _collection_paths(env, cwd):
    """{collection path: version} where ansible-galaxy finds gpupool.vcf in ``env``."""
    proc = subprocess.run([str(VENV_BIN / "ansible-galaxy"), "collection", "list", "gpupool.vcf", "--format", "json"],
                          env=env, cwd=str(cwd), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return {path: found["gpupool.vcf"]["version"] for path, found in json.loads(proc.stdout).items()
            if "gpupool.vcf" in found}


def _task_paths(run):
    """The files of the tasks a playbook run ran (the JSON callback's task path, without the line)."""
    paths = set()
    for play in run.data["plays"]:
        for task in play["tasks"]:
            if task["task"].get("path"):
                paths.add(task["task"]["path"].rsplit(":", 1)[0])
    return paths


def _outside(paths, root):
    return sorted(p for p in paths if not pathlib.Path(p).resolve().is_relative_to(pathlib.Path(root).resolve()))


def test_site_check_and_audit_run_from_the_installed_copy(platform, tmp_path):
    root, env, extra, work = platform
    assert not str(work.resolve()).startswith(str(ROOT) + "/")
    assert list(_collection_paths(env, work)) == [str(root.parents[1])], "gpupool.vcf is found elsewhere too"

    site = run_playbook("gpupool.vcf.site", env=env, check=True, extra_vars=extra, cwd=work)
    assert site.rc == 0 and site.data is not None, site.stdout[-4000:] + site.stderr[-3000:]
    assert site.stats.get("failed", 0) == 0 and site.stats.get("changed", 0) > 0, site.stats
    names = [name for name, _result in site.tasks]
    for task in ("Node pools of each VKS cluster of the design", "Client configuration token from the DLS appliance",
                 "PriorityClasses, tenant quotas and Kueue queues of the design"):
        assert task in names
    ran_from = _task_paths(site)
    assert ran_from and _outside(ran_from, root) == [], "site.yml ran tasks from %s" % _outside(ran_from, root)

    audit = run_playbook("gpupool.vcf.audit", env=env, extra_vars=extra, cwd=work)
    assert audit.rc == 0 and audit.data is not None, audit.stdout[-4000:] + audit.stderr[-3000:]
    assert _task_paths(audit) and _outside(_task_paths(audit), root) == []
    result = audit.result("Audit every link against the design")
    assert result["audited"] == ["esxi", "vsphere", "licensing", "vks", "guest"], result["audited"]
    installed_report = root / "gpu-pool-audit.md"
    assert result["report"] == str(installed_report) and installed_report.is_file()

    checkout_report = tmp_path / "gpu-pool-audit.md"
    checkout = run_playbook(ROOT / "playbooks" / "audit.yml", env=dict(env, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS)),
                            extra_vars=dict(extra, audit_report=str(checkout_report)))
    assert checkout.rc == 0, checkout.stdout[-4000:] + checkout.stderr[-3000:]
    assert _task_paths(checkout) and _outside(_task_paths(checkout), ROOT) == []
    assert installed_report.read_text() == checkout_report.read_text()
    assert "| esxi |" in installed_report.read_text()
