"""The vGPU mode per GPU (graphics.vgpu_mode) against the vSphere simulator, on a fleet of its own: two hosts of
two L40S each, one powered-on vGPU VM on esx-l40s-02. esxi_gpu_config sets mixed size (check mode predicts it,
--diff shows it, a rerun changes nothing), a GPU carrying a powered-on vGPU VM keeps its mode and the run says
so, and a GPU flipped back to same size behind the collection's back is named by gpu_pool_audit
(gpu_vgpu_mode_off_design) and repaired by the module.

That simulator presents API 8.0.3: the mode goes through UpdateGraphicsConfig and direct-path-devices is not
served. A second one presents API 9.1 (the gpu-l40s cluster only, its REST exchanges logged): there the mode
goes through direct-path-devices, check mode predicts the impacts the real run reports, each GPU gets one
configure task, a rerun is unchanged, the mode reads back over SOAP, a busy GPU is refused before any request
that changes it, and every recorded exchange fits VMware's 9.1 bindings (tests/lib/rest_contract.py)."""
import json
import sys

import pytest
import yaml

from tests.lib import rest_contract
from tests.lib.ansible_run import COLLECTIONS, run_module, run_playbook
from tests.lib.design_edit import cluster, example

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [{
        "name": "gpu-l40s",
        "supervisor": True,
        "hosts": [{"prefix": "esx-l40s-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": DRIVER,
                   "graphics": {"default": "sharedDirect", "policy": "consolidation"}}],
    }, {
        # for the esxi_gpu_host role: no vGPU VM, so its turn may change the mode
        "name": "roll-l40s",
        "hosts": [{"prefix": "esx-m", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": DRIVER,
                   "graphics": {"default": "sharedDirect", "policy": "consolidation"}}],
    }],
    "vms": [{"name": "notebook-0", "host": "esx-l40s-02", "vgpu": ["nvidia_l40s-8c"]}],
}
MODULE = "gpupool.vcf.esxi_gpu_config"


def modes(vsphere, host):
    return [(g["vgpu_mode"], g["vgpu_mode_configured"]) for g in sorted(vsphere.gpus(host), key=lambda g: g["index"])]


def pcis(vsphere, host):
    return [g["pci_id"] for g in sorted(vsphere.gpus(host), key=lambda g: g["index"])]


def test_the_fleet_starts_same_size_with_a_vm_on_host_02(vsphere):
    assert modes(vsphere, "esx-l40s-01") == [("sameSize", "sameSize")] * 2
    assert modes(vsphere, "esx-l40s-02") == [("sameSize", "sameSize")] * 2
    assert [len(g["vms"]) for g in vsphere.gpus("esx-l40s-02")].count(1) == 1


def test_check_mode_predicts_mixed_size_and_changes_nothing(vsphere, vsphere_env):
    res = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env, check=True,
                     diff=True)[0]
    assert res["changed"] and not res.get("failed"), res
    a, b = pcis(vsphere, "esx-l40s-01")
    report = res["hosts"]["esx-l40s-01"]
    assert report["graphics"]["vgpu_modes"] == {a: "mixed_size", b: "mixed_size"}, report
    assert report["changes"] == ["GPU %s vGPU mode same_size -> mixed_size" % a,
                                 "GPU %s vGPU mode same_size -> mixed_size" % b], report
    diff = res["diff"]
    assert diff["before"]["esx-l40s-01"]["graphics"]["vgpu_modes"] == {a: "same_size", b: "same_size"}, diff
    assert diff["after"]["esx-l40s-01"]["graphics"]["vgpu_modes"] == {a: "mixed_size", b: "mixed_size"}, diff
    assert modes(vsphere, "esx-l40s-01") == [("sameSize", "sameSize")] * 2


def test_mixed_size_is_set_and_a_rerun_is_unchanged(vsphere, vsphere_env):
    vsphere.reset_stats()
    res = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env)[0]
    assert res["changed"] and not res.get("failed"), res
    assert modes(vsphere, "esx-l40s-01") == [("mixedSize", "mixedSize")] * 2
    # API 8.0.3: through UpdateGraphicsConfig, no direct-path-devices request, no impacts
    stats = vsphere.stats()
    assert stats["soap"]["methods"].get("UpdateGraphicsConfig") == 1, stats
    assert not [p for p in stats["rest"]["paths"] if "direct-path-devices" in p], stats
    assert res["hosts"]["esx-l40s-01"]["impacts"] is None, res
    # the other graphics settings stay as they were
    assert res["hosts"]["esx-l40s-01"]["graphics"]["assignment_policy"] == "consolidation", res
    again = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env)[0]
    assert not again["changed"] and not again.get("failed"), again
    assert again["hosts"]["esx-l40s-01"]["changes"] == []
    check = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env, check=True)[0]
    assert not check["changed"], check


