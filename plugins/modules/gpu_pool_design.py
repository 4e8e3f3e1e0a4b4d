#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_pool_design
short_description: Validate a GPU pool design and derive what every link needs from it
version_added: 0.1.0
description:
  - Reads one pool design (the schema and every field are explained in the collection's
    C(docs/design.md); C(examples/design.yml) is a complete example), fills in the defaults,
    checks it against every design rule and returns all findings at once, each with the
    rule's name, the object, what is wrong and the fix.
  - When the design has no errors, returns what it means for each link (RV(derived)) - a summary
    per link (ESXi host settings per cluster, VM classes, namespaces and DRS pinning, VKS node
    pools) and, under C(roles), the variables of every role of the chain under the role's own
    names, which C(playbooks/site.yml) passes on one to one and the drift audit expects.
  - Fails listing every error unless O(fail_on_error=false). Warnings never fail the task; each
    is in RV(findings), and also in the standard C(warnings) of the result (one line per
    warning, rule, object, message and fix), so Ansible shows it.
  - Every name the design gives or derives for a vCenter or Kubernetes object (pools, tenants,
    namespaces, VM classes, node pools, VKS clusters, PriorityClasses, Kueue and quota names) must
    be an RFC 1123 label (rule C(dns_label)), and the design name a safe file name (rule
    C(design_name_safe)); each finding names the field and a corrected name, so a name vCenter or
    Kubernetes would refuse fails here, before the first link changes anything.
  - Every value has a bound (rule C(schema); C(docs/design.md) lists them), and the finding names the
    field and the bound - for example a PriorityClass value from -2147483648 to 1000000000, quotas and
    namespace limits 0 or more, descriptions of at most 1024 characters, C(slo.percentile) above 0 and
    below 100, C(slo.planned_utilization) from 0 to 1, a storage class that is a DNS subdomain, the guest
    driver image as an OCI repository, path and tag. Rule C(reserved_name) refuses tenants on
    C(default), C(kube-*) or C(vmware-system-*) namespaces and PriorityClass names starting with C(system-).
  - A design file over 1 MiB is refused before it is parsed, and a YAML alias in it is refused; a design
    of more than 100000 values or nested more than 32 deep is refused. A message shows at most 80
    characters of any value, and a failure spells out at most 20 errors (all are in RV(errors)).
  - It talks to no system and changes nothing, so it runs the same in check mode. Run it
    first in a playbook, before any change.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.attributes.info_module
options:
  design:
    description:
      - The design as a mapping, for example C({{ lookup('ansible.builtin.file', 'design.yml') | from_yaml }}).
      - Exactly one of O(design) and O(design_file) is required.
    type: dict
  design_file:
    description:
      - Path to a YAML (or JSON) file with the design, on the host the module runs on. A relative
        path is relative to the module's working directory; give an absolute path
        (C({{ playbook_dir }}/design.yml)).
    type: path
  fail_on_error:
    description:
      - Fail when the design has errors. With V(false) the errors are only returned
        (RV(errors)), so a report can be made of them.
    type: bool
    default: true
attributes:
  check_mode:
    description: The module only reads the design; check mode gives the same result.
  diff_mode:
    description: Nothing changes.
notes:
  - The rules, their severity and their fixes are listed in C(docs/design.md).
seealso:
  - module: gpupool.vcf.gpu_host_info
"""

EXAMPLES = r"""
- name: Validate the design before anything changes
  gpupool.vcf.gpu_pool_design:
    design_file: "{{ playbook_dir }}/design.yml"
  register: pool_design

- name: Roll the H100 hosts to the design's driver
  ansible.builtin.include_role:
    name: gpupool.vcf.esxi_gpu_host
  vars:
    h100: "{{ pool_design.derived.roles.esxi_gpu_host['gpu-h100'] }}"
    esxi_gpu_host_cluster: "{{ h100.esxi_gpu_host_cluster }}"
    esxi_gpu_host_driver_version: "{{ h100.esxi_gpu_host_driver_version }}"
    esxi_gpu_host_driver_bundle: "{{ h100.esxi_gpu_host_driver_bundle }}"
    esxi_gpu_host_min_gpus: "{{ h100.esxi_gpu_host_min_gpus }}"

- name: Report every finding without failing
  gpupool.vcf.gpu_pool_design:
    design: "{{ lookup('ansible.builtin.file', 'design.yml') | from_yaml }}"
    fail_on_error: false
  register: review

