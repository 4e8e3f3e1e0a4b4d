"""The execution environment of examples/execution-environment.yml, checked without a container engine.

`ansible-builder create` writes the build context from the example (the built tarball beside it, as
the example expects). The context's galaxy stage is replayed here (its requirements.yml installed from
its own folder, as the Containerfile's WORKDIR /build does; collections that come from Galaxy are
taken from the ansible package's copy) and its introspection script (the one the build runs) reads
what the installed collections declare through their meta/execution-environment.yml. The Python
requirements gpupool.vcf declares must be exactly the third-party distributions its plugins import
(modules, module_utils, filters: no missing, no extra); those the builder drops as already in the
image must come with ansible-core. The example must stay in step with galaxy.yml (version,
dependencies) and the supported ansible-core range.
"""
import ast
import importlib.metadata
import os
import pathlib
import re
import shutil
import sys

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.integration.test_dist_artifact import VENV_BIN, _run, build_and_install

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "execution-environment.yml"
# where the ansible package keeps the collections it ships (kubernetes.core)
SHIPPED = pathlib.Path(importlib.metadata.distribution("ansible").locate_file("ansible_collections"))


def third_party_imports():
    """{top-level import name: [files]} of every plugin's imports outside the standard library,
    ansible-core and the collections."""
    found = {}
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("ansible", "ansible_collections", "__future__"):
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def distributions_of(imports):
    """{canonical distribution name: import names}, through the installed distributions' top-level
    packages (pyVmomi and pyVim -> pyvmomi, yaml -> pyyaml)."""
    owners = importlib.metadata.packages_distributions()
    out = {}
    for name in imports:
        dists = owners.get(name)
        assert dists, "no installed distribution provides the import %r (%s)" % (name, imports[name][:3])
        for dist in dists:
            out.setdefault(canonicalize_name(dist), []).append(name)
    return out


def _requirement(line):
    return Requirement(re.sub(r"\s+#.*$", "", line).strip())


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """(build context folder, tarball, installed collections folder of the replayed galaxy stage)."""
    work = tmp_path_factory.mktemp("ee")
    tarball, _root, env = build_and_install(work)
    # the example as a maintainer keeps it: in a folder of its own, the tarball in the folder above
    (work / "examples").mkdir()
    definition = work / "examples" / EXAMPLE.name
    shutil.copy(EXAMPLE, definition)
    shutil.copy(tarball, work)
    _run([VENV_BIN / "ansible-builder", "create", "-f", definition, "-c", work / "context",
          "--output-filename", "Containerfile"], work, env)
    build = work / "context" / "_build"
    requirements = yaml.safe_load((build / "requirements.yml").read_text())["collections"]
    from_files = [c for c in requirements if c.get("type") == "file"]
    assert from_files, "the example installs no collection from a file: %s" % requirements
    (build / "from-files.yml").write_text(yaml.safe_dump({"collections": from_files}))
    collections = work / "usr-share-ansible-collections"
    _run([VENV_BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-r", "from-files.yml",
          "--collections-path", collections], build, dict(env, ANSIBLE_COLLECTIONS_PATH=str(collections)))
    for entry in requirements:
        if entry.get("type") == "file":
            continue
        namespace, name = entry["name"].split(".")
        shipped = SHIPPED / namespace / name
        version = yaml.safe_load((shipped / "MANIFEST.json").read_text())["collection_info"]["version"]
        wanted = entry.get("version", "*")
        assert wanted == "*" or SpecifierSet(wanted).contains(version), (entry, version)
        (collections / "ansible_collections" / namespace).mkdir(parents=True, exist_ok=True)
        (collections / "ansible_collections" / namespace / name).symlink_to(shipped)
    return work / "context", tarball, collections


def test_builder_writes_the_context_with_the_collection(context):
    folder, tarball = context[:2]
    containerfile = (folder / "Containerfile").read_text()
    assert "introspect.py introspect" in containerfile and "ansible-galaxy collection install" in containerfile
    shipped = folder / "_build" / "galaxy" / tarball.name
    assert shipped.read_bytes() == tarball.read_bytes()
    installed = context[2] / "ansible_collections" / "gpupool" / "vcf" / "MANIFEST.json"
    info = yaml.safe_load(installed.read_text())["collection_info"]
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (info["namespace"], info["name"], info["version"]) == ("gpupool", "vcf", galaxy["version"])


