"""The bad-input matrix: every module, the roles, the design and site.yml given a bad input fail with a
message that names the option and what it accepts, and change nothing.

Modules run in-process (the same AnsibleModule argument handling as under ansible-playbook, without
a process per case), one case at a time, each between two snapshots of the vSphere simulator (every
host's GPU state, the VM classes and namespaces of the REST API, the cluster's DRS overrides) and
two reads of its request counters: no case may send a changing request, and the snapshots must be
equal. Kubernetes and DLS options point at a recording stub that answers every request with 503:
a case must not reach it at all. The roles run in one playbook (one block per case, the counters
read after each), site.yml with two bad designs.
"""
import contextlib
import copy
import importlib
import io
import json
import pathlib
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
import yaml
from pyVim import connect
from pyVmomi import vim

from tests.lib.ansible_run import run_playbook

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19
    from unittest import mock

    from ansible.module_utils import basic

    @contextlib.contextmanager
    def patch_module_args(args):
        with mock.patch.object(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()):
            yield

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
DRIVER = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_%s_23912345.zip" % DRIVER
HOSTS = ("esx-h100-01", "esx-h100-02")
FLEET = {
    "clusters": [{"name": "gpu-h100", "supervisor": True,
                  # infer-01's MIG-backed vGPU needs a GPU in MIG mode: the first card of esx-h100-01
                  "hosts": [{"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 2},
                             "driver_version": DRIVER, "mig": [0]},
                            {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 2},
                             "driver_version": DRIVER}]}],
    "vms": [{"name": "infer-01", "host": "esx-h100-01", "vgpu": ["nvidia_h100-1-10c"]},
            {"name": "plain-01", "host": "esx-h100-02"}],
}
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
NAMESPACES = "/api/vcenter/namespaces/instances"
# SOAP methods that only read (or open and close the session); any other one is a change
READ_SOAP = {"RetrieveServiceContent", "Login", "Logout", "RetrieveProperties", "RetrievePropertiesEx",
             "ContinueRetrievePropertiesEx", "CancelRetrievePropertiesEx", "CreateContainerView", "DestroyView",
             "CreatePropertyCollector", "DestroyPropertyCollector", "CurrentTime", "SessionIsActive",
             "FetchSoftwarePackages", "QueryConfiguredModuleOptionString", "QueryOptions", "QueryVsanObjects"}


# ---------------------------------------------------------------------------------------
# the cases: (id, module, args, words the message must hold)
# ---------------------------------------------------------------------------------------

def _design(**changes):
    design = copy.deepcopy(EXAMPLE)
    for path, value in changes.items():
        node = design
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        node[keys[-1]] = value
    return design


BAD_POOL = _design(pools__0__name="GPU_Inference", tenants__0__gpu_quota={"GPU_Inference": 4},
                   tenants__1__gpu_quota={"training": 8, "GPU_Inference": 2, "notebooks": 8})
BAD_TENANT = _design(tenants__1__name="Team_A")
BAD_NAME = _design(name="../../x")
LONG_POOL = "p" * 60
LONG_VM_CLASS = _design(pools__0__name=LONG_POOL, tenants__0__gpu_quota={LONG_POOL: 4},
                        tenants__1__gpu_quota={"training": 8, LONG_POOL: 2, "notebooks": 8})
BAD_LABEL = copy.deepcopy(EXAMPLE)
BAD_LABEL["pools"][2]["node_pool"]["labels"] = {"Bad Key": "x"}
DNS = "lower-case letters, digits and '-'"
SECONDS = "1 or more"
POSITIVE = ("1 or more", "above 0")
POOL = {"name": "inference", "replicas": 1, "vm_class": "gpu-inference"}
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}

NLS_DEPLOY = dict(ovf="/nonexistent/dls.ova", cluster="gpu-h100", datastore="LocalDS_0", nodes=[{"name": "dls-1"}])

