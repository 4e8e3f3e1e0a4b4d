"""drs_gpu_pinning adopts the overrides an administrator set by hand (vSphere simulator, ansible-playbook).

The overrides are set through pyvmomi directly. Without adopt they stay foreign and purge leaves
them; with adopt the matching ones go into the cluster's record, a rerun is unchanged, and a later
purge removes only what the record holds.
"""
from tests.integration.test_drs_ownership import FLEET as OWNERSHIP_FLEET
from tests.integration.test_drs_ownership import vc  # noqa: F401 pylint: disable=unused-import
from tests.lib.ansible_run import run_module

FLEET = OWNERSHIP_FLEET
M = "gpupool.vcf.drs_gpu_pinning"
PA = "partiallyAutomated"
GPU_VMS = ["infer-01", "infer-02", "infer-03", "train-01"]


def test_hand_set_overrides_foreign_without_adopt_own_with_it(vsphere, vsphere_env, vc):
    for name in GPU_VMS + ["admin-gpu"]:
        vc.set_override("gpu-h100", name, PA)
    args = {"cluster": "gpu-h100", "purge_stale": True}

    res, _play = run_module(M, args, env=vsphere_env)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["owned"] == [] and vc.record("gpu-h100") is None

    # admin-gpu gives up its vGPU: its override was set by hand, so purge leaves it
    vc.remove_vgpu("admin-gpu")
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] is False and res["kept_foreign"] == ["admin-gpu"]
    assert vc.overrides("gpu-h100")["admin-gpu"] == PA

    adopt = dict(args, adopt=True)
    res, _play = run_module(M, adopt, env=vsphere_env, check=True, diff=True)
    assert res["changed"] is True and res["added"] == [] and res["updated"] == []
    assert res["diff"]["before"]["owned"] == [] and res["diff"]["after"]["owned"] == GPU_VMS
    assert vc.record("gpu-h100") is None  # check mode writes nothing

    res, _play = run_module(M, adopt, env=vsphere_env)
    assert res["changed"] is True and res["owned"] == GPU_VMS and vc.record_names("gpu-h100") == GPU_VMS
    assert res["kept_foreign"] == ["admin-gpu"]  # not pinned (no vGPU): not adopted
    res, _play = run_module(M, adopt, env=vsphere_env)
    assert res["changed"] is False

    # train-01 gives up its vGPU: its adopted override is purged, admin-gpu's hand-set one stays
    vc.remove_vgpu("train-01")
    res, _play = run_module(M, args, env=vsphere_env)
    assert res["changed"] is True and res["removed"] == ["train-01"] and res["kept_foreign"] == ["admin-gpu"]
    overrides = vc.overrides("gpu-h100")
    assert "train-01" not in overrides and overrides["admin-gpu"] == PA
    assert vc.record_names("gpu-h100") == GPU_VMS[:3]
