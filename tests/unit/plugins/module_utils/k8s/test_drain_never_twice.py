"""A drain's writes are never carried out twice: an eviction carries the pod's uid as precondition, so
its repeat (the first answer lost to a gateway's 504) cannot evict the replacement pod of the same name;
a cordon PATCH whose answer was lost is judged by the node read again, not reported as a failure."""
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import CORDONED_BY, DrainApi, DrainError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from tests.lib.k8s_paths import Paths


def api_error(status, message):
    exc = ApiException(status=status, reason={409: "Conflict", 504: "Gateway Timeout"}.get(status, ""))
    exc.body = json.dumps({"kind": "Status", "code": status, "message": message})
    return exc


class Server(Paths):
    """The pods and one node of an API server behind a gateway: ``lost`` lists the calls whose answer
    the gateway replaces by 504 after the server carried them out; ``timeouts`` those it never answers."""

    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, lost=(), timeouts=0):
        self.lost = list(lost)
        self.timeouts = timeouts
        self.pods = {("apps", "llm-0"): "uid-1"}
        self.evictions = []
        self.node = {"metadata": {"name": "node-1", "resourceVersion": "10", "annotations": {}},
                     "spec": {}, "status": {"nodeInfo": {"bootID": "b1"}, "conditions": []}}
        self.patches = 0

    def _answer(self, call):
        if call in self.lost:
            self.lost.remove(call)
            raise api_error(504, "gateway timeout")

    # pods
    def create_namespaced_pod_eviction(self, name, namespace, body):
        self.evictions.append(body)
        uid = self.pods.get((namespace, name))
        if uid is None:
            raise api_error(404, "pods %s not found" % name)
        wanted = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if wanted is not None and wanted != uid:
            raise api_error(409, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (wanted, uid))
        # evicted; its StatefulSet makes a new pod of the same name at once
        self.pods[(namespace, name)] = uid + "-next"
        self._answer("evict")
        return {"kind": "Status", "status": "Success"}

    def read_namespaced_pod(self, name, namespace):
        uid = self.pods.get((namespace, name))
        if uid is None:
            raise api_error(404, "not found")
        return {"metadata": {"name": name, "namespace": namespace, "uid": uid}}

    # the node
    def read_node(self, name):
        return json.loads(json.dumps(self.node))

    def patch_node(self, name, body):
        self.patches += 1
        if self.timeouts:
            self.timeouts -= 1
            raise api_error(504, "gateway timeout")
        meta = body.get("metadata") or {}
        if meta.get("resourceVersion") and meta["resourceVersion"] != self.node["metadata"]["resourceVersion"]:
            raise api_error(409, "the object has been modified; please apply your changes to the latest version")
        for key, value in (meta.get("annotations") or {}).items():
            if value is None:
                self.node["metadata"]["annotations"].pop(key, None)
            else:
                self.node["metadata"]["annotations"][key] = value
        self.node["spec"].update(body.get("spec") or {})
        self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)
        self._answer("patch")
        return self.node


def drain(server):
    d = DrainApi(k8s=K8sClient(api=server, sleep=lambda s: None), sleep=lambda s: None, clock=lambda: 0.0)
    d.k8s._paths = server
    return d


POD = {"namespace": "apps", "name": "llm-0", "uid": "uid-1"}


def test_the_eviction_carries_the_pods_uid_as_precondition():
    server = Server()
    assert drain(server).evict(POD) == "evicted"
    assert server.evictions[0]["deleteOptions"]["preconditions"]["uid"] == "uid-1"


def test_a_repeated_eviction_does_not_evict_the_replacement_pod():
    server = Server(lost=["evict"])
    d = drain(server)
    assert d.evict(POD) == "gone"  # the repeat's precondition failed: the pod meant is gone
    assert len(server.evictions) == 2
    assert server.pods[("apps", "llm-0")] == "uid-1-next"  # the replacement is still there, not evicted


def test_a_409_for_the_pod_still_there_is_an_error():
    server = Server()

    def refuse(name, namespace, body):
        raise api_error(409, "Operation cannot be fulfilled")
    server.create_namespaced_pod_eviction = refuse
    with pytest.raises(DrainError, match="cannot evict pod apps/llm-0"):
        drain(server).evict(POD)


def test_a_cordon_whose_answer_was_lost_is_read_again_and_done():
    server = Server(lost=["patch"])
    d = drain(server)
    assert d.cordon("node-1") == "cordoned"
    assert server.patches == 2  # the repeat carried the old resourceVersion: 409, then the node read again
    assert server.node["spec"]["unschedulable"] is True
    assert server.node["metadata"]["annotations"][CORDONED_BY] == "gpupool.vcf"
    assert d.cordoned == ["node-1"]


def test_a_cordon_that_never_got_through_is_read_again_and_reported():
    server = Server(timeouts=100)
    d = drain(server)
    with pytest.raises(DrainError, match=r"cannot patch node node-1: .*504.*\(read again: not changed\)"):
        d.cordon("node-1")
    assert d.cordoned == []


def test_an_uncordon_whose_answer_was_lost_is_read_again_and_done():
    server = Server()
    d = drain(server)
    d.cordon("node-1")
    server.lost = ["patch"]
    assert d.uncordon("node-1") == "uncordoned"
    assert not server.node["spec"]["unschedulable"] and CORDONED_BY not in server.node["metadata"]["annotations"]
