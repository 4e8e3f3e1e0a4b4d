# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils._inputs and the per-link inputs files: the option checks every module runs before it reads or
changes anything, each module's own checks beside its link (the module passes them to enforce)."""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import ast
import importlib
import pathlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _inputs

ROOT = pathlib.Path(__file__).resolve().parents[5]
MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
# each module's own checks, as its main() passes them to enforce: ``<module>_errors`` in its namespace
CHECKS = dict((name, getattr(importlib.import_module("ansible_collections.gpupool.vcf.plugins.modules." + name),
                             name + "_errors", None)) for name in MODULES)

VSPHERE = dict(hostname="vc", username="u", password="p", port=443, validate_certs=True, ca_file=None, timeout=60)
GOOD = {
    "esxi_host_driver": dict(VSPHERE, host="esx-1", version="550.90.05", bundle=None, component="NVD-AIE-800",
                             evacuate_timeout=1800, power_off_vgpu_vms=False, allow_downgrade=False,
                             reboot_timeout=1800, install_timeout=1800),
    "esxi_gpu_config": dict(VSPHERE, host="esx-1", cluster=None, graphics_type="shared_direct",
                            assignment_policy=None, scheduler=dict(policy="equal_share", time_slice_ms=5, per_gpu=None),
                            reboot=False, evacuate_timeout=1800, reboot_timeout=1800),
    "esxi_maintenance_mode": dict(VSPHERE, host="esx-1", state="present", evacuate_timeout=1800),
    "gpu_capacity": dict(VSPHERE, cluster="gpu", profiles=["nvidia_h100-1-10c"], design=None, design_file=None,
                         kubeconfig=None, context=None, request_timeout=30),
    "gpu_host_info": dict(VSPHERE, cluster="gpu", hosts=None, gather=["gpus"]),
    "gpu_pool_audit": dict(VSPHERE, design=None, design_file="/d.yml", links=None, report=None),
    "gpu_pool_capture": dict(VSPHERE, dest="/c.json", force=False, redact_names=False, salt="", redact_hosts=[],
                             clusters=None, supervisor_kubeconfig=None, supervisor_context=None, kubeconfig=None,
                             context=None, request_timeout=30),
    "gpu_pool_discover": dict(VSPHERE, dest="/d.yml", force=False, name="lab-gpupool", clusters=None,
                              supervisor_kubeconfig=None, supervisor_context=None, request_timeout=30),
    "gpu_pool_design": dict(design=None, design_file="/d.yml", fail_on_error=True),
    "nvidia_license_info": dict(nvidia_smi="nvidia-smi", chroot=None),
    "gpu_usage": dict(prometheus_url="https://prom:9090", bearer_token=None, username=None, start="now-30d",
                      end="now", step="5m", design=None, design_file=None, timeout=60, retries=2),
    "vlcm_component": dict(VSPHERE, cluster="gpu", component="NVD-AIE-800", version="550.90.05", depot_url=None,
                           remediate=False, remediate_timeout=7200),
    "gpu_pool_lease": dict(VSPHERE, clusters=["gpu-h100"], state="acquired", holder=None, ttl=10800, wait=0),
    "gpu_pool_preflight": dict(VSPHERE, design=None, design_file="/d.yml", kubeconfig=None, supervisor_kubeconfig=None,
                               dls_host="dls.example.com", dls_port=443, prometheus_url="https://prom:9090",
                               request_timeout=30),
    "drs_gpu_pinning": dict(VSPHERE, cluster="gpu", behavior="manual", vms=None, exclude=[], purge_stale=True,
                            vm_host_rule=None),
    "ha_gpu_restart": dict(VSPHERE, cluster="gpu",
                           pools=[dict(name="inference", vgpu_profile="nvidia_h100-3-40c", node_pool=None, vm_class=None,
                                       restart_priority="highest")],
                           admission_control=dict(failover_level=1, cpu_percent=25, memory_percent=25), exclude=[],
                           adopt=False),
    "vm_class": dict(VSPHERE, name="gpu-small", state="present", cpu_count=4, memory_mb=16384, cpu_reservation=None,
                     memory_reservation=100, vgpu_profiles=["nvidia_h100-1-10c"], description=None, cluster="gpu",
                     api_form="auto"),
    "supervisor_zone_binding": dict(VSPHERE, supervisor="sv-1", managed_classes=["gpu-a"],
                                    reservations=[dict(zone="zone-a", vm_class="gpu-a", count=0)]),
    "supervisor_namespace": dict(VSPHERE, name="team-a", state="present", cluster="gpu", supervisor=None,
                                 description=None, vm_classes=["gpu-small"], content_libraries=None,
                                 storage_policies=[dict(policy="vsan", limit_mib=0)],
                                 limits=dict(cpu_mhz=None, memory_mib=1024, storage_mib=None),
                                 access=[dict(subject="admins", domain="vsphere.local", type="GROUP", role="OWNER")],
                                 purge_access=False, purge_lists=False),
    "vks_node_pool": dict(cluster_name="gpu-workloads", namespace="gpu-platform", purge=True, retries=5,
                          node_pools=[dict(name="inference", replicas=0, vm_class="gpu-inference",
                                           labels={"gpupool.vcf/pool": "inference"},
                                           taints=[dict(key="nvidia.com/gpu", value="present", effect="NoSchedule")],
                                           **{"class": None})]),
    "guest_objects": dict(priority_classes=[dict(name="gpu-inference", value=100000, preemption_policy="Never",
                                                 description=None)],
                          tenants=[dict(namespace="team-a", gpus=2, labels={"gpupool.vcf/tenant": "team-a"})],
                          quota_name="gpu-quota", gpu_resource="nvidia.com/gpu", mig_resources=[],
                          kinds=["PriorityClass", "Namespace", "ResourceQuota"], request_timeout=30),
    "device_plugin_restart": dict(namespace="gpu-operator", time_slicing={"notebooks": {"replicas": 4}},
                                  node_labels={}, owner="gpupool.vcf/device-plugin",
                                  protected_priority_classes=["gpu-inference"], drain_timeout=600, wait_timeout=300,
                                  request_timeout=30),
    "driver_upgrade_wait": dict(node_selector={"nvidia.com/gpu.present": "true"}, version="550.90.07",
                                step_timeout=900, timeout=7200, settle=120, poll_interval=2.0, request_timeout=30),
    "guest_node_drain": dict(state="drained", vms=[dict(name="node-1", uuid=None)], owner="host-roll/esx-1",
                             owners=None, protected_priority_classes=["gpu-inference"], force=False, timeout=600,
                             request_timeout=30),
    "pool_ready": dict(nodes=["node-1"], vms=None, node_selector={"gpupool.vcf/pool": "inference"}, min_nodes=1,
                       tolerations=[], gpu_resource="nvidia.com/gpu", validator_selector="app=nvidia-operator-validator",
                       validator_namespace=None, skip=[], prometheus_url=None, prometheus_bearer_token=None,
                       prometheus_validate_certs=True, prometheus_ca_path=None,
                       license_metric="DCGM_FI_DEV_VGPU_LICENSE_STATUS", probe_namespace="default",
                       probe_image="busybox:1.36", inference_url=None, inference_model=None, inference_token=None,
                       inference_prompt="Say hello.", inference_validate_certs=True, inference_ca_path=None, timeout=600,
                       step_timeouts={"ready": 1800}, poll_interval=2.0,
                       request_timeout=30),
    "gpu_game_day": dict(cluster_queue="gpupool-training", local_queue="training", namespaces=None, only=None, jobs=2,
                         pods=None, seed=7, grace_period=None, recovery_timeout=600, check_command="true",
                         check_timeout=300, fail_on_loss=True, kueue_api_version="kueue.x-k8s.io/v1beta2",
                         poll_interval=2.0, request_timeout=30),
    "nls_appliance_deploy": dict(VSPHERE, ovf="/img/dls.ova", nodes=[dict(name="dls-1", ovf_properties={"ip0": "10.0.0.1"}),
                                                                     dict(name="dls-2", ovf_properties={})],
                                 cluster="mgmt", datastore="ds", network=None, datacenter=None, disk_provisioning="thin",
                                 power_on=True, cluster_settings=True, anti_affinity_rule=None, restart_priority="high",
                                 drs_behavior="partiallyAutomated", upload_timeout=3600),
    "nls_appliance_info": dict(dls_host="dls", port=443, username="u", password="p", validate_certs=True, ca_file=None,
                               request_timeout=30, wait_seconds=0, expect_nodes=2, token_path=None,
                               renew_before_days=30, gpu_nodes=["node-1"]),
    "gpu_what_if": dict(design={"pools": []}, design_file=None, record_file="/r/week.yml", record=None, generate=None,
                        prometheus_url=None, record_hours=168, replay=True, kubeconfig="/k/replay", host=None,
                        compression=600, poll_interval=0.25, request_timeout=30),
    "dls_client_token": dict(dls_host="dls", port=443, username="u", password="p", dest="/t/x.tok", expiry_days=365,
                             renew_before_days=30, address_type="fqdn", leasing_port=443, validate_certs=True,
                             ca_file=None, force=False, timeout=30),
}


