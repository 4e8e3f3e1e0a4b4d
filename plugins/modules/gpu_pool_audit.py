#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_audit
short_description: Compare every link of a GPU pool with its design and report the drift
version_added: 0.1.0
description:
  - Derives the per-link inputs from the pool design (see M(gpupool.vcf.gpu_pool_design)) and
    compares the live state of each link with them.
  - C(esxi) - each GPU host planned as the esxi_gpu_host role plans its turn, with the role's
    inputs - NVIDIA driver off the design (and mixed in a cluster) or not loaded, graphics,
    assignment policy and vGPU scheduler off the design, a reboot owed, maintenance mode or
    powered-off VMs left by an earlier run, hosts not readable; GPU VMs without an enabled DRS
    override.
  - C(esxi), per GPU - a GPU whose MIG mode is off the design's MIG geometry (C(mig_geometry) of the cluster,
    the GPU indexes in MIG mode per host, judged as the esxi_gpu_host role judges it; not judged where the
    design derives no geometry, nor on hosts whose vSphere API reports no vGPU mode - before 8.0.3 - which an
    C(info) finding names); a vGPU on a GPU of the
    wrong kind (a MIG-backed profile on a GPU without MIG, a time-sliced or full-card one on a MIG GPU,
    several sizes on a C(sameSize) GPU - a host refuses these, so the read is inconsistent or the GPU
    changed behind vCenter's back); GPU hosts left with SSH running (one warning per cluster naming them).
    Read with the GPU inventory (a fixed
    number of PropertyCollector retrievals plus two calls per GPU host) and one retrieval of
    every cluster's C(configurationEx).
  - C(vsphere) - each VM class and namespace planned as M(gpupool.vcf.vm_class) and
    M(gpupool.vcf.supervisor_namespace) plan them with the inputs the supervisor_gpu_tenancy role
    gets - VM classes missing or with other vGPU profiles, size or description; namespaces missing,
    without the VM classes of their pools, with other storage policies, limits, access entries or
    description (and GPU VM classes or access entries the design does not list where the purge
    options remove them). Read through the vSphere Automation API (one list of VM classes, one of
    storage policies, one read per namespace of the design).
  - C(vks) - VKS clusters and their node pools on the Supervisor - replicas, VM class, node labels and
    taints, each read through the variables of the Cluster's ClusterClass, discovered from the class's
    schema as M(gpupool.vcf.vks_node_pool) writes them (needs O(supervisor_kubeconfig)).
  - C(guest) - GPU nodes without their taints or vGPU profile label, tenant namespaces (and their
    labels) without their GPU ResourceQuotas, PriorityClasses, the licensing Secret in the GPU Operator
    namespace, the ClusterPolicy (driver repository, image and version, licensing Secret, MIG strategy,
    device plugin configuration), the device plugin (time-slicing) ConfigMap, Kueue's ResourceFlavor,
    ClusterQueue and LocalQueues, and the notebook culling (the culling CronJob, or where Kubeflow's Notebook
    CRD is installed or the design's culling mechanism is kubeflow, the culling environment of Kubeflow's
    notebook controller, with the design's idle and check minutes) (needs O(kubeconfig)).
  - C(licensing) - NVIDIA licensing as a production dependency (needs O(dls_host)) - the DLS appliance
    answers (login, service instance, license server, leases); the client configuration token that
    M(gpupool.vcf.dls_client_token) keeps for site.yml (O(token_dir)) exists and is valid beyond the
    renewal margin (O(renew_before_days)), for this appliance; every GPU node's vGPUs are licensed
    (the DCGM exporter's vGPU license status, O(license_metric), value 1, through Prometheus at
    O(prometheus_url); without it an C(info) finding says the check was not made); the appliance
    holds at least one lease per GPU node (the guest's GPU nodes with O(kubeconfig), else the design's
    replicas).
  - The Kubernetes objects are expected as the roles write them from the inputs the design derives for
    them (the role inputs site.yml passes), with the roles' defaults for inputs the design leaves out.
  - A link whose connection is not given is not audited, and an C(info) finding
    (C(link_not_audited)) says so.
  - The module only reads. It reports C(changed) only when it writes or updates the report file,
    and only when the file's content differs; in check mode it predicts that and writes nothing.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
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
  links:
    description:
      - The links to audit. By default every link whose connection is given.
      - A link named here whose connection is missing fails the module.
    type: list
    elements: str
    choices: [esxi, vsphere, licensing, vks, guest]
  report:
    description:
      - Path of a report file to write (created or replaced when its content differs).
    type: path
  report_format:
    description:
      - Format of O(report). V(markdown) and V(html) hold a summary table and one row per
        finding (rule, severity, link, object, message, fix).
    type: str
    choices: [json, markdown, html]
    default: markdown
  kubeconfig:
    description:
      - Kubeconfig of the guest (VKS) cluster, for the C(guest) link.
      - Falls back to E(K8S_AUTH_KUBECONFIG). Without it the C(guest) link is not audited.
    type: path
  context:
    description:
      - Context of O(kubeconfig). Falls back to E(K8S_AUTH_CONTEXT).
    type: str
  supervisor_kubeconfig:
    description:
      - Kubeconfig of the Supervisor, for the C(vks) link (the VKS Cluster objects).
        Without it the C(vks) link is not audited.
    type: path
  supervisor_context:
    description:
      - Context of O(supervisor_kubeconfig).
    type: str
  dls_host:
    description:
      - Address of the DLS appliance, for the C(licensing) link (site.yml's C(gpupool_dls_host)).
        Without it the C(licensing) link is not audited.
  token_dir:
    description:
      - Folder where site.yml keeps the client configuration token (C(gpupool_token_dir)); the token is
        C(<token_dir>/<design name>.tok) with its metadata C(.tok.meta.json) beside it, as
        M(gpupool.vcf.dls_client_token) writes them. Without it the token is not checked.
    type: path
  renew_before_days:
    description:
      - The renewal margin - a token that expires within this many days is reported (0 or more); the
        same margin M(gpupool.vcf.dls_client_token) renews at (its default, which site.yml uses, is 30).
    type: int
    default: 30
  prometheus_url:
    description:
      - Base URL of the Prometheus HTTP API that scrapes the GPU Operator's DCGM exporter, for the GPU
        nodes' license status. Without it the C(licensing) link says the check was not made.
  license_metric:
    description: The vGPU license status metric (value 1 licensed), with the node in its C(Hostname) label.
    type: str
    default: DCGM_FI_DEV_VGPU_LICENSE_STATUS
  request_timeout:
    description:
      - Seconds to wait for one request to a Kubernetes API (the C(vks) and C(guest) links), 1 or more.
      - A read that times out, loses or cannot open its connection, or gets a 429 or 5xx answer is tried
        again, three times in all, with exponential backoff and jitter; then the module fails naming the
        object it could not read (the report is not written).
    type: int
    default: 30
  vcenter:
    description:
      - Audit one vCenter of a design that names several (its C(vcenters) key; V(default) for a design with
        the C(vcenter) block) through this task's vSphere connection - the C(esxi) link over that vCenter's
        GPU clusters and, where the Supervisor is, the C(vsphere) link. By default both of those links (only
        the C(esxi) link on a vCenter without the Supervisor); O(links) may name only those.
      - In a design with several vCenters each finding names the vCenter (C(vcenter) key; its object starts
        with C(vcenter <name>:)), so the findings of every vCenter merge into one report (O(vcenter_results)).
      - playbooks/audit.yml runs one such task per vCenter, in parallel, each with its own connection.
    type: str
  vcenter_results:
    description:
      - The results of the O(vcenter) tasks of every vCenter (registered), merged into this task's findings,
        links audited, summary and report. With it this task reads no vSphere link itself - O(links) names
        the other links to audit here (an empty list - none) - and needs no vSphere connection.
    type: list
    elements: dict
  fail_on:
    description:
      - Fail the task when a finding of this severity or worse is found (after writing the report).
    type: str
    choices: [none, error, warning]
    default: none
attributes:
  check_mode:
    support: full
    description: The audit runs; the report file is not written, C(changed) predicts whether it would be.
  diff_mode:
    support: full
    description: The report file before and after.
notes:
  - Requires the C(kubernetes) Python library for the C(vks) and C(guest) links.
"""

EXAMPLES = r"""
- name: Audit the pool and write a Markdown report
  gpupool.vcf.gpu_pool_audit:
    design_file: "{{ playbook_dir }}/design.yml"
    kubeconfig: ~/.kube/gpu-workloads.kubeconfig
    report: gpu-pool-audit.md
  register: audit

- name: One vCenter of a design with several (audit.yml runs one per vCenter and merges them)
  gpupool.vcf.gpu_pool_audit:
    design_file: "{{ playbook_dir }}/design.yml"
    vcenter: vc-west
    hostname: vc-west.example.com
    username: "{{ vc_west_user }}"
    password: "{{ vc_west_password }}"
  register: audit_vc_west

- name: The other links, with the vCenters' findings merged into one report
  gpupool.vcf.gpu_pool_audit:
    design_file: "{{ playbook_dir }}/design.yml"
    vcenter_results: ["{{ audit_vc_west }}"]
    kubeconfig: ~/.kube/gpu-workloads.kubeconfig
    report: gpu-pool-audit.md

- name: Only the vSphere side, failing on any error
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.gpu_pool_audit:
    design: "{{ lookup('ansible.builtin.file', 'design.yml') | from_yaml }}"
    links: [esxi, vsphere]
    fail_on: error
"""

RETURN = r"""
findings:
  description: Every finding, sorted by link, rule and object.
  returned: always
  type: list
  elements: dict
  contains:
    rule: {description: "Stable name of the rule: V(driver_mixed), V(gpu_vm_not_pinned)...", type: str}
    severity: {description: "V(error), V(warning) or V(info).", type: str}
    link: {description: "V(esxi), V(vsphere), V(licensing), V(vks) or V(guest).", type: str}
    object: {description: "What it is about: V(host esx-01), V(vm_class gpu-inference), V(node gpu-1)...", type: str}
    message: {description: What is wrong., type: str}
    fix: {description: How to fix it., type: str}
  sample:
    - rule: driver_off_design
      severity: error
      link: esxi
      object: host esx-h100-04
      message: host esx-h100-04 runs NVIDIA driver 550.54.10-1OEM.800.1.0.20613240, the design pins 550.90.05-1OEM.800.1.0.20613240
      fix: install 550.90.05-1OEM.800.1.0.20613240 on the host (esxi_host_driver, or remediate the cluster image)
summary:
  description: Counts of findings per severity and per link.
  returned: always
  type: dict
  sample: {total: 3, severity: {error: 2, warning: 0, info: 1},
           link: {esxi: {error: 2, warning: 0, info: 0}, vsphere: {error: 0, warning: 0, info: 0},
                  licensing: {error: 0, warning: 0, info: 0},
                  vks: {error: 0, warning: 0, info: 1}, guest: {error: 0, warning: 0, info: 0}}}
clean:
  description: Whether no error and no warning was found (info findings do not count).
  returned: always
  type: bool
audited:
  description: The links that were audited.
  returned: always
  type: list
  elements: str
report:
  description: Path of the report file.
  returned: when O(report) is given
  type: str
vcenter:
  description: The vCenter audited (O(vcenter)).
  returned: when O(vcenter) is given
  type: str
  sample: vc-west
"""

import datetime
import os

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_esxi, _audit_guest, _audit_licensing
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_report, _audit_vks, _audit_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive, for_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError, request_argument_spec, request_timeout_error
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import (  # noqa: F401 - read_vks: tests import it here
    LinkError, k8s_client, read_guest, read_vks, _read)
# the paths and VsphereNotFound are not used here: the audit's unit tests read them from this module
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._pool_reader import (  # noqa: F401 pylint: disable=unused-import
    POLICIES_PATH, VM_CLASSES_PATH, read_esxi, read_pool_classes, read_vsphere)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (  # noqa: F401 pylint: disable=unused-import
    VsphereError, VsphereNotFound)
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import module_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _files
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_inputs import gpu_pool_audit_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._reader import (  # noqa: F401 pylint: disable=unused-import
    lease_list, read_dls)
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import HAS_KUBERNETES
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import read_nodes
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._token import read_token
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromClient, PromError


# --- the licensing link's reader ------------------------------------------------------------------


def read_licensing(module, derived):
    """The licensing link's live state: the appliance, the kept token, the license series and the GPU nodes."""
    p = module.params
    state = dict(dls=read_dls(p), renew_before_days=p["renew_before_days"], metric=p["license_metric"])
    if p["token_dir"]:
        path = os.path.join(p["token_dir"], "%s.tok" % derived["design"])
        meta, digest = read_token(path)
        today = datetime.datetime.now(datetime.timezone.utc).date()
        token_state, detail = _audit_licensing.token_state(meta, digest, today, p["renew_before_days"], p["dls_host"],
                                                           p["dls_port"])
        state["token"] = dict(path=path, state=token_state, detail=detail)
    if p["kubeconfig"]:
        nodes = read_nodes(k8s_client(p["kubeconfig"], p["context"], p["request_timeout"]), _read)
        state["gpu_nodes"] = _audit_licensing.gpu_node_names(derived, nodes)
    if p["prometheus_url"]:
        prom = PromClient(p["prometheus_url"], bearer_token=p["prometheus_bearer_token"],
                          validate_certs=p["prometheus_validate_certs"], ca_path=p["prometheus_ca_path"],
                          allow_plain_http=p["prometheus_allow_plain_http"],
                          plain_http_option="prometheus_allow_plain_http",
                          timeout=p["request_timeout"])
        try:
            state["license_series"] = prom.query(p["license_metric"])
        except PromError as exc:
            raise LinkError("could not read the license status from Prometheus %s: %s" % (p["prometheus_url"], exc))
    else:
        state["how_to_check"] = "no prometheus_url given"
    return state


def licensing_input_errors(p):
    """Bad licensing options, before anything is read."""
    out = []
    if not 1 <= p["dls_port"] <= 65535:
        out.append("dls_port must be from 1 to 65535, not %s" % p["dls_port"])
    if p["renew_before_days"] < 0:
        out.append("renew_before_days must be 0 or more, not %s" % p["renew_before_days"])
    url = p["prometheus_url"]
    if url and not (url.startswith("http://") or url.startswith("https://")):
        out.append("prometheus_url must be an http:// or https:// URL, not %r" % (url,))
    if p["dls_host"] and not (p["dls_username"] and p["dls_password"]):
        out.append("dls_host needs dls_username and dls_password")
    return out


# --- the module -----------------------------------------------------------------------------------


def write_report(module, path, text):
    """(changed, diff) of writing the report; check mode predicts only."""
    path = os.path.abspath(path)  # the report option is type=path: user and variables already expanded
    try:
        changed, before = _files.write_report(module, path, text)
    except (IOError, OSError) as exc:
        module.fail_json(msg="Unable to write report %s: %s" % (path, to_native(exc)))
    return changed, dict(before=before or "", after=text, before_header=path, after_header=path)


ARGUMENT_SPEC = dict(
    design=dict(type="dict"),
    design_file=dict(type="path"),
    links=dict(type="list", elements="str", choices=list(_audit.LINKS)),
    report=dict(type="path"),
    report_format=dict(type="str", choices=["json", "markdown", "html"], default="markdown"),
    kubeconfig=dict(type="path", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    supervisor_kubeconfig=dict(type="path"),
    supervisor_context=dict(type="str"),
    dls_host=dict(type="str"),
    dls_port=dict(type="int", default=443),
    dls_username=dict(type="str"),
    dls_password=dict(type="str", no_log=True),
    dls_ca_file=dict(type="path"),
    dls_validate_certs=dict(type="bool", default=True),
    token_dir=dict(type="path"),
    renew_before_days=dict(type="int", default=30, no_log=False),
    prometheus_url=dict(type="str"),
    prometheus_bearer_token=dict(type="str", no_log=True),
    prometheus_validate_certs=dict(type="bool", default=True),
    prometheus_ca_path=dict(type="path"),
    prometheus_allow_plain_http=dict(type="bool", default=False),
    license_metric=dict(type="str", default=_audit_licensing.LICENSE_METRIC),
    fail_on=dict(type="str", choices=["none", "error", "warning"], default="none"),
    vcenter=dict(type="str"),
    vcenter_results=dict(type="list", elements="dict"),
    **request_argument_spec()
)
HOW = dict(esxi="give the vSphere connection (hostname, username, password or VMWARE_HOST...)",
           vsphere="give the vSphere connection (hostname, username, password or VMWARE_HOST...)",
           licensing="give dls_host, dls_username and dls_password (site.yml's gpupool_dls_* variables)",
           vks="give supervisor_kubeconfig (the Supervisor's kubeconfig)",
           guest="give kubeconfig (the guest cluster's kubeconfig, or K8S_AUTH_KUBECONFIG)")


def derived_inputs(module):
    """The design's derived inputs, the same the roles take; a design with errors fails with its findings."""
    p = module.params
    if request_timeout_error(p["request_timeout"]):
        module.fail_json(msg=request_timeout_error(p["request_timeout"]))
    errors = licensing_input_errors(p)
    if errors:
        module.fail_json(msg="Invalid input for gpu_pool_audit: %s. Nothing was read." % "; ".join(errors),
                         invalid_input=errors)
    design = module_design(module, normalized=False)
    try:
        return derive(design)
    except DesignError as exc:
        module.fail_json(msg="The design has errors; fix them first (gpu_pool_design): %s" % exc,
                         findings=[f.to_dict() for f in exc.findings])


VSPHERE_LINKS = ("esxi", "vsphere")


def vcenter_inputs(module, derived):
    """``derived`` narrowed to the vCenter O(vcenter) names (the whole design without it); an unknown
    name, or O(links) beyond that vCenter's, fails before anything is read."""
    p = module.params
    if p["vcenter"] is not None and p["vcenter_results"] is not None:
        module.fail_json(msg="Invalid input for gpu_pool_audit: vcenter and vcenter_results are mutually exclusive "
                             "(one task per vCenter, then one that merges them). Nothing was read.")
    if p["vcenter"] is None:
        return derived
    names = list(derived["vcenters"])
    if p["vcenter"] not in names:
        module.fail_json(msg="Invalid input for gpu_pool_audit: vCenter %r is not in the design (its vCenters: %s). "
                             "Nothing was read." % (p["vcenter"], ", ".join(names)))
    own = VSPHERE_LINKS if derived["vcenters"][p["vcenter"]]["supervisor"] else VSPHERE_LINKS[:1]
    beyond = [link for link in p["links"] or [] if link not in VSPHERE_LINKS]
    if beyond:
        module.fail_json(msg="Invalid input for gpu_pool_audit: with vcenter, links may name only esxi and vsphere, "
                             "not %s (audit them in the task that merges vcenter_results). Nothing was read."
                             % ", ".join(beyond))
    if p["links"] is None:
        p["links"] = list(own)
    return for_vcenter(derived, p["vcenter"])


def in_vcenter(name, findings):
    """The findings of one vCenter, each naming it."""
    return [dict(f, object="vcenter %s: %s" % (name, f["object"]), vcenter=name) for f in findings]


def merged_vcenter_results(module):
    """(findings, audited links) of the O(vcenter_results)."""
    findings, audited = [], []
    for i, res in enumerate(module.params["vcenter_results"] or []):
        if res.get("skipped"):
            continue
        if res.get("failed"):
            module.fail_json(msg="Unable to merge the audit of every vCenter: vcenter_results[%d] failed: %s; "
                                 "nothing was written" % (i, res.get("msg") or "no message"))
        if not isinstance(res.get("findings"), list) or not res.get("vcenter"):
            module.fail_json(msg="Invalid input for gpu_pool_audit: vcenter_results[%d] is not the result of a "
                                 "gpu_pool_audit task with vcenter (%s). Nothing was read."
                             % (i, res.get("msg") or "no findings and no vcenter"))
        findings += res["findings"]
        audited += [link for link in res.get("audited") or [] if link not in audited]
    return findings, audited


def links_to_audit(module):
    """[(link, connected)] of the links asked (all by default); a link asked for without its connection fails.
    With O(vcenter_results) the vSphere links are left to the vCenters' tasks and ``[]`` asks for none."""
    p = module.params
    connection = dict(esxi=bool(p["hostname"]), vsphere=bool(p["hostname"]), licensing=bool(p["dls_host"]),
                      vks=bool(p["supervisor_kubeconfig"]), guest=bool(p["kubeconfig"]))
    asked = p["links"]
    if p["vcenter_results"] is not None:
        asked = [link for link in (_audit.LINKS if asked is None else asked) if link not in VSPHERE_LINKS]
        lacking = [link for link in p["links"] or [] if not connection[link] and link not in VSPHERE_LINKS]
        if lacking:
            module.fail_json(msg="Unable to audit link(s) %s: no connection; %s" % (
                ", ".join(lacking), "; ".join(HOW[link] for link in lacking)))
        return [(link, connection[link]) for link in _audit.LINKS if link in asked]
    lacking = [link for link in asked or [] if not connection[link]]
    if lacking:
        module.fail_json(msg="Unable to audit link(s) %s: no connection; %s" % (
            ", ".join(lacking), "; ".join(HOW[link] for link in lacking)))
    return [(link, connection[link]) for link in _audit.LINKS if (link in asked if asked else True)]


def audit_link(module, link, derived):
    """The findings of one link: its live state read, judged by the link's comparator."""
    p = module.params
    if link == "esxi":
        hosts, drs = read_esxi(module.client(), rest=module.open_rest_session)
        return _audit_esxi.audit_esxi(derived, hosts, drs)
    if link == "vsphere":
        return _audit_vsphere.audit_vsphere(derived, **read_vsphere(module, derived))
    if link == "licensing":
        if p["kubeconfig"] and not HAS_KUBERNETES:
            module.fail_json(msg="The kubernetes Python library is required for the GPU nodes of the licensing link")
        state = read_licensing(module, derived)
        return _audit_licensing.audit_licensing(derived, **state)
    if not HAS_KUBERNETES:
        module.fail_json(msg="The kubernetes Python library is required for the %s link" % link)
    if link == "vks":
        supervisor = dict(kubeconfig=p["supervisor_kubeconfig"], context=p["supervisor_context"],
                          request_timeout=p["request_timeout"])
        return _audit_vks.audit_vks(derived, read_vks(supervisor, derived), vm_classes=read_pool_classes(module, derived))
    k8s = k8s_client(p["kubeconfig"], p["context"], p["request_timeout"])
    return _audit_guest.audit_guest(derived, **read_guest(k8s, derived))


def audit_links(module, derived):
    """(findings, audited links); a link without its connection is a not_audited finding. With O(vcenter)
    each finding names the vCenter; with O(vcenter_results) the vCenters' findings are merged in."""
    findings, audited = merged_vcenter_results(module)
    own, audited_here = audit_own_links(module, derived)
    if module.params["vcenter"] is not None and len(derived["vcenters"]) > 1:
        own = in_vcenter(module.params["vcenter"], own)
    audited += [link for link in audited_here if link not in audited]
    return _audit_report.sort_findings(findings + own), [link for link in _audit.LINKS if link in audited]


def audit_own_links(module, derived):
    """(findings, audited links) of the links this task reads."""
    findings, audited = [], []
    for link, connected in links_to_audit(module):
        if not connected:
            findings.append(_audit.not_audited(link, "no connection given", HOW[link]))
            continue
        where = link if module.params["vcenter"] is None else "%s of vCenter %s" % (link, module.params["vcenter"])
        try:
            findings += audit_link(module, link, derived)
        except VsphereError as exc:
            module.fail_vsphere("audit link", where, exc)
        except (LinkError, K8sError) as exc:
            module.fail_json(msg="Unable to audit link %s: %s; nothing was written" % (where, exc))
        except Exception as exc:  # kubeconfig errors, API errors of the kubernetes client
            if link in ("vks", "guest", "licensing"):
                module.fail_json(msg="Unable to audit link %s: %s" % (link, to_native(exc)))
            raise
        audited.append(link)
    return findings, audited


def finish(module, derived, findings, audited):
    """The result, the report file when asked (the only change), and fail_on."""
    p = module.params
    summary = _audit.summarize(findings)
    result = dict(changed=False, findings=findings, summary=summary, clean=_audit.is_clean(findings), audited=audited)
    if p["vcenter"] is not None:
        result["vcenter"] = p["vcenter"]
    if p["report"]:
        text = _audit_report.render(derived["design"], findings, summary, audited, p["report_format"])
        changed, diff = write_report(module, p["report"], text)
        result.update(changed=changed, report=p["report"])
        if module._diff and changed:
            result["diff"] = diff
    if _audit.should_fail(findings, p["fail_on"]):
        counts = summary["severity"]
        module.fail_json(msg="The audit found %d error(s) and %d warning(s) (fail_on=%s)" % (
            counts["error"], counts["warning"], p["fail_on"]), **result)
    module.exit_json(**result)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("design", "design_file")],
                           required_one_of=[("design", "design_file")], supports_check_mode=True)
    enforce(module, "gpu_pool_audit", gpu_pool_audit_errors)
    derived = vcenter_inputs(module, derived_inputs(module))
    findings, audited = audit_links(module, derived)
    finish(module, derived, findings, audited)


if __name__ == "__main__":
    main()
