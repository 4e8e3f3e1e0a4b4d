"""The SOAP client's fault boundary against the simulator: re-login, errors that name the call, and
the waiters surviving a session ended through vCenter's own SessionManager.TerminateSession."""
import ssl
import threading
import time

import pytest
from pyVim import connect as pyvim_connect

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nls_appliance import parse_ovf
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._esxi_host import HostOps
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._nls_appliance_api import ApplianceSite, OvfPackage
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereClient,
    VsphereConnectionError,
    VsphereFault,
    VsphereSessionLost,
    service_api_version,
    vim,
    vmodl,
)

FLEET = {"clusters": [{"name": "gpu-a", "hosts": [
    {"name": "esx-a-01", "gpu": {"model": "L40S", "count": 1}, "driver_version": "550.90.05-1OEM.800.1.0.20613240"}]},
    {"name": "gpu-b", "hosts": [
        {"prefix": "esx-b-", "count": 6, "gpu": {"model": "L40S", "count": 1}, "driver_version": "550.90.05-1OEM.800.1.0.20613240"}]}]}


def connect(sim, **over):
    args = dict(hostname=sim.host, username=sim.user, password=sim.password, port=sim.port,
                ca_file=sim.ca_file, retry_delay=0.01, max_retry_delay=0.05)
    args.update(over)
    return VsphereClient(**args)


def host_names(client):
    return sorted(h["name"] for h in client.retrieve({vim.HostSystem: ["name"]}) if h["name"].startswith("esx-a"))


def test_objects_read_before_a_relogin_keep_working(vsphere):
    with connect(vsphere) as client:
        host = client.retrieve({vim.HostSystem: ["name", "configManager.kernelModuleSystem"]})[0]
        client.content.sessionManager.Logout()  # the session ends behind the client's back
        assert host_names(client) == ["esx-a-01"]
        assert client.relogins == 1
        client.content.sessionManager.Logout()
        # a method on an object read in the first session, called through the boundary
        assert host["configManager.kernelModuleSystem"].QueryConfiguredModuleOptionString("nvidia") == ""
        assert client.relogins == 2


def test_no_relogin_without_retries(vsphere):
    with connect(vsphere, retries=0) as client:
        client.content.sessionManager.Logout()
        with pytest.raises(VsphereConnectionError, match="NotAuthenticated.*after 0 re-logins"):
            host_names(client)


def test_a_fault_names_the_operation_and_the_object(vsphere):
    with connect(vsphere) as client:
        host = client.retrieve({vim.HostSystem: ["name", "configManager.graphicsManager"]})[0]
        manager = host["configManager.graphicsManager"]
        bad = vim.host.GraphicsConfig(hostDefaultGraphicsType="sharedDirect", sharedPassthruAssignmentPolicy="performance",
                                      deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId="0000:99:00.0",
                                                                                     graphicsType="sharedDirect")])
        with pytest.raises(VsphereFault) as err:
            manager.UpdateGraphicsConfig(bad)
        assert "UpdateGraphicsConfig on HostGraphicsManager %s" % manager._moId in str(err.value)
        assert err.value.is_a(vmodl.fault.InvalidArgument)


def test_unreachable_vcenter_is_one_clear_error(vsphere):
    with pytest.raises(VsphereConnectionError, match=r"cannot reach https://127\.0\.0\.1:1: .*\(3 attempts\)"):
        connect(vsphere, port=1, retries=2)


def test_the_api_version_is_read_without_a_session(vsphere):
    vsphere.reset_stats()
    version = service_api_version(vsphere.host, port=vsphere.port, ca_file=vsphere.ca_file)
    assert version == "8.0.3.0"
    methods = dict((m, n) for m, n in vsphere.stats()["soap"]["methods"].items() if n)
    assert methods == {"RetrieveServiceContent": 1}, methods


