"""The doc fragments for Prometheus, DLS and attributes: the modules that use them document, through
ansible-doc's merge, every attribute with its support and every Prometheus option of their argument
spec, and repeat nothing a fragment already says (the copies the fragments replaced); their argument specs hold
the connection options as the Prometheus and DLS rooms declare them."""
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml
from ansible.module_utils.basic import env_fallback

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import dls_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import prometheus_argument_spec

ROOT = pathlib.Path(__file__).resolve().parents[4]
MODULES = ROOT / "plugins" / "modules"
sys.path.insert(0, str(ROOT / "plugins" / "doc_fragments"))
import attributes  # noqa: E402  pylint: disable=wrong-import-position
import prometheus  # noqa: E402  pylint: disable=wrong-import-position
import dls  # noqa: E402  pylint: disable=wrong-import-position

ATTRIBUTE_FRAGMENTS = {
    "gpupool.vcf.attributes": attributes.ModuleDocFragment.DOCUMENTATION,
    "gpupool.vcf.attributes.info_module": attributes.ModuleDocFragment.INFO_MODULE,
    "gpupool.vcf.attributes.no_diff": attributes.ModuleDocFragment.NO_DIFF,
}
PROMETHEUS_FRAGMENTS = {
    "gpupool.vcf.prometheus": prometheus.ModuleDocFragment.DOCUMENTATION,
    "gpupool.vcf.prometheus.bearer_token": prometheus.ModuleDocFragment.BEARER_TOKEN,
    "gpupool.vcf.prometheus.token": prometheus.ModuleDocFragment.TOKEN,
}
# the modules moved onto the fragments (the others follow with their owners)
ON_ATTRIBUTES = ("drs_gpu_pinning", "supervisor_namespace", "vm_class", "esxi_host_driver", "esxi_maintenance_mode",
                 "vlcm_component", "nls_appliance_deploy", "vks_node_pool", "gpu_host_info", "gpu_pool_design",
                 "nls_appliance_info", "nvidia_license_info", "gpu_game_day", "guest_node_drain", "gpu_usage",
                 "gpu_capacity", "pool_ready", "esxi_gpu_config", "dls_client_token", "gpu_pool_lease",
                 "gpu_pool_preflight")
ON_PROMETHEUS = ("gpu_capacity", "pool_ready", "gpu_pool_audit", "gpu_pool_preflight")
ON_DLS = ("gpu_pool_audit", "gpu_pool_preflight")
ON_DLS_APPLIANCE = ("dls_client_token", "nls_appliance_info")


def own_doc(name):
    src = (MODULES / (name + ".py")).read_text()
    return yaml.safe_load(re.search(r'DOCUMENTATION = r"""(.*?)"""', src, re.S).group(1))


@pytest.fixture(scope="module")
def merged():
    """ansible-doc's view of every module of the collection (fragments merged)."""
    names = sorted(p.stem for p in MODULES.glob("*.py") if not p.name.startswith("_"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".build" / "collections"))
    run = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-doc"), "-j"] + ["gpupool.vcf." + n for n in names],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    return dict((key.rsplit(".", 1)[1], value["doc"]) for key, value in json.loads(run.stdout).items())


def test_every_module_documents_check_and_diff_mode(merged):
    for name, doc in merged.items():
        attrs = doc.get("attributes") or {}
        assert set(attrs) >= {"check_mode", "diff_mode"}, name
        for attr in ("check_mode", "diff_mode"):
            assert attrs[attr].get("support") in ("full", "partial", "none"), (name, attr)
            assert attrs[attr].get("description"), (name, attr)


