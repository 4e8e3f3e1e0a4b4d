"""Fake link readers for the unit tests of gpu_pool_capture and gpu_pool_discover through main(): ``fakes``
replaces the readers of a module by ones that answer what the shipped capture of the example platform holds
(tests/fixtures/captures/example.json) and record each call; ``replace_reader`` puts one reader that fails in
place; ``LINK_FAILURES`` are the failures of a Kubernetes link as its client and transport raise them.
"""
import json

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import MaxRetryError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _platform_file
from tests.lib.paths import ROOT

SHIPPED = ROOT / "tests" / "fixtures" / "captures" / "example.json"
PASSWORD = "vc-pw-never-written"


class Readers:
    """Fake readers: the example's answers, each call recorded; ``broken``: the links that raise."""

    def __init__(self, broken=()):
        self.record = json.loads(SHIPPED.read_text())
        self.calls, self.broken = [], set(broken)

    def read_esxi(self, client, rest=None):
        self.calls.append("esxi")
        vs = self.record["vsphere"]
        return vs["hosts"], vs["drs"]

    def read_platform(self, module):
        self.calls.append("platform")
        vs = self.record["vsphere"]
        return dict((k, vs[k]) for k in ("vm_classes", "namespaces", "storage_policies", "cluster_names"))

    def read_vks(self, params, derived):
        self.calls.append("vks")
        if "vks" in self.broken:
            raise LinkError("could not read VKS cluster gpu-platform/gpu-workloads: Connection refused")
        return self.record.get("vks") or {}

    def read_guest_design(self, k8s, derived):
        self.calls.append("guest")
        if "guest" in self.broken:
            raise LinkError("could not read the PriorityClasses: Forbidden")
        return dict((k, v) for k, v in (self.record.get("guest") or {}).items() if k != "objects")

    def vks_cluster_api(self, params, namespace, name):
        """The VKS cluster client: read_cluster() answers the recorded topology."""
        topology = self.record["vks"][name]["topology"]

        class Api:
            @staticmethod
            def read_cluster():
                ns, cc = topology["cluster_class"].split("/")
                obj = {"metadata": {"name": name, "namespace": namespace}, "spec": {"topology": {
                    "classRef": {"name": cc, "namespace": ns}, "version": topology["version"],
                    "controlPlane": {"replicas": topology["control_plane_replicas"]},
                    "variables": topology["variables"]}}}
                return topology["api_version"], obj, {"name": cc, "namespace": ns}
        return Api()

    def guest_objects_api(self, k8s=None, versions=None):
        """The guest_objects reader: {(kind, namespace, name): object} of the kinds asked, one list per kind."""
        readers = self

        class Api:
            @staticmethod
            def read(kinds):
                readers.calls.append("guest objects")
                return dict(((o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]), o)
                            for o in readers.record["guest"]["objects"] if o["kind"] in kinds)
        return Api()


def fakes(monkeypatch, module):
    def make(broken=()):
        fake = Readers(broken)
        for name in ("read_esxi", "read_platform"):  # the vSphere link, read by the modules' shared base
            monkeypatch.setattr(_platform_file, name, getattr(fake, name))
        for name in ("read_vks", "read_guest_design"):
            monkeypatch.setattr(module, name, getattr(fake, name))
        monkeypatch.setattr(module, "k8s_client", lambda *args: "guest client")
        if hasattr(module, "GuestObjectsApi"):
            monkeypatch.setattr(module, "GuestObjectsApi", fake.guest_objects_api)
            monkeypatch.setattr(module, "VksClusterApi", fake.vks_cluster_api)
        return fake
    return make


# the failures of a Kubernetes link itself, as the kubernetes client and its transport raise them
LINK_FAILURES = [
    pytest.param(lambda: ApiException(status=403, reason="Forbidden"), id="api-403"),
    pytest.param(lambda: ConfigException("Invalid kube-config file. No configuration found."), id="kubeconfig"),
    pytest.param(lambda: ConnectionRefusedError(111, "Connection refused"), id="socket"),
    pytest.param(lambda: MaxRetryError(None, "/api/v1/nodes", reason="refused"), id="urllib3"),
]


def replace_reader(monkeypatch, module, name, answer):
    """Replace the reader ``name`` of ``module`` by one that raises ``answer`` (an exception) or returns what
    ``answer()`` returns, whatever it is given."""
    def reader(*args, **kwargs):  # pylint: disable=unused-argument
        if isinstance(answer, BaseException):
            raise answer
        return answer()
    monkeypatch.setattr(module, name, reader)
