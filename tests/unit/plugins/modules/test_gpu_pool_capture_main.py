"""gpu_pool_capture through main() (gpu_pool_discover's file uses the same fakes): the arguments parsed by
AnsibleModule, the readers replaced by fakes that answer what the shipped capture of the example platform holds
(tests/fixtures/captures/example.json). For each: an existing file without force is refused before anything is
read; a Kubernetes link that cannot be read is named (and, for discover, in the file's header) and the rest is
written; check mode writes nothing; the file holds no password."""
import json
import pathlib

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import MaxRetryError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _platform_file
from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_capture
from tests.lib.module_main import VSPHERE, run_main

SHIPPED = pathlib.Path(__file__).resolve().parents[3] / "fixtures" / "captures" / "example.json"
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


@pytest.fixture
def readers(monkeypatch):
    return fakes(monkeypatch, gpu_pool_capture)


def run(dest, check_mode=False, **params):
    return run_main(gpu_pool_capture, dict(VSPHERE, password=PASSWORD, dest=str(dest), **params), check_mode=check_mode)


def test_capture_an_existing_file_without_force_is_refused_before_anything_is_read(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    dest.write_text("kept\n")
    res = run(dest)
    assert res["failed"] and "it exists; give force: true" in res["msg"] and "Nothing was written" in res["msg"]
    assert fake.calls == [] and dest.read_text() == "kept\n"
    forced = run(dest, force=True)
    assert not forced.get("failed"), forced.get("msg")
    assert forced["changed"] is True and json.loads(dest.read_text())["format_version"] == 1


def test_capture_a_link_that_cannot_be_read_is_named_and_the_rest_is_written(readers, tmp_path):
    fake = readers(broken=["vks"])
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv.kubeconfig"), kubeconfig=str(tmp_path / "g.kubeconfig"))
    assert not res.get("failed"), res.get("msg")
    assert sorted(res["links_not_read"]) == ["vks"] and "Connection refused" in res["links_not_read"]["vks"]
    assert res["sections"] == ["guest", "vsphere"]
    assert fake.calls == ["esxi", "platform", "vks", "guest", "guest objects", "guest objects"]
    record = json.loads(dest.read_text())
    assert "vks" not in record and "guest" in record
    assert record["guest"]["objects"] == fake.record["guest"]["objects"] and res["counts"]["guest_objects"] > 0
    assert oct(dest.stat().st_mode & 0o777) == "0o600" and PASSWORD not in dest.read_text()


def test_capture_records_the_vks_topology_and_the_guest_objects(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {} and res["sections"] == ["guest", "vks", "vsphere"]
    record = json.loads(dest.read_text())
    assert record["vks"] == fake.record["vks"] and record["guest"] == fake.record["guest"]


def test_capture_check_mode_writes_nothing(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    res = run(dest, check_mode=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["dest"] == str(dest) and res["sections"] == ["vsphere"]
    assert fake.calls == ["esxi", "platform"] and not dest.exists()
    assert res["counts"]["hosts"] == len(fake.record["vsphere"]["hosts"])


# the failures of a Kubernetes link itself, as the kubernetes client and its transport raise them
LINK_FAILURES = [
    pytest.param(lambda: ApiException(status=403, reason="Forbidden"), id="api-403"),
    pytest.param(lambda: ConfigException("Invalid kube-config file. No configuration found."), id="kubeconfig"),
    pytest.param(lambda: ConnectionRefusedError(111, "Connection refused"), id="socket"),
    pytest.param(lambda: MaxRetryError(None, "/api/v1/nodes", reason="refused"), id="urllib3"),
]


@pytest.mark.parametrize("error", LINK_FAILURES)
def test_capture_a_kubernetes_client_failure_names_the_link_and_writes_the_rest(readers, tmp_path, monkeypatch, error):
    readers()
    exc = error()

    def read_guest_design(k8s, derived):
        raise exc
    monkeypatch.setattr(gpu_pool_capture, "read_guest_design", read_guest_design)
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {"guest": "%s: %s" % (type(exc).__name__, exc)}
    assert res["sections"] == ["vks", "vsphere"] and dest.exists()


def test_capture_a_bug_in_a_link_reader_reaches_the_runner_and_nothing_is_written(readers, tmp_path, monkeypatch):
    readers()

    def read_guest_design(k8s, derived):
        return {}["priority_classes"]  # a KeyError of the collection's own code, not of the link
    monkeypatch.setattr(gpu_pool_capture, "read_guest_design", read_guest_design)
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert res["failed"] and "unexpected KeyError: 'priority_classes'" in res["msg"], res
    assert "links_not_read" not in res and not dest.exists()
