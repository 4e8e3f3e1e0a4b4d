#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pool_ready
short_description: Time each step until replaced GPU capacity is in service in a guest cluster
version_added: 0.2.0
description:
  - After a host or node replacement, waits for each step in turn, each within its own bound, and returns the
    seconds each took. Ready is not in service; the steps are
    C(ready) (the nodes Ready),
    C(validated) (the GPU Operator's validator pod, C(nvidia-operator-validator), Ready on each node; its init
    containers validate the driver, the container toolkit, CUDA and the device plugin, so Ready means every
    validation passed),
    C(advertised) (the pool's GPU resource in each node's allocatable),
    C(licensed) (each vGPU licensed as C(nvidia-smi -q) in the node's GPU Operator driver pod says, see
    O(license_source); where no driver pod runs, the vGPU license status the DCGM exporter exports,
    C(DCGM_FI_DEV_VGPU_LICENSE_STATUS), read through Prometheus; skipped with a message when neither is there),
    C(probe_pod) (a pod with the pool's node selector and tolerations and one GPU, pinned to those nodes,
    Running and Ready; it is removed afterwards) and
    C(first_token) (with O(inference_url), the time until the first streamed chunk of one OpenAI-compatible
    streaming completion).
  - The nodes are O(nodes), the nodes of O(vms) (the node VMs of a host), or every node of the pool's
    O(node_selector).
  - The first step not reached within its bound fails the module; the message names it, says why, and lists
    the steps reached with their times. The result of a failure carries the same steps.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.k8s_auth
  - gpupool.vcf.attributes.no_diff
  - gpupool.vcf.prometheus
  - gpupool.vcf.prometheus.bearer_token
options:
  nodes:
    description: Names of the nodes to wait for.
    type: list
    elements: str
  vms:
    description:
      - Node VMs (C(name), and C(uuid) for nodes named otherwise), as M(gpupool.vcf.gpu_host_info) returns a
        host's C(vgpu_vms). A VM whose node has not registered yet stands for a node named as the VM.
    type: list
    elements: dict
    suboptions:
      name:
        description: VM name.
        type: str
        required: true
      uuid:
        description: The VM's BIOS uuid, which the vSphere cloud provider puts in C(spec.providerID).
        type: str
  node_selector:
    description:
      - The pool's node selector (its node labels). Without O(nodes) and O(vms), the nodes it matches are waited
        for. The probe pod always carries it.
    type: dict
  min_nodes:
    description: Without O(nodes) and O(vms), how many nodes of the pool must exist and be Ready.
    type: int
    default: 1
  tolerations:
    description: The tolerations of the probe pod (the pool's taints), as in a pod spec.
    type: list
    elements: dict
    default: []
  gpu_resource:
    description: The pool's GPU resource (V(nvidia.com/gpu), or a MIG resource such as V(nvidia.com/mig-1g.10gb)).
    type: str
    default: nvidia.com/gpu
  validator_selector:
    description: Label selector of the GPU Operator's validator pods.
    type: str
    default: app=nvidia-operator-validator
  validator_namespace:
    description: Namespace of the GPU Operator (default every namespace).
    type: str
  skip:
    description: Steps not to wait for (a cluster without the GPU Operator, without licensing, a run that must not create a pod).
    type: list
    elements: str
    choices: [validated, licensed, probe_pod]
    default: []
  prometheus_url:
    description: Base URL of the Prometheus HTTP API that scrapes the DCGM exporter; without it, C(licensed) is skipped.
  license_metric:
    description: The license status metric (value 1 licensed), with the node in its C(Hostname) label.
    type: str
    default: DCGM_FI_DEV_VGPU_LICENSE_STATUS
  license_source:
    description:
      - Where the C(licensed) step reads each node's license state.
      - V(driver_pod) - C(nvidia-smi -q) in the node's GPU Operator driver pod (label
        C(app.kubernetes.io/component=nvidia-driver), in O(validator_namespace) or every namespace, container
        C(nvidia-driver-ctr)) through the pod exec API; every vGPU it lists must be licensed and not expired.
      - V(dcgm) - the DCGM exporter's O(license_metric) through Prometheus (skipped without O(prometheus_url)).
      - V(auto) - V(driver_pod) where any driver pod exists when the step starts, else V(dcgm).
    type: str
    choices: [auto, driver_pod, dcgm]
    default: auto
  probe_namespace:
    description: Namespace of the probe pod.
    type: str
    default: default
  probe_image:
    description: Image of the probe pod (it runs C(sleep)).
    type: str
    default: busybox:1.36
  inference_url:
    description:
      - An OpenAI-compatible completions endpoint (C(.../v1/completions) or C(.../v1/chat/completions)); one
        streaming request is sent and the time to its first streamed chunk is the C(first_token) step.
    type: str
  inference_model:
    description: The model of the request.
    type: str
  inference_token:
    description: Bearer token of the inference endpoint.
    type: str
  inference_prompt:
    description: The prompt of the request.
    type: str
    default: Say hello.
  inference_validate_certs:
    description: Verify the inference endpoint's TLS certificate.
    type: bool
    default: true
  inference_ca_path:
    description: CA bundle for the inference endpoint's certificate.
    type: path
  timeout:
    description: Seconds each step may take.
    type: int
    default: 600
  step_timeouts:
    description: Seconds per step name, where a step needs another bound than O(timeout) (for example C(ready) after a host reboot).
    type: dict
    default: {}
  poll_interval:
    description: Seconds between two looks at a step.
    type: float
    default: 2.0
  request_timeout:
    description: Seconds each API request may take.
    type: int
    default: 30
