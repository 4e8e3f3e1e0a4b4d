"""gpu_capacity and playbooks/capacity.yml against the vSphere simulator: node VMs with vGPUs on
every host, slots counted by hand, the spare rule failing on gpu-h100 (naming inference) and
holding on gpu-l40s."""
import copy
import json
import pathlib

import yaml

from tests.lib.ansible_run import run_module, run_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
DRIVER = "550.90.05-1OEM.800.1.0.20613240"
H100 = {"model": "H100-80GB", "count": 4}
L40S = {"model": "L40S", "count": 2}
FLEET = {
    "clusters": [
        {"name": "gpu-h100", "supervisor": True, "hosts": [
            # the inference nodes' cards in MIG mode: the fourth of h01/h02 (the training node takes the
            # first three), the first two of h03
            {"name": "esx-h100-01", "gpu": H100, "driver_version": DRIVER, "mig": [3]},
            {"name": "esx-h100-02", "gpu": H100, "driver_version": DRIVER, "mig": [3]},
            {"name": "esx-h100-03", "gpu": H100, "driver_version": DRIVER, "mig": [0, 1]},
            {"name": "esx-h100-04", "gpu": H100, "driver_version": DRIVER, "maintenance": True},
        ]},
        {"name": "gpu-l40s", "hosts": [
            {"prefix": "esx-l40s-", "count": 2, "gpu": L40S, "driver_version": DRIVER,
             "graphics": {"default": "sharedDirect", "policy": "consolidation"}},
        ]},
        {"name": "mgmt", "hosts": [{"name": "esx-mgmt-01"}]},
    ],
    "vms": [
        # esx-h100-01/02: a training node (3 whole H100s) and an inference node (half an H100) each
        {"name": "training-0", "host": "esx-h100-01", "vgpu": ["nvidia_h100-80c"] * 3},
        {"name": "inference-0", "host": "esx-h100-01", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "training-1", "host": "esx-h100-02", "vgpu": ["nvidia_h100-80c"] * 3},
        {"name": "inference-1", "host": "esx-h100-02", "vgpu": ["nvidia_h100-3-40c"]},
        # esx-h100-03: three inference nodes (two cards in MIG mode) and a powered-off whole-card VM
        {"name": "inference-2", "host": "esx-h100-03", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "inference-3", "host": "esx-h100-03", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "inference-4", "host": "esx-h100-03", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "parked-01", "host": "esx-h100-03", "vgpu": ["nvidia_h100-80c"], "power": "off"},
        # L40S: a notebook node on each host, a 24 GB visualisation VM on the second
        {"name": "notebooks-0", "host": "esx-l40s-01", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "notebooks-1", "host": "esx-l40s-02", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "viz-01", "host": "esx-l40s-02", "vgpu": ["nvidia_l40s-24c"]},
        {"name": "tools-01", "host": "esx-mgmt-01"},
    ],
}
DESIGN = ROOT / "examples" / "design.yml"


def capacity(env, **args):
    res = run_module("gpupool.vcf.gpu_capacity", args, env=env)[0]
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    return res


