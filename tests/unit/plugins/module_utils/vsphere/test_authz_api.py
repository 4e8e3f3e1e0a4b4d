"""Unit tests of the privilege reader (vsphere/_authz_api.py) over a fake AuthorizationManager."""
from types import SimpleNamespace as NS

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._authz_api import AuthzApi


class Ref(NS):
    pass


class Manager:
    """Answers HasPrivilegeOnEntities from {moid: set of privileges held}; records each call."""

    def __init__(self, held):
        self.held = held
        self.calls = []

    def HasPrivilegeOnEntities(self, entity, sessionId, privId):  # noqa: N802,N803 - pyvmomi's names
        self.calls.append((tuple(e._moId for e in entity), sessionId, tuple(privId)))
        return [NS(entity=e, privAvailability=[NS(privId=p, isGranted=p in self.held.get(e._moId, ()))
                                               for p in privId]) for e in entity]


def api(held):
    root = Ref(_moId="group-d1")
    content = NS(rootFolder=root, about=NS(apiVersion="8.0.3.0"), authorizationManager=Manager(held),
                 sessionManager=NS(currentSession=NS(key="session-1")))
    return AuthzApi(NS(content=content)), content


def test_one_call_for_every_object_and_privilege_of_this_session():
    authz, content = api({"host-1": {"Host.Config.Patch"}, "group-d1": {"VirtualMachineClasses.Manage"}})
    refs = {"vCenter root folder": authz.root_folder(), "host esx-01": Ref(_moId="host-1")}
    wanted = {"host esx-01": ["Host.Config.Patch", "Host.Config.Settings"], "vCenter root folder": ["VirtualMachineClasses.Manage"],
              "host gone": ["Host.Config.Patch"]}  # no object: not asked
    assert authz.session_privileges(refs, wanted) == {
        "host esx-01": {"Host.Config.Patch": True, "Host.Config.Settings": False, "VirtualMachineClasses.Manage": False},
        "vCenter root folder": {"Host.Config.Patch": False, "Host.Config.Settings": False, "VirtualMachineClasses.Manage": True}}
    assert content.authorizationManager.calls == [(("host-1", "group-d1"), "session-1", (
        "Host.Config.Patch", "Host.Config.Settings", "VirtualMachineClasses.Manage"))]
    assert authz.api_version() == "8.0.3.0"


def test_nothing_to_ask_sends_nothing():
    authz, content = api({})
    assert authz.session_privileges({}, {"host x": ["Host.Config.Patch"]}) == {}
    assert content.authorizationManager.calls == []
