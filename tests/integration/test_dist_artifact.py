"""The built collection, as users get it: `ansible-galaxy collection build`, then
`ansible-galaxy collection install` of the tarball into an empty collections path, and every
plugin, role and playbook used from that installed copy only (the checkout on no path).

The tarball must hold no build output (venvs, simulator builds, caches), no compiled binary
and nothing over SIZE_BOUND: the collection is Python, YAML and docs, about 1 MiB compressed
today; the bound leaves room to grow and catches a stray build output (a Go simulator binary
alone is over 30 MiB).
"""
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV_BIN = pathlib.Path(sys.executable).parent
SIZE_BOUND = 4 * 1024 * 1024
# paths of the checkout that are build outputs or local state, never part of the artifact
NOT_SHIPPED = (".venv/", ".sim/", ".build/", ".ci/", ".git/", ".pytest_cache/", ".ansible/", ".hypothesis/",
               "tests/output/", "tests/sim/vsphere/vsphere/")
BINARY_MAGIC = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xfe\xed\xfa\xcf")


def _run(args, cwd, env, timeout=300):
    proc = subprocess.run(args, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    command = " ".join(map(str, args))
    assert proc.returncode == 0, "%s failed (rc %d):\n%s\n%s" % (command, proc.returncode, proc.stdout[-3000:],
                                                                 proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, installed collection root, env that finds only the installed copy and the
    collections the ansible package ships, such as kubernetes.core)."""
    work = tmp_path_factory.mktemp("dist")
    env = dict(os.environ)
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    env.pop("ANSIBLE_COLLECTIONS_PATHS", None)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env["ANSIBLE_HOME"] = str(work / "home")
    build = _run([VENV_BIN / "ansible-galaxy", "collection", "build", "--force", "--output-path", work / "out", ROOT],
                 work, env)
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    tarball = work / "out" / ("gpupool-vcf-%s.tar.gz" % version)
    assert tarball.is_file(), build.stdout
    collections = work / "collections"
    _run([VENV_BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", collections, tarball], work, env)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return tarball, collections / "ansible_collections" / "gpupool" / "vcf", env, work


def test_tarball_holds_the_collection_and_no_build_output(installed):
    tarball = installed[0]
    size = tarball.stat().st_size
    assert size < SIZE_BOUND, "the tarball is %d bytes, over the bound of %d" % (size, SIZE_BOUND)
    with tarfile.open(str(tarball)) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        stray = sorted(n for n in names if any((n + "/").startswith(p) for p in NOT_SHIPPED)
                       or "__pycache__" in n.split("/") or n.endswith((".pyc", ".tar.gz")))
        assert stray == [], "build outputs in the artifact: %s" % stray[:20]
        binaries = []
        for m in members:
            if m.isfile():
                head = tar.extractfile(m).read(4)
                if head.startswith(BINARY_MAGIC):
                    binaries.append(m.name)
        assert binaries == [], "compiled binaries in the artifact: %s" % binaries
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["namespace"] == "gpupool"
    assert manifest["collection_info"]["name"] == "vcf"
    for needed in ("plugins/modules/gpu_pool_audit.py", "playbooks/site.yml", "roles/esxi_gpu_host/tasks/main.yml",
                   "meta/runtime.yml", "meta/execution-environment.yml", "requirements.txt", "README.md"):
        assert needed in names, "%s is missing from the artifact" % needed


def test_every_plugin_and_role_documents_from_the_installed_copy(installed):
    root, env, work = installed[1:]
    modules = sorted("gpupool.vcf." + p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    proc = _run([VENV_BIN / "ansible-doc", "--json", "-t", "module"] + modules, work, env)
    docs = json.loads(proc.stdout)
    assert sorted(docs) == modules
    for name, doc in docs.items():
        assert doc["doc"].get("short_description"), name
        assert doc["doc"]["filename"].startswith(str(root)), "%s documented from %s, not the installed copy" % (
            name, doc["doc"]["filename"])
        assert doc.get("examples"), "%s has no EXAMPLES" % name
    listed = json.loads(_run([VENV_BIN / "ansible-doc", "--json", "-t", "filter", "-l", "gpupool.vcf"], work, env).stdout)
    assert listed, "no filter of the collection is listed"
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())
    assert roles == sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    proc = _run([VENV_BIN / "ansible-doc", "--json", "-t", "role"] + ["gpupool.vcf." + r for r in roles], work, env)
    assert sorted(json.loads(proc.stdout)) == ["gpupool.vcf." + r for r in roles]


def test_every_playbook_resolves_by_its_fqcn(installed):
    root, env, work = installed[1:]
    playbooks = sorted(p.stem for p in (ROOT / "playbooks").glob("*.yml"))
    assert "site" in playbooks and "audit" in playbooks
    inventory = work / "inventory.ini"
    inventory.write_text("localhost ansible_connection=local\n")
    for name in playbooks:
        _run([VENV_BIN / "ansible-playbook", "-i", inventory, "--syntax-check", "gpupool.vcf." + name], work, env)
