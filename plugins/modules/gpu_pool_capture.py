#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_capture
short_description: Write a redacted record of what the readers get from a live GPU platform
version_added: 0.1.0
description:
  - Reads a live GPU platform through the readers the audit and C(gpu_pool_discover) use and writes what they
    got to O(dest) as JSON (docs/capture.md), so a platform can be replayed as test data.
  - C(vsphere) - the GPU hosts as C(gpu_host_info) reads them (graphics configuration, nvidia module options,
    driver packages, per-GPU MIG and vGPU mode, vGPU VMs), the DRS state of each cluster, the VM classes, every
    Supervisor namespace, the storage policies and the Supervisor clusters.
  - C(vks) - with O(supervisor_kubeconfig), the node pools of each VKS cluster the discovered design names, and
    under C(topology) the rest of its topology (ClusterClass, Kubernetes release, control plane replicas, the
    Cluster's variables).
  - C(guest) - with O(kubeconfig), the PriorityClasses, the tenants' ResourceQuotas, the Kueue ClusterQueues, the
    ClusterPolicy and the notebook culling as discovery reads them, and under C(objects) the tenant namespaces,
    PriorityClasses, ResourceQuotas and Kueue objects whole, as C(guest_objects) reads them (labels, so the
    collection's ownership mark, included; the API server's own metadata and the status left out).
  - Redacted before it is written (pure logic, docs/capture.md) - no passwords, tokens, certificates, PEM blocks,
    kubeconfig data, Secret data, last-applied annotations, IP addresses or URL hosts; the vCenter's host name
    (O(hostname)) and O(redact_hosts) are taken out of every text. The names of hosts and objects stay unless
    O(redact_names) is true.
  - The record carries C(format_version). The module fails, writing nothing, when a text that looks like an
    address or a secret is left after the redaction.
  - Reads only on the platform; the one change is O(dest), written atomically with mode 0600.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
options:
  dest:
    description:
      - The capture file to write (JSON).
      - An existing file is refused unless O(force) is true.
    type: path
    required: true
  force:
    description:
      - Replace O(dest) when it exists.
    type: bool
    default: false
  redact_names:
    description:
      - Replace the names of hosts, clusters, VMs, namespaces, VM classes, VKS clusters and node pools by stable
        pseudonyms (the same on every capture with the same O(salt)).
    type: bool
    default: false
  salt:
    description:
      - The salt of the pseudonyms with O(redact_names), kept by the sender so a name cannot be guessed back from
        its pseudonym.
    type: str
    default: ""
  redact_hosts:
    description:
      - More host names to take out of every text (the DLS appliance's, a proxy's); the vCenter's O(hostname) always is.
    type: list
    elements: str
    default: []
  clusters:
    description:
      - The vSphere clusters whose design names the VKS clusters and tenants read on the Kubernetes links. By
        default every cluster with NVIDIA GPU hosts.
    type: list
    elements: str
  supervisor_kubeconfig:
    description: Kubeconfig of the Supervisor; with it the node pools are recorded.
    type: path
  supervisor_context:
    description: Context of O(supervisor_kubeconfig).
    type: str
  kubeconfig:
    description: Kubeconfig of the guest (VKS) cluster; with it the guest objects are recorded.
    type: path
  context:
    description: Context of O(kubeconfig).
    type: str
  request_timeout:
    description: Seconds to wait for one request to the Supervisor's or the guest's Kubernetes API (1 or more).
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: Reads the platform and returns the record; the file is not written.
  diff_mode:
    support: none
    description: The record can be large and is not shown; compare two captures with a JSON diff.
notes:
  - Requires the C(kubernetes) Python library with O(supervisor_kubeconfig) or O(kubeconfig).
  - A Kubernetes link that cannot be read does not stop the capture; RV(links_not_read) names it and why.
"""

EXAMPLES = r"""
- name: Capture the platform (vSphere connection from module_defaults)
  gpupool.vcf.gpu_pool_capture:
    dest: "{{ playbook_dir }}/capture.json"
    redact_hosts: [dls01.corp.example]
    kubeconfig: "{{ guest_kubeconfig }}"

- name: Capture with names replaced by pseudonyms
  gpupool.vcf.gpu_pool_capture:
    dest: /var/tmp/capture.json
    redact_names: true
    salt: "{{ capture_salt }}"
"""

RETURN = r"""
dest:
  description: The file written (or that would be written in check mode).
  returned: always
  type: str
format_version:
  description: The record's format version.
  returned: always
  type: int
  sample: 1
sections:
  description: The sections recorded.
  returned: always
  type: list
  elements: str
  sample: [vsphere, vks, guest]
counts:
  description: How many objects each section holds (hosts, VM classes, namespaces, node pools, guest objects).
  returned: always
  type: dict
  sample: {hosts: 4, vm_classes: 3, namespaces: 2}
links_not_read:
  description: The Kubernetes links given that could not be read (C(vks), C(guest)), and why.
  returned: always
  type: dict
"""

import json

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_api import GuestObjectsApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError, k8s_client, read_guest_design, read_vks
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._vks_api import VksClusterApi
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError, request_timeout_error
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _capture
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _discover
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._capture import gpu_pool_capture_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._guest_plan import KINDS, KUEUE_KINDS, OPERATOR_KINDS
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import SECRET_MODE
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._platform_file import (
    PlatformFile, platform_file_argument_spec)
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = platform_file_argument_spec(
    redact_names=dict(type="bool", default=False),
    salt=dict(type="str", default="", no_log=True),
    redact_hosts=dict(type="list", elements="str", default=[]),
)


def counts(sections):
    """How many objects each section holds."""
    vs = sections["vsphere"]
    out = dict(hosts=len(vs["hosts"]), vm_classes=len(vs["vm_classes"]), namespaces=len(vs["namespaces"]))
    if "vks" in sections:
        out["node_pools"] = sum(len(c.get("machine_deployments") or {}) for c in sections["vks"].values())
    if "guest" in sections:
        guest = sections["guest"]
        out["priority_classes"] = len(guest.get("priority_classes") or {})
        out["resource_quotas"] = sum(len(q) for q in (guest.get("resource_quotas") or {}).values())
        out["cluster_queues"] = len(guest.get("kueue") or {})
        out["guest_objects"] = len(guest.get("objects") or [])
    return out


class Capture(PlatformFile):
    """The capture file: read the platform through the readers, redact, plan its content, write it."""

    what = "capture file"
    mode = SECRET_MODE
    shown = False  # the plan names the size only: the file is 0600 and its content is not shown

    def content(self, hosts, drs, platform):
        p = self.module.params
        sections = dict(vsphere=dict(hosts=hosts, drs=drs, **platform))
        unread = {}
        if p["supervisor_kubeconfig"] or p["kubeconfig"]:
            derived = self.derived(hosts, drs, platform)
            for link, given, read in (("vks", p["supervisor_kubeconfig"], self.read_supervisor),
                                      ("guest", p["kubeconfig"], self.read_guest)):
                section = self.read_link(link, unread, read, derived) if given else None
                if section is not None:
                    sections[link] = section
        # plain data (enumerations and dates as text) before it is redacted
        sections = json.loads(json.dumps(sections, default=str))
        names = _capture.pseudonyms(_capture.names_of(sections), p["salt"]) if p["redact_names"] else None
        hosts_out = [h for h in [p.get("hostname")] + list(p["redact_hosts"]) if h]
        record = _capture.envelope(_capture.redact(sections, hosts=hosts_out, names=names), p["redact_names"])
        left = _capture.leaks(record, hosts_out)
        if left:
            raise Failure("Unable to write capture file %s: %d text(s) still look like an address or a secret after "
                          "the redaction; nothing was written." % (self.path, len(left)))
        return dict(record=record, sections=sections, text=json.dumps(record, indent=1, sort_keys=True) + "\n",
                    unread=unread)

    def derived(self, hosts, drs, platform):
        """The inputs derived from the discovered design: the names the Kubernetes readers look for."""
        design, _notes = _discover.discover(hosts, platform["vm_classes"], platform["namespaces"],
                                            platform["storage_policies"], drs, cluster_names=platform["cluster_names"],
                                            clusters=self.module.params["clusters"])
        try:
            return derive(design)
        except DesignError as exc:
            raise Failure("Unable to read the Kubernetes links: the platform's discovered design does not validate: %s"
                          % exc)

    def read_supervisor(self, derived):
        """The node pools of each VKS cluster as discovery reads them, and under ``topology`` the rest of the
        Cluster's topology (its ClusterClass, release, control plane replicas and variables)."""
        p = self.module.params
        params = dict(kubeconfig=p["supervisor_kubeconfig"], context=p["supervisor_context"],
                      request_timeout=p["request_timeout"])
        out = read_vks(params, derived)
        for name, cluster in out.items():
            try:
                version, obj, ref = VksClusterApi(params, cluster["namespace"], name).read_cluster()
            except K8sError as exc:
                raise LinkError("could not read VKS cluster %s/%s: %s" % (cluster["namespace"], name, exc))
            cluster["topology"] = _capture.topology_of(version, obj, ref)
        return out

    def read_guest(self, derived):
        """What discovery reads of the guest cluster, and under ``objects`` the guest objects as the guest_objects
        module reads them (labels included: the collection's ownership mark), of the tenants' namespaces, the GPU
        Operator's and the culling's."""
        p = self.module.params
        k8s = k8s_client(p["kubeconfig"], p["context"], p["request_timeout"])
        out = read_guest_design(k8s, derived)
        operator, policy = _audit_guest.guest_inputs(derived)
        version = policy["gpu_scheduling_policy_kueue_api_version"]
        versions = dict((kind, version) for kind in KUEUE_KINDS)
        api = GuestObjectsApi(k8s=k8s, versions=versions)
        # the kinds of the capture's format: the operator's ConfigMaps, its ClusterPolicy and the licensing Secret
        # (kinds guest_objects grew since) are not objects the capture records, nor read at a version it knows
        objects = api.read([k for k in KINDS if k not in KUEUE_KINDS + OPERATOR_KINDS + ("Secret",)])
        if out.get("kueue") is not None:  # Kueue served
            objects.update(api.read(list(KUEUE_KINDS)))
        out["objects"] = _capture.guest_objects(
            objects, [t["namespace"] for t in policy.get("gpu_scheduling_policy_tenants") or []]
            + [operator["gpu_operator_namespace"], policy["gpu_scheduling_policy_culling_namespace"]], versions)
        return out

    def result(self, live, plan):
        return dict(dest=self.path, format_version=live["record"]["format_version"], sections=sorted(live["sections"]),
                    counts=counts(live["sections"]), links_not_read=live["unread"])


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "gpu_pool_capture", gpu_pool_capture_errors)
    if request_timeout_error(module.params["request_timeout"]):
        module.fail_json(msg=request_timeout_error(module.params["request_timeout"]))
    Runner(module, Capture(module)).run()


if __name__ == "__main__":
    main()
