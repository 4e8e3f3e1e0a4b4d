"""The SOAP client's fault boundary against the simulator: re-login, errors that name the call."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereClient,
    VsphereConnectionError,
    VsphereFault,
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
