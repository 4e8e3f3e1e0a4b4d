#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: gpu_capacity
short_description: Live vGPU capacity per cluster and profile, the spare rule on the live fleet, GPU queues
version_added: 0.2.0
description:
  - Reads the GPU hosts and their vGPU VMs from vCenter (the inventory of M(gpupool.vcf.gpu_host_info)
    without its per-host calls) and reports, per cluster and vGPU profile, the slots C(total),
    C(used), C(free) and C(blocked) (held by other profiles).
  - A card's slots follow its mode, as M(gpupool.vcf.gpu_host_info) reads it per GPU (C(graphicsInfo.vgpuMode))
    - a GPU in MIG mode runs only MIG-backed vGPUs whose GPU instances fit together by NVIDIA's placement
    rules; a GPU without MIG runs only time-sliced and full-card vGPUs, of one profile in C(sameSize) mode
    (up to its framebuffer divided by the profile's), of several sizes whose framebuffer fits in
    C(mixedSize) mode. Each card starts with the vGPUs vSphere lists on it (C(graphicsInfo.vm)).
  - Where a host does not say (vSphere API before 8.0.3 reports no vGPU mode; a powered-on vGPU no card
    lists), its vGPUs are placed as tightly as the cards allow, the first vGPU of a card setting its mode and
    the vGPUs of one VM on different cards; C(free) is optimistic there (a host whose vGPUs are spread over
    more cards takes fewer). A card whose mode cannot take a profile counts none of its slots. Hosts in maintenance
    mode or not connected, and profiles a host does not offer (no driver loaded), count no slots.
  - The spare rule on the live fleet checks whether the powered-on vGPU VMs of the cluster's largest host
    (most GPUs; of equal hosts the one whose loss hurts most) restart on the free cards of the other
    hosts, protected pools first, the other VMs staying where they are. The result names the pools
    and profiles left short; the rule fails when a protected pool is short.
  - VMs are mapped to the design's pools by their vGPU profile on their cluster (the profile of the
    pool's VM class); when several pools of a cluster share a profile, by the node pool or VM class
    name in the VM's name. A VM of no pool is reported as C((profile <name>)) and counted as
    protected. Without a design every VM is protected.
  - With O(kubeconfig) (the guest cluster), the Pending pods that request GPUs (C(nvidia.com/...)
    resources) per pool - by node selector or required node affinity on the C(gpupool.vcf/pool) label,
    a toleration of the pool's taint, or the MIG resource name of the pool's profile - with the GPUs
    they wait for, the longest wait and the reasons; and when Kueue is installed, per LocalQueue and
    ClusterQueue the pending Workloads with the longest wait and the admission wait of the admitted
    ones (from creation to the C(Admitted) condition's C(lastTransitionTime)).
  - "With O(prometheus_url) (the guest cluster's Prometheus, scraping kube-state-metrics), the queueing
    knee per pool: over O(knee_range), in windows of O(knee_window), the pool's utilization (GPUs
    requested by its Running pods over the GPUs its nodes offer, sampled every O(knee_step)) and the
    mean scheduling wait of the GPU pods created in the window (C(kube_pod_status_scheduled_time) -
    C(kube_pod_created)). An M/M/c model (Erlang C; c = the pool's GPUs over the design's
    C(training.gpus_per_job)) takes its service time from these samples (Little's law: busy
    server-seconds over the pods that came), is set against the measured waits, and gives the
    utilization at which the modelled wait at the design's C(slo.percentile) reaches C(slo.wait_seconds),
    and whether the design's C(slo.planned_utilization) is past it. Beside it an M/G/c model (the
    Allen-Cunneen approximation: the M/M/c wait scaled by (1 + CV^2) / 2) with the coefficient of
    variation (CV) of the pods' durations (the seconds each GPU pod created in the range was Running,
    the pods still Running at the end left out), or, with fewer than two, the CV the waits imply; its
    knee and its fit error. For a Kueue-gated pool (gang-scheduled; ClusterQueue C(gpupool-<pool>))
    the waits are Kueue's admission waits per window (the increase of
    C(kueue_admission_wait_time_seconds_sum) over C(_count)) where that histogram counts admissions
    in the range, else the pods' scheduling waits. docs/capacity.md says what the models
    assume and where they break."
  - On a vCenter of vSphere API 9.0 or later (its C(About.apiVersion), read at login), vCenter's own figures
    beside the collection's (RV(vcenter_capacity)) - C(DirectPathProfileManagerQueryCapacity) per cluster for
    every profile of the report, C(max) beside C(total), C(consumed) beside C(used), C(remaining) beside
    C(free), with C(unusedReservation). Each figure where the two differ is a finding (RV(findings)), never an
    override of the collection's; a profile vCenter answers C(CapacityUnknown) for keeps vCenter's reason.
    On an older vCenter nothing is called and the C(reason) of RV(vcenter_capacity) says why.
  - Returns the report as data and as Markdown (C(markdown)); C(playbooks/capacity.yml) writes both to files.
  - "Requests: one PropertyCollector retrieval of clusters, one of hosts and VMs, one of the hosts' graphics
    managers; on API 9.0 or later one retrieval of the clusters and one C(DirectPathProfileManagerQueryCapacity)
    per cluster, and with O(vcenter_per_host) one more per GPU host; with O(kubeconfig) one list of Pending pods, and when Kueue serves its API one list of
    Workloads and one of LocalQueues; with O(prometheus_url) four instant and four range queries."
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes.info_module
  - gpupool.vcf.prometheus
  - gpupool.vcf.prometheus.token
