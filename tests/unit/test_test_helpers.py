"""tests/lib/helpers.py: the bounded poll, the Prometheus instant query and the simulator's REST client."""
import http.server
import json
import threading
import types
import urllib.parse

import pytest

from tests.lib import helpers


def test_wait_returns_the_first_true_answer_and_fails_after_the_timeout():
    answers = iter([None, [], {"ready": True}])
    assert helpers.wait("ready", lambda: next(answers), timeout=5, interval=0.01) == {"ready": True}
    with pytest.raises(pytest.fail.Exception, match=r"timed out after 0.05 s waiting for never \(last: 0\)"):
        helpers.wait("never", lambda: 0, timeout=0.05, interval=0.01)


def test_prom_sends_the_instant_query_to_a_url_or_a_rig():
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  pylint: disable=invalid-name
            asked.append(self.path)
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [{"value": [0, "1"]}]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # pylint: disable=arguments-differ
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = "http://127.0.0.1:%d" % server.server_address[1]
        assert helpers.prom(base, 'up{job="x"} == 1') == [{"value": [0, "1"]}]
        assert helpers.prom(types.SimpleNamespace(prometheus_url=base), "up") == [{"value": [0, "1"]}]
    finally:
        server.shutdown()
        server.server_close()
    assert [urllib.parse.unquote(p) for p in asked] == ['/api/v1/query?query=up{job="x"} == 1', "/api/v1/query?query=up"]


def test_rest_is_the_collections_client_for_the_simulator(monkeypatch):
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _vsphere_rest  # pylint: disable=import-outside-toplevel
    made = []
    monkeypatch.setattr(_vsphere_rest, "VsphereRestClient", lambda *args, **kwargs: made.append((args, kwargs)) or "client")
    sim = types.SimpleNamespace(host="127.0.0.1", user="u", password="p", port=8989, ca_file="/ca.pem")
    assert helpers.rest(sim) == "client"
    assert made == [(("127.0.0.1", "u", "p"), {"port": 8989, "ca_file": "/ca.pem"})]
