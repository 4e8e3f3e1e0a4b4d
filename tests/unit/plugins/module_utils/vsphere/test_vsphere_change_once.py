"""A change is sent once: the REST client and the SOAP boundary repeat a change only where it provably
did not reach vCenter (connection refused; for REST also a connect timeout and a 503 with Retry-After).
After a 502, a 504, a 503 without Retry-After, a reset or a timeout after sending, they raise
VsphereOutcomeUnknown ("may or may not have been carried out"). Reads keep their retries."""
import http.client

import pytest
import requests

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereConnectionError, VsphereOutcomeUnknown
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient, VsphereRestError
from tests.lib.vsphere_boundary import Info, Mo, RestSession, response, soap


def rest(*answers):
    session = RestSession(*answers)
    return VsphereRestClient("vc", "u", "p", session=session, sleep=lambda s: None), session


CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"


@pytest.mark.parametrize("status", [502, 504, 503])
def test_a_post_answered_by_a_gateway_is_sent_once(status):
    client, session = rest(response(status, b"%d gateway" % status))
    with pytest.raises(VsphereOutcomeUnknown, match="may or may not have been carried out") as err:
        client.post(CLASSES, {"id": "gpu-small"})
    assert [s[:2] for s in session.sent] == [("POST", CLASSES)]  # not six
    assert "HTTP %d" % status in str(err.value)
    assert isinstance(err.value, VsphereConnectionError)  # callers that catch connection errors still do


@pytest.mark.parametrize("method", ["patch", "put"])
def test_a_patch_or_put_after_504_is_sent_once(method):
    client, session = rest(response(504))
    with pytest.raises(VsphereOutcomeUnknown):
        getattr(client, method)(CLASSES + "/gpu-small", {"cpu_count": 4})
    assert len(session.sent) == 1


def test_a_delete_after_a_reset_is_sent_once():
    client, session = rest(requests.exceptions.ConnectionError("Connection reset by peer"))
    with pytest.raises(VsphereOutcomeUnknown, match="may or may not"):
        client.delete(CLASSES + "/gpu-small")
    assert len(session.sent) == 1


def test_a_post_after_a_read_timeout_is_sent_once():
    client, session = rest(requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(VsphereOutcomeUnknown):
        client.post("/api/esx/settings/clusters/domain-c8/software", params={"action": "apply", "vmw-task": "true"})
    assert len(session.sent) == 1


def test_a_post_is_repeated_after_a_503_with_retry_after():
    client, session = rest(response(503, headers={"Retry-After": "2"}), response(200, b'"gpu-small"'))
    assert client.post(CLASSES, {"id": "gpu-small"}) == "gpu-small"
    assert len(session.sent) == 2


def test_a_post_is_repeated_after_a_refused_or_timed_out_connect():
    client, session = rest(requests.exceptions.ConnectionError("[Errno 111] Connection refused"),
                           requests.exceptions.ConnectTimeout("connect timed out"), response(200, b"{}"))
    assert client.post(CLASSES, {"id": "gpu-small"}) == {}
    assert len(session.sent) == 3


def test_503_with_retry_after_every_time_ends_as_the_answer():
    client, session = rest(response(503, headers={"Retry-After": "1"}))
    with pytest.raises(VsphereRestError) as err:
        client.post(CLASSES, {"id": "gpu-small"})
    assert err.value.status == 503 and len(session.sent) == 6


def test_reads_keep_their_retries():
    client, session = rest(response(504), response(502), requests.exceptions.ConnectionError("reset"),
                           response(200, b"[]"))
    assert client.get(CLASSES) == []
    assert len(session.sent) == 4


# --- the SOAP boundary ------------------------------------------------------------------------

@pytest.mark.parametrize("fault", [http.client.HTTPException("504 Gateway Timeout"),
                                   http.client.HTTPException("502 Bad Gateway"),
                                   http.client.HTTPException("503 Service Unavailable"),
                                   ConnectionResetError(104, "Connection reset by peer"),
                                   TimeoutError("timed out")])
@pytest.mark.parametrize("method", ["UpdateModuleOptionString", "UpdateGraphicsConfig", "PowerOnVM_Task",
                                    "ApplyEntitiesConfig_Task"])
def test_a_soap_change_is_sent_once(method, fault):
    client, inner = soap(fault)
    with pytest.raises(VsphereOutcomeUnknown, match="may or may not have been carried out") as err:
        client._invoke(Mo(), Info(method), [], None)
    assert inner.calls == [method]  # not six
    assert method in str(err.value) and "host-21" in str(err.value)


def test_a_soap_change_is_repeated_after_a_refused_connection():
    client, inner = soap(ConnectionRefusedError(111, "Connection refused"), "task-1")
    assert client._invoke(Mo(), Info("PowerOnVM_Task"), [], None) == "task-1"
    assert inner.calls == ["PowerOnVM_Task"] * 2


@pytest.mark.parametrize("method", ["RetrievePropertiesEx", "ContinueRetrievePropertiesEx", "RetrieveServiceContent",
                                    "Login"])
def test_soap_reads_keep_their_retries(method):
    client, inner = soap(http.client.HTTPException("504 Gateway Timeout"), ConnectionResetError(104, "reset"), "ok")
    assert client._invoke(Mo(), Info(method), [], None) == "ok"
    assert inner.calls == [method] * 3


def test_a_soap_read_that_keeps_failing_is_a_connection_error_not_an_unknown_outcome():
    client, inner = soap(http.client.HTTPException("503 Service Unavailable"))
    with pytest.raises(VsphereConnectionError) as err:
        client._invoke(Mo(), Info("RetrievePropertiesEx"), [], None)
    assert not isinstance(err.value, VsphereOutcomeUnknown) and len(inner.calls) == 6
    assert _vsphere.VsphereOutcomeUnknown.outcome_unknown is True


def test_the_waiter_does_not_call_a_check_again_after_an_unknown_outcome():
    calls = []

    def check():
        calls.append(1)
        raise VsphereOutcomeUnknown("ReconnectHost_Task: HTTP 504; may or may not have been carried out")

    with pytest.raises(VsphereOutcomeUnknown):
        _vsphere.wait(check, 60, "reconnect", transient=(VsphereConnectionError,), sleep=lambda s: None,
                      clock=lambda: 0.0)
    assert calls == [1]


def test_a_500_with_vcenters_own_error_is_its_answer_not_a_lost_one():
    body = b'{"error_type": "INVALID_ARGUMENT", "messages": [{"default_message": "profile unknown", "id": "x"}]}'
    client, session = rest(response(500, body, {"Content-Type": "application/json"}))
    with pytest.raises(VsphereRestError, match="profile unknown") as err:
        client.post(CLASSES, {"id": "gpu-small"})
    assert not isinstance(err.value, VsphereOutcomeUnknown) and len(session.sent) == 1


def test_a_500_without_vcenters_error_is_an_unknown_outcome():
    client, session = rest(response(500, b"<html>upstream error</html>", {"Content-Type": "text/html"}))
    with pytest.raises(VsphereOutcomeUnknown):
        client.post(CLASSES, {"id": "gpu-small"})
    assert len(session.sent) == 1
