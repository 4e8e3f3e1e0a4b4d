"""The day-2 playbooks on a design over two vCenters (two vSphere simulators, one pair for the whole file):
gpu_inventory.yml, capacity.yml and chargeback.yml read each vCenter through its own connection (vc-east's from
GPUPOOL_VCENTER_VC_EAST_* environment variables, vc-west's from an inventory host's vars, no VMWARE_* anywhere) and
report per vCenter and in total; pool_ready.yml resolves a pool of the design to its cluster and vCenter;
host_rebuild.yml finds the host on the vCenter that holds it and plans its turn there (check mode), and refuses a
host on neither vCenter, or on both, before any change, naming the vCenters."""
import copy
import json
import pathlib
import subprocess
import time

import pytest
import yaml

import vsphere_sim
from tests.lib.ansible_run import VENV_BIN, ansible_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
OLD = "550.54.10-1OEM.800.1.0.20613240"
NEW = "550.90.05-1OEM.800.1.0.20613240"
# vc-east: the example design's clusters (and the Supervisor); vc-west: one more L40S cluster with a rebuilt host
# in maintenance mode and two vGPU VMs outside Kubernetes. esx-twin is a host name both vCenters know.
EAST = {"clusters": [
    {"name": "gpu-h100", "supervisor": True, "hosts": [
        {"prefix": "esx-h100-", "count": 2, "gpu": {"model": "H100-80GB", "count": 4}, "driver_version": NEW}]},
    {"name": "gpu-l40s", "supervisor": True, "hosts": [
        {"prefix": "esx-l40s-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
        {"name": "esx-twin", "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD, "maintenance": True}]}]}
WEST = {"clusters": [{"name": "gpu-l40s-west", "hosts": [
    {"prefix": "esx-west-", "count": 2, "gpu": {"model": "L40S", "count": 2}, "driver_version": NEW},
    {"name": "esx-west-rebuilt", "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD, "maintenance": True},
    {"name": "esx-twin", "gpu": {"model": "L40S", "count": 2}, "driver_version": OLD, "maintenance": True}]}],
    "vms": [{"name": "vdi", "cluster": "gpu-l40s-west", "count": 2, "vgpu": ["nvidia_l40s-8c"]}]}
TIMES = {}


def two_vcenter_design():
    """The example design with its clusters in vc-east and a copy of gpu-l40s, gpu-l40s-west, in vc-west."""
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    del d["vcenter"]
    d["vcenters"] = {"vc-east": {"datacenter": "DC0"}, "vc-west": {"datacenter": "DC0"}}
    for cluster in d["clusters"]:
        cluster["vcenter"] = "vc-east"
    extra = copy.deepcopy(d["clusters"][1])
    extra.update(name="gpu-l40s-west", vcenter="vc-west")
    d["clusters"].append(extra)
    return d


@pytest.fixture(scope="module")
def sims():
    east = vsphere_sim.start(EAST)
    try:
        west = vsphere_sim.start(WEST)
        try:
            yield east, west
        finally:
            west.stop()
    finally:
        east.stop()
        print("\nplaybook wall times (s): %s" % ", ".join("%s %.1f" % kv for kv in TIMES.items()))


@pytest.fixture(scope="module")
def run(sims, tmp_path_factory):
    """Run a playbook with the two-vCenter design; returns (rc, JSON result, output)."""
    east, west = sims
    folder = tmp_path_factory.mktemp("two-vcenters")
    design = folder / "design.yml"
    design.write_text(yaml.safe_dump(two_vcenter_design(), sort_keys=False))
    inventory = folder / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "localhost": {"ansible_connection": "local"},
        "vcenter-vc-west": {"gpupool_vcenter_hostname": west.host, "gpupool_vcenter_port": west.port,
                            "gpupool_vcenter_username": west.user, "gpupool_vcenter_password": west.password,
                            "gpupool_vcenter_ca_file": west.ca_file}}}}))
    env = ansible_env({"GPUPOOL_VCENTER_VC_EAST_HOST": east.host, "GPUPOOL_VCENTER_VC_EAST_PORT": str(east.port),
                       "GPUPOOL_VCENTER_VC_EAST_USER": east.user, "GPUPOOL_VCENTER_VC_EAST_PASSWORD": east.password,
                       "GPUPOOL_VCENTER_VC_EAST_CA_FILE": east.ca_file})
    for key in [k for k in env if k.startswith(("VMWARE_", "K8S_AUTH", "PROMETHEUS_"))]:
        del env[key]

    def _run(playbook, extra=None, check=False, label=None):
        cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "-f", "4", str(ROOT / "playbooks" / playbook),
               "-e", json.dumps(extra or {})]
        if check:
            cmd.append("--check")
        started = time.monotonic()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=folder, check=False)
        TIMES[label or playbook] = time.monotonic() - started
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            data = None
        assert east.password not in proc.stdout and west.password not in proc.stdout
        return proc.returncode, data, proc.stdout + proc.stderr
    _run.design = str(design)
    _run.folder = folder
    return _run


