#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_discover
short_description: Write the pool design of a GPU platform that exists, read from vSphere
version_added: 0.1.0
description:
  - Reads the vSphere side of a live GPU platform through the readers the audit uses (the GPU inventory of
    C(gpu_host_info), the DRS state of each cluster, the VM classes, every Supervisor namespace and the
    storage policies) and writes a pool design (docs/design.md) that describes it, so the audit can run
    before the first converge.
  - C(clusters) - one per vSphere cluster with NVIDIA GPU hosts - GPU model and GPUs per host, the number of
    GPU hosts, the driver version and lifecycle (V(vlcm) when the cluster's image gives the driver), the
    graphics type and assignment policy, the vGPU scheduler, the per-GPU MIG geometry (C(mig_geometry), host
    name to the GPU indexes in MIG mode) and DRS pinning.
  - C(pools) - one per VM class with a vGPU profile, on the cluster whose hosts offer the profile; the
    sharing (MIG, full card, time-sliced) from the profile and the GPU model.
  - C(vks_clusters) and C(tenants) - from the Supervisor namespaces that offer those classes - their VM
    classes, storage policy, limits and access list.
  - What the vSphere side cannot say (node pool replicas, the tenants' GPU counts, the driver's bundle or
    depot, prices, SLOs, model sizes) is left out, or set to a documented choice where the schema requires a
    value, with a YAML comment above it saying how to fill it in.
  - The design written validates (the logic of gpu_pool_design); the module fails, writing nothing, when it
    does not.
  - Reads only on the platform; the one change is the file O(dest), written atomically with mode 0644.
  - A Kubernetes link that cannot be read (O(supervisor_kubeconfig), O(kubeconfig)) does not stop the
    discovery - the design is written from what was read, its header names each link not read and why, and
    RV(links_not_read) says so. The vSphere side must be read - without it nothing is written.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
options:
  dest:
    description:
      - The design file to write.
      - An existing file is refused unless O(force) is true.
    type: path
    required: true
  force:
    description:
      - Replace O(dest) when it exists.
    type: bool
    default: false
  name:
    description:
      - The design's C(name) (labels, reports).
    type: str
    default: gpupool
  clusters:
    description:
      - The vSphere clusters to describe. By default every cluster with NVIDIA GPU hosts.
    type: list
    elements: str
  supervisor_kubeconfig:
    description:
      - Kubeconfig of the Supervisor. With it the node pools of each VKS cluster the design names (a
        namespace's description, or the namespace's name) are read - replicas, name, labels and taints - through
        the reader the audit's C(vks) link uses.
      - Without it each pool's C(node_pool.replicas) is 0, with a comment.
    type: path
  supervisor_context:
    description: Context of O(supervisor_kubeconfig).
    type: str
  kubeconfig:
    description:
      - Kubeconfig of the guest (VKS) cluster, as the audit's C(guest) link takes it. With it the guest objects
        are read - PriorityClasses, the tenants' ResourceQuotas (then C(tenants[].gpu_quota) is read, not
        chosen), the Kueue ClusterQueues, the ClusterPolicy's guest driver and MIG strategy, the notebook
        culling - through the audit's guest reader.
      - Unlike the audit it has no environment fallback, so a discovery reads the guest only when told to.
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
    description: Reads the platform and returns the design; the file is not written.
  diff_mode:
    support: full
    description: The file before and after.
notes:
  - Requires the C(kubernetes) Python library with O(supervisor_kubeconfig).
  - The guest cluster's objects (PriorityClasses, quotas, Kueue, the ClusterPolicy) are not read.
"""

EXAMPLES = r"""
- name: Discover the design of the platform (vSphere connection from module_defaults)
  gpupool.vcf.gpu_pool_discover:
    dest: "{{ playbook_dir }}/discovered.yml"
    name: lab-gpupool
  register: discovered

- name: Audit the platform against it
  gpupool.vcf.gpu_pool_audit:
    design_file: "{{ discovered.dest }}"
    links: [esxi, vsphere]
