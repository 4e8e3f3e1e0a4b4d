"""drs_gpu_pinning removes only the overrides it set (vSphere simulator, through ansible-playbook).

What the module sets is recorded in the cluster's custom attribute gpupool.vcf.drs-pinned; an
override an administrator set by hand, on a VM with or without a vGPU, survives purge in the
module, the role and site.yml.
"""
import json
import pathlib
import ssl
import subprocess

import pytest
from pyVim import connect
from pyVim.task import WaitForTask
from pyVmomi import vim

from tests.lib.ansible_run import VENV_BIN, PlaybookResult, ansible_env, run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]

FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True,
         # esx-h100-01 runs the MIG-backed infer VMs (every card in MIG mode), esx-h100-02 full cards
         "hosts": [{"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 4},
                    "driver_version": "550.90.05-1OEM.800.1.0.20613240", "mig": "all"},
                   {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 4},
                    "driver_version": "550.90.05-1OEM.800.1.0.20613240"}]},
    ],
    "vms": [
        {"name": "infer", "host": "esx-h100-01", "vgpu": ["nvidia_h100-1-10c"], "count": 3},
        {"name": "train-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"]},
        {"name": "admin-gpu", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"]},
        {"name": "plain-01", "host": "esx-h100-01"},
    ],
}
M = "gpupool.vcf.drs_gpu_pinning"
FIELD = "gpupool.vcf.drs-pinned"
PA = "partiallyAutomated"


class Vc:
    """Direct pyvmomi access to the simulator, as an administrator would act."""

    def __init__(self, sim):
        ctx = ssl.create_default_context(cafile=sim.ca_file)
        self.si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
        self.content = self.si.RetrieveContent()

    def close(self):
        connect.Disconnect(self.si)

    def _named(self, kind, name):
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        try:
            return [o for o in view.view if o.name == name][0]
        finally:
            view.DestroyView()

    def cluster(self, name):
        return self._named(vim.ClusterComputeResource, name)

    def vm(self, name):
        return self._named(vim.VirtualMachine, name)

    def overrides(self, cluster):
        return dict((o.key.name, o.behavior if o.enabled is not False else "disabled")
                    for o in self.cluster(cluster).configurationEx.drsVmConfig)

    def set_override(self, cluster, vm, behavior):
        info = vim.cluster.DrsVmConfigInfo(key=self.vm(vm), behavior=behavior, enabled=True)
        spec = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[vim.cluster.DrsVmConfigSpec(operation="add", info=info)])
        WaitForTask(self.cluster(cluster).ReconfigureComputeResource_Task(spec=spec, modify=True))

    def remove_vgpu(self, vm_name):
        """The VM gives up its vGPU devices (powered off first, as vSphere asks)."""
        vm = self.vm(vm_name)
        if vm.runtime.powerState == "poweredOn":
            WaitForTask(vm.PowerOffVM_Task())
        changes = [vim.vm.device.VirtualDeviceSpec(operation="remove", device=d) for d in vm.config.hardware.device
                   if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
                   and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)]
        assert changes, "%s has no vGPU" % vm_name
        WaitForTask(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=changes)))

    def record(self, cluster):
        """The record's value on the cluster, or None when the attribute is not set there."""
        keys = [f.key for f in self.content.customFieldsManager.field or [] if f.name == FIELD]
        for value in self.cluster(cluster).customValue or []:
            if value.key in keys:
                return value.value
        return None

    def record_names(self, cluster):
        moids = [m for m in (self.record(cluster) or "").split(",") if m]
        names = dict((v._moId, v.name) for v in self._all_vms())
        return sorted(names.get(m, m) for m in moids)

    def _all_vms(self):
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [vim.VirtualMachine], True)
        try:
            return list(view.view)
        finally:
            view.DestroyView()


@pytest.fixture
def vc(vsphere):
    conn = Vc(vsphere)
    try:
        yield conn
    finally:
        conn.close()


