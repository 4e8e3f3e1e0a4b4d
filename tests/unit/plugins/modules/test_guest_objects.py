# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""guest_objects through main() with a fake client layer: check mode predicts the first run's changes
exactly, the run makes exactly those writes (with their preconditions), a second run changes nothing,
an immutable field of an object the collection created is a delete and create, and one of an object
it did not create is refused before any write."""
import copy
import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.modules import guest_objects

TENANTS = [{"namespace": "team-a", "training": True,
            "quotas": [{"name": "gpupool-gpus", "hard": {"requests.nvidia.com/gpu": 4}},
                       {"name": "gpupool-gpu-training", "hard": {"requests.nvidia.com/gpu": 2},
                        "priority_class": "gpu-training"}]},
           {"namespace": "team-b", "gpus": 1}]
CLASSES = [{"name": "gpu-training", "value": 100000, "description": "training"}]


class FakeApi:
    """GuestObjectsApi over a dict of live objects; every write is recorded and applied as the server
    would, refusing a stale resourceVersion or uid."""

    store = {}
    calls = []

    def __init__(self, params):
        assert params["kubeconfig"] == "/k"

    def read(self, kinds):
        FakeApi.calls.append(("read", tuple(kinds)))
        return dict((k, copy.deepcopy(v)) for k, v in FakeApi.store.items() if k[0] in kinds)

    @staticmethod
    def _key(kind, ns, name):
        return kind, ns or "", name

    def create(self, obj):
        key = self._key(obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"])
        FakeApi.calls.append(("create",) + key)
        if key in FakeApi.store:
            raise K8sError("409 AlreadyExists", status=409)
        if key[0] == "ResourceQuota" and ("Namespace", "", key[1]) not in FakeApi.store:
            raise K8sError("404 namespace %s not found" % key[1], status=404)
        obj = copy.deepcopy(obj)
        obj["metadata"].update(resourceVersion="1", uid="uid-%s" % key[2])
        FakeApi.store[key] = obj

    def patch(self, kind, name, ns, version, body):
        key = self._key(kind, ns, name)
        FakeApi.calls.append(("patch",) + key + (body,))
        live = FakeApi.store[key]
        if live["metadata"]["resourceVersion"] != version:
            raise K8sError("409 Conflict", status=409)
        for part, value in body.items():
            if isinstance(value, dict):
                for sub, inner in value.items():
                    live.setdefault(part, {}).setdefault(sub, {}).update(inner)
            else:
                live[part] = value
        live["metadata"]["resourceVersion"] = str(int(version) + 1)

    def delete(self, kind, name, ns, uid, version):
        key = self._key(kind, ns, name)
        FakeApi.calls.append(("delete",) + key)
        live = FakeApi.store[key]
        assert (live["metadata"]["uid"], live["metadata"]["resourceVersion"]) == (uid, version)
        del FakeApi.store[key]


@pytest.fixture
def api(monkeypatch):
    FakeApi.store, FakeApi.calls = {}, []
    monkeypatch.setattr(guest_objects, "GuestObjectsApi", FakeApi)
    return FakeApi


def run(monkeypatch, check=False, **params):
    args = dict(kubeconfig="/k", priority_classes=CLASSES, tenants=TENANTS, _ansible_check_mode=check,
                _ansible_diff=True)
    args.update(params)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit):
        guest_objects.main()


def result(capsys):
    return json.loads(capsys.readouterr().out)


def test_check_predicts_the_first_run_and_a_second_run_changes_nothing(api, monkeypatch, capsys):
    run(monkeypatch, check=True)
    predicted = result(capsys)
    assert predicted["changed"] and [c for c in api.calls if c[0] != "read"] == []
    assert predicted["names"] == ["gpu-training", "team-a", "team-a/gpupool-gpus", "team-a/gpupool-gpu-training",
                                  "team-b", "team-b/gpu-quota"]
    run(monkeypatch)
    first = result(capsys)
    assert first["changes"] == predicted["changes"] and first["changed"]
    assert [c[0] for c in api.calls if c[0] != "read"] == ["create"] * 6
    ns = api.store[("Namespace", "", "team-a")]
    assert ns["metadata"]["labels"] == {"gpupool.vcf/tenant": "true", "gpupool.vcf/training": "true",
                                        "app.kubernetes.io/managed-by": "gpupool.vcf"}
    assert api.store[("ResourceQuota", "team-b", "gpu-quota")]["spec"] == {"hard": {"requests.nvidia.com/gpu": "1"}}
    run(monkeypatch)
    again = result(capsys)
    assert not again["changed"] and again["changes"] == []


def test_drift_is_patched_field_by_field_with_the_resource_version(api, monkeypatch, capsys):
    run(monkeypatch)
    capsys.readouterr()
    api.store[("ResourceQuota", "team-a", "gpupool-gpus")]["spec"]["hard"].update({"requests.nvidia.com/gpu": "40",
                                                                                   "pods": "10"})
    api.store[("Namespace", "", "team-a")]["metadata"]["labels"]["gpupool.vcf/training"] = "false"
    api.calls = []
    run(monkeypatch, check=True)
    predicted = result(capsys)
    assert [(c["object"], c["field"], c["before"], c["after"]) for c in predicted["changes"]] == [
        ("namespace team-a", "metadata.labels.gpupool.vcf/training", "false", "true"),
        ("resource_quota team-a/gpupool-gpus", "spec.hard.requests.nvidia.com/gpu", "40", "4")]
    run(monkeypatch)
    assert result(capsys)["changes"] == predicted["changes"]
    assert [c for c in api.calls if c[0] == "patch"] == [
        ("patch", "Namespace", "", "team-a", {"metadata": {"labels": {"gpupool.vcf/training": "true"}}}),
        ("patch", "ResourceQuota", "team-a", "gpupool-gpus", {"spec": {"hard": {"requests.nvidia.com/gpu": "4"}}})]
    assert api.store[("ResourceQuota", "team-a", "gpupool-gpus")]["spec"]["hard"]["pods"] == "10"  # not ours


def test_immutable_value_replaces_only_what_the_collection_created(api, monkeypatch, capsys):
    run(monkeypatch)
    capsys.readouterr()
    classes = [dict(CLASSES[0], value=200000)]
    api.calls = []
    run(monkeypatch, priority_classes=classes, kinds=["PriorityClass"])
    out = result(capsys)
    assert out["changes"][0]["action"] == "replace"
    assert [c[0] for c in api.calls] == ["read", "delete", "create"]
    assert api.store[("PriorityClass", "", "gpu-training")]["value"] == 200000
    # one made by hand (no managed-by label) is refused before any write
    del api.store[("PriorityClass", "", "gpu-training")]["metadata"]["labels"]
    api.calls = []
    run(monkeypatch, priority_classes=CLASSES, kinds=["PriorityClass"])
    out = result(capsys)
    assert out["failed"] and "not created by this collection" in out["msg"] and "Nothing was changed" in out["msg"]
    assert [c[0] for c in api.calls] == ["read"]
