"""Latency probe of the GPU pools' inference endpoints: time to first token and request latency as Prometheus series.

Every ``interval_seconds`` the probe sends one OpenAI-compatible streaming completion to each pool's
endpoint (a thread per pool, so a slow pool never delays another) and serves, on ``/metrics``, in
the Prometheus text exposition format:

- ``gpupool_inference_time_to_first_token_seconds`` (histogram, label ``pool``): from sending the
  request to the first streamed chunk of the answer;
- ``gpupool_inference_request_seconds`` (histogram, label ``pool``): from sending the request to the
  end of the stream (``data: [DONE]`` or the end of the body), for the probes that got a chunk and
  an unbroken stream;
- ``gpupool_inference_probes_total`` (counter, label ``pool``): probes sent;
- ``gpupool_inference_probe_failures_total`` (counter, labels ``pool`` and ``reason``): probes that
  failed, each with one of ``connect`` (no connection: refused, no route, name not resolved),
  ``timeout`` (no answer, or the stream not over, within ``timeout_seconds``), ``http_status``
  (the endpoint answered an HTTP error), ``no_chunk`` (the stream ended without a chunk) and
  ``broken_stream`` (the stream broke off after its first chunk). Every reason starts at 0.

What a request is and what its first chunk is comes from ``_first_token.py``, the file of the
collection that pool_ready's first_token step reads too (one definition); the ConfigMap carries it
beside this program. Standard library only.

Configuration: a JSON file (``--config``) with ``pools`` (pool -> ``{"url": ..., "model": ...}``,
the URL of a completions or chat/completions endpoint), and optionally ``interval_seconds``
(default 30), ``timeout_seconds`` (30), ``prompt``, ``max_tokens`` (16) and ``buckets`` (the
upper bounds of the histograms' buckets, seconds). ``--port`` and ``--address`` are where
``/metrics`` is served (default 0.0.0.0:9108); ``/healthz`` answers 200 once serving.
"""
import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _first_token import completion_request, stream_chunk  # noqa: E402  pylint: disable=wrong-import-position,import-error

TTFT = "gpupool_inference_time_to_first_token_seconds"
REQUEST = "gpupool_inference_request_seconds"
PROBES = "gpupool_inference_probes_total"
FAILURES = "gpupool_inference_probe_failures_total"
REASONS = ("connect", "timeout", "http_status", "no_chunk", "broken_stream")
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
DEFAULT_PROMPT = "Say hello."


class ProbeFailure(Exception):
    """One probe that failed, with its reason (one of REASONS)."""

    def __init__(self, reason, detail):
        Exception.__init__(self, "%s: %s" % (reason, detail))
        self.reason = reason


class Histogram(object):
    def __init__(self, bounds):
        self.bounds = tuple(bounds)
        self.counts = [0] * len(self.bounds)  # per bucket, not cumulative
        self.overflow = 0
        self.sum = 0.0
        self.count = 0

    def observe(self, value):
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.overflow += 1
        self.sum += value
        self.count += 1

    def lines(self, name, labels):
        out, total = [], 0
        for bound, count in zip(self.bounds, self.counts):
            total += count
            out.append("%s_bucket{%s,le=\"%s\"} %d" % (name, labels, _number(bound), total))
        out.append("%s_bucket{%s,le=\"+Inf\"} %d" % (name, labels, self.count))
        out.append("%s_sum{%s} %s" % (name, labels, repr(float(self.sum))))
        out.append("%s_count{%s} %d" % (name, labels, self.count))
        return out


def _number(value):
    return repr(float(value))


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics(object):
    def __init__(self, pools, buckets):
        self.lock = threading.Lock()
        self.pools = sorted(pools)
        self.ttft = dict((p, Histogram(buckets)) for p in self.pools)
        self.request = dict((p, Histogram(buckets)) for p in self.pools)
        self.probes = dict((p, 0) for p in self.pools)
        self.failures = dict(((p, r), 0) for p in self.pools for r in REASONS)

    def record(self, pool, ttft=None, request=None, failure=None):
        with self.lock:
            self.probes[pool] += 1
            if ttft is not None:
                self.ttft[pool].observe(ttft)
            if request is not None:
                self.request[pool].observe(request)
            if failure is not None:
                self.failures[(pool, failure)] += 1

    def exposition(self):
        with self.lock:
            out = ["# HELP %s Seconds from sending a streaming completion to its first streamed chunk." % TTFT,
                   "# TYPE %s histogram" % TTFT]
            for pool in self.pools:
                out += self.ttft[pool].lines(TTFT, 'pool="%s"' % _label(pool))
            out += ["# HELP %s Seconds from sending a streaming completion to the end of its stream." % REQUEST,
                    "# TYPE %s histogram" % REQUEST]
            for pool in self.pools:
                out += self.request[pool].lines(REQUEST, 'pool="%s"' % _label(pool))
            out += ["# HELP %s Streaming completions the probe sent." % PROBES, "# TYPE %s counter" % PROBES]
            out += ['%s{pool="%s"} %d' % (PROBES, _label(p), self.probes[p]) for p in self.pools]
            out += ["# HELP %s Probes that failed, by reason." % FAILURES, "# TYPE %s counter" % FAILURES]
            out += ['%s{pool="%s",reason="%s"} %d' % (FAILURES, _label(p), r, self.failures[(p, r)])
                    for p in self.pools for r in REASONS]
        return ("\n".join(out) + "\n").encode("utf-8")


