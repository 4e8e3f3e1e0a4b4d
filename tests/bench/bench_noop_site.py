"""Benchmark: what the no-op site.yml costs, per link and in all, on the example fleet and on a bigger one.

For each fleet: the vSphere simulator (with the GPU hosts' SSH, so MIG mode can be set), the Kubernetes rig as
Supervisor and guest, and the DLS double start as for the chain's tests (tests/lib/chain.py); site.yml converges
the design once, then runs again: the no-op, which must change nothing. During the no-op the simulator counts
every vSphere request (a callback, tests/bench/callback/bench_marks.py, reads its counts at every play's start,
so they are split per link), and a counting proxy (tests/bench/k8s_counting_proxy.py) in front of the rig's API
server counts the collection's Kubernetes requests by verb (the rig's own controllers are not counted; the power
bridge, which polls the simulator for the node VMs' power, is stopped after the converge, so that its polls are not
counted as the collection's requests either). Beside it, in the same run, the floor: as many ``ping`` tasks as
the no-op ran, and for each link the reads it must do, each once (``link_reads``): the ESXi link the GPU
inventory of each GPU cluster (gpu_host_info: its hosts, and the per-host driver and module option reads the
API has no batch form for); any other link that talks to vCenter one module call's floor (login, one
retrieval of the hosts and VMs, logout: tests/bench/library/bench_floor_call.py); one list of each Kubernetes
resource the link's no-op read (the kinds as the counting proxy saw them).

Printed per link (play) and in all: tasks, wall seconds, vSphere requests and their most frequent methods,
Kubernetes requests by verb, and the floor of that link's reads beside them; then the whole floor, and how
each vSphere method grows from the example fleet to the bigger one. It exits non-zero when the no-op changes
something, or when the vSphere requests grow with the hosts beyond the per-host methods the vSphere API has no
batch form for (PER_HOST).

    .venv/bin/python tests/bench/bench_noop_site.py [--extra-hosts 21]
"""
import argparse
import collections
import copy
import json
import os
import pathlib
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim")]

from tests.bench.k8s_counting_proxy import CountingProxy  # noqa: E402
from tests.lib import chain  # noqa: E402
from tests.lib.ansible_run import run_playbook  # noqa: E402

SITE = ROOT / "playbooks" / "site.yml"
DESIGN = ROOT / "examples" / "design.yml"
FLEET = ROOT / "examples" / "fleet.yml"
CALLBACKS = ROOT / "tests" / "bench" / "callback"
LIBRARY = ROOT / "tests" / "bench" / "library"  # bench_floor_call: login, one retrieval, logout
FLOOR_PREFIX = "floor: "
READ_VERBS = ("get", "list", "watch")
# vSphere methods with no batch form: one request per host is what the API allows (the host's installed
# packages, the nvidia module's option string); the paging of one retrieval grows with its objects
PER_HOST = ("fetchSoftwarePackages", "FetchSoftwarePackages", "QueryConfiguredModuleOptionString",
            "ContinueRetrievePropertiesEx")


def load_fleet():
    """examples/fleet.yml as data; ``power: off`` is YAML 1.1's false, given back as the word the simulator reads."""
    fleet = yaml.safe_load(FLEET.read_text())
    for vm in fleet.get("vms") or []:
        if isinstance(vm.get("power"), bool):
            vm["power"] = "on" if vm["power"] else "off"
    return fleet


def fleet_mig(fleet, cluster):
    """{host name: GPU indexes in MIG mode} of the named hosts of a fleet's cluster that run MIG."""
    for entry in fleet["clusters"]:
        if entry["name"] == cluster:
            return dict((h["name"], list(h["mig"])) for h in entry["hosts"] if h.get("name") and h.get("mig"))
    return {}


