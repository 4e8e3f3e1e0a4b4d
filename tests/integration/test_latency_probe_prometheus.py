"""The latency probe as it runs in the guest cluster, here as a local process: the program and its
config.json are the files of the ConfigMap the collection writes (filter latency_probe_manifests), the
endpoints a fake OpenAI-compatible streaming server written here with delays the test sets, and the
rig's real Prometheus (.sim/bin/prometheus) scrapes the probe and evaluates the rules generated from
the example design with a time-to-first-token bound of 1 s on its inference pool.

What is checked against figures computed here: the recorded p99 of both histograms is Prometheus's
interpolation inside the one bucket that holds the delays the fake was given (0.3 s to the first
chunk, 0.75 s to the end of the stream: p99 0.4975 s and 0.995 s); with the first chunk delayed to
1.5 s the p99 moves to 2.485 s and GpuPoolFirstTokenSlo goes pending, then fires (not before
slo_for), and it resolves once the delay drops back; a pool whose endpoint answers HTTP 500 counts
its failures under reason http_status and records no latency. The windows are the filter's options,
shortened so the test takes well under a minute: the expressions are the design's."""
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _latency_probe, _prom_rules
from tests.lib.helpers import prom, wait
from tests.lib.paths import ROOT

PROMETHEUS = ROOT / ".sim" / "bin" / "prometheus"
PROGRAM = ROOT / "playbooks" / "files" / "gpupool_latency_probe.py"
FIRST_TOKEN = ROOT / "plugins" / "module_utils" / "pure" / "_first_token.py"
OPTIONS = {"interval": "1s", "latency_window": "10s", "slo_for": "5s"}
BOUND = 1.0
FAST, SLOW = 0.3, 1.5  # seconds to the first chunk
CHUNKS, GAP = 3, 0.15  # chunks after the first, seconds between two: the stream ends 0.45 s after the first chunk
TTFT_P99 = 'pool:gpupool_inference_time_to_first_token_seconds:p99{pool="inference"}'
REQUEST_P99 = 'pool:gpupool_inference_request_seconds:p99{pool="inference"}'


def interpolated(lower, upper, q=0.99):
    """Prometheus's histogram_quantile when every observation of the window lies in one bucket (lower, upper]."""
    return lower + (upper - lower) * q


class FakeLLM:
    """An OpenAI-compatible streaming completions endpoint: /v1/completions streams a first chunk after
    ``first`` seconds, CHUNKS more GAP apart, then [DONE]; /broken answers 500."""

    def __init__(self):
        self.first = FAST
        self.served = {"/v1/completions": 0, "/broken": 0}
        self.bodies = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.bodies.append((self.path, body))
                outer.served[self.path] = outer.served.get(self.path, 0) + 1
                if self.path != "/v1/completions":
                    self.send_error(500, "model not loaded")
                    return
                first = outer.first
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
                self.wfile.write(b": keep-alive\n\n")  # not a chunk: the probe must not stop its clock here
                self.wfile.flush()
                time.sleep(first)
                for i in range(CHUNKS + 1):
                    if i:
                        time.sleep(GAP)
                    self.wfile.write(b'data: {"choices": [{"text": "tok%d"}]}\n\n' % i)
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port():
    import socket  # pylint: disable=import-outside-toplevel
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def probe_and_prometheus(tmp_path):
    assert PROMETHEUS.exists(), "prometheus is missing: make sim-build (tests/sim/k8s/build.sh) builds it"
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design["pools"][0]["slo"] = {"first_token_seconds": BOUND}
    fake = FakeLLM()
    endpoints = {"inference": {"url": fake.url + "/v1/completions", "model": "tiny"}, "training": fake.url + "/broken"}
    objects = _latency_probe.manifests(design, endpoints, PROGRAM.read_text(), FIRST_TOKEN.read_text(),
                                       interval_seconds=1, timeout_seconds=10)
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    for name, text in objects[0]["data"].items():  # the ConfigMap's files, as the pod mounts them
        (probe_dir / name).write_text(text)
    probe_port, prom_port = free_port(), free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, str(probe_dir / "gpupool_latency_probe.py"), "--config", str(probe_dir / "config.json"),
             "--address", "127.0.0.1", "--port", str(probe_port)],
            stdout=(logs / "probe.log").open("wb"), stderr=subprocess.STDOUT, cwd=str(tmp_path)))
        rules = _prom_rules.rule_file(design, OPTIONS)
        (tmp_path / "rules.yml").write_text(yaml.safe_dump(json.loads(json.dumps(rules)), sort_keys=False, width=100000))
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yml")],
            "scrape_configs": [{"job_name": "gpupool-latency-probe",
                                "static_configs": [{"targets": ["127.0.0.1:%d" % probe_port]}]}]}))
        procs.append(subprocess.Popen(
            [str(PROMETHEUS), "--config.file=%s" % (tmp_path / "prometheus.yml"),
             "--storage.tsdb.path=%s" % (tmp_path / "tsdb"), "--web.listen-address=127.0.0.1:%d" % prom_port,
             "--log.level=warn"],
            stdout=(logs / "prometheus.log").open("wb"), stderr=subprocess.STDOUT, cwd=str(tmp_path)))
        url = "http://127.0.0.1:%d" % prom_port

        def scraping():
            try:
                return [r for r in prom(url, 'up{job="gpupool-latency-probe"}') if r["value"][1] == "1"]
            except OSError:  # Prometheus not listening yet
                assert procs[1].poll() is None, (logs / "prometheus.log").read_text()[-3000:]
                return []

        wait("Prometheus scraping the probe", scraping, timeout=60)
        yield fake, url, probe_port
    finally:
        for proc in reversed(procs):
            stop(proc)
        fake.close()