def test_declared_python_requirements_are_the_plugins_imports(context):
    folder, _tarball, collections = context
    scripts = folder / "_build" / "scripts"
    written = collections.parent / "ee-requirements.txt"
    proc = _run([sys.executable, scripts / "introspect.py", "introspect", "--exclude-pip-reqs",
                 folder / "_build" / "exclude-requirements.txt", "--write-pip", written, collections], folder,
                dict(os.environ))
    data = yaml.safe_load(proc.stdout)
    # the requirements the image's pip gets, each marked with the collection it comes from
    ours = [_requirement(line) for line in data["python"] if line.endswith("# from collection gpupool.vcf")]

    # what the collection declares, as the build reads it (before the builder's exclusions)
    sys.path.insert(0, str(scripts))
    try:
        import introspect  # pylint: disable=import-error,import-outside-toplevel
        declared_lines = introspect.process_collection(str(collections / "ansible_collections" / "gpupool" / "vcf"))[0]
    finally:
        sys.path.remove(str(scripts))
    declared = {canonicalize_name(_requirement(line).name) for line in declared_lines}
    imported = distributions_of(third_party_imports())
    assert {"pyvmomi", "requests", "kubernetes"} <= set(imported), imported
    assert sorted(declared - set(imported)) == [], "declared for the execution environment, imported by no plugin"
    assert sorted(set(imported) - declared) == [], "imported by plugins, not declared: %s" % {
        d: imported[d] for d in set(imported) - declared}

    # what the builder drops as already in the image comes with ansible-core
    kept = {canonicalize_name(r.name) for r in ours}
    core = {canonicalize_name(Requirement(r).name) for r in importlib.metadata.requires("ansible-core") or []}
    assert sorted(declared - kept - core) == [], "dropped by the builder, not brought by ansible-core"
    pip_lines = [_requirement(line) for line in written.read_text().splitlines() if line.strip()]
    assert kept <= {canonicalize_name(r.name) for r in pip_lines}


def _bounds(spec):
    """(lowest admitted release, first excluded release) of a specifier such as '>=2.17,<2.20'."""
    low = high = None
    for item in SpecifierSet(spec):
        if item.operator == ">=":
            low = item.version
        elif item.operator == "<":
            high = item.version
    return low, high


def _release(version):
    return tuple(int(part) for part in version.split("."))[:2]


def test_example_is_in_step_with_the_collection():
    example = yaml.safe_load(EXAMPLE.read_text())
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    tarball = "gpupool-vcf-%s.tar.gz" % galaxy["version"]
    deps = example["dependencies"]
    collections = {c["name"]: c for c in deps["galaxy"]["collections"]}
    assert collections["gpupool.vcf"]["source"].endswith("/" + tarball), collections["gpupool.vcf"]
    assert [f["src"].rsplit("/", 1)[-1] for f in example["additional_build_files"]] == [tarball]
    for name, version in (galaxy.get("dependencies") or {}).items():
        assert collections.get(name, {}).get("version") == version, (name, version, collections.get(name))
    assert sorted(collections) == sorted(["gpupool.vcf"] + list(galaxy.get("dependencies") or {}))
    # the ansible-core the image gets: from the oldest the collection supports to the newest it is developed on
    core = Requirement(deps["ansible_core"]["package_pip"])
    assert core.name == "ansible-core"
    low, high = _bounds(str(core.specifier))
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert _release(low) == _release(_bounds(runtime)[0]), (str(core.specifier), runtime)
    dev = [Requirement(line) for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
           if line.startswith("ansible-core")]
    assert len(dev) == 1 and _release(high) == _release(_bounds(str(dev[0].specifier))[1]), (str(core.specifier), dev)
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    for kind in ("python", "system"):
        assert (ROOT / meta["dependencies"][kind]).is_file(), meta
