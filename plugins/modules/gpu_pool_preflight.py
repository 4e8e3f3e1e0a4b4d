#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_preflight
short_description: Say, before any change, whether each link of a GPU pool design can run on a platform
version_added: 0.1.0
description:
  - The read-only first step on a platform that exists - it reads, and changes nothing, and says per link
    (C(esxi), C(vsphere), C(vks), C(guest), C(licensing)) whether the collection can run it and why not.
  - C(esxi) - the design's GPU clusters and their hosts exist (as many hosts as the design counts); the
    datastore of a cluster's driver bundle exists; on a cluster with lifecycle V(vlcm) the cluster is managed
    with a single image and an offline depot offers the design's driver (or the design names a depot to
    import); a cluster that sets C(vgpu_mode) needs vSphere API 8.0.3.
  - C(vsphere) - the clusters that hold the design's namespaces have a Supervisor, C(RUNNING) with its
    Kubernetes API C(READY); the storage policies of the namespaces exist.
  - C(esxi) and C(vsphere) - the privileges of the account on the objects the link changes, asked of
    vCenter's AuthorizationManager (C(HasPrivilegeOnEntities) for this session) without trying a change;
    each missing privilege is named with the link that needs it, the objects and what it is for.
  - C(vks) (needs O(supervisor_kubeconfig)) - each VKS cluster of the design exists on the Supervisor with a
    managed topology and its ClusterClass can be read.
  - C(guest) (needs O(kubeconfig)) - where the design queues gang pools through Kueue, Kueue's CRDs are
    installed.
  - C(licensing) (needs O(dls_host)) - the DLS appliance answers (a login and a read of its service
    instance) and, with O(prometheus_url), Prometheus answers a query.
  - The vCenter's API version (C(About.apiVersion)) and what the collection does on it (RV(api_features)).
  - A link without its connection is reported V(not checked) and does not make the result no-go.
  - Requests are reads only - SOAP property retrievals, C(HasPrivilegeOnEntities), REST C(GET)s, Kubernetes
    C(get) and C(list) - besides the sessions' login and logout.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes.info_module
  - gpupool.vcf.dls
  - gpupool.vcf.prometheus
  - gpupool.vcf.prometheus.bearer_token
options:
  design:
    description:
      - The pool design as a mapping. Exactly one of O(design) and O(design_file) is required.
    type: dict
  design_file:
    description:
      - Path to a YAML (or JSON) file with the design, on the host the module runs on.
    type: path
  vcenter:
    description:
      - The vCenter of a design that names several (its C(vcenters) key) that the vSphere connection of this
        task reaches; its clusters only are checked (and, where it holds the Supervisor, the namespaces). By
        default the whole design. The result names it (RV(vcenter)), so that O(vcenter_results) can merge it.
      - playbooks/preflight.yml runs one such task per vCenter, in parallel, each with its own connection.
    type: str
  vcenter_results:
    description:
      - The results of the O(vcenter) tasks of every vCenter of the design (registered; a skipped or failed
        one counts as not checked or no-go), merged into this task's C(esxi) and C(vsphere) links, table,
        missing privileges and report. A link is no-go where any vCenter's is; with several vCenters each
        reason and missing privilege names its vCenter. With it this task reads no vSphere link itself and
        needs no vSphere connection; it reads the other links as usual. With O(vcenter) too, only that
        vCenter's result is expected.
    type: list
    elements: dict
  kubeconfig:
    description:
      - Kubeconfig of the guest (VKS) cluster, for the C(guest) link. Falls back to E(K8S_AUTH_KUBECONFIG).
    type: path
  context:
    description: Context of O(kubeconfig). Falls back to E(K8S_AUTH_CONTEXT).
    type: str
  supervisor_kubeconfig:
    description: Kubeconfig of the Supervisor, for the C(vks) link.
    type: path
  supervisor_context:
    description: Context of O(supervisor_kubeconfig).
    type: str
  dls_host:
    description: Address of the DLS appliance, for the C(licensing) link.
  prometheus_url:
    description: Base URL of the Prometheus HTTP API, checked with the C(licensing) link.
  request_timeout:
    description: Seconds to wait for one request to a Kubernetes API, the DLS appliance or Prometheus (1 or more).
    type: int
    default: 30