def results(data, task):
    """{play host: result} of the named task."""
    out = {}
    for play in (data or {}).get("plays", []):
        for t in play.get("tasks", []):
            if t["task"]["name"].split(" : ", 1)[-1] == task:
                out.update(t["hosts"])
    return out


def soap_methods(sim):
    return sim.stats()["soap"]["methods"]


def test_gpu_inventory_per_vcenter_and_in_total(run):
    rc, data, out = run("gpu_inventory.yml", {"gpu_inventory_design_file": run.design})
    assert rc == 0, out[-4000:]
    shown = results(data, "Show the inventory per cluster")
    assert sorted(shown) == ["vcenter-vc-east", "vcenter-vc-west"]
    east, west = shown["vcenter-vc-east"]["msg"], shown["vcenter-vc-west"]["msg"]
    assert east[0] == "vCenter vc-east:" and west[0] == "vCenter vc-west:"
    assert any(line.startswith("cluster gpu-h100: 2 hosts") for line in east), east
    assert any(line.startswith("cluster gpu-l40s-west: 4 hosts") for line in west), west
    assert not any("gpu-l40s-west" in line for line in east) and not any("gpu-h100" in line for line in west)
    totals = results(data, "Show the figures per vCenter and over every vCenter read")["localhost"]["msg"]
    assert totals == ["vCenter vc-east: 2 clusters, 5 hosts, 5 with GPUs, 14 GPUs, 0 vGPU VMs; driver MISMATCH in gpu-l40s",
                      "vCenter vc-west: 1 clusters, 4 hosts, 4 with GPUs, 8 GPUs, 2 vGPU VMs; driver MISMATCH in gpu-l40s-west",
                      "total over 2 vCenters: 3 clusters, 9 hosts, 9 with GPUs, 22 GPUs, 2 vGPU VMs"], totals

    # one vCenter of the design, chosen by name (or by its cluster)
    rc, data, out = run("gpu_inventory.yml", {"gpu_inventory_design_file": run.design, "gpu_inventory_cluster": "gpu-l40s-west"},
                        label="gpu_inventory.yml (one cluster)")
    assert rc == 0, out[-4000:]
    assert sorted(results(data, "Show the inventory per cluster")) == ["vcenter-vc-west"]
    rc, data, out = run("gpu_inventory.yml", {"gpu_inventory_design_file": run.design, "gpu_inventory_vcenter": "vc-nort"},
                        label="gpu_inventory.yml (bad vCenter)")
    assert rc != 0
    msg = results(data, "A vCenter chosen by name is one of the design")["localhost"]["msg"]
    assert "vc-nort is not a vCenter of the design (vc-east, vc-west)" in msg, msg