def value(url, expr):
    got = prom(url, expr)
    return float(got[0]["value"][1]) if got else None


def slo_alerts(url):
    with urllib.request.urlopen(url + "/api/v1/alerts", timeout=10) as answer:
        alerts = json.loads(answer.read())["data"]["alerts"]
    return [a for a in alerts if a["labels"].get("alertname") == "GpuPoolFirstTokenSlo"]


def settles_at(url, expr, want):
    """The series equals ``want`` (to a microsecond): Prometheus's interpolation of the one bucket."""
    got = value(url, expr)
    return got is not None and abs(got - want) < 1e-6


def test_probe_p99_matches_the_delays_and_the_slo_alert_fires_and_resolves(probe_and_prometheus):
    fake, url, probe_port = probe_and_prometheus
    # the first chunk after 0.3 s: in (0.25, 0.5]; the stream over after 0.75 s: in (0.5, 1]
    wait("p99 time to first token of the fast endpoint", lambda: settles_at(url, TTFT_P99, interpolated(0.25, 0.5)),
         timeout=40, interval=0.5)
    assert value(url, REQUEST_P99) == pytest.approx(interpolated(0.5, 1.0), abs=1e-6)
    assert not slo_alerts(url)
    # what the probe sent: pool_ready's request body (a streaming completion with the endpoint's model)
    sent = [body for path, body in fake.bodies if path == "/v1/completions"]
    assert sent[0] == {"stream": True, "max_tokens": 16, "model": "tiny", "prompt": "Say hello."}
    failed = [body for path, body in fake.bodies if path == "/broken"]
    assert failed[0] == {"stream": True, "max_tokens": 16, "prompt": "Say hello."}  # no model given for that pool

    fake.first = SLOW  # the first chunk after 1.5 s: in (1, 2.5], and so the end of the stream (1.95 s)
    slowed = time.monotonic()
    wait("p99 time to first token of the slow endpoint", lambda: settles_at(url, TTFT_P99, interpolated(1.0, 2.5)),
         timeout=40, interval=0.5)
    assert value(url, REQUEST_P99) == pytest.approx(interpolated(1.0, 2.5), abs=1e-6)
    firing = wait("GpuPoolFirstTokenSlo firing", lambda: [a for a in slo_alerts(url) if a["state"] == "firing"],
                  timeout=40, interval=0.5)
    assert time.monotonic() - slowed >= 5, "fired before slo_for"
    assert (firing[0]["labels"]["pool"], firing[0]["labels"]["severity"]) == ("inference", "critical")
    assert float(firing[0]["value"]) > BOUND
    assert firing[0]["annotations"]["summary"] == "Pool inference: p99 time to first token over its SLO of 1 s"

    fake.first = FAST
    wait("GpuPoolFirstTokenSlo resolved", lambda: not slo_alerts(url), timeout=40, interval=0.5)
    assert value(url, TTFT_P99) < BOUND

    # the pool whose endpoint answers 500: its failures under http_status, no other reason, no latency
    failures = dict((r["metric"]["reason"], float(r["value"][1])) for r in prom(
        url, 'gpupool_inference_probe_failures_total{pool="training"}'))
    assert set(failures) == {"connect", "timeout", "http_status", "no_chunk", "broken_stream"}
    assert failures["http_status"] >= 10 and not any(failures[r] for r in failures if r != "http_status")
    assert failures["http_status"] <= fake.served["/broken"]
    assert value(url, 'gpupool_inference_time_to_first_token_seconds_count{pool="training"}') == 0
    assert not prom(url, 'gpupool_inference_probe_failures_total{pool="inference"} > 0')
    # the probe's own page, read directly: every probe of the fast pool is a bucket observation
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % probe_port, timeout=5) as answer:
        text = answer.read().decode()
    count = [line for line in text.splitlines()
             if line.startswith('gpupool_inference_time_to_first_token_seconds_count{pool="inference"}')]
    assert count and 20 <= float(count[0].split()[-1]) <= fake.served["/v1/completions"]


