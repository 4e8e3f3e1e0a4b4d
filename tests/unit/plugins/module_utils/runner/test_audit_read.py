"""_audit_read.read_link: a failure of a Kubernetes link itself (the kubernetes client's API and kubeconfig errors,
urllib3's and the socket's) becomes the link's LinkError, which the audit names; a bug of the collection's own code
(KeyError, AttributeError) and any failure of a vSphere link go on unchanged to the runner."""
import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import MaxRetryError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LinkError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _audit_read


class Module:
    params = dict(kubeconfig="/nonexistent/kubeconfig", context=None, request_timeout=5)

    @staticmethod
    def client():
        return "soap session"

    @staticmethod
    def open_rest_session():
        return "rest session"


def raising(exc):
    def read(*args, **kwargs):
        raise exc
    return read


@pytest.fixture
def guest(monkeypatch):
    monkeypatch.setattr(_audit_read, "HAS_KUBERNETES", True)
    monkeypatch.setattr(_audit_read, "k8s_client", lambda *args: "guest session")

    def make(exc):
        monkeypatch.setattr(_audit_read, "read_guest", raising(exc))
    return make


@pytest.mark.parametrize("exc", [
    ApiException(status=401, reason="Unauthorized"),
    ConfigException("Invalid kube-config file. No configuration found."),
    ConnectionResetError(104, "Connection reset by peer"),
    MaxRetryError(None, "/api/v1/nodes", reason="refused"),
], ids=["api", "kubeconfig", "socket", "urllib3"])
def test_a_kubernetes_link_failure_becomes_the_links_error(guest, exc):
    guest(exc)
    with pytest.raises(LinkError) as raised:
        _audit_read.read_link(Module(), "guest", {})
    assert str(raised.value) == "%s: %s" % (type(exc).__name__, exc)


BUGS = [KeyError("gpu_operator_namespace"), AttributeError("'NoneType' object has no attribute 'get'")]


@pytest.mark.parametrize("exc", BUGS)
def test_a_bug_in_a_kubernetes_reader_is_not_taken_for_the_link(guest, exc):
    guest(exc)
    with pytest.raises(type(exc)) as raised:
        _audit_read.read_link(Module(), "guest", {})
    assert raised.value is exc and not isinstance(raised.value, LinkError)


def test_a_vsphere_link_socket_error_is_not_made_a_kubernetes_link_error(monkeypatch):
    exc = ConnectionRefusedError(111, "Connection refused")
    monkeypatch.setattr(_audit_read, "read_esxi", raising(exc))
    with pytest.raises(ConnectionRefusedError) as raised:
        _audit_read.read_link(Module(), "esxi", {})
    assert raised.value is exc