def grown(extra):
    """(fleet, design) of the example grown by ``extra`` GPU hosts, half to each GPU cluster, like its hosts
    without VMs (esx-h100-01's shape: full cards, MIG off; the L40S hosts' shape).

    The grown design pins the MIG geometry of each GPU cluster to the GPUs the fleet runs MIG on (by host
    name; the added hosts run none), so the converge has only the example's own drift to repair. Left to
    derive(), the geometry is spread over the new host positions ([[], [], [0, 1], [], [0, 1]] for five H100
    hosts): the roll would turn MIG off on esx-h100-04, whose MIG GPUs carry the node VMs inference-2 and -3,
    and those MIG-backed VMs could not be powered on again (their nodes never Ready)."""
    fleet = load_fleet()
    design = yaml.safe_load(DESIGN.read_text())
    h100, l40s = extra // 2, extra - extra // 2
    for cluster in fleet["clusters"]:
        if cluster["name"] == "gpu-h100" and h100:
            cluster["hosts"].append(dict(copy.deepcopy(cluster["hosts"][0]), prefix="esx-h100-x", count=h100))
        if cluster["name"] == "gpu-l40s" and l40s:
            cluster["hosts"].append(dict(copy.deepcopy(cluster["hosts"][0]), prefix="esx-l40s-x", count=l40s))
    for cluster in design["clusters"]:
        added = {"gpu-h100": h100, "gpu-l40s": l40s}.get(cluster["name"], 0)
        cluster["hosts"] += added
        mig = fleet_mig(fleet, cluster["name"])
        if added and mig and cluster.get("mig_geometry") is None:
            cluster["mig_geometry"] = mig
    return fleet, design


def failed_tasks(run):
    return [(name, (res.get("msg") or "")[:300]) for name, res in run.tasks if res.get("failed")
            and not res.get("ignore_errors")]


def marks(path):
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip()]


def delta(after, before):
    """{vSphere method or "REST <path>": requests} between two stats of the simulator."""
    out = collections.Counter()
    for method, n in after["soap"]["methods"].items():
        out[method] += n - before["soap"]["methods"].get(method, 0)
    for path, n in (after.get("rest") or {}).get("paths", {}).items():
        out["REST " + path] += n - ((before.get("rest") or {}).get("paths") or {}).get(path, 0)
    return collections.Counter(dict((k, v) for k, v in out.items() if v))


def per_play(run, mark_list, proxy):
    """[(play, tasks, wall s, vSphere Counter, Kubernetes verb Counter)] of one run, in play order."""
    rows = []
    tasks = collections.Counter()
    for play in (run.data or {}).get("plays", []):
        tasks[play["play"]["name"]] += sum(len(t.get("hosts", {})) for t in play.get("tasks", []))
    for i, mark in enumerate(mark_list[:-1]):
        nxt = mark_list[i + 1]
        verbs = collections.Counter(v for _t, v, _r in proxy.between(mark["time"], nxt["time"]))
        rows.append((mark["play"], tasks.get(mark["play"], 0), nxt["time"] - mark["time"],
                     delta(nxt["stats"], mark["stats"]), verbs))
    return rows


def k8s_reads(proxy, mark_list):
    """{play: sorted resources it read (get, list, watch; no subresource)} between the marks of one run."""
    out = {}
    for i, mark in enumerate(mark_list[:-1]):
        seen = proxy.between(mark["time"], mark_list[i + 1]["time"])
        out[mark["play"]] = sorted(set(r for _t, v, r in seen if v in READ_VERBS and r and "/" not in r))
    return out


def link_reads(play, vsphere, resources, clusters, kubeconfig, versions):
    """The reads one link must do, each once: the ESXi link the GPU inventory of each GPU cluster (its hosts and
    the per-host driver and module options reads); any other link that talks to vCenter one module call's floor
    (login, one retrieval of the hosts and VMs, logout); one list of each Kubernetes resource the link read."""
    tasks = []
    if play.startswith("Link 1"):
        tasks += [{"name": "inventory %s" % c, "gpupool.vcf.gpu_host_info": {"cluster": c}} for c in clusters]
    elif vsphere:
        tasks.append({"name": "one retrieval", "bench_floor_call": {}})
    for resource in resources:
        tasks.append({"name": "list %s" % resource, "kubernetes.core.k8s_info": {
            "kind": resource, "api_version": versions.get(resource) or "v1", "kubeconfig": str(kubeconfig)}})
    return tasks


def floor_play(tasks, rows, reads, clusters, kubeconfig, versions):
    """As many ping tasks as the no-op ran (one play), then one play per link of the reads it must do."""
    plays = [{"name": "floor: pings", "hosts": "localhost", "gather_facts": False,
              "tasks": [{"name": "ping %d" % i, "ansible.builtin.ping": None} for i in range(tasks)]}]
    for play, _tasks, _wall, vsphere, _k8s in rows:
        todo = link_reads(play, vsphere, reads.get(play, []), clusters, kubeconfig, versions)
        if todo:
            plays.append({"name": FLOOR_PREFIX + play, "hosts": "localhost", "gather_facts": False, "tasks": todo})
    return plays


