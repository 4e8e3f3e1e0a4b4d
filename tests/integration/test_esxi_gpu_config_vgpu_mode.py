"""The vGPU mode per GPU (graphics.vgpu_mode) against the vSphere simulator, on a fleet of its own: two hosts of
two L40S each, one powered-on vGPU VM on esx-l40s-02. esxi_gpu_config sets mixed size (check mode predicts it,
--diff shows it, a rerun changes nothing), a GPU carrying a powered-on vGPU VM keeps its mode and the run says
so, and a GPU flipped back to same size behind the collection's back is named by gpu_pool_audit
(gpu_vgpu_mode_off_design) and repaired by the module."""
import yaml

from tests.lib.ansible_run import run_module, run_playbook
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
    res = run_module(MODULE, dict(host="esx-l40s-01", vgpu_mode="mixed_size"), env=vsphere_env)[0]
    assert res["changed"] and not res.get("failed"), res
    assert modes(vsphere, "esx-l40s-01") == [("mixedSize", "mixedSize")] * 2
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