def errors(module, **changes):
    params = dict(GOOD[module])
    params.update(changes)
    return _inputs.check(module, params, CHECKS[module])


def _enforce_calls(name):
    """The enforce(...) calls of a module's source: [(module name given, name of the checks function)]."""
    tree = ast.parse((ROOT / "plugins" / "modules" / ("%s.py" % name)).read_text())
    return [(call.args[1].value, call.args[2].id if len(call.args) > 2 and isinstance(call.args[2], ast.Name) else None)
            for call in ast.walk(tree)
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "enforce"]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_runs_its_own_checks_from_its_link(name):
    assert _enforce_calls(name) == [(name, name + "_errors")], (
        "%s: main() calls enforce(module, %r, %s_errors) once, with %s_errors(params) imported from the "
        "inputs file of its link (pure/_<link>_inputs.py)" % (name, name, name, name))
    own = CHECKS[name]
    assert callable(own), "%s has no %s_errors" % (name, name)
    # the checks are pure logic of the module's link, not of the shared machinery or the module itself
    assert own.__module__.startswith("ansible_collections.gpupool.vcf.plugins.module_utils.pure._"), own.__module__
    assert own.__module__ != _inputs.__name__


def test_every_module_has_good_params_here():
    assert sorted(GOOD) == MODULES


