"""Benchmark: module calls, host plans and vSphere requests per host of a rolling esxi_gpu_host run.

One simulator with one cluster of N identical GPU hosts on an older driver: every host takes its turn
(maintenance mode, install, reboot, verify). The role runs through ansible-playbook, as users run it.
Printed: wall time, seconds per host, SOAP requests in all and per host, and per host the calls of
each module the role made (esxi_host_driver twice per host: a check-mode plan and the install, before
the role took its plan of each host from one esxi_host_turns call; once after).
"""
import argparse
import collections
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import run_playbook  # noqa: E402

OLD = "550.54.10-1OEM.800.1.0.20613240"
BUNDLE = "[ds1] nvidia/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip"


def play(cluster):
    return [{"name": "bench", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": {"esxi_gpu_host_cluster": cluster, "esxi_gpu_host_driver_version": "550.90.05",
                                 "esxi_gpu_host_driver_bundle": BUNDLE, "esxi_gpu_host_reboot_timeout": 60,
                                 "esxi_gpu_host_install_timeout": 60}}]}]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--collections", help="the collections path to run the role from (default: this tree)")
    opts = parser.parse_args()
    n = opts.hosts
    fleet = vsphere_sim.fleet_of(n, driver=OLD)
    with vsphere_sim.start(fleet) as sim:
        sim.reset_stats()
        start = time.monotonic()
        env = dict(sim.env, ANSIBLE_COLLECTIONS_PATH=opts.collections) if opts.collections else sim.env
        res = run_playbook(play("gpu"), env=env, timeout=3600)
        wall = time.monotonic() - start
        if res.rc != 0:
            raise SystemExit("role failed: %s" % [(t, r.get("msg")) for t, r in res.tasks if r.get("failed")])
        soap = sim.stats()["soap"]
    calls = collections.Counter()
    for _name, r in res.tasks:
        # esxi_host_driver's result: the only one with its plan and the version it found
        if not r.get("skipped") and "plan" in r and "previous_version" in r and "component" in r:
            calls["esxi_host_driver"] += 1
    print("esxi_gpu_host role, rolling run on %d hosts (driver upgrade, 4 x H100-80GB)" % n)
    print("%6s %10s %10s %10s %14s %18s" % ("hosts", "wall s", "s/host", "requests", "requests/host",
                                           "driver calls/host"))
    print("%6d %10.1f %10.2f %10d %14.1f %18.1f" % (n, wall, wall / n, soap["total"], soap["total"] / float(n),
                                                    calls["esxi_host_driver"] / float(n)))
    top = sorted(soap["methods"].items(), key=lambda kv: -kv[1])[:6]
    print("most frequent: %s" % ", ".join("%s %d" % kv for kv in top))


if __name__ == "__main__":
    main()
