"""After a node VM restarts, a Ready condition from before the cordon is stale: wait_ready(restarted)
trusts only a new boot id or a Ready that went away and came back (recorded at the cordon)."""
import json

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._drain_api import (CORDONED_BOOT, CORDONED_BY, DrainApi,
                                                                                 DrainError, boot_of, stale_ready)
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient
from tests.lib.clock import Clock
from tests.lib.k8s_paths import Paths

T0, T1 = "2026-11-30T10:00:00Z", "2026-11-30T10:05:00Z"


def node(ready="True", since=T0, boot="b-1", record=None, unschedulable=False):
    annotations = {} if record is None else {CORDONED_BY: "host-roll/esx-1", CORDONED_BOOT: json.dumps(record)}
    return {"metadata": {"name": "n1", "resourceVersion": "7", "annotations": annotations},
            "spec": {"unschedulable": unschedulable},
            "status": {"nodeInfo": {"bootID": boot},
                       "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": since}]}}


class Api(Paths):
    class configuration(object):
        host = "https://guest:6443"

    def __init__(self, reads):
        self.reads = list(reads)
        self.patches = []

    def read_node(self, name):
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    def patch_node(self, name, body):
        self.patches.append(body)


def api_of(reads):
    api, clock = Api(reads), Clock()
    d = DrainApi(k8s=K8sClient(api=api, sleep=clock.sleep), sleep=clock.sleep, clock=clock, poll=1.0)
    d.k8s._paths = api
    return d, api


def test_the_cordon_records_the_boot_and_the_ready_it_saw_and_the_uncordon_removes_it():
    d, api = api_of([node()])
    assert d.cordon("n1") == "cordoned"
    assert json.loads(api.patches[0]["metadata"]["annotations"][CORDONED_BOOT]) == {"boot_id": "b-1", "ready_since": T0}
    d, api = api_of([node(record=boot_of(node()), unschedulable=True)])
    assert d.uncordon("n1") == "uncordoned"
    assert api.patches[0]["metadata"]["annotations"] == {CORDONED_BY: None, CORDONED_BOOT: None}


def test_stale_unless_a_new_boot_or_a_new_ready():
    record = boot_of(node())
    assert stale_ready(node(record=record)) is True
    assert stale_ready(node(boot="b-2", record=record)) is False
    assert stale_ready(node(since=T1, record=record)) is False
    assert stale_ready(node(boot="", record=record)) is True  # no boot id: the Ready transition decides
    assert stale_ready(node()) is False  # no record (cordoned by an older release): not judged
    assert stale_ready(node(record="junk")) is False


def test_a_record_of_the_typed_client_names_the_same_ready_in_another_form():
    # the typed models' read gave "+00:00" where the API server (and the read by path) gives "Z": the same instant
    typed = dict(boot_of(node()), ready_since="2026-11-30T10:00:00+00:00")
    assert stale_ready(node(record=typed)) is True
    assert stale_ready(node(since=T1, record=typed)) is False
    assert stale_ready(node(since="not a time", record=dict(typed, ready_since="not a time"))) is True


def test_a_restarted_node_with_its_old_ready_is_waited_for_and_then_named():
    record = boot_of(node())
    d = api_of([node(record=record)])[0]
    with pytest.raises(DrainError, match="node n1 is not Ready after 5 s: Ready since %s, the same Ready" % T0):
        d.wait_ready("n1", 5, restarted=True)
    d = api_of([node(record=record)])[0]
    d.wait_ready("n1", 5)  # not restarted (its VM migrated): the Ready condition is enough
    # NotReady while its VM is off, Ready again (a new transition) once the kubelet is back
    d, api = api_of([node(record=record), node("False", T1, record=record), node("True", T1, "b-2", record=record)])
    d.wait_ready("n1", 10, restarted=True)
    assert api.reads == [node("True", T1, "b-2", record=record)]