@pytest.mark.parametrize("name", ON_ATTRIBUTES)
def test_the_module_takes_its_attributes_from_a_fragment_and_repeats_nothing(name):
    doc = own_doc(name)
    used = [f for f in doc.get("extends_documentation_fragment", []) if f in ATTRIBUTE_FRAGMENTS]
    assert len(used) == 1, doc.get("extends_documentation_fragment")
    fragment = yaml.safe_load(ATTRIBUTE_FRAGMENTS[used[0]])["attributes"]
    for attr, own in (doc.get("attributes") or {}).items():
        assert "support" not in own, (attr, "the support level comes from the fragment")
        assert own.get("description") != fragment[attr]["description"], (attr, "repeats the fragment")


@pytest.mark.parametrize("name", ON_PROMETHEUS)
def test_the_prometheus_options_come_from_the_fragment(name, merged):
    doc = own_doc(name)
    used = [f for f in doc.get("extends_documentation_fragment", []) if f in PROMETHEUS_FRAGMENTS]
    assert "gpupool.vcf.prometheus" in used
    options = {}
    for fragment in used:
        options.update(yaml.safe_load(PROMETHEUS_FRAGMENTS[fragment])["options"])
    for option, spec in options.items():
        own = doc["options"].get(option, {})
        assert set(own) <= {"description"}, (option, "repeats what the fragment says: %s" % sorted(set(own) - {"description"}))
        assert merged[name]["options"][option]["type"] == spec["type"]
        assert merged[name]["options"][option].get("default") == spec.get("default")
        assert merged[name]["options"][option].get("required", False) == spec.get("required", False)


@pytest.mark.parametrize("name, fragment", [(n, "gpupool.vcf.dls") for n in ON_DLS] +
                         [(n, "gpupool.vcf.dls.appliance") for n in ON_DLS_APPLIANCE])
def test_the_dls_options_come_from_the_fragment(name, fragment, merged):
    doc = own_doc(name)
    assert fragment in doc.get("extends_documentation_fragment", [])
    text = dls.ModuleDocFragment.DOCUMENTATION if fragment == "gpupool.vcf.dls" else dls.ModuleDocFragment.APPLIANCE
    for option, spec in yaml.safe_load(text)["options"].items():
        own = doc["options"].get(option, {})
        assert set(own) <= {"description"}, (option, "repeats what the fragment says: %s" % sorted(set(own) - {"description"}))
        assert merged[name]["options"][option]["type"] == spec["type"]
        assert merged[name]["options"][option].get("default") == spec.get("default")
        assert merged[name]["options"][option].get("required", False) == spec.get("required", False)


def connection_spec(name):
    """The connection options of a module's argument spec as its room declares them: (Prometheus, DLS)."""
    prom = {}
    if name in ON_PROMETHEUS:
        token = "gpupool.vcf.prometheus.token" in own_doc(name)["extends_documentation_fragment"]
        prom = prometheus_argument_spec(token="prometheus_token", env_fallback=env_fallback) if token \
            else prometheus_argument_spec()
    dls_spec = {}
    if name in ON_DLS:
        dls_spec = dls_argument_spec()
    elif name in ON_DLS_APPLIANCE:
        dls_spec = dls_argument_spec(prefix="", required=True)
    return prom, dls_spec


@pytest.mark.parametrize("name", sorted(set(ON_PROMETHEUS + ON_DLS + ON_DLS_APPLIANCE)))
def test_the_connection_options_are_the_rooms_own(name):
    """A module declares no connection option by hand: its spec holds the room's, unchanged, so a change of
    the connection (a default, no_log, an environment fallback) reaches every module at once."""
    module = importlib.import_module("ansible_collections.gpupool.vcf.plugins.modules." + name)
    for spec in connection_spec(name):
        assert dict((option, module.ARGUMENT_SPEC.get(option)) for option in spec) == spec, name
        for option, value in spec.items():
            assert value.get("no_log") == ("password" in option or "token" in option or None), option


def test_the_rule_can_fail():
    """A hand-written copy that differs (no no_log, another default) is not the room's."""
    prom, _dls = connection_spec("gpu_pool_preflight")
    copy = dict(prom, prometheus_bearer_token=dict(type="str"))
    assert dict((option, copy.get(option)) for option in prom) != prom