def test_a_gpu_under_a_powered_on_vgpu_vm_keeps_its_mode_and_the_run_says_so(vsphere, vsphere_env):
    busy = [g["pci_id"] for g in vsphere.gpus("esx-l40s-02") if g["vms"]][0]
    for check in (True, False):  # check mode predicts the refusal
        res = run_module(MODULE, dict(host="esx-l40s-02", vgpu_mode="mixed_size"), env=vsphere_env, check=check)[0]
        assert res.get("failed"), res
        msg = res["msg"]
        assert "host esx-l40s-02 keeps the vGPU mode of its GPUs that carry powered-on vGPU VMs" in msg, msg
        assert "GPU %s (VMs notebook-0; left same_size, asked mixed_size)" % busy in msg, msg
        assert "Power off the host's vGPU VMs" in msg and "maintenance mode" in msg, msg
        assert "Nothing was changed" in msg, msg
        assert modes(vsphere, "esx-l40s-02") == [("sameSize", "sameSize")] * 2


def test_a_cluster_run_stops_before_the_first_host(vsphere, vsphere_env):
    vsphere.set_gpu("esx-l40s-01", 0, vgpu_mode="sameSize")
    try:
        res = run_module(MODULE, dict(cluster="gpu-l40s", vgpu_mode="mixed_size"), env=vsphere_env)[0]
        assert res.get("failed") and "host esx-l40s-02 keeps the vGPU mode" in res["msg"], res
        assert "host host esx-l40s-02" not in res["msg"], res["msg"]
        assert modes(vsphere, "esx-l40s-01")[0] == ("sameSize", "sameSize")  # every check before the first change
    finally:
        vsphere.set_gpu("esx-l40s-01", 0, vgpu_mode="mixedSize")


def test_a_refusal_of_the_host_itself_says_what_was_left(vsphere, vsphere_env):
    # the host refuses the call (as when a VM was powered on between the read and the write)
    vsphere.set_gpu("esx-l40s-01", 1, vgpu_mode="sameSize")
    vsphere.inject_fault("esx-l40s-01", "update_graphics", "a VM was powered on on the GPU")
    try:
        res = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env)[0]
    finally:
        vsphere.clear_faults()
        vsphere.set_gpu("esx-l40s-01", 1, vgpu_mode="mixedSize")
    assert res.get("failed"), res
    b = pcis(vsphere, "esx-l40s-01")[1]
    msg = res["msg"]
    assert "Unable to set the vGPU mode of the GPUs of host esx-l40s-01" in msg, msg
    assert "%s (left same_size, asked mixed_size)" % b in msg and "power off the host's vGPU VMs" in msg, msg
    assert res["hosts_changed"] == [] and "esx-l40s-01" in res["next_step"], res


def audit(env, design_file):
    res = run_module("gpupool.vcf.gpu_pool_audit", {"design_file": design_file, "links": ["esxi"]},
                     env=dict(env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))[0]
    assert not res.get("failed"), res.get("msg")
    return dict((f["object"], f) for f in res["findings"] if f["rule"] == "gpu_vgpu_mode_off_design")


def test_a_gpu_flipped_back_is_named_by_the_audit_and_repaired(vsphere, vsphere_env, tmp_path):
    design = example()
    cluster(design, "gpu-l40s")["graphics"]["vgpu_mode"] = "mixed_size"
    design_file = tmp_path / "design.yml"
    design_file.write_text(yaml.safe_dump(design))
    found = audit(vsphere_env, str(design_file))
    # host 01 is at the design; host 02 still runs same size (its VM kept the change out)
    assert sorted(found) == ["host esx-l40s-02"], found
    vsphere.set_gpu("esx-l40s-01", 1, vgpu_mode="sameSize")
    found = audit(vsphere_env, str(design_file))
    assert sorted(found) == ["host esx-l40s-01", "host esx-l40s-02"], found
    a, b = pcis(vsphere, "esx-l40s-01")
    text = found["host esx-l40s-01"]["message"]
    assert b in text and a not in text and "mixed_size" in text, text
    assert found["host esx-l40s-01"]["severity"] == "error" and "vgpu_mode=mixed_size" in found["host esx-l40s-01"]["fix"]
    res = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env)[0]
    assert res["changed"] and res["hosts"]["esx-l40s-01"]["changes"] == [
        "GPU %s vGPU mode same_size -> mixed_size" % b], res
    assert sorted(audit(vsphere_env, str(design_file))) == ["host esx-l40s-02"]
    # not managed by the design: not judged
    cluster(design, "gpu-l40s")["graphics"].pop("vgpu_mode")
    design_file.write_text(yaml.safe_dump(design))
    assert audit(vsphere_env, str(design_file)) == {}


