"""failure_message: what a rescue block may print of a failed task."""
import pytest

from ansible_collections.gpupool.vcf.plugins.filter.failure import failure_message

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu"


def test_the_message_only_never_the_result():
    result = {"failed": True, "msg": "Unable to read Cluster ml/gpu: 503", "token": TOKEN, "invocation": {"password": "pw"}}
    text = failure_message(result, {"name": "Node pools"})
    assert text == "Unable to read Cluster ml/gpu: 503"
    assert TOKEN not in text and "pw" not in text


@pytest.mark.parametrize("task", [{"name": "Client token", "no_log": True}, {"name": "Client token", "no_log": "true"}])
def test_no_log_task_gets_a_fixed_text(task):
    text = failure_message({"failed": True, "msg": "bad %s" % TOKEN}, task)
    assert text == "task 'Client token' failed; its output is hidden (no_log) because it handles credentials or licensing data"


def test_censored_result_gets_the_fixed_text():
    text = failure_message({"censored": "the output has been hidden", "failed": True}, {"name": "Secret"})
    assert "hidden (no_log)" in text


@pytest.mark.parametrize("result", [None, "", []])
def test_no_result(result):
    assert failure_message(result, {"name": "Roll"}) == "task 'Roll' failed and left no result"
    assert failure_message(result, None) == "a task failed and left no result"


def test_no_message():
    assert failure_message({"failed": True}, {"name": "Roll"}) == "task 'Roll' failed without a message"


def test_partial_state_follows_the_message():
    result = {"msg": "Unable to reboot esx-01: timeout", "hosts_in_maintenance": ["esx-01"], "vms_powered_off": [],
              "staged_not_running": "550.90.05"}
    assert failure_message(result, {}) == ("Unable to reboot esx-01: timeout (hosts left in maintenance mode: esx-01; "
                                           "driver staged, not running: 550.90.05)")
    nothing_left = {"msg": "Unable to read host esx-01", "hosts_in_maintenance": [], "staged_not_running": None}
    assert failure_message(nothing_left, {}) == "Unable to read host esx-01"


def test_a_loop_gives_each_failed_items_message():
    result = {"failed": True, "msg": "One or more items failed", "results": [
        {"changed": False, "item": "a.kubeconfig"},
        {"failed": True, "msg": "Unable to drain the guest nodes of 2 VMs: nowhere to go", "item": "b.kubeconfig"},
        {"failed": True, "censored": "the output has been hidden", "item": "c"},
    ]}
    assert failure_message(result, {"name": "Drain"}) == (
        "Unable to drain the guest nodes of 2 VMs: nowhere to go; "
        "task 'Drain' failed; its output is hidden (no_log) because it handles credentials or licensing data")
