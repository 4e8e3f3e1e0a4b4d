"""A change is sent once, against the simulator's forward-then-lose proxy rules: the request reaches
vCenter and is carried out, then a gateway answers 504 (or drops the connection) instead of vCenter's
answer. The client does not send it again (counted in /_sim/stats); the module's failure says the change
may or may not have been carried out and what it read again; a rerun finds nothing left to do. And a
vLCM remediation whose REST session an administrator terminates (SessionManager.TerminateSession) is
waited for to its end with one re-login, and applied once."""
import ssl
import threading
import time

import pytest
from pyVim import connect as pyvim_connect

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vlcm_api import VlcmApi, cluster_hosts
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereClient
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereRestClient
from tests.lib.ansible_run import run_module

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
OLD = "550.54.10-1OEM.800.1.0.20613240"
DEPOT = "https://depot.example.com/nvidia/NVD-AIE-800_%s_23912345.zip" % DRIVER
FLEET = {
    "clusters": [{"name": "gpu-h100", "supervisor": True,
                  "hosts": [{"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 2},
                             "driver_version": DRIVER}]},
                 {"name": "img", "lifecycle": "vlcm",
                  "hosts": [{"prefix": "esx-v", "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": OLD}]},
                 {"name": "img-tk", "lifecycle": "vlcm",
                  "hosts": [{"prefix": "esx-t", "count": 2, "gpu": {"model": "L40S", "count": 1}, "driver_version": OLD}]}],
}
CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"
CLASS = {"name": "gpu-once", "cpu_count": 4, "memory_mb": 16384, "vgpu_profiles": ["nvidia_h100-1-10c"],
         "cluster": "gpu-h100"}


def rest_count(sim, key):
    return sim.stats()["rest"]["paths"].get(key, 0)


def soap_count(sim, method):
    return sim.stats()["soap"]["methods"].get(method, 0)


def test_a_vm_class_create_answered_504_after_forwarding_is_sent_once(vsphere, vsphere_env):
    vsphere.reset_stats()
    vsphere.add_rest_fault(CLASSES + "$", status=504, method="POST", forward=True, times=1)
    res, _run = run_module("gpupool.vcf.vm_class", CLASS, env=vsphere_env)
    vsphere.clear_rest_faults()
    assert rest_count(vsphere, "POST " + CLASSES) == 1  # the client retried it five times more before
    assert res.get("failed"), res
    msg = res["msg"]
    assert "may or may not have been carried out" in msg and "HTTP 504" in msg, msg
    assert "read again after it: VM class gpu-once is as wanted, the change was carried out" in msg, msg
    assert res["reread"] == {"carried_out": True, "changes_left": []}, res
    assert "Traceback" not in msg
    again, _run = run_module("gpupool.vcf.vm_class", CLASS, env=vsphere_env)
    assert again.get("failed") is not True and again["changed"] is False, again
    assert rest_count(vsphere, "POST " + CLASSES) == 1


def test_a_vm_class_create_lost_by_a_reset_before_vcenter_is_read_again_as_not_done(vsphere, vsphere_env):
    """A reset without forwarding: the same answer to the client, and the read says what is left."""
    args = dict(CLASS, name="gpu-not-made")
    vsphere.reset_stats()
    vsphere.add_rest_fault(CLASSES + "$", method="POST", reset=True, times=1)
    res, _run = run_module("gpupool.vcf.vm_class", args, env=vsphere_env)
    vsphere.clear_rest_faults()
    assert rest_count(vsphere, "POST " + CLASSES) == 1
    assert res.get("failed") and "may or may not have been carried out" in res["msg"], res
    assert "read again after it: VM class gpu-not-made still needs create" in res["msg"], res["msg"]
    assert res["reread"]["carried_out"] is False
    again, _run = run_module("gpupool.vcf.vm_class", args, env=vsphere_env)
    assert again["changed"] is True and not again.get("failed"), again


def test_a_soap_change_answered_504_after_forwarding_is_sent_once(vsphere, vsphere_env):
    host = "esx-h100-02"
    vsphere.reset_stats()
    vsphere.add_soap_fault("EnterMaintenanceMode_Task", status=504, forward=True, times=1)
    res, _run = run_module("gpupool.vcf.esxi_maintenance_mode", {"host": host, "evacuate_timeout": 60},
                           env=vsphere_env)
    vsphere.clear_soap_faults()
    assert soap_count(vsphere, "EnterMaintenanceMode_Task") == 1  # six before
    assert res.get("failed"), res
    msg = res["msg"]
    assert "EnterMaintenanceMode_Task" in msg and "504" in msg and "may or may not have been carried out" in msg, msg
    assert "read again after it: host %s is as wanted, the change was carried out" % host in msg, msg
    assert vsphere.host_state(host)["maintenance"] is True
    again, _run = run_module("gpupool.vcf.esxi_maintenance_mode", {"host": host}, env=vsphere_env)
    assert again["changed"] is False, again
    assert soap_count(vsphere, "EnterMaintenanceMode_Task") == 1
    back, _run = run_module("gpupool.vcf.esxi_maintenance_mode", {"host": host, "state": "absent"}, env=vsphere_env)
    assert not back.get("failed"), back


def test_forward_needs_an_answer_to_replace_vcenters(vsphere):
    with pytest.raises(RuntimeError, match="400.*forward needs status or reset"):  # the simulator's SimulatorError
        vsphere.add_soap_fault("PowerOnVM_Task", delay_seconds=1, forward=True)


def applies(sim):
    """vLCM remediations sent (POST .../software?action=apply counts under its path)."""
    return sum(n for key, n in sim.stats()["rest"]["paths"].items()
               if key.startswith("POST /api/esx/settings/clusters/") and key.endswith("/software"))


