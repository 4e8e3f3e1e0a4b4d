"""Only the client rooms of plugins/module_utils (vsphere, k8s, dls, prometheus) reach a server: no module
under plugins/modules and no file of the runner imports Ansible's HTTP helpers (``ansible.module_utils.urls``:
``open_url``, ``fetch_url``), an HTTP or TLS library, or the kubernetes client. A module that needs an
endpoint gets a client in the room of its link (pool_ready's inference probe: k8s/_pool_ready_api)."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = sorted(p for p in (ROOT / "plugins" / "modules").glob("*.py") if p.name != "__init__.py")
RUNNER = sorted((ROOT / "plugins" / "module_utils" / "runner").glob("_*.py"))

# packages a server is reached through (``socket`` not: gpu_pool_lease names its run by socket.gethostname()),
# and the names of Ansible's and urllib's HTTP helpers wherever they are imported from
CLIENT_PACKAGES = ("ansible.module_utils.urls", "urllib", "urllib3", "http.client", "requests", "ssl", "kubernetes")
CLIENT_NAMES = ("open_url", "fetch_url", "Request", "urlopen")


def reaches_a_server(source):
    """The imports of ``source`` that only a client room may make, as ``name:line``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names if a.name in CLIENT_NAMES]
        else:
            continue
        for name in found:
            if any(name == p or name.startswith(p + ".") for p in CLIENT_PACKAGES) or \
                    name.rsplit(".", 1)[-1] in CLIENT_NAMES:
                out.append("%s:%d" % (name, node.lineno))
    return sorted(set(out))


@pytest.mark.parametrize("path", MODULES + RUNNER, ids=lambda p: "%s/%s" % (p.parent.name, p.stem))
def test_only_client_rooms_reach_a_server(path):
    bad = reaches_a_server(path.read_text())
    assert bad == [], ("%s imports %s; a module (and the runner) reaches a server through a client in the room of "
                       "its link under plugins/module_utils (vsphere, k8s, dls, prometheus)" % (path.name, bad))


def test_the_rule_can_fail():
    source = ("from ansible.module_utils.urls import open_url\n"
              "import urllib.request\n"
              "def read():\n"
              "    from kubernetes import client\n"
              "    from x._http import fetch_url\n"
              "from ansible.module_utils.basic import AnsibleModule\n")
    assert reaches_a_server(source) == ["ansible.module_utils.urls.open_url:1", "ansible.module_utils.urls:1",
                                        "kubernetes:4", "urllib.request:2", "x._http.fetch_url:5"]
    assert reaches_a_server("from ansible.module_utils.basic import AnsibleModule\nimport json\n") == []


def test_the_client_rooms_do_reach_servers():
    """The rule reads real imports: the rooms it sends modules to make them."""
    utils = ROOT / "plugins" / "module_utils"
    assert reaches_a_server((utils / "k8s" / "_pool_ready_api.py").read_text())
    assert reaches_a_server((utils / "prometheus" / "_prom.py").read_text())
