"""Session loss during a wait, and the Retry-After of a 503.

A session ended by vCenter (SessionManager.TerminateSession, an idle timeout: NotAuthenticated over
SOAP, 401 over REST) is logged in again once and the call or the wait goes on; refused again right
after that re-login, the session is lost twice in a row: VsphereSessionLost, which a waiter never takes
for a host or a task that is not back yet. A 503 with Retry-After is repeated after the header's delay
(seconds or an HTTP-date, within the call's deadline), and it is the only status after which a change
may be sent again.
"""
from datetime import datetime, timedelta

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import (
    UTC,
    change_may_repeat,
    retry_after_delay,
    retry_after_seconds,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _esxi_host, _vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereConnectionError,
    VsphereSessionLost,
    VsphereTaskError,
    vim,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient, VsphereRestError
from tests.lib.clock import Clock
from tests.lib.vsphere_boundary import Info, Mo, RestSession, response, soap

NOW = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)
TASK = "/api/cis/tasks/task-7"


# --- Retry-After and the rule of which answers may repeat a change ----------------------------

@pytest.mark.parametrize("value, seconds", [
    ("120", 120.0), ("0", 0.0), (" 7 ", 7.0),
    ("Wed, 02 Dec 2026 06:00:30 GMT", 30.0),  # IMF-fixdate
    ("Wednesday, 02-Dec-26 06:01:00 GMT", 60.0),  # the obsolete RFC 850 form
    ("Wed, 02 Dec 2026 05:59:00 GMT", 0.0),  # a date in the past asks for no wait
])
def test_retry_after_seconds_or_http_date(value, seconds):
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize("value", [None, "", "  ", "-3", "1.5", "soon", "Wed, 32 Foo 2026 25:00:00 GMT"])
def test_an_absent_or_unreadable_retry_after_is_none(value):
    assert retry_after_seconds(value, NOW) is None


def test_the_delay_is_capped_by_the_calls_deadline():
    assert retry_after_delay(5, 60) == 5.0
    assert retry_after_delay(120, 12.5) == 12.5
    assert retry_after_delay(0, 3) == 0.0
    assert retry_after_delay(5, 0) is None and retry_after_delay(5, -1) is None


@pytest.mark.parametrize("status, retry_after, unsent, repeat", [
    (None, None, True, True),  # connection refused: nothing was sent
    (503, 4.0, False, True),  # the server's own word that it did not take the request
    (503, 0.0, False, True),
    (503, None, False, False),  # a 503 without (or with an unreadable) Retry-After
    (502, 4.0, False, False),  # a gateway that may have forwarded the change
    (504, 4.0, False, False),
    (500, None, False, False),
    (None, None, False, False),  # a reset or a read timeout after sending
])
def test_which_answers_may_repeat_a_change(status, retry_after, unsent, repeat):
    assert change_may_repeat(status, retry_after, unsent) is repeat


# --- the REST client ----------------------------------------------------------------------------

def rest(*answers, timeout=60, login_status=201):
    session = RestSession(*answers, login_status=login_status)
    clock = Clock()
    client = VsphereRestClient("vc", "u", "p", session=session, timeout=timeout, sleep=clock.sleep, clock=clock)
    return client, session, clock


CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
RUNNING = response(200, b'{"status": "RUNNING"}')
DONE = response(200, b'{"status": "SUCCEEDED", "result": "ok"}')
UNAUTHENTICATED = response(401, b'{"error_type": "UNAUTHENTICATED"}', {"Content-Type": "application/json"})


def test_a_503_with_retry_after_waits_the_headers_seconds_not_the_backoff():
    client, session, clock = rest(response(503, headers={"Retry-After": "7"}), response(200, b'"gpu-small"'))
    assert client.post(CLASSES, {"id": "gpu-small"}) == "gpu-small"
    assert clock.slept == [7.0] and len(session.sent) == 2