VSPHERE_CASES = [
    ("driver-evacuate-timeout-0", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05",
                                                           evacuate_timeout=0), ["evacuate_timeout", SECONDS]),
    ("driver-reboot-timeout-negative", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05",
                                                                reboot_timeout=-1), ["reboot_timeout", SECONDS]),
    ("driver-install-timeout-0", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05",
                                                          install_timeout=0), ["install_timeout", SECONDS]),
    ("driver-connection-timeout-0", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05", timeout=0),
     ["timeout", POSITIVE]),
    ("driver-port-0", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05", port=0),
     ["port", "1 to 65535"]),
    ("driver-empty-host", "esxi_host_driver", dict(host="", version="550.90.05"), ["host must not be empty"]),
    ("driver-version-latest", "esxi_host_driver", dict(host="esx-h100-01", version="latest", bundle=BUNDLE),
     ["version", "'latest'", "550.90.05-1OEM"]),
    ("driver-version-empty", "esxi_host_driver", dict(host="esx-h100-01", version=""), ["version must not be empty"]),
    ("driver-unknown-option", "esxi_host_driver", dict(host="esx-h100-01", version="550.90.05", reboot=True),
     ["reboot", "Supported parameters include"]),
    ("gpu-config-unknown-scheduler", "esxi_gpu_config", dict(host="esx-h100-01", scheduler={"policy": "round_robin"}),
     ["policy", "best_effort, equal_share, fixed_share", "round_robin"]),
    ("gpu-config-unknown-graphics", "esxi_gpu_config", dict(host="esx-h100-01", graphics_type="vsga"),
     ["graphics_type", "shared_direct, shared"]),
    ("gpu-config-time-slice-31", "esxi_gpu_config", dict(host="esx-h100-01",
                                                         scheduler={"policy": "equal_share", "time_slice_ms": 31}),
     ["time_slice_ms", "1-30"]),
    ("gpu-config-time-slice-without-policy", "esxi_gpu_config", dict(host="esx-h100-01",
                                                                     scheduler={"time_slice_ms": 5}),
     ["time_slice_ms needs scheduler.policy", "equal_share or fixed_share"]),
    ("gpu-config-best-effort-time-slice", "esxi_gpu_config",
     dict(host="esx-h100-01", scheduler={"policy": "best_effort", "time_slice_ms": 2}),
     ["best_effort takes no time_slice_ms", "equal_share or fixed_share"]),
    ("gpu-config-bad-pci", "esxi_gpu_config",
     dict(host="esx-h100-01", scheduler={"per_gpu": [{"pci_id": "zz", "policy": "equal_share"}]}),
     ["scheduler.per_gpu", "zz"]),
    ("gpu-config-reboot-cluster", "esxi_gpu_config", dict(cluster="gpu-h100", graphics_type="shared_direct",
                                                          reboot=True), ["reboot is only allowed with host"]),
    ("gpu-config-reboot-timeout-0", "esxi_gpu_config", dict(host="esx-h100-01", graphics_type="shared_direct",
                                                            reboot_timeout=0), ["reboot_timeout", SECONDS]),
    ("gpu-config-mig-index-64", "esxi_gpu_config", dict(host="esx-h100-01", mig_mode="enabled", mig_gpu_indexes=[64]),
     ["mig_gpu_indexes", "64"]),
    ("gpu-config-ssh-port-0", "esxi_gpu_config", dict(host="esx-h100-01", mig_mode="enabled", ssh={"port": 0}),
     ["ssh.port", "65535"]),
    ("gpu-config-mig-geometry-not-a-list", "esxi_gpu_config", dict(host="esx-h100-01", mig_geometry="0,1"),
     ["mig_geometry", "list per host position", "mapping of host names"]),
    ("gpu-config-mig-geometry-and-mode", "esxi_gpu_config",
     dict(host="esx-h100-01", mig_geometry=[[0]], mig_mode="enabled"), ["mutually exclusive", "mig_geometry|mig_mode"]),
    ("gpu-config-host-and-cluster", "esxi_gpu_config", dict(host="esx-h100-01", cluster="gpu-h100"),
     ["mutually exclusive", "host|cluster"]),
    ("maintenance-evacuate-timeout-0", "esxi_maintenance_mode", dict(host="esx-h100-01", evacuate_timeout=0),
     ["evacuate_timeout", SECONDS]),
    ("maintenance-empty-host", "esxi_maintenance_mode", dict(host=" "), ["host must not be empty"]),
    ("maintenance-unknown-state", "esxi_maintenance_mode", dict(host="esx-h100-01", state="maintenance"),
     ["state", "present, absent"]),
    ("nls-deploy-three-nodes", "nls_appliance_deploy",
     dict(NLS_DEPLOY, nodes=[{"name": "dls-1"}, {"name": "dls-2"}, {"name": "dls-3"}]),
     ["nodes must list 1 node or 2 (the HA pair), not 3"]),
    ("nls-deploy-same-name-twice", "nls_appliance_deploy", dict(NLS_DEPLOY, nodes=[{"name": "dls-1"}, {"name": "dls-1"}]),
     ["nodes[1].name 'dls-1' is given twice"]),
    ("nls-deploy-upload-timeout-0", "nls_appliance_deploy", dict(NLS_DEPLOY, upload_timeout=0),
     ["upload_timeout", SECONDS]),
    ("nls-deploy-unknown-priority", "nls_appliance_deploy", dict(NLS_DEPLOY, restart_priority="urgent"),
     ["restart_priority", "lowest, low, medium, high, highest"]),
    ("host-info-empty-cluster", "gpu_host_info", dict(cluster=""), ["cluster must not be empty"]),
    ("host-info-empty-host-name", "gpu_host_info", dict(hosts=["esx-h100-01", ""]), ["hosts", "empty", "item 1"]),
    ("host-info-unknown-gather", "gpu_host_info", dict(cluster="gpu-h100", gather=["driver", "bogus"]),
     ["gather", "driver, scheduler, vms", "bogus"]),
    ("vlcm-remediate-timeout-0", "vlcm_component", dict(cluster="gpu-h100", version="550.90.05", remediate=True,
                                                        remediate_timeout=0), ["remediate_timeout", SECONDS]),
    ("vlcm-version-latest", "vlcm_component", dict(cluster="gpu-h100", version="latest"),
     ["version", "'latest'", "550.90.05-1OEM"]),
    ("vlcm-empty-cluster", "vlcm_component", dict(cluster="", version="550.90.05"), ["cluster must not be empty"]),
    ("drs-empty-vm-name", "drs_gpu_pinning", dict(cluster="gpu-h100", vms=["infer-01", " "]),
     ["vms must not hold empty names", "item 1"]),
    ("drs-unknown-behavior", "drs_gpu_pinning", dict(cluster="gpu-h100", behavior="fullyAutomated"),
     ["behavior", "manual, partiallyAutomated"]),
    ("drs-empty-exclude", "drs_gpu_pinning", dict(cluster="gpu-h100", exclude=[""]), ["exclude", "empty"]),
    ("drs-empty-rule-name", "drs_gpu_pinning", dict(cluster="gpu-h100", vm_host_rule={"name": ""}),
     ["vm_host_rule.name must not be empty"]),
    ("ha-empty-cluster", "ha_gpu_restart", dict(cluster=""), ["cluster must not be empty"]),
    ("ha-pool-twice", "ha_gpu_restart", dict(cluster="gpu-h100", pools=[
        dict(name="inference", vgpu_profile="nvidia_h100-1-10c", restart_priority="highest")] * 2),
     ["pools: inference named more than once"]),
    ("ha-percent-over-100", "ha_gpu_restart", dict(cluster="gpu-h100", admission_control=dict(
        failover_level=1, cpu_percent=120, memory_percent=25)), ["admission_control.cpu_percent", "1 to 100", "120"]),
    ("vm-class-upper-case-name", "vm_class", dict(name="GPU_Small", cpu_count=4, memory_mb=16384),
     ["name 'GPU_Small'", "'gpu-small'", DNS]),
    ("vm-class-64-characters", "vm_class", dict(name="g" * 64, cpu_count=4, memory_mb=16384),
     ["64 characters, over 63", DNS]),
    ("vm-class-cpu-0", "vm_class", dict(name="gpu-small", cpu_count=0, memory_mb=16384), ["cpu_count", "1 or more"]),
    ("vm-class-reservation-150", "vm_class", dict(name="gpu-small", memory_reservation=150),
     ["memory_reservation", "from 0 to 100"]),
    ("vm-class-unknown-api-form", "vm_class", dict(name="gpu-small", api_form="legacy"),
     ["api_form", "auto, config_spec, devices"]),
    ("namespace-upper-case-name", "supervisor_namespace", dict(name="Team_A", cluster="gpu-h100"),
     ["name 'Team_A'", "'team-a'"]),
    ("namespace-negative-limit", "supervisor_namespace", dict(name="team-b", cluster="gpu-h100",
                                                              limits={"cpu_mhz": -1}), ["limits.cpu_mhz", "0 or more"]),
    ("namespace-unknown-role", "supervisor_namespace",
     dict(name="team-b", cluster="gpu-h100", access=[{"subject": "a", "domain": "vsphere.local", "role": "ADMIN"}]),
     ["role", "OWNER, EDIT, VIEW"]),
    ("namespace-bad-vm-class", "supervisor_namespace", dict(name="team-b", cluster="gpu-h100",
                                                            vm_classes=["Bad_Class"]), ["'Bad_Class'", "'bad-class'"]),
    ("namespace-cluster-and-supervisor", "supervisor_namespace", dict(name="team-b", cluster="gpu-h100",
                                                                      supervisor="x"), ["mutually exclusive"]),
    ("zone-binding-negative-count", "supervisor_zone_binding",
     dict(supervisor="supervisor-1", reservations=[dict(zone="zone-a", vm_class="gpu-inference", count=-1)]),
     ["reservations[0].count", "0 or more"]),
    ("zone-binding-empty-zone", "supervisor_zone_binding",
     dict(supervisor="supervisor-1", reservations=[dict(zone=" ", vm_class="gpu-inference", count=2)]),
     ["reservations[0].zone must not be empty"]),
    ("namespace-reservation-negative-count", "supervisor_namespace",
     dict(name="team-a", cluster="gpu-h100", vm_reservations=[dict(zone="zone-a", vm_class="gpu-inference", count=-1)]),
     ["vm_reservations[0].count", "0 or more"]),
    ("namespace-reservation-empty-zone", "supervisor_namespace",
     dict(name="team-a", cluster="gpu-h100", vm_reservations=[dict(zone=" ", vm_class="gpu-inference", count=1)]),
     ["vm_reservations[0].zone must not be empty"]),
    ("zone-binding-supervisor-and-cluster", "supervisor_zone_binding",
     dict(supervisor="supervisor-1", cluster="gpu-h100", reservations=[dict(zone="zone-a", vm_class="gpu-inference", count=1)]),
     ["mutually exclusive", "supervisor", "cluster"]),
    ("zone-binding-class-twice-in-a-zone", "supervisor_zone_binding",
     dict(supervisor="supervisor-1", reservations=[dict(zone="zone-a", vm_class="gpu-inference", count=2)] * 2),
     ["reservations[1]", "gpu-inference in zone zone-a is given twice", "the sum"]),
    ("audit-design-with-bad-pool-name", "gpu_pool_audit", dict(design=BAD_POOL),
     ["GPU_Inference", "'gpu-inference'", "dns_label"]),
    ("audit-timeout-0", "gpu_pool_audit", dict(design=EXAMPLE, timeout=0), ["timeout", POSITIVE]),
    ("capacity-empty-cluster", "gpu_capacity", dict(cluster=" "), ["cluster must not be empty"]),
    ("capacity-bad-profile", "gpu_capacity", dict(profiles=["nvidia_h100-1-10c", "h100-80c"]),
     ["profiles", "'h100-80c'", "nvidia_h100xm-80c"]),
    ("capacity-request-timeout-0", "gpu_capacity", dict(kubeconfig="/nowhere", request_timeout=0),
     ["request_timeout", SECONDS]),
    ("capacity-design-not-whole-gpus", "gpu_capacity", dict(design=_design(pools__0__gpus_per_node="two")),
     ["design has errors", "pools.inference.gpus_per_node", "'two'", "whole number"]),
    ("capacity-knee-window-past-range", "gpu_capacity",
     dict(prometheus_url="http://prom:9090", knee_range="1h", knee_window="2h"),
     ["knee_window (7200 s) is longer than knee_range (3600 s)"]),
    ("capacity-prometheus-not-a-url", "gpu_capacity", dict(prometheus_url="prom:9090"),
     ["prometheus_url must be an http:// or https:// URL"]),
]