def test_a_vlcm_remediation_answered_504_after_forwarding_is_sent_once_and_hosts_reboot_once(vsphere, vsphere_env):
    hosts = ["esx-v01", "esx-v02"]
    args = dict(cluster="img", version="550.90.05", depot_url=DEPOT, remediate_timeout=300)
    staged, _run = run_module("gpupool.vcf.vlcm_component", args, env=vsphere_env)  # the image, no remediation
    assert not staged.get("failed"), staged
    before = {h: vsphere.host_state(h)["reboot_count"] for h in hosts}
    vsphere.reset_stats()
    vsphere.add_rest_fault(r"/software\?action=apply", status=504, method="POST", forward=True, times=1)
    res, _run = run_module("gpupool.vcf.vlcm_component", dict(args, remediate=True), env=vsphere_env)
    vsphere.clear_rest_faults()
    assert applies(vsphere) == 1, vsphere.stats()["rest"]["paths"]  # a second apply would reboot the hosts again
    assert res.get("failed") and "may or may not have been carried out" in res["msg"], res
    assert "read again after it:" in res["msg"] and "reread" in res, res
    # the remediation vCenter got goes on: each host is rebooted once, to the new driver
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and any(vsphere.host_state(h)["driver_running"] != DRIVER or
                                              vsphere.host_state(h)["maintenance"] for h in hosts):
        time.sleep(1)
    after = {h: vsphere.host_state(h) for h in hosts}
    assert all(s["driver_running"] == DRIVER and not s["maintenance"] for s in after.values()), after
    again, _run = run_module("gpupool.vcf.vlcm_component", dict(args, remediate=True), env=vsphere_env)
    assert not again.get("failed") and again["changed"] is False and again["remediated"] is False, again
    assert applies(vsphere) == 1
    assert {h: vsphere.host_state(h)["reboot_count"] - before[h] for h in hosts} == {"esx-v01": 1, "esx-v02": 1}


def test_module_options_answered_504_after_forwarding_are_written_once(vsphere, vsphere_env):
    host = "esx-h100-01"
    args = {"host": host, "scheduler": {"policy": "equal_share"}}
    vsphere.reset_stats()
    vsphere.add_soap_fault("UpdateModuleOptionString", status=504, forward=True, times=1)
    res, _run = run_module("gpupool.vcf.esxi_gpu_config", args, env=vsphere_env)
    vsphere.clear_soap_faults()
    assert soap_count(vsphere, "UpdateModuleOptionString") == 1  # six before
    assert res.get("failed") and host in res["msg"] and "may or may not have been carried out" in res["msg"], res
    assert "read again after it: host %s is as wanted, the change was carried out" % host in res["msg"], res["msg"]
    assert res["reread"]["carried_out"] is True
    assert "RmPVMRL" in vsphere.host_state(host)["nvidia_options"]
    again, _run = run_module("gpupool.vcf.esxi_gpu_config", args, env=vsphere_env)
    assert not again.get("failed") and again["changed"] is False, again
    assert soap_count(vsphere, "UpdateModuleOptionString") == 1


def test_a_vlcm_remediation_wait_survives_terminate_session_with_one_relogin(vsphere, vsphere_env):
    hosts = ["esx-t01", "esx-t02"]
    staged, _run = run_module("gpupool.vcf.vlcm_component", dict(cluster="img-tk", version="550.90.05", depot_url=DEPOT),
                              env=vsphere_env)  # the image, no remediation
    assert not staged.get("failed"), staged
    before = {h: vsphere.host_state(h)["reboot_count"] for h in hosts}
    login = dict(hostname=vsphere.host, username=vsphere.user, password=vsphere.password, port=vsphere.port,
                 ca_file=vsphere.ca_file, retry_delay=0.01, max_retry_delay=0.05)
    with VsphereClient(**login) as soap, VsphereRestClient(**login) as rest:
        moid, _names, _clusters = cluster_hosts(soap, "img-tk")
        api = VlcmApi(rest, moid, timeout=300)
        vsphere.reset_stats()
        out = {}
        thread = threading.Thread(target=lambda: out.setdefault("error", _raised(api.remediate)))
        thread.start()
        deadline = time.monotonic() + 30
        while applies(vsphere) == 0:
            assert time.monotonic() < deadline, "the remediation was not sent"
            time.sleep(0.05)
        # an administrator terminates the REST client's session (its vpxd session) while the task runs
        admin = pyvim_connect.SmartConnect(host=vsphere.host, port=vsphere.port, user=vsphere.user, pwd=vsphere.password,
                                           sslContext=ssl.create_default_context(cafile=vsphere.ca_file))
        try:
            manager = admin.content.sessionManager
            rest_sessions = [s.key for s in manager.sessionList if s.userAgent.startswith("vAPI-endpoint")]
            assert rest_sessions
            manager.TerminateSession(sessionId=rest_sessions)
        finally:
            pyvim_connect.Disconnect(admin)
        thread.join(300)
        assert out["error"] is None, out["error"]
        assert rest.relogins == 1 and rest_count(vsphere, "POST /api/session") == 1  # one re-login, not five
    assert applies(vsphere) == 1  # waited for, not applied again
    after = {h: vsphere.host_state(h) for h in hosts}
    assert all(s["driver_running"] == DRIVER and not s["maintenance"] for s in after.values()), after
    assert {h: after[h]["reboot_count"] - before[h] for h in hosts} == {"esx-t01": 1, "esx-t02": 1}


def _raised(func):
    try:
        func()
    except Exception as exc:  # the test asserts on it
        return exc
    return None