def test_the_shared_machinery_imports_no_link():
    """_inputs is imported by every module: it holds no module's checks and imports only the name rules."""
    tree = ast.parse(pathlib.Path(_inputs.__file__).read_text())
    imported = sorted(node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module != "__future__")
    assert imported == ["ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names"]
    assert not [name for name in vars(_inputs) if name.endswith("_errors") and name[:-len("_errors")] in MODULES]


def test_items_must_be_a_list_or_a_mapping():
    out = []
    assert _inputs.items({"a": [1]}, "a", out) == [1] and _inputs.items({}, "a", out) == []
    assert _inputs.items({"a": ""}, "a", out) == [] and out == []
    assert _inputs.items({"a": "x"}, "a", out) == [] and out == ["a must be a list"]
    assert _inputs.items({"m": [1]}, "m", out, dict) == {} and out[-1] == "m must be a mapping"
    assert _inputs.items({"m": 1}, "m", out, dict, "a mapping of name -> value") == {}
    assert out[-1] == "m must be a mapping of name -> value"
    assert _inputs.items({"m": {"k": 1}}, "m", out, dict) == {"k": 1} and len(out) == 3


@pytest.mark.parametrize("module", sorted(GOOD))
def test_good_params_pass(module):
    assert _inputs.check(module, GOOD[module], CHECKS[module]) == []