VSPHERE_CASES += [
    ("lease-ttl-0", "gpu_pool_lease", dict(clusters=["gpu-h100"], ttl=0), ["ttl must be 60 or more seconds"]),
    ("lease-empty-cluster", "gpu_pool_lease", dict(clusters=["gpu-h100", ""]), ["clusters must not hold empty names"]),
    ("preflight-dls-port-0", "gpu_pool_preflight", dict(design_file=str(ROOT / "examples" / "design.yml"), dls_host="dls.example.com", dls_port=0),
     ["dls_port must be from 1 to 65535, not 0"]),
    ("preflight-prometheus-not-a-url", "gpu_pool_preflight", dict(design_file=str(ROOT / "examples" / "design.yml"), prometheus_url="prom:9090"),
     ["prometheus_url must be an http:// or https:// URL"]),
    ("discover-empty-dest", "gpu_pool_discover", dict(dest=""), ["dest must not be empty"]),
    ("discover-empty-cluster-name", "gpu_pool_discover", dict(dest="/nonexistent/discovered.yml", clusters=["gpu-h100", ""]),
     ["clusters must not hold empty names (item 1)"]),
    ("capture-empty-dest", "gpu_pool_capture", dict(dest=""), ["dest must not be empty"]),
    ("capture-empty-redact-host", "gpu_pool_capture", dict(dest="/nonexistent/capture.json", redact_hosts=["vc-01", ""]),
     ["redact_hosts must not hold empty names (item 1)"]),
]

