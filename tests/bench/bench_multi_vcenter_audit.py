"""Benchmark: the audit (playbooks/audit.yml) over several vCenters against one.

One vSphere simulator holding 256 GPU hosts (a design with the single vcenter block), then four
simulators holding 1,000 GPU hosts in all (250 each, a design naming four vCenters, each with its
own connection from GPUPOOL_VCENTER_<NAME>_* variables). audit.yml audits each vCenter's vSphere
links in a play host of its own, in parallel, and merges the findings into one report; the other
links have no connection here and are reported as not audited. Printed: per run the wall time of
the whole ansible-playbook process, the longest per-vCenter audit task, the CPU seconds of the
playbook (controller and module processes) and of the simulators, the GPU hosts audited and the
findings; then the ratio of the two median wall times (the runs alternate, --repeat each), with the machine's CPUs and load. The vCenters'
audits run side by side, so the ratio stays low only where the controller has a core per vCenter
to spare: the work itself (mostly parsing each vCenter's PropertyCollector answer) grows with the
hosts. Exits non-zero if the ratio is above 2 (or --max-ratio), or if a run fails or does not see
every host.
"""
import argparse
import copy
import os
import resource
import statistics
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from datetime import datetime

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import VENV_BIN, ansible_env  # noqa: E402

DRIVER = "550.90.05-1OEM.800.1.0.20613240"


def fleet(index, hosts):
    """One cluster gpu-<index> of H100 hosts (4 GPUs each, one vGPU VM per host, shared direct)."""
    f = vsphere_sim.fleet_of(hosts, vms_per_host=1, cluster="gpu-%d" % index, supervisor=index == 1,
                             prefix="esx-%d-" % index, driver=DRIVER)
    f["clusters"][0]["hosts"][0]["graphics"] = {"default": "sharedDirect", "policy": "performance"}
    return f


def design(hosts_per_vcenter):
    """The example design on H100 clusters gpu-1..gpu-N, one per vCenter (vc-1..vc-N; the single
    vcenter block when N is 1); the pools on gpu-1, where the Supervisor is."""
    d = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    template = d["clusters"][0]
    template["driver"]["version"] = DRIVER
    d["clusters"] = []
    for i, hosts in enumerate(hosts_per_vcenter, 1):
        cluster = copy.deepcopy(template)
        cluster.update(name="gpu-%d" % i, hosts=hosts)
        if len(hosts_per_vcenter) > 1:
            cluster["vcenter"] = "vc-%d" % i
        d["clusters"].append(cluster)
    if len(hosts_per_vcenter) > 1:
        del d["vcenter"]
        d["vcenters"] = dict(("vc-%d" % i, {"datacenter": "DC0"}) for i in range(1, len(hosts_per_vcenter) + 1))
    d["supervisor"]["cluster"] = "gpu-1"
    d["pools"] = [p for p in d["pools"] if p["shape"] != "notebooks"]
    for pool in d["pools"]:
        pool["cluster"] = "gpu-1"
    for tenant in d["tenants"]:
        tenant["gpu_quota"] = dict((k, v) for k, v in tenant["gpu_quota"].items() if k != "notebooks")
    return d


def task_seconds(data, name):
    """The longest duration of the named task over its play hosts (the task runs once for all of them)."""
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    out = 0.0
    for play in data.get("plays", []):
        for task in play.get("tasks", []):
            dur = task["task"].get("duration", {})
            if task["task"]["name"] == name and dur.get("start") and dur.get("end"):
                out = max(out, (datetime.strptime(dur["end"], fmt) - datetime.strptime(dur["start"], fmt))
                          .total_seconds())
    return out