def measure(label, fleet, design, tmp):
    """Converge, then the no-op with its figures, then the floor, on one platform."""
    tmp = pathlib.Path(tmp)
    design_file = tmp / "design.yml"
    design_file.write_text(yaml.safe_dump(design, sort_keys=False))
    sim = chain.vsphere_with_ssh(fleet, tmp / "ssh")
    try:
        with chain.platform(sim.env, tmp, ssh=sim) as (rig, _dls, env, extra):
            pki = rig.data_dir / "pki"
            proxy = CountingProxy(rig.server, pki / "ca.crt", pki / "apiserver.crt", pki / "apiserver.key").start()
            try:
                kubeconfig = proxy.kubeconfig(rig.kubeconfig, tmp / "counted.kubeconfig")
                os.chmod(kubeconfig, 0o600)
                extra = dict(extra, gpupool_design_file=str(design_file), gpupool_supervisor_kubeconfig=str(kubeconfig),
                             gpupool_guest_kubeconfig=str(kubeconfig))
                start = time.monotonic()
                run = run_playbook(SITE, env=env, extra_vars=extra, timeout=3600)
                print("%s: converge %s in %.0f s" % (label, "ok" if run.rc == 0 else "FAILED", time.monotonic() - start),
                      flush=True)
                if run.rc != 0:
                    raise SystemExit("%s: the converge failed: %s%s" % (label, failed_tasks(run), run.stderr[-2000:]))
                # the power bridge polls the simulator (3 requests a round, 0.3 s apart: more than the no-op's own
                # requests); the no-op and the floor power nothing off or on, so its nodes need no bridge from here
                rig.power_bridge.stop()
                mark_file = tmp / "marks.jsonl"
                bench_env = dict(env, BENCH_MARKS_FILE=str(mark_file), BENCH_SIM_URL="https://%s:%s" % (sim.host, sim.port),
                                 ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="bench_marks")
                sim.reset_stats()
                proxy.reset()
                start = time.monotonic()
                noop = run_playbook(SITE, env=bench_env, extra_vars=extra, timeout=3600)
                wall = time.monotonic() - start
                if noop.rc != 0:
                    raise SystemExit("%s: the no-op failed: %s%s" % (label, failed_tasks(noop), noop.stderr[-2000:]))
                changed = [name for name, res in noop.tasks if res.get("changed")]
                noop_marks = marks(mark_file)
                rows = per_play(noop, noop_marks, proxy)
                reads = k8s_reads(proxy, noop_marks)
                mark_file.unlink()
                sim.reset_stats()
                proxy.reset()
                clusters = [c["name"] for c in design["clusters"]]
                start = time.monotonic()
                plays = floor_play(len(noop.tasks), rows, reads, clusters, kubeconfig, dict(proxy.api_versions))
                floor = run_playbook(plays, env=dict(bench_env, ANSIBLE_LIBRARY=str(LIBRARY)), timeout=1800)
                floor_wall = time.monotonic() - start
                if floor.rc != 0:
                    raise SystemExit("%s: the floor failed: %s" % (label, failed_tasks(floor)))
                floor_rows = per_play(floor, marks(mark_file), proxy)
            finally:
                proxy.stop()
    finally:
        sim.stop()
    hosts = sum(c["hosts"] for c in design["clusters"])
    return dict(label=label, hosts=hosts, wall=wall, rows=rows, changed=changed, tasks=len(noop.tasks),
                floor_wall=floor_wall, floor_rows=floor_rows, reads=reads)


def top(counter, n=5):
    return ", ".join("%s %d" % kv for kv in counter.most_common(n)) or "-"


def not_discovery(counter):
    """Kubernetes requests other than API discovery."""
    return sum(n for verb, n in counter.items() if verb != "discovery")


def verbs(counter):
    return " ".join("%s=%d" % kv for kv in sorted(counter.items())) or "-"