def test_capacity_per_vcenter_and_in_total(run):
    out_dir = run.folder / "capacity"
    rc, data, out = run("capacity.yml", {"capacity_design_file": run.design, "capacity_output_dir": str(out_dir)})
    assert rc == 0, out[-4000:]
    reports = results(data, "Read the live capacity")
    assert sorted(reports) == ["vcenter-vc-east", "vcenter-vc-west"]
    assert sorted(reports["vcenter-vc-east"]["clusters"]) == ["gpu-h100", "gpu-l40s"]
    assert sorted(reports["vcenter-vc-west"]["clusters"]) == ["gpu-l40s-west"]
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "gpu-capacity-vc-east.json", "gpu-capacity-vc-east.md", "gpu-capacity-vc-west.json", "gpu-capacity-vc-west.md",
        "gpu-capacity.json", "gpu-capacity.md"]
    west = json.loads((out_dir / "gpu-capacity-vc-west.json").read_text())
    assert list(west["clusters"]) == ["gpu-l40s-west"] and west["clusters"]["gpu-l40s-west"]["gpus"] == 8
    total = json.loads((out_dir / "gpu-capacity.json").read_text())
    assert sorted(total["vcenters"]) == ["vc-east", "vc-west"]
    assert total["totals"]["gpus"] == 22 and total["totals"]["clusters"] == 3 and total["totals"]["vcenters"] == 2
    assert total["vcenters"]["vc-west"]["clusters"] == west["clusters"]
    text = (out_dir / "gpu-capacity.md").read_text()
    assert text.startswith("# vCenter vc-east\n") and "\n# vCenter vc-west\n" in text
    lines = results(data, "Show the figures per vCenter and in total")["localhost"]["msg"]
    assert lines == ["vCenter vc-east: 2 clusters, 5 GPU hosts, 14 GPUs (0 in use); the spare rule holds",
                     "vCenter vc-west: 1 clusters, 4 GPU hosts, 8 GPUs (2 in use); the spare rule holds",
                     "total over 2 vCenters: 3 clusters, 9 GPU hosts, 22 GPUs (2 in use); the spare rule holds on every cluster"], lines


def test_chargeback_per_vcenter_and_in_total(run):
    out_dir = run.folder / "chargeback"
    rc, data, out = run("chargeback.yml", {"chargeback_design_file": run.design, "chargeback_output_dir": str(out_dir),
                                           "chargeback_start": "now-1h"})
    assert rc == 0, out[-4000:]
    usage = results(data, "Count GPU-hours from Prometheus and price them")
    assert sorted(usage) == ["vcenter-vc-east", "vcenter-vc-west"]
    assert usage["vcenter-vc-east"]["vms_read"] and usage["vcenter-vc-east"]["vm_rows"] == []
    assert [(r["profile"], r["vms"]) for r in usage["vcenter-vc-west"]["vm_rows"]] == [("nvidia_l40s-8c", 2)]
    assert sorted(v["name"] for v in usage["vcenter-vc-west"]["vgpu_vms"]) == ["vdi-01", "vdi-02"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        "gpu-usage-%s.%s" % (vc, ext) for vc in ("vc-east", "vc-west") for ext in ("csv", "html", "json"))
    shown = results(data, "Show GPU-hours and cost per tenant")
    assert shown["vcenter-vc-west"]["msg"][0].startswith("vCenter vc-west: "), shown
    west_hours = usage["vcenter-vc-west"]["vgpu_vm_hours"]
    assert west_hours > 0
    lines = results(data, "Show each vCenter's GPU-hours and the totals")["localhost"]["msg"]
    assert lines[0] == "vCenter vc-east: 0.00 GPU-hours of pods, 0.00 vGPU-hours of VMs outside Kubernetes", lines
    assert lines[1] == ("vCenter vc-west: 0.00 GPU-hours of pods (counted with the vCenter of the Supervisor), "
                        "%.2f vGPU-hours of VMs outside Kubernetes" % west_hours), lines
    assert lines[2].startswith("total over 2 vCenters: 0.00 GPU-hours of pods, %.2f vGPU-hours of VMs" % west_hours), lines


