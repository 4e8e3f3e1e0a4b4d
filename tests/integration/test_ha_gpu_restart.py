"""ha_gpu_restart against the vSphere simulator (example fleet, example design with ha.manage on gpu-h100):
check mode writes nothing, the converge sets the pools' restart priorities and the spare rule's admission
control in one cluster reconfigure, a rerun writes nothing, an administrator's drift is an audit finding of
the esxi link and the rerun repairs it; the simulator refuses an admission policy vCenter refuses."""
import json
import pathlib
import ssl
import subprocess

import pytest
import yaml
from pyVim import connect
from pyVim.task import WaitForTask
from pyVmomi import vim, vmodl

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive
from tests.lib.ansible_run import VENV_BIN, PlaybookResult, ansible_env, run_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
M = "gpupool.vcf.ha_gpu_restart"
FIELD = "gpupool.vcf.ha-restart"
HA_RULES = ("ha_admission_control_off_design", "ha_restart_priority_missing", "ha_restart_priority_off_design",
            "ha_restart_priority_stale", "ha_record_changed", "ha_setting_foreign")


@pytest.fixture(scope="module")
def design_file(tmp_path_factory):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    [c for c in design["clusters"] if c["name"] == "gpu-h100"][0]["ha"] = {"manage": True}
    path = tmp_path_factory.mktemp("design") / "design.yml"
    path.write_text(yaml.safe_dump(design))
    return path


@pytest.fixture(scope="module")
def args(design_file):
    entry = derive(yaml.safe_load(design_file.read_text()))["roles"]["ha_gpu_restart"]["ha_gpu_restart_clusters"][0]
    return json.loads(json.dumps(dict(cluster=entry["name"], pools=entry["pools"],
                                      admission_control=entry["admission_control"])))


@pytest.fixture
def vc(vsphere):
    si = connect.SmartConnect(host=vsphere.host, port=vsphere.port, user=vsphere.user, pwd=vsphere.password,
                              sslContext=ssl.create_default_context(cafile=vsphere.ca_file))
    try:
        yield si.RetrieveContent()
    finally:
        connect.Disconnect(si)


def cluster(content, name="gpu-h100"):
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
    try:
        return [c for c in view.view if c.name == name][0]
    finally:
        view.DestroyView()


def priorities(content):
    return dict((e.key.name, e.dasSettings.restartPriority) for e in cluster(content).configurationEx.dasVmConfig)


def soap(vsphere):
    return vsphere.stats()["soap"]["methods"]