STUB_CASES = [
    ("vks-empty-pools-with-purge", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                         node_pools=[], purge=True),
     ["node_pools is empty", "purge", "set purge false"]),
    ("vks-retries-negative", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                   node_pools=[POOL], retries=-1), ["retries", "0 or more"]),
    ("vks-replicas-negative", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                    node_pools=[dict(POOL, replicas=-1)]),
     ["node_pools[0].replicas", "0 or more"]),
    ("vks-upper-case-cluster", "vks_node_pool", dict(cluster_name="GPU_Workloads", namespace="gpu-platform",
                                                     node_pools=[POOL]), ["cluster_name", "'gpu-workloads'"]),
    ("vks-unknown-taint-effect", "vks_node_pool",
     dict(cluster_name="gpu-workloads", namespace="gpu-platform", node_pools=[dict(POOL, taints=[dict(TAINT, effect="NoRun")])]),
     ["effect", "NoSchedule, PreferNoSchedule, NoExecute"]),
    ("vks-duplicate-pool", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                 node_pools=[POOL, POOL]), ["given twice", "unique"]),
    ("vks-bad-label-key", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                node_pools=[dict(POOL, labels={"bad key": "v"})]),
     ["labels key 'bad key'", "Kubernetes label key"]),
    ("vks-empty-pool-name", "vks_node_pool", dict(cluster_name="gpu-workloads", namespace="gpu-platform",
                                                  node_pools=[dict(POOL, name="")]), ["node_pools[0].name", DNS]),
    ("drain-empty-owner", "guest_node_drain", dict(vms=[dict(name="node-1")], owner=" "),
     ["owner must not be empty"]),
    ("drain-timeout-0", "guest_node_drain", dict(vms=[dict(name="node-1")], timeout=0), ["timeout", POSITIVE]),
    ("drain-empty-vm-name", "guest_node_drain", dict(vms=[dict(name="")]), ["vms[0].name must not be empty"]),
    ("drain-empty-owners", "guest_node_drain", dict(state="restored", owners=[""]), ["owners[0] is empty"]),
    ("usage-not-an-http-url", "gpu_usage", dict(prometheus_url="ftp://prometheus:9090"),
     ["prometheus_url must be an http:// or https:// URL"]),
    ("usage-step-0", "gpu_usage", dict(prometheus_url="http://127.0.0.1:9", step="0s"), ["step"]),
    ("usage-design-with-schema-error", "gpu_usage", dict(prometheus_url="http://127.0.0.1:9",
                                                         design={"name": "lab", "pools": "none"}),
     ["The design has errors", "pools"]),
    ("dls-timeout-0", "dls_client_token", dict(timeout=0), ["timeout", POSITIVE]),
    ("dls-port-70000", "dls_client_token", dict(port=70000), ["port", "1 to 65535"]),
    ("dls-expiry-0", "dls_client_token", dict(expiry_days=0), ["expiry_days", "1 or more"]),
    ("dls-renew-beyond-expiry", "dls_client_token", dict(renew_before_days=400), ["renew_before_days", "from 0 to 364"]),
    ("dls-empty-host", "dls_client_token", dict(dls_host=""), ["dls_host must not be empty"]),
    ("dls-unknown-leasing-port", "dls_client_token", dict(leasing_port=8080), ["leasing_port", "443, 8082"]),
    ("license-info-empty-command", "nvidia_license_info", dict(nvidia_smi=""), ["nvidia_smi must not be empty"]),
    ("nls-info-three-nodes", "nls_appliance_info", dict(expect_nodes=3), ["expect_nodes", "from 1 to 2"]),
    ("nls-info-wait-negative", "nls_appliance_info", dict(wait_seconds=-1), ["wait_seconds", "0 or more"]),
    ("nls-info-empty-gpu-node", "nls_appliance_info", dict(gpu_nodes=["node-1", ""]), ["gpu_nodes", "empty", "item 1"]),
    ("ready-step-timeout-unknown", "pool_ready", dict(nodes=["n-1"], step_timeouts={"booted": 60}), ["booted", "not a step"]),
    ("ready-prometheus-not-http", "pool_ready", dict(nodes=["n-1"], prometheus_url="prom:9090"), ["prometheus_url", "http://"]),
    ("what-if-compression-0", "gpu_what_if", dict(design={"pools": []}, record_file="/r.yml", kubeconfig="/k", compression=0),
     ["compression", "from 1 to 100000"]),
    ("what-if-no-record", "gpu_what_if", dict(design={"pools": []}, kubeconfig="/k"), ["give the workload record"]),
    ("ready-min-nodes-0", "pool_ready", dict(node_selector={"pool": "a"}, min_nodes=0), ["min_nodes", "1 or more"]),
    ("game-day-grace-0", "gpu_game_day", dict(cluster_queue="gpupool-training", grace_period=0), ["grace_period", "never force"]),
    ("guest-objects-priority-value-2e9", "guest_objects",
     dict(priority_classes=[dict(name="gpu-inference", value=2000000000)]), ["priority_classes[0].value"]),
    ("guest-objects-tenant-twice", "guest_objects", dict(tenants=[dict(namespace="team-a"), dict(namespace="team-a")]),
     ["tenants[1].namespace 'team-a' is given twice"]),
    ("guest-objects-system-priority-class", "guest_objects", dict(priority_classes=[dict(name="system-gpu", value=10)]),
     ["priority_classes[0].name 'system-gpu'"]),
    ("game-day-only-not-a-job", "gpu_game_day", dict(cluster_queue="gpupool-training", only=["gang-a"]), ["only[0]", "namespace/name"]),
    ("device-plugin-replicas-0", "device_plugin_restart", dict(time_slicing={"notebooks": {"replicas": 0}}),
     ["time_slicing.notebooks.replicas", "at least 1", "not 0"]),
    ("device-plugin-wait-timeout-0", "device_plugin_restart", dict(wait_timeout=0), ["wait_timeout", SECONDS]),
    ("driver-upgrade-step-timeout-0", "driver_upgrade_wait", dict(step_timeout=0), ["step_timeout", SECONDS]),
    ("driver-upgrade-poll-0", "driver_upgrade_wait", dict(poll_interval=0), ["poll_interval", "above 0"]),
]

