"""supervisor_namespace through main(): the arguments parsed by AnsibleModule (mutually exclusive cluster
and supervisor, the access entries' choices), the namespace API replaced by a fake store. Check mode
predicts the real run, a rerun is idempotent, --diff shows the namespace before and after, bad input is
refused before any write, a failed request names the namespace and what was attempted."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import supervisor_namespace
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.modules.test_runner_modules import FakeNamespaces

PASSWORD = "vc-pw-never-shown"
ALICE = dict(subject="alice", domain="vsphere.local", role="EDIT")
TEAM = dict(name="team-a", cluster="gpu-h100", vm_classes=["gpu-small"], storage_policies=[dict(policy="gold")],
            content_libraries=["vm-images"], access=[ALICE], description="gpupool tenant a")


class Namespaces(FakeNamespaces):
    """The fake store; ``fail`` names a write that raises the client's error, ``reads`` counts the lookups."""

    fail = None
    reads = 0

    def get(self, name):
        Namespaces.reads += 1
        return FakeNamespaces.get(self, name)

    def update(self, name, body):
        if Namespaces.fail == "update":
            raise VsphereError("HTTP 500 internal error")
        FakeNamespaces.update(self, name, body)

    def set_access(self, name, method, entry):
        if Namespaces.fail == "access":
            raise VsphereError("HTTP 403 forbidden")
        FakeNamespaces.set_access(self, name, method, entry)


@pytest.fixture
def namespaces(monkeypatch):
    FakeNamespaces.store, FakeNamespaces.calls = {}, []
    Namespaces.fail, Namespaces.reads = None, 0
    monkeypatch.setattr(supervisor_namespace, "NamespaceApi", Namespaces)
    return FakeNamespaces


def run(check_mode=False, diff=False, **params):
    return run_main(supervisor_namespace, dict(VSPHERE, password=PASSWORD, **params), check_mode=check_mode, diff=diff)


def test_check_mode_predicts_the_create_and_the_rerun_changes_nothing(namespaces):
    check = run(check_mode=True, diff=True, **TEAM)
    assert namespaces.calls == [] and namespaces.store == {}
    real = run(diff=True, **TEAM)
    assert real == check and real["changed"] is True and namespaces.calls == [("create", "team-a", False)]
    assert real["diff"] == dict(before=None, after=real["namespace"])
    ns = real["namespace"]
    assert ns["cluster"] == "domain-c9" and ns["storage_policies"] == {"pol-1": None} and ns["content_libraries"] == ["lib-1"]
    assert missing_keys(real, supervisor_namespace, "always", "with --diff") == []
    again = run(diff=True, **TEAM)
    assert again["changed"] is False and again["changed_fields"] == [] and len(namespaces.calls) == 1
    assert again["diff"]["before"] == again["diff"]["after"]
    assert shows([check, real, again], PASSWORD) == []


def test_an_access_change_is_one_put_and_the_diff_shows_the_role(namespaces):
    run(**TEAM)
    view = {**TEAM, "access": [dict(ALICE, role="VIEW")]}
    check = run(check_mode=True, diff=True, **view)
    assert len(namespaces.calls) == 1
    real = run(diff=True, **view)
    assert real == check and real["changed_fields"] == ["access"]
    assert namespaces.calls[1:] == [("access", "team-a", "PUT", "alice")]
    roles = [[a["role"] for a in real["diff"][side]["access"]] for side in ("before", "after")]
    assert roles == [["EDIT"], ["VIEW"]]
    assert run(**view)["changed"] is False and len(namespaces.calls) == 2


def test_delete_is_predicted_then_idempotent(namespaces):
    run(**TEAM)
    check = run(check_mode=True, diff=True, name="team-a", state="absent")
    assert "team-a" in namespaces.store
    real = run(diff=True, name="team-a", state="absent")
    assert real == check and real["changed"] is True and real["namespace"] is None and real["diff"]["after"] is None
    assert namespaces.calls[-1] == ("delete", "team-a") and namespaces.store == {}
    assert run(name="team-a", state="absent") == dict(changed=False, changed_fields=[], namespace=None)


def test_bad_input_is_refused_before_any_request(namespaces):
    res = run(name="team-b", cluster="gpu-h100", supervisor="sv-1")
    assert res["failed"] is True and res["msg"] == "parameters are mutually exclusive: cluster|supervisor"
    res = run(name="team-b", cluster="gpu-h100", access=[dict(ALICE, role="ROOT")])
    assert res["failed"] is True and "value of role must be one of: " in res["msg"] and "got: ROOT" in res["msg"]
    res = run(name="team-b", cluster="gpu-h100", storage_policies=[dict(policy="gold", limit_mib=-1)],
              access=[dict(ALICE, subject="")])
    assert res["failed"] is True and res["msg"].startswith("Invalid input for supervisor_namespace: ")
    assert [e.split(" ")[0] for e in res["invalid_input"]] == ["storage_policies[0].limit_mib", "access[0].subject"]
    res = run(name="Team_B", cluster="gpu-h100")
    assert res["failed"] is True and "Team_B" in res["msg"] and "DNS" in res["msg"]
    assert Namespaces.reads == 0 and namespaces.calls == []
    # what needs the Supervisor's answers is refused after the read, before any write
    res = run(name="team-b", cluster="mgmt")
    assert res["msg"].startswith("Unable to manage namespace team-b: cluster mgmt is not a Supervisor")
    res = run(name="team-b", cluster="gpu-h100", storage_policies=[dict(policy="silver")])
    assert "unknown storage policy silver; storage policies: gold" in res["msg"]
    assert namespaces.calls == [] and shows(res, PASSWORD) == []


def test_a_failed_request_names_the_namespace_and_what_was_attempted(namespaces):
    run(**TEAM)
    Namespaces.fail = "update"
    res = run(**{**TEAM, "description": "gpupool tenant a, bigger", "vm_classes": ["gpu-small", "gpu-big"]})
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == "Unable to update namespace team-a: HTTP 500 internal error"
    assert res["changed_fields"] == ["description", "vm_classes"]
    assert sorted(res["namespace"]["vm_classes"]) == ["gpu-big", "gpu-small"]
    assert namespaces.calls == [("create", "team-a", False)]  # the update was refused: nothing written
    Namespaces.fail = "access"
    res = run(**{**TEAM, "access": [dict(ALICE, role="OWNER")]})
    assert res["msg"] == "Unable to update namespace team-a: HTTP 403 forbidden" and res["changed_fields"] == ["access"]
    assert shows(res, PASSWORD) == []
