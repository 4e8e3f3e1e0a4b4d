"""The built collection, as users get it: `ansible-galaxy collection build`, then
`ansible-galaxy collection install` of the tarball into an empty collections path, and every
plugin, role and playbook used from that installed copy only (the checkout on no path); Galaxy's
importer on the same tarball; the documentation site (`make docs`) opened in headless Chromium.

The tarball must hold no build output (venvs, simulator builds, caches), no compiled binary
and nothing over SIZE_BOUND: the collection is Python, YAML and docs, about 1 MiB compressed
today; the bound leaves room to grow and catches a stray build output (a Go simulator binary
alone is over 30 MiB).
"""
import ast
import json
import os
import pathlib
import subprocess
import sys
import tarfile

import pytest
import yaml

from tests.lib import browser

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


def collection_env(work):
    """The environment of a user who has no checkout: no collections path (the ansible package's
    collections, such as kubernetes.core, stay), no PYTHONPATH, Ansible's home in ``work``."""
    env = dict(os.environ)
    for key in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "PYTHONPATH"):
        env.pop(key, None)
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env["ANSIBLE_HOME"] = str(pathlib.Path(work) / "home")
    return env


def build_and_install(work):
    """`ansible-galaxy collection build` of the checkout into ``work``/out, then `ansible-galaxy
    collection install` of the tarball into the empty collections path ``work``/collections:
    (tarball, installed collection root, env that finds only the installed copy and the collections
    the ansible package ships)."""
    work = pathlib.Path(work)
    env = collection_env(work)
    build = _run([VENV_BIN / "ansible-galaxy", "collection", "build", "--force", "--output-path", work / "out", ROOT],
                 work, env)
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    tarball = work / "out" / ("gpupool-vcf-%s.tar.gz" % version)
    assert tarball.is_file(), build.stdout
    collections = work / "collections"
    _run([VENV_BIN / "ansible-galaxy", "collection", "install", "--no-deps", "-p", collections, tarball], work, env)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return tarball, collections / "ansible_collections" / "gpupool" / "vcf", env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, installed collection root, env that finds only the installed copy, work folder)."""
    work = tmp_path_factory.mktemp("dist")
    return build_and_install(work) + (work,)


def test_tarball_holds_the_collection_and_no_build_output(installed):
    tarball = installed[0]
    size = tarball.stat().st_size
    print("\n%s: %d bytes (%.2f MiB), bound %d bytes" % (tarball.name, size, size / 1048576.0, SIZE_BOUND))
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


def _placeholder_table():
    """{galaxy.yml field: placeholder} of the table in docs/releasing.md's section "The placeholders"."""
    text = (ROOT / "docs" / "releasing.md").read_text()
    section = text.split("## 2. The placeholders", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[1].startswith("`"):
            rows[cells[0].strip("`")] = cells[1].strip("`")
    return rows


def test_releasing_guide_names_every_placeholder_of_galaxy_yml():
    """Each galaxy.yml value that holds REPLACE-ME is a row of docs/releasing.md's table, with that
    value, and the table has no other row; the placeholders stay well-formed (a URL, an address)."""
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    held = {}
    for field, value in galaxy.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and "REPLACE-ME" in item:
                held[field] = item
    assert _placeholder_table() == held
    for field, value in held.items():
        if field == "authors":
            assert value.endswith("@example.com>"), value
        else:
            assert value.startswith("https://"), (field, value)


# Galaxy's importer as an upload meets it. Automation Hub's checks are on (at least one tag of its
# list, a version of 1.0.0 or more, a changelog); ansible-doc and ansible-lint run as Galaxy runs them
# (lint offline, production profile, in the extracted artifact). Its ansible-test step is off: the
# importer runs it only as `ansible-test sanity --docker`, which needs a container engine; `make
# sanity` runs the same sanity tests from a venv.
IMPORTER_CONFIG = """[galaxy-importer]
LOG_LEVEL_MAIN = INFO
RUN_ANSIBLE_TEST = False
RUN_ANSIBLE_DOC = True
RUN_ANSIBLE_LINT = True
OFFLINE_ANSIBLE_LINT = True
CHECK_CHANGELOG = True
CHECK_REQUIRED_TAGS = True
REQUIRE_V1_OR_GREATER = %(v1)s
TMP_ROOT_DIR = %(tmp)s
ANSIBLE_LOCAL_TMP = %(tmp)s/ansible-tmp
"""
IMPORTER_VENV = ROOT / ".build" / "importer-venv"
# Galaxy's import environment has ansible-core alone, no other collection, so ansible-lint cannot
# resolve the modules of another collection: a warning Galaxy gives every collection that has
# dependencies, which the collection cannot fix. Accepted for the collections galaxy.yml declares, and
# for awx.awx, whose modules only the AWX example (examples/awx) calls: that playbook configures the
# controller with AWX's own collection, no dependency of this one.
NOT_A_DEPENDENCY = {"awx.awx": "examples/awx/"}


def _importer_warnings(output, dependencies):
    """The importer's WARNING and ERROR lines, less the unresolved modules of the collections it has
    no copy of (dependencies and NOT_A_DEPENDENCY); returns (left, accepted)."""
    left, accepted = [], []
    for line in output.splitlines():
        if not line.startswith(("WARNING:", "ERROR:")):
            continue
        if "syntax-check[unknown-module]" in line and "couldn't resolve module/action '" in line:
            fqcn = line.split("couldn't resolve module/action '", 1)[1].split("'", 1)[0]
            coll = ".".join(fqcn.split(".")[:2])
            path = line.split(":", 2)[1].strip()
            if coll in dependencies or (coll in NOT_A_DEPENDENCY and path.startswith(NOT_A_DEPENDENCY[coll])):
                accepted.append((coll, path))
                continue
        left.append(line)
    return left, accepted


def test_galaxy_importer_accepts_the_tarball(installed):
    tarball, work = installed[0], installed[3]
    _run(["make", "--no-print-directory", "-C", ROOT, "importer-venv"], ROOT, dict(os.environ), timeout=600)
    imp = work / "importer"
    (imp / "tmp" / "ansible-tmp").mkdir(parents=True)
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    v1 = int(galaxy["version"].split(".")[0]) >= 1
    (imp / "galaxy-importer.cfg").write_text(IMPORTER_CONFIG % {"tmp": imp / "tmp", "v1": v1})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "GALAXY_IMPORTER_", "VIRTUAL_ENV"))}
    env.update(PATH="%s:/usr/bin:/bin" % (IMPORTER_VENV / "bin"), HOME=str(imp / "tmp"),
               ANSIBLE_HOME=str(imp / "tmp" / "ansible-home"), GALAXY_IMPORTER_CONFIG=str(imp / "galaxy-importer.cfg"))
    proc = _run([IMPORTER_VENV / "bin" / "python", "-m", "galaxy_importer.main", tarball], imp, env, timeout=600)
    out = proc.stdout + proc.stderr
    assert "Importer processing completed successfully" in out, out[-3000:]
    left, accepted = _importer_warnings(out, set(galaxy.get("dependencies") or {}))
    assert left == [], "the importer warns:\n%s" % "\n".join(left)
    installed_there = subprocess.run([IMPORTER_VENV / "bin" / "ansible-galaxy", "collection", "list", "--format", "json"],
                                     env=env, capture_output=True, text=True, check=False, cwd=str(imp))
    listed = json.loads(installed_there.stdout or "{}")
    present = {name for path in listed.values() for name in path}
    # an accepted warning is one about a collection the importer really has no copy of
    assert not {pair[0] for pair in accepted} & present, (accepted, present)

    result = json.loads((imp / "importer_result.json").read_text())
    meta = result["metadata"]
    assert (meta["namespace"], meta["name"], meta["version"]) == ("gpupool", "vcf", galaxy["version"])
    assert result["requires_ansible"] == yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    contents = {(c["content_type"], c["name"]) for c in result["contents"]}
    for module in (ROOT / "plugins" / "modules").glob("*.py"):
        if module.stem != "__init__":
            assert ("module", module.stem) in contents, module.stem
    for role in (ROOT / "roles").iterdir():
        assert ("role", role.name) in contents, role.name
    docs = {(c["content_type"], c["content_name"]): c for c in result["docs_blob"]["contents"]}
    for (kind, name), doc in docs.items():
        if kind == "module":
            assert (doc["doc_strings"] or {}).get("doc", {}).get("short_description"), name
            assert (doc["doc_strings"] or {}).get("examples"), "%s: no EXAMPLES for Galaxy's page" % name
        if kind == "role":
            assert doc.get("readme_html"), "role %s has no README for Galaxy's page" % name
    guides = {f["name"] for f in result["docs_blob"]["documentation_files"]}
    assert {"design.md", "audit-rules.md"} <= guides, guides
    assert result["docs_blob"]["collection_readme"]["html"]