options:
  cluster:
    description: Report only this vSphere cluster. Default every cluster with GPU hosts.
    type: str
  profiles:
    description:
      - vGPU profiles to report besides those in use and those of the design's pools (vSphere names,
        for example V(nvidia_h100-1-10c)).
    type: list
    elements: str
    default: []
  vcenter_per_host:
    description:
      - Also read vCenter's capacity figures per GPU host (API 9.0 or later), beside the slots of that host
        alone - one more C(DirectPathProfileManagerQueryCapacity) call per GPU host of the clusters reported.
    type: bool
    default: false
  design:
    description: The pool design as a mapping (pools, their profiles, clusters and priorities).
    type: dict
  design_file:
    description: Path to the design (YAML or JSON), instead of O(design).
    type: path
  kubeconfig:
    description:
      - Kubeconfig of the guest (VKS) cluster whose pending GPU pods and Kueue queues are read.
        Without it the guest cluster is not read (C(guest) is null).
    type: path
  context:
    description: Context of O(kubeconfig).
    type: str
  request_timeout:
    description: Seconds to wait for one request to the guest cluster's API (and to Prometheus), 1 or more.
    type: int
    default: 30
  prometheus_url:
    description:
      - Base URL of the guest cluster's Prometheus HTTP API (V(https://prometheus.example.com:9090)), which
        scrapes kube-state-metrics with the node label C(gpupool.vcf/pool) allowed. Without it the knee
        is not computed (C(knee) is null). E(PROMETHEUS_URL) when not given.
  knee_range:
    description: How far back the knee's samples reach (V(7d), V(12h), V(90m) or seconds).
    type: str
    default: 7d
  knee_window:
    description:
      - Length of one sample (a window of utilization and the waits of the pods created in it); long
        enough to hold several jobs, short enough that the load is steady within it.
    type: str
    default: 15m
  knee_step:
    description: Seconds between two utilization samples inside a window (the subquery resolution).
    type: str
    default: 30s
attributes:
  check_mode:
    description: The module only reads; check mode returns the same report.
  diff_mode:
    description: Nothing changes.
notes:
  - Powered-off vGPU VMs hold no card; they are counted under C(powered_off) and left out of the spare rule.
  - The admission wait of a Workload that was evicted and admitted again runs from its creation.
"""

EXAMPLES = r"""
- name: Capacity of the GPU clusters, with the guest cluster's queues
  gpupool.vcf.gpu_capacity:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    design_file: "{{ playbook_dir }}/design.yml"
    kubeconfig: ~/.kube/gpu-workloads.kubeconfig
  register: capacity

- name: Fail when a protected pool would be short with the largest host down
  ansible.builtin.assert:
    that: capacity.spare_ok
    fail_msg: "{{ capacity.spare.values() | map(attribute='message') | join('; ') }}"
"""

RETURN = r"""
clusters:
  description:
    - Per vSphere cluster with GPU hosts, its hosts, GPUs and the slots of each vGPU profile.
    - C(off_on_unavailable_hosts) lists the powered-off vGPU VMs on hosts not counted (maintenance mode or
      not connected) with their host and profiles - after a host failure, the VMs vSphere HA did not restart.
  returned: always
  type: dict
  sample:
    gpu-h100:
      hosts: 4
      gpu_hosts: 4
      available_hosts: [esx-h100-01, esx-h100-02, esx-h100-03, esx-h100-04]
      unavailable_hosts: []
      gpus: 16
      gpus_in_use: 4
      profiles:
        nvidia_h100-3-40c: {total: 32, used: 4, free: 28, blocked: 0, powered_off: 0, per_card: 2, hosts_with_room: 4}
      overcommitted: []
      off_on_unavailable_hosts: []
