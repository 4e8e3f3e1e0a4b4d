"""Benchmark: the what-if replay's speed, in simulated hours per wall minute, for a synthetic week of GPU
workloads on the example design (the Kubernetes rig: real kube-apiserver, kube-scheduler, controller-manager and
Kueue, kwok nodes).

The record comes from the seeded generator (about 1,000 workloads over 168 hours in the three pools: inference,
training through Kueue, notebooks); gpu_what_if replays it against examples/design.yml through ansible-playbook, as
users run it. Printed: the workloads, the compression, the wall seconds of the replay, the replay speed, the
admitted/waiting counts and p95 waits per pool, and each pool's utilization against its knee. --hours and --compression make it shorter or faster where the
machine is slow (the figure printed says which were used).

    .venv/bin/python tests/bench/bench_what_if.py [--hours 168] [--compression 1800]
"""
import argparse
import pathlib
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import tests.conftest  # noqa: E402,F401 pylint: disable=unused-import - the collection's import path
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _what_if as wi  # noqa: E402
from tests.lib import kueue_rig  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402

SYSTEM_ONLY = {"defaults": {"cpu": "8", "memory": "32Gi", "labels": {"kubernetes.io/os": "linux"}},
               "pools": [{"name": "system", "count": 1}]}
# about 5.95 arrivals an hour: 1,000 in a week
POOLS = {
    "inference": {"arrivals_per_hour": 3.0, "mean_seconds": 1800, "gpus": 1, "tenants": ["team-search", "team-vision"]},
    "training": {"arrivals_per_hour": 0.95, "mean_seconds": 5400, "distribution": "lognormal", "cv": 1.5, "gpus": 4,
                 "tenants": ["team-vision", "research"]},
    "notebooks": {"arrivals_per_hour": 2.0, "mean_seconds": 7200, "gpus": 1, "tenants": ["research", "team-vision"]},
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=168)
    ap.add_argument("--compression", type=float, default=1800)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        with kueue_rig.kueue_rig(tmp, SYSTEM_ONLY) as rig:
            began = time.monotonic()
            result, _run = run_module("gpupool.vcf.gpu_what_if", dict(
                design=kueue_rig.example_design(), generate={"pools": POOLS, "hours": args.hours, "seed": args.seed},
                record_dest=str(tmp / "record.yml"), kubeconfig=str(rig.kubeconfig), compression=args.compression,
                fail_on_breach=False), env=rig.env)
            task = time.monotonic() - began
        if result.get("failed"):
            print("the replay failed: %s" % result.get("msg"))
            return 1
        record = yaml.safe_load((tmp / "record.yml").read_text())
    wall = result["compression"]["wall_seconds"]
    span_h = record["span_seconds"] / 3600.0
    print("workloads %d over %.0f simulated hours, compression %g" % (len(record["workloads"]), span_h, args.compression))
    print("replay wall time %.1f s (Jobs submitted and watched), %.1f s with the build, the reset and ansible" % (
        wall, task))
    print("replay speed %.1f simulated hours per wall minute (%.1f with the build and reset)" % (
        span_h / (wall / 60.0), span_h / (task / 60.0)))
    rows = result["current"]["workloads"]
    print("finished %d of %d workloads; the replay kept up if nearly all finished and the waits of the lightly loaded "
          "pools are a few polls (%.0f simulated s a poll)" % (sum(1 for r in rows if r["finished"]), len(rows),
                                                               0.25 * args.compression))
    for pool, stats in result["current"]["pools"].items():
        print("  %-10s admitted %4d  waiting %3d  preempted %3d  p95 wait %8.0f s  p95 scheduling wait %8.0f s" % (
            pool, stats["admitted"], stats["waiting"], stats["preempted"], stats["wait_p95"] or 0,
            stats["scheduling_wait_p95"] or 0))
    print("GPU utilization over the replay and the knee:")
    for pool, entry in (result["current"].get("usage") or {}).items():
        print("  %-10s %s" % (pool, wi.knee_text(entry)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
