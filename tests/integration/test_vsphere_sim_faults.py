"""Faults of the vSphere simulator: sessions killed, an outage window, a host that does not
come back after a reboot, proxy answers for REST paths and SOAP methods, tasks that hang,
running vs staged nvidia module options, and custom attributes.

One simulator for the module; every test logs in afresh, since some kill all sessions.
"""
import http.client
import pathlib
import socket
import ssl
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

pyVim = pytest.importorskip("pyVim.connect")
requests = pytest.importorskip("requests")
from pyVmomi import vim, vmodl  # noqa: E402

from tests.lib.vim_objects import find_object as obj, wait_task as wait  # noqa: E402

OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
BUNDLE = f"https://depot.lab.local/nvidia/NVD-AIE-800_{NEW}_23591372.zip"
CLUSTERS = "/api/vcenter/namespace-management/clusters"
REBOOT_SECONDS = 0.3

FLEET = {
    "clusters": [
        {"name": "gpu", "supervisor": True, "hosts": [
            {"prefix": "esx-", "count": 6, "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": OLD},
        ]},
    ],
    "vms": [
        {"name": "job", "host": "esx-06"},
        {"name": "spare", "host": "esx-06", "power": "off"},
    ],
}


@pytest.fixture(scope="module")
def sim():
    with vsphere_sim.start(FLEET, reboot_seconds=REBOOT_SECONDS) as s:
        yield s


def connect(sim):
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    return pyVim.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)


@pytest.fixture
def si(sim):
    conn = connect(sim)
    yield conn
    pyVim.Disconnect(conn)


@pytest.fixture
def rest(sim):
    """A requests session logged in to /api."""
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would replace verify
    session.verify = sim.ca_file
    base = f"https://{sim.host}:{sim.port}"
    res = session.post(base + "/api/session", auth=(sim.user, sim.password), timeout=10)
    assert res.status_code == 201
    session.headers["vmware-api-session-id"] = res.json()
    session.base = base
    yield session
    session.close()


def stays(predicate, seconds):
    """predicate() holds during the whole period."""
    end = time.time() + seconds
    while time.time() < end:
        assert predicate()
        time.sleep(0.05)


def until(predicate, timeout=10):
    end = time.time() + timeout
    while not predicate():
        assert time.time() < end, "condition not reached"
        time.sleep(0.05)


def retrieve(si, kind, props):
    """One PropertyCollector retrieval over a ContainerView: {name: {prop: value}}."""
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    pc = vmodl.query.PropertyCollector
    spec = pc.FilterSpec(
        objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[
            pc.TraversalSpec(name="view", type=vim.view.ContainerView, path="view", skip=False)])],
        propSet=[pc.PropertySpec(type=kind, pathSet=["name"] + props)])
    try:
        res = content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())
    finally:
        view.Destroy()
    out = {}
    for o in res.objects:
        values = {p.name: p.val for p in o.propSet}
        out[values.pop("name")] = values
    return out


# --- sessions ---------------------------------------------------------------------------------

def test_kill_sessions_soap(sim, si):
    host = obj(si, vim.HostSystem, "esx-01")
    assert host.runtime.connectionState == "connected"
    killed = sim.kill_sessions()
    assert killed["soap"] >= 1
    with pytest.raises(vim.fault.NotAuthenticated) as err:
        host.runtime.connectionState  # noqa: B018 (a property read is a call)
    assert err.value.msg == "The session is not authenticated."
    assert err.value.privilegeId == "System.View"
    # how clients see that their session is gone: currentSession is unset, not a fault
    assert si.content.sessionManager.currentSession is None
    si.content.sessionManager.Login(sim.user, sim.password)  # re-login on the same connection
    assert host.runtime.connectionState == "connected"
    fresh = connect(sim)
    assert obj(fresh, vim.HostSystem, "esx-01").name == "esx-01"
    pyVim.Disconnect(fresh)


