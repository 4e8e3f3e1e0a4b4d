"""drs_gpu_pinning against the vSphere simulator, through ansible-playbook."""
from pyVim import connect
from pyVmomi import vim

from tests.lib.ansible_run import run_module, run_playbook

FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True,
         # esx-h100-01 runs the MIG-backed infer VMs (every card in MIG mode), esx-h100-02 full cards
         "hosts": [{"name": "esx-h100-01", "gpu": {"model": "H100-80GB", "count": 4},
                    "driver_version": "550.90.05-1OEM.800.1.0.20613240", "mig": "all"},
                   {"name": "esx-h100-02", "gpu": {"model": "H100-80GB", "count": 4},
                    "driver_version": "550.90.05-1OEM.800.1.0.20613240"},
                   {"name": "esx-cpu-01"}]},
        {"name": "mgmt", "hosts": [{"prefix": "esx-mgmt-", "count": 1}]},
    ],
    "vms": [
        {"name": "infer", "host": "esx-h100-01", "vgpu": ["nvidia_h100-1-10c"], "count": 3},
        {"name": "train-01", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"]},
        {"name": "plain-01", "host": "esx-h100-01"},
        {"name": "plain-02", "host": "esx-h100-02"},
    ],
}
GPU_VMS = ["infer-01", "infer-02", "infer-03", "train-01"]
M = "gpupool.vcf.drs_gpu_pinning"


def cluster_state(sim):
    """{vm name: behavior or 'disabled'} of the cluster's overrides, and its default behavior."""
    import ssl
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
        cl = [c for c in view.view if c.name == "gpu-h100"][0]
        cfg = cl.configurationEx
        out = dict((o.key.name, o.behavior if o.enabled is not False else "disabled") for o in cfg.drsVmConfig)
        return out, cfg.drsConfig.defaultVmBehavior
    finally:
        connect.Disconnect(si)


def test_pin_rerun_check_diff_purge(vsphere, vsphere_env):
    _overrides_before, default_before = cluster_state(vsphere)
    # check mode predicts, changes nothing
    res, _playbook = run_module(M, {"cluster": "gpu-h100"}, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["added"] == GPU_VMS
    assert res["diff"]["before"] == {"overrides": dict((n, None) for n in GPU_VMS), "owned": []}
    assert res["diff"]["after"] == {"overrides": dict((n, "partiallyAutomated") for n in GPU_VMS), "owned": GPU_VMS}
    assert cluster_state(vsphere)[0] == {}

    vsphere.reset_stats()
    res, _playbook = run_module(M, {"cluster": "gpu-h100"}, env=vsphere_env)
    assert res["changed"] is True and res["added"] == GPU_VMS
    soap = vsphere.stats()["soap"]["methods"]
    assert soap.get("ReconfigureComputeResource_Task") == 1
    overrides, default_after = cluster_state(vsphere)
    assert overrides == dict((n, "partiallyAutomated") for n in GPU_VMS)
    assert default_after == default_before  # the cluster's own level is never touched

    res, _playbook = run_module(M, {"cluster": "gpu-h100"}, env=vsphere_env)
    assert res["changed"] is False and res["added"] == [] and res["pinned"] == GPU_VMS

    # one VM named, behavior manual: only that one changes
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "vms": ["train-01", "plain-01"], "behavior": "manual"},
                                env=vsphere_env, diff=True)
    assert res["changed"] is True and res["updated"] == ["train-01"] and res["added"] == ["plain-01"]
    assert res["diff"]["before"]["overrides"]["train-01"] == "partiallyAutomated"
    assert res["diff"]["after"]["overrides"]["train-01"] == "manual"
    overrides, _default = cluster_state(vsphere)
    assert overrides["train-01"] == "manual" and overrides["infer-01"] == "partiallyAutomated"

    # purge: plain-01 holds no vGPU; excluded VMs are left alone
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "behavior": "manual", "purge_stale": True,
                                    "exclude": ["infer-03"]}, env=vsphere_env, check=True)
    assert res["removed"] == ["plain-01"] and res["updated"] == ["infer-01", "infer-02"]
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "behavior": "manual", "purge_stale": True,
                                    "exclude": ["infer-03"]}, env=vsphere_env)
    assert res["changed"] is True and res["removed"] == ["plain-01"]
    overrides, _default = cluster_state(vsphere)
    assert overrides == {"infer-01": "manual", "infer-02": "manual", "infer-03": "partiallyAutomated",
                         "train-01": "manual"}
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "behavior": "manual", "purge_stale": True,
                                    "exclude": ["infer-03"]}, env=vsphere_env)
    assert res["changed"] is False