def test_slots_and_spare_rule_with_the_design(vsphere, vsphere_env):
    before = vsphere.stats()["soap"]["methods"]
    res = capacity(vsphere_env, design_file=str(DESIGN))
    after = vsphere.stats()["soap"]["methods"]
    sent = dict((m, after.get(m, 0) - before.get(m, 0)) for m in after if after.get(m, 0) != before.get(m, 0))
    # a fixed number of retrievals, no per-host calls, nothing changed
    assert "FetchSoftwarePackages" not in sent and "QueryConfiguredModuleOptionString" not in sent
    assert sent.get("RetrievePropertiesEx", 0) + sent.get("RetrieveProperties", 0) <= 6, sent
    assert not [m for m in sent if m.endswith("_Task")], sent

    assert sorted(res["clusters"]) == ["gpu-h100", "gpu-l40s"]  # mgmt has no GPU host
    h100 = res["clusters"]["gpu-h100"]
    assert h100["unavailable_hosts"] == ["esx-h100-04"] and h100["gpus"] == 16
    # 3 available hosts x 4 cards, each card's slots in its mode, from the placement the simulator keeps
    # (graphicsInfo[].vm). 3-40c (2 per card) only on the 4 MIG cards: 8 slots, 5 used; free: one on
    # each of h01/h02's MIG card, none on h03's GPU 0 (inference-2 and -4), one on its GPU 1 -> 3;
    # blocked 0 (the cards without MIG hold no 3-40c slot at all)
    assert dict(res["clusters"]["gpu-h100"]["profiles"]["nvidia_h100-3-40c"]) == dict(
        total=8, used=5, free=3, blocked=0, powered_off=0, per_card=2, hosts_with_room=3)
    assert [[vm["name"] for vm in g["vms"]] for g in vsphere.gpus("esx-h100-03")] == [
        ["inference-2", "inference-4"], ["inference-3"], [], []]
    # 80c only on the 8 cards without MIG: 6 used by the training nodes, 2 free (h03's GPUs 2 and 3);
    # parked-01 is off
    assert dict(h100["profiles"]["nvidia_h100-80c"]) == dict(
        total=8, used=6, free=2, blocked=0, powered_off=1, per_card=1, hosts_with_room=1)
    # 8c on L40S (48 // 8 = 6 per card): 24 slots, 2 used, free 5 + 6 on l01 and 5 + 0 on l02 (viz-01's
    # card runs 24c), blocked 24 - 2 - 16 = 6
    l40s = res["clusters"]["gpu-l40s"]["profiles"]
    assert (l40s["nvidia_l40s-8c"]["total"], l40s["nvidia_l40s-8c"]["free"], l40s["nvidia_l40s-8c"]["blocked"]) == (24, 16, 6)

    # spare rule: losing esx-h100-03 leaves one of its three inference nodes without a card (h01 and
    # h02 have one 3g.40gb slot each); the worst of the equal hosts, and inference is protected
    spare = res["spare"]["gpu-h100"]
    assert spare["ok"] is False and res["spare_ok"] is False
    assert spare["host_down"] == "esx-h100-03" and spare["hosts_left"] == 2
    assert (spare["vms_to_restart"], spare["vms_short"]) == (3, 1)
    assert [(s["pool"], s["protected"], s["vgpu_profiles"], s["vms"]) for s in spare["short"]] == [
        ("inference", True, ["nvidia_h100-3-40c"], ["inference-4"])]
    # L40S: either host's VMs restart on the other (viz-01 on the empty card of esx-l40s-01)
    assert res["spare"]["gpu-l40s"]["ok"] is True and res["spare"]["gpu-l40s"]["short"] == []
    assert res["guest"] is None and res["knee"] is None
    assert "| nvidia_h100-3-40c | 2 | 8 | 5 | 3 | 0 | 0 |" in res["markdown"]
    assert "**gpu-h100**: FAILS" in res["markdown"] and "inference 1 VM" in res["markdown"]


def test_without_design_and_one_cluster(vsphere_env):
    res = capacity(vsphere_env, cluster="gpu-h100", profiles=["nvidia_h100-1-10c"])
    assert list(res["clusters"]) == ["gpu-h100"]
    # 1-10c: 7 per card on the 4 MIG cards, 28 slots; free: 4 on each MIG card holding one 3g.40gb (h01,
    # h02, h03's GPU 1), 0 on h03's full GPU 0 -> 12; the empty cards of h03 run without MIG: no 1-10c
    row = res["clusters"]["gpu-h100"]["profiles"]["nvidia_h100-1-10c"]
    assert (row["total"], row["used"], row["free"], row["blocked"]) == (28, 0, 12, 16)
    short = res["spare"]["gpu-h100"]["short"]
    assert [(s["pool"], s["protected"]) for s in short] == [("(profile nvidia_h100-3-40c)", True)]


def test_check_mode_and_bad_cluster(vsphere_env):
    res = run_module("gpupool.vcf.gpu_capacity", {"cluster": "gpu-h100"}, env=vsphere_env, check=True)[0]
    assert not res.get("failed") and res["spare"]["gpu-h100"]["vms_short"] == 1
    res = run_module("gpupool.vcf.gpu_capacity", {"cluster": "nope"}, env=vsphere_env)[0]
    assert res.get("failed") and "nope" in res["msg"] and res["msg"].startswith("Unable to read")


def test_playbook_writes_json_and_markdown(vsphere_env, tmp_path):
    design = yaml.safe_load(DESIGN.read_text())
    path = tmp_path / "design.yml"
    path.write_text(yaml.safe_dump(copy.deepcopy(design)))
    res = run_playbook(ROOT / "playbooks" / "capacity.yml", env=vsphere_env,
                       extra_vars={"capacity_design_file": str(path), "capacity_output_dir": str(tmp_path / "out")})
    assert res.rc == 0, res.stdout[-3000:]
    report = json.loads((tmp_path / "out" / "gpu-capacity.json").read_text())
    assert report["spare"]["gpu-h100"]["short"][0]["pool"] == "inference"
    text = (tmp_path / "out" / "gpu-capacity.md").read_text()
    assert text.startswith("# GPU capacity") and "## Spare rule" in text
    failed = run_playbook(ROOT / "playbooks" / "capacity.yml", env=vsphere_env,
                          extra_vars={"capacity_design_file": str(path), "capacity_output_dir": str(tmp_path / "out"),
                                      "capacity_fail_on_spare": True})
    assert failed.rc != 0 and "inference 1 VM" in failed.stdout