def audit(sims, hosts_per_vcenter, tmp):
    """Run audit.yml over the simulators; (wall seconds, per-vCenter task seconds, report)."""
    tmp = pathlib.Path(tmp)
    (tmp / "design.yml").write_text(yaml.safe_dump(design(hosts_per_vcenter), sort_keys=False))
    env = ansible_env()
    for key in [k for k in env if k.startswith("VMWARE_") or k.startswith("K8S_AUTH")]:
        del env[key]
    if len(sims) == 1:
        env.update(sims[0].env)
    else:
        for i, sim in enumerate(sims, 1):
            prefix = "GPUPOOL_VCENTER_VC_%d_" % i
            env.update({prefix + "HOST": sim.host, prefix + "PORT": str(sim.port), prefix + "USER": sim.user,
                        prefix + "PASSWORD": sim.password, prefix + "CA_FILE": sim.ca_file})
    report = tmp / "audit.json"
    extra = {"audit_design_file": str(tmp / "design.yml"), "audit_report": str(report),
             "audit_report_format": "json", "audit_kubeconfig": ""}
    start = time.monotonic()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-f", str(max(5, len(sims) + 1)),
                           str(ROOT / "playbooks" / "audit.yml"), "-e", json.dumps(extra)],
                          env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit("audit.yml failed (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout[-3000:],
                                                                proc.stderr[-2000:]))
    data = json.loads(proc.stdout)
    return wall, task_seconds(data, "Audit the vSphere links of the vCenter"), json.loads(report.read_text())


def cpu_seconds(pid):
    """User and system CPU seconds of a running process (a simulator)."""
    fields = pathlib.Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(sims, hosts_per_vcenter):
    """One audit.yml run over running simulators: (wall seconds, printed row)."""
    sim_cpu, playbook_cpu = sum(cpu_seconds(s._proc.pid) for s in sims), children_cpu()
    with tempfile.TemporaryDirectory() as tmp:
        wall, task, report = audit(sims, hosts_per_vcenter, tmp)
    sim_cpu, playbook_cpu = sum(cpu_seconds(s._proc.pid) for s in sims) - sim_cpu, children_cpu() - playbook_cpu
    audited_hosts = sum(s.stats()["soap"]["methods"].get("QueryConfiguredModuleOptionString", 0) for s in sims)
    for sim in sims:
        sim.reset_stats()
    total = sum(hosts_per_vcenter)
    if report["audited"] != ["esxi", "vsphere"]:
        raise SystemExit("the audit did not audit the vSphere links: %s" % report["audited"])
    if audited_hosts != total:
        raise SystemExit("the audit read the module options of %d hosts, not %d" % (audited_hosts, total))
    print("%9d %5d %8.2f %15.2f %15.2f %8.2f %9d" % (len(sims), total, wall, task, playbook_cpu, sim_cpu,
                                                       len(report["findings"])), flush=True)
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", type=int, default=256, help="GPU hosts of the one vCenter")
    parser.add_argument("--many", default="250,250,250,250", help="GPU hosts of each of the several vCenters")
    parser.add_argument("--max-ratio", type=float, default=2.0, help="the most the several may take, in times the one")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternated; the medians are compared")
    args = parser.parse_args()
    many = [int(n) for n in args.many.split(",")]
    print("%9s %5s %8s %15s %15s %8s %9s" % ("vCenters", "hosts", "wall_s", "vcenter_task_s", "playbook_cpu_s",
                                             "sim_cpu_s", "findings"))
    sims = []
    try:
        sims.append(vsphere_sim.start(fleet(1, args.one)))
        for i, hosts in enumerate(many, 1):
            sims.append(vsphere_sim.start(fleet(i, hosts)))
        walls = {"one": [], "several": []}
        # alternated, so that a burst of load on a shared machine hits both alike; medians compared
        for _ in range(args.repeat):
            walls["one"].append(measure(sims[:1], [args.one]))
            walls["several"].append(measure(sims[1:], many))
    finally:
        for sim in sims:
            sim.stop()
    one, several = statistics.median(walls["one"]), statistics.median(walls["several"])
    ratio = several / one
    print("median wall time: %d vCenters / %d hosts %.2f s; 1 vCenter / %d hosts %.2f s; ratio %.2f (at most %.2f); "
          "%d CPUs, load average %.1f" % (len(many), sum(many), several, args.one, one, ratio, args.max_ratio,
                                          os.cpu_count(), os.getloadavg()[0]))
    if ratio > args.max_ratio:
        raise SystemExit("ratio %.2f is above %.2f" % (ratio, args.max_ratio))


if __name__ == "__main__":
    main()