def rules_and_groups(sim):
    import ssl
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
        cfg = [c for c in view.view if c.name == "gpu-h100"][0].configurationEx
        groups = {}
        for g in cfg.group:
            members = getattr(g, "vm", None) if isinstance(g, vim.cluster.VmGroup) else g.host
            groups[g.name] = sorted(m.name for m in members or [])
        rules = dict((r.name, (r.vmGroupName, r.affineHostGroupName, r.mandatory)) for r in cfg.rule)
        return groups, rules
    finally:
        connect.Disconnect(si)


def test_vm_host_rule(vsphere, vsphere_env):
    args = {"cluster": "gpu-h100", "exclude": ["infer-03"], "vm_host_rule": {"name": "gpu-on-gpu"}}
    res, _playbook = run_module(M, args, env=vsphere_env, check=True, diff=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["diff"]["before"]["vm_host_rule"] is None
    assert res["diff"]["after"]["vm_host_rule"]["host_group"] == ["esx-h100-01", "esx-h100-02"]
    assert rules_and_groups(vsphere) == ({}, {})
    vsphere.reset_stats()
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is True
    assert vsphere.stats()["soap"]["methods"].get("ReconfigureComputeResource_Task") == 1
    groups, rules = rules_and_groups(vsphere)
    assert groups == {"gpu-on-gpu-vms": ["infer-01", "infer-02", "train-01"],
                      "gpu-on-gpu-hosts": ["esx-h100-01", "esx-h100-02"]}
    assert rules == {"gpu-on-gpu": ("gpu-on-gpu-vms", "gpu-on-gpu-hosts", False)}
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False
    # mandatory and one more VM: the rule and the VM group change, in one reconfigure
    args = {"cluster": "gpu-h100", "vm_host_rule": {"name": "gpu-on-gpu", "mandatory": True}}
    res, _playbook = run_module(M, args, env=vsphere_env, diff=True)
    assert res["changed"] is True
    assert res["diff"]["before"]["vm_host_rule"]["mandatory"] is False
    groups, rules = rules_and_groups(vsphere)
    assert groups["gpu-on-gpu-vms"] == GPU_VMS and rules["gpu-on-gpu"][2] is True
    res, _playbook = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False


def test_bad_input_changes_nothing(vsphere, vsphere_env):
    before, _default = cluster_state(vsphere)
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "vms": ["infer-01", "no-such-vm"]}, env=vsphere_env)
    assert res["failed"] and "not in the cluster: no-such-vm" in res["msg"]
    res, _playbook = run_module(M, {"cluster": "nope"}, env=vsphere_env)
    assert res["failed"] and "cluster nope not found" in res["msg"]
    res, _playbook = run_module(M, {"cluster": "gpu-h100", "behavior": "fullyAutomated"}, env=vsphere_env)
    assert res["failed"] and "behavior" in res["msg"]
    assert cluster_state(vsphere)[0] == before


def test_role(vsphere, vsphere_env):
    play = [{
        "name": "pin", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/gpupool.vcf.vsphere": {}},
        "roles": [{"role": "gpupool.vcf.drs_gpu_pinning",
                   "drs_gpu_pinning_clusters": [{"name": "gpu-h100", "behavior": "partiallyAutomated",
                                                 "purge_stale": True}]}],
    }]
    res = run_playbook(play, env=vsphere_env)
    assert res.rc == 0, res.stdout[-3000:]
    overrides, _default = cluster_state(vsphere)
    assert overrides == dict((n, "partiallyAutomated") for n in GPU_VMS)
    res = run_playbook(play, env=vsphere_env)
    assert res.rc == 0 and res.stats.get("changed") == 0, res.stdout[-3000:]
