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
    options remove them). Where the design reserves VM classes, the Supervisor's zone bindings too, planned
    as M(gpupool.vcf.supervisor_zone_binding) plans them (a zone not bound, a design class's count that
    differs; API 9.0 and later). Read through the vSphere Automation API (one list of VM classes, one of
    storage policies, one read per namespace of the design, one read of the bindings per Supervisor).
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
  - C(licensing) - NVIDIA licensing as a production dependency (needs O(dls_host), or O(cls_token_file) for the
    cloud license service, whose token file is checked instead of an appliance) - the DLS appliance
    answers (login, service instance, license server, leases); the client configuration token that
    M(gpupool.vcf.dls_client_token) keeps for site.yml (O(token_dir)) exists and is valid beyond the
    renewal margin (O(renew_before_days)), for this appliance; every GPU node's vGPUs are licensed
    (C(nvidia-smi -q) in the node's GPU Operator driver pod, see O(license_source), with the DCGM exporter's
    vGPU license status, O(license_metric), value 1, through Prometheus at O(prometheus_url) as the second
    source or, where no driver pod runs, the only one; with neither an C(info) finding says the check was
    not made); the appliance
    holds at least one lease per GPU node (the guest's GPU nodes with O(kubeconfig), else the design's
    replicas).
  - The Kubernetes objects are expected as the roles write them from the inputs the design derives for
    them (the role inputs site.yml passes), with the roles' defaults for inputs the design leaves out.
  - A link whose connection is not given is not audited, and an C(info) finding
    (C(link_not_audited)) says so.
  - Where the design adopts (C(adopt)), an C(info) finding (C(object_not_owned)) names each object in scope that
    is as designed but not yet the collection's own - a VM class or namespace without the gpupool mark, a GPU
    VM's DRS override the cluster's C(gpupool.vcf.drs-pinned) record lacks - which site.yml will record.
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
  cls_token_file:
    description:
      - The client configuration token file downloaded from the NVIDIA Licensing Portal for a cloud license
        service (CLS) instance, for the C(licensing) link without an appliance (site.yml's
        C(gpupool_cls_token_file)). Its metadata is checked (a non-empty regular file, mode 0600 or tighter),
        never its content; the GPU nodes' licenses are judged as with an appliance. Not with O(dls_host).
    type: path
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
  license_source:
    description:
      - Where the C(licensing) link reads each GPU node's license state (with O(kubeconfig)).
      - V(driver_pod) - C(nvidia-smi -q) in the node's GPU Operator driver pod (label
        C(app.kubernetes.io/component=nvidia-driver) in the design's operator namespace, container
        C(nvidia-driver-ctr)) through the pod exec API, the guest driver's own answer; the DCGM series, where
        O(prometheus_url) is given, are a second source and a disagreement is reported. Needs
        C(create) on C(pods/exec) in that namespace.
      - V(dcgm) - the DCGM exporter's O(license_metric) only.
      - V(auto) - V(driver_pod) where the operator namespace has driver pods, else V(dcgm) (a guest whose
        driver is in its node image).
    type: str
    choices: [auto, driver_pod, dcgm]
    default: auto
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

import os

from ansible.module_utils.basic import env_fallback
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_licensing, _audit_report
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_scope as scope
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_inputs import gpu_pool_audit_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import request_argument_spec, request_timeout_error
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import prometheus_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import dls_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _files
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._audit_read import read_link
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import given_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

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
    token_dir=dict(type="path"),
    cls_token_file=dict(type="path"),
    renew_before_days=dict(type="int", default=30, no_log=False),
    license_metric=dict(type="str", default=_audit_licensing.LICENSE_METRIC),
    license_source=dict(type="str", choices=["auto", "driver_pod", "dcgm"], default="auto"),
    fail_on=dict(type="str", choices=["none", "error", "warning"], default="none"),
    vcenter=dict(type="str"),
    vcenter_results=dict(type="list", elements="dict"),
    **request_argument_spec()
)
ARGUMENT_SPEC.update(dls_argument_spec())  # doc fragment gpupool.vcf.dls
ARGUMENT_SPEC.update(prometheus_argument_spec())  # doc fragment gpupool.vcf.prometheus with BEARER_TOKEN


class PoolAudit(Info):
    """Read-only: read every link the run covers, judge each (the findings), write the report when asked."""

    def __init__(self, module):
        Info.__init__(self, "the GPU pool")
        self.module = module
        self.derived = None

    def read(self):
        """The derived design (narrowed to O(vcenter)) and each covered link's live state; bad input and a design
        with errors are refused before anything is read."""
        p = self.module.params
        errors = scope.licensing_input_errors(p)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        if errors:
            raise Failure("Invalid input for gpu_pool_audit: %s. Nothing was read." % "; ".join(errors),
                          invalid_input=errors)
        try:
            derived = derive(given_design(p))
        except DesignError as exc:
            raise Failure("The design has errors; fix them first (gpu_pool_design): %s" % exc,
                          findings=[f.to_dict() for f in exc.findings])
        self.derived, asked = scope.vcenter_scope(p, derived)
        merged = scope.merged_vcenter_results(p["vcenter_results"])
        links = scope.links_to_audit(p, asked)
        live = dict(links=links, merged=merged, state={})
        for link, connected in links:
            if connected:
                where = link if p["vcenter"] is None else "%s of vCenter %s" % (link, p["vcenter"])
                with self.doing("audit link", where):
                    live["state"][link] = read_link(self.module, link, self.derived)
        return live

    def result(self, live, plan):
        findings, audited = scope.judge(self.derived, live["state"], live["links"], self.module.params["vcenter"],
                                        live["merged"])
        out = dict(findings=findings, summary=_audit.summarize(findings), clean=_audit.is_clean(findings),
                   audited=audited)
        if self.module.params["vcenter"] is not None:
            out["vcenter"] = self.module.params["vcenter"]
        return out

    def next_step(self, exc):
        if self.step and self.step[0] == "audit link" and not isinstance(exc, VsphereError):
            return "nothing was written"
        return None

    def finish(self, result):
        """The report file when asked (the only change; check mode predicts it), then fail_on."""
        p, out = self.module.params, {}
        if p["report"]:
            text = _audit_report.render(self.derived["design"], result["findings"], result["summary"],
                                        result["audited"], p["report_format"])
            path = os.path.abspath(p["report"])  # type=path: user and variables already expanded
            try:
                changed, before = _files.write_report(self.module, path, text)
            except (IOError, OSError) as exc:
                raise Failure("Unable to write report %s: %s" % (path, to_native(exc)))
            out.update(changed=changed, report=p["report"])
            if self.module._diff and changed:  # pylint: disable=protected-access
                out["diff"] = dict(before=before or "", after=text, before_header=path, after_header=path)
        message = scope.fail_on_message(result["findings"], p["fail_on"])
        if message:
            raise Failure(message, **dict(result, **out))
        return out


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("design", "design_file")],
                           required_one_of=[("design", "design_file")], supports_check_mode=True)
    enforce(module, "gpu_pool_audit", gpu_pool_audit_errors)
    Runner(module, PoolAudit(module)).run()


if __name__ == "__main__":
    main()
