"""Benchmark: pin N vGPU VMs with drs_gpu_pinning and with vmware.vmware.cluster_drs_vm_overrides.

Each module gets its own simulator (one cluster, 4 x H100-80GB per host, 10 vGPU VMs per
host, so N / 10 hosts). Both run through ansible-playbook, as users run them, first from
cold (no override on the cluster) then as a no-op rerun. Printed per run: wall time of the
module task, of the whole ansible-playbook process, and the vSphere requests the simulator
answered (SOAP and REST).

vmware.vmware 2.12 (the first with cluster_drs_vm_overrides that is fast enough to compare)
is not in the ansible package that runs on Python 3.11; it is taken out of a newer ansible
wheel, downloaded into .build/ on first use and never committed. vmware.vmware is given the
VMs' managed object ids, its fastest lookup.
"""
import argparse
import os
import pathlib
import shutil
import ssl
import subprocess
import sys
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import COLLECTIONS, run_module  # noqa: E402
from tests.lib.task_timing import task_seconds  # noqa: E402

ANSIBLE_WHEEL = "ansible==15.0.0a3"  # carries vmware.vmware 2.12.0
BENCH = ROOT / ".build" / "bench"
BENCH_COLLECTIONS = BENCH / "collections"
VMS_PER_HOST = 10


def vmware_vmware():
    """Path holding ansible_collections/vmware/vmware 2.12, extracted from the ansible wheel once."""
    target = BENCH_COLLECTIONS / "ansible_collections" / "vmware" / "vmware"
    if (target / "MANIFEST.json").exists():
        return BENCH_COLLECTIONS
    wheels = BENCH / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob("ansible-15.0.0a3-*.whl"))
    if not found:
        print("downloading %s (for vmware.vmware 2.12) into %s" % (ANSIBLE_WHEEL, wheels), flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--pre", "--python-version", "3.13",
                        "--only-binary=:all:", "-d", str(wheels), ANSIBLE_WHEEL], check=True)
        found = sorted(wheels.glob("ansible-15.0.0a3-*.whl"))
    prefix = "ansible_collections/vmware/vmware/"
    tmp = target.with_name("vmware.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(found[0]) as whl:
        for name in whl.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                dest = tmp / name[len(prefix):]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(whl.read(name))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return BENCH_COLLECTIONS


def prepare(sim):
    """Enable DRS (fully automated, VM overrides allowed) as a Supervisor cluster has it;
    return the VMs' managed object ids. Done outside the measurement."""
    from pyVim import connect
    from pyVim.task import WaitForTask
    from pyVmomi import vim
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.ClusterComputeResource], True)
        for cl in view.view:
            drs = vim.cluster.DrsConfigInfo(enabled=True, enableVmBehaviorOverrides=True,
                                            defaultVmBehavior="fullyAutomated")
            WaitForTask(cl.ReconfigureComputeResource_Task(spec=vim.cluster.ConfigSpecEx(drsConfig=drs), modify=True))
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        return sorted(vm._moId for vm in view.view)
    finally:
        connect.Disconnect(si)


def measure(sim, module, args, env):
    sim.reset_stats()
    start = time.monotonic()
    res, play = run_module(module, args, env=env)
    wall = time.monotonic() - start
    if res.get("failed"):
        raise SystemExit("%s failed: %s" % (module, res.get("msg")))
    stats = sim.stats()
    requests = stats["soap"]["total"] + stats.get("rest", {}).get("total", 0)
    return dict(changed=res.get("changed"), task=task_seconds(play.data), play=wall, requests=requests)


def run_size(n, theirs_path):
    hosts = max(1, n // VMS_PER_HOST)
    fleet = vsphere_sim.fleet_of(hosts, vms_per_host=VMS_PER_HOST, cluster="bench")
    rows = []
    with vsphere_sim.start(fleet) as sim:
        env = dict(sim.env)
        prepare(sim)
        for label in ("cold", "no-op"):
            rows.append(("drs_gpu_pinning", label, measure(sim, "gpupool.vcf.drs_gpu_pinning",
                                                           {"cluster": "bench"}, env)))
    with vsphere_sim.start(fleet) as sim:
        env = dict(sim.env)
        env["ANSIBLE_COLLECTIONS_PATH"] = "%s%s%s" % (COLLECTIONS, os.pathsep, theirs_path)
        env["SSL_CERT_FILE"] = sim.ca_file  # vmware.vmware verifies against the default trust store
        overrides = [{"virtual_machine": moid, "behavior": "partiallyAutomated", "enabled": True}
                     for moid in prepare(sim)]
        args = {"datacenter": "DC0", "cluster": "bench", "vm_overrides": overrides, "append": True}
        for label in ("cold", "no-op"):
            rows.append(("cluster_drs_vm_overrides", label,
                         measure(sim, "vmware.vmware.cluster_drs_vm_overrides", args, env)))
    return hosts, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500", help="numbers of vGPU VMs, comma-separated")
    opts = parser.parse_args()
    theirs = vmware_vmware()
    print("DRS pinning benchmark (10 vGPU VMs per host, H100-80GB)")
    print("%5s %6s  %-25s %-6s %8s %8s %9s %8s" % ("VMs", "hosts", "module", "run", "changed", "task s",
                                                   "play s", "requests"))
    failed = False
    for n in [int(x) for x in opts.sizes.split(",")]:
        hosts, rows = run_size(n, theirs)
        for module, label, m in rows:
            print("%5d %6d  %-25s %-6s %8s %8.2f %9.2f %8d" % (n, hosts, module, label, m["changed"], m["task"],
                                                             m["play"], m["requests"]), flush=True)
        ours = dict((label, m) for module, label, m in rows if module == "drs_gpu_pinning")
        theirs_m = dict((label, m) for module, label, m in rows if module != "drs_gpu_pinning")
        for label in ("cold", "no-op"):
            speedup = theirs_m[label]["task"] / ours[label]["task"]
            print("%5d  %-6s speed-up %.1fx (task), %.1fx (play), requests %d vs %d"
                  % (n, label, speedup, theirs_m[label]["play"] / ours[label]["play"], ours[label]["requests"],
                     theirs_m[label]["requests"]))
            if n >= 500 and speedup < 5:
                failed = True
        if ours["no-op"]["changed"] or theirs_m["no-op"]["changed"]:
            print("  warning: a no-op rerun reported changed")
    if failed:
        raise SystemExit("drs_gpu_pinning is less than 5x faster than cluster_drs_vm_overrides at 500 VMs")


if __name__ == "__main__":
    main()