def test_kill_sessions_rest(sim, rest):
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200
    token = rest.headers["vmware-api-session-id"]
    killed = sim.kill_sessions()
    assert killed["rest"] >= 1
    res = rest.get(rest.base + CLUSTERS, timeout=10)
    assert res.status_code == 401
    assert res.json()["error_type"] == "UNAUTHENTICATED"
    old = rest.get(rest.base + "/rest/com/vmware/cis/tagging/category", headers={"vmware-api-session-id": token}, timeout=10)
    assert old.status_code == 401
    assert old.json()["type"] == "com.vmware.vapi.std.errors.unauthenticated"
    assert rest.get(rest.base + "/api/session", timeout=10).status_code == 401
    new = rest.post(rest.base + "/api/session", auth=(sim.user, sim.password), timeout=10)
    assert new.status_code == 201 and new.json() != token
    rest.headers["vmware-api-session-id"] = new.json()
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200


def test_terminate_session_ends_the_soap_session_and_its_rest_session(sim, si, rest):
    """SessionManager.TerminateSession called by an administrator's session, as on vCenter: the next
    call of the ended session (a property read too, which vcsim alone still serves) is NotAuthenticated,
    and the REST session, bound to a SOAP session of its own, answers 401."""
    host = obj(si, vim.HostSystem, "esx-02")
    assert host.runtime.connectionState == "connected"
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200
    victim = si.content.sessionManager.currentSession.key
    admin = connect(sim)
    try:
        manager = admin.content.sessionManager
        own = manager.currentSession.key
        bound = [s.key for s in manager.sessionList if s.userAgent.startswith("vAPI-endpoint")]
        assert victim != own and bound, [(s.key, s.userAgent) for s in manager.sessionList]
        manager.TerminateSession(sessionId=[victim] + bound)
        keys = [s.key for s in manager.sessionList]
        assert victim not in keys and not set(bound) & set(keys) and own in keys
    finally:
        pyVim.Disconnect(admin)
    with pytest.raises(vim.fault.NotAuthenticated) as err:
        host.runtime.connectionState  # noqa: B018 (a Fetch: vcsim answers it without a session)
    assert err.value.privilegeId == "System.View"
    with pytest.raises(vim.fault.NotAuthenticated):
        retrieve(si, vim.HostSystem, ["runtime.connectionState"])
    assert si.content.sessionManager.currentSession is None
    res = rest.get(rest.base + CLUSTERS, timeout=10)
    assert res.status_code == 401 and res.json()["error_type"] == "UNAUTHENTICATED"
    si.content.sessionManager.Login(sim.user, sim.password)
    assert host.runtime.connectionState == "connected"


def test_a_rest_logout_ends_its_bound_soap_session(sim, si):
    base = f"https://{sim.host}:{sim.port}"
    session = requests.Session()
    session.trust_env = False
    session.verify = sim.ca_file
    res = session.post(base + "/api/session", auth=(sim.user, sim.password), timeout=10)
    assert res.status_code == 201
    session.headers["vmware-api-session-id"] = res.json()

    def bound():
        return [s.key for s in si.content.sessionManager.sessionList if s.userAgent.startswith("vAPI-endpoint")]

    before = bound()
    assert before
    assert session.delete(base + "/api/session", timeout=10).status_code == 204
    assert len(bound()) == len(before) - 1
    assert session.get(base + CLUSTERS, timeout=10).status_code == 401
    session.close()


# --- outage -----------------------------------------------------------------------------------

