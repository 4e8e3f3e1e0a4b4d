"""The rooms of plugins/module_utils, checked from the imports. Each room is a folder:
``pure`` (logic without I/O), ``vsphere``, ``k8s``, ``dls`` and ``prometheus`` (one client layer per backend),
``transport`` (the one HTTP request path that the HTTP clients share) and ``runner`` (the Ansible-aware layer over
the clients). Pure logic imports no I/O, module_utils imports no module or filter, the clients do not import each
other, the transport imports no client, and tests/unit mirrors plugins/. A module reaches an SDK (pyVmomi, the
kubernetes client, HTTP libraries) only through module_utils, never by importing it."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpupool.vcf.plugins."
ROOMS = ("pure", "vsphere", "k8s", "dls", "prometheus", "transport", "runner")
CLIENTS = ("vsphere", "k8s", "dls", "prometheus")

IO_PACKAGES = ("socket", "ssl", "http", "urllib", "requests", "pyVmomi", "pyVim", "kubernetes", "subprocess",
               "threading", "concurrent", "ansible.module_utils.basic", "os")

FILES = sorted("%s/%s" % (p.parent.name, p.stem) for p in MODULE_UTILS.glob("*/_*.py"))
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.name != "__init__.py")
SDK_PACKAGES = ("pyVmomi", "pyVim", "kubernetes", "requests", "urllib3", "http.client")


def room(name):
    return name.split("/")[0]


def imports(name, folder=MODULE_UTILS):
    """Every module name the file ``room/name`` imports (``mu:<room>/<name>`` for the collection's module_utils),
    at the top and inside functions alike."""
    tree = ast.parse((folder / (name + ".py")).read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(PREFIX + "module_utils."):
                rest = node.module[len(PREFIX + "module_utils."):].split(".")
                if len(rest) == 1:  # from ...module_utils.<room> import _name
                    out.update("mu:%s/%s" % (rest[0], alias.name) for alias in node.names)
                else:
                    out.add("mu:%s/%s" % (rest[0], rest[1]))
            else:
                out.add(node.module)
    return out


def test_every_file_is_in_a_room():
    loose = sorted(p.name for p in MODULE_UTILS.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "module_utils files belong in a room folder %s: %s" % (ROOMS, loose)
    folders = sorted(p.name for p in MODULE_UTILS.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(ROOMS), "a new room needs its rules in tests/unit/test_layout.py"
    for folder in ROOMS:
        init = MODULE_UTILS / folder / "__init__.py"
        assert init.is_file() and init.read_text() == "", "%s needs an empty __init__.py" % folder


@pytest.mark.parametrize("name", [f for f in FILES if room(f) == "pure"])
def test_pure_logic_imports_no_io(name):
    found = imports(name)
    io = sorted(i for i in found if i.split(".")[0] in IO_PACKAGES or i in IO_PACKAGES)
    assert io == [], "%s is pure logic but imports %s" % (name, io)
    impure = sorted(i[3:] for i in found if i.startswith("mu:") and room(i[3:]) != "pure")
    assert impure == [], "%s is pure logic but imports the I/O module_utils %s" % (name, impure)


@pytest.mark.parametrize("name", FILES)
def test_module_utils_import_no_module_or_filter(name):
    bad = sorted(i for i in imports(name) if i.startswith(PREFIX + "modules") or i.startswith(PREFIX + "filter"))
    assert bad == [], "%s imports %s" % (name, bad)


@pytest.mark.parametrize("name", [f for f in FILES if room(f) in CLIENTS])
def test_clients_do_not_import_each_other(name):
    bad = sorted(i[3:] for i in imports(name)
                 if i.startswith("mu:") and room(i[3:]) in CLIENTS and room(i[3:]) != room(name))
    assert bad == [], "%s imports another backend's client %s" % (name, bad)
    runner = sorted(i[3:] for i in imports(name) if i.startswith("mu:") and room(i[3:]) == "runner")
    assert runner == [], "%s is a client but imports the runner %s" % (name, runner)


@pytest.mark.parametrize("name", [f for f in FILES if room(f) == "transport"])
def test_the_transport_imports_only_pure_logic(name):
    """The clients share the transport, so it knows none of them (nor the runner): a client stays free of the others."""
    bad = sorted(i[3:] for i in imports(name) if i.startswith("mu:") and room(i[3:]) != "pure")
    assert bad == [], "%s is the shared transport but imports %s" % (name, bad)


def sdk_imports(found):
    """The SDK packages among imported names (``http.client`` itself, ``http`` alone not)."""
    return sorted(i for i in found if any(i == sdk or i.startswith(sdk + ".") for sdk in SDK_PACKAGES))


@pytest.mark.parametrize("name", MODULES)
def test_modules_import_no_sdk(name):
    bad = sdk_imports(imports(name, ROOT / "plugins" / "modules"))
    assert bad == [], ("module %s imports the SDK %s directly; read or write through its room in module_utils "
                       "(k8s/_library.K8S_IMPORT_ERROR says whether the kubernetes library is there)" % (name, bad))


# the names through which pyVmomi is reached (re-exported by vsphere/_vsphere), and the client calls that read
# vSphere objects themselves: a module gets them from a reader of its room instead
SDK_NAMES = ("vim", "vmodl")
SDK_CALLS = ("retrieve", "retrieve_objects", "collect", "RetrievePropertiesEx", "RetrieveContents")
# a vSphere property path as a string of its own ("runtime.inMaintenanceMode"): the module reads a managed object's
# property from what was retrieved; a reader of its room gives the record in the collection's words instead
PROPERTY_PATH = re.compile(r"^(runtime|summary|config|configManager|hardware|guest|capability)\.[A-Za-z][A-Za-z.]*$")


def sdk_uses(source):
    """The SDK names a module's source imports or uses (``vim``, ``vmodl``), the retrievals it makes itself
    (``client.retrieve(...)``, ``content`` of the service instance) and the vSphere properties it reads by their
    path, as ``name:line``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            out.extend("import %s:%d" % (a.name, node.lineno) for a in node.names if a.name in SDK_NAMES)
        elif isinstance(node, ast.Name) and node.id in SDK_NAMES:
            out.append("%s:%d" % (node.id, node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SDK_CALLS:
            out.append("%s():%d" % (node.func.attr, node.lineno))
        elif isinstance(node, ast.Attribute) and node.attr == "content" and isinstance(node.value, ast.Name) \
                and node.value.id == "client":
            out.append("client.content:%d" % node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PROPERTY_PATH.match(node.value):
            out.append("property %s:%d" % (node.value, node.lineno))
    return sorted(set(out))


@pytest.mark.parametrize("name", MODULES)
def test_modules_use_no_sdk_names_nor_retrievals(name):
    bad = sdk_uses((ROOT / "plugins" / "modules" / (name + ".py")).read_text())
    assert bad == [], ("module %s reaches pyVmomi itself (%s); read and write through a reader or API class in "
                       "module_utils/vsphere" % (name, ", ".join(bad)))


def test_the_sdk_use_rule_can_fail():
    source = ("from x._vsphere import VsphereError, vim\n"
              "def read(client):\n"
              "    return client.retrieve({vim.HostSystem: ['name']}), client.content.about\n")
    assert sdk_uses(source) == ["client.content:3", "import vim:1", "retrieve():3", "vim:3"]
    assert sdk_uses("def read(api):\n    return api.hosts(cluster='c')\n") == []
    assert sdk_uses("def read(hosts):\n    host = hosts.find('esx-01')\n    return host.get('runtime.inMaintenanceMode')\n") \
        == ["property runtime.inMaintenanceMode:3"]
    assert sdk_uses("def read(hosts):\n    return hosts.read(['esx-01'])[0]['in_maintenance']\n") == []
    assert sdk_uses('DOC = "reads C(summary.rebootRequired) of the host"\n') == []


def test_unit_tests_mirror_plugins():
    """Every unit test of module_utils sits in the folder of the room it tests."""
    tests = ROOT / "tests" / "unit" / "plugins" / "module_utils"
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert loose == [], "unit tests of module_utils go in the folder of their room: %s" % loose
    assert sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ROOMS)


def test_the_rule_can_fail():
    """The import reader sees a forbidden import where there is one."""
    assert "mu:vsphere/_vsphere" in imports("vsphere/_esxi_host")
    assert "pyVmomi" in imports("vsphere/_vsphere")
    assert "mu:pure/_esxi" in imports("vsphere/_esxi_host")
    assert sdk_imports(imports("k8s/_license_reader")) == ["kubernetes", "kubernetes.stream"]
    assert sdk_imports(imports("transport/_http")) == ["http.client"]
    assert "mu:transport/_http" in imports("dls/_nls") and "mu:pure/_retry" in imports("transport/_http")
    assert sdk_imports({"http", "requests.adapters", "kubernetes_asyncio"}) == ["requests.adapters"]


def test_test_file_names_are_unique():
    """pytest imports test files by their base name (rootdir import mode): two files of one name
    in different folders make the second one fail to collect."""
    names = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert [paths for paths in names.values() if len(paths) > 1] == []
