"""Benchmark: the requests preflight and discover send to vSphere, and the time they take, on the example
platform and on 256 simulated GPU hosts.

Each platform gets its own simulator. The example one is examples/fleet.yml; the large one is the same
shape grown to 256 GPU hosts (96 H100 hosts, 96 L40S hosts, 64 more H100 hosts in a third cluster). On
both, the VM classes and Supervisor namespaces of examples/design.yml are made through the REST API (as a
platform team would have made them by hand), so discovery has pools to describe. gpu_pool_preflight (with
examples/design.yml) and gpu_pool_discover run through ansible-playbook, as users run them; the simulator
counts every request it answers (SOAP methods and REST paths). Printed per platform and module: wall time of
the module task, of the whole ansible-playbook process, SOAP and REST requests, the per-host calls (driver
packages and module options, which the vSphere API offers only per host), and the requests that change
state (must be 0: both only read).

    .venv/bin/python tests/bench/bench_first_contact.py [--hosts 256]
"""
import argparse
import copy
import pathlib
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

import tests.conftest  # noqa: E402,F401 pylint: disable=unused-import - the collection's import path
import vsphere_sim  # noqa: E402
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive  # noqa: E402
from tests.bench.bench_gpu_host_info import task_seconds  # noqa: E402
from tests.integration.test_gpu_pool_discover import CLASSES, NAMESPACES, Rest, changing  # noqa: E402
from tests.lib.ansible_run import run_module  # noqa: E402

PER_HOST = ("fetchSoftwarePackages", "FetchSoftwarePackages", "QueryConfiguredModuleOptionString")
DESIGN = ROOT / "examples" / "design.yml"


def big_fleet(hosts):
    """examples/fleet.yml grown to ``hosts`` GPU hosts (at most 96 a cluster, as vSphere allows)."""
    fleet = yaml.safe_load((ROOT / "examples" / "fleet.yml").read_text())
    h100, l40s = copy.deepcopy(fleet["clusters"][0]["hosts"][0]), copy.deepcopy(fleet["clusters"][1]["hosts"][0])
    left, clusters = hosts, []
    for name, template in (("gpu-h100", h100), ("gpu-l40s", l40s), ("gpu-h100-b", h100)):
        count = min(96, left) if name != "gpu-h100-b" else left
        left -= count
        clusters.append({"name": name, "supervisor": name != "gpu-h100-b",
                         "hosts": [dict(template, prefix="esx-%s-" % name[4:], count=count)]})
    fleet["clusters"] = clusters + [c for c in fleet["clusters"] if c["name"] == "mgmt"]
    fleet["vms"] = []
    return fleet


def build_example_by_hand(sim):
    """The example design's VM classes and namespaces, made through the REST API (not the collection)."""
    derived = derive(yaml.safe_load(DESIGN.read_text()))
    rest = Rest(sim)
    try:
        moid = dict((c["cluster_name"], c["cluster"])
                    for c in rest.call("GET", "/api/vcenter/namespace-management/clusters"))[derived["vsphere"]["namespaces"][0]["cluster"]]
        policies = dict((p["name"], p["policy"]) for p in rest.call("GET", "/api/vcenter/storage/policies"))
        for vc in derived["vsphere"]["vm_classes"]:
            rest.call("POST", CLASSES, {"id": vc["name"], "cpu_count": vc["cpu_count"], "memory_MB": vc["memory_mb"],
                                        "memory_reservation": 100, "description": vc["description"],
                                        "devices": {"vgpu_devices": [{"profile_name": p} for p in vc["vgpu_profiles"]]}})
        for ns in derived["vsphere"]["namespaces"]:
            policy = policies.get(ns["storage_policies"][0]["policy"]) or sorted(policies.values())[0]
            rest.call("POST", NAMESPACES, {
                "cluster": moid, "namespace": ns["name"], "description": ns["description"],
                "vm_service_spec": {"vm_classes": list(ns["vm_classes"])},
                "storage_specs": [{"policy": policy}],
                "access_list": [{"subject_type": a["type"], "domain": a["domain"], "subject": a["subject"],
                                 "role": a["role"]} for a in ns["access"]]})
    finally:
        rest.close()


def measure(sim, module, args):
    sim.reset_stats()
    before = sim.stats()
    start = time.monotonic()
    res, play = run_module(module, args, env=sim.env)
    wall = time.monotonic() - start
    stats = sim.stats()
    soap, rest = stats["soap"], stats.get("rest") or {}
    return dict(wall=wall, task=task_seconds(play), soap=soap["total"], rest=rest.get("total", 0),
                per_host=sum(soap["methods"].get(m, 0) for m in PER_HOST), writes=sum(changing(before, stats).values()),
                failed=res.get("msg") if res.get("failed") else None, result=res)


def platform(label, fleet, out):
    rows = []
    with vsphere_sim.start(fleet) as sim:
        build_example_by_hand(sim)
        pre = measure(sim, "gpupool.vcf.gpu_pool_preflight", {"design_file": str(DESIGN)})
        rows.append((label, "preflight", pre))
        dest = pathlib.Path(out) / ("%s.yml" % label.replace(" ", "-"))
        disc = measure(sim, "gpupool.vcf.gpu_pool_discover", {"dest": str(dest), "force": True})
        rows.append((label, "discover", disc))
        hosts = sum(c.get("hosts", 0) for c in (disc["result"].get("design") or {}).get("clusters") or [])
        print("%s: %d GPU hosts discovered; preflight go: %s" % (label, hosts, (pre["result"].get("go"))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=256, help="GPU hosts of the large platform")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        rows = platform("example", ROOT / "examples" / "fleet.yml", out)
        rows += platform("%d hosts" % args.hosts, big_fleet(args.hosts), out)
    print("\n%-10s %-10s %7s %7s %6s %6s %9s %7s  %s" % ("platform", "module", "task s", "play s", "soap", "rest",
                                                         "per-host", "writes", "result"))
    failures = []
    for label, module, m in rows:
        print("%-10s %-10s %7.2f %7.2f %6d %6d %9d %7d  %s" % (label, module, m["task"] or 0, m["wall"], m["soap"],
                                                               m["rest"], m["per_host"], m["writes"],
                                                               "failed: %s" % m["failed"][:80] if m["failed"] else "ok"))
        if m["writes"]:
            failures.append("%s on %s sent %d requests that change state" % (module, label, m["writes"]))
        if module == "discover" and m["failed"]:
            failures.append("discover on %s failed: %s" % (label, m["failed"]))
    if failures:
        raise SystemExit("\n".join(failures))


if __name__ == "__main__":
    main()
