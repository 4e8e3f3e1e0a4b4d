"""The rooms of plugins/module_utils, checked from the imports: pure logic imports no I/O,
module_utils imports no module or filter, and the vSphere, Kubernetes and DLS clients do not
import each other. A new file must be given its room here, so the rule covers it too."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "plugins" / "module_utils"
PREFIX = "ansible_collections.gpupool.vcf.plugins."

# pure logic: no network, no SDK, no Ansible module layer; unit-tested exhaustively
PURE = {"_audit", "_design", "_design_schema", "_drs", "_esxi", "_inputs", "_k8s_objects", "_namespace",
        "_nvidia", "_plan", "_vlcm", "_vm_class"}
VSPHERE_CLIENT = {"_vsphere", "_vsphere_rest", "_esxi_host", "_gpu_inventory", "_drs_api", "_gpu_config_api",
                  "_namespace_api", "_vlcm_api", "_vm_class_api"}
K8S_CLIENT = {"_k8s", "_vks_api"}
DLS_CLIENT = {"_nls"}
# the Ansible-aware layer over the clients (it may know every client's error types)
MODULE_LAYER = {"_vsphere_module", "_runner"}
ROOMS = dict(pure=PURE, vsphere=VSPHERE_CLIENT, k8s=K8S_CLIENT, dls=DLS_CLIENT, module=MODULE_LAYER)

IO_PACKAGES = ("socket", "ssl", "http", "urllib", "requests", "pyVmomi", "pyVim", "kubernetes", "subprocess",
               "threading", "concurrent", "ansible.module_utils.basic", "os")


def imports(name):
    """Every module name the file imports (``mu:<name>`` for the collection's module_utils)."""
    tree = ast.parse((MODULE_UTILS / (name + ".py")).read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PREFIX + "module_utils":
                out.update("mu:" + alias.name for alias in node.names)
            elif node.module.startswith(PREFIX + "module_utils."):
                out.add("mu:" + node.module.rsplit(".", 1)[1])
            else:
                out.add(node.module)
    return out


FILES = sorted(p.stem for p in MODULE_UTILS.glob("_*.py"))


def test_every_file_has_a_room():
    placed = set().union(*ROOMS.values())
    assert sorted(set(FILES) - placed) == [], "give the new module_utils file a room in tests/unit/test_layout.py"
    assert sorted(placed - set(FILES)) == [], "a room names a file that is gone"


@pytest.mark.parametrize("name", sorted(PURE))
def test_pure_logic_imports_no_io(name):
    found = imports(name)
    io = sorted(i for i in found if i.split(".")[0] in IO_PACKAGES or i in IO_PACKAGES)
    assert io == [], "%s is pure logic but imports %s" % (name, io)
    impure = sorted(i[3:] for i in found if i.startswith("mu:") and i[3:] not in PURE)
    assert impure == [], "%s is pure logic but imports the I/O module_utils %s" % (name, impure)


@pytest.mark.parametrize("name", FILES)
def test_module_utils_import_no_module_or_filter(name):
    bad = sorted(i for i in imports(name) if i.startswith(PREFIX + "modules") or i.startswith(PREFIX + "filter"))
    assert bad == [], "%s imports %s" % (name, bad)


@pytest.mark.parametrize("name, foreign", [(n, K8S_CLIENT | DLS_CLIENT) for n in sorted(VSPHERE_CLIENT)]
                         + [(n, VSPHERE_CLIENT) for n in sorted(K8S_CLIENT | DLS_CLIENT)])
def test_clients_do_not_import_each_other(name, foreign):
    bad = sorted(i[3:] for i in imports(name) if i.startswith("mu:") and i[3:] in foreign)
    assert bad == [], "%s imports another backend's client %s" % (name, bad)


def test_the_rule_can_fail():
    """The import reader sees a forbidden import where there is one."""
    assert "mu:_vsphere" in imports("_esxi_host")
    assert "pyVmomi" in imports("_vsphere")
