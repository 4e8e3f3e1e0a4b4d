"""A double for what joins a VKS node VM to its Kubernetes node: the kubelet runs while the VM runs.

In a real pool a node VM powered off stops its kubelet and the node goes NotReady; powered on, the
kubelet registers again and the node is Ready. The rig's nodes are kwok's and the VMs are the
vSphere simulator's, so nothing joins them: this thread does. It polls the power state of the named
VMs (one PropertyCollector retrieval per round) and sets the annotation ``gpupool.vcf/sim-power`` to
``off`` on the node of a VM that is off, and removes it when the VM is on again; the rig's kwok
stages (tests/sim/k8s/kwok-stages.yml) turn the annotation into NotReady and back into Ready.

    with power_bridge.follow(sim, api_client, {"vm name": "node name"}) as bridge:
        ...                       # bridge.changes: [(vm, "off"|"on")] in the order seen
        bridge.hold("vm name")    # its node stays NotReady after the VM is on, until release()
"""
from __future__ import annotations

import contextlib
import threading

from kubernetes import client
from kubernetes.client.rest import ApiException
from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient

ANNOTATION = "gpupool.vcf/sim-power"


class Bridge:
    def __init__(self, sim, api_client, nodes, period=0.3):
        self.sim = sim
        self.core = client.CoreV1Api(api_client)
        self.nodes = dict(nodes)
        self.period = period
        self.changes = []
        self.errors = []
        self._stop = threading.Event()
        self._state = {}
        self.held = set()
        self._thread = threading.Thread(target=self._run, name="power-bridge", daemon=True)

    def _power(self, vsphere):
        return dict((vm["name"], str(vm["runtime.powerState"]))
                    for vm in vsphere.retrieve({vim.VirtualMachine: ["name", "runtime.powerState"]})
                    if vm["name"] in self.nodes)

    def _mark(self, vm, off):
        body = {"metadata": {"annotations": {ANNOTATION: "off" if off else None}}}
        try:
            self.core.patch_node(self.nodes[vm], body)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _run(self):
        vsphere = VsphereClient(self.sim.host, self.sim.user, self.sim.password, port=self.sim.port,
                                ca_file=self.sim.ca_file)
        try:
            while not self._stop.is_set():
                try:
                    for vm, state in sorted(self._power(vsphere).items()):
                        off = state != "poweredOn" or vm in self.held
                        if self._state.get(vm) != off:
                            self._mark(vm, off)
                            if vm in self._state:
                                self.changes.append((vm, "off" if off else "on"))
                            self._state[vm] = off
                except Exception as exc:  # a round that failed is tried again; kept for the test to see
                    self.errors.append(repr(exc))
                self._stop.wait(self.period)
        finally:
            vsphere.close()

    def hold(self, vm):
        """Keep `vm`'s node NotReady even when the VM is on (a kubelet that does not come back)."""
        self.held.add(vm)

    def release(self, vm):
        self.held.discard(vm)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def follow(sim, api_client, nodes, period=0.3):
    """Run a Bridge for `nodes` ({VM name: node name}) while the block runs."""
    bridge = Bridge(sim, api_client, nodes, period).start()
    try:
        yield bridge
    finally:
        bridge.stop()