@pytest.mark.parametrize("module, option", [
    ("esxi_host_driver", "evacuate_timeout"), ("esxi_host_driver", "reboot_timeout"),
    ("esxi_host_driver", "install_timeout"), ("esxi_host_driver", "timeout"),
    ("esxi_gpu_config", "evacuate_timeout"), ("esxi_gpu_config", "reboot_timeout"),
    ("esxi_maintenance_mode", "evacuate_timeout"), ("vlcm_component", "remediate_timeout"),
    ("dls_client_token", "timeout"), ("vm_class", "timeout"),
])
@pytest.mark.parametrize("value", [0, -1])
def test_timeouts_must_be_positive(module, option, value):
    found = errors(module, **{option: value})
    assert found == ["%s must be a whole number of seconds, 1 or more, not %d" % (option, value)]


def test_any_timeout_option_is_checked_even_a_new_one():
    assert _inputs.timeout_errors({"request_timeout": 0, "timeout": None, "other": 0}) == [
        "request_timeout must be a whole number of seconds, 1 or more, not 0"]
    assert _inputs.timeout_errors({"request_timeout": True}) != []
    assert _inputs.timeout_errors({"wait_timeout": 1}) == []


def test_guest_node_drain():
    assert errors("guest_node_drain", owner=" ") == ["owner must not be empty"]
    assert errors("guest_node_drain", vms=[dict(name="", uuid=None)]) == ["vms[0].name must not be empty"]
    assert errors("guest_node_drain", owners=["a", ""]) == [
        "owners[1] is empty; give the cordoned-by values whose nodes may be uncordoned"]
    assert errors("guest_node_drain", protected_priority_classes=[""]) == [
        "protected_priority_classes[0] is empty; give PriorityClass names"]
    assert errors("guest_node_drain", timeout=0) == ["timeout must be a whole number of seconds, 1 or more, not 0"]


def test_retries():
    assert errors("vks_node_pool", retries=-1) == ["retries must be 0 or more, not -1"]
    assert errors("vks_node_pool", retries=0) == []
    assert _inputs.retries_errors({"connect_retries": -2}) == ["connect_retries must be 0 or more, not -2"]


@pytest.mark.parametrize("port, ok", [(0, False), (65536, False), (-1, False), (1, True), (65535, True)])
def test_port(port, ok):
    assert (errors("vm_class", port=port) == []) is ok
    assert (errors("dls_client_token", port=port) == []) is ok


@pytest.mark.parametrize("module, option", [
    ("esxi_host_driver", "host"), ("esxi_host_driver", "version"), ("esxi_host_driver", "bundle"),
    ("esxi_host_driver", "component"), ("esxi_gpu_config", "host"), ("esxi_maintenance_mode", "host"),
    ("gpu_host_info", "cluster"), ("gpu_pool_audit", "design_file"), ("gpu_pool_design", "design_file"),
    ("nvidia_license_info", "nvidia_smi"), ("vlcm_component", "cluster"), ("vlcm_component", "version"),
    ("vlcm_component", "component"), ("drs_gpu_pinning", "cluster"), ("dls_client_token", "dls_host"),
    ("dls_client_token", "username"), ("dls_client_token", "password"), ("dls_client_token", "dest"),
    ("supervisor_namespace", "cluster"), ("vm_class", "cluster"),
])
@pytest.mark.parametrize("value", ["", "  "])
def test_empty_strings(module, option, value):
    assert "%s must not be empty" % option in errors(module, **{option: value})


@pytest.mark.parametrize("module", ["esxi_host_driver", "vlcm_component"])
@pytest.mark.parametrize("version", ["latest", "550", "v550.90.05", "550.90.05-", "5.5.0.0"])
def test_versions_that_do_not_parse(module, version):
    found = errors(module, version=version)
    assert len(found) == 1 and "Invalid NVIDIA driver version %r" % version in found[0]
    assert "550.90.05-1OEM" in found[0] and "version" in found[0].split(":")[0]


