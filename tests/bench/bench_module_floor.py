"""Benchmark: each vSphere module's call against the floor of one module call, at 8 and 500 objects, cold and warm.

The floor, measured in the same run on the same simulator: a module that logs in, makes one PropertyCollector
retrieval of every host and VM (name, PCI devices, virtual devices) and logs out
(tests/bench/library/bench_floor_call.py: RetrieveServiceContent, Login, RetrievePropertiesEx, Logout), run through
ansible-playbook as the modules are. Objects are vGPU VMs, 10 per host with 4 x H100-80GB (8 objects: one host of
8 VMs; 500: 50 hosts). Each module runs twice on a fresh simulator: cold (the first call: DRS overrides not yet
set, the ownership record's attribute not yet defined, the scheduler not yet at the wanted policy) and warm (the
same call again, a no-op).

Printed per module, size and run: the module task's seconds, the ansible-playbook process's seconds, vSphere
requests in all, the requests other than the per-host methods the API has no batch form for (PER_HOST), those
per-host requests, the ratios to the floor (wall time of the process; the other requests), and the methods the
call sent beyond the floor's. The goal
(issue "A no-op that costs what reading costs"): every module within 1.5x of the floor's wall time.

    .venv/bin/python tests/bench/bench_module_floor.py [--sizes 8,500]
"""
import argparse
import collections
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.bench.bench_drs_pinning import prepare  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402
from tests.lib.task_timing import task_seconds  # noqa: E402

LIBRARY = ROOT / "tests" / "bench" / "library"
VMS_PER_HOST = 10
GOAL = 1.5
# one request per host (or per GPU) is what the vSphere API offers for these: the host's packages, the nvidia
# module's option string, a host's graphics or option update; a retrieval's further pages grow with its objects
PER_HOST = ("fetchSoftwarePackages", "FetchSoftwarePackages", "QueryConfiguredModuleOptionString",
            "UpdateGraphicsConfig", "UpdateModuleOptionString", "ContinueRetrievePropertiesEx")

FLOOR = ("floor", "bench_floor_call", {})
MODULES = (
    ("drs_gpu_pinning", "gpupool.vcf.drs_gpu_pinning", {"cluster": "bench"}),
    ("gpu_host_info", "gpupool.vcf.gpu_host_info", {"cluster": "bench"}),
    ("gpu_host_info vms", "gpupool.vcf.gpu_host_info", {"cluster": "bench", "gather": ["vms"]}),
    ("esxi_gpu_config", "gpupool.vcf.esxi_gpu_config", {"cluster": "bench", "scheduler": {"policy": "equal_share"}}),
)


def call(sim, module, args, collections_path=None):
    """(result, task s, process s, Counter of vSphere methods and REST paths) of one module call."""
    sim.reset_stats()
    env = dict(sim.env, ANSIBLE_LIBRARY=str(LIBRARY))
    if collections_path:
        env["ANSIBLE_COLLECTIONS_PATH"] = collections_path
    start = time.monotonic()
    res, play = run_module(module, args, env=env)
    wall = time.monotonic() - start
    if res.get("failed"):
        raise SystemExit("%s %s failed: %s" % (module, args, res.get("msg")))
    stats = sim.stats()
    methods = collections.Counter(stats["soap"]["methods"])
    for path, n in ((stats.get("rest") or {}).get("paths") or {}).items():
        methods["REST " + path] += n
    return res, task_seconds(play.data), wall, methods


def figures(label, run, res, task, wall, methods):
    total = sum(methods.values())
    per_host = sum(n for m, n in methods.items() if m in PER_HOST)
    return dict(label=label, run=run, changed=bool(res.get("changed")), task=task, wall=wall, total=total,
                per_host=per_host, fixed=total - per_host, methods=methods)


def measure(n, collections_path=None):
    """[figures] at n objects: each module cold then warm on a simulator of its own, with the floor before each."""
    fleet = vsphere_sim.fleet_of(max(1, n // VMS_PER_HOST), vms_per_host=min(n, VMS_PER_HOST), cluster="bench")
    rows = []
    for label, module, args in MODULES:
        with vsphere_sim.start(fleet) as sim:
            prepare(sim)  # DRS on, per-VM overrides allowed, as on a Supervisor cluster
            res = call(sim, FLOOR[1], FLOOR[2])
            if res[0].get("objects") != n + max(1, n // VMS_PER_HOST):
                raise SystemExit("the floor read %s objects, expected %d VMs and their hosts" % (res[0].get("objects"), n))
            rows.append(figures("floor (%s)" % label, "-", *res))
            for run in ("cold", "warm"):
                rows.append(figures(label, run, *call(sim, module, args, collections_path)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,500", help="numbers of vGPU VMs, comma-separated")
    parser.add_argument("--collections", help="ANSIBLE_COLLECTIONS_PATH of another build of the collection to measure "
                        "(an earlier commit's, for a before figure); default: this tree's")
    opts = parser.parse_args()
    print("vSphere modules against the floor of one module call (login, one retrieval, logout), same run")
    head = "%5s  %-24s %-5s %7s %7s %7s %8s %6s %6s %8s %8s  %s"
    print(head % ("VMs", "module", "run", "changed", "task s", "play s", "requests", "others", "/host", "x wall",
                  "x others", "methods beside the floor's"))
    over = []
    for n in [int(x) for x in opts.sizes.split(",") if x]:
        floor = None
        for r in measure(n, opts.collections):
            if r["run"] == "-":
                floor = r
            extra = r["methods"] - floor["methods"]
            xw, xf = r["wall"] / floor["wall"], r["fixed"] / float(floor["fixed"])
            print("%5d  %-24s %-5s %7s %7.2f %7.2f %8d %6d %6d %7.2fx %7.2fx  %s" % (
                n, r["label"][:24], r["run"], r["changed"], r["task"], r["wall"], r["total"], r["fixed"],
                r["per_host"], xw, xf, ", ".join("%s %d" % kv for kv in sorted(extra.items())) or "-"), flush=True)
            if r["run"] != "-" and xw > GOAL:
                over.append("%s %s at %d VMs: %.2fx the floor's wall time" % (r["label"], r["run"], n, xw))
    if over:
        print("over %.1fx the floor: %s" % (GOAL, "; ".join(over)))


if __name__ == "__main__":
    main()