spare:
  description:
    - Per cluster that runs powered-on vGPU VMs, the spare rule with its largest host down.
    - C(short) lists each pool (or C((profile <name>))) with VMs left without a card, whether it is
      protected, its profiles and VMs.
  returned: always
  type: dict
  sample:
    gpu-h100: {ok: false, host_down: esx-h100-03, host_gpus: 4, hosts_left: 3, vms_to_restart: 6, vms_short: 2,
               short: [{pool: inference, protected: true, vgpu_profiles: [nvidia_h100-3-40c], vms: [inference-4, inference-5]}],
               message: "gpu-h100: with esx-h100-03 (4 GPUs) down, 2 of its 6 powered-on vGPU VMs find no free card: ..."}
spare_ok:
  description: Whether the spare rule holds on every cluster (no protected pool short).
  returned: always
  type: bool
guest:
  description:
    - The guest cluster's queues (null without O(kubeconfig)). C(pending_pods) - per pool, the
      Pending pods requesting GPUs, their GPUs per resource, the longest wait in seconds and the
      reasons. C(kueue) - null when Kueue is not installed, else C(local_queues) and
      C(cluster_queues), each with C(pending), C(oldest_pending_s), C(admitted) and
      C(admission_wait) (count, mean_s, median_s, max_s).
  returned: always
  type: dict
knee:
  description:
    - Per pool with GPU nodes in Prometheus (null without O(prometheus_url)), the queueing knee.
      C(servers), C(gpus), C(gpus_per_job) - the M/M/c model's c; C(samples) - per window its end,
      C(utilization), C(mean_wait_s) and C(pods); C(service_s) - the mean service time measured from the
      samples; C(wait_fit_service_s) - the service time that fits the measured waits best; C(fit_rms_s) -
      the RMS error of the modelled waits; C(windows_used), C(windows_left_out) (windows with and without
      a wait to fit - saturated, idle or empty ones are left out); C(slo_wait_s), C(slo_percentile), C(planned_utilization) - the design's;
      C(knee_utilization) - where the modelled wait crosses the target; C(past_knee); C(message).
      C(waits) - what the samples' waits are, V(pod scheduling) or V(Kueue admission) (then a sample's
      C(pods) counts the workloads Kueue admitted in the window).
      C(mgc) - the M/G/c (Allen-Cunneen) model beside it - C(model); C(cv), the coefficient of variation
      of the job durations it uses; C(cv_source), V(durations) (the pods' seconds Running, C(durations)
      of them) or V(waits) (implied by the waits - the service time that fits them under M/M/c over the
      measured one is (1 + CV^2) / 2), null without either; C(wait_fit_service_s); C(fit_rms_s), the
      RMS error of its modelled waits; C(knee_utilization); C(past_knee).
  returned: always
  type: dict
  sample:
    inference: {pool: inference, model: M/M/c (Erlang C), servers: 4, gpus: 4, gpus_per_job: 1,
                service_s: 6.2, wait_fit_service_s: 3.1, fit_rms_s: 1.2, windows_used: 5, knee_utilization: 0.62,
                planned_utilization: 0.85, past_knee: true, waits: pod scheduling,
                mgc: {model: M/G/c (Allen-Cunneen), cv: 2.1, cv_source: durations, durations: 120,
                      wait_fit_service_s: 1.1, fit_rms_s: 0.4, knee_utilization: 0.41, past_knee: true},
                message: "inference: M/M/4, service time 6.2 s measured ...; the p90 wait reaches 5 s at 62.0 % utilization, ..."}
vcenter_capacity:
  description:
    - vCenter's own vGPU capacity figures (C(DirectPathProfileManagerQueryCapacity), vSphere API 9.0 and later)
      beside the collection's. C(read) - whether they were read; C(reason) - why not (an older API, no
      DirectPathProfileManager, a pyVmomi without the 9.0 types, or the fault vCenter answered), else null;
      C(api_version) - the vCenter's; C(calls) - the QueryCapacity calls made.
    - C(clusters) - per cluster and profile, C(ours) (C(total), C(used), C(free)) and C(vcenter) (C(max),
      C(consumed), C(remaining), C(unused_reservation); null when vCenter answered C(CapacityUnknown), its reason
      then in C(unknown)). C(hosts) - the same per GPU host with O(vcenter_per_host), else null.
  returned: always
  type: dict
  sample:
    read: true
    reason: null
    api_version: 9.1.0.0
    calls: 1
    clusters:
      gpu-h100:
        nvidia_h100-3-40c: {ours: {total: 8, used: 5, free: 3},
                            vcenter: {max: 8, consumed: 5, remaining: 1, unused_reservation: 2}, unknown: null}
    hosts: null