def test_scheduler():
    assert errors("esxi_gpu_config", scheduler=dict(policy=None, time_slice_ms=5, per_gpu=None)) == [
        "scheduler.time_slice_ms needs scheduler.policy (equal_share or fixed_share)"]
    too_long = dict(policy="equal_share", time_slice_ms=31, per_gpu=None)
    assert "outside 1-30" in errors("esxi_gpu_config", scheduler=too_long)[0]
    assert "best_effort takes no time_slice_ms" in errors(
        "esxi_gpu_config", scheduler=dict(policy="best_effort", time_slice_ms=2, per_gpu=None))[0]
    bad_pci = dict(policy=None, time_slice_ms=None, per_gpu=[dict(pci_id="zz", policy="equal_share", time_slice_ms=None)])
    assert errors("esxi_gpu_config", scheduler=bad_pci)[0].startswith("scheduler.per_gpu")
    assert "reboot is only allowed with host" in errors("esxi_gpu_config", host=None, cluster="gpu", reboot=True)[0]


def test_drs_gpu_pinning():
    # an empty list pins nothing; with purge_stale it is a cleanup run (only stale overrides the collection set go)
    assert errors("drs_gpu_pinning", vms=[], purge_stale=True) == []
    assert errors("drs_gpu_pinning", vms=["a", ""]) == ["vms must not hold empty names (item 1)"]
    assert errors("drs_gpu_pinning", exclude=["", " "]) == ["exclude must not hold empty names (items 0, 1)"]
    rule = dict(name="", vm_group=None, host_group="", mandatory=False)
    assert errors("drs_gpu_pinning", vm_host_rule=rule) == ["vm_host_rule.name must not be empty",
                                                            "vm_host_rule.host_group must not be empty"]


def test_vm_class():
    found = errors("vm_class", name="GPU_Small")
    assert found[0].startswith("name 'GPU_Small' is not a DNS label (the VM class name") and "'gpu-small'" in found[0]
    assert errors("vm_class", cpu_count=0) == ["cpu_count must be 1 or more, not 0"]
    assert errors("vm_class", memory_mb=-1) == ["memory_mb must be 1 or more MiB, not -1"]
    assert errors("vm_class", memory_reservation=101) == ["memory_reservation must be a percentage from 0 to 100, not 101"]
    assert errors("vm_class", vgpu_profiles=[""]) == ["vgpu_profiles must not hold empty names (item 0)"]


def test_supervisor_namespace():
    assert "'team-a'" in errors("supervisor_namespace", name="Team_A")[0]
    assert "VM class name" in errors("supervisor_namespace", vm_classes=["Bad_Class"])[0]
    assert errors("supervisor_namespace", limits=dict(cpu_mhz=-1, memory_mib=None, storage_mib=None)) == [
        "limits.cpu_mhz must be 0 or more, not -1"]
    assert errors("supervisor_namespace", storage_policies=[dict(policy="", limit_mib=-5)]) == [
        "storage_policies[0].policy must not be empty", "storage_policies[0].limit_mib must be 0 or more MiB, not -5"]
    access = [dict(subject=" ", domain="vsphere.local", type="USER", role="EDIT")]
    assert errors("supervisor_namespace", access=access) == ["access[0].subject must not be empty"]


def test_device_plugin_restart_and_driver_upgrade_wait():
    assert errors("device_plugin_restart", time_slicing={"notebooks": {"replicas": 0}}) == [
        "time_slicing.notebooks.replicas must be a whole number of at least 1, not 0"]
    assert errors("driver_upgrade_wait", settle=-1, poll_interval=True) == [
        "settle must be 0 or more, not -1", "poll_interval must be a number of seconds above 0, not True"]


def test_supervisor_zone_binding():
    entry = dict(zone="zone-a", vm_class="gpu-a", count=2)
    assert errors("supervisor_zone_binding", reservations=[entry, dict(entry, zone="zone-b")]) == []
    assert errors("supervisor_zone_binding", reservations=[entry, dict(entry, count=1)]) == [
        "reservations[1]: gpu-a in zone zone-a is given twice (also reservations[0]); give one entry with the sum"]
    assert errors("supervisor_zone_binding", reservations=[dict(entry, count=-1, vm_class=" ")]) == [
        "reservations[0].vm_class must not be empty", "reservations[0].count must be 0 or more, not -1"]