attributes:
  check_mode:
    description: Waits as in a real run but creates no probe pod (the step is skipped).
"""

EXAMPLES = r"""
- name: Time the inference pool back into service after a node replacement
  gpupool.vcf.pool_ready:
    kubeconfig: /etc/gpupool/guest.kubeconfig
    vms: "{{ host_vms }}"
    node_selector: {gpupool.vcf/pool: inference}
    tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    prometheus_url: https://prometheus.example.com
    inference_url: https://llm.example.com/v1/completions
    inference_model: llama-3-8b
    step_timeouts: {ready: 1800}
  register: ready
"""

RETURN = r"""
nodes:
  description: The nodes waited for.
  returned: always
  type: list
  elements: str
steps:
  description:
    - One entry per step, in order, with C(name), C(state) (C(reached), C(skipped), C(not_reached),
      C(not_started)), C(seconds) (the step's own wait), C(at) (seconds since the start), C(reached_at)
      (epoch seconds) and C(detail).
  returned: always
  type: list
  elements: dict
seconds:
  description: Seconds each reached step took.
  returned: always
  type: dict
  sample: {ready: 41.2, validated: 95.0, advertised: 2.1, licensed: 12.4, probe_pod: 3.3, first_token: 0.4}
total_seconds:
  description: Seconds from the start to the last step reached.
  returned: always
  type: float
time_to_first_token:
  description: Seconds from sending the request to its first streamed chunk (null without O(inference_url)).
  returned: always
  type: float
markdown:
  description: The step times as a Markdown report.
  returned: always
  type: str
"""

import time
import uuid

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import K8S_IMPORT_ERROR

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import (
    K8sError, auth_argument_spec, request_argument_spec, request_timeout_error,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._pool_ready_api import (
    InferenceError, InferenceProbe, PoolReadyApi,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import (
    PromError, prom_client, prometheus_argument_spec,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._license_reader import read_node_licenses
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_license as gl
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _pool_ready as pr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import nodes_of_vms
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._pool_ready_inputs import pool_ready_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Info
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner

ARGUMENT_SPEC = dict(
    nodes=dict(type="list", elements="str"),
    vms=dict(type="list", elements="dict", options=dict(name=dict(type="str", required=True), uuid=dict(type="str"))),
    node_selector=dict(type="dict"),
    min_nodes=dict(type="int", default=1),
    tolerations=dict(type="list", elements="dict", default=[]),
    gpu_resource=dict(type="str", default="nvidia.com/gpu"),
    validator_selector=dict(type="str", default=pr.VALIDATOR_SELECTOR),
    validator_namespace=dict(type="str"),
    skip=dict(type="list", elements="str", choices=list(pr.OPTIONAL), default=[]),
    license_metric=dict(type="str", default=pr.LICENSE_METRIC),
    license_source=dict(type="str", choices=["auto", "driver_pod", "dcgm"], default="auto"),
    probe_namespace=dict(type="str", default="default"),
    probe_image=dict(type="str", default="busybox:1.36"),
    inference_url=dict(type="str"),
    inference_model=dict(type="str"),
    inference_token=dict(type="str", no_log=True),
    inference_prompt=dict(type="str", default="Say hello."),
    inference_validate_certs=dict(type="bool", default=True),
    inference_ca_path=dict(type="path"),
    timeout=dict(type="int", default=600),
    step_timeouts=dict(type="dict", default={}),
    poll_interval=dict(type="float", default=2.0),
)
ARGUMENT_SPEC.update(prometheus_argument_spec())
ARGUMENT_SPEC.update(auth_argument_spec())
ARGUMENT_SPEC.update(request_argument_spec())


class PoolReady(Info):
    """The replaced capacity of a pool, waited for step by step."""

    errors = (PromError,)

    def __init__(self, module, clock=time.monotonic, sleep=time.sleep, wall=time.time):
        self.p = module.params
        if self.p["nodes"]:
            what = "nodes %s" % ", ".join(self.p["nodes"])
        elif self.p["vms"]:
            what = "the nodes of VMs %s" % ", ".join(vm["name"] for vm in self.p["vms"])
        else:
            what = "the pool %s" % ",".join("%s=%s" % kv for kv in sorted((self.p["node_selector"] or {}).items()))
        Info.__init__(self, what)
        self.module = module
        self.clock, self.sleep, self.wall = clock, sleep, wall
        self.api = None
        self.names = []
        self.timeline = None
        self.ttft = None
        self.probe = None

    # --- one bounded wait

    def _limit(self, step):
        return int((self.p["step_timeouts"] or {}).get(step) or self.p["timeout"])

    def _wait(self, step, check):
        """Call ``check`` until it says done, within the step's bound; Failure naming the step otherwise."""
        limit = self._limit(step)
        deadline = self.clock() + limit
        while True:
            try:
                done, detail = check()
            except pr.PoolReadyError as exc:
                self._stop(step, limit, str(exc))
            if done:
                return self.timeline.reached(step, self.clock(), detail)
            if self.clock() >= deadline:
                self._stop(step, limit, detail)
            self.sleep(max(0.0, min(self.p["poll_interval"], deadline - self.clock())))

    def _stop(self, step, limit, detail):
        self.timeline.not_reached(step, self.clock(), detail)
        raise Failure(self.timeline.failure(step, limit, detail, self.name), **self._out())

    def _out(self):
        steps = self.timeline.steps
        return dict(nodes=self.names, steps=steps, seconds=self.timeline.seconds(), total_seconds=self.timeline.total(),
                    time_to_first_token=self.ttft, markdown=pr.markdown(self.name, steps, self.timeline.total(), self.names))

    # --- the steps

    def _nodes(self):
        nodes = self.api.list_nodes()
        node_of_vm = nodes_of_vms(self.p["vms"], nodes) if self.p["vms"] else None
        self.names = pr.target_nodes(nodes, self.p["nodes"], self.p["vms"], self.p["node_selector"], node_of_vm)
        return nodes

    def _ready(self):
        nodes = self._nodes()
        return pr.ready_check(nodes, self.names, 1 if (self.p["nodes"] or self.p["vms"]) else self.p["min_nodes"])

    def _validated(self):
        return pr.validated_check(self.api.list_pods(self.p["validator_selector"], self.p["validator_namespace"]),
                                  self.names)

    def _advertised(self):
        return pr.advertised_check(self.api.list_nodes(), self.names, self.p["gpu_resource"])

    def _licensed(self, prom):
        return pr.licensed_check(prom.query(pr.license_query(self.names, self.p["license_metric"])), self.names)

    def _driver_pods(self):
        return self.api.list_pods(gl.DRIVER_SELECTOR, self.p["validator_namespace"])

    def _licensed_guest(self):
        readings = read_node_licenses(self.api.k8s, None, self.names, pods=self._driver_pods())
        return gl.licensed_check(readings, self.names)

    def _probe(self):
        return pr.probe_check(self.api.read_pod(self.p["probe_namespace"], self.probe))

    def _first_token(self, probe):
        body = pr.completion_request(self.p["inference_url"], self.p["inference_model"], self.p["inference_prompt"])
        try:
            self.ttft = round(probe.first_chunk(body), 3)
        except InferenceError as exc:  # refused, 503 while the model loads, timeouts: tried again within the bound
            return False, str(exc)
        return True, "first streamed chunk %.3f s after the request" % self.ttft

    def read(self):
        p = self.p
        if K8S_IMPORT_ERROR:
            raise Failure(missing_required_lib("kubernetes"), exception=K8S_IMPORT_ERROR)
        if request_timeout_error(p["request_timeout"]):
            raise Failure(request_timeout_error(p["request_timeout"]))
        with self.doing("reach the guest cluster for"):
            self.api = PoolReadyApi(p)
        self.timeline = pr.Timeline(self.clock(), self.wall())
        with self.doing("wait for", self.name):
            self._wait("ready", self._ready)
            self._optional("validated", self._validated)
            self._wait("advertised", self._advertised)
            if "licensed" in p["skip"]:
                self.timeline.skipped("licensed", self.clock(), "skipped as asked")
            elif p["license_source"] != "dcgm" and gl.use_driver_pods(p["license_source"], self._driver_pods()):
                self._wait("licensed", self._licensed_guest)
            elif not p["prometheus_url"]:
                self.timeline.skipped("licensed", self.clock(), "no prometheus_url: the license status is checked by "
                                      "the DCGM exporter's %s through Prometheus" % p["license_metric"])
            else:
                prom = prom_client(p, p["request_timeout"])
                self._wait("licensed", lambda: self._licensed(prom))
            if "probe_pod" in p["skip"]:
                self.timeline.skipped("probe_pod", self.clock(), "skipped as asked")
            elif self.module.check_mode:
                self.timeline.skipped("probe_pod", self.clock(), "check mode creates no pod")
            else:
                self._probe_step()
            if p["inference_url"]:
                probe = InferenceProbe(p["inference_url"], token=p["inference_token"],
                                       validate_certs=p["inference_validate_certs"], ca_path=p["inference_ca_path"],
                                       timeout=p["request_timeout"], clock=self.clock)
                self._wait("first_token", lambda: self._first_token(probe))
            else:
                self.timeline.skipped("first_token", self.clock(), "no inference_url")
        return self._out()

    def _optional(self, step, check):
        if step in self.p["skip"]:
            self.timeline.skipped(step, self.clock(), "skipped as asked")
        else:
            self._wait(step, check)

    def _probe_step(self):
        self.probe = "pool-ready-probe-%s" % uuid.uuid4().hex[:8]
        manifest = pr.probe_pod(self.probe, self.p["probe_namespace"], self.p["gpu_resource"], self.p["probe_image"],
                                self.p["node_selector"], self.p["tolerations"], self.names)
        try:
            with self.doing("create the probe pod", "%s/%s" % (self.p["probe_namespace"], self.probe)):
                self.api.create_pod(manifest)
            self._wait("probe_pod", self._probe)
        finally:
            try:
                self.api.delete_pod(self.p["probe_namespace"], self.probe)
            except K8sError as exc:
                self.warnings.append("the probe pod %s/%s was not removed: %s" % (
                    self.p["probe_namespace"], self.probe, exc))

    def result(self, live, plan):
        return live

    def next_step(self, exc):
        if self.timeline is None:
            return None
        return "reached: %s" % self.timeline.summary()


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("nodes", "vms")],
                           required_one_of=[("nodes", "vms", "node_selector")])
    enforce(module, "pool_ready", pool_ready_errors)
    Runner(module, PoolReady(module)).run()


if __name__ == "__main__":
    main()
