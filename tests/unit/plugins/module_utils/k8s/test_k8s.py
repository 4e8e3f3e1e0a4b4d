"""_k8s: ClusterClass variable schemas -> where node labels and taints go; the fault boundary
(request timeout, bounded retries with backoff, one error type) without a server."""
import json

import pytest
import urllib3
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError, api_client, request_timeout_error, to_k8s_error
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._cluster_class import PlanError, apply_pool, plan_machine_deployments, variable_plan
from tests.lib.clock import Clock

NODE_VAR = {"name": "node", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "taints": {"type": "array", "items": {"type": "object", "properties": {
        "key": {"type": "string"}, "value": {"type": "string"}, "effect": {"type": "string"}}}}}}}}
GENERIC = [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
           {"name": "storageClass", "schema": {"openAPIV3Schema": {"type": "string"}}}, NODE_VAR]
LEGACY = [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}},
          {"name": "nodePoolLabels", "schema": {"openAPIV3Schema": {"type": "array", "items": {
              "type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}}}}},
          {"name": "nodePoolVolumes", "schema": {"openAPIV3Schema": {"type": "array", "items": {
              "type": "object", "properties": {"name": {"type": "string"}}}}}}]
TAINTS_TOP = [{"name": "nodePoolTaints", "schema": {"openAPIV3Schema": {"type": "array", "items": {
    "type": "object", "properties": {"key": {}, "value": {}, "effect": {}}}}}}]
TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_generic_class_node_object_variable():
    plan = variable_plan(GENERIC)
    assert plan["vm_class"] == "vmClass"
    assert plan["labels"] == {"variable": "node", "property": "labels", "form": "map"}
    assert plan["taints"] == {"variable": "node", "property": "taints"}


def test_legacy_class_labels_list_and_no_taints():
    plan = variable_plan(LEGACY)
    assert plan["labels"] == {"variable": "nodePoolLabels", "property": None, "form": "kv_list"}
    assert plan["taints"] is None
    with pytest.raises(PlanError, match="no variable for node taints"):
        apply_pool(None, {"name": "gpu", "taints": TAINT}, plan, "node-pool")


def test_top_level_taints_variable():
    assert variable_plan(TAINTS_TOP)["taints"] == {"variable": "nodePoolTaints", "property": None}


def test_apply_pool_keeps_other_overrides_and_fields():
    md = {"class": "node-pool", "name": "gpu", "replicas": 1, "failureDomain": "zone-a",
          "variables": {"overrides": [{"name": "storageClass", "value": "gold"},
                                      {"name": "node", "value": {"labels": {"a": "b"}, "other": 1}}]}}
    new = apply_pool(md, {"name": "gpu", "replicas": 3, "vm_class": "h100", "labels": None,
                          "taints": TAINT}, variable_plan(GENERIC), "node-pool")
    assert new["replicas"] == 3 and new["failureDomain"] == "zone-a"
    ovs = {o["name"]: o["value"] for o in new["variables"]["overrides"]}
    assert ovs["storageClass"] == "gold" and ovs["vmClass"] == "h100"
    assert ovs["node"] == {"labels": {"a": "b"}, "other": 1, "taints": TAINT}
    assert md["replicas"] == 1  # input untouched


def test_legacy_labels_as_key_value_list():
    new = apply_pool(None, {"name": "gpu", "labels": {"b": "2", "a": "1"}}, variable_plan(LEGACY), "node-pool")
    assert new["variables"]["overrides"] == [{"name": "nodePoolLabels", "value": [
        {"key": "a", "value": "1"}, {"key": "b", "value": "2"}]}]


def test_plan_keeps_unnamed_pools_unless_purge():
    current = [{"class": "node-pool", "name": "cpu", "replicas": 2},
               {"class": "node-pool", "name": "gpu", "replicas": 1}]
    plan = variable_plan(GENERIC)
    kept = plan_machine_deployments(current, [{"name": "gpu", "replicas": 2}], plan, "node-pool")
    assert [m["name"] for m in kept] == ["cpu", "gpu"] and kept[1]["replicas"] == 2
    purged = plan_machine_deployments(current, [{"name": "new", "replicas": 1}], plan, "node-pool", purge=True)
    assert purged == [{"class": "node-pool", "name": "new", "replicas": 1}]


def test_unchanged_pool_is_equal():
    plan = variable_plan(GENERIC)
    first = plan_machine_deployments([], [{"name": "gpu", "replicas": 1, "vm_class": "x", "taints": TAINT,
                                           "labels": {"a": "b"}}], plan, "node-pool")
    again = plan_machine_deployments(first, [{"name": "gpu", "replicas": 1, "vm_class": "x", "taints": TAINT,
                                              "labels": {"a": "b"}}], plan, "node-pool")
    assert first == again


def test_new_pool_needs_class_when_ambiguous():
    with pytest.raises(PlanError, match="set its class"):
        apply_pool(None, {"name": "gpu"}, variable_plan(GENERIC), None)


# --- the fault boundary: request timeout, bounded retries, one error type -----------------------
SERVER = "https://127.0.0.1:6443"


class FakeApi(object):
    class configuration(object):  # noqa: N801 - stands for ApiClient.configuration
        host = SERVER


def answer(status, reason, message=None, headers=None):
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "message": message}) if message else None
    exc.headers = headers
    return exc


class Script(object):
    """A call that fails with the given exceptions in turn, then returns 'ok'."""

    def __init__(self, *failures):
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def client(**kw):
    slept = []
    return K8sClient(api=FakeApi(), request_timeout=2, sleep=slept.append, **kw), slept


def test_transient_answers_are_retried_with_backoff():
    k8s, slept = client()
    fn = Script(answer(503, "Service Unavailable"), answer(503, "Service Unavailable"))
    assert k8s.call(fn) == "ok" and fn.calls == 3
    assert len(slept) == 2 and 0.25 <= slept[0] <= 0.5 and 0.5 <= slept[1] <= 1.0


def test_last_failure_names_status_count_and_message():
    k8s, slept = client()
    fn = Script(*[answer(503, "Service Unavailable", "etcd leader changed")] * 3)
    with pytest.raises(K8sError) as err:
        k8s.call(fn)
    assert str(err.value) == ("the API server at %s answered 503 Service Unavailable three times "
                              "(etcd leader changed)" % SERVER)
    assert err.value.status == 503 and err.value.attempts == 3 and fn.calls == 3 and len(slept) == 2


def test_final_answers_are_not_retried():
    for status in (400, 401, 403, 404, 409, 422):
        k8s, slept = client()
        fn = Script(answer(status, "No", "no"))
        with pytest.raises(K8sError) as err:
            k8s.call(fn)
        assert err.value.status == status and fn.calls == 1 and not slept


def test_not_idempotent_call_is_repeated_only_when_nothing_was_sent():
    k8s, slept = client()
    fn = Script(answer(503, "Service Unavailable"))
    with pytest.raises(K8sError) as err:
        k8s.call_once(fn)
    assert fn.calls == 1 and not slept
    assert err.value.outcome_unknown and "may or may not have been carried out" in str(err.value)
    for lost in (answer(504, "Gateway Timeout"), urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
                 urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))):
        fn = Script(lost)
        with pytest.raises(K8sError) as err:
            k8s.call_once(fn)
        assert fn.calls == 1 and err.value.outcome_unknown, lost
    fn = Script(answer(409, "Conflict", "already exists"))
    with pytest.raises(K8sError) as err:
        k8s.call_once(fn)
    assert not err.value.outcome_unknown  # an answer: the server says what happened
    refused = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] refused")
    fn = Script(refused)
    assert k8s.call_once(fn) == "ok" and fn.calls == 2