findings:
  description:
    - Where vCenter's figures differ from the collection's, one per cluster (or host), profile and figure -
      C(cluster), C(host) (per-host findings only), C(profile), C(field) (ours/vCenter's, V(free/remaining)),
      C(ours), C(vcenter) and C(message). A profile with slots of ours that vCenter answers C(CapacityUnknown)
      for is a finding of C(field) V(unknown). Empty when the figures agree or were not read.
  returned: always
  type: list
  elements: dict
  sample:
    - {cluster: gpu-h100, profile: nvidia_h100-3-40c, field: free/remaining, ours: 3, vcenter: 1,
       message: "gpu-h100 nvidia_h100-3-40c: our free is 3, vCenter's remaining is 1"}
reserved_idle:
  description:
    - With the design's C(tenants[].vm_reservations) (reserved VM classes, vSphere API 9.0 and later), per
      tenant, VM class and zone - C(reserved), C(used) (the tenant's powered-on vGPU VMs of the class, those whose
      resource pool is the tenant's vSphere Namespace, mapped to the class by their pool; the read gives no
      zone, so a VM counts in the tenant's first zone of its class with room) and C(idle) (reserved, not used).
      Null when the design reserves nothing.
    - The VMs' resource pools come in the same retrieval as the VMs (no call more).
  returned: always
  type: list
  elements: dict
  sample:
    - {tenant: team-vision, vm_class: gpu-inference, zone: zone-a, reserved: 2, used: 1, idle: 1}
generated:
  description: When the report was read (UTC).
  returned: always
  type: str
markdown:
  description: The report as Markdown.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import env_fallback

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import DEFAULT_REQUEST_TIMEOUT, K8sClient
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import read_pending
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError, prom_client, prometheus_argument_spec
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live, _capacity_reserved, _capacity_vcenter
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._capacity_inputs import gpu_capacity_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._design_input import module_design
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._capacity_api import VcenterCapacity
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import GpuInventory
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereFault

ARGUMENT_SPEC = dict(
    cluster=dict(type="str"),
    profiles=dict(type="list", elements="str", default=[]),
    vcenter_per_host=dict(type="bool", default=False),
    design=dict(type="dict"),
    design_file=dict(type="path"),
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    request_timeout=dict(type="int", default=DEFAULT_REQUEST_TIMEOUT),
    knee_range=dict(type="str", default=_capacity_live.KNEE_DEFAULTS["knee_range"]),
    knee_window=dict(type="str", default=_capacity_live.KNEE_DEFAULTS["knee_window"]),
    knee_step=dict(type="str", default=_capacity_live.KNEE_DEFAULTS["knee_step"]),
)
# the Prometheus connection (doc fragment gpupool.vcf.prometheus with TOKEN): PROMETHEUS_URL and PROMETHEUS_TOKEN fallbacks
ARGUMENT_SPEC.update(prometheus_argument_spec(token="prometheus_token", env_fallback=env_fallback))
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")


class Capacity(Info):
    """The live capacity of the GPU clusters, the guest cluster's queues and the pools' queueing knees."""

    errors = (PromError, _capacity_live.CapacityError)

    def __init__(self, module, design):
        Info.__init__(self, "the GPU capacity of %s" % (
            "cluster %s" % module.params["cluster"] if module.params["cluster"] else "every cluster"))
        self.module = module
        self.design = design
        self.pools = _capacity_live.Pools(design)

    def read(self):
        p = self.module.params
        # with reservations in the design, the same retrieval takes each VM's vSphere Namespace (its resource pool)
        extra = dict(namespaces=True) if _capacity_reserved.has_reservations(self.design) else {}
        hosts = GpuInventory(self.module.client()).read(cluster=p["cluster"], gather=["vms"], **extra)
        guest = None
        if p["kubeconfig"]:
            guest = self.read_guest()
        now = time.time()
        return dict(hosts=hosts, guest=guest, now=now, knee=self.read_knee(now) if p["prometheus_url"] else None,
                    vcenter=self.read_vcenter(hosts))

    def host_slots(self, hosts, asked):
        """{host: the slots of that GPU host alone} for the hosts of the clusters in ``asked``."""
        out = {}
        for h in hosts:
            if h.get("gpus") and (h.get("cluster") or "") in asked:
                one = _capacity_live.slots([h], self.pools, asked[h.get("cluster") or ""])
                out[h["name"]] = one.get(h.get("cluster") or "") or {}
        return out

    def read_vcenter(self, hosts):
        """vCenter's own figures for every profile of the report (vsphere/_capacity_api.py)."""
        p = self.module.params
        asked = _capacity_vcenter.asked(_capacity_live.slots(hosts, self.pools, p["profiles"]))
        per_host = None
        if p["vcenter_per_host"]:
            moids = dict((h["name"], h["moid"]) for h in hosts)
            cluster_of = dict((h["name"], h.get("cluster") or "") for h in hosts)
            per_host = dict((name, (moids[name], asked[cluster_of[name]])) for name in self.host_slots(hosts, asked))
        reader = VcenterCapacity(self.module.client())
        with self.doing("read", "vCenter's vGPU capacity figures (DirectPathProfileManagerQueryCapacity)"):
            try:
                return reader.read(asked, per_host)
            except VsphereFault as exc:
                # vCenter answered with a fault: the report goes on with its own figures and says so
                return dict(api_version=reader.api_version(), read=False, calls=reader.calls, clusters={}, hosts=None,
                            reason="vCenter answered a fault: %s" % exc)

    def read_knee(self, now):
        """The knee queries' results over the range that ends now (whole windows)."""
        p = self.module.params
        span, window, step = _capacity_live.knee_settings(p)
        client = prom_client(p, p["request_timeout"], bearer_token="prometheus_token")
        end = float(int(now))
        start = end - span
        queries = _capacity_live.knee_queries(span, window, step)
        results = {}
        for name, expr in queries.items():
            with self.doing("query", "the knee's %s series from Prometheus %s" % (name, p["prometheus_url"])):
                if name in _capacity_live.KNEE_RANGE_QUERIES:
                    results[name] = client.query_range(expr, start + window, end, window)
                else:
                    results[name] = client.query(expr, at=end)
        return dict(results=results, start=start, end=end, window=window)

    def read_guest(self):
        p = self.module.params
        with self.doing("use", "kubeconfig %s" % p["kubeconfig"]):
            k8s = K8sClient(dict(kubeconfig=p["kubeconfig"], context=p["context"]), p["request_timeout"])
        return read_pending(k8s, KUEUE_GROUP, KUEUE_VERSIONS, self.doing)

    def result(self, live, plan):
        p = self.module.params
        now = live["now"]
        hosts = live["hosts"]
        clusters = _capacity_live.slots(hosts, self.pools, p["profiles"])
        spare = _capacity_live.spare(hosts, self.pools)
        guest = None
        if live["guest"] is not None:
            kueue = live["guest"]["kueue"]
            guest = dict(
                pending_pods=_capacity_live.pending_pods(live["guest"]["pods"], now, self.pools),
                kueue=_capacity_live.kueue_waits(kueue["workloads"], kueue["local_queues"], now)
                if kueue is not None else None)
        knee = None
        if live["knee"] is not None:
            k = live["knee"]
            knee = _capacity_live.knees(k["results"], k["start"], k["end"], k["window"], self.pools)
        vc = live["vcenter"]
        vcenter = dict(read=vc["read"], reason=vc["reason"], api_version=vc["api_version"], calls=vc["calls"],
                       clusters=_capacity_vcenter.beside(clusters, vc["clusters"]), hosts=None)
        findings = _capacity_vcenter.compare(dict((c, clusters[c]) for c in vc["clusters"] if c in clusters),
                                             vc["clusters"])
        if vc["hosts"] is not None:
            mine = self.host_slots(hosts, _capacity_vcenter.asked(clusters))
            vcenter["hosts"] = _capacity_vcenter.beside(mine, vc["hosts"])
            findings += _capacity_vcenter.host_findings(
                dict((h, mine[h]) for h in vc["hosts"] if h in mine), vc["hosts"],
                dict((h["name"], h.get("cluster")) for h in hosts))
        report = dict(generated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), clusters=clusters,
                      spare=spare, spare_ok=all(s["ok"] for s in spare.values()), guest=guest, knee=knee,
                      vcenter_capacity=vcenter, findings=findings,
                      reserved_idle=_capacity_reserved.idle_rows(self.design, hosts, self.pools))
        report["markdown"] = (_capacity_live.markdown(report) + "\n" + _capacity_vcenter.markdown(vcenter, findings)
                              + _capacity_reserved.markdown(report["reserved_idle"]))
        return report


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("design", "design_file")],
                           supports_check_mode=True)
    enforce(module, "gpu_capacity", gpu_capacity_errors)
    Runner(module, Capacity(module, module_design(module))).run()


if __name__ == "__main__":
    main()