DESIGN_CASES = [
    ("design-pool-name", dict(design=BAD_POOL), ["dns_label", "pool name 'GPU_Inference'", "'gpu-inference'"]),
    ("design-tenant-name", dict(design=BAD_TENANT), ["dns_label", "tenant name 'Team_A'", "'team-a'"]),
    ("design-name-path", dict(design=BAD_NAME), ["design_name_safe", "'../../x'", "path separator", "use 'x'"]),
    ("design-derived-vm-class-too-long", dict(design=LONG_VM_CLASS),
     ["VM class name 'gpu-%s'" % LONG_POOL, "64 characters, over 63", "at most 59"]),
    ("design-label-key", dict(design=BAD_LABEL), ["label_syntax", "'Bad Key'"]),
    ("design-empty-file-name", dict(design_file=""), ["design_file must not be empty"]),
    # every value bounded (the design schema's table), each refused naming the field and the bound
    ("design-priority-value-2e9", dict(design=_design(**{"priorities__gpu-inference__value": 2000000000})),
     ["priorities.gpu-inference.value", "maximum 1000000000"]),
    ("design-priority-value-below-int32", dict(design=_design(**{"priorities__gpu-notebook__value": -2147483649})),
     ["priorities.gpu-notebook.value", "minimum -2147483648"]),
    ("design-negative-quota", dict(design=_design(tenants__1__gpu_quota={"training": 8, "inference": -2, "notebooks": 8})),
     ["tenants.team-vision.gpu_quota.inference", "minimum 0"]),
    ("design-5mb-description", dict(design=_design(tenants__0__description="x" * 5000000)),
     ["tenants.team-search.description", "5000000 characters, over the bound of 1024"]),
    ("design-system-priority-class", dict(design=_design(**{"priorities__system-node-critical": {"value": 10}})),
     ["reserved_name", "system-node-critical", "reserved for Kubernetes' own PriorityClasses"]),
    ("design-tenant-in-kube-system", dict(design=_design(tenants__0__namespace="kube-system")),
     ["reserved_name", "kube-system is a Kubernetes system namespace"]),
    ("design-tenant-in-supervisor-namespace", dict(design=_design(tenants__0__namespace="vmware-system-vks-public")),
     ["reserved_name", "vmware-system-"]),
    ("design-slo-percentile-150", dict(design=_design(pools__1__slo__percentile=150)),
     ["pools.training.slo.percentile", "above 0 and below 100"]),
    ("design-planned-utilization-3", dict(design=_design(pools__1__slo__planned_utilization=3)),
     ["pools.training.slo.planned_utilization", "maximum 1"]),
    ("design-negative-cpu-limit", dict(design=_design(tenants__0__limits__cpu_mhz=-1)),
     ["tenants.team-search.limits.cpu_mhz", "minimum 0"]),
    ("design-negative-memory-limit", dict(design=_design(tenants__0__limits__memory_mib=-1)),
     ["tenants.team-search.limits.memory_mib", "minimum 0"]),
    ("design-storage-class-not-dns", dict(design=_design(vks_clusters__0__storage_class="Bad Class")),
     ["vks_clusters.gpu-workloads.storage_class", "DNS subdomain"]),
    ("design-image-tag-shell", dict(design=_design(guest__driver__version="550.90.07 ; rm -rf /")),
     ["guest.driver.version", "OCI image tag"]),
    ("design-image-repository", dict(design=_design(guest__driver__repository="Registry.Example.com/NV AIE")),
     ["guest.driver.repository", "OCI image repository"]),
    ("design-time-slicing-replicas-0", dict(design=_design(pools__2__guest_time_slicing__replicas=0)),
     ["pools.notebooks.guest_time_slicing.replicas", "minimum 2"]),
    ("design-two-tenants-one-namespace", dict(design=_design(tenants__1__namespace="team-search")),
     ["unique_names", "team-search"]),
]

