"""Benchmark: wall time and vSphere requests of gpu_host_info, by number of hosts.

Each size gets its own simulator (one cluster, 4 GPUs and 2 vGPU VMs per host). The
module runs through ansible-playbook, as users run it; the simulator counts every
request it answers (SOAP and REST). Printed per size and gather: wall time of the module
task, wall time of the whole ansible-playbook process, total requests, requests other than
the per-host methods, the per-host method calls (driver packages and module options, which
the vSphere API offers only per host) and the image compliance reads.

Two kinds of cluster:

* baseline-managed (``--sizes``, default 8, 64 and 256 hosts): the driver is read per host;
  the check is that only the two per-host methods grow with the hosts;
* managed by a vLCM image (``--vlcm-sizes``, default 16 and 64 hosts): the driver of the
  hosts that comply with the image is the image's, from one compliance read per cluster;
  the check (the acceptance check of this benchmark) is that the requests of
  gather=[driver, vms] are the same at every size, that the default gather makes one
  per-host call (the module options) per host, and that a host that drifted from the image
  is read on its own and reported with its own driver.
"""
import argparse
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import vsphere_sim  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402
from tests.lib.task_timing import task_seconds  # noqa: E402

# wire names: the SOAP method of FetchSoftwarePackages is spelled fetchSoftwarePackages
DRIVER_METHODS = ("fetchSoftwarePackages", "FetchSoftwarePackages")
PER_HOST_METHODS = DRIVER_METHODS + ("QueryConfiguredModuleOptionString",)
COMPLIANCE = "/software/compliance"
DRIFTED = "550.54.10-1OEM.800.1.0.20613240"


def measure(sim, args):
    sim.reset_stats()
    start = time.monotonic()
    res, play = run_module("gpupool.vcf.gpu_host_info", args, env=sim.env)
    wall = time.monotonic() - start
    if res.get("failed"):
        raise SystemExit("gpu_host_info failed: %s" % res.get("msg"))
    stats = sim.stats()
    soap, rest = stats["soap"], stats.get("rest") or {}
    per_host = sum(soap["methods"].get(m, 0) for m in PER_HOST_METHODS)
    driver_calls = sum(soap["methods"].get(m, 0) for m in DRIVER_METHODS)
    compliance = sum(n for path, n in (rest.get("paths") or {}).items() if path.endswith(COMPLIANCE))
    total = soap["total"] + rest.get("total", 0)
    return dict(hosts=len(res["hosts"]), wall=wall, total=total, per_host=per_host, driver_calls=driver_calls,
                fixed=total - per_host, compliance=compliance, task=task_seconds(play.data), result=res)


def row(n, kind, label, m):
    print("%6d  %-9s %-18s %7.2f %7.2f %9d %10d %9d %11d" % (
        n, kind, label, m["task"], m["wall"], m["total"], m["fixed"], m["per_host"], m["compliance"]))


def baseline(sizes):
    rows = []
    for n in sizes:
        with vsphere_sim.start(vsphere_sim.fleet_of(n, vms_per_host=2, cluster="bench")) as sim:
            for label, args in (("default", {"cluster": "bench"}), ("vms", {"cluster": "bench", "gather": ["vms"]})):
                m = measure(sim, args)
                assert m["hosts"] == n, m
                rows.append((n, label, m))
                row(n, "baseline", label, m)
    return rows


def vlcm(sizes):
    rows = []
    for n in sizes:
        fleet = vsphere_sim.fleet_of(n, vms_per_host=2, cluster="bench")
        fleet["clusters"][0]["lifecycle"] = "vlcm"
        with vsphere_sim.start(fleet) as sim:
            for label, gather in (("default", None), ("driver,vms", ["driver", "vms"]), ("driver", ["driver"])):
                args = {"cluster": "bench"}
                if gather is not None:
                    args["gather"] = gather
                m = measure(sim, args)
                assert m["hosts"] == n, m
                rows.append((n, label, m))
                row(n, "vlcm", label, m)
            # one host drifts from the image: it alone is read per host, with its own driver
            first = m["result"]["hosts"][0]["name"]
            sim.set_driver(first, DRIFTED)
            m = measure(sim, {"cluster": "bench", "gather": ["driver", "vms"]})
            rows.append((n, "1 drifted", m))
            row(n, "vlcm", "driver,vms 1 drift", m)
            drifted = dict((h["name"], h) for h in m["result"]["hosts"])[first]
            if drifted["driver"]["full_version"] != DRIFTED or drifted["driver"].get("source") != "host":
                raise SystemExit("the drifted host is reported as %s" % drifted["driver"])
            if m["driver_calls"] != 1:
                raise SystemExit("expected one driver read for the one drifted host, got %d at %d hosts"
                                 % (m["driver_calls"], n))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256", help="host counts of the baseline-managed cluster ('' for none)")
    parser.add_argument("--vlcm-sizes", default="16,64", help="host counts of the image-managed cluster ('' for none)")
    opts = parser.parse_args()
    sizes = [int(x) for x in opts.sizes.split(",") if x]
    vlcm_sizes = [int(x) for x in opts.vlcm_sizes.split(",") if x]
    print("gpu_host_info benchmark (one cluster, 4 x H100-80GB and 2 vGPU VMs per host)")
    print("%6s  %-9s %-18s %7s %7s %9s %10s %9s %11s" % ("hosts", "cluster", "gather", "task s", "play s",
                                                          "requests", "not per-host", "per-host", "compliance"))
    failures = []
    rows = baseline(sizes)
    fixed = sorted({m["fixed"] for _, _, m in rows})
    if rows:
        print("baseline: requests other than the per-host methods, at every size: %s" % ", ".join(str(f) for f in fixed))
    if len(fixed) > 1:
        failures.append("the property retrieval requests grow with the number of hosts")
    for n, label, m in rows:
        if label == "default" and m["per_host"] != 2 * n:
            failures.append("expected exactly 2 per-host method calls per GPU host, got %d at %d hosts" % (m["per_host"], n))
    rows = vlcm(vlcm_sizes)
    flat = dict((n, m) for n, label, m in rows if label == "driver,vms")
    if flat:
        print("vlcm: requests of gather=[driver, vms] per size: %s" % ", ".join(
            "%d hosts: %d" % (n, m["total"]) for n, m in sorted(flat.items())))
    if len({m["total"] for m in flat.values()}) > 1:
        failures.append("requests grow with the number of hosts on a compliant image-managed cluster: %s"
                        % dict((n, m["total"]) for n, m in flat.items()))
    for n, label, m in rows:
        if label in ("driver,vms", "driver") and (m["driver_calls"] or m["compliance"] != 1):
            failures.append("compliant image-managed cluster, gather %s, %d hosts: %d per-host driver reads, "
                            "%d compliance reads" % (label, n, m["driver_calls"], m["compliance"]))
        if label == "default" and (m["driver_calls"] or m["per_host"] != n):
            failures.append("compliant image-managed cluster, default gather, %d hosts: %d per-host calls, "
                            "expected %d (the module options only)" % (n, m["per_host"], n))
    if failures:
        raise SystemExit("\n".join(failures))


if __name__ == "__main__":
    main()
