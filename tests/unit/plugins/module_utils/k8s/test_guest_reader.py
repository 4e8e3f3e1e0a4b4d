"""_guest_reader: a ConfigMap value that is not YAML is kept as text (so it is compared as text and differs), and
only that: a value that is not text at all is a bug upstream and is not hidden; LINK_FAILURES holds the link's own
failures and none of the collection's bugs."""
import pytest
from kubernetes.client.exceptions import ApiException, ApiTypeError
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import ProtocolError

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s import _guest_reader
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError


def test_a_configmap_value_is_parsed_and_one_that_does_not_parse_is_kept_as_text():
    data = {"config.yaml": "version: v1\nsharing:\n  timeSlicing:\n    replicas: 4\n", "broken": "a: [", "tab": "\tx: 1"}
    out = _guest_reader._yaml_data(data)
    assert out == {"config.yaml": {"version": "v1", "sharing": {"timeSlicing": {"replicas": 4}}},
                   "broken": "a: [", "tab": "\tx: 1"}
    assert _guest_reader._yaml_data(None) == {}


def test_a_configmap_value_that_is_not_text_is_not_hidden_as_text():
    with pytest.raises(AttributeError):
        _guest_reader._yaml_data({"config.yaml": 5})


@pytest.mark.parametrize("exc", [K8sError("refused", kind="refused"), _guest_reader.LinkError("could not read"),
                                 ApiException(status=500), ConfigException("no context"), ProtocolError("dropped"),
                                 ConnectionResetError(104, "reset"), TimeoutError("timed out"),
                                 FileNotFoundError(2, "No such file")])
def test_link_failures_are_the_links_own(exc):
    assert isinstance(exc, _guest_reader.LINK_FAILURES)


@pytest.mark.parametrize("exc", [KeyError("x"), AttributeError("x"), TypeError("x"), ValueError("x"),
                                 ApiTypeError("Got an unexpected keyword argument")])
def test_a_bug_is_no_link_failure(exc):
    assert not isinstance(exc, _guest_reader.LINK_FAILURES)