ALIAS_BOMB = "\n".join(['a0: &a0 ["lol"]'] + [
    "a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 9)) for i in range(1, 10)]) + "\nname: *a9\n"
DESIGN_FILE_CASES = [
    ("design-file-alias-bomb", ALIAS_BOMB, ["a YAML alias at line 2", "takes no aliases"]),
    ("design-file-over-1-mib", "name: x\n#%s\n" % ("y" * (1 << 20)), ["over the bound of 1048576 bytes"]),
]


def _role_case(case_id, role, variables, words, entry=None):
    return (case_id, role, variables, words, entry)


ROLE_CASES = [
    _role_case("role-esxi-reboot-timeout-0", "esxi_gpu_host", dict(esxi_gpu_host_cluster="gpu-h100",
                                                                   esxi_gpu_host_reboot_timeout=0),
               ["esxi_gpu_host_reboot_timeout", "1 or more"]),
    _role_case("role-esxi-evacuate-timeout-negative", "esxi_gpu_host",
               dict(esxi_gpu_host_cluster="gpu-h100", esxi_gpu_host_evacuate_timeout=-1),
               ["esxi_gpu_host_evacuate_timeout", "1 or more"]),
    _role_case("role-esxi-vlcm-timeout-0", "esxi_gpu_host", dict(esxi_gpu_host_cluster="gpu-h100",
                                                                 esxi_gpu_host_vlcm_remediate_timeout=0),
               ["esxi_gpu_host_vlcm_remediate_timeout", "1 or more"]),
    _role_case("role-esxi-ssh-port", "esxi_gpu_host", dict(esxi_gpu_host_cluster="gpu-h100",
                                                           esxi_gpu_host_ssh_port=70000),
               ["esxi_gpu_host_ssh_port", "from 1 to 65535"]),
    _role_case("role-esxi-mig-geometry-and-mode", "esxi_gpu_host",
               dict(esxi_gpu_host_cluster="gpu-h100", esxi_gpu_host_mig_geometry=[[0, 1]], esxi_gpu_host_mig_mode="enabled"),
               ["esxi_gpu_host_mig_geometry", "esxi_gpu_host_mig_mode", "mutually exclusive"]),
    _role_case("role-esxi-min-gpus-negative", "esxi_gpu_host", dict(esxi_gpu_host_cluster="gpu-h100",
                                                                    esxi_gpu_host_min_gpus=-1),
               ["esxi_gpu_host_min_gpus", "0 or more"]),
    _role_case("role-esxi-empty-cluster", "esxi_gpu_host", dict(esxi_gpu_host_cluster=""),
               ["esxi_gpu_host_cluster must not be empty"]),
    _role_case("role-esxi-unknown-lifecycle", "esxi_gpu_host", dict(esxi_gpu_host_cluster="gpu-h100",
                                                                    esxi_gpu_host_lifecycle="manual"),
               ["esxi_gpu_host_lifecycle", "direct, vlcm"]),
    _role_case("role-operator-wait-timeout-0", "gpu_operator", dict(gpu_operator_wait_timeout=0),
               ["gpu_operator_wait_timeout", "1 or more"]),
    _role_case("role-operator-unknown-mig-strategy", "gpu_operator", dict(gpu_operator_mig_strategy="auto"),
               ["gpu_operator_mig_strategy", "none, single, mixed"]),
    _role_case("role-policy-idle-minutes-0", "gpu_scheduling_policy",
               dict(gpu_scheduling_policy_culling_idle_minutes=0),
               ["gpu_scheduling_policy_culling_idle_minutes", "1 or more"]),
    _role_case("role-policy-culling-port-0", "gpu_scheduling_policy", dict(gpu_scheduling_policy_culling_port=0),
               ["gpu_scheduling_policy_culling_port", "from 1 to 65535"]),
    _role_case("role-policy-tenant-gpus-negative", "gpu_scheduling_policy",
               dict(gpu_scheduling_policy_tenants=[{"namespace": "team-a", "gpus": -1}]),
               ["gpu_scheduling_policy_tenants", "gpus must be 0 or more", "team-a"]),
    _role_case("role-policy-unknown-culling", "gpu_scheduling_policy", dict(gpu_scheduling_policy_culling="sometimes"),
               ["gpu_scheduling_policy_culling", "auto, kubeflow, cronjob, none"]),
    _role_case("role-licensing-retries-negative", "nls_licensing", dict(nls_licensing_token_src="/nonexistent.tok",
                                                                        nls_licensing_verify_retries=-1),
               ["nls_licensing_verify_retries", "0 or more"]),
    _role_case("role-licensing-delay-negative", "nls_licensing", dict(nls_licensing_token_src="/nonexistent.tok",
                                                                      nls_licensing_verify_delay=-1),
               ["nls_licensing_verify_delay", "0 or more"]),
    _role_case("role-licensing-unknown-feature-type", "nls_licensing",
               dict(nls_licensing_token_src="/nonexistent.tok", nls_licensing_feature_type=3),
               ["nls_licensing_feature_type", "0, 1, 2, 4"]),
    _role_case("role-node-pools-empty-with-purge", "vks_gpu_node_pools",
               dict(vks_gpu_node_pools_cluster_name="gpu-workloads", vks_gpu_node_pools_namespace="gpu-platform",
                    vks_gpu_node_pools_node_pools=[], vks_gpu_node_pools_purge=True),
               ["vks_gpu_node_pools_node_pools is empty", "vks_gpu_node_pools_purge false"]),
    _role_case("role-node-pools-replicas-negative", "vks_gpu_node_pools",
               dict(vks_gpu_node_pools_cluster_name="gpu-workloads", vks_gpu_node_pools_namespace="gpu-platform",
                    vks_gpu_node_pools_node_pools=[{"name": "inference", "replicas": -1}]),
               ["vks_gpu_node_pools_node_pools", "replicas must be 0 or more", "inference"]),
    _role_case("role-node-pools-no-cluster", "vks_gpu_node_pools", dict(vks_gpu_node_pools_namespace="gpu-platform"),
               ["vks_gpu_node_pools_cluster_name"]),
    _role_case("role-nls-appliance-unknown-priority", "nls_appliance",
               dict(nls_appliance_ovf="/nonexistent/dls.ova", nls_appliance_cluster="gpu-h100",
                    nls_appliance_datastore="LocalDS_0", nls_appliance_nodes=[{"name": "dls-1"}],
                    nls_appliance_restart_priority="urgent"),
               ["nls_appliance_restart_priority", "lowest, low, medium, high, highest"]),
    _role_case("role-pinning-unknown-behavior", "drs_gpu_pinning", dict(drs_gpu_pinning_behavior="auto"),
               ["drs_gpu_pinning_behavior", "manual, partiallyAutomated"]),
    _role_case("role-tenancy-bad-vm-class-name", "supervisor_gpu_tenancy",
               dict(supervisor_gpu_tenancy_vm_classes=[{"name": "GPU_Small", "cpu_count": 4, "memory_mb": 8192}]),
               ["name 'GPU_Small'", "'gpu-small'"]),
    # roles used alone check what the design checks, before their first change
    _role_case("role-policy-namespace-not-dns", "gpu_scheduling_policy",
               dict(gpu_scheduling_policy_tenants=[{"namespace": "Team_X", "gpus": 1}]),
               ["gpu_scheduling_policy_tenants[0].namespace 'Team_X'", "Nothing was changed"]),
    _role_case("role-policy-two-tenants-one-namespace", "gpu_scheduling_policy",
               dict(gpu_scheduling_policy_tenants=[{"namespace": "team-a", "gpus": 1}, {"namespace": "team-a", "gpus": 2}]),
               ["namespace 'team-a' is given twice"]),
    _role_case("role-policy-priority-2e9", "gpu_scheduling_policy", dict(gpu_scheduling_policy_inference_priority=2000000000),
               ["gpu_scheduling_policy_inference_priority_class value", "above 1000000000"]),
    _role_case("role-policy-priorities-out-of-order", "gpu_scheduling_policy", dict(gpu_scheduling_policy_training_priority=1000000),
               ["PriorityClass values must be inference > training > notebook", "Nothing was changed"]),
    _role_case("role-operator-time-slicing-replicas-0", "gpu_operator",
               dict(gpu_operator_time_slicing={"notebooks": {"replicas": 0}}, gpu_operator_driver_version="550.90.07"),
               ["gpu_operator_time_slicing.notebooks.replicas", "from 2 to 256", "not 0"]),
    _role_case("role-tenancy-system-namespace-after-a-good-class", "supervisor_gpu_tenancy",
               dict(supervisor_gpu_tenancy_vm_classes=[{"name": "gpu-bounded", "cpu_count": 4, "memory_mb": 8192,
                                                        "cluster": "gpu-h100", "vgpu_profiles": ["nvidia_h100-1-10c"]}],
                    supervisor_gpu_tenancy_namespaces=[{"name": "kube-system", "vm_classes": ["gpu-bounded"]}]),
               ["supervisor_gpu_tenancy_namespaces[0].name 'kube-system'", "system namespace"]),
    _role_case("role-pinning-cluster-twice", "drs_gpu_pinning",
               dict(drs_gpu_pinning_clusters=[{"name": "gpu-h100"}, {"name": "gpu-h100"}]),
               ["cluster 'gpu-h100' is given twice"]),
    _role_case("role-ha-cluster-twice", "ha_gpu_restart",
               dict(ha_gpu_restart_clusters=[{"name": "gpu-h100"}, {"name": "gpu-h100"}]),
               ["ha_gpu_restart_clusters", "cluster 'gpu-h100' is given twice"]),
]

SITE_CASES = [
    ("site-bad-pool-and-tenant-names", _design(pools__0__name="GPU_Inference", tenants__1__name="Team_A",
                                               tenants__0__gpu_quota={"GPU_Inference": 4},
                                               tenants__1__gpu_quota={"training": 8, "GPU_Inference": 2,
                                                                      "notebooks": 8}),
     ["dns_label", "pool name 'GPU_Inference'", "'gpu-inference'", "tenant name 'Team_A'", "'team-a'"]),
    ("site-design-name-escapes-token-folder", BAD_NAME, ["design_name_safe", "'../../x'", "use 'x'"]),
    # what site.yml once applied on three links before the guest link refused it
    ("site-values-out-of-bounds", _design(**{
        "priorities__gpu-inference__value": 2000000000, "tenants__0__namespace": "kube-system",
        "tenants__1__gpu_quota": {"training": 8, "inference": -2, "notebooks": 8}}),
     ["priorities.gpu-inference.value", "maximum 1000000000", "kube-system is a Kubernetes system namespace",
      "tenants.team-vision.gpu_quota.inference"]),
]


def test_the_matrix_covers_every_module_and_role():
    modules = {p.stem for p in (ROOT / "plugins" / "modules").glob("*.py")}
    covered = {c[1] for c in VSPHERE_CASES + STUB_CASES} | {"gpu_pool_design"}
    assert covered == modules
    assert {c[1] for c in ROLE_CASES} == {p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()}
    total = len(VSPHERE_CASES) + len(STUB_CASES) + len(DESIGN_CASES) + len(DESIGN_FILE_CASES) + len(ROLE_CASES) \
        + len(SITE_CASES)
    assert total >= 90


# ---------------------------------------------------------------------------------------
# running a module in-process
# ---------------------------------------------------------------------------------------


def run_module(name, args):
    """The module's result: main() as ansible-playbook runs it, with the args as given."""
    module = importlib.import_module("ansible_collections.gpupool.vcf.plugins.modules.%s" % name)
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out):
        try:
            module.main()
        except SystemExit:
            pass
    text = out.getvalue()
    return json.loads(text[text.index("{"):])


def assert_message(result, words):
    assert result.get("failed") is True, result
    for word in words:
        # a tuple: one of its words (where the shared connection layer words its own check)
        assert any(w in result["msg"] for w in (word if isinstance(word, tuple) else (word,))), \
            "%r not in %r" % (word, result["msg"])


# ---------------------------------------------------------------------------------------
# vSphere state and request counters
# ---------------------------------------------------------------------------------------


def _rest_list(sim, path):
    base = "https://%s:%d" % (sim.host, sim.port)
    token = requests.post(base + "/api/session", auth=(sim.user, sim.password), verify=sim.ca_file, timeout=30).json()
    headers = {"vmware-api-session-id": token}
    try:
        answer = requests.get(base + path, headers=headers, verify=sim.ca_file, timeout=30).json()
    finally:
        requests.delete(base + "/api/session", headers=headers, verify=sim.ca_file, timeout=30)
    return sorted(answer, key=lambda item: json.dumps(item, sort_keys=True))


def _drs_overrides(sim):
    context = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=context)
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
        out = {}
        for cluster in view.view:
            out[cluster.name] = sorted((o.key.name, o.behavior, o.enabled) for o in cluster.configurationEx.drsVmConfig)
        view.Destroy()
        return out
    finally:
        connect.Disconnect(si)


