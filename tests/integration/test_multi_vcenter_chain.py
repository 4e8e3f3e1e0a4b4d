"""A design over two vCenters (two vSphere simulators): site.yml converges each GPU cluster through
its own vCenter's connection (one from GPUPOOL_VCENTER_<NAME>_* environment variables, as an AWX
credential injects them, the other from an inventory host's vars), the audit of both is clean and
merged into one report, a drift in one vCenter is reported under that vCenter's name, and a bad
vCenter reference or a missing connection fails before any request reaches either vCenter."""
import copy
import json
import pathlib
import subprocess

import pytest
import yaml

import vsphere_sim
from tests.lib.ansible_run import VENV_BIN, ansible_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
# vc-east holds the example's clusters and the Supervisor; vc-west one more L40S cluster (no pools: a
# Supervisor serves only its own vCenter's clusters) with vGPU VMs to pin. One host on the old driver
# in each vCenter.
EAST = {"clusters": [
    {"name": "gpu-h100", "supervisor": True, "hosts": [
        {"prefix": "esx-h100-", "count": 3, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW},
        {"name": "esx-h100-04", "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": OLD}]},
    {"name": "gpu-l40s", "supervisor": True, "hosts": [
        {"prefix": "esx-l40s-", "count": 3, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW}]}]}
WEST = {"clusters": [{"name": "gpu-l40s-west", "hosts": [
    {"prefix": "esx-west-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
    {"name": "esx-west-03", "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD}]}],
    "vms": [{"name": "vdi", "cluster": "gpu-l40s-west", "count": 2, "vgpu": ["nvidia_l40s-8c"]}]}
VM_CLASSES = "/api/vcenter/namespace-management/virtual-machine-classes"


def design(west="vc-west"):
    """The example design with its clusters in vc-east and gpu-l40s-west in vCenter ``west``."""
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    del d["vcenter"]
    d["vcenters"] = {"vc-east": {"datacenter": "DC0"}, "vc-west": {"datacenter": "DC0"}}
    for cluster in d["clusters"]:
        cluster["vcenter"] = "vc-east"
    extra = copy.deepcopy(d["clusters"][1])
    extra.update(name="gpu-l40s-west", vcenter=west)
    d["clusters"].append(extra)
    return d


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    # the ESXi link reads (and on gpu-h100 sets) host MIG mode with nvidia-smi over SSH
    keys = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id")], check=True)
    east = vsphere_sim.start(EAST, ssh_authorized_keys=keys / "id.pub")
    east.key = str(keys / "id")
    try:
        west = vsphere_sim.start(WEST, ssh_authorized_keys=keys / "id.pub")
        try:
            yield east, west
        finally:
            west.stop()
    finally:
        east.stop()


@pytest.fixture
def run(sims, tmp_path):
    """Run a playbook with vc-east's connection in the environment and vc-west's in the inventory;
    no VMWARE_* variable anywhere. Returns (rc, JSON result, stdout)."""
    east, west = sims
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "localhost": {"ansible_connection": "local"},
        "vcenter-vc-west": {"gpupool_vcenter_hostname": west.host, "gpupool_vcenter_port": west.port,
                            "gpupool_vcenter_username": west.user, "gpupool_vcenter_password": west.password,
                            "gpupool_vcenter_ca_file": west.ca_file}}}}))
    env = ansible_env({"GPUPOOL_VCENTER_VC_EAST_HOST": east.host, "GPUPOOL_VCENTER_VC_EAST_PORT": str(east.port),
                       "GPUPOOL_VCENTER_VC_EAST_USER": east.user, "GPUPOOL_VCENTER_VC_EAST_PASSWORD": east.password,
                       "GPUPOOL_VCENTER_VC_EAST_CA_FILE": east.ca_file})
    for key in [k for k in env if k.startswith("VMWARE_") or k.startswith("K8S_AUTH")]:
        del env[key]

    def _run(playbook, the_design, extra=None, drop_west=False):
        path = tmp_path / "design.yml"
        path.write_text(yaml.safe_dump(the_design, sort_keys=False))
        extra_vars = dict(extra or {}, gpupool_design_file=str(path), audit_design_file=str(path),
                          esxi_gpu_host_ssh_addresses=dict(east.ssh_addresses(), **west.ssh_addresses()),
                          esxi_gpu_host_ssh_private_key_file=east.key, esxi_gpu_host_ssh_host_key_checking=False)
        inv = inventory
        if drop_west:
            inv = tmp_path / "bare.yml"
            inv.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local"}}}}))
        proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "-f", "8",
                               str(ROOT / "playbooks" / playbook), "-e", json.dumps(extra_vars)],
                              env=env, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            data = None
        return proc.returncode, data, proc.stdout + proc.stderr
    return _run