attributes:
  check_mode:
    description: The module only reads; check mode gives the same result.
  diff_mode:
    description: Nothing changes, so there is nothing to diff.
notes:
  - Requires the C(kubernetes) Python library for the C(vks) and C(guest) links.
"""

EXAMPLES = r"""
- name: Preflight of the design on the platform (vSphere connection from module_defaults)
  gpupool.vcf.gpu_pool_preflight:
    design_file: "{{ playbook_dir }}/design.yml"
    kubeconfig: ~/.kube/gpu-workloads.kubeconfig
  register: preflight

- name: Stop when a link cannot run
  ansible.builtin.assert:
    that: preflight.go
    fail_msg: "{{ preflight.table }}"
"""

RETURN = r"""
links:
  description: Per link whether it can run.
  returned: always
  type: dict
  contains:
    go: {description: "True, false (no-go) or null (not checked: no connection).", type: bool}
    status: {description: "V(go), V(no-go) or V(not checked).", type: str}
    reasons: {description: What stops the link (or why it was not checked)., type: list, elements: str}
  sample:
    esxi:
      go: false
      status: no-go
      reasons: ["the account lacks privilege Host.Config.Patch on host esx-01 (the NVIDIA host driver (InstallHostPatchV2_Task))"]
    vks: {go: null, status: not checked, reasons: ["not checked: no kubeconfig of the Supervisor (supervisor_kubeconfig)"]}
go:
  description: Whether no link is no-go (links not checked do not count).
  returned: always
  type: bool
table:
  description: The go / no-go table as text lines, one per link and one per reason.
  returned: always
  type: list
  elements: str
html:
  description: The same table and the missing privileges as one HTML page (no timestamps), for a report file.
  returned: always
  type: str
missing_privileges:
  description:
    - The privileges the account lacks, each with the link that needs it, the objects and what it is for; with
      O(vcenter_results) each also names its C(vcenter).
  returned: always
  type: list
  elements: dict
  sample: [{link: esxi, privilege: Host.Config.Patch, objects: [host esx-01], what: the NVIDIA host driver}]
vcenter:
  description: The vCenter this task checked (O(vcenter)); null for the whole design.
  returned: always
  type: str
api_versions:
  description: With O(vcenter_results) - the API version of each vCenter that answered.
  returned: when O(vcenter_results) is given
  type: dict
  sample: {west: 8.0.3.0, east: 9.0.0.0}
api_version:
  description:
    - The vCenter's API version (null without a vSphere connection); with O(vcenter_results) that of the
      vCenter holding the Supervisor (else of the first that answered).
  returned: always
  type: str
  sample: 8.0.3.0
api_features:
  description: Per feature whose form depends on the API version - C(supported), C(since) and C(what).
  returned: always
  type: dict
  sample: {vgpu_mode: {supported: true, since: 8.0.3, what: the vGPU mode per GPU is read and set}}
