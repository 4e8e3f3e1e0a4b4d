"""site.yml passes each role the variables derive() gives it, one to one: every derived key
reaches the role under its own name, unrenamed and untransformed. What else a role gets
comes from the run, not from the design, and is listed here with its reason."""
import pathlib
import re

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

ROOT = pathlib.Path(__file__).resolve().parents[3]
DERIVED = derive(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
# variables site.yml gives a role from the run rather than from the design
FROM_THE_RUN = {
    "gpu_operator_chart_ref": "the chart to install (gpupool_gpu_operator_chart)",
    "gpu_operator_upgrade_crd": "whether the chart's CRDs are upgraded (gpupool_gpu_operator_upgrade_crd)",
    "nls_licensing_token_src": "the client token this run fetched from the DLS appliance",
    "esxi_gpu_host_guest_kubeconfigs": "the guest cluster whose nodes a host roll drains (gpupool_guest_kubeconfig)",
    "vks_gpu_node_pools_vm_class_names": "the class each design name is used under, as the vSphere link resolved it",
    "vks_gpu_node_pools_guest_kubeconfig": "the guest cluster whose nodes a rollout replaces (gpupool_guest_kubeconfig)",
    "supervisor_gpu_tenancy_classes_in_use": "the classes the node pools use after the VKS link's rollout",
}
# a derived variable the run may override, and with what
OVERRIDDEN = {"gpu_operator_licensing_secret_name": "hostvars['localhost'].gpupool_licensing_secret"}
PASS_THROUGH = re.compile(r"^\{\{ *[\w.\[\]']+\.(\w+) *\}\}$")


def include_role_tasks(node):
    """Every include_role task of the playbook, wherever it is nested (blocks, rescue)."""
    if isinstance(node, list):
        for item in node:
            yield from include_role_tasks(item)
    elif isinstance(node, dict):
        if "ansible.builtin.include_role" in node:
            yield node
        for key in ("tasks", "block", "rescue", "always"):
            yield from include_role_tasks(node.get(key) or [])


TASKS = list(include_role_tasks(yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())))


def derived_keys(role):
    given = DERIVED["roles"][role]
    entries = list(given.values()) if role == "esxi_gpu_host" else given if isinstance(given, list) else [given]
    return set().union(*(set(e) for e in entries))


# a role site.yml includes more than once, and why
AGAIN = {"supervisor_gpu_tenancy": "after the VKS link's rollout, to delete the VM classes the node pools left "
                                   "(supervisor.vm_class_revisions)"}


def test_every_role_of_the_design_is_included():
    included = sorted(t["ansible.builtin.include_role"]["name"].split(".")[-1] for t in TASKS)
    assert included == sorted(list(DERIVED["roles"]) + list(AGAIN))


def test_the_second_tenancy_include_only_retires():
    """The second include of supervisor_gpu_tenancy runs in the VKS link after the node pools, through the
    Supervisor's vCenter, with the classes the node pools use, only with class revisions."""
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    play = [p for p in plays if p["name"].startswith("Link 4 of 5: VKS")][0]
    assert "group/gpupool.vcf.vsphere" in play["module_defaults"]
    assert "supervisor" in play["vars"]["gpupool__supervisor_vc"]
    tasks = list(include_role_tasks(play["tasks"]))
    assert [t["ansible.builtin.include_role"]["name"] for t in tasks] == [
        "gpupool.vcf.vks_gpu_node_pools", "gpupool.vcf.supervisor_gpu_tenancy"]
    retire = tasks[1]
    assert "vks_gpu_node_pools_classes_in_use" in retire["vars"]["supervisor_gpu_tenancy_classes_in_use"]
    assert "class_revisions" in retire["when"]


@pytest.mark.parametrize("task", TASKS, ids=[t["ansible.builtin.include_role"]["name"] for t in TASKS])
def test_role_variables_pass_through(task):
    role = task["ansible.builtin.include_role"]["name"].split(".")[-1]
    given = task.get("vars") or {}
    wanted = derived_keys(role)
    assert sorted(wanted - set(given)) == [], "site.yml does not pass these derived variables to %s" % role
    for name, value in given.items():
        if name in FROM_THE_RUN:
            continue
        assert name in wanted, "%s gets %s, which derive() does not give it" % (role, name)
        text = " ".join(str(value).split())
        if name in OVERRIDDEN:
            assert OVERRIDDEN[name] in text and ("." + name) in text
            continue
        match = PASS_THROUGH.match(text)
        assert match and match.group(1) == name, "%s: %s is not passed through as derived: %s" % (role, name, text)


def test_the_check_can_fail():
    bad = {"vars": {"esxi_gpu_host_driver_version": "{{ x.driver_version }}"}}
    match = PASS_THROUGH.match(bad["vars"]["esxi_gpu_host_driver_version"])
    assert match.group(1) != "esxi_gpu_host_driver_version"
    assert PASS_THROUGH.match("{{ x.y | default('', true) }}") is None


def test_vsphere_link_pins_each_vcenters_own_clusters():
    """The vSphere link runs once per vCenter (play host) and gives drs_gpu_pinning that vCenter's
    derived inputs: the same variables as derived.roles.drs_gpu_pinning, over its own clusters."""
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    play = [p for p in plays if p["name"].startswith("Link 2 of 5")][0]
    assert play["hosts"] == "gpupool_vcenters"
    assert " ".join(play["vars"]["gpupool__pinning"].split()) == "{{ gpupool_vcenter.roles.drs_gpu_pinning }}"
    assert set(play["module_defaults"]["group/gpupool.vcf.vsphere"]) >= {"hostname", "username", "password"}
    for vcenter in DERIVED["vcenters"].values():
        assert set(vcenter["roles"]["drs_gpu_pinning"]) == set(DERIVED["roles"]["drs_gpu_pinning"])