def role_play(**extra):
    role_vars = dict(esxi_gpu_host_cluster="roll-l40s", esxi_gpu_host_driver_version="550.90.05",
                     esxi_gpu_host_reboot_timeout=60)
    role_vars.update(extra)
    return [{"name": "esxi_gpu_host", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": role_vars}]}]


def changed_tasks(res):
    return [name.split(" : ", 1)[-1] for name, r in res.tasks if r.get("changed")]


def test_the_role_rolls_the_mode_host_by_host_then_is_unchanged(vsphere, vsphere_env):
    vsphere.set_gpu("esx-m02", 1, vgpu_mode="mixedSize")  # one GPU already at the mode
    check = run_playbook(role_play(esxi_gpu_host_vgpu_mode="mixed_size"), env=vsphere_env, check=True)
    assert check.rc == 0, [(n, r.get("msg")) for n, r in check.tasks if r.get("failed")]
    predicted = changed_tasks(check)
    assert modes(vsphere, "esx-m01") == [("sameSize", "sameSize")] * 2
    real = run_playbook(role_play(esxi_gpu_host_vgpu_mode="mixed_size"), env=vsphere_env)
    assert real.rc == 0, [(n, r.get("msg")) for n, r in real.tasks if r.get("failed")]
    assert changed_tasks(real) == predicted
    assert [t for t in predicted if t.startswith("Graphics and scheduler")] == [
        "Graphics and scheduler before the driver (its reboot loads the options) on esx-m01",
        "Graphics and scheduler before the driver (its reboot loads the options) on esx-m02"], predicted
    assert modes(vsphere, "esx-m01") == modes(vsphere, "esx-m02") == [("mixedSize", "mixedSize")] * 2
    again = run_playbook(role_play(esxi_gpu_host_vgpu_mode="mixed_size"), env=vsphere_env)
    assert again.rc == 0 and changed_tasks(again) == []
    # not managed: left as it is
    vsphere.set_gpu("esx-m01", 0, vgpu_mode="sameSize")
    left = run_playbook(role_play(), env=vsphere_env)
    assert left.rc == 0 and changed_tasks(left) == []
    assert modes(vsphere, "esx-m01")[0] == ("sameSize", "sameSize")


# -- API 9.1: direct-path-devices --------------------------------------------------------------------------

FLEET_91 = {"clusters": [FLEET["clusters"][0]], "vms": FLEET["vms"]}
DIRECT_PATH = "/hardware/direct-path-devices"


@pytest.fixture(scope="module")
def sim91(tmp_path_factory):
    """A simulator at API 9.1 whose REST exchanges are logged; yields (sim, its env, log path)."""
    import vsphere_sim

    log = tmp_path_factory.mktemp("rest-91") / "rest.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VSPHERESIM_REST_LOG", str(log))
        sim = vsphere_sim.start(FLEET_91, api_version="9.1")
    try:
        yield sim, dict(sim.env), log
    finally:
        sim.stop()


def exchanges(log):
    """The logged direct-path-devices calls and task reads."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e for e in lines if DIRECT_PATH in e["path"] or e["path"].startswith("/api/cis/tasks/")]


def configures(log):
    return [e for e in exchanges(log) if e["method"] == "POST"]


def soap_modes(env, host):
    """{pci: vgpu_mode} as gpu_host_info reads it over SOAP (graphicsInfo)."""
    res = run_module("gpupool.vcf.gpu_host_info", {"hosts": [host]}, env=env)[0]
    assert not res.get("failed"), res
    return dict((g["pci_id"], g["vgpu_mode"]) for g in res["hosts"][0]["gpus"])


def test_api_9_1_rest_path_check_mode_predicts_the_real_run_then_unchanged(sim91):
    sim, env, log = sim91
    a, b = pcis(sim, "esx-l40s-01")
    check = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=env, check=True)[0]
    assert check["changed"] and not check.get("failed"), check
    assert check["hosts"]["esx-l40s-01"]["impacts"] == {a: ["NONE"], b: ["NONE"]}, check
    assert configures(log) == [] and modes(sim, "esx-l40s-01") == [("sameSize", "sameSize")] * 2
    real = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=env)[0]
    assert real["changed"] and not real.get("failed"), real
    assert real["hosts"] == check["hosts"], (real, check)
    sent = configures(log)
    assert sorted((e["request_body"]["device"], e["request_body"]["new_mode"]) for e in sent) == [
        (a, "VGPU_MIXED_SIZE"), (b, "VGPU_MIXED_SIZE")], sent
    assert all(e["query"] == "action=configure&vmw-task=true" for e in sent), sent
    # one record for both APIs: set over REST, read back over SOAP
    assert modes(sim, "esx-l40s-01") == [("mixedSize", "mixedSize")] * 2
    assert soap_modes(env, "esx-l40s-01") == {a: "mixedSize", b: "mixedSize"}
    again = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=env)[0]
    assert not again["changed"] and again["hosts"]["esx-l40s-01"]["impacts"] == {}, again
    assert len(configures(log)) == 2


def test_api_9_1_a_busy_gpu_is_refused_before_any_configure(sim91):
    sim, env, log = sim91
    before = len(configures(log))
    busy = [g["pci_id"] for g in sim.gpus("esx-l40s-02") if g["vms"]][0]
    res = run_module(MODULE, dict(host="esx-l40s-02", vgpu_mode="mixed_size"), env=env)[0]
    assert res.get("failed") and "GPU %s (VMs notebook-0; left same_size, asked mixed_size)" % busy in res["msg"], res
    assert "Nothing was changed" in res["msg"], res
    assert len(configures(log)) == before and modes(sim, "esx-l40s-02") == [("sameSize", "sameSize")] * 2


def test_api_9_1_the_simulator_refuses_what_vcenter_refuses(sim91):
    sim, _env, _log = sim91
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import (
        VsphereRestClient, VsphereRestError, VsphereTaskError)

    moid = sim.host_state("esx-l40s-02")["moid"]
    busy = [g["pci_id"] for g in sim.gpus("esx-l40s-02") if g["vms"]][0]
    path = "/api/vcenter/host/%s%s" % (moid, DIRECT_PATH)
    task = dict(action="configure", **{"vmw-task": "true"})
    with VsphereRestClient(sim.host, sim.user, sim.password, port=sim.port, ca_file=sim.ca_file) as rest:
        for mode in ("DIRECTPATH", "NOT_A_MODE"):  # not configurable; not a DirectPathDeviceMode
            with pytest.raises(VsphereRestError, match="INVALID_ARGUMENT"):
                rest.post(path, body={"device": busy, "new_mode": mode}, params=task)
        tid = rest.post(path, body={"device": busy, "new_mode": "VGPU_MIXED_SIZE"}, params=task)
        with pytest.raises(VsphereTaskError, match="while powered-on VMs use it: notebook-0"):
            rest.wait_for_task(tid, timeout=10)
    assert modes(sim, "esx-l40s-02") == [("sameSize", "sameSize")] * 2


def test_api_9_1_every_recorded_exchange_fits_the_bindings(sim91):
    _sim, _env, log = sim91
    import com.vmware.cis_client as cis
    import com.vmware.vcenter.host.hardware_client as hardware

    recorded = exchanges(log)
    assert [e for e in recorded if e["method"] == "GET" and DIRECT_PATH in e["path"]], recorded
    assert len(configures(log)) >= 5  # the module's two, the refusals' three
    contract = rest_contract.load([hardware, cis])
    # the one request sent outside the contract on purpose (a mode the enumeration lacks): only its body differs
    wrong = [e for e in recorded if (e.get("request_body") or {}).get("new_mode") == "NOT_A_MODE"]
    assert len(wrong) == 1 and [m.where for m in contract.check(wrong[0])] == ["request body $.new_mode"]
    mismatches, skipped = contract.check_all([e for e in recorded if e not in wrong])
    assert mismatches == [] and skipped == [], mismatches


def test_before_9_1_direct_path_devices_is_not_served(vsphere):
    if str(COLLECTIONS) not in sys.path:
        sys.path.insert(0, str(COLLECTIONS))
    from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere_rest import VsphereNotFound, VsphereRestClient

    moid = vsphere.host_state("esx-l40s-01")["moid"]
    with VsphereRestClient(vsphere.host, vsphere.user, vsphere.password, port=vsphere.port, ca_file=vsphere.ca_file) as rest:
        with pytest.raises(VsphereNotFound):
            rest.get("/api/vcenter/host/%s%s" % (moid, DIRECT_PATH))