def test_observability_playbook_writes_the_probe_only_when_asked(tmp_path):
    """playbooks/observability.yml: off by default; on, the probe's objects as a manifest, a ServiceMonitor with
    the PrometheusRule kind (the operator is there) and annotations with the rule file; bad options refused
    before anything is written."""
    from tests.lib.ansible_run import run_playbook  # pylint: disable=import-outside-toplevel
    playbook = ROOT / "playbooks" / "observability.yml"
    endpoints = {"inference": {"url": "http://llm.serving.svc:8000/v1/completions", "model": "llama-3-8b"}}
    base = {"observability_dashboards": False}
    off = run_playbook(playbook, extra_vars=dict(base, observability_output_dir=str(tmp_path / "off")))
    assert off.rc == 0, off.stdout[-3000:]
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["gpupool-rules.yml"]
    for kind, wanted in (("file", "annotations"), ("PrometheusRule", "ServiceMonitor")):
        out = tmp_path / kind
        run = run_playbook(playbook, extra_vars=dict(base, observability_output_dir=str(out), observability_kind=kind,
                                                     observability_latency_probe=True,
                                                     observability_latency_probe_endpoints=endpoints,
                                                     observability_latency_probe_interval=15))
        assert run.rc == 0, run.stdout[-3000:]
        objs = list(yaml.safe_load_all((out / "gpupool-latency-probe.yml").read_text()))
        kinds = [o["kind"] for o in objs]
        assert kinds == ["ConfigMap", "Deployment", "Service"] + (["ServiceMonitor"] if wanted == "ServiceMonitor" else [])
        assert ("annotations" in objs[2]["metadata"]) == (wanted == "annotations")
        assert objs[0]["data"]["gpupool_latency_probe.py"] == PROGRAM.read_text()
        assert objs[0]["data"]["_first_token.py"] == FIRST_TOKEN.read_text()
        assert json.loads(objs[0]["data"]["config.json"])["interval_seconds"] == 15
    bad = run_playbook(playbook, extra_vars=dict(base, observability_output_dir=str(tmp_path / "bad"),
                                                 observability_latency_probe=True,
                                                 observability_latency_probe_endpoints=endpoints,
                                                 observability_latency_probe_scrape="PodMonitor"))
    assert bad.rc != 0 and "observability_latency_probe_scrape" in bad.stdout, bad.stdout[-3000:]
    assert not (tmp_path / "bad").exists()
    unknown = run_playbook(playbook, extra_vars=dict(base, observability_output_dir=str(tmp_path / "unknown"),
                                                     observability_latency_probe=True,
                                                     observability_latency_probe_endpoints={"serving": "http://x/"}))
    assert unknown.rc != 0 and "no pool serving in design lab-gpupool" in unknown.stdout, unknown.stdout[-3000:]
    assert not (tmp_path / "unknown").exists()


def test_the_docs_scrape_config_for_annotations_is_valid_prometheus_config(tmp_path):
    """The scrape job docs/gpu-metrics.md gives for a Prometheus without the operator passes promtool check config."""
    promtool = ROOT / ".sim" / "bin" / "promtool"
    assert promtool.exists(), "promtool is missing: make sim-build (tests/sim/k8s/build.sh) builds it"
    text = (ROOT / "docs" / "gpu-metrics.md").read_text().split("## The latency probe", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)
    relabel = config["scrape_configs"][0]["relabel_configs"]
    assert [r.get("target_label") for r in relabel] == [None, "__metrics_path__", "__address__"]
    path = tmp_path / "prometheus.yml"
    path.write_text(block)
    out = subprocess.run([str(promtool), "check", "config", str(path)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0 and "SUCCESS" in out.stdout + out.stderr, out.stdout + out.stderr
    path.write_text(block.replace("action: keep", "action: keepit"))
    bad = subprocess.run([str(promtool), "check", "config", str(path)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode != 0, bad.stdout + bad.stderr
