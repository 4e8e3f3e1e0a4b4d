"""Benchmark: wall time and vSphere requests of gpu_host_info at 8, 64 and 256 hosts.

Each size gets its own simulator (one cluster, 4 GPUs and 2 vGPU VMs per host). The
module runs through ansible-playbook, as users run it; the simulator counts every
request it answers. Printed per size: wall time of the module task, wall time of the
whole ansible-playbook process, total requests, property-retrieval requests (constant)
and per-host method calls (driver packages and module options, which the vSphere API
offers only per host), for the default gather and for gather=[vms].
"""
import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402

# wire names: the SOAP method of FetchSoftwarePackages is spelled fetchSoftwarePackages
PER_HOST_METHODS = ("fetchSoftwarePackages", "FetchSoftwarePackages", "QueryConfiguredModuleOptionString")


def measure(sim, args):
    sim.reset_stats()
    start = time.monotonic()
    res, play = run_module("gpupool.vcf.gpu_host_info", args, env=sim.env)
    wall = time.monotonic() - start
    if res.get("failed"):
        raise SystemExit("gpu_host_info failed: %s" % res.get("msg"))
    soap = sim.stats()["soap"]
    per_host = sum(soap["methods"].get(m, 0) for m in PER_HOST_METHODS)
    return dict(hosts=len(res["hosts"]), wall=wall, total=soap["total"], per_host=per_host,
                fixed=soap["total"] - per_host, task=task_seconds(play))


def task_seconds(play):
    for pl in play.data.get("plays", []):
        for task in pl.get("tasks", []):
            dur = task["task"].get("duration", {})
            if task["task"]["name"] == "run" and dur.get("start") and dur.get("end"):
                from datetime import datetime
                fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
                return (datetime.strptime(dur["end"], fmt) - datetime.strptime(dur["start"], fmt)).total_seconds()
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256")
    opts = parser.parse_args()
    print("gpu_host_info benchmark (one cluster, 4 x H100-80GB and 2 vGPU VMs per host)")
    print("%6s  %-14s %9s %9s %9s %10s %11s" % ("hosts", "gather", "task s", "play s", "requests",
                                               "retrieval", "per-host"))
    rows = []
    for n in [int(x) for x in opts.sizes.split(",")]:
        with vsphere_sim.start(vsphere_sim.fleet_of(n, vms_per_host=2, cluster="bench")) as sim:
            for label, args in (("default", {"cluster": "bench"}), ("vms only", {"cluster": "bench", "gather": ["vms"]})):
                m = measure(sim, args)
                assert m["hosts"] == n, m
                rows.append((n, label, m))
                print("%6d  %-14s %9.2f %9.2f %9d %10d %11d" % (n, label, m["task"], m["wall"], m["total"],
                                                               m["fixed"], m["per_host"]))
    fixed = sorted({m["fixed"] for _, _, m in rows})
    print("requests other than the per-host methods, at every size: %s" % ", ".join(str(f) for f in fixed))
    if len(fixed) != 1:
        raise SystemExit("the property retrieval requests grow with the number of hosts")
    for n, label, m in rows:
        if label == "default" and m["per_host"] != 2 * n:
            raise SystemExit("expected exactly 2 per-host method calls per GPU host, got %d at %d hosts"
                             % (m["per_host"], n))


if __name__ == "__main__":
    main()
