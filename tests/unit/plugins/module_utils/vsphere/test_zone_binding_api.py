"""The zone-binding client's requests, recorded from a fake REST session, against VMware's published bindings
(namespace_management.supervisors.zones.Bindings, vSphere API 9.0): paths, methods and bodies are what the
contract defines, and the body of a wrong request is named by the checker (the check can fail)."""
import importlib

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._zone_binding_api import ZoneBindingApi
from tests.lib import rest_contract

INFO = {"zone": "zone-a", "type": "WORKLOAD", "namespaces": ["team-x"], "marked_for_removal": False,
        "resource_allocation": {"vm_reservations": [{"reserved_vm_class": "gpu-inference", "count": 2}]}}


class Rest:
    def __init__(self):
        self.calls = []

    def get(self, path, params=None):
        self.calls.append(("GET", path, None))
        return {"zones": [INFO]}

    def post(self, path, body=None, params=None):
        self.calls.append(("POST", path, body))

    def patch(self, path, body=None, params=None):
        self.calls.append(("PATCH", path, body))


@pytest.fixture(scope="module")
def contract():
    return rest_contract.load([importlib.import_module("com.vmware.vcenter.namespace_management.supervisors.zones_client")])


def exchange(method, path, body, answer):
    entry = {"method": method, "path": path, "query": "", "status": 200 if answer is not None else 204}
    if body is not None:
        entry["request_body"] = body
    if answer is not None:
        entry["response_body"] = answer
    return entry


def test_every_request_matches_the_bindings(contract):
    rest = Rest()
    api = ZoneBindingApi(rest, api_version="9.0.0.0")
    assert api.api_version() == "9.0.0.0"
    assert api.list("sv-1") == [INFO]
    api.create("sv-1", [{"zone": "zone-b", "type": "WORKLOAD", "resource_allocation": {
        "vm_reservations": [{"reserved_vm_class": "gpu-training", "count": 1}]}}])
    api.update("sv-1", "zone-a", [{"reserved_vm_class": "gpu-inference", "count": 3}])
    assert [c[:2] for c in rest.calls] == [
        ("GET", "/api/vcenter/namespace-management/supervisors/sv-1/zones/bindings"),
        ("POST", "/api/vcenter/namespace-management/supervisors/sv-1/zones/bindings"),
        ("PATCH", "/api/vcenter/namespace-management/supervisors/sv-1/zones/zone-a/bindings")]
    answers = [{"zones": [INFO]}, None, None]
    for (method, path, body), answer in zip(rest.calls, answers):
        assert [(m.where, m.problem) for m in contract.check(exchange(method, path, body, answer))] == []


def test_the_check_names_a_body_the_bindings_do_not_allow(contract):
    bad = exchange("PATCH", "/api/vcenter/namespace-management/supervisors/sv-1/zones/zone-a/bindings",
                   {"resource_allocation": {"vm_reservations": [{"vm_class": "gpu-inference", "count": "3"}]}}, None)
    assert contract.check(bad) != []
