"""driver_upgrade_wait through main(): the nodes' upgrade-state labels scripted read by read (a fake of the
node read the module uses), the module's clock a fake that each sleep moves on, so the step times asserted are
the ones the script makes (worked out by hand below), never the machine's."""
import pytest

from ansible_collections.gpupool.vcf.plugins.modules import driver_upgrade_wait as mod
from tests.lib.module_docs import missing_keys
from tests.lib.module_main import K8S, run_main

LABEL = "nvidia.com/gpu-driver-upgrade-state"


def nodes(**states):
    return [{"metadata": {"name": n.replace("_", "-"), "labels": dict(
        {"nvidia.com/gpu.present": "true"}, **({LABEL: s} if s else {}))}} for n, s in states.items()]


@pytest.fixture
def script(monkeypatch):
    """reads: the answer of each node read in turn (the last repeated); the clock moves only when the module
    sleeps (poll_interval 10 s)."""
    state = {"now": 1000.0, "reads": [], "selectors": [], "sleeps": 0}

    def list_nodes(_k8s, selector):
        state["selectors"].append(selector)
        return state["reads"].pop(0) if len(state["reads"]) > 1 else state["reads"][0]

    def sleep(seconds):
        state["sleeps"] += 1
        state["now"] += seconds

    monkeypatch.setattr(mod, "list_nodes", list_nodes)
    monkeypatch.setattr(mod, "K8sClient", lambda params: object())
    monkeypatch.setattr(mod, "_clock", lambda: state["now"])
    monkeypatch.setattr(mod, "_sleep", sleep)
    return state


def args(**extra):
    out = dict(K8S, api_key="k8s-key-upg-1", version="550.127.05", poll_interval=10, step_timeout=60, timeout=3600)
    out.update(extra)
    return out


def test_two_nodes_one_at_a_time_are_timed_per_state_and_the_wait_ends_when_both_are_done(script):
    # reads at t = 0, 10, 20, ... (seconds after the start)
    script["reads"] = [
        nodes(a="upgrade-required", b="upgrade-required"),    # 0
        nodes(a="cordon-required", b="upgrade-required"),     # 10
        nodes(a="drain-required", b="upgrade-required"),      # 20
        nodes(a="drain-required", b="upgrade-required"),      # 30
        nodes(a="upgrade-done", b="cordon-required"),         # 40
        nodes(a="upgrade-done", b="pod-restart-required"),    # 50
        nodes(a="upgrade-done", b="upgrade-done"),            # 60
    ]
    result = run_main(mod, args())
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(mod, result) == []
    assert result["changed"] is False
    assert script["selectors"][0] == "nvidia.com/gpu.present=true"
    assert result["order"] == ["a", "b"]
    assert result["steps"]["a"] == [{"state": "upgrade-required", "seconds": 10.0},
                                    {"state": "cordon-required", "seconds": 10.0},
                                    {"state": "drain-required", "seconds": 20.0}]
    assert result["steps"]["b"] == [{"state": "upgrade-required", "seconds": 40.0},
                                    {"state": "cordon-required", "seconds": 10.0},
                                    {"state": "pod-restart-required", "seconds": 10.0}]
    # from leaving nothing (upgrade-required counts: the controller chose the node) to upgrade-done
    assert result["node_seconds"] == {"a": 40.0, "b": 60.0}
    assert result["total_seconds"] == 60.0 and result["states"] == {"a": "upgrade-done", "b": "upgrade-done"}
    assert "| a | drain-required | 20.0 |" in result["markdown"]


def test_a_node_stuck_in_one_state_past_the_bound_fails_naming_it_and_its_state(script):
    script["reads"] = [nodes(a="upgrade-done", b="drain-required")]  # b never leaves drain-required
    result = run_main(mod, args(step_timeout=25))
    assert result["failed"] is True
    assert "node b has been drain-required for 30 s (bound 25 s)" in result["msg"]
    assert "550.127.05" in result["msg"] and "node a" not in result["msg"]
    assert script["now"] == 1030.0  # three polls: 0, 10, 20 within the bound, 30 past it
    assert result["steps"]["b"] == [{"state": "drain-required", "seconds": 30.0}]


def test_upgrade_failed_stops_at_once_naming_the_node(script):
    script["reads"] = [nodes(a="drain-required"), nodes(a="upgrade-failed")]
    result = run_main(mod, args())
    assert result["failed"] is True and "node a is upgrade-failed" in result["msg"]
    assert script["sleeps"] == 1


def test_check_mode_reads_once_and_waits_for_nothing(script):
    script["reads"] = [nodes(a="drain-required", b="upgrade-required")]
    result = run_main(mod, args(), check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert script["sleeps"] == 0 and len(script["selectors"]) == 1
    assert result["states"] == {"a": "drain-required", "b": "upgrade-required"}


def test_nodes_left_at_upgrade_done_past_the_settle_time_return_with_a_warning(script, monkeypatch):
    warned = []
    monkeypatch.setattr(mod.AnsibleModule, "warn", lambda self, text: warned.append(text))
    script["reads"] = [nodes(a="upgrade-done", b="upgrade-done")]
    result = run_main(mod, args(settle=30))
    assert not result.get("failed"), result.get("msg")
    assert script["now"] == 1030.0 and result["node_seconds"] == {}
    assert any("left upgrade-done within 30 s" in w for w in warned), warned


def test_nodes_no_controller_labelled_return_at_once_with_a_warning(script, monkeypatch):
    warned = []
    monkeypatch.setattr(mod.AnsibleModule, "warn", lambda self, text: warned.append(text))
    script["reads"] = [nodes(a="", b="")]
    result = run_main(mod, args(settle=30))
    assert not result.get("failed"), result.get("msg")
    assert script["now"] == 1000.0 and script["sleeps"] == 0
    assert any("no GPU Operator upgrade controller manages them" in w for w in warned), warned


def test_a_bound_under_a_second_is_refused(script):
    script["reads"] = [nodes(a="")]
    result = run_main(mod, args(step_timeout=0, poll_interval=0))
    assert result["failed"] is True and result["invalid_input"] == [
        "step_timeout must be a whole number of seconds, 1 or more, not 0",
        "poll_interval must be a number of seconds above 0, not 0.0"], result["msg"]
    assert script["reads"], "refused before any read of the cluster"
