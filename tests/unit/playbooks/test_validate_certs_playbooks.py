"""validate_certs as site.yml, audit.yml and host_rebuild.yml pass it to the modules: each playbook's own
expression, rendered by ansible-playbook. A value that is not a clear boolean ("ture", "enabled") fails
naming the option; the bool filter they used before read it as false and turned verification off."""
import pathlib

import pytest
import yaml

from tests.lib.ansible_run import run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[3]
VALUES = [("true ", True), ("no", False), (False, False), ("", True), ("ture", None), ("enabled", None)]


def module_defaults_expr(playbook):
    """The validate_certs expression of the playbook's group/gpupool.vcf.vsphere module_defaults."""
    found = set()
    for play in yaml.safe_load((ROOT / "playbooks" / playbook).read_text()):
        group = (play.get("module_defaults") or {}).get("group/gpupool.vcf.vsphere") or {}
        if "validate_certs" in group:
            found.add(group["validate_certs"])
    assert len(found) == 1, found
    return found.pop()


@pytest.mark.parametrize("playbook, var", [("site.yml", "gpupool__vc"), ("audit.yml", "audit__vc")])
def test_module_defaults_of_an_isolated_vcenter(playbook, var):
    expr = module_defaults_expr(playbook)
    tasks = [{"name": "value %d" % i, "ansible.builtin.debug": {"msg": expr}, "ignore_errors": True,
              "vars": {var: {"isolated": True, "validate_certs": value}}} for i, (value, _want) in enumerate(VALUES)]
    res = run_playbook([{"name": "p", "hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    for i, (value, want) in enumerate(VALUES):
        got = res.result("value %d" % i)
        if want is None:
            assert got.get("failed") and "validate_certs" in got["msg"] and "not a boolean" in got["msg"], (value, got)
        else:
            assert not got.get("failed"), (value, got)
            assert got["msg"] is want, (value, got)


@pytest.mark.parametrize("value, want", [("true ", True), ("0", False), (None, True), ("ture", None)])
def test_host_rebuild_environment(value, want):
    plays = yaml.safe_load((ROOT / "playbooks" / "host_rebuild.yml").read_text())
    expr = plays[0]["vars"]["host_rebuild__validate_certs"]
    play = [{"name": "p", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "value", "ansible.builtin.debug": {"msg": expr}, "ignore_errors": True}]}]
    env = {"VMWARE_VALIDATE_CERTS": value} if value is not None else {"VMWARE_VALIDATE_CERTS": ""}
    got = run_playbook(play, env=env).result("value")
    if want is None:
        assert got.get("failed") and "VMWARE_VALIDATE_CERTS" in got["msg"] and "not a boolean" in got["msg"], got
    else:
        assert not got.get("failed") and got["msg"] is want, got
