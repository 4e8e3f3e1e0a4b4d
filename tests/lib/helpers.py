"""Small helpers the integration tests share: a REST client of the collection's own logged in to a
running vSphere simulator, an instant query against a Prometheus HTTP API, and a bounded poll."""
import json
import sys
import time
import urllib.parse
import urllib.request

import pytest

from tests.lib.ansible_run import COLLECTIONS


def rest(sim):
    """The collection's vSphere REST client (``vsphere/_vsphere_rest``) for the simulator ``sim``."""
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient  # pylint: disable=import-outside-toplevel
    return VsphereRestClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file)


def prom(target, expr, timeout=10):
    """The result list of the instant query ``expr``; ``target`` is a base URL or has ``prometheus_url`` (a rig)."""
    base = getattr(target, "prometheus_url", target)
    url = "%s/api/v1/query?query=%s" % (base, urllib.parse.quote(expr))
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())["data"]["result"]


def wait(what, check, timeout=60, interval=0.2):
    """Poll ``check`` until it returns something true and return that; fail the test after ``timeout`` s."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail("timed out after %s s waiting for %s (last: %r)" % (timeout, what, last))