def test_converge_noop_check_mode_and_audit_after_a_drift(vsphere, vsphere_env, vc, args, design_file):
    assert cluster(vc).configurationEx.dasConfig.admissionControlPolicy is None
    vsphere.reset_stats()
    check, _play = run_module(M, args, env=vsphere_env, check=True, diff=True)
    assert check["changed"] is True and priorities(vc) == {} and "ReconfigureComputeResource_Task" not in soap(vsphere)
    res, _play = run_module(M, args, env=vsphere_env, diff=True)
    assert res["changed"] is True and res["added"] == check["added"] and res["priorities"] == check["priorities"]
    # the node VMs and the VMs outside Kubernetes of each pool's profile; embedding-01 (two 1g.10gb) is no pool's
    assert res["priorities"]["inference-0"] == "highest" and res["priorities"]["llm-inference-01"] == "highest"
    assert res["priorities"]["llm-training-01"] == "medium" and "embedding-01" in res["unmatched"]
    assert priorities(vc) == res["priorities"]
    das = cluster(vc).configurationEx.dasConfig
    policy = das.admissionControlPolicy
    assert das.enabled is True and das.admissionControlEnabled is True
    assert isinstance(policy, vim.cluster.FailoverResourcesAdmissionControlPolicy)
    assert (policy.failoverLevel, policy.cpuFailoverResourcesPercent, policy.memoryFailoverResourcesPercent) == (1, 25, 25)
    assert soap(vsphere).get("ReconfigureComputeResource_Task") == 1 and soap(vsphere).get("SetField") == 1
    assert "cluster" in res["owned"] and res["kept_foreign"] == []

    # a rerun with nothing to change writes nothing
    vsphere.reset_stats()
    again, _play = run_module(M, args, env=vsphere_env)
    assert again["changed"] is False and again["added"] == [] and again["updated"] == []
    assert "ReconfigureComputeResource_Task" not in soap(vsphere) and "SetField" not in soap(vsphere)

    # an administrator lowers a node VM the collection set: the audit names it, the rerun sets it back
    vm = [e.key for e in cluster(vc).configurationEx.dasVmConfig if e.key.name == "inference-0"][0]
    info = vim.cluster.DasVmConfigInfo(key=vm, dasSettings=vim.cluster.DasVmSettings(restartPriority="low"))
    WaitForTask(cluster(vc).ReconfigureComputeResource_Task(
        spec=vim.cluster.ConfigSpecEx(dasVmConfigSpec=[vim.cluster.DasVmConfigSpec(operation="edit", info=info)]),
        modify=True))
    audit, _play = run_module("gpupool.vcf.gpu_pool_audit", {"design_file": str(design_file), "links": ["esxi"]},
                              env=dict(vsphere_env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))
    found = [(f["rule"], f["object"]) for f in audit["findings"] if f["rule"] in HA_RULES]
    assert found == [("ha_restart_priority_off_design", "vm inference-0")], found
    check, _play = run_module(M, args, env=vsphere_env, check=True)
    assert check["changed"] is True and check["updated"] == ["inference-0"] and priorities(vc)["inference-0"] == "low"
    repair, _play = run_module(M, args, env=vsphere_env)
    assert repair["updated"] == ["inference-0"] and priorities(vc)["inference-0"] == "highest"
    audit, _play = run_module("gpupool.vcf.gpu_pool_audit", {"design_file": str(design_file), "links": ["esxi"]},
                              env=dict(vsphere_env, K8S_AUTH_KUBECONFIG="", K8S_AUTH_CONTEXT=""))
    assert [f for f in audit["findings"] if f["rule"] in HA_RULES] == []


def test_the_simulator_refuses_a_percentage_vcenter_refuses(vsphere, vc):
    before = cluster(vc, "gpu-l40s").configurationEx.dasConfig.admissionControlPolicy
    policy = vim.cluster.FailoverResourcesAdmissionControlPolicy(cpuFailoverResourcesPercent=150,
                                                                 memoryFailoverResourcesPercent=25, failoverLevel=1)
    spec = vim.cluster.ConfigSpecEx(dasConfig=vim.cluster.DasConfigInfo(enabled=True, admissionControlPolicy=policy))
    with pytest.raises(vmodl.fault.InvalidArgument):
        WaitForTask(cluster(vc, "gpu-l40s").ReconfigureComputeResource_Task(spec=spec, modify=True))
    assert cluster(vc, "gpu-l40s").configurationEx.dasConfig.admissionControlPolicy == before


def test_site_yml_vsphere_link_runs_the_role_and_a_rerun_changes_nothing(design_file):
    """site.yml's vSphere link (the ESXi link's hosts left out by --limit) on a fresh example fleet."""
    import vsphere_sim
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml")
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--limit", "localhost,gpupool_vcenters",
           str(ROOT / "playbooks" / "site.yml"), "-e", "gpupool_design_file=%s" % design_file]
    try:
        for attempt in ("converge", "again"):
            proc = subprocess.run(cmd, env=ansible_env(dict(sim.env)), capture_output=True, text=True, timeout=900,
                                  cwd=ROOT, check=False)
            run = PlaybookResult(proc, json.loads(proc.stdout))
            assert run.rc == 0, (attempt, proc.stdout[-4000:], proc.stderr[-2000:])
            ha = [r for n, r in run.tasks if n.endswith("one reconfigure per cluster")]
            assert ha, [n for n, _r in run.tasks]
            if attempt == "converge":
                assert ha[0]["changed"] is True
        assert ha[0]["changed"] is False
    finally:
        sim.stop()
