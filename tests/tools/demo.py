"""make demo: the example design converged end to end against the simulators.

Steps, each printed with its time:
  1. simulators up (vSphere with examples/fleet.yml, the Kubernetes rig, the DLS appliance double);
     the rig is both the Supervisor API and the guest cluster, and holds the VKS cluster
     gpu-workloads as the platform team created it (no GPU node pools yet)
  2. site.yml on examples/design.yml: changes
  3. site.yml again: nothing left to change (changed=0)
  4. audit: clean, every link, with the licensing health (the DLS appliance double reachable, its
     license server and leases, the client token's validity)
  5. drift: one host's NVIDIA driver changed behind the collection's back; the host carries the
     node VM of a guest node (inference-3)
  6. audit: names the drifted host
  7. site.yml: repairs it through the drain path (the guest node cordoned and drained, its VM
     powered off, driver, reboot, VM powered on, node Ready, uncordoned); the audit is clean again
  8. capacity: vGPU slots per cluster and profile, the spare rule with the largest host down, pending
     GPU pods and Kueue admission waits (playbooks/capacity.yml)

The guest nodes follow their VMs' power (tests/sim/power_bridge.py): a node whose VM is off is
NotReady, as the kubelet of a real node VM would make it.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import yaml
from kubernetes import client

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim"), str(ROOT / "tests" / "sim" / "dls"), str(ROOT / ".build" / "collections")]

import dls_double  # noqa: E402
import k8s_rig  # noqa: E402
import power_bridge  # noqa: E402
import vsphere_sim  # noqa: E402
from tests.lib import chain  # noqa: E402
from tests.lib.ansible_run import ansible_env  # noqa: E402

# the H100 host that carries the node VM inference-3 (examples/fleet.yml): its repair drains the guest node
DRIFT_HOST = "esx-h100-04"
DRIFT_NODE = "inference-3"
DRIFT_VERSION = "550.54.10-1OEM.800.1.0.20613240"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def banner(step, text):
    print("\n" + "=" * 100, flush=True)
    print("== step %s: %s" % (step, text), flush=True)
    print("=" * 100, flush=True)


def playbook(name, env, extra=None, show=True):
    """Run a playbook with the default screen output; return (rc, {host: changed}, output)."""
    cmd = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(ROOT / "examples" / "inventory.yml"),
           str(ROOT / "playbooks" / name), "-e", json.dumps(extra or {})]
    run_env = ansible_env(env)
    run_env["ANSIBLE_STDOUT_CALLBACK"] = "default"
    run_env["ANSIBLE_DISPLAY_SKIPPED_HOSTS"] = "false"
    proc = subprocess.Popen(cmd, env=run_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in proc.stdout:
        out.append(line)
        if show:
            sys.stdout.write(line)
    rc = proc.wait()
    text = "".join(out)
    changed = {m.group(1): int(m.group(3)) for m in RECAP.finditer(text)}
    failed = {m.group(1): int(m.group(5)) for m in RECAP.finditer(text)}
    if rc != 0 or any(failed.values()):
        raise SystemExit("demo: %s failed (rc %s)" % (name, rc))
    return changed, text


def audit(env, report, kube):
    playbook("audit.yml", env, dict(kube, audit_report=report, audit_report_format="json"))
    return json.loads(pathlib.Path(report).read_text())


def main():
    steps = []
    t0 = time.monotonic()

    def timed(label, start):
        steps.append((label, time.monotonic() - start))

    banner(1, "simulators up")
    start = time.monotonic()
    sim = vsphere_sim.start(ROOT / "examples" / "fleet.yml")
    env = dict(sim.env)
    print("vSphere simulator: %s (fleet examples/fleet.yml, CA %s)" % (sim.url, env["VMWARE_CA_FILE"]))
    report_dir = ROOT / ".sim" / "demo"
    report_dir.mkdir(parents=True, exist_ok=True)
    rig = dls = bridge = None
    try:
        # the rig's kwok nodes stand for the VMs of the design's node pools
        rig = k8s_rig.start(nodes_file=chain.nodes_file(report_dir / "nodes.yml"))
        print("Kubernetes rig: %s (the Supervisor API and the guest cluster; %s)" % (rig.server, rig.kubeconfig))
        made = chain.platform_clusters(rig.api_client())
        chain.kueue_as_released(rig.api_client(), rig.data_dir / "kueue.yml")
        print("VKS cluster(s) %s created as the platform team's existing cluster: a control plane, "
              "no GPU node pools yet" % ", ".join(made))
        dls = dls_double.start()
        print("DLS appliance double: https://%s:%s" % (dls.host, dls.port))
        site = chain.site_vars(rig.kubeconfig, dls, report_dir / "tokens")
        kube = {"audit_kubeconfig": str(rig.kubeconfig), "audit_supervisor_kubeconfig": str(rig.kubeconfig)}
        # the audit's licensing link: the appliance and the token folder site.yml uses
        kube.update((k, v) for k, v in site.items() if k.startswith("gpupool_dls_") or k == "gpupool_token_dir")
        env["PATH"] = rig.env["PATH"]
        nodes = set(n.metadata.name for n in client.CoreV1Api(rig.api_client()).list_node().items)
        fleet = yaml.safe_load((ROOT / "examples" / "fleet.yml").read_text())
        node_vms = sorted(nodes & set(vm["name"] for vm in fleet["vms"]))
        bridge = power_bridge.Bridge(sim, rig.api_client(), dict((n, n) for n in node_vms)).start()
        print("guest nodes that follow the power of their node VMs: %s" % ", ".join(node_vms))
        timed("simulators up", start)

        banner(2, "site.yml on examples/design.yml")
        start = time.monotonic()
        changed, _ = playbook("site.yml", env, site)
        total = sum(changed.values())
        print("\n>> first converge: %d change(s)" % total)
        if total == 0:
            raise SystemExit("demo: the first converge changed nothing; the example fleet should start drifted")
        timed("site.yml (converge)", start)

        banner(3, "site.yml again: nothing left to change")
        start = time.monotonic()
        changed, _ = playbook("site.yml", env, site)
        print("\n>> second run: changed=%d" % sum(changed.values()))
        if sum(changed.values()):
            raise SystemExit("demo: the second run changed %s" % changed)
        timed("site.yml (no-op rerun)", start)

        banner(4, "audit: the pool matches the design")
        start = time.monotonic()
        # one lease per GPU node, as the guest drivers would hold them once licensed
        gpu_nodes = [n for n in client.CoreV1Api(rig.api_client()).list_node().items
                     if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true"]
        dls.set_leases(len(gpu_nodes))
        result = audit(env, str(report_dir / "audit-clean.json"), kube)
        print("\n>> audit: %s (links audited: %s)" % ("clean" if result["clean"] else "DRIFT",
                                                     ", ".join(result.get("audited") or [])))
        print(">> licensing health: %s" % json.dumps((result.get("summary") or {}).get("link", {}).get("licensing")))
        for f in result["findings"]:
            if f.get("link") == "licensing":
                print(">>   %s %s: %s" % (f["rule"], f["object"], f["message"]))
        if not result["clean"]:
            raise SystemExit("demo: the audit after the converge is not clean")
        timed("audit (clean)", start)

        banner(5, "drift: %s gets NVIDIA driver %s behind the collection's back" % (DRIFT_HOST, DRIFT_VERSION))
        start = time.monotonic()
        sim.set_driver(DRIFT_HOST, DRIFT_VERSION)
        print("simulator: %s now reports %s" % (DRIFT_HOST, sim.host_state(DRIFT_HOST).get("driver_version")))
        timed("drift injected", start)

        banner(6, "audit: names the drift")
        start = time.monotonic()
        report = report_dir / "audit-drift.md"
        playbook("audit.yml", env, dict(kube, audit_report=str(report), audit_report_format="markdown"))
        text = report.read_text()
        print("\n>> report %s:\n" % report.relative_to(ROOT))
        print(text)
        if DRIFT_HOST not in text or "driver_off_design" not in text:
            raise SystemExit("demo: the audit did not name %s" % DRIFT_HOST)
        timed("audit (drift found)", start)

        banner(7, "site.yml repairs it")
        start = time.monotonic()
        seen = len(bridge.changes)
        changed, text = playbook("site.yml", env, site)
        print("\n>> repair: %d change(s)" % sum(changed.values()))
        turns = re.findall(r'"msg": "(%s: [^"]*pods moved[^"]*)"' % re.escape(DRIFT_HOST), text)
        print(">> %s" % (turns[0] if turns else "no turn of %s was reported" % DRIFT_HOST))
        if ("host-roll/%s" % DRIFT_HOST) in json.dumps(
                client.CoreV1Api(rig.api_client()).read_node(DRIFT_NODE).metadata.annotations or {}):
            raise SystemExit("demo: %s is still cordoned after the repair" % DRIFT_NODE)
        drained = [c for c in bridge.changes[seen:] if c[0] == DRIFT_NODE]
        print(">> node VM %s during the repair: %s" % (DRIFT_NODE, " then ".join(c[1] for c in drained) or "never went down"))
        if [c[1] for c in drained] != ["off", "on"]:
            raise SystemExit("demo: the repair did not take %s's node VM down and up" % DRIFT_HOST)
        result = audit(env, str(report_dir / "audit-repaired.json"), kube)
        print(">> audit after the repair: %s" % ("clean" if result["clean"] else "DRIFT"))
        if not result["clean"] or not sum(changed.values()):
            raise SystemExit("demo: the repair did not bring the pool back to the design")
        timed("site.yml (repair) + audit", start)

        banner(8, "capacity: vGPU slots per profile and the spare rule on the live fleet")
        start = time.monotonic()
        playbook("capacity.yml", env, dict(capacity_kubeconfig=str(rig.kubeconfig),
                                           capacity_output_dir=str(report_dir / "capacity")), show=False)
        summary = (report_dir / "capacity" / "gpu-capacity.md").read_text()
        print(summary)
        timed("capacity summary", start)
    finally:
        if bridge:
            bridge.stop()
        if dls:
            dls.stop()
        if rig:
            rig.stop()
        sim.stop()

    print("\n" + "=" * 100)
    print("demo finished in %.0f s" % (time.monotonic() - t0))
    for label, seconds in steps:
        print("  %-32s %6.1f s" % (label, seconds))


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