def test_pool_ready_resolves_the_pool_to_its_vcenter(run):
    rc, data, out = run("pool_ready.yml", {"pool_ready_design_file": run.design, "pool_ready_pool": "notebooks"})
    assert rc == 0, out[-4000:]
    assert results(data, "Where the pool is")["localhost"]["msg"] == "pool notebooks: cluster gpu-l40s of vCenter vc-east"
    skipped = results(data, "Say why nothing is timed")["localhost"]["msg"]
    assert "no guest kubeconfig given" in skipped, skipped
    rc, data, out = run("pool_ready.yml", {"pool_ready_design_file": run.design, "pool_ready_pool": "notebooks",
                                           "pool_ready_vcenter": "vc-west"}, label="pool_ready.yml (other vCenter)")
    assert rc != 0
    msg = results(data, "The pool resolves to one of the design's vCenters")["localhost"]["msg"]
    assert msg == "pool notebooks runs on cluster gpu-l40s of vCenter vc-east, not on vCenter vc-west; nothing was read", msg
    rc, data, out = run("pool_ready.yml", {"pool_ready_design_file": run.design, "pool_ready_pool": "batch"},
                        label="pool_ready.yml (unknown pool)")
    assert rc != 0
    msg = results(data, "The pool resolves to one of the design's vCenters")["localhost"]["msg"]
    assert msg.startswith("pool batch is not a GPU node pool of the design (its pools: inference, training, notebooks)"), msg


def test_host_rebuild_plans_on_the_vcenter_that_holds_the_host(sims, run):
    east, west = sims
    for sim in sims:
        sim.reset_stats()
    rc, data, out = run("host_rebuild.yml", {"host": "esx-west-rebuilt", "gpupool_design_file": run.design}, check=True)
    assert rc == 0, out[-4000:]
    found = results(data, "Look for the host on every vCenter of the design")["localhost"]["results"]
    assert [(r["item"], [h["name"] for h in r.get("hosts", [])]) for r in found] == [
        ("vc-east", []), ("vc-west", ["esx-west-rebuilt"])], found
    assert "esx-west-rebuilt not found" in found[0]["msg"], found
    back = results(data, "Host back in its pool")["localhost"]["msg"]
    assert (back["host"], back["vcenter"], back["cluster"], back["driver"]) == (
        "esx-west-rebuilt", "vc-west", "gpu-l40s-west", NEW), back
    # the turn was planned through vc-west only: vc-east answered the look-up and nothing else
    assert sorted(h for h, r in results(data, "Read its cluster").items() if r["hosts"]) == ["localhost"]
    assert [h["cluster"] for h in results(data, "Read its cluster")["localhost"]["hosts"]] == ["gpu-l40s-west"] * 4
    assert "RetrievePropertiesEx" in soap_methods(west) or "RetrieveProperties" in soap_methods(west)
    assert not {"InstallHostPatchV2_Task", "ExitMaintenanceMode_Task"} & set(soap_methods(west))
    assert not {"InstallHostPatchV2_Task", "ExitMaintenanceMode_Task"} & set(soap_methods(east))
    state = west.host_state("esx-west-rebuilt")
    assert state["maintenance"] is True and state["driver_running"] == OLD, state
    # the pool_ready.yml it ends with names the host's vCenter (no guest kubeconfig: nothing timed)
    assert results(data, "Where the pool is")["localhost"]["msg"] == "vCenter vc-west"


@pytest.mark.parametrize("host, words", [
    ("esx-nowhere", "it is on none of the vCenters vc-east, vc-west of the design"),
    ("esx-twin", "it is on vCenters vc-east and vc-west: name the one to rebuild it on with -e host_rebuild_vcenter=<name>"),
])
def test_host_rebuild_refuses_a_host_on_neither_or_both_before_any_change(sims, run, host, words):
    for sim in sims:
        sim.reset_stats()
    rc, data, out = run("host_rebuild.yml", {"host": host, "gpupool_design_file": run.design}, label="host_rebuild.yml " + host)
    assert rc != 0
    msg = results(data, "The host is on exactly one vCenter of the design")["localhost"]["msg"]
    assert msg == "%s was not rebuilt, nothing was changed: %s" % (host, words), msg
    for sim in sims:
        methods = soap_methods(sim)
        assert not [m for m in methods if m.endswith("_Task") or m.startswith("Update")], methods
    assert not results(data, "Take the run lease of the host's cluster (bookkeeping, changes nothing of the pool)")