def pool(**changes):
    base = dict(GOOD["vks_node_pool"]["node_pools"][0])
    base.update(changes)
    return base


def test_vks_node_pool_empty_purge():
    found = errors("vks_node_pool", node_pools=[])
    assert found == ["node_pools is empty and purge is true, which would remove every node pool of the Cluster; "
                     "list the node pools to keep, or set purge false"]
    assert errors("vks_node_pool", node_pools=[], purge=False) == []


def test_vks_node_pool_names_and_values():
    assert "'gpu-workloads'" in errors("vks_node_pool", cluster_name="GPU_Workloads")[0]
    assert "namespace 'Gpu'" in errors("vks_node_pool", namespace="Gpu")[0]
    assert "node_pools[0].name 'Infer_1'" in errors("vks_node_pool", node_pools=[pool(name="Infer_1")])[0]
    assert errors("vks_node_pool", node_pools=[pool(replicas=-1)]) == [
        "node_pools[0].replicas must be 0 or more nodes, not -1"]
    assert "given twice" in errors("vks_node_pool", node_pools=[pool(), pool()])[0]
    assert "node_pools[0].vm_class 'GPU'" in errors("vks_node_pool", node_pools=[pool(vm_class="GPU")])[0]
    assert "node_pools[0].labels key 'bad key'" in errors("vks_node_pool", node_pools=[pool(labels={"bad key": "v"})])[0]
    assert "value 'a b'" in errors("vks_node_pool", node_pools=[pool(labels={"k": "a b"})])[0]
    taints = [dict(key="", value=None, effect="NoSchedule"), dict(key="k", value="-x", effect="NoSchedule")]
    found = errors("vks_node_pool", node_pools=[pool(taints=taints)])
    assert [f.split(" ")[0] for f in found] == ["node_pools[0].taints[0].key", "node_pools[0].taints[1].value"]


def test_dls_client_token_days():
    assert errors("dls_client_token", expiry_days=0) == ["expiry_days must be 1 or more days, not 0"]
    assert errors("dls_client_token", renew_before_days=365) == [
        "renew_before_days must be from 0 to 364 days (below expiry_days), not 365"]
    assert errors("dls_client_token", renew_before_days=-1)[0].startswith("renew_before_days must be")


def test_message_and_enforce():
    assert _inputs.message("vm_class", []) is None
    text = _inputs.message("vm_class", ["a", "b"])
    assert text == "Invalid input for vm_class: a; b. Nothing was changed."

    class Module(object):
        def __init__(self, params):
            self.params = params
            self.failed = None

        def fail_json(self, **kwargs):
            self.failed = kwargs

    ok = Module(GOOD["vm_class"])
    _inputs.enforce(ok, "vm_class", CHECKS["vm_class"])
    assert ok.failed is None
    bad = Module(dict(GOOD["vm_class"], timeout=0))
    _inputs.enforce(bad, "vm_class", CHECKS["vm_class"])
    assert bad.failed["msg"].startswith("Invalid input for vm_class: timeout must be")
    assert bad.failed["invalid_input"] == ["timeout must be a whole number of seconds, 1 or more, not 0"]
    # the module's own checks join the shared ones, in one message
    both = Module(dict(GOOD["vm_class"], timeout=0, cpu_count=0))
    _inputs.enforce(both, "vm_class", CHECKS["vm_class"])
    assert both.failed["invalid_input"] == ["timeout must be a whole number of seconds, 1 or more, not 0",
                                            "cpu_count must be 1 or more, not 0"]
    # without checks of its own, only the shared ones run
    alone = Module(dict(GOOD["vm_class"], cpu_count=0))
    _inputs.enforce(alone, "vm_class")
    assert alone.failed is None