# what Chromium reports of a page of the documentation site: its heading, the code blocks drawn
# (with their section), the words of the page and its links
SITE_PAGE = """
const main = document.querySelector('[role=main]') || document.body;
const drawn = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
return {
  h1: (main.querySelector('h1') || {textContent: ''}).textContent.replace(/\\s+/g, ' ').trim(),
  blocks: Array.from(main.querySelectorAll('pre')).map((p) => ({
    drawn: drawn(p), text: p.textContent, section: (p.closest('section') || {id: ''}).id})),
  text: main.innerText,
  links: Array.from(document.querySelectorAll('a[href]')).map((a) => a.getAttribute('href')),
  tables: main.querySelectorAll('table').length,
};
"""


def _module_options(path):
    """The top-level option names of a module's own DOCUMENTATION."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["DOCUMENTATION"]:
            return sorted((yaml.safe_load(node.value.value).get("options") or {}))
    raise AssertionError("%s has no DOCUMENTATION" % path)


def _fences(markdown):
    """The fenced code blocks of a markdown guide."""
    return sum(1 for line in markdown.splitlines() if line.lstrip().startswith("```")) // 2


def test_documentation_site_renders_every_module_role_and_guide():
    _run(["make", "--no-print-directory", "docs"], ROOT, dict(os.environ), timeout=900)
    html = ROOT / ".build" / "docs" / "html"
    modules = sorted(p for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    guides = sorted((ROOT / "docs").glob("*.md"))
    pages = {"index.html": None}
    pages.update(("collection/%s_module.html" % m.stem, ("module", m)) for m in modules)
    pages.update(("collection/%s_role.html" % r, ("role", r)) for r in roles)
    pages.update(("guides/%s.html" % g.stem, ("guide", g)) for g in guides)
    missing = sorted(p for p in pages if not (html / p).is_file())
    assert missing == [], "pages the site lacks: %s" % missing
    seen = {}
    drv = browser.driver()
    try:
        for page in pages:
            drv.get((html / page).as_uri())
            seen[page] = drv.execute_script(SITE_PAGE)
    finally:
        drv.quit()
    broken = set()
    for page, got in seen.items():
        for href in got["links"]:
            target = href.split("#")[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                if not ((html / page).parent / target).resolve().exists():
                    broken.add((page, href))
        kind = pages[page]
        if kind is None:
            continue
        assert all(b["drawn"] for b in got["blocks"]), "%s: a code block is not drawn" % page
        if kind[0] == "module":
            name = "gpupool.vcf." + kind[1].stem
            assert got["h1"].startswith(name + " module"), (page, got["h1"])
            examples = [b["text"] for b in got["blocks"] if b["section"] == "examples"]
            assert examples and name in "".join(examples), "%s: its EXAMPLES are not on the page" % page
            absent = [o for o in _module_options(kind[1]) if o not in got["text"]]
            assert absent == [], "%s: options not on the page: %s" % (page, absent)
        elif kind[0] == "role":
            assert got["h1"].startswith("gpupool.vcf.%s role" % kind[1]), (page, got["h1"])
            specs = yaml.safe_load((ROOT / "roles" / kind[1] / "meta" / "argument_specs.yml").read_text())["argument_specs"]
            for entry, spec in specs.items():
                absent = [o for o in spec.get("options", {}) if o not in got["text"]]
                assert absent == [], "%s: entry point %s lacks %s" % (page, entry, absent)
        else:
            source = kind[1].read_text()
            title = source.splitlines()[0].lstrip("# ").strip()
            assert got["h1"].replace("\uf0c1", "").strip() == title, (page, got["h1"], title)
            assert len(got["blocks"]) == _fences(source), "%s: %d code blocks drawn, %d in %s" % (
                page, len(got["blocks"]), _fences(source), kind[1].name)
    assert broken == set(), "links to pages the site lacks: %s" % sorted(broken)[:20]
    index = seen["index.html"]["links"]
    for g in guides:
        assert "guides/%s.html" % g.stem in index, "the start page does not link the guide %s" % g.name
    assert "collection/index.html" in index
    # the design reference with its field tables and examples
    design = seen["guides/design.html"]
    assert design["tables"] >= 1 and design["blocks"], "the design reference lost its tables or examples"


def test_signed_manifest_verifies_as_ansible_galaxy_checks_it(installed):
    """docs/releasing.md's signature: a detached, ASCII-armoured GPG signature of the tarball's
    MANIFEST.json (what Galaxy NG and Automation Hub store beside a version), checked by
    `ansible-galaxy collection verify` against the installed copy; a signature of anything else fails."""
    tarball, env, work = installed[0], dict(installed[2]), installed[3]
    sign = work / "sign"
    (sign / "gnupg").mkdir(parents=True, mode=0o700)
    env["GNUPGHOME"] = str(sign / "gnupg")
    _run(["gpg", "--batch", "--passphrase", "", "--quick-generate-key", "gpupool.vcf release check <release@example.com>",
          "ed25519", "sign", "1d"], sign, env)
    with tarfile.open(str(tarball)) as tar:
        (sign / "MANIFEST.json").write_bytes(tar.extractfile("MANIFEST.json").read())
    _run(["gpg", "--batch", "--yes", "--detach-sign", "--armor", "--output", "MANIFEST.json.asc", "MANIFEST.json"], sign, env)
    _run(["gpg", "--batch", "--yes", "--export", "--output", "pubring.gpg"], sign, env)
    verify = [VENV_BIN / "ansible-galaxy", "collection", "verify", "--offline", "gpupool.vcf", "--keyring", sign / "pubring.gpg",
              "--signature"]
    _run(verify + [(sign / "MANIFEST.json.asc").as_uri()], sign, env)
    (sign / "other.json").write_text("{}")
    _run(["gpg", "--batch", "--yes", "--detach-sign", "--armor", "--output", "other.asc", "other.json"], sign, env)
    wrong = subprocess.run(verify + [(sign / "other.asc").as_uri()], cwd=str(sign), env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    assert wrong.returncode != 0 and "Signature verification failed" in wrong.stdout + wrong.stderr, wrong