def test_outage_refuses_then_serves_with_state(sim, si):
    kms = obj(si, vim.HostSystem, "esx-02").configManager.kernelModuleSystem
    kms.UpdateModuleOptionString("nvidia", "NVreg_RegistryDwords=RmPVMRL=0x11")
    started = time.monotonic()
    res = sim.outage(1.5)
    assert res["seconds"] == 1.5 and res["sessions"] == "dropped"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((sim.host, sim.port), timeout=2).close()
    with pytest.raises(OSError):
        kms.QueryConfiguredModuleOptionString("nvidia")
    sim.wait_serving(timeout=10)
    assert time.monotonic() - started >= 1.4
    fresh = connect(sim)
    kms2 = obj(fresh, vim.HostSystem, "esx-02").configManager.kernelModuleSystem
    assert kms2.QueryConfiguredModuleOptionString("nvidia") == "NVreg_RegistryDwords=RmPVMRL=0x11"
    kms2.UpdateModuleOptionString("nvidia", "")
    pyVim.Disconnect(fresh)
    # the sessions from before the outage are gone
    with pytest.raises(vim.fault.NotAuthenticated):
        kms.QueryConfiguredModuleOptionString("nvidia")


# --- a host that does not come back ------------------------------------------------------------

def reboot_with_staged_driver(si, sim, name):
    host = obj(si, vim.HostSystem, name)
    wait(host.EnterMaintenanceMode_Task(timeout=0))
    wait(host.configManager.patchManager.InstallHostPatchV2_Task(
        bundleUrls=[BUNDLE], spec=vim.host.PatchManager.PatchManagerOperationSpec()))
    host.configManager.kernelModuleSystem.UpdateModuleOptionString("nvidia", "NVreg_RegistryDwords=RmPVMRL=0x01")
    boot = host.runtime.bootTime
    sim.inject_fault(name, "reboot_hang")
    wait(host.RebootHost_Task(force=False))  # the reboot task itself succeeds
    return host, boot


@pytest.mark.parametrize("release", ["clear_faults", "reconnect"])
def test_reboot_hang(sim, si, release):
    name = {"clear_faults": "esx-03", "reconnect": "esx-04"}[release]
    host, boot = reboot_with_staged_driver(si, sim, name)
    stays(lambda: host.runtime.connectionState == "notResponding", REBOOT_SECONDS * 4)
    state = sim.host_state(name)
    assert state["reboot_hung"] and state["driver_running"] == OLD and state["driver_installed"] == NEW
    with pytest.raises(vim.fault.NoHost) as err:
        wait(host.ReconnectHost_Task())
    assert "Cannot contact the specified host" in err.value.msg
    if release == "clear_faults":
        sim.clear_faults()
    else:
        assert sim.reconnect_host(name)["connection_state"] == "connected"
    until(lambda: host.runtime.connectionState == "connected")
    assert host.runtime.bootTime > boot
    state = sim.host_state(name)
    assert state["driver_running"] == NEW and not state["reboot_hung"] and not state["reboot_required"]
    assert state["nvidia_options_loaded"] == "NVreg_RegistryDwords=RmPVMRL=0x01"
    wait(host.ExitMaintenanceMode_Task(timeout=0))
    with pytest.raises(vsphere_sim.SimulatorError, match="409"):
        sim.reconnect_host(name)


# --- proxy answers ----------------------------------------------------------------------------

def test_rest_fault_503_twice_then_200(sim, rest):
    rule = sim.add_rest_fault(path="^/api/vcenter/namespace-management/clusters$", status=503, method="GET", times=2)
    assert rule["status"] == 503 and rule["times"] == 2
    sim.reset_stats()
    codes = [rest.get(rest.base + CLUSTERS, timeout=10).status_code for attempt in range(3)]
    assert codes == [503, 503, 200]
    assert sim.stats()["rest"]["paths"]["GET " + CLUSTERS] == 3  # faulted requests are counted
    assert sim.rest_faults() == []
    # other methods and paths are not touched
    sim.add_rest_fault(path="clusters$", status=500, method="POST", times=0)
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200
    sim.clear_rest_faults()
    assert sim.rest_faults() == []


