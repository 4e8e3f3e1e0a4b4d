"""The latency probe's guest objects (pure/_latency_probe.py, filter latency_probe_manifests): endpoints checked
against the design, the ConfigMap carrying the program with the same first-chunk file pool_ready imports, owned
labels, ServiceMonitor or annotations; and the program's histogram and exposition, counted by hand."""
import importlib.util
import json
import sys

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter.latency_probe import FilterModule, latency_probe_manifests
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _first_token, _latency_probe, _pool_ready
from tests.lib.paths import ROOT

DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
PROGRAM_PATH = ROOT / "playbooks" / "files" / "gpupool_latency_probe.py"
FIRST_TOKEN_PATH = ROOT / "plugins" / "module_utils" / "pure" / "_first_token.py"
ENDPOINTS = {"inference": {"url": "http://llm.serving.svc:8000/v1/completions", "model": "llama-3-8b"},
             "notebooks": "http://nb-llm.research.svc/v1/chat/completions"}


def objects(**kwargs):
    return _latency_probe.manifests(DESIGN, ENDPOINTS, PROGRAM_PATH.read_text(), FIRST_TOKEN_PATH.read_text(), **kwargs)


def by_kind(objs):
    return {o["kind"]: o for o in objs}


def program():
    """The probe program as the ConfigMap mounts it: beside _first_token.py (here: its folder on sys.path)."""
    sys.path.insert(0, str(FIRST_TOKEN_PATH.parent))
    try:
        spec = importlib.util.spec_from_file_location("gpupool_latency_probe_under_test", PROGRAM_PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(FIRST_TOKEN_PATH.parent))
    return module


def test_one_definition_of_the_first_chunk():
    assert _pool_ready.stream_chunk is _first_token.stream_chunk
    assert _pool_ready.completion_request is _first_token.completion_request
    probe = program()
    assert probe.stream_chunk.__code__.co_code == _first_token.stream_chunk.__code__.co_code
    # _first_token imports nothing of the collection (the ConfigMap carries it alone)
    assert "ansible" not in FIRST_TOKEN_PATH.read_text().split('"""', 2)[2]


def test_objects_with_annotations():
    objs = objects()
    assert [o["kind"] for o in objs] == ["ConfigMap", "Deployment", "Service"]
    for o in objs:
        assert o["metadata"]["name"] == "gpupool-latency-probe" and o["metadata"]["namespace"] == "monitoring"
        assert o["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpupool.vcf",
                                           "gpupool.vcf/design": "lab-gpupool",
                                           "app.kubernetes.io/name": "gpupool-latency-probe"}
    cm, deploy, svc = objs
    assert cm["data"]["_first_token.py"] == FIRST_TOKEN_PATH.read_text()
    assert cm["data"]["gpupool_latency_probe.py"] == PROGRAM_PATH.read_text()
    assert json.loads(cm["data"]["config.json"]) == {
        "interval_seconds": 30, "timeout_seconds": 30,
        "pools": {"inference": {"url": "http://llm.serving.svc:8000/v1/completions", "model": "llama-3-8b"},
                  "notebooks": {"url": "http://nb-llm.research.svc/v1/chat/completions", "model": None}}}
    pod = deploy["spec"]["template"]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "python:3.12-slim"
    assert container["command"] == ["python3", "/probe/gpupool_latency_probe.py", "--config", "/probe/config.json",
                                    "--port", "9108"]
    assert pod["spec"]["volumes"] == [{"name": "probe", "configMap": {"name": "gpupool-latency-probe"}}]
    assert svc["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9108",
                                              "prometheus.io/path": "/metrics"}
    assert svc["spec"]["ports"][0]["port"] == 9108


