"""A Prometheus bearer token never travels over plain http unless the module is told it may: gpu_usage
with an http:// URL and a token fails before any request, naming allow_plain_http; with the option
it sends (and here finds nothing listening: the port is closed)."""
import socket

from tests.lib.ansible_run import run_module


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_token_over_plain_http_is_refused_unless_allowed():
    url = "http://127.0.0.1:%d" % closed_port()
    res, _run = run_module("gpupool.vcf.gpu_usage", {"prometheus_url": url, "bearer_token": "s3cret-tok"})
    assert res.get("failed") and "refusing to send the bearer token to %s over plain http" % url in res["msg"], res
    assert "allow_plain_http" in res["msg"] and "s3cret" not in res["msg"]
    res, _run = run_module("gpupool.vcf.gpu_usage", {"prometheus_url": url, "bearer_token": "s3cret-tok",
                                                     "allow_plain_http": True, "retries": 0})
    assert res.get("failed") and "connection refused" in res["msg"] and "plain http" not in res["msg"], res