def test_rest_slow_answer_and_until_cleared(sim, rest):
    sim.add_rest_fault(path="/namespace-management/", status=0, delay_seconds=0.5, times=1)
    started = time.monotonic()
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200
    assert time.monotonic() - started >= 0.5
    sim.add_rest_fault(path="/namespace-management/", status=502, times=0)
    assert [rest.get(rest.base + CLUSTERS, timeout=10).status_code for attempt in range(3)] == [502] * 3
    sim.clear_rest_faults()
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200
    sim.add_rest_fault(path="/namespace-management/", reset=True)
    with pytest.raises(requests.exceptions.ConnectionError):
        rest.get(rest.base + CLUSTERS, timeout=10)
    assert rest.get(rest.base + CLUSTERS, timeout=10).status_code == 200


def test_soap_reset_then_works(sim, si):
    content = si.RetrieveContent()
    sim.add_soap_fault("RetrievePropertiesEx", reset=True)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        retrieve(si, vim.HostSystem, ["runtime.connectionState"])
    assert len(retrieve(si, vim.HostSystem, ["runtime.connectionState"])) == 6
    assert content.about.apiVersion == "8.0.3.0"


def test_soap_503_and_slow(sim, si):
    host = obj(si, vim.HostSystem, "esx-01")
    sim.add_soap_fault("Fetch", status=503, times=1)
    with pytest.raises(http.client.HTTPException, match="503"):
        host.name  # noqa: B018
    assert host.name == "esx-01"
    sim.add_soap_fault("Fetch", delay_seconds=0.4, times=1)
    started = time.monotonic()
    assert host.name == "esx-01"
    assert time.monotonic() - started >= 0.4
    sim.add_soap_fault("*", status=503, times=0)
    assert sim.soap_faults()[0]["method"] == "*"
    with pytest.raises(http.client.HTTPException):
        host.name  # noqa: B018
    sim.clear_soap_faults()
    assert host.name == "esx-01"


def test_bad_rules_are_refused(sim):
    with pytest.raises(vsphere_sim.SimulatorError, match="400"):
        sim.add_rest_fault(path="(", status=503)
    with pytest.raises(vsphere_sim.SimulatorError, match="400"):
        sim.add_soap_fault("Fetch")  # neither status, reset nor delay
    with pytest.raises(vsphere_sim.SimulatorError, match="400"):
        sim.inject_fault("esx-01", "update_graphics", hang=True)
    with pytest.raises(vsphere_sim.SimulatorError, match="400"):
        sim.inject_fault("esx-01", "power_on")  # a VM op on a host
    with pytest.raises(vsphere_sim.SimulatorError, match="404"):
        sim.inject_fault(None, "power_on", vm="no-such-vm")


# --- tasks that hang, and the new ops' failures -----------------------------------------------

def test_hang_enter_maintenance_until_cleared(sim, si):
    host = obj(si, vim.HostSystem, "esx-05")
    sim.inject_fault("esx-05", "enter_maintenance", hang=True)
    task = host.EnterMaintenanceMode_Task(timeout=0)
    # the host stays readable while its task hangs
    stays(lambda: task.info.state == "running" and not host.runtime.inMaintenanceMode, 0.6)
    assert task.info.entity == host and task.info.descriptionId == "HostSystem.enterMaintenanceMode"
    sim.clear_faults()
    wait(task)
    assert host.runtime.inMaintenanceMode
    sim.inject_fault("esx-05", "exit_maintenance", "hostd is busy")
    with pytest.raises(vim.fault.PlatformConfigFault) as err:
        wait(host.ExitMaintenanceMode_Task(timeout=0))
    assert "hostd is busy" in err.value.msg
    assert host.runtime.inMaintenanceMode
    wait(host.ExitMaintenanceMode_Task(timeout=0))
    assert not host.runtime.inMaintenanceMode