def test_service_monitor_and_a_new_config_rolls_the_pod():
    objs = by_kind(objects(scrape="ServiceMonitor", namespace="obs", image="registry.example.com/python:3.12",
                           interval_seconds=15))
    assert sorted(objs) == ["ConfigMap", "Deployment", "Service", "ServiceMonitor"]
    mon = objs["ServiceMonitor"]
    assert mon["apiVersion"] == "monitoring.coreos.com/v1"
    assert mon["spec"]["selector"]["matchLabels"] == objs["Service"]["spec"]["selector"]
    assert mon["spec"]["namespaceSelector"] == {"matchNames": ["obs"]}
    assert mon["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    assert "annotations" not in objs["Service"]["metadata"]
    before = by_kind(objects())["Deployment"]["spec"]["template"]["metadata"]["annotations"]["gpupool.vcf/config-sha256"]
    after = objs["Deployment"]["spec"]["template"]["metadata"]["annotations"]["gpupool.vcf/config-sha256"]
    assert before != after and len(after) == 64


@pytest.mark.parametrize("endpoints, kwargs, message", [
    ({}, {}, "needs endpoints"),
    ({"serving": "http://x/v1/completions"}, {}, "no pool serving in design lab-gpupool"),
    ({"inference": "llm:8000"}, {}, "endpoints.inference.url: 'llm:8000' is not an http"),
    ({"inference": {"url": "http://x/v1/completions", "token": "t"}}, {}, "unknown key.*token"),
    ({"inference": {"url": "http://x/v1/completions", "model": 3}}, {}, "model: 3 is not a model name"),
    ({"inference": "http://x/v1/completions"}, {"interval_seconds": 0}, "interval_seconds: 0 is not"),
    ({"inference": "http://x/v1/completions"}, {"scrape": "PodMonitor"}, "neither ServiceMonitor nor annotations"),
    ({"inference": "http://x/v1/completions"}, {"namespace": "Mon"}, "not a Kubernetes namespace name"),
])
def test_bad_input_is_refused(endpoints, kwargs, message):
    with pytest.raises(_latency_probe.LatencyProbeError, match=message):
        _latency_probe.manifests(DESIGN, endpoints, "print(1)\n", "x = 1\n", **kwargs)


def test_filter_reads_the_first_token_file_and_fails_as_a_filter():
    assert FilterModule().filters()["latency_probe_manifests"].__wrapped__ is latency_probe_manifests
    objs = latency_probe_manifests(DESIGN, ENDPOINTS, PROGRAM_PATH.read_text())
    assert objs[0]["data"]["_first_token.py"] == FIRST_TOKEN_PATH.read_text()
    with pytest.raises(AnsibleFilterError, match="Unable to make the latency probe.*no pool serving"):
        latency_probe_manifests(DESIGN, {"serving": "http://x/"}, "print(1)\n")
    with pytest.raises(AnsibleFilterError, match="Unable to make the latency probe.*error"):
        latency_probe_manifests({"version": 1, "name": "x"}, ENDPOINTS, "print(1)\n")


def test_program_histogram_and_exposition_counted_by_hand():
    probe = program()
    metrics = probe.Metrics({"b": {}, "a": {}}, (0.5, 1.0, 2.5))
    for value in (0.3, 0.5, 0.7, 2.0, 9.0):
        metrics.record("a", ttft=value, request=value + 1)
    metrics.record("a", failure="http_status")
    text = metrics.exposition().decode()
    lines = text.splitlines()
    # cumulative buckets: <=0.5 holds 0.3 and 0.5; <=1 adds 0.7; <=2.5 adds 2.0; +Inf adds 9.0
    for le, count in (("0.5", 2), ("1.0", 3), ("2.5", 4), ("+Inf", 5)):
        assert 'gpupool_inference_time_to_first_token_seconds_bucket{pool="a",le="%s"} %d' % (le, count) in lines
    assert 'gpupool_inference_time_to_first_token_seconds_sum{pool="a"} 12.5' in lines
    assert 'gpupool_inference_request_seconds_bucket{pool="a",le="2.5"} 3' in lines  # 1.3, 1.5, 1.7
    assert 'gpupool_inference_request_seconds_count{pool="a"} 5' in lines
    assert 'gpupool_inference_probes_total{pool="a"} 6' in lines
    assert 'gpupool_inference_probe_failures_total{pool="a",reason="http_status"} 1' in lines
    # every reason of every pool starts at 0, so rate() and increase() see the first failure
    assert 'gpupool_inference_probe_failures_total{pool="b",reason="connect"} 0' in lines
    assert 'gpupool_inference_time_to_first_token_seconds_count{pool="b"} 0' in lines
    assert "# TYPE gpupool_inference_time_to_first_token_seconds histogram" in lines
    assert "# TYPE gpupool_inference_probe_failures_total counter" in lines


class Endpoint:
    """A local endpoint whose answer ``kind`` the test picks: ok, 503, keepalive_only, stall, broken."""

    def __init__(self, kind):
        import threading  # pylint: disable=import-outside-toplevel
        import time  # pylint: disable=import-outside-toplevel
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # pylint: disable=import-outside-toplevel

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if kind == "503":
                    self.send_error(503, "loading")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def chunk(data):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()

                chunk(b": keep-alive\n\n")
                if kind == "stall":
                    time.sleep(1.0)
                if kind in ("ok", "broken"):
                    chunk(b'data: {"choices": [{"text": "a"}]}\n\n')
                if kind == "broken":  # the connection closes inside a chunk
                    self.wfile.write(b"40\r\ndata: {")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if kind == "ok":
                    chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d/v1/completions" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("kind, reason, ttft", [
    ("503", "http_status", None), ("keepalive_only", "no_chunk", None), ("stall", "timeout", None),
    ("broken", "broken_stream", True), (None, "connect", None)])
def test_program_failure_reasons(kind, reason, ttft):
    probe = program()
    server = Endpoint(kind) if kind else None
    url = server.url if server else "http://127.0.0.1:9/v1/completions"  # the discard port: nothing listens
    try:
        with pytest.raises(probe.ProbeFailure) as failed:
            probe.probe_once(url, b'{"stream": true}', 0.4)
    finally:
        if server:
            server.close()
    assert failed.value.reason == reason, str(failed.value)
    assert (getattr(failed.value, "ttft", None) is not None) == bool(ttft)


@pytest.mark.parametrize("value, words", [(0, "above 0"), (-1.5, "above 0"), ("soon", "not a number"),
                                          (31536001, "above the maximum 31536000")])
def test_the_designs_latency_bound_is_bounded(value, words):
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_rules import validate  # pylint: disable=import-outside-toplevel
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design["pools"][0]["slo"] = {"first_token_seconds": value}
    errors = [f for f in validate(design) if f.severity == "error"]
    mine = [f for f in errors if f.rule == "schema" and f.object == "pools.inference.slo.first_token_seconds"]
    assert mine, [str(f) for f in errors]
    assert words in mine[0].message, mine[0].message
    design["pools"][0]["slo"] = {"first_token_seconds": 0.8}
    assert not [f for f in validate(design) if f.severity == "error"]