def test_the_api_version_read_checks_the_certificate_and_says_when_vcenter_is_unreachable(vsphere):
    # the simulator's certificate is signed by a CA of its own: not trusted without ca_file
    with pytest.raises(VsphereConnectionError, match="TLS certificate of https://127.0.0.1:%d not trusted" % vsphere.port):
        service_api_version(vsphere.host, port=vsphere.port)
    with pytest.raises(VsphereConnectionError, match=r"cannot reach https://127\.0\.0\.1:1: .*\(2 attempts\)"):
        service_api_version(vsphere.host, port=1, retries=1)


def test_concurrent_calls_log_in_again_once(vsphere):
    """Per-host calls run in threads: a killed session is replaced once, not once per thread."""
    from concurrent.futures import ThreadPoolExecutor

    with connect(vsphere) as client:
        hosts = [h for h in client.retrieve({vim.HostSystem: ["name", "configManager.kernelModuleSystem"]})
                 if h["name"].startswith("esx-b-")]
        assert len(hosts) == 6
        vsphere.kill_sessions()
        with ThreadPoolExecutor(max_workers=6) as pool:
            options = list(pool.map(
                lambda h: h["configManager.kernelModuleSystem"].QueryConfiguredModuleOptionString("nvidia"), hosts))
        assert options == [""] * 6
        assert client.relogins == 1


# --- a session terminated by an administrator during a wait -------------------------------------

def terminate(sim, keys):
    """SessionManager.TerminateSession of `keys`, called by a second pyvmomi session as administrator."""
    admin = pyvim_connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                                       sslContext=ssl.create_default_context(cafile=sim.ca_file))
    try:
        admin.content.sessionManager.TerminateSession(sessionId=list(keys))
    finally:
        pyvim_connect.Disconnect(admin)


def logins(sim):
    return sim.stats()["soap"]["methods"].get("Login", 0)