def test_hang_install_and_reboot(sim, si):
    host = obj(si, vim.HostSystem, "esx-05")
    wait(host.EnterMaintenanceMode_Task(timeout=0))
    sim.inject_fault("esx-05", "install", hang=True)
    task = host.configManager.patchManager.InstallHostPatchV2_Task(
        bundleUrls=[BUNDLE], spec=vim.host.PatchManager.PatchManagerOperationSpec())
    stays(lambda: task.info.state == "running" and sim.host_state("esx-05")["driver_installed"] == OLD, 0.5)
    sim.clear_faults()
    wait(task)
    assert sim.host_state("esx-05")["driver_installed"] == NEW and host.summary.rebootRequired
    before = sim.host_state("esx-05")["reboot_count"]
    sim.inject_fault("esx-05", "reboot", hang=True)
    task = host.RebootHost_Task(force=False)
    stays(lambda: task.info.state == "running" and host.runtime.connectionState == "connected", 0.5)
    sim.clear_faults()
    wait(task)
    until(lambda: sim.host_state("esx-05")["reboot_count"] == before + 1)
    until(lambda: host.runtime.connectionState == "connected")
    assert sim.host_state("esx-05")["driver_running"] == NEW
    wait(host.ExitMaintenanceMode_Task(timeout=0))


def test_vm_power_faults(sim, si):
    vm = obj(si, vim.VirtualMachine, "job")
    sim.inject_fault(None, "power_off", hang=True, vm="job")
    task = vm.PowerOffVM_Task()
    stays(lambda: task.info.state == "running" and vm.runtime.powerState == "poweredOn", 0.5)
    sim.clear_faults()
    wait(task)
    assert vm.runtime.powerState == "poweredOff"
    sim.inject_fault(None, "power_on", "insufficient GPU resources", vm="job")
    with pytest.raises(vim.fault.GenericVmConfigFault) as err:
        wait(vm.PowerOnVM_Task())
    assert "insufficient GPU resources" in err.value.msg
    assert vm.runtime.powerState == "poweredOff"
    sim.inject_fault(None, "power_on", hang=True, vm="job")
    task = vm.PowerOnVM_Task()
    stays(lambda: task.info.state == "running", 0.3)
    sim.clear_faults()
    wait(task)
    assert vm.runtime.powerState == "poweredOn"


# --- running vs staged module options ----------------------------------------------------------

def test_nvidia_options_configured_vs_loaded(sim, si):
    host = obj(si, vim.HostSystem, "esx-06")
    kms = host.configManager.kernelModuleSystem
    loaded = sim.host_state("esx-06")["nvidia_options_loaded"]
    kms.UpdateModuleOptionString("nvidia", "NVreg_RegistryDwords=RmPVMRL=0x00")
    state = sim.host_state("esx-06")
    assert state["nvidia_options"] == "NVreg_RegistryDwords=RmPVMRL=0x00"
    assert state["nvidia_options_loaded"] == loaded == ""
    assert kms.QueryConfiguredModuleOptionString("nvidia") == "NVreg_RegistryDwords=RmPVMRL=0x00"
    # KernelModuleInfo.optionString is the configured string, as ESXi documents it
    assert {m.name: m.optionString for m in kms.QueryModules()}["nvidia"] == "NVreg_RegistryDwords=RmPVMRL=0x00"
    wait(host.RebootHost_Task(force=True))
    until(lambda: sim.host_state("esx-06")["connection_state"] == "connected" and sim.host_state("esx-06")["reboot_count"] >= 1)
    assert sim.host_state("esx-06")["nvidia_options_loaded"] == "NVreg_RegistryDwords=RmPVMRL=0x00"


# --- custom attributes -------------------------------------------------------------------------