- name: Show the errors
  ansible.builtin.debug:
    msg: "{{ item.rule }}: {{ item.object }}: {{ item.message }} (fix: {{ item.fix }})"
  loop: "{{ review.errors }}"
"""

RETURN = r"""
findings:
  description: Every finding, errors and warnings, in rule order.
  returned: always
  type: list
  elements: dict
  contains:
    rule:
      description: Stable name of the rule (C(tenant_gpu_quota), C(spare_capacity), ...).
      type: str
      sample: spare_capacity
    severity:
      description: V(error) or V(warning).
      type: str
      sample: error
    object:
      description: What the finding is about, as a dotted path in the design.
      type: str
      sample: pools.inference
    message:
      description: What is wrong.
      type: str
    fix:
      description: How to fix it.
      type: str
errors:
  description: The findings of severity error (same form as RV(findings)).
  returned: always
  type: list
  elements: dict
design:
  description: The design with every default filled in (null when it is not a mapping).
  returned: always
  type: dict
derived:
  description:
    - The per-link inputs; null when the design has errors.
    - C(esxi.clusters.<cluster>) - cluster, gpu_model, hosts, gpus_per_host, driver_version,
      driver_bundle, lifecycle, vlcm_depot_url, component, graphics_type, assignment_policy,
      scheduler (policy, time_slice_ms), rmpvmrl, mig_geometry (the GPUs in MIG mode per host position,
      or per host name when the design names hosts; derived from the pools when the design gives none),
      mig_mode (enabled when the geometry has a MIG GPU), min_gpus.
    - C(vsphere) - vm_classes (name, cpu_count, memory_mb, vgpu_profiles, memory_reservation,
      pool, cluster, description), namespaces (name, supervisor, kind, description,
      vm_classes, storage_policies, limits, access), drs_pinning (name, behavior).
    - C(vks.clusters.<vks cluster>) - name, namespace, version, storage_class, node_pools
      (name, replicas, vm_class, failure_domain, labels, taints).
    - C(roles) - each role's variables under its own names - C(esxi_gpu_host) (per GPU
      cluster), C(supervisor_gpu_tenancy), C(drs_gpu_pinning), C(nls_licensing),
      C(vks_gpu_node_pools) (a list, one entry per VKS cluster), C(gpu_operator),
      C(gpu_scheduling_policy); see C(docs/design.md).
  returned: always
  type: dict
  sample:
    esxi:
      clusters:
        gpu-h100:
          driver_version: 550.90.05-1OEM.800.1.0.20613240
          lifecycle: direct
          mig_geometry: [[], [], [0, 1], [0, 1]]
          mig_mode: enabled
          min_gpus: 2
    roles:
      esxi_gpu_host:
        gpu-h100:
          esxi_gpu_host_cluster: gpu-h100
          esxi_gpu_host_driver_version: 550.90.05-1OEM.800.1.0.20613240
          esxi_gpu_host_lifecycle: direct
          esxi_gpu_host_mig_geometry: [[], [], [0, 1], [0, 1]]
          esxi_gpu_host_min_gpus: 2
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import (
    DesignError,
    errors,
    summarize,
    warnings,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_inputs import gpu_pool_design_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import load_design_file
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    design=dict(type="dict"),
    design_file=dict(type="path"),
    fail_on_error=dict(type="bool", default=True),
)


class PoolDesign(Info):
    """A pool design, validated (findings with rule names) and, when it has no error, derived."""

    def __init__(self, module):
        Info.__init__(self, "the pool design")
        self.p = module.params

    def read(self):
        return load_design_file(self.p["design_file"]) if self.p["design_file"] else self.p["design"]

    def result(self, live, plan):
        findings = validate(live)
        errs = errors(findings)
        derived = None
        if not errs:
            try:
                derived = derive(live)
            except DesignError as exc:  # validate and derive agree; kept for safety
                errs = exc.findings
        self.warnings.extend(str(finding) for finding in warnings(findings))
        result = dict(findings=[f.to_dict() for f in findings], errors=[f.to_dict() for f in errs],
                      design=normalize(live)[0] if isinstance(live, dict) else None, derived=derived)
        if errs and self.p["fail_on_error"]:
            raise Failure(summarize(findings), changed=False, **result)
        return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("design", "design_file")],
                           required_one_of=[("design", "design_file")], supports_check_mode=True)
    enforce(module, "gpu_pool_design", gpu_pool_design_errors)
    Runner(module, PoolDesign(module)).run()


if __name__ == "__main__":
    main()