"""

RETURN = r"""
design:
  description: The discovered design (the file's content without its comments).
  returned: always
  type: dict
  sample: {version: 1, name: lab-gpupool, clusters: [{name: gpu-h100, gpu: {model: H100-80GB, per_host: 4}, hosts: 4}]}
notes:
  description: What the platform could not say, one line per key - the key's path and how to fill it in.
  returned: always
  type: list
  elements: str
  sample: ["pools[0].node_pool.replicas: the schema requires it and the vSphere side does not say: 0 chosen ..."]
dest:
  description: The file written (or that would be written in check mode).
  returned: always
  type: str
links_not_read:
  description: The links given that could not be read (C(vks) - the Supervisor, C(guest) - the guest cluster), and why.
  returned: always
  type: dict
  sample: {guest: "could not read the PriorityClasses: ... Connection refused"}
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import k8s_client, read_guest_design, read_vks
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import request_timeout_error
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _discover
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_inputs import gpu_pool_discover_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import REPORT_MODE
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._platform_file import (
    PlatformFile, platform_file_argument_spec)
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = platform_file_argument_spec(name=dict(type="str", default="gpupool"))
HEADER = [
    "Pool design discovered from a live platform by gpupool.vcf.gpu_pool_discover (docs/discover.md).",
    "Comments mark what the platform does not say: fill those in, then check it with gpu_pool_design",
    "and audit it (gpu_pool_audit) before any converge.",
]


def path_text(path):
    """pools[0].node_pool.replicas for ("pools", 0, "node_pool", "replicas")."""
    out = ""
    for part in path:
        out += "[%d]" % part if isinstance(part, int) else ("." if out else "") + part
    return out


class DiscoveredDesign(PlatformFile):
    """The design file: read the platform and the file, plan its content, write it."""

    what = "design file"
    mode = REPORT_MODE

    def content(self, hosts, drs, platform):
        p = self.module.params
        with self.doing("describe", "the platform"):
            design, notes = _discover.discover(hosts, platform["vm_classes"], platform["namespaces"],
                                               platform["storage_policies"], drs, name=p["name"],
                                               cluster_names=platform["cluster_names"], clusters=p["clusters"])
        unread = {}
        if p["supervisor_kubeconfig"]:
            self.read_link("vks", unread, self.read_node_pools, design, notes)
        if p["kubeconfig"]:
            self.read_link("guest", unread, self.read_guest, design, notes)
        self.validated(design)
        header = HEADER + ["Links not read (the keys they hold are the vSphere side's choices, with their comments):"
                           ] * bool(unread) + ["  %s: %s" % (link, why) for link, why in sorted(unread.items())]
        return dict(design=design, notes=notes, unread=unread, text=_discover.render(design, notes, header))

    def validated(self, design):
        """The design's derived inputs; Failure (nothing written) when the design does not validate."""
        try:
            return derive(design)
        except DesignError as exc:
            raise Failure("Unable to write design file %s: the discovered design does not validate, nothing was "
                          "written: %s" % (self.path, exc), findings=[f.to_dict() for f in exc.findings],
                          design=design)

    def read_guest(self, design, notes):
        """The guest cluster's objects (quotas, priorities, Kueue, ClusterPolicy, culling) into the design."""
        p = self.module.params
        derived = self.validated(design)
        k8s = k8s_client(p["kubeconfig"], p["context"], p["request_timeout"])
        _discover.apply_guest(design, notes, read_guest_design(k8s, derived))

    def read_node_pools(self, design, notes):
        """The node pools of the design's VKS clusters, read on the Supervisor into the pools."""
        p = self.module.params
        wanted = dict(vks=dict(clusters=dict((v["name"], dict(namespace=v["namespace"])) for v in design["vks_clusters"])))
        live = read_vks(dict(kubeconfig=p["supervisor_kubeconfig"], context=p["supervisor_context"],
                             request_timeout=p["request_timeout"]), wanted)
        _discover.apply_vks(design, notes, live)

    def result(self, live, plan):
        return dict(design=live["design"], dest=self.path, links_not_read=live["unread"],
                    notes=["%s: %s" % (path_text(k), v) for k, v in sorted(live["notes"].items(), key=lambda i: str(i[0]))])

    def diff(self, live, plan):
        return dict(before=live["before"] or "", after=live["text"], before_header=self.path, after_header=self.path)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "gpu_pool_discover", gpu_pool_discover_errors)
    if request_timeout_error(module.params["request_timeout"]):
        module.fail_json(msg=request_timeout_error(module.params["request_timeout"]))
    Runner(module, DiscoveredDesign(module)).run()


if __name__ == "__main__":
    main()