def snapshot(sim):
    return dict(hosts=dict((h, sim.host_state(h)) for h in HOSTS), vm_classes=_rest_list(sim, CLASSES),
                namespaces=_rest_list(sim, NAMESPACES), drs=_drs_overrides(sim))


def counts(stats):
    return dict([("soap " + k, v) for k, v in stats["soap"]["methods"].items()]
                + [("rest " + k, v) for k, v in stats["rest"]["paths"].items()])


def requests_between(before, after):
    """{request: count} sent between two reads of the counters."""
    start, end = counts(before), counts(after)
    return dict((k, v - start.get(k, 0)) for k, v in end.items() if v != start.get(k, 0))


def changing(sent):
    """The changing requests among ``sent``."""
    out = {}
    for key, number in sent.items():
        kind, name = key.split(" ", 1)
        if kind == "soap" and name in READ_SOAP:
            continue
        if kind == "rest" and (name.startswith("GET ") or name in ("POST /api/session", "DELETE /api/session")):
            continue
        out[key] = number
    return out


# ---------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request with 503 and counts it (a TLS hello counts as a request too)."""

    hits = []

    def parse_request(self):
        ok = BaseHTTPRequestHandler.parse_request(self)
        if not ok or self.path != "/_count":
            self.hits.append(self.requestline if ok else "unparsed")
        return ok

    def _answer(self):
        if self.path == "/_count":
            body, code = json.dumps(len(self.hits)).encode(), 200
        else:
            body, code = b'{"kind": "Status", "code": 503, "message": "recording stub"}', 503
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass


@pytest.fixture(scope="module")
def stub():
    """The recording stub: ``url``, ``hits`` (every request it got)."""
    _Recorder.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield dict(url="http://127.0.0.1:%d" % server.server_address[1], port=server.server_address[1],
                   hits=_Recorder.hits)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def conn(vsphere):
    return dict(hostname=vsphere.host, port=vsphere.port, username=vsphere.user, password=vsphere.password,
                ca_file=vsphere.ca_file)


@pytest.fixture(scope="module")
def world(vsphere, conn):
    """Objects a bad input could damage: a VM class, a namespace using it, a DRS override."""
    made = [
        run_module("vm_class", dict(conn, name="gpu-existing", cpu_count=4, memory_mb=16384, cluster="gpu-h100",
                                    vgpu_profiles=["nvidia_h100-1-10c"])),
        run_module("supervisor_namespace", dict(conn, name="team-existing", cluster="gpu-h100",
                                                vm_classes=["gpu-existing"])),
        run_module("drs_gpu_pinning", dict(conn, cluster="gpu-h100")),
    ]
    for result in made:
        assert not result.get("failed") and result["changed"], result
    state = snapshot(vsphere)
    assert state["vm_classes"] and state["namespaces"] and state["drs"]["gpu-h100"]
    return state


# ---------------------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id, module, args, words", VSPHERE_CASES, ids=[c[0] for c in VSPHERE_CASES])
def test_vsphere_module(vsphere, conn, world, case_id, module, args, words):
    before = snapshot(vsphere)
    assert before == world
    start = vsphere.stats()
    result = run_module(module, dict(conn, **args))
    sent = requests_between(start, vsphere.stats())
    assert_message(result, words)
    assert changing(sent) == {}, (case_id, sent)
    assert sent == {}, "%s: a bad input is refused before any request (%s)" % (case_id, sent)
    assert snapshot(vsphere) == before


