"""pool_ready's probe pod is deleted with its uid as precondition: a delete repeated after its answer was
lost to a gateway (the pod gone, a new one made under the same name) refuses the new pod instead of
deleting it; a probe whose create answer was lost is deleted by the uid read back."""
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._pool_ready_api import PoolReadyApi
from tests.lib.k8s_paths import Paths

PROBE = {"metadata": {"name": "pool-ready-probe-1", "namespace": "gpu-probe"}, "spec": {}}


def api_error(status, message):
    exc = ApiException(status=status, reason={404: "Not Found", 409: "Conflict", 504: "Gateway Timeout"}[status])
    exc.body = json.dumps({"kind": "Status", "code": status, "message": message})
    return exc


class Server(Paths):
    """Pods by name behind a gateway: ``lost`` lists calls carried out whose answer became a 504; after a
    delete, ``replace`` makes a new pod of the same name (a second run's probe, say)."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, lost=(), replace=False):
        self.lost = list(lost)
        self.replace = replace
        self.pods = {}
        self.deletes = []
        self.made = 0

    def _answer(self, call):
        if call in self.lost:
            self.lost.remove(call)
            raise api_error(504, "gateway timeout")

    def create_namespaced_pod(self, namespace, body):
        self.made += 1
        pod = json.loads(json.dumps(body))
        pod["metadata"]["uid"] = "uid-%d" % self.made
        self.pods[pod["metadata"]["name"]] = pod
        self._answer("create")
        return pod

    def read_namespaced_pod(self, name, namespace):
        if name not in self.pods:
            raise api_error(404, "pods %s not found" % name)
        return self.pods[name]

    def delete_namespaced_pod(self, name, namespace, grace_period_seconds=None, body=None):
        self.deletes.append(body)
        if name not in self.pods:
            raise api_error(404, "pods %s not found" % name)
        wanted = ((body or {}).get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != self.pods[name]["metadata"]["uid"]:
            raise api_error(409, "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                            % (wanted, self.pods[name]["metadata"]["uid"]))
        del self.pods[name]
        if self.replace:
            self.create_namespaced_pod(namespace, PROBE)
        self._answer("delete")
        return {"kind": "Status", "status": "Success"}


def ready_api(server):
    api = PoolReadyApi(k8s=K8sClient(api=server, sleep=lambda s: None))
    api.k8s._paths = server  # pylint: disable=protected-access
    return api


def test_the_probe_is_deleted_with_its_uid_as_precondition_and_at_once():
    server = Server()
    api = ready_api(server)
    api.create_pod(PROBE)
    assert api.delete_pod("gpu-probe", "pool-ready-probe-1") is True
    assert server.deletes[0] == {"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"}}
    assert server.pods == {}
    assert api.delete_pod("gpu-probe", "pool-ready-probe-1") is False  # gone


def test_a_repeated_delete_does_not_remove_a_same_named_replacement():
    server = Server(lost=["delete"], replace=True)
    api = ready_api(server)
    api.create_pod(PROBE)
    assert api.delete_pod("gpu-probe", "pool-ready-probe-1") is False  # the repeat met the new pod: 409
    assert len(server.deletes) == 2
    assert server.pods["pool-ready-probe-1"]["metadata"]["uid"] == "uid-2"  # the replacement stays


def test_a_probe_whose_create_answer_was_lost_is_deleted_by_the_uid_read_back():
    server = Server(lost=["create"])
    api = ready_api(server)
    with pytest.raises(K8sError) as err:
        api.create_pod(PROBE)
    assert err.value.outcome_unknown
    assert server.made == 1  # the create was not repeated
    assert api.delete_pod("gpu-probe", "pool-ready-probe-1") is True
    assert server.deletes[0]["preconditions"]["uid"] == "uid-1" and server.pods == {}