"""

from ansible.module_utils.basic import env_fallback

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _preflight
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive, for_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_inputs import gpu_pool_preflight_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import given_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._authz_api import AuthzApi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._namespace_api import NamespaceApi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vlcm_api import VlcmApi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._inventory_reader import read_inventory
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import HAS_KUBERNETES
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import read_crd_names
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError, dls_argument_spec, dls_client
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError, prom_client, prometheus_argument_spec

ARGUMENT_SPEC = dict(
    design=dict(type="dict"),
    design_file=dict(type="path"),
    vcenter=dict(type="str"),
    vcenter_results=dict(type="list", elements="dict"),
    kubeconfig=dict(type="path", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    supervisor_kubeconfig=dict(type="path"),
    supervisor_context=dict(type="str"),
    request_timeout=dict(type="int", default=30),
)
ARGUMENT_SPEC.update(dls_argument_spec())  # doc fragment gpupool.vcf.dls
ARGUMENT_SPEC.update(prometheus_argument_spec())  # doc fragment gpupool.vcf.prometheus with BEARER_TOKEN

SERVICE_INSTANCE = "/service_instance_manager/v1/service-instance"


def read_vsphere(module, derived):
    """What the vSphere links need, read with retrievals, HasPrivilegeOnEntities and REST GETs."""
    client = module.client()
    inventory = read_inventory(client)
    clusters = inventory["clusters"]
    by_cluster = dict((name, [host for host, _ref in pairs]) for name, pairs in inventory["hosts"].items())
    authz = AuthzApi(client)
    refs = {_preflight.ROOT_LABEL: authz.root_folder()}
    for name, c in clusters.items():
        refs[_preflight.cluster_label(name)] = c.obj
        for host, ref in inventory["hosts"][name]:
            refs[_preflight.host_label(host)] = ref
    live = dict(api_version=authz.api_version(), clusters=by_cluster, datastores=inventory["datastores"],
                privileges=authz.session_privileges(refs, _preflight.wanted_privileges(derived, by_cluster)))
    rest = module.rest_client()
    api = NamespaceApi(rest, soap=module.client, api_version=live["api_version"])  # the Supervisors by API version
    try:
        summaries = api.supervisors()
        live["supervisors"] = [s.get("cluster_name") or s.get("cluster") for s in summaries]
        live["supervisor_status"] = dict((s.get("cluster_name") or s.get("cluster"), dict(
            config_status=s.get("config_status"), kubernetes_status=s.get("kubernetes_status"))) for s in summaries)
    except VsphereError as exc:
        live.update(supervisors=None, supervisor_error=str(exc))
    try:
        live["storage_policies"] = sorted(api.policy_names().values())
    except VsphereError as exc:
        live.update(storage_policies=None, storage_policy_error=str(exc))
    live["vlcm"] = {}
    for name, want in ((derived.get("esxi") or {}).get("clusters") or {}).items():
        if want.get("lifecycle") == "vlcm" and name in clusters:
            live["vlcm"][name] = read_image(VlcmApi(rest, clusters[name].moid), want.get("component"))
    return live


def read_image(api, component):
    try:
        if not api.image_managed():
            return dict(image_managed=False)
        _depots, offered = api.depots(component)
    except VsphereError as exc:
        return dict(error=str(exc))
    return dict(image_managed=True, versions=sorted(set(v for versions in offered.values() for v in versions)))


def read_vks(params, derived):
    """{lacking: [(kind, name, text)]} of the design's VKS clusters on the Supervisor, or {error}."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._vks_api import VksClusterApi
    conn = dict(kubeconfig=params["supervisor_kubeconfig"], context=params["supervisor_context"],
                request_timeout=params["request_timeout"])
    lacking = []
    for name, want in ((derived.get("vks") or {}).get("clusters") or {}).items():
        label = "%s/%s" % (want["namespace"], name)
        try:
            api = VksClusterApi(conn, want["namespace"], name)
            version, obj, ref = api.read_cluster()
        except K8sError as exc:
            if exc.status == 404:
                lacking.append(("VKS cluster", label, "not on the Supervisor"))
                continue
            return dict(error=str(exc))
        if obj is None:
            lacking.append(("VKS cluster", label, "has no managed topology (spec.topology with a ClusterClass)"))
            continue
        try:
            api.read_class(version, ref)
        except K8sError as exc:
            lacking.append(("ClusterClass", "%s/%s" % (ref["namespace"], ref["name"]), "of VKS cluster %s: %s" % (label, exc)))
    return dict(lacking=lacking)


def read_licensing(params):
    """{dls: None or what failed, prometheus: None or what failed}."""
    p = params
    out = dict(dls=None, prometheus=None)
    if not (p["dls_username"] and p["dls_password"]):
        out["dls"] = "no dls_username and dls_password to log in with"
    else:
        dls = dls_client(p, p["request_timeout"])
        try:
            dls.call("GET", SERVICE_INSTANCE)
        except DlsError as exc:
            out["dls"] = str(exc)
    if p["prometheus_url"]:
        prom = prom_client(p, p["request_timeout"])
        try:
            prom.query("vector(1)")
        except PromError as exc:
            out["prometheus"] = "%s: %s" % (p["prometheus_url"], exc)
    return out