def report(m):
    print("\n== no-op site.yml on %s (%d GPU hosts): %.1f s, %d tasks =="
          % (m["label"], m["hosts"], m["wall"], m["tasks"]))
    print("%-58s %5s %7s %6s %5s  %s" % ("link (play)", "tasks", "wall s", "vsph", "k8s", "k8s by verb"))
    vs_all, k8s_all = collections.Counter(), collections.Counter()
    floors = dict((r[0][len(FLOOR_PREFIX):], r) for r in m["floor_rows"] if r[0] != "floor: pings")
    for play, tasks, wall, vs, k8s in m["rows"]:
        vs_all.update(vs)
        k8s_all.update(k8s)
        print("%-58s %5d %7.2f %6d %5d  %s" % (play[:58], tasks, wall, sum(vs.values()), sum(k8s.values()), verbs(k8s)))
        if vs:
            print("%-58s   vSphere: %s" % ("", top(vs, 4)))
        floor = floors.get(play)
        if floor is not None:
            # k8s_info discovers the API groups in every task: the floor is its reads, discovery aside
            f_vs, f_k8s = sum(floor[3].values()), not_discovery(floor[4])
            print("%-58s   floor of its reads: %d tasks %.2f s, %d vSphere, %d Kubernetes reads (%s); no-op/floor: "
                  "vSphere %.1fx, Kubernetes (discovery aside) %.1fx" % (
                      "", floor[1], floor[2], f_vs, f_k8s, verbs(floor[4]), sum(vs.values()) / float(max(f_vs, 1)),
                      not_discovery(k8s) / float(max(f_k8s, 1))))
            if m["reads"].get(play):
                print("%-58s   Kubernetes resources read: %s" % ("", ", ".join(m["reads"][play])))
    print("%-58s %5d %7.2f %6d %5d  %s" % ("in all", m["tasks"], m["wall"], sum(vs_all.values()), sum(k8s_all.values()),
                                           verbs(k8s_all)))
    print("vSphere by method: %s" % top(vs_all, 12))
    floor_vs = sum(sum(r[3].values()) for r in m["floor_rows"])
    floor_k8s = sum(not_discovery(r[4]) for r in m["floor_rows"])
    pings = [r for r in m["floor_rows"] if r[0] == "floor: pings"]
    reads = [r for r in m["floor_rows"] if r[0] != "floor: pings"]
    print("floor (same run): %d pings %.1f s; the reads of every link %.1f s, %d vSphere requests and %d Kubernetes "
          "reads (discovery aside); "
          "whole floor %.1f s" % (m["tasks"], sum(r[2] for r in pings), sum(r[2] for r in reads), floor_vs, floor_k8s,
                                  m["floor_wall"]))
    print("no-op / floor: wall %.2fx, vSphere requests %.1fx, Kubernetes requests (discovery aside) %.1fx" % (
        m["wall"] / max(m["floor_wall"], 0.001), sum(vs_all.values()) / float(max(floor_vs, 1)),
        not_discovery(k8s_all) / float(max(floor_k8s, 1))))
    if m["changed"]:
        print("CHANGED on the no-op: %s" % m["changed"])
    return vs_all


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-hosts", type=int, default=21,
                        help="GPU hosts the bigger fleet adds to the example (7 + 21 = 28 by default)")
    args = parser.parse_args()
    example = (load_fleet(), yaml.safe_load(DESIGN.read_text()))
    results, totals = [], []
    fleets = (("the example", example), ("the example + %d" % args.extra_hosts, grown(args.extra_hosts)))
    for label, (fleet, design) in fleets:
        with tempfile.TemporaryDirectory() as tmp:
            results.append(measure(label, fleet, design, tmp))
        totals.append(report(results[-1]))  # each fleet's figures as soon as they are in
        sys.stdout.flush()
    small, big = results
    added = big["hosts"] - small["hosts"]
    growth = dict((k, totals[1][k] - totals[0][k]) for k in set(totals[0]) | set(totals[1])
                  if totals[1][k] != totals[0][k])
    print("\n== vSphere requests from %d to %d GPU hosts (+%d) ==" % (small["hosts"], big["hosts"], added))
    for method, n in sorted(growth.items(), key=lambda kv: -abs(kv[1])):
        print("%-50s %+5d  (%+.2f per added host)%s"
              % (method, n, n / float(added), "" if method in PER_HOST else "  <- grows with the hosts"))
    failures = ["the no-op on %s changed: %s" % (m["label"], m["changed"]) for m in results if m["changed"]]
    beyond = dict((k, v) for k, v in growth.items() if k not in PER_HOST and v > 0)
    if beyond:
        failures.append("vSphere requests grow with the hosts beyond the per-host methods: %s" % top(
            collections.Counter(beyond), 20))
    if failures:
        raise SystemExit("\n".join(failures))


if __name__ == "__main__":
    main()