def results(data, task):
    """{play host: result} of the named task."""
    out = {}
    for play in (data or {}).get("plays", []):
        for t in play.get("tasks", []):
            if t["task"]["name"].split(" : ", 1)[-1] == task:
                out.update(t["hosts"])
    return out


def requests(sim):
    stats = sim.stats()
    return stats["soap"]["total"] + (stats.get("rest") or {}).get("total", 0)


def test_bad_vcenter_reference_or_connection_fails_before_any_request(sims, run):
    east, west = sims
    for sim in sims:
        sim.reset_stats()
    rc, data, out = run("site.yml", design(west="vc-wset"))
    assert rc != 0
    msg = str(results(data, "Check the design against every rule, before any change")["localhost"].get("msg"))
    assert "unknown vCenter 'vc-wset'" in msg and "vc-west" in msg, msg
    # vc-west's connection is only in the inventory: without it, site.yml stops (no VMWARE_* fallback)
    rc, data, out = run("site.yml", design(), drop_west=True)
    assert rc != 0
    msg = results(data, "Every vCenter has a connection (a design with several never takes VMWARE_*)")["localhost"]["msg"]
    assert msg.startswith("No connection for vCenter(s) vc-west:") and "Nothing was changed" in msg, msg
    assert (requests(east), requests(west)) == (0, 0)


def test_converge_each_cluster_through_its_vcenter_then_audit(sims, run, tmp_path):
    east, west = sims
    the_design = design()
    for sim in sims:
        sim.reset_stats()
    rc, data, out = run("site.yml", the_design)
    assert rc == 0, out[-4000:]
    assert east.password not in out and west.password not in out
    # each cluster rolled through its own vCenter
    assert east.host_state("esx-h100-04")["driver_running"] == NEW
    assert west.host_state("esx-west-03")["driver_running"] == NEW
    # the design's MIG geometry of gpu-h100 ([[], [], [0, 1], [0, 1]]) set over the hosts' SSH, each TSM-SSH
    # service started for it and stopped again
    for host, wanted in (("esx-h100-01", []), ("esx-h100-02", []), ("esx-h100-03", [0, 1]), ("esx-h100-04", [0, 1])):
        gpus = sorted(east.mig(host), key=lambda g: g["pci_bus_id"])
        assert [i for i, g in enumerate(gpus) if g["current"]] == wanted, (host, gpus)
        assert east.ssh_service(host) == "stopped", host
    # the vSphere link ran once per vCenter, in its own play host; VM classes only where the Supervisor is
    pinned = results(data, "Pin the vGPU VMs of each cluster with per-VM DRS overrides")
    assert sorted(pinned) == ["vcenter-vc-east", "vcenter-vc-west"], sorted(pinned)
    assert [r["__drs_gpu_pinning_cluster"]["name"] for r in pinned["vcenter-vc-west"]["results"]] == ["gpu-l40s-west"]
    east_rest = (east.stats().get("rest") or {}).get("paths") or {}
    west_rest = (west.stats().get("rest") or {}).get("paths") or {}
    assert any(VM_CLASSES in p for p in east_rest), east_rest
    assert not any(VM_CLASSES in p for p in west_rest), west_rest

    report = tmp_path / "audit.json"
    rc, data, out = run("audit.yml", the_design, {"audit_report": str(report), "audit_report_format": "json"})
    assert rc == 0, out[-4000:]
    merged = json.loads(report.read_text())
    assert merged["clean"] is True, [f for f in merged["findings"] if f["severity"] != "info"]
    assert merged["audited"] == ["esxi", "vsphere"]
    per_vcenter = results(data, "Audit the vSphere links of the vCenter")
    assert {h: r["audited"] for h, r in per_vcenter.items()} == {
        "vcenter-vc-east": ["esxi", "vsphere"], "vcenter-vc-west": ["esxi"]}

    # drift in vc-west only: reported under its name, vc-east stays clean
    west.set_driver("esx-west-02", OLD)
    rc, data, out = run("audit.yml", the_design, {"audit_report": str(report), "audit_report_format": "json",
                                                  "audit_fail_on": "error"})
    assert rc != 0
    drift = [f for f in json.loads(report.read_text())["findings"] if f["severity"] == "error"]
    assert drift and all(f["vcenter"] == "vc-west" and f["object"].startswith("vcenter vc-west: ") for f in drift)
    assert ("driver_off_design", "vcenter vc-west: host esx-west-02") in [(f["rule"], f["object"]) for f in drift]