class Preflight(Info):
    """Every link of the design judged against what the platform has, from reads only."""

    def __init__(self, module):
        Info.__init__(self, "the preflight of the design")
        self.module = module

    def derived(self):
        p = self.module.params
        try:
            derived = derive(given_design(p))
        except DesignError as exc:
            raise Failure("The design has errors; fix them first (gpu_pool_design): %s" % exc,
                          findings=[f.to_dict() for f in exc.findings])
        if p["vcenter"] is not None:
            if p["vcenter"] not in derived["vcenters"]:
                raise Failure("Invalid input for gpu_pool_preflight: vCenter %r is not in the design (its vCenters: %s). "
                              "Nothing was read." % (p["vcenter"], ", ".join(derived["vcenters"])))
            derived = for_vcenter(derived, p["vcenter"])
        return derived

    def read(self):
        p = self.module.params
        derived = self.derived()
        live = {}
        if p["vcenter_results"] is None and p["hostname"]:
            with self.doing("read", "the vSphere links"):
                live["vsphere"] = read_vsphere(self.module, derived)
        if p["supervisor_kubeconfig"] or p["kubeconfig"]:
            if not HAS_KUBERNETES:
                raise Failure("The kubernetes Python library is required for the vks and guest links")
        if p["supervisor_kubeconfig"]:
            live["vks"] = read_vks(p, derived)
        if p["kubeconfig"]:
            live["guest"] = read_crd_names(p)
        if p["dls_host"]:
            live["licensing"] = read_licensing(p)
        return dict(derived=derived, live=live)

    def result(self, live, plan):
        p = self.module.params
        derived, state = live["derived"], live["live"]
        links = _preflight.judge(derived, state)
        version = (state.get("vsphere") or {}).get("api_version")
        missing = _preflight.missing_list(derived, state)
        out = dict(vcenter=p["vcenter"])
        if p["vcenter_results"] is not None:
            merged = _preflight.merge_vcenters(self.vcenter_results(derived))
            links.update(merged["links"])
            missing, versions = merged["missing"], merged["api_versions"]
            out["api_versions"] = versions
            first = [v["name"] for v in derived["vcenters"].values() if v["supervisor"] and v["name"] in versions]
            version = versions.get(first[0]) if first else next((versions[n] for n in derived["vcenters"] if n in versions), None)
        out.update(links=links, go=_preflight.is_go(links), table=_preflight.text_table(links),
                   html=_preflight.html_report(derived["design"], links, missing, version),
                   missing_privileges=missing, api_version=version,
                   api_features=_preflight.api_features(version) if version else {})
        return out

    def vcenter_results(self, derived):
        """[(vCenter, its task's result)] in design order: each vCenter of the design once; a vCenter
        without a result is not checked, a result of a vCenter the design does not name is refused."""
        given = {}
        for res in self.module.params["vcenter_results"]:
            name = res.get("vcenter") or (res.get("invocation") or {}).get("module_args", {}).get("vcenter")
            if name is None and len(derived["vcenters"]) == 1 and not res.get("skipped"):
                name = next(iter(derived["vcenters"]))
            if name is None:
                if res.get("skipped"):
                    continue
                raise Failure("Invalid input for gpu_pool_preflight: a result of vcenter_results names no vCenter "
                              "(give each task its vcenter). Nothing was judged.")
            if name not in derived["vcenters"]:
                raise Failure("Invalid input for gpu_pool_preflight: vcenter_results holds vCenter %r, which is not "
                              "in the design (its vCenters: %s)." % (name, ", ".join(derived["vcenters"])))
            given[name] = res
        names = [self.module.params["vcenter"]] if self.module.params["vcenter"] else list(derived["vcenters"])
        return [(name, given.get(name, dict(skipped=True))) for name in names]


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("design", "design_file")],
                           required_one_of=[("design", "design_file")], supports_check_mode=True)
    enforce(module, "gpu_pool_preflight", gpu_pool_preflight_errors)
    Runner(module, Preflight(module)).run()


if __name__ == "__main__":
    main()
