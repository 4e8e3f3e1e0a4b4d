#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_usage
short_description: GPU-hours per tenant, pool and vGPU profile from Prometheus, priced from the design
version_added: 0.2.0
description:
  - Counts, over a period, the GPUs that Running pods request (kube-state-metrics
    C(kube_pod_container_resource_requests) with resource C(nvidia.com/gpu), C(nvidia.com/gpu.shared)
    or C(nvidia.com/mig-<profile>)), joined to the pool and vGPU profile labels of the node they run
    on (C(kube_node_labels)), and reports GPU-hours per tenant (namespace), per pool and per vGPU
    profile.
  - kube-state-metrics exports node labels only when allowed; run it with
    C(--metric-labels-allowlist=nodes=[gpupool.vcf/pool,nvidia.com/vgpu.profile]) (the labels the
    collection puts on the node pools). A pod on a node without them is counted under C((none)).
  - Efficiency of each tenant, pool and profile from dcgm-exporter (with its Kubernetes pod
    labels) - the mean engine activity (C(DCGM_FI_PROF_GR_ENGINE_ACTIVE)) and the share of the
    framebuffer in use (C(DCGM_FI_DEV_FB_USED) over used plus free), joined to the node by the
    C(Hostname) label.
  - Prices from the design's C(chargeback) block - a price per profile-hour, or a card's hourly
    cost times the profile's share of the card; a unit of a time-sliced pool costs the profile's
    price divided by the pool's guest time-slicing replicas. See docs/chargeback.md.
  - Samples the allocation every O(step) seconds over the period with PromQL subqueries (one
    instant query per measure, one range query for the chart); each sample stands for the O(step)
    seconds before it.
  - With O(vcenter_hostname), also the vGPU VMs outside Kubernetes (VM Service VMs and any other
    VM with a vGPU) - vGPU-hours per vSphere Namespace and vGPU profile over the period, priced per
    profile-hour. Read with one PropertyCollector retrieval (every VM's devices, resource pool,
    power state and boot time, and every resource pool's name and parent) and the VMs' power
    events since the start of the period from the EventManager (one event collector, read in pages
    of 1000). A VM's namespace is the resource pool under the C(Namespaces) pool on its path
    (C((none)) otherwise). A VM whose name is a Kubernetes node seen in Prometheus over the period is
    a node of a guest cluster, its GPUs counted through its pods - it is left out, as are the VMs
    O(vm_exclude) names.
  - Writes the report as JSON, CSV and HTML (charts as inline SVG, no script) when paths are given.
    It reports C(changed) only when it writes or replaces a report file whose content differs; in
    check mode it predicts that and writes nothing.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.attributes.no_diff
options:
  prometheus_url:
    description:
      - Base URL of the Prometheus HTTP API (V(https://prometheus.example.com:9090); a path
        prefix is kept). Falls back to E(PROMETHEUS_URL).
      - Without it (and without E(PROMETHEUS_URL)) only the vGPU VMs are counted; one of
        O(prometheus_url) and O(vcenter_hostname) is required.
    type: str
  bearer_token:
    description: Bearer token for Prometheus (E(PROMETHEUS_TOKEN)).
    type: str
  username:
    description: User for basic authentication.
    type: str
  password:
    description: Password for basic authentication.
    type: str
  validate_certs:
    description: Verify Prometheus's TLS certificate.
    type: bool
    default: true
  ca_path:
    description: CA bundle to verify Prometheus's certificate with.
    type: path
  allow_plain_http:
    description:
      - Send the bearer token or the basic credentials to a plain V(http://) O(prometheus_url)
        (unencrypted, so anyone on the path can read it).
      - Without it, a V(http://) URL with credentials is refused before anything is sent; a redirect
        to another origin (scheme, host or port) never carries the credentials.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for each answer.
    type: int
    default: 60
  retries:
    description: Further attempts after a timeout, a dropped or refused connection or a 429/5xx answer.
    type: int
    default: 2
  start:
    description:
      - Start of the period - V(now-30d), an ISO 8601 UTC time (V(2026-11-01T00:00:00Z), V(2026-11-01))
        or Unix seconds. Default O(end) minus 30 days.
    type: str
  end:
    description: End of the period, in the same forms as O(start).
    type: str
    default: now
  step:
    description:
      - Sampling step of the allocation (V(5m), V(60s)); a whole number of seconds. Shorter steps
        count short-lived pods better and cost Prometheus more samples.
    type: str
    default: 5m
  design:
    description:
      - The pool design as a mapping, for the prices (its C(chargeback) block), the pools and the tenants'
        reserved VM classes (RV(reserved_idle)).
    type: dict
  design_file:
    description: Path to the design (YAML or JSON), instead of O(design).
    type: path
  pool_label:
    description: Node label that names the pool.
    type: str
    default: gpupool.vcf/pool
  profile_label:
    description: Node label that names the vGPU profile of the node's vGPU.
    type: str
    default: nvidia.com/vgpu.profile
  vcenter_hostname:
    description:
      - vCenter to read the vGPU VMs outside Kubernetes from. Not read from the environment, so
        that a report of pods does not start reading vCenter because E(VMWARE_HOST) is set.
    type: str
  vcenter_username:
    description: vCenter user (E(VMWARE_USER)); read-only rights on the VMs and events suffice.
    type: str
  vcenter_password:
    description: Password of O(vcenter_username) (E(VMWARE_PASSWORD)).
    type: str
  vcenter_port:
    description: vCenter port (E(VMWARE_PORT)).
    type: int
    default: 443
  vcenter_validate_certs:
    description: Verify vCenter's TLS certificate (E(VMWARE_VALIDATE_CERTS)).
    type: bool
    default: true
  vcenter_ca_file:
    description: CA bundle to verify vCenter's certificate with (E(VMWARE_CA_FILE)).
    type: path
  vm_exclude:
    description:
      - Names or shell patterns (V(tkg-*-workers-*)) of vGPU VMs not to count, besides the
        Kubernetes nodes seen in Prometheus.
    type: list
    elements: str
    default: []
  json_path:
    description: Write the report as JSON to this path.
    type: path
  csv_path:
    description: Write the rows as CSV to this path.
    type: path
  html_path:
    description: Write an HTML report with its charts to this path.
    type: path
attributes:
  check_mode:
    description: Queries Prometheus; writes no file, C(changed) predicts whether it would.
  diff_mode:
    description: Nothing to compare.
notes:
  - A VM's powered-on time comes from its power events (on, DRS on; off, suspended); where vCenter
    no longer holds any event of the period (its retention, 30 days by default), a VM powered on
    now counts from its boot time or the start of the period, a VM off now not at all.
"""

EXAMPLES = r"""
- name: Chargeback of last month
  gpupool.vcf.gpu_usage:
    prometheus_url: https://prometheus.example.com
    bearer_token: "{{ prometheus_token }}"
    start: "2026-10-01"
    end: "2026-11-01"
    step: 5m
    design_file: "{{ playbook_dir }}/design.yml"
    csv_path: chargeback-2026-10.csv
    html_path: chargeback-2026-10.html
  register: usage

- name: Pods from Prometheus and vGPU VMs from vCenter, per profile-hour
  gpupool.vcf.gpu_usage:
    prometheus_url: https://prometheus.example.com
    vcenter_hostname: vcenter.example.com
    vcenter_username: chargeback@vsphere.local
    vcenter_password: "{{ vcenter_password }}"
    start: now-30d
    design_file: "{{ playbook_dir }}/design.yml"
    html_path: chargeback.html

- name: GPU-hours per tenant
  ansible.builtin.debug:
    msg: "{{ usage.by_tenant | items2dict(key_name='namespace', value_name='gpu_hours') }}"
"""

RETURN = r"""
start:
  description: Start of the period (UTC).
  returned: always
  type: str
  sample: "2026-10-01T00:00:00Z"
end:
  description: End of the period (UTC).
  returned: always
  type: str
step_s:
  description: Sampling step in seconds.
  returned: always
  type: float
gpu_hours:
  description: GPU-hours of every row.
  returned: always
  type: float
cost:
  description: Cost of the rows that have a price; null without prices.
  returned: always
  type: float
currency:
  description: Currency of the prices.
  returned: always
  type: str
rows:
  description: One row per tenant, pool, vGPU profile and GPU resource.
  returned: always
  type: list
  elements: dict
  contains:
    namespace: {description: Tenant namespace., type: str}
    pool: {description: Pool label of the nodes (C((none)) without one)., type: str}
    profile: {description: vGPU profile label of the nodes., type: str}
    resource: {description: Kubernetes resource name., type: str, sample: nvidia.com/gpu}
    gpu_hours: {description: Unit-hours of the resource., type: float}
    engine_active: {description: Mean graphics engine activity (0-1) of the tenant's GPUs; null without DCGM data., type: float}
    fb_used_ratio: {description: Framebuffer used over framebuffer in all (0-1); null without DCGM data., type: float}
    unit_price: {description: Price of one unit-hour; null without a price., type: float}
    price_source: {description: "Where the price comes from, or why there is none.", type: str}
    cost: {description: gpu_hours times unit_price., type: float}
by_tenant:
  description: GPU-hours and cost per namespace.
  returned: always
  type: list
  elements: dict
by_pool:
  description: GPU-hours and cost per pool.
  returned: always
  type: list
  elements: dict
by_profile:
  description: GPU-hours and cost per vGPU profile.
  returned: always
  type: list
  elements: dict
timeline:
  description: GPU-hours per chart bucket (C(bucket_s) seconds) and tenant, as [time, GPU-hours] pairs.
  returned: always
  type: dict
vms_read:
  description: Whether vCenter was read for vGPU VMs outside Kubernetes.
  returned: always
  type: bool
vm_rows:
  description: One row per vSphere Namespace and vGPU profile of the vGPU VMs outside Kubernetes.
  returned: always
  type: list
  elements: dict
  contains:
    namespace: {description: vSphere Namespace (C((none)) for a VM in none)., type: str}
    profile: {description: vGPU profile., type: str}
    vms: {description: VMs with the profile in the namespace., type: int}
    vgpu_hours: {description: "Hours of the profile held (a VM with two vGPUs of it counts twice)", type: float}
    unit_price: {description: Price of one profile-hour; null without a price., type: float}
    price_source: {description: "Where the price comes from, or why there is none.", type: str}
    cost: {description: vgpu_hours times unit_price., type: float}
vgpu_vms:
  description: Every vGPU VM counted, with its namespace, profiles and powered-on hours in the period.
  returned: always
  type: list
  elements: dict
vms_left_out:
  description: vGPU VMs not counted, being Kubernetes nodes or named by O(vm_exclude).
  returned: always
  type: list
  elements: str
vm_by_namespace:
  description: vGPU-hours and cost of the VMs per vSphere Namespace.
  returned: always
  type: list
  elements: dict
vm_by_profile:
  description: vGPU-hours and cost of the VMs per vGPU profile.
  returned: always
  type: list
  elements: dict
vgpu_vm_hours:
  description: vGPU-hours of every VM row.
  returned: always
  type: float
vm_cost:
  description: Cost of the VM rows that have a price; null without prices.
  returned: always
  type: float
reserved_idle:
  description:
    - Reserved-but-idle VM class slots per tenant at the end of the period, from the design's
      C(tenants[].vm_reservations) - one row per tenant, VM class and zone. A powered-on vGPU VM in the tenant's
      vSphere Namespace with the class's vGPU profiles uses a slot (vCenter names no class on a VM, and the zone
      of a VM is not read, so it takes the tenant's first zone of that class with room).
    - Empty without reservations in the design.
  returned: always
  type: list
  elements: dict
  contains:
    tenant: {description: Tenant namespace., type: str}
    vm_class: {description: Reserved VM class., type: str}
    zone: {description: vSphere zone of the reservation., type: str}
    reserved: {description: Slots reserved., type: int}
    used: {description: Slots a powered-on VM uses; null when vCenter was not read., type: int}
    idle: {description: Reserved less used; null when vCenter was not read., type: int}
    idle_hour_cost: {description: "The idle slots' vGPUs for an hour at the profile's price; null without a price or vCenter.", type: float}
total_cost:
  description: Cost of pods and VMs; null without prices.
  returned: always
  type: float
files:
  description: Report files asked for.
  returned: always
  type: list
  elements: str
files_changed:
  description: Report files written because their content differed (in check mode, that would be).
  returned: always
  type: list
  elements: str
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError, prom_client
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._chargeback_inputs import gpu_usage_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import module_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._files import write_report
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vcenter_session import (
    vcenter_argument_spec, vcenter_client,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vgpu_vms import read_vgpu_vms
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import HAS_PYVMOMI, PYVMOMI_IMPORT_ERROR, VsphereError

ARGUMENT_SPEC = dict(
    prometheus_url=dict(type="str", fallback=(env_fallback, ["PROMETHEUS_URL"])),
    bearer_token=dict(type="str", no_log=True, fallback=(env_fallback, ["PROMETHEUS_TOKEN"])),
    username=dict(type="str"),
    password=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", default=True),
    ca_path=dict(type="path"),
    allow_plain_http=dict(type="bool", default=False),
    timeout=dict(type="int", default=60),
    retries=dict(type="int", default=2),
    start=dict(type="str"),
    end=dict(type="str", default="now"),
    step=dict(type="str", default="5m"),
    design=dict(type="dict"),
    design_file=dict(type="path"),
    pool_label=dict(type="str", default="gpupool.vcf/pool"),
    profile_label=dict(type="str", default="nvidia.com/vgpu.profile"),
    vm_exclude=dict(type="list", elements="str", default=[]),
    json_path=dict(type="path"),
    csv_path=dict(type="path"),
    html_path=dict(type="path"),
)
ARGUMENT_SPEC.update(vcenter_argument_spec())
# this module's Prometheus options are unprefixed but for the URL (the token is bearer_token)
PROMETHEUS_NAMES = dict((name, name) for name in (
    "bearer_token", "username", "password", "validate_certs", "ca_path", "allow_plain_http"))


class Usage(Info):
    """The usage report of one period, read from Prometheus."""

    errors = (PromError, VsphereError, OSError)

    def __init__(self, module, table, reservations=None):
        p = module.params
        now = time.time()
        end = _chargeback.parse_time(p["end"], now)
        start = _chargeback.parse_time(p["start"], now) if p["start"] else end - 30 * 86400
        self.start, self.end, self.step_s = _chargeback.period(start, end, _chargeback.parse_duration(p["step"]))
        Info.__init__(self, "GPU usage from %s to %s" % (_chargeback.iso(self.start), _chargeback.iso(self.end)))
        self.module = module
        self.table = table
        self.reservations = reservations or []
        self.client = None
        if p["prometheus_url"]:
            self.client = prom_client(p, p["timeout"], attempts=p["retries"] + 1, **PROMETHEUS_NAMES)

    def read(self):
        p = self.module.params
        labels = dict(pool_label=p["pool_label"], profile_label=p["profile_label"])
        window = self.end - self.start
        results, matrix, nodes = {}, [], []
        size, first, last = _chargeback.buckets(self.start, self.end, self.step_s)
        if self.client is not None:
            for name, expr in _chargeback.queries(window, self.step_s, **labels).items():
                with self.doing("query", "%s from Prometheus" % name):
                    results[name] = self.client.query(expr, at=self.end)
            with self.doing("query", "the usage timeline from Prometheus"):
                matrix = self.client.query_range(_chargeback.chart_query(size, self.step_s, **labels), first, last,
                                                 size)
            if p["vcenter_hostname"]:
                with self.doing("query", "the Kubernetes nodes from Prometheus"):
                    nodes = _chargeback.node_names(self.client.query(_chargeback.nodes_query(window), at=self.end))
        vms = None
        if p["vcenter_hostname"]:
            vms = self.read_vms(nodes + list(p["vm_exclude"]))
        return _chargeback.report(results, matrix, self.start, self.end, self.step_s, size, self.table, vms,
                                  self.reservations)

    def read_vms(self, exclude):
        p = self.module.params
        with self.doing("connect", "to vCenter %s" % p["vcenter_hostname"]):
            client = vcenter_client(p, p["timeout"], p["retries"])
        try:
            with self.doing("read", "the vGPU VMs and their power events from vCenter %s" % p["vcenter_hostname"]):
                vms, pools, transitions = read_vgpu_vms(client, self.start)
        finally:
            client.close()
        return _chargeback.vm_usage(vms, pools, transitions, self.start, self.end, self.table, exclude)

    def result(self, live, plan):
        p = self.module.params
        out = dict(live)
        files, changed = [], []
        texts = ((p["json_path"], lambda: json.dumps(live, indent=2) + "\n"),
                 (p["csv_path"], lambda: _chargeback.csv_text(live)),
                 (p["html_path"], lambda: _chargeback.html_text(live)))
        for path, render in texts:
            if path:
                with self.doing("write", "report %s" % path):
                    if write_report(self.module, path, render())[0]:
                        changed.append(path)
                files.append(path)
        out.update(files=files, files_changed=changed, changed=bool(changed))
        return out


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("design", "design_file"), ("bearer_token", "username")])
    enforce(module, "gpu_usage", gpu_usage_errors)
    if not module.params["prometheus_url"] and not module.params["vcenter_hostname"]:
        module.fail_json(msg="Unable to report GPU usage: give prometheus_url (or PROMETHEUS_URL) for the pods, "
                             "vcenter_hostname for the vGPU VMs, or both. Nothing was read.")
    if module.params["vcenter_hostname"] and not HAS_PYVMOMI:
        module.fail_json(msg=missing_required_lib("pyvmomi"), exception=str(PYVMOMI_IMPORT_ERROR))
    try:
        design = module_design(module) or {}
        table = _chargeback.price_table(design)
        resource = Usage(module, table, _chargeback.design_reservations(design))
    except _chargeback.ChargebackError as exc:
        module.fail_json(msg="Unable to report GPU usage: %s. Nothing was read." % exc)
    Runner(module, resource).run()


if __name__ == "__main__":
    main()