def _stub_args(module, args, stub, tmp_path):
    if module in ("vks_node_pool", "guest_node_drain", "pool_ready", "gpu_game_day"):
        return dict(args, host=stub["url"], api_key="token", validate_certs=False)
    if module == "nls_appliance_info":
        return dict(dict(dls_host="127.0.0.1", port=stub["port"], username="dls-admin", password="stub-password-0000",
                         validate_certs=False, wait_seconds=0), **args)
    if module == "dls_client_token":
        return dict(dict(dls_host="127.0.0.1", port=stub["port"], username="dls-admin", password="stub-password-0000",
                         dest=str(tmp_path / "lab.tok"), validate_certs=False), **args)
    return dict(args, chroot=str(tmp_path)) if module == "nvidia_license_info" else args


@pytest.mark.parametrize("case_id, module, args, words", STUB_CASES, ids=[c[0] for c in STUB_CASES])
def test_kubernetes_dls_and_guest_module(stub, tmp_path, case_id, module, args, words):
    seen = len(stub["hits"])
    result = run_module(module, _stub_args(module, args, stub, tmp_path))
    assert_message(result, words)
    assert stub["hits"][seen:] == [], "%s reached the API: %s" % (case_id, stub["hits"][seen:])
    assert list(tmp_path.iterdir()) == [], "%s wrote %s" % (case_id, list(tmp_path.iterdir()))


@pytest.mark.parametrize("case_id, args, words", DESIGN_CASES, ids=[c[0] for c in DESIGN_CASES])
def test_design(case_id, args, words):
    result = run_module("gpu_pool_design", args)
    assert_message(result, words)
    assert result.get("derived") is None, case_id
    assert len(result["msg"]) < 20000, (case_id, len(result["msg"]))


@pytest.mark.parametrize("case_id, text, words", DESIGN_FILE_CASES, ids=[c[0] for c in DESIGN_FILE_CASES])
def test_design_file(tmp_path, case_id, text, words):
    path = tmp_path / "design.yml"
    path.write_text(text)
    result = run_module("gpu_pool_design", dict(design_file=str(path)))
    assert_message(result, words)
    assert len(result["msg"]) < 500, (case_id, len(result["msg"]))
    assert result.get("derived") is None, case_id


@pytest.fixture(scope="module")
def role_runs(vsphere, world, stub):
    """All role cases in one playbook: a block per case, the counters read after each."""
    stats = "{{ lookup('ansible.builtin.url', 'https://%s:%d/_sim/stats', ca_path='%s', split_lines=false) }}" % (
        vsphere.host, vsphere.port, vsphere.ca_file)
    hits = "{{ lookup('ansible.builtin.url', '%s/_count', split_lines=false) }}" % stub["url"]
    tasks = [{"name": "counters start", "ansible.builtin.set_fact": {"bad_inputs_sim": stats, "bad_inputs_stub": hits}}]
    for case_id, role, variables, _words, entry in ROLE_CASES:
        include = {"name": "gpupool.vcf.%s" % role}
        if entry:
            include["tasks_from"] = entry
        tasks.append({"name": "case %s" % case_id, "block": [
            {"name": "role %s" % case_id, "ansible.builtin.include_role": include, "vars": variables},
            {"name": "passed %s" % case_id, "ansible.builtin.set_fact": {"bad_inputs_passed": True}},
        ], "rescue": [
            {"name": "failed %s" % case_id, "ansible.builtin.set_fact": {
                "bad_inputs_msg": "{{ ([ansible_failed_result.msg | default('')] + (ansible_failed_result.results | "
                                  "default([]) | map(attribute='msg', default='') | list)) | join(' | ') }}"}},
        ]})
        tasks.append({"name": "counters %s" % case_id,
                      "ansible.builtin.set_fact": {"bad_inputs_sim": stats, "bad_inputs_stub": hits}})
    env = dict(vsphere.env, K8S_AUTH_HOST=stub["url"], K8S_AUTH_API_KEY="token", K8S_AUTH_VERIFY_SSL="false")
    before = snapshot(vsphere)
    run = run_playbook([{"name": "bad role inputs", "hosts": "localhost", "gather_facts": False, "tasks": tasks}],
                       env=env)
    assert run.data is not None, run.stderr[-3000:]
    return run, before, snapshot(vsphere)


@pytest.mark.parametrize("case_id, role, variables, words, entry", ROLE_CASES, ids=[c[0] for c in ROLE_CASES])
def test_role(role_runs, case_id, role, variables, words, entry):
    run, before, after = role_runs
    names = [name for name, _result in run.tasks]
    assert "passed %s" % case_id not in names, "%s (%s %s) did not fail" % (case_id, role, variables)
    assert_message(dict(failed=True, msg=run.result("failed %s" % case_id)["ansible_facts"]["bad_inputs_msg"]),
                   words)
    index = names.index("counters %s" % case_id)
    previous = [name for name in names[:index] if name.startswith("counters ")][-1]
    start = run.result(previous)["ansible_facts"]
    end = run.result("counters %s" % case_id)["ansible_facts"]
    sent = requests_between(_as_json(start["bad_inputs_sim"]), _as_json(end["bad_inputs_sim"]))
    assert changing(sent) == {} and sent == {}, (case_id, sent)
    assert _as_json(start["bad_inputs_stub"]) == _as_json(end["bad_inputs_stub"]), case_id
    assert after == before


def _as_json(value):
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.parametrize("case_id, design, words", SITE_CASES, ids=[c[0] for c in SITE_CASES])
def test_site_with_a_bad_design(vsphere, world, stub, tmp_path, case_id, design, words):
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(design))
    env = dict(vsphere.env, HOME=str(tmp_path))
    before = snapshot(vsphere)
    start = vsphere.stats()
    run = run_playbook(ROOT / "playbooks" / "site.yml", env=env,
                       extra_vars={"gpupool_design_file": str(path), "gpupool_token_dir": str(tmp_path / "tokens")})
    sent = requests_between(start, vsphere.stats())
    assert run.rc != 0, case_id
    assert_message(run.result("Check the design against every rule, before any change"), words)
    assert [name for name, _result in run.tasks][-1] == "Check the design against every rule, before any change"
    assert sent == {}, (case_id, sent)
    assert snapshot(vsphere) == before
    # no token folder, nothing beside the design (but ansible-playbook's own folder under HOME)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".ansible") == ["design.yml"]
