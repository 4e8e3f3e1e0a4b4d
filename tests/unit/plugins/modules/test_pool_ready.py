"""pool_ready through main(): the real PoolReadyApi on a fake guest cluster API (tests/lib/fakes_guest.py),
Prometheus a fake of the PromClient its room builds from the options, and the inference endpoint a fake
opener (of transport/_http, the one HTTP request path) under the real InferenceProbe of k8s/_pool_ready_api.
Every step is met at its first look, so the module's own clock is never waited on, except where a test
bounds a step to a second on purpose."""
import io
import json

import pytest
from ansible.module_utils import basic
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.transport import _http
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError
from ansible_collections.gpupool.vcf.plugins.modules import pool_ready
from tests.lib.fakes_guest import GuestCluster, node, pod
from tests.lib.fakes_guest import pool_ready_api
from tests.lib.module_docs import leaked, missing_keys, secret_options
from tests.lib.module_main import K8S, run_main

API_KEY = "k8s-api-key-ready-7"
PROM_TOKEN = "prom-token-ready-3"
INFERENCE_TOKEN = "inference-token-ready-9"
PROM = "https://prometheus.example.com:9090"
INFERENCE = "https://llm.example.com/v1/completions"
STEPS = ["ready", "validated", "advertised", "licensed", "probe_pod", "first_token"]


class FakeProm:
    made = []
    queries = []
    fail = None
    value = "1"

    def __init__(self, url, **kwargs):
        FakeProm.made.append(dict(kwargs, url=url))

    def query(self, expr, at=None):
        FakeProm.queries.append(expr)
        if FakeProm.fail is not None:
            raise FakeProm.fail
        return [{"metric": {"Hostname": "tkc-gpu-1", "gpu": "0"}, "value": [0, FakeProm.value]}]


class Stream:
    def __init__(self, lines):
        self.body = io.BytesIO(b"".join(lines))
        self.closed = False

    def readline(self):
        return self.body.readline()

    def close(self):
        self.closed = True


@pytest.fixture
def guest(monkeypatch):
    cluster = GuestCluster(
        nodes=[node("tkc-gpu-1", labels={"gpupool.vcf/pool": "inference"}), node("tkc-cpu-1", gpus=0)],
        pods=[pod("validator-a", "tkc-gpu-1", namespace="gpu-operator", labels={"app": "nvidia-operator-validator"},
                  owner="DaemonSet")])
    FakeProm.made, FakeProm.queries, FakeProm.fail, FakeProm.value = [], [], None, "1"
    cluster.posted = []

    class Opener:
        """The inference endpoint under urllib: each request recorded, answered with an event stream."""

        def __init__(self, *handlers):
            self.handlers = handlers

        def open(self, req, timeout=None):
            cluster.posted.append(dict(url=req.full_url, data=req.data, method=req.get_method(), timeout=timeout,
                                       headers=dict(req.header_items())))
            return Stream([b": keep-alive\n", b'data: {"choices": [{"text": "Hello"}]}\n', b"data: [DONE]\n"])

    monkeypatch.setattr(pool_ready, "PoolReadyApi", pool_ready_api(cluster))
    monkeypatch.setattr(_prom, "PromClient", FakeProm)
    monkeypatch.setattr(_http, "build_opener", Opener)  # the one HTTP request path of the probe (and the clients)
    return cluster


def args(**extra):
    out = dict(K8S, api_key=API_KEY, nodes=["tkc-gpu-1"], prometheus_url=PROM, prometheus_bearer_token=PROM_TOKEN,
               inference_url=INFERENCE, inference_token=INFERENCE_TOKEN, poll_interval=0.05)
    out.update(extra)
    return out


def states(result):
    return [(s["name"], s["state"]) for s in result["steps"]]


def test_every_step_is_reached_the_probe_pod_is_removed_and_the_documented_keys_are_returned(guest):
    result = run_main(pool_ready, args())
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(pool_ready, result) == []
    assert states(result) == [(s, "reached") for s in STEPS]
    assert result["changed"] is False and result["nodes"] == ["tkc-gpu-1"]
    assert set(result["seconds"]) == set(STEPS) and result["time_to_first_token"] is not None
    assert "first_token" in result["markdown"]
    created = [c for c in guest.calls if c[0] == "create_namespaced_pod"]
    deleted = [c for c in guest.calls if c[0] == "delete_namespaced_pod"]
    assert len(created) == 1 and created[0][1] == "default" and created[0][2].startswith("pool-ready-probe-")
    assert deleted == [("delete_namespaced_pod", created[0][2], "default")]
    assert sorted(guest.pods) == ["gpu-operator/validator-a"]  # nothing left behind
    assert FakeProm.queries == ['DCGM_FI_DEV_VGPU_LICENSE_STATUS{Hostname=~"tkc-gpu-1"}']
    assert FakeProm.made[0]["bearer_token"] == PROM_TOKEN
    assert guest.posted[0]["headers"]["Authorization"] == "Bearer %s" % INFERENCE_TOKEN
    [sent] = guest.posted
    assert (sent["url"], sent["method"], sent["timeout"]) == (INFERENCE, "POST", 30)
    assert json.loads(sent["data"].decode())["stream"] is True
    assert FakeProm.made[0]["plain_http_option"] == "prometheus_allow_plain_http"