def test_enforce_names_an_aliased_option_once():
    class Module(object):
        argument_spec = dict(request_timeout=dict(type="int", aliases=["timeout"]), dls_host=dict(type="str"))

        def __init__(self):
            self.params = dict(GOOD["dls_client_token"], request_timeout=0)
            self.params["timeout"] = 0
            self.failed = None

        def fail_json(self, **kwargs):
            self.failed = kwargs

    module = Module()
    _inputs.enforce(module, "dls_client_token", CHECKS["dls_client_token"])
    assert module.failed["invalid_input"] == ["request_timeout must be a whole number of seconds, 1 or more, not 0"]


def test_guest_objects():
    assert errors("guest_objects", quota_name="") == ["quota_name must not be empty"]
    pcs = [dict(name="system-gpu", value=1), dict(name="Bad_Name", value=1), dict(name="ok", value=2 ** 31),
           dict(name="ok", value=1)]
    found = errors("guest_objects", priority_classes=pcs)
    assert found[0].startswith("priority_classes[0].name 'system-gpu' is not a PriorityClass name Kubernetes accepts: "
                               "names starting with system-")
    assert found[1].startswith("priority_classes[1].name 'Bad_Name' is not a PriorityClass name")
    assert found[2].startswith("priority_classes[2].value: 2147483648 is above")
    assert found[3] == "priority_classes[3].name 'ok' is given twice; PriorityClass names must be unique"
    tenants = [dict(gpus=1), dict(namespace="Team_A"), dict(namespace="b"), dict(namespace="b", labels={"bad key!": "x"})]
    found = errors("guest_objects", tenants=tenants)
    assert found[0] == "tenants[0] needs a namespace (the tenant's namespace name)"
    assert found[1].startswith("tenants[1].namespace 'Team_A' is not a DNS label")
    assert found[2] == "tenants[3].namespace 'b' is given twice; each tenant needs its own"
    assert found[3].startswith("tenants[3].labels key 'bad key!' is not a Kubernetes label key") and len(found) == 4


def test_nls_appliance_deploy():
    assert errors("nls_appliance_deploy", nodes=[]) == ["nodes must list 1 node or 2 (the HA pair), not 0"]
    three = [dict(name="a", ovf_properties={}), dict(name="b", ovf_properties={}), dict(name="c", ovf_properties={})]
    assert errors("nls_appliance_deploy", nodes=three) == ["nodes must list 1 node or 2 (the HA pair), not 3"]
    assert errors("nls_appliance_deploy", nodes=[dict(name="a", ovf_properties={}), dict(name="a", ovf_properties={})]) \
        == ["nodes[1].name 'a' is given twice; the nodes need two names"]
    assert errors("nls_appliance_deploy", nodes=[dict(name=" ", ovf_properties={" ": "x"})]) == [
        "nodes[0].name must not be empty", "nodes[0].ovf_properties has an empty key"]
    assert errors("nls_appliance_deploy", datastore="", upload_timeout=0) == [
        "upload_timeout must be a whole number of seconds, 1 or more, not 0", "datastore must not be empty"]


def test_nls_appliance_info():
    assert errors("nls_appliance_info", wait_seconds=-1) == ["wait_seconds must be 0 or more seconds, not -1"]
    assert errors("nls_appliance_info", expect_nodes=3) == ["expect_nodes must be from 1 to 2, not 3"]
    assert errors("nls_appliance_info", gpu_nodes=[""], dls_host="") == [
        "dls_host must not be empty", "gpu_nodes must not hold empty names (item 0)"]
    assert errors("nls_appliance_info", renew_before_days=-2) == ["renew_before_days must be 0 or more days, not -2"]


def test_url_errors_name_each_key_that_is_not_an_http_url_and_skip_the_absent_ones():
    params = dict(prometheus_url="prometheus:9090", inference_url="https://llm.example:8443/v1", other=None)
    assert _inputs.url_errors(params, ("prometheus_url", "inference_url", "other")) == [
        "prometheus_url must be an http:// or https:// URL, not 'prometheus:9090'"]
    assert _inputs.url_errors(dict(prometheus_url=""), ("prometheus_url",)) == [
        "prometheus_url must be an http:// or https:// URL, not ''"]
    assert _inputs.url_errors({}, ("prometheus_url",)) == []