def _timed_out(exc):
    return isinstance(exc, socket.timeout) or "timed out" in str(exc)


def probe_once(url, body, timeout, clock=time.monotonic):
    """(seconds to the first chunk, seconds to the end of the stream) of one streaming completion;
    ProbeFailure with its reason when it fails (the first chunk's seconds in ``ttft`` of the failure
    when the stream broke off after it)."""
    sent = clock()
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    try:
        resp = urllib.request.urlopen(request, timeout=timeout)  # pylint: disable=consider-using-with
    except urllib.error.HTTPError as exc:
        raise ProbeFailure("http_status", "%s answered %s %s" % (url, exc.code, exc.reason))
    except urllib.error.URLError as exc:
        raise ProbeFailure("timeout" if _timed_out(exc.reason) else "connect", "%s: %s" % (url, exc.reason))
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset or a bad status line
        raise ProbeFailure("timeout" if _timed_out(exc) else "connect", "%s: %s" % (url, exc or type(exc).__name__))
    first = None
    try:
        while True:
            if clock() - sent > timeout:
                raise ProbeFailure("timeout", "%s: the stream was not over after %s s" % (url, timeout))
            line = resp.readline()
            if not line:
                break
            if first is None and stream_chunk(line):
                first = clock() - sent
            if first is not None and line.strip() == b"data: [DONE]":
                break
    except ProbeFailure as exc:
        exc.ttft = first
        raise
    except (OSError, ValueError, http.client.HTTPException) as exc:  # a read timeout, a reset, an incomplete chunk
        failure = ProbeFailure("timeout" if _timed_out(exc) else ("broken_stream" if first is not None else "no_chunk"),
                               "%s: the stream broke off: %s" % (url, exc or type(exc).__name__))
        failure.ttft = first
        raise failure
    finally:
        resp.close()
    if first is None:
        raise ProbeFailure("no_chunk", "%s: the stream ended without a chunk" % url)
    return first, clock() - sent


def run_pool(pool, spec, config, metrics, stop, log):
    body = completion_request(spec["url"], spec.get("model"), config.get("prompt") or DEFAULT_PROMPT,
                              int(config.get("max_tokens") or 16))
    interval = float(config.get("interval_seconds") or 30)
    timeout = float(config.get("timeout_seconds") or 30)
    while not stop.is_set():
        started = time.monotonic()
        try:
            ttft, total = probe_once(spec["url"], body, timeout)
            metrics.record(pool, ttft=ttft, request=total)
        except ProbeFailure as exc:
            metrics.record(pool, ttft=getattr(exc, "ttft", None), failure=exc.reason)
            log("pool %s: probe failed, %s" % (pool, exc))
        # a bug: said in the log, and the pool's thread goes on
        except Exception:  # pylint: disable=broad-except
            log("pool %s: probe error\n%s" % (pool, traceback.format_exc()))
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def serve(metrics, address, port):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path.split("?")[0] == "/metrics":
                data, kind = metrics.exposition(), "text/plain; version=0.0.4; charset=utf-8"
            elif self.path == "/healthz":
                data, kind = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    return server


def load_config(path):
    with open(path) as handle:
        config = json.load(handle)
    pools = config.get("pools")
    if not isinstance(pools, dict) or not pools:
        raise SystemExit("%s: no pools (a mapping of pool name to {url, model})" % path)
    for pool, spec in pools.items():
        if not isinstance(spec, dict) or not str(spec.get("url") or "").startswith(("http://", "https://")):
            raise SystemExit("%s: pool %s has no http(s) url" % (path, pool))
    return config


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=9108)
    args = parser.parse_args(argv)
    config = load_config(args.config)
    metrics = Metrics(config["pools"], config.get("buckets") or BUCKETS)
    server = serve(metrics, args.address, args.port)
    stop = threading.Event()

    def log(text):
        sys.stderr.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), text))
        sys.stderr.flush()

    for pool, spec in sorted(config["pools"].items()):
        threading.Thread(target=run_pool, args=(pool, spec, config, metrics, stop, log), daemon=True).start()
    log("probing %s every %s s; metrics on %s:%d/metrics" % (
        ", ".join(sorted(config["pools"])), config.get("interval_seconds") or 30, args.address, server.server_port))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