def in_background(func):
    out = {}

    def run():
        try:
            out["value"] = func()
        except Exception as exc:  # the test asserts on it
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def until(cond, timeout=20, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for %s" % what
        time.sleep(0.05)


def test_a_task_wait_survives_terminate_session_with_one_relogin(vsphere):
    with connect(vsphere) as client:
        host = [h for h in client.retrieve({vim.HostSystem: ["name"]}) if h["name"] == "esx-b-05"][0]
        vsphere.inject_fault("esx-b-05", "enter_maintenance", hang=True)
        task = host.obj.EnterMaintenanceMode_Task(timeout=0)
        key = client.content.sessionManager.currentSession.key
        thread, out = in_background(lambda: client.wait_for_task(task, timeout=60, what="enter maintenance mode"))
        before = logins(vsphere)
        terminate(vsphere, [key])  # the admin's own login is one Login
        until(lambda: client.relogins == 1, what="the re-login")
        assert thread.is_alive()  # still waiting for the task, in the new session
        vsphere.clear_faults()
        thread.join(60)
        assert "error" not in out, out
        assert client.relogins == 1 and logins(vsphere) - before == 2
        assert vsphere.host_state("esx-b-05")["maintenance"] is True
        HostOps(client).exit_maintenance(HostOps(client).find_host("esx-b-05"), timeout=60)


def test_the_reboot_wait_survives_terminate_session_with_one_relogin(vsphere):
    """The host is down (its reboot hangs) when the session is terminated: the poll of its runtime
    state logs in again and goes on waiting, and returns once the host is back."""
    with connect(vsphere) as client:
        ops = HostOps(client)
        host = ops.find_host("esx-b-06")
        ops.enter_maintenance(host, timeout=60)
        vsphere.inject_fault("esx-b-06", "reboot_hang")
        key = client.content.sessionManager.currentSession.key
        thread, out = in_background(lambda: ops.reboot_and_wait(ops.refresh(host), 120))
        until(lambda: vsphere.host_state("esx-b-06")["connection_state"] != "connected", what="the host to go down")
        before = logins(vsphere)
        terminate(vsphere, [key])
        until(lambda: client.relogins == 1, what="the re-login")
        time.sleep(0.5)
        assert thread.is_alive()  # the host is still away: the wait goes on
        vsphere.clear_faults()
        thread.join(120)
        assert "error" not in out, out
        assert str(out["value"]["runtime.connectionState"]) == "connected"
        assert client.relogins == 1 and logins(vsphere) - before == 2
        ops.exit_maintenance(ops.refresh(host), timeout=60)


def test_a_session_lost_twice_in_a_row_ends_the_wait_at_once(vsphere):
    """Every login's session terminated at once (an aggressive idle policy): the wait does not run to its
    timeout taking the fault for a task not done yet; it says what it waited for and that a rerun resumes."""
    with connect(vsphere) as client:
        host = [h for h in client.retrieve({vim.HostSystem: ["name"]}) if h["name"] == "esx-b-04"][0]
        vsphere.inject_fault("esx-b-04", "enter_maintenance", hang=True)
        task = host.obj.EnterMaintenanceMode_Task(timeout=0)
        real = client._relogin

        def relogin_then_terminated():
            real()
            terminate(vsphere, [client.content.sessionManager.currentSession.key])

        client._relogin = relogin_then_terminated
        terminate(vsphere, [client.content.sessionManager.currentSession.key])
        started = time.monotonic()
        with pytest.raises(VsphereSessionLost) as err:
            client.wait_for_task(task, timeout=300, what="enter maintenance mode")
        assert time.monotonic() - started < 30
        text = str(err.value)
        assert "lost twice in a row while waiting for enter maintenance mode" in text and "rerun" in text, text
        assert client.relogins == 1
        vsphere.clear_faults()
    with connect(vsphere) as again:
        HostOps(again).exit_maintenance(HostOps(again).find_host("esx-b-04"), timeout=60)


def test_the_ovf_import_lease_wait_survives_terminate_session_with_one_relogin(vsphere, tmp_path):
    """The session is terminated between ImportVApp and the first read of the lease's state. A lease
    belongs to its session, so it ends with it: the lease wait logs in again once, finds the lease gone,
    removes the half-imported VM and imports once more; the import (disk upload, HttpNfcLeaseComplete)
    finishes with one VM of that name."""
    import appliance_ova

    package = OvfPackage(str(appliance_ova.build(tmp_path)))
    with connect(vsphere) as client:
        site = ApplianceSite(client, "gpu-a", "LocalDS_0", "VM Network",
                             ssl_context=ssl.create_default_context(cafile=vsphere.ca_file))
        site.read(["dls-lease"])
        key = client.content.sessionManager.currentSession.key
        real, seen = client._invoke, []

        def invoke(mo, info, args, outer):  # the boundary, with the administrator's call at the moment wanted
            if not seen and info.wsdlName == "Fetch" and getattr(type(mo), "_wsdlName", "") == "HttpNfcLease":
                seen.append(args[0] if args else None)
                terminate(vsphere, [key])
            return real(mo, info, args, outer)

        client._invoke = invoke
        before = vsphere.stats()["soap"]["methods"]
        moid = site.deploy(package, "dls-lease", {"appliance.ip0": "10.0.10.41", "appliance.hostname": "dls-lease"},
                           "primary", networks=parse_ovf(package.descriptor)["networks"], power_on=False)
        after = vsphere.stats()["soap"]["methods"]
        assert seen and client.relogins == 1
        assert after.get("ImportVApp", 0) - before.get("ImportVApp", 0) == 2
        assert after.get("HttpNfcLeaseComplete", 0) - before.get("HttpNfcLeaseComplete", 0) == 1
        named = [vm.moid for vm in client.retrieve({vim.VirtualMachine: ["name"]}) if vm["name"] == "dls-lease"]
        assert named == [moid] and site.uploaded > 0
        site.remove("dls-lease")