def test_a_503_with_an_http_date_waits_until_then():
    when = (datetime.now(UTC) + timedelta(seconds=40)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    client, session, clock = rest(response(503, headers={"Retry-After": when}), response(200, b"[]"))
    assert client.get(CLASSES) == []
    assert len(clock.slept) == 1 and 37 <= clock.slept[0] <= 40


def test_a_retry_after_beyond_the_deadline_is_capped_then_the_503_is_the_answer():
    client, session, clock = rest(response(503, headers={"Retry-After": "120"}), timeout=10)
    with pytest.raises(VsphereRestError) as err:
        client.post(CLASSES, {"id": "gpu-small"})
    assert err.value.status == 503
    assert clock.slept == [10.0] and len(session.sent) == 2  # one repeat at the deadline, then no time left


def test_an_unreadable_retry_after_does_not_repeat_a_change():
    client, session, _clock = rest(response(503, headers={"Retry-After": "soon"}))
    with pytest.raises(_vsphere.VsphereOutcomeUnknown):
        client.post(CLASSES, {"id": "gpu-small"})
    assert len(session.sent) == 1


def test_a_401_logs_in_once_and_the_call_goes_on():
    client, session, _clock = rest(UNAUTHENTICATED, response(200, b"[]"))
    assert client.get(CLASSES) == []
    assert client.relogins == 1 and session.logins == 2


def test_a_401_right_after_the_relogin_is_the_session_lost():
    client, session, _clock = rest(UNAUTHENTICATED)
    with pytest.raises(VsphereSessionLost, match="HTTP 401.*again right after a re-login"):
        client.get(CLASSES)
    assert client.relogins == 1 and len(session.sent) == 2


def test_a_task_wait_survives_one_session_loss_in_the_same_wait():
    client, session, clock = rest(RUNNING, UNAUTHENTICATED, RUNNING, UNAUTHENTICATED, DONE)
    assert client.wait_for_task("task-7", timeout=60, what="remediation", sleep=clock.sleep, clock=clock) == "ok"
    assert client.relogins == 2 and session.logins == 3  # each loss (not in a row) replaced once


def test_a_task_wait_ends_at_once_when_the_session_is_lost_twice_in_a_row():
    client, session, clock = rest(RUNNING, UNAUTHENTICATED, UNAUTHENTICATED, RUNNING)
    with pytest.raises(VsphereSessionLost) as err:
        client.wait_for_task("task-7", timeout=600, what="remediation", sleep=clock.sleep, clock=clock)
    text = str(err.value)
    assert "lost twice in a row while waiting for remediation" in text and "plain rerun" in text
    assert "did not finish within" not in text and clock.now < 5  # not the whole timeout
    assert client.relogins == 1


def test_a_refused_relogin_during_a_wait_is_the_session_lost_not_a_wait():
    client, _session, clock = rest(RUNNING, UNAUTHENTICATED, RUNNING, login_status=401)
    with pytest.raises(VsphereSessionLost, match="re-login after HTTP 401 failed"):
        client.wait_for_task("task-7", timeout=600, what="remediation", sleep=clock.sleep, clock=clock)
    assert clock.now < 5


# --- the SOAP boundary and the waiter ------------------------------------------------------------

def lost():
    return vim.fault.NotAuthenticated(msg="The session is not authenticated.")


def test_notauthenticated_logs_in_once_and_repeats_the_call():
    client, inner = soap(lost(), "ok")
    assert client._invoke(Mo(), Info("RetrievePropertiesEx"), [], None) == "ok"
    assert client.relogins == 1 and inner.calls == ["RetrievePropertiesEx"] * 2


def test_notauthenticated_right_after_the_relogin_is_the_session_lost():
    client, inner = soap(lost())
    with pytest.raises(VsphereSessionLost, match="NotAuthenticated.*after 1 re-logins"):
        client._invoke(Mo(), Info("RetrievePropertiesEx"), [], None)
    assert client.relogins == 1 and len(inner.calls) == 2  # not one re-login per retry


def test_the_waiter_ends_at_once_on_a_lost_session_even_where_connection_errors_are_transient():
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 1:
            return False, "host notResponding"
        raise VsphereSessionLost("RetrievePropertiesEx on HostSystem host-21: refused again after 1 re-logins")

    clock = Clock()
    with pytest.raises(VsphereSessionLost) as err:
        _vsphere.wait(check, 600, "the host's return after the reboot", transient=(VsphereConnectionError,),
                      sleep=clock.sleep, clock=clock)
    assert calls == [1, 1] and clock.now < 5
    assert "while waiting for the host's return after the reboot" in str(err.value)


def test_a_connection_error_still_does_not_end_the_wait():
    answers = [VsphereConnectionError("connection refused"), (True, "back")]

    def check():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = Clock()
    assert _vsphere.wait(check, 60, "reconnect", transient=(VsphereConnectionError,), sleep=clock.sleep,
                         clock=clock) == "back"


class Host:
    """An ObjectProps of a host in maintenance mode."""

    obj = None
    moid = "host-21"

    def __init__(self):
        self.props = {"name": "esx-01", "runtime.bootTime": NOW}

    def get(self, name, default=None):
        return self.props.get(name, default)

    def __getitem__(self, name):
        return self.props[name]


def test_a_reboot_wait_names_the_lost_session_and_the_host_left_in_maintenance_mode(monkeypatch):
    clock = Clock()
    ops = _esxi_host.HostOps(client=None, sleep=clock.sleep, clock=clock)
    monkeypatch.setattr(ops, "_reboot", lambda host, timeout: None)

    def refresh(host, properties=None):
        raise VsphereSessionLost("RetrievePropertiesEx on HostSystem host-21: refused again after 1 re-logins")

    monkeypatch.setattr(ops, "refresh", refresh)
    with pytest.raises(VsphereSessionLost) as err:
        ops.reboot_and_wait(Host(), 60)
    text = str(err.value)
    assert "did not come back" not in text and clock.now < 5
    assert "esx-01" in text and "maintenance mode" in text and "plain rerun" in text


def test_a_task_wait_is_not_failed_by_a_lost_session_as_a_task_state():
    assert not issubclass(VsphereSessionLost, VsphereTaskError)
    assert VsphereSessionLost.session_lost is True