def test_check_mode_waits_for_the_same_steps_and_creates_no_pod(guest):
    checked = run_main(pool_ready, args(), check_mode=True)
    assert not checked.get("failed"), checked.get("msg")
    assert guest.writes() == []
    want = [(s, "reached") for s in STEPS]
    want[STEPS.index("probe_pod")] = ("probe_pod", "skipped")
    assert states(checked) == want
    assert checked["changed"] is False and missing_keys(pool_ready, checked) == []
    real = run_main(pool_ready, args())
    assert [st[0] for st in states(real)] == [st[0] for st in states(checked)] and real["changed"] is False
    again = run_main(pool_ready, args())
    assert states(again) == states(real) and again["changed"] is False


def test_diff_mode_adds_no_diff(guest):
    result = run_main(pool_ready, args(), diff=True)
    assert not result.get("failed"), result.get("msg")
    assert "diff" not in result


@pytest.mark.parametrize("bad, message", [
    (dict(prometheus_url="prometheus:9090"), "prometheus_url must be an http:// or https:// URL, not 'prometheus:9090'"),
    (dict(step_timeouts=dict(warmup=10)), "step_timeouts names 'warmup', not a step"),
    (dict(nodes=None, node_selector={"gpupool.vcf/pool": "inference"}, min_nodes=0), "min_nodes must be 1 or more"),
    (dict(poll_interval=0.0), "poll_interval must be more than 0 seconds, not 0.0"),
])
def test_bad_input_is_refused_before_the_cluster_is_reached(guest, bad, message):
    result = run_main(pool_ready, args(**bad))
    assert result["failed"] is True and result["msg"].startswith("Invalid input for pool_ready: "), result["msg"]
    assert message in result["msg"], result["msg"]
    assert guest.made == [] and guest.calls == [] and FakeProm.made == [] and guest.posted == []


def test_nodes_and_vms_together_are_refused(guest):
    result = run_main(pool_ready, args(vms=[dict(name="tkc-gpu-1")]))
    assert result["failed"] is True and result["msg"] == "parameters are mutually exclusive: nodes|vms"
    assert guest.calls == []


def test_a_step_not_reached_in_its_bound_fails_naming_it_and_what_was_reached(guest):
    FakeProm.value = "0"  # the vGPU is not licensed
    result = run_main(pool_ready, args(step_timeouts=dict(licensed=1)))
    assert result["failed"] is True
    assert "licensed" in result["msg"] and "tkc-gpu-1: 1 of 1 GPUs not licensed" in result["msg"], result["msg"]
    assert states(result)[:4] == [("ready", "reached"), ("validated", "reached"), ("advertised", "reached"),
                                  ("licensed", "not_reached")]
    assert guest.writes() == []  # no probe pod before the license


def test_a_kubernetes_error_fails_naming_the_wait(guest):
    guest.fail["list_node"] = ApiException(status=403, reason="Forbidden")
    result = run_main(pool_ready, args())
    assert result["failed"] is True
    assert result["msg"].startswith("Unable to wait for nodes tkc-gpu-1: "), result["msg"]
    assert "403" in result["msg"] and guest.writes() == []


def test_a_prometheus_error_fails_naming_the_wait_and_what_was_reached(guest):
    FakeProm.fail = PromError("Prometheus answered 401: unauthorized", status=401)
    result = run_main(pool_ready, args())
    assert result["failed"] is True
    assert result["msg"].startswith("Unable to wait for nodes tkc-gpu-1: Prometheus answered 401: unauthorized; "
                                    "reached: "), result["msg"]
    assert "advertised" in result["msg"].split("reached: ", 1)[1], result["msg"]
    assert PROM_TOKEN not in result["msg"]


def test_a_probe_pod_that_cannot_be_removed_is_a_warning(guest, monkeypatch):
    said = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: said.append(text))
    guest.fail["delete_namespaced_pod"] = ApiException(status=403, reason="Forbidden")
    result = run_main(pool_ready, args())
    assert not result.get("failed"), result.get("msg")
    assert len(said) == 1 and said[0].startswith("the probe pod default/pool-ready-probe-"), said
    assert "was not removed" in said[0]


def test_no_secret_is_in_the_result(guest):
    assert secret_options(pool_ready.ARGUMENT_SPEC) == ["api_key", "inference_token", "prometheus_bearer_token"]
    for check_mode in (True, False):
        result = run_main(pool_ready, args(), check_mode=check_mode)
        assert not result.get("failed"), result.get("msg")
        assert leaked(result, [API_KEY, PROM_TOKEN, INFERENCE_TOKEN]) == []
