# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vSphere side of a GPU pool as the audit and the discovery read it (client layer: knows nothing of Ansible).

I/O only, plain data out: the GPU hosts (through ``_gpu_inventory``) and the DRS state of each
cluster, the VM classes, the Supervisor namespaces and the storage policies, each in the normal
form the pure comparators take. ``module`` is any object that offers ``rest_client()`` (the vSphere
REST session of the runner).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace as nsu
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import GpuInventory
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._namespace_api import NamespaceApi, supervisor_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound, vim
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._zone_binding_api import ZoneBindingApi

VM_CLASSES_PATH = "/api/vcenter/namespace-management/virtual-machine-classes"
NS_PATH = "/api/vcenter/namespaces/instances"
POLICIES_PATH = "/api/vcenter/storage/policies"


def read_esxi(client, rest=None):
    """(host records, DRS state per cluster): the GPU inventory (the drivers of image-managed clusters
    from their image compliance, on a session ``rest()`` opens) and one retrieval of configurationEx."""
    hosts = GpuInventory(client, rest=rest).read()
    drs = {}
    for item in client.retrieve({vim.ClusterComputeResource: ["name", "configurationEx"]}):
        config = item.get("configurationEx")
        dc = getattr(config, "drsConfig", None)
        drs[item.get("name")] = dict(
            enabled=getattr(dc, "enabled", None),
            overrides_enabled=getattr(dc, "enableVmBehaviorOverrides", None),
            overrides=dict((o.key._moId, dict(behavior=o.behavior, enabled=o.enabled))
                           for o in getattr(config, "drsVmConfig", None) or []))
    return hosts, drs


def read_vm_classes(module):
    """{id: VM class in normal form}, read once per run (one request) for the vSphere and VKS links."""
    if getattr(module, "gpupool_vm_classes", None) is None:
        module.gpupool_vm_classes = dict((info.get("id"), vmc.normalize(info))
                                         for info in module.rest_client().get(VM_CLASSES_PATH) or [])
    return module.gpupool_vm_classes


def read_zone_bindings(module, derived):
    """{what a zone binding input names its Supervisor by: the Supervisor's Bindings.Info rows} of the
    supervisor_gpu_tenancy role's zone binding inputs; None without such inputs or on a vCenter before
    API 9.0 (no bindings to read: the converge refuses there). A cluster without a Supervisor is left
    out (the namespaces' findings name it)."""
    tenancy = _audit.role_inputs(derived, "supervisor_gpu_tenancy")
    bindings = tenancy.get("supervisor_gpu_tenancy_zone_bindings") or []
    if not bindings or vr.refusal(module.api_version()) is not None:
        return None
    rest = module.rest_client()
    api = ZoneBindingApi(rest, module.client, api_version=module.api_version)
    rows, out = None, {}
    for binding in bindings:
        key = _audit_vsphere.binding_key(tenancy, binding)
        supervisor = binding.get("supervisor")
        if supervisor is None:
            if rows is None:  # one read of the Supervisors for every binding
                rows = NamespaceApi(rest, module.client, api_version=module.api_version).supervisors()
            supervisor = supervisor_of(rows, key)
            if supervisor is None:
                continue
        out[key] = api.list(supervisor)
    return out


def read_vsphere(module, derived):
    """{vm_classes: {id: VM class}, namespaces: {name: namespace}, storage_policies: {id: name},
    zone_bindings (read_zone_bindings)}; VM classes and namespaces in normal form, absent ones left out."""
    rest = module.rest_client()
    namespaces = {}
    for ns in (derived.get("vsphere") or {}).get("namespaces") or []:
        try:
            namespaces[ns["name"]] = nsu.normalize(rest.get("%s/%s" % (NS_PATH, ns["name"])))
        except VsphereNotFound:
            pass
    policies = dict((p["policy"], p.get("name") or p["policy"]) for p in rest.get(POLICIES_PATH) or [])
    return dict(vm_classes=read_vm_classes(module), namespaces=namespaces, storage_policies=policies,
                zone_bindings=read_zone_bindings(module, derived))


def read_pool_classes(module, derived):
    """With class revisions and a connection to the Supervisor's vCenter, the live VM classes, so the VKS
    link judges each pool's class by the name vm_class resolves; else None."""
    if not _audit.role_inputs(derived, "supervisor_gpu_tenancy").get("supervisor_gpu_tenancy_class_revisions"):
        return None
    vcenter = module.params["vcenter"]
    home = [v["name"] for v in (derived.get("vcenters") or {}).values() if v.get("supervisor")]
    if not module.params["hostname"] or (vcenter is not None and vcenter not in home):
        return None
    return read_vm_classes(module)


def read_platform(module):
    """What discovery reads of the vSphere side besides the hosts: {vm_classes, namespaces, storage_policies,
    cluster_names}, every Supervisor namespace (one list, then one read per namespace) in normal form;
    ``cluster_names``: {cluster id: name} of the clusters with a Supervisor (namespaces name theirs by id),
    read as the vCenter's API version says (``NamespaceApi.supervisors``: Clusters.list on 8.x, the
    per-Supervisor Summary.list and Topology.get on 9.x)."""
    rest = module.rest_client()
    namespaces = {}
    for summary in rest.get(NS_PATH) or []:
        name = summary.get("namespace")
        try:
            namespaces[name] = nsu.normalize(rest.get("%s/%s" % (NS_PATH, name)))
        except VsphereNotFound:  # deleted between the list and the read
            pass
    policies = dict((p["policy"], p.get("name") or p["policy"]) for p in rest.get(POLICIES_PATH) or [])
    vm_classes = read_vm_classes(module)
    supervisors = NamespaceApi(rest, module.client, api_version=module.api_version).supervisors()
    return dict(vm_classes=vm_classes, namespaces=namespaces, storage_policies=policies,
                cluster_names=dict((c.get("cluster"), c.get("cluster_name")) for c in supervisors))