def soap(vsphere):
    return vsphere.stats()["soap"]["methods"]


def test_module_records_what_it_sets_and_purges_only_that(vsphere, vsphere_env, vc):
    # an administrator pinned a VM without vGPU (manual) and a vGPU VM (matching) by hand
    vc.set_override("gpu-h100", "plain-01", "manual")
    vc.set_override("gpu-h100", "admin-gpu", PA)
    args = {"cluster": "gpu-h100", "purge_stale": True}

    res, _play = run_module(M, args, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["added"] == ["infer-01", "infer-02", "infer-03", "train-01"] and res["removed"] == []
    assert res["kept_foreign"] == ["plain-01"]
    assert res["diff"]["before"]["owned"] == [] and res["diff"]["after"]["owned"] == res["added"]
    assert vc.record("gpu-h100") is None  # check mode writes nothing

    vsphere.reset_stats()
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] and res["owned"] == ["infer-01", "infer-02", "infer-03", "train-01"]
    calls = soap(vsphere)
    assert calls.get("AddCustomFieldDef") == 1 and calls.get("SetField") == 1
    assert calls.get("ReconfigureComputeResource_Task") == 1 and calls.get("RetrievePropertiesEx") == 2
    assert vc.record_names("gpu-h100") == res["owned"]
    moids = sorted((vc.vm(n)._moId for n in res["owned"]), key=lambda m: int(m.split("-")[1]))
    assert vc.record("gpu-h100") == ",".join(moids)
    assert vc.overrides("gpu-h100") == {"plain-01": "manual", "admin-gpu": PA, "infer-01": PA, "infer-02": PA,
                                        "infer-03": PA, "train-01": PA}

    # rerun: nothing to write, the read is the same single retrieval
    vsphere.reset_stats()
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False and res["kept_foreign"] == ["plain-01"]
    calls = soap(vsphere)
    assert "SetField" not in calls and "ReconfigureComputeResource_Task" not in calls
    assert calls.get("RetrievePropertiesEx") == 2

    # two vGPU VMs lose their vGPU: the one pinned by the collection is purged, the admin's stays
    vc.remove_vgpu("infer-03")
    vc.remove_vgpu("admin-gpu")
    res, _play = run_module(M, args, env=vsphere_env, check=True, diff=True)
    assert res["removed"] == ["infer-03"] and res["kept_foreign"] == ["admin-gpu", "plain-01"]
    assert "infer-03" in res["diff"]["before"]["owned"] and "infer-03" not in res["diff"]["after"]["owned"]
    vsphere.reset_stats()
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] and res["removed"] == ["infer-03"]
    calls = soap(vsphere)
    assert calls.get("SetField") == 1 and calls.get("ReconfigureComputeResource_Task") == 1
    assert "AddCustomFieldDef" not in calls
    assert vc.overrides("gpu-h100") == {"plain-01": "manual", "admin-gpu": PA, "infer-01": PA, "infer-02": PA,
                                        "train-01": PA}
    assert vc.record_names("gpu-h100") == ["infer-01", "infer-02", "train-01"]
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False