def test_custom_fields_round_trip(si):
    cfm = si.content.customFieldsManager
    host = obj(si, vim.HostSystem, "esx-01")
    cluster = obj(si, vim.ClusterComputeResource, "gpu")
    vm = obj(si, vim.VirtualMachine, "spare")
    f_host = cfm.AddCustomFieldDef(name="gpupool.reboot_pending", moType=vim.HostSystem)
    f_cluster = cfm.AddCustomFieldDef(name="gpupool.overrides", moType=vim.ClusterComputeResource)
    f_vm = cfm.AddCustomFieldDef(name="gpupool.pinned", moType=vim.VirtualMachine)
    f_any = cfm.AddCustomFieldDef(name="gpupool.owner")  # global: every entity type
    assert f_host.managedObjectType is vim.HostSystem and f_host.type is str
    assert f_any.managedObjectType is None and f_any.type is str
    assert len({f_host.key, f_cluster.key, f_vm.key, f_any.key}) == 4
    with pytest.raises(vim.fault.DuplicateName):
        cfm.AddCustomFieldDef(name="gpupool.reboot_pending", moType=vim.HostSystem)

    cfm.SetField(entity=host, key=f_host.key, value="driver " + NEW)
    cfm.SetField(entity=cluster, key=f_cluster.key, value='["vm-1"]')
    cfm.SetField(entity=vm, key=f_vm.key, value="yes")
    cfm.SetField(entity=vm, key=f_any.key, value="gpupool")
    cfm.SetField(entity=vm, key=f_vm.key, value="no")  # replaces
    with pytest.raises(vmodl.fault.InvalidArgument):
        cfm.SetField(entity=vm, key=f_host.key, value="a host field on a VM")
    with pytest.raises(vmodl.fault.InvalidArgument):
        cfm.SetField(entity=vm, key=99999, value="no such field")

    hosts = retrieve(si, vim.HostSystem, ["customValue", "availableField"])
    assert {v.key: v.value for v in hosts["esx-01"]["customValue"]} == {f_host.key: "driver " + NEW}
    assert {f.name for f in hosts["esx-02"]["availableField"]} >= {"gpupool.reboot_pending", "gpupool.owner"}
    assert "gpupool.pinned" not in {f.name for f in hosts["esx-02"]["availableField"]}
    clusters = retrieve(si, vim.ClusterComputeResource, ["customValue", "availableField"])
    assert {v.key: v.value for v in clusters["gpu"]["customValue"]} == {f_cluster.key: '["vm-1"]'}
    vms = retrieve(si, vim.VirtualMachine, ["customValue", "availableField", "value"])
    assert {v.key: v.value for v in vms["spare"]["customValue"]} == {f_vm.key: "no", f_any.key: "gpupool"}
    assert {v.key: v.value for v in vms["spare"]["value"]} == {f_vm.key: "no", f_any.key: "gpupool"}
    assert {f.name for f in vms["job"]["availableField"]} >= {"gpupool.pinned", "gpupool.owner"}
    assert {f.key for f in cfm.field} >= {f_host.key, f_cluster.key, f_vm.key, f_any.key}

    # a VM created after the definitions lists them too
    esx = obj(si, vim.HostSystem, "esx-02")
    spec = vim.vm.ConfigSpec(name="late", guestId="ubuntu64Guest", memoryMB=512, numCPUs=1,
                             files=vim.vm.FileInfo(vmPathName="[LocalDS_0]"))
    late = wait(esx.parent.parent.parent.vmFolder.CreateVM_Task(config=spec, pool=esx.parent.resourcePool, host=esx))
    assert {f.name for f in late.availableField} >= {"gpupool.pinned", "gpupool.owner"}
    cfm.SetField(entity=late, key=f_vm.key, value="yes")
    assert [(v.key, v.value) for v in late.customValue] == [(f_vm.key, "yes")]
    cfm.RemoveCustomFieldDef(key=f_any.key)
    assert f_any.key not in {v.key for v in vm.customValue}


def test_admin_calls_are_not_counted(sim):
    sim.reset_stats()
    sim.host_state("esx-01")
    sim.rest_faults()
    sim.soap_faults()
    sim.clear_rest_faults()
    sim.clear_soap_faults()
    stats = sim.stats()
    assert stats["soap"]["total"] == 0 and stats["rest"]["total"] == 0