def test_timeouts_resets_and_refusals():
    k8s, slept = client()
    timeout = urllib3.exceptions.ReadTimeoutError(None, "/apis", "Read timed out. (read timeout=2)")
    with pytest.raises(K8sError) as err:
        k8s.call(Script(timeout, timeout, timeout))
    assert err.value.kind == "timeout"
    assert str(err.value) == "the API server at %s did not answer within 2 s (3 attempts)" % SERVER
    reset = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer"))
    assert k8s.call(Script(reset)) == "ok"
    wrapped = urllib3.exceptions.MaxRetryError(None, "/api", urllib3.exceptions.NewConnectionError(None, "refused"))
    assert to_k8s_error(wrapped, SERVER).kind == "refused"


def test_tls_failure_is_not_retried():
    k8s, slept = client()
    fn = Script(ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
    with pytest.raises(K8sError) as err:
        k8s.call(fn)
    assert err.value.kind == "tls" and "CERTIFICATE_VERIFY_FAILED" in str(err.value) and fn.calls == 1


def test_client_honours_retry_after():
    k8s, slept = client()
    k8s.call(Script(answer(429, "Too Many Requests", headers={"Retry-After": "4"})))
    assert slept == [4.0]


def test_request_timeout_must_be_positive():
    assert request_timeout_error(30) is None
    assert "more than 0" in request_timeout_error(0) and "more than 0" in request_timeout_error(-5)


def test_unusable_kubeconfig_is_one_error(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(K8sError) as err:
        api_client({"kubeconfig": str(missing)})
    assert err.value.kind == "config" and str(missing) in str(err.value)
    garbage = tmp_path / "garbage"
    garbage.write_text("{{{ not yaml")
    with pytest.raises(K8sError) as err:
        api_client({"kubeconfig": str(garbage)})
    assert err.value.kind == "config"


def test_every_request_gets_the_timeout(tmp_path):
    api = api_client({"host": SERVER, "api_key": "t"}, request_timeout=7)
    assert api.configuration.retries is False
    seen = []

    def request(method, url, **kwargs):
        seen.append(kwargs.get("_request_timeout"))
        raise answer(404, "Not Found")

    api.rest_client.request = request
    from kubernetes import client as kclient
    with pytest.raises(ApiException):
        kclient.CoreV1Api(api).read_namespace("x")
    with pytest.raises(ApiException):
        kclient.CoreV1Api(api).read_namespace("x", _request_timeout=3)
    assert seen == [7, 3]


# --- a change is sent again only when it provably did not reach the server ---------------------


def timed_client(**kw):
    clock = Clock()
    return K8sClient(api=FakeApi(), request_timeout=30, sleep=clock.sleep, clock=clock, **kw), clock


def test_a_change_is_repeated_after_429_or_503_with_retry_after_waiting_the_headers_delay():
    for status, reason in ((429, "Too Many Requests"), (503, "Service Unavailable")):
        k8s, clock = timed_client()
        fn = Script(answer(status, reason, headers={"Retry-After": "20"}))
        assert k8s.call_once(fn) == "ok" and fn.calls == 2
        assert clock.slept == [20.0]  # the server's delay, not the backoff's (at most 8 s)


def test_a_change_is_not_repeated_after_an_ambiguous_answer_and_its_outcome_is_unknown():
    lost = [answer(502, "Bad Gateway"), answer(504, "Gateway Timeout"), answer(503, "Service Unavailable"),
            answer(502, "Bad Gateway", headers={"Retry-After": "1"}), answer(500, "Internal Server Error"),
            answer(429, "Too Many Requests"),
            urllib3.exceptions.ReadTimeoutError(None, "/api/v1/namespaces/x/pods", "Read timed out. (read timeout=30)")]
    for fault in lost:
        k8s, clock = timed_client()
        fn = Script(fault)
        with pytest.raises(K8sError) as err:
            k8s.call_once(fn)
        assert fn.calls == 1 and clock.slept == [], fault
        assert err.value.outcome_unknown and "may or may not have been carried out" in str(err.value), fault


def test_a_change_refused_with_retry_after_every_time_is_an_answer_not_an_unknown_outcome():
    k8s, clock = timed_client()
    fn = Script(*[answer(429, "Too Many Requests", headers={"Retry-After": "1"})] * 3)
    with pytest.raises(K8sError) as err:
        k8s.call_once(fn)
    assert fn.calls == 3 and clock.slept == [1.0, 1.0]
    assert err.value.status == 429 and not err.value.outcome_unknown


def test_retry_after_is_capped_by_the_calls_deadline():
    k8s, clock = timed_client()  # a call's own bound: 3 attempts of 30 s
    fn = Script(answer(503, "Service Unavailable", headers={"Retry-After": "3600"}))
    assert k8s.call(fn) == "ok" and clock.slept == [90.0]
    k8s, clock = timed_client()
    k8s.deadline = 12.0  # a drain's deadline, nearer
    fn = Script(answer(429, "Too Many Requests", headers={"Retry-After": "60"}),
                answer(429, "Too Many Requests", headers={"Retry-After": "60"}))
    with pytest.raises(K8sError) as err:
        k8s.call_once(fn)
    assert clock.slept == [12.0] and fn.calls == 2 and err.value.status == 429  # no wait past the deadline
    k8s, clock = timed_client()
    k8s.deadline = -1.0  # already past: the first answer stands
    fn = Script(answer(503, "Service Unavailable"))
    with pytest.raises(K8sError):
        k8s.call(fn)
    assert fn.calls == 1 and clock.slept == []


# --- certificate verification off: the warning every client gives ------------------------------

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: guest
  cluster: {server: "https://127.0.0.1:6443"%s}
users:
- name: admin
  user: {token: not-a-secret}
contexts:
- name: guest
  context: {cluster: guest, user: admin}
current-context: guest
"""


def test_a_kubeconfig_that_skips_tls_verification_is_warned_about(tmp_path):
    insecure = tmp_path / "insecure"
    insecure.write_text(KUBECONFIG % ", insecure-skip-tls-verify: true")
    warned = []
    k8s = K8sClient({"kubeconfig": str(insecure)}, warn=warned.append)
    assert k8s.api.configuration.verify_ssl is False
    assert warned == [("kubeconfig %s sets insecure-skip-tls-verify: the server's TLS certificate is not verified, so "
                       "anyone on the network path can pose as the server and read the credentials and data of this "
                       "connection; name its CA instead (the cluster's certificate-authority in the kubeconfig, or "
                       "the ca_cert option)" % insecure)]
    assert k8s.tls_warning == warned[0]
    verified = tmp_path / "verified"
    verified.write_text(KUBECONFIG % "")
    warned = []
    assert K8sClient({"kubeconfig": str(verified)}, warn=warned.append).tls_warning is None and warned == []


def test_validate_certs_false_gets_the_same_sentence_as_the_other_clients(tmp_path):
    from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import warn_tls_off
    from tests.lib.fake_module import FakeModule
    module = FakeModule({"validate_certs": False})
    warn_tls_off(module)
    for params in ({"host": SERVER, "api_key": "t", "validate_certs": False},
                   {"kubeconfig": str(tmp_path / "cfg"), "validate_certs": False}):
        (tmp_path / "cfg").write_text(KUBECONFIG % "")
        warned = []
        K8sClient(params, warn=warned.append)
        # word for word the runner's: Ansible gives a warning once however many times it is raised
        assert warned == module.warnings, params