def test_changed_override_becomes_ours_and_record_drops_overrides_removed_by_hand(vsphere, vsphere_env, vc):
    # by hand: train-01 set to manual, the override of infer-02 removed; the module changes train-01
    # back and adds infer-02 again, both the collection's
    cluster = vc.cluster("gpu-h100")
    spec = vim.cluster.ConfigSpecEx(drsVmConfigSpec=[
        vim.cluster.DrsVmConfigSpec(operation="edit", info=vim.cluster.DrsVmConfigInfo(
            key=vc.vm("train-01"), behavior="manual", enabled=True)),
        vim.cluster.DrsVmConfigSpec(operation="remove", removeKey=vc.vm("infer-02"))])
    WaitForTask(cluster.ReconfigureComputeResource_Task(spec=spec, modify=True))
    res, _play = run_module(M, {"cluster": "gpu-h100"}, env=vsphere_env, diff=True)
    assert res["updated"] == ["train-01"] and res["added"] == ["infer-02"]
    assert "train-01" in res["owned"] and "infer-02" in res["owned"]
    # an override removed by hand is dropped from the record (no reconfigure: one SetField)
    WaitForTask(cluster.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(drsVmConfigSpec=[
        vim.cluster.DrsVmConfigSpec(operation="remove", removeKey=vc.vm("infer-01"))]), modify=True))
    vsphere.reset_stats()
    res, _play = run_module(M, {"cluster": "gpu-h100", "exclude": ["infer-01"]}, env=vsphere_env, diff=True)
    assert res["changed"] and "infer-01" not in res["owned"] and res["added"] == []
    assert "infer-01" in res["diff"]["before"]["owned"]
    calls = soap(vsphere)
    assert calls.get("SetField") == 1 and "ReconfigureComputeResource_Task" not in calls
    assert "infer-01" not in vc.record_names("gpu-h100")


def test_role_with_purge_keeps_what_others_set(vsphere, vsphere_env, vc):
    play = [{
        "name": "pin", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.vsphere": {}},
        "roles": [{"role": "gpupool.vcf.drs_gpu_pinning", "drs_gpu_pinning_purge_stale": True,
                   "drs_gpu_pinning_clusters": [{"name": "gpu-h100"}]}],
    }]
    before = vc.overrides("gpu-h100")
    assert before["plain-01"] == "manual" and before["admin-gpu"] == PA
    for _attempt in range(2):
        res = run_playbook(play, env=vsphere_env)
        assert res.rc == 0, res.stdout[-3000:]
        after = vc.overrides("gpu-h100")
        assert after["plain-01"] == "manual" and after["admin-gpu"] == PA
    assert res.stats.get("changed") == 0


SITE_ADMIN = {"embedding-01": PA, "llm-inference-03": "manual"}


def run_site_vsphere_only(env):
    """site.yml with --limit localhost,gpupool_vcenters: the ESXi link's per-cluster hosts are left out, and every
    link after vSphere is skipped for want of its connection."""
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--limit", "localhost,gpupool_vcenters",
           str(ROOT / "playbooks" / "site.yml")]
    proc = subprocess.run(cmd, env=ansible_env(env), capture_output=True, text=True, timeout=900, cwd=ROOT, check=False)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    return PlaybookResult(proc, data)


def test_site_yml_purge_keeps_overrides_set_by_hand():
    """site.yml's vSphere link (purge on) on the example fleet: overrides set by hand survive."""
    import vsphere_sim
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml")
    conn = Vc(sim)
    try:
        conn.remove_vgpu("llm-inference-03")  # a VM that holds no vGPU any more
        for vm_name, behavior in SITE_ADMIN.items():
            conn.set_override("gpu-h100", vm_name, behavior)
        for attempt in ("converge", "again"):
            run = run_site_vsphere_only(dict(sim.env))
            assert run.rc == 0, (attempt, run.stdout[-4000:], run.stderr[-2000:])
            pinned = [r for n, r in run.tasks if n.endswith("Pin the vGPU VMs of each cluster with per-VM DRS overrides")]
            assert pinned, [n for n, _r in run.tasks]
            overrides = conn.overrides("gpu-h100")
            for vm_name, behavior in SITE_ADMIN.items():
                assert overrides.get(vm_name) == behavior, (attempt, overrides)
            assert "llm-inference-03" not in conn.record_names("gpu-h100")
            assert "embedding-01" not in conn.record_names("gpu-h100")
            assert {"llm-inference-01", "llm-inference-02", "llm-training-01"} <= set(conn.record_names("gpu-h100"))
        assert pinned[0]["changed"] is False
    finally:
        conn.close()
        sim.stop()
