"""Namespace validation, normal form, merge and update plans (pure)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace as nsu

INFO = {
    "cluster": "domain-c9", "description": "d",
    "vm_service_spec": {"vm_classes": ["b", "a"], "content_libraries": ["lib-1"]},
    "storage_specs": [{"policy": "p1", "limit": 100}, {"policy": "p2"}],
    "resource_spec": {"memory_limit": 1024},
    "access_list": [{"subject_type": "USER", "domain": "vsphere.local", "subject": "alice", "role": "EDIT"}],
}


def cur():
    return nsu.normalize(INFO)


@pytest.mark.parametrize("name", ["Team", "team_a", "-a", "a-", "a" * 64, "", None])
def test_dns_label(name):
    with pytest.raises(nsu.NamespaceError, match="DNS label"):
        nsu.check_name(name)


def test_normalize():
    n = cur()
    assert n["vm_classes"] == ["a", "b"] and n["content_libraries"] == ["lib-1"]
    assert n["storage_policies"] == {"p1": 100, "p2": None}
    assert n["limits"] == {"cpu_mhz": None, "memory_mib": 1024, "storage_mib": None}
    assert n["access"] == [{"type": "USER", "domain": "vsphere.local", "subject": "alice", "role": "EDIT"}]


def test_access_validation():
    assert nsu.check_access([{"subject": "x", "domain": "d", "role": "view"}])[0] == dict(
        type="USER", domain="d", subject="x", role="VIEW")
    with pytest.raises(nsu.NamespaceError, match="OWNER, EDIT, VIEW"):
        nsu.check_access([{"subject": "x", "domain": "d", "role": "ADMIN"}])
    with pytest.raises(nsu.NamespaceError, match="USER or GROUP"):
        nsu.check_access([{"subject": "x", "domain": "d", "role": "EDIT", "type": "ROBOT"}])
    with pytest.raises(nsu.NamespaceError, match="twice"):
        nsu.check_access([{"subject": "x", "domain": "d", "role": "EDIT"}, {"subject": "X", "domain": "D", "role": "VIEW"}])


def test_limits_validation():
    assert nsu.check_limits({"cpu_mhz": 10}) == {"cpu_mhz": 10, "memory_mib": None, "storage_mib": None}
    with pytest.raises(nsu.NamespaceError):
        nsu.check_limits({"cpu_mhz": -1})
    with pytest.raises(nsu.NamespaceError, match="unknown limits gpu"):
        nsu.check_limits({"gpu": 1})


def test_resolve_names_and_ids():
    known = {"id-1": "gold", "id-2": "silver"}
    assert nsu.resolve(["gold", "id-2"], known, "storage policy", "storage policies") == ["id-1", "id-2"]
    with pytest.raises(nsu.NamespaceError, match="unknown storage policy bronze; storage policies: gold, silver"):
        nsu.resolve(["bronze"], known, "storage policy", "storage policies")
    with pytest.raises(nsu.NamespaceError, match="not unique"):
        nsu.resolve(["x"], {"a": "x", "b": "x"}, "content library", "content libraries")


def test_merge_adds_to_lists_and_keeps_the_rest():
    after = nsu.merge(cur(), {"vm_classes": ["c"], "storage_policies": [{"policy": "p1", "limit_mib": 200}]})
    assert after["vm_classes"] == ["a", "b", "c"] and after["content_libraries"] == ["lib-1"]
    assert after["storage_policies"] == {"p1": 200, "p2": None}
    assert sorted(nsu.differs(cur(), after)) == ["storage_policies", "vm_classes"]
    body = nsu.update_body(cur(), after)
    assert body["vm_service_spec"] == {"vm_classes": ["a", "b", "c"], "content_libraries": ["lib-1"]}
    assert body["storage_specs"] == [{"policy": "p1", "limit": 200}, {"policy": "p2"}]
    assert "resource_spec" not in body and "description" not in body


def test_merge_purge_lists_is_exact():
    after = nsu.merge(cur(), {"vm_classes": ["c"], "storage_policies": [{"policy": "p2"}]}, purge_lists=True)
    assert after["vm_classes"] == ["c"] and after["storage_policies"] == {"p2": None}
    assert after["content_libraries"] == ["lib-1"]  # not given: untouched


def test_nothing_given_nothing_changes():
    assert nsu.differs(cur(), nsu.merge(cur(), {})) == []
    assert nsu.update_body(cur(), nsu.merge(cur(), {})) is None


def test_limits_merge_per_key():
    after = nsu.merge(cur(), {"limits": {"cpu_mhz": 5000, "memory_mib": None, "storage_mib": None}})
    assert after["limits"] == {"cpu_mhz": 5000, "memory_mib": 1024, "storage_mib": None}
    assert nsu.update_body(cur(), after) == {"resource_spec": {"cpu_limit": 5000, "memory_limit": 1024}}


def test_access_changes_add_put_and_purge():
    want = nsu.check_access([{"subject": "alice", "domain": "vsphere.local", "role": "OWNER"},
                             {"subject": "ops", "domain": "example.com", "type": "GROUP", "role": "VIEW"}])
    after = nsu.merge(cur(), {"access": want})
    assert [(m, e["subject"]) for m, e in nsu.access_changes(cur(), after)] == [("POST", "ops"), ("PUT", "alice")]
    after = nsu.merge(cur(), {"access": want[1:]}, purge_access=True)
    assert [(m, e["subject"]) for m, e in nsu.access_changes(cur(), after)] == [("POST", "ops"), ("DELETE", "alice")]
    assert nsu.update_body(cur(), after) is None  # access goes through its own endpoints


def test_create_body():
    after = nsu.merge(nsu.empty("domain-c9"), {"vm_classes": ["a"], "description": "x",
                                               "access": nsu.check_access([{"subject": "s", "domain": "d", "role": "EDIT"}])})
    body = nsu.create_body("team-a", after)
    assert body["cluster"] == "domain-c9" and body["namespace"] == "team-a"
    assert body["access_list"] == [{"subject_type": "USER", "domain": "d", "subject": "s", "role": "EDIT"}]
    assert "resource_spec" not in body
    assert nsu.create_body("t", after, cluster_field="supervisor")["supervisor"] == "domain-c9"
    assert nsu.differs(None, after) == ["access", "content_libraries", "description", "limits", "storage_policies",
                                        "vm_classes"]


def test_merge_purges_only_the_classes_named():
    # "a" has a vGPU and is not wanted: removed; "b" (a CPU class) is kept without purge_lists
    after = nsu.merge(cur(), {"vm_classes": ["c"]}, purge_vm_classes=["a", "c"])
    assert after["vm_classes"] == ["b", "c"]
    assert nsu.differs(cur(), after) == ["vm_classes"]
    # nothing asked for the list: nothing purged
    assert nsu.merge(cur(), {}, purge_vm_classes=["a"])["vm_classes"] == ["a", "b"]


def test_wanted_is_the_module_options_as_merge_takes_them():
    options = dict(description="x", vm_classes=["a"], storage_policies=[dict(policy="gold", limit_mib=5)],
                   limits=dict(cpu_mhz=1, memory_mib=None, storage_mib=None),
                   access=[dict(subject="alice", domain="vsphere.local", role="edit")])
    want = nsu.wanted(options, {"p1": "gold"})
    assert want["storage_policies"] == [dict(policy="p1", limit_mib=5)]
    assert want["access"] == [dict(type="USER", domain="vsphere.local", subject="alice", role="EDIT")]
    # storage policies named but their ids unknown: left alone
    assert "storage_policies" not in nsu.wanted(options)
    with pytest.raises(nsu.NamespaceError, match="unknown storage policy gold"):
        nsu.wanted(options, {"p9": "silver"})
    assert set(nsu.FIELDS) == set(cur()) - {"cluster"}
