"""Benchmark: wall time and vSphere requests per host of a no-op esxi_gpu_host role run.

One simulator with one cluster of N identical GPU hosts already at the design (driver,
Shared Direct graphics, equal-share scheduler). The role runs through ansible-playbook, as
users run it; the simulator counts every request. Printed: wall time of the run, seconds per
host, SOAP requests in all and per host, and the most frequent methods.
"""
import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import run_playbook  # noqa: E402

OPTS = "NVreg_RegistryDwords=RmPVMRL=0x00030001"


def play(cluster):
    return [{"name": "bench", "hosts": "localhost", "gather_facts": False,
             "tasks": [{"name": "role", "ansible.builtin.include_role": {"name": "gpupool.vcf.esxi_gpu_host"},
                        "vars": {"esxi_gpu_host_cluster": cluster, "esxi_gpu_host_driver_version": "550.90.05",
                                 "esxi_gpu_host_scheduler": {"policy": "equal_share", "time_slice_ms": 3}}}]}]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    opts = parser.parse_args()
    n = opts.hosts
    fleet = vsphere_sim.fleet_of(n, vms_per_host=1)
    fleet["clusters"][0]["hosts"][0]["graphics"] = {"default": "sharedDirect", "policy": "performance"}
    fleet["clusters"][0]["hosts"][0]["nvidia_options"] = OPTS
    with vsphere_sim.start(fleet) as sim:
        sim.reset_stats()
        start = time.monotonic()
        res = run_playbook(play("gpu"), env=sim.env, timeout=3600)
        wall = time.monotonic() - start
        if res.rc != 0:
            raise SystemExit("role failed: %s" % [(t, r.get("msg")) for t, r in res.tasks if r.get("failed")])
        changed = [t for t, r in res.tasks if r.get("changed")]
        if changed:
            raise SystemExit("a no-op run changed something: %s" % changed)
        soap = sim.stats()["soap"]
    top = sorted(soap["methods"].items(), key=lambda kv: -kv[1])[:6]
    print("esxi_gpu_host role, no-op run on %d hosts (4 x H100-80GB, 1 vGPU VM each)" % n)
    print("%6s %10s %10s %10s %14s" % ("hosts", "wall s", "s/host", "requests", "requests/host"))
    print("%6d %10.1f %10.2f %10d %14.1f" % (n, wall, wall / n, soap["total"], soap["total"] / float(n)))
    print("most frequent: %s" % ", ".join("%s %d" % kv for kv in top))


if __name__ == "__main__":
    main()
