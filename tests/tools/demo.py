"""make demo: the example design converged end to end against the simulators.

Steps, each printed with its time:
  0. first contact, once the simulators of step 1 are up: playbooks/preflight.yml with the example design
     (the go / no-go table per link) and playbooks/discover.yml (the discovered design's summary, or why
     there is none yet: the example platform has GPU hosts but no VM class with a vGPU before its first
     converge); both only read, and step 3 discovers the converged platform again
  1. simulators up (vSphere with examples/fleet.yml, the Kubernetes rig, the DLS appliance double);
     the rig is both the Supervisor API and the guest cluster, and holds the VKS cluster
     gpu-workloads as the platform team created it (no GPU node pools yet); the GPU hosts' SSH
     serves a key pair of the demo's own (.sim/demo/ssh), their TSM-SSH services stopped
  2. site.yml on examples/design.yml: changes
  3. site.yml again: nothing left to change (changed=0); the per-card MIG geometry, host by host
     (gpu_host_info: each GPU's MIG mode and the VMs on it), as the design's mig_geometry asks
  4. audit: clean, every link, with the licensing health (the DLS appliance double reachable, its
     license server and leases, the client token's validity)
  5. drift: one host's NVIDIA driver changed behind the collection's back; the host carries the
     node VM of a guest node (inference-3)
  6. audit: names the drifted host
  7. site.yml: repairs it through the drain path (the guest node cordoned and drained, its VM
     powered off, driver, reboot, VM powered on, node Ready, uncordoned); the audit is clean again
  7b. MIG drift: GPU 3 of the same host put in MIG mode behind the collection's back; site.yml reads it
     from vCenter and sets it back with nvidia-smi in the host's drained turn, the host's SSH service
     started for it and stopped again; the geometry printed again
  8. capacity: vGPU slots per cluster and profile, the spare rule with the largest host down, pending
     GPU pods and Kueue admission waits (playbooks/capacity.yml); vCenter's own capacity figures beside
     ours for gpu-h100 - on the demo's 8.0.3 vCenter the reason they are not read, then the example fleet
     as it starts on a 9.1 presentation of its own (DirectPathProfileManagerQueryCapacity)
  8b. HA restart order: the ha_gpu_restart role on the example's clusters from the demo's own copy of the
     example design with ha.manage on (.sim/demo/ha/design.yml), each pool's restart priority in order; the
     host the spare rule takes down fails in the simulator, vSphere HA restarts its VMs by priority where a
     card has room and names what stays off; the host comes back (HA restarts those on it)
  9. chargeback: GPU-hours per tenant, pool and vGPU profile of the GPU pods the tenants ran since the
     first converge (Prometheus, kube-state-metrics and the DCGM double of the rig), and vGPU-hours of
     the VMs outside Kubernetes since the simulators came up, priced per profile-hour
     (playbooks/chargeback.yml; the example design with a chargeback block of card prices)
  10. observability: playbooks/observability.yml writes the design's Prometheus rules and Grafana
     dashboards (ConfigMaps for Grafana's dashboard sidecar, applied to the guest cluster); the rig's
     Prometheus loads the rules, one tenant pod's vGPU turns unlicensed behind the collection's back
     and GpuNodeUnlicensed fires (its windows shortened to seconds)

The guest nodes follow their VMs' power (tests/sim/power_bridge.py): a node whose VM is off is
NotReady, as the kubelet of a real node VM would make it.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import urllib.request

import yaml
from kubernetes import client

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "sim"), str(ROOT / "tests" / "sim" / "dls"), str(ROOT / ".build" / "collections")]

import dls_double  # noqa: E402
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi  # noqa: E402
import k8s_rig  # noqa: E402
import power_bridge  # noqa: E402
import vsphere_sim  # noqa: E402
from tests.lib import chain  # noqa: E402
from tests.lib.ansible_run import ansible_env, run_module, run_playbook  # noqa: E402

# the H100 host that carries the node VM inference-3 (examples/fleet.yml): its repair drains the guest node
DRIFT_HOST = "esx-h100-04"
DRIFT_NODE = "inference-3"
DRIFT_VERSION = "550.54.10-1OEM.800.1.0.20613240"
# a GPU of the same host without a VM, MIG mode off in the design: turned on behind the collection's back
DRIFT_GPU = 3
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def banner(step, text):
    print("\n" + "=" * 100, flush=True)
    print("== step %s: %s" % (step, text), flush=True)
    print("=" * 100, flush=True)


def playbook(name, env, extra=None, show=True, may_fail=False):
    """Run a playbook with the default screen output; return ({host: changed}, output) (with may_fail,
    ({host: changed}, output, failed) instead of stopping the demo when it fails)."""
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
    if may_fail:
        return changed, text, rc != 0 or any(failed.values())
    if rc != 0 or any(failed.values()):
        raise SystemExit("demo: %s failed (rc %s)" % (name, rc))
    return changed, text


def design_summary(path):
    """One line per part of a discovered design: clusters, pools, VKS clusters, tenants, guest settings."""
    design = yaml.safe_load(pathlib.Path(path).read_text())
    lines = ["clusters: %s" % ", ".join("%s (%d hosts x %d %s, driver %s, %s)" % (
        c["name"], c["hosts"], c["gpu"]["per_host"], c["gpu"]["model"], c["driver"]["version"], c["driver"]["lifecycle"])
        for c in design["clusters"])]
    lines.append("pools: %s" % ", ".join("%s (%s, %s, %s, %d nodes)" % (
        p["name"], p["sharing"], p["vgpu_profile"], p["vm_class"]["name"], p["node_pool"]["replicas"])
        for p in design["pools"]))
    lines.append("vks_clusters: %s" % ", ".join("%s in %s" % (v["name"], v["namespace"]) for v in design["vks_clusters"]))
    lines.append("tenants: %s" % ", ".join("%s %s" % (t["name"], json.dumps(t["gpu_quota"], sort_keys=True))
                                          for t in design.get("tenants") or []))
    if design.get("guest"):
        lines.append("guest: %s" % json.dumps(design["guest"], sort_keys=True))
    comments = sum(1 for line in pathlib.Path(path).read_text().splitlines() if line.lstrip().startswith("#"))
    lines.append("%d comment line(s) say what the platform could not tell" % comments)
    return lines


def first_contact(env, site, kube, dest):
    """preflight.yml with the example design (the go / no-go table), then discover.yml into ``dest``; the
    discovered design's summary, or the reason there is none. Neither changes the platform."""
    pre = dict((k, v) for k, v in site.items() if k.startswith("gpupool_dls_"))
    pre.update(preflight_kubeconfig=kube["audit_kubeconfig"], preflight_supervisor_kubeconfig=kube["audit_supervisor_kubeconfig"],
               gpupool_preflight_fail=False)
    changed, _text = playbook("preflight.yml", env, pre)
    if sum(changed.values()):
        raise SystemExit("demo: preflight changed %s" % changed)
    changed, text, failed = playbook("discover.yml", env, dict(
        gpupool_discover_output=str(dest), gpupool_discover_force=True, gpupool_discover_name="lab-gpupool",
        gpupool_discover_kubeconfig=kube["audit_kubeconfig"],
        gpupool_discover_supervisor_kubeconfig=kube["audit_supervisor_kubeconfig"]), may_fail=True)
    if failed:
        reason = re.search(r'"msg": "([^"]+)"', text)
        if not reason or "there is no GPU pool to describe" not in reason.group(1):
            raise SystemExit("demo: discover.yml failed: %s" % (reason.group(1) if reason else "see above"))
        print("\n>> discovery: nothing to describe yet, nothing written: %s" % reason.group(1))
        return None
    print("\n>> discovered design %s:" % dest)
    for line in design_summary(dest):
        print(">>   " + line)
    return dest


def geometry(env):
    """Print the per-card MIG geometry of every GPU cluster of the design, one line per host (gpu_host_info:
    each GPU's MIG mode and the VMs on it), and check it against the design's mig_geometry.
    Returns {host off the design: [its GPU indexes in MIG mode]}."""
    clusters = chain.derived()["esxi"]["clusters"]
    found, off = {}, {}
    for name, cluster in clusters.items():
        res = run_module("gpupool.vcf.gpu_host_info", {"cluster": name, "gather": ["vms"]}, env=env)[0]
        if res.get("failed"):
            raise SystemExit("demo: gpu_host_info failed on cluster %s: %s" % (name, res.get("msg")))
        hosts = sorted((h for h in res["hosts"] if h.get("gpu_count")), key=lambda h: h["name"])
        wanted = _esxi.mig_geometry_for(cluster["mig_geometry"], [h["name"] for h in hosts])
        print("cluster %s (design mig_geometry %s):" % (name, json.dumps(cluster["mig_geometry"])))
        for host in hosts:
            cards = []
            for gpu in sorted(host["gpus"], key=lambda g: g["index"]):
                vms = ", ".join(v["name"] for v in gpu.get("vms") or []) or "-"
                cards.append("GPU %d MIG %-3s [%s]" % (gpu["index"], "on" if gpu["mig"] == "enabled" else "off", vms))
            found[host["name"]] = [g["index"] for g in host["gpus"] if g["mig"] == "enabled"]
            print("  %-14s %s%s" % (host["name"], " | ".join(cards),
                                    "" if sorted(found[host["name"]]) == wanted[host["name"]] else
                                    "   << design: MIG on GPU %s" % (wanted[host["name"]] or "none")))
        off.update((h, found.get(h, [])) for h in wanted if sorted(found.get(h, [])) != wanted[h])
    return off


def vcenter_figures(env, report, cluster="gpu-h100"):
    """vCenter's own capacity figure beside ours for the example's cluster: the demo's vCenter presents API
    8.0.3, which has no DirectPathProfileManagerQueryCapacity, so the report says why it was not read; the
    example fleet as it starts, on a 9.1 presentation of its own, shows the figures side by side."""
    vc = report.get("vcenter_capacity") or {}
    if not vc.get("read") and not vc.get("reason"):
        raise SystemExit("demo: the capacity report neither read vCenter's figures nor said why")
    print(">> vCenter's own figures on the demo's vCenter (API %s): %s" % (
        vc.get("api_version"), "read" if vc.get("read") else "not read - %s" % vc.get("reason")))
    sim91 = vsphere_sim.start(ROOT / "examples" / "fleet.yml", api_version="9.1")
    try:
        res = run_module("gpupool.vcf.gpu_capacity", {"cluster": cluster}, env=dict(env, **sim91.env))[0]
    finally:
        sim91.stop()
    if res.get("failed"):
        raise SystemExit("demo: gpu_capacity failed on the 9.1 presentation: %s" % res.get("msg"))
    vc = res["vcenter_capacity"]
    if not vc["read"] or cluster not in vc["clusters"]:
        raise SystemExit("demo: vCenter's capacity figures were not read on the 9.1 presentation: %s" % vc["reason"])
    print(">> the example fleet as it starts, on a vCenter presenting API %s (%d QueryCapacity call): "
          "ours total/used/free beside vCenter's max/consumed/remaining (unused reservation)" % (
              vc["api_version"], vc["calls"]))
    for profile, row in (vc["clusters"].get(cluster) or {}).items():
        ours, theirs = row["ours"], row["vcenter"]
        print(">>   %s %-20s ours %s/%s/%s   vCenter %s" % (
            cluster, profile, ours["total"], ours["used"], ours["free"],
            "%s/%s/%s (%s)" % (theirs["max"], theirs["consumed"], theirs["remaining"], theirs["unused_reservation"])
            if theirs else "unknown: %s" % row["unknown"]))
    for f in res["findings"]:
        print(">>   finding: %s" % f["message"])
    if not res["findings"]:
        print(">>   vCenter's figures agree with ours")


HA_RANK = ("highest", "high", "medium", "low", "lowest", "disabled")


def ha_restart_order(env, sim, report_dir, spare):
    """vSphere HA as the spare: the ha_gpu_restart role on the example's clusters from the demo's own copy
    of the example design with ha.manage on, each pool's restart priority, then the host the spare rule
    takes down (capacity report of step 8) fails through the simulator; HA restarts its VMs by priority
    where a card has room, the rest stay off; the host comes back and HA restarts those on it."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_derive import derive

    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    for c in design["clusters"]:
        if c["name"] in ("gpu-h100", "gpu-l40s"):
            c["ha"] = {"manage": True}
    (report_dir / "ha").mkdir(parents=True, exist_ok=True)
    design_file = report_dir / "ha" / "design.yml"
    design_file.write_text(yaml.safe_dump(design, sort_keys=False))
    clusters = derive(design)["roles"]["ha_gpu_restart"]["ha_gpu_restart_clusters"]
    print(">> %s (ha.manage: true on %s): HA restart priority per pool, in restart order" % (
        design_file.relative_to(ROOT), ", ".join(c["name"] for c in clusters)))
    for c in clusters:
        pools = sorted(c["pools"], key=lambda p: HA_RANK.index(p["restart_priority"]))
        ac = c.get("admission_control") or {}
        print(">>   %-9s %s; admission control: %s%% CPU, %s%% memory kept for %s host failure(s)" % (
            c["name"], " > ".join("%s %s (%s)" % (p["name"], p["restart_priority"], p["vgpu_profile"]) for p in pools),
            ac.get("cpu_percent"), ac.get("memory_percent"), ac.get("failover_level")))
    play = [{"name": "HA restart priorities", "hosts": "localhost", "gather_facts": False,
             "roles": [{"role": "gpupool.vcf.ha_gpu_restart"}]}]
    run = run_playbook(play, env=env, extra_vars={"ha_gpu_restart_clusters": clusters})
    results = [r for n, r in run.tasks if n.endswith("one reconfigure per cluster")]
    if run.rc != 0 or not results:
        raise SystemExit("demo: the ha_gpu_restart role failed (rc %s): %s" % (run.rc, run.stdout[-2000:]))
    for r in results[0].get("results", []):
        print(">>   role on %s: %d override(s) added, %d updated, HA %s, admission control %s" % (
            r[r.get("ansible_loop_var", "item")]["name"], len(r["added"]), len(r["updated"]),
            "on" if r["admission_control"].get("ha_enabled") else "off",
            "on" if r["admission_control"].get("admission_control") else "off"))
    host = (spare.get("gpu-h100") or {}).get("host_down") or "esx-h100-03"
    predicted = [vm for g in (spare.get("gpu-h100") or {}).get("short", []) for vm in g["vms"]]
    rec = sim.fail_host(host)
    print("\n>> %s fails (the spare rule's largest host down): %d powered-on VM(s) off: %s" % (
        host, len(rec["powered_off"]), ", ".join(rec["powered_off"])))
    for i, r in enumerate(rec["restarted"], 1):
        print(">>   restarted %d. %-18s %-8s on %s, %.4f s after the failure" % (
            i, r["vm"], r["priority"], r["host"], r["seconds_after_failure"]))
    for r in rec["stayed_off"]:
        full = re.findall(r"no GPU of host (\S+) can hold vGPU ([\w.-]+)", r["reason"])
        why = ("no card with room on %s for %s" % (", ".join(h for h, _p in full), full[0][1])) if full else r["reason"]
        print(">>   stayed off: %-16s %-8s %s" % (r["vm"], r["priority"], why))
    print(">>   the spare rule of step 8 predicted short: %s" % (", ".join(predicted) or "none"))
    order = [HA_RANK.index(r["priority"]) for r in rec["restarted"]]
    if not rec["ha_enabled"] or order != sorted(order):
        raise SystemExit("demo: HA did not restart %s's VMs in restart-priority order: %s" % (host, rec["restarted"]))
    back = sim.recover_host(host)
    again = [r for r in back["restarted"] if r.get("on_recovery")]
    print(">> %s connected again: HA restarted %s; still off: %s" % (
        host, ", ".join("%s on %s" % (r["vm"], r["host"]) for r in again) or "nothing",
        ", ".join(r["vm"] for r in back["stayed_off"]) or "none"))


def audit(env, report, kube):
    playbook("audit.yml", env, dict(kube, audit_report=report, audit_report_format="json"))
    return json.loads(pathlib.Path(report).read_text())


# the tenants' GPU pods (namespace, name, node): bound to nodes the repair does not drain
TENANT_PODS = [("team-search", "search-serve", "inference-0"), ("team-vision", "vision-serve", "inference-1"),
               ("team-vision", "vision-train", "training-0"), ("research", "nb-alice", "notebooks-0"),
               ("research", "nb-bob", "notebooks-1")]
# card prices for the example design (its chargeback block is left out of examples/design.yml)
CARD_HOUR = {"H100-80GB": 4.00, "L40S": 1.20}


# the VMs outside Kubernetes of examples/fleet.yml, by the vSphere Namespace that runs them
NAMESPACE_VMS = {"team-search": ["llm-inference-01", "llm-inference-02", "llm-inference-03", "embedding-01"],
                 "team-vision": ["llm-training-01"], "research": ["notebook-01", "notebook-02"]}


def namespace_pools(sim):
    """What a Supervisor keeps for its vSphere Namespaces (the simulator's namespace API does not):
    a resource pool per namespace under the cluster's Namespaces pool; the VMs of NAMESPACE_VMS moved
    into theirs (notebook-03 and -04 stay outside any namespace)."""
    import ssl

    from pyVim import connect
    from pyVmomi import vim
    si = connect.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password,
                              sslContext=ssl.create_default_context(cafile=sim.ca_file))
    try:
        content = si.RetrieveContent()
        view = content.viewManager.CreateContainerView(content.rootFolder,
                                                       [vim.VirtualMachine, vim.ClusterComputeResource], True)
        objs = dict((o.name, o) for o in view.view)
        view.DestroyView()
        alloc = vim.ResourceAllocationInfo(limit=-1, reservation=0, expandableReservation=True,
                                           shares=vim.SharesInfo(level="normal", shares=0))
        spec = vim.ResourceConfigSpec(cpuAllocation=alloc, memoryAllocation=alloc)
        tops, made = {}, []
        for ns, vms in NAMESPACE_VMS.items():
            for name in vms:
                cluster = objs[name].runtime.host.parent
                if cluster.name not in tops:
                    tops[cluster.name] = (cluster.resourcePool.CreateResourcePool("Namespaces", spec), {})
                top, pools = tops[cluster.name]
                if ns not in pools:
                    pools[ns] = top.CreateResourcePool(ns, spec)
                    made.append("%s/Namespaces/%s" % (cluster.name, ns))
                # the simulator has no MoveIntoResourcePool; a relocation to the pool does the same
                task = objs[name].RelocateVM_Task(vim.vm.RelocateSpec(pool=pools[ns]))
                while task.info.state not in ("success", "error"):
                    time.sleep(0.05)
                if task.info.state != "success":
                    raise SystemExit("demo: moving %s into %s failed: %s" % (name, ns, task.info.error))
        return ", ".join(made)
    finally:
        connect.Disconnect(si)


def tenant_pods(rig):
    """Start one GPU pod per entry of TENANT_PODS (1 nvidia.com/gpu each); returns their names."""
    core = client.CoreV1Api(rig.api_client())
    for ns, name, node in TENANT_PODS:
        core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                     "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}})
    return ["%s/%s on %s" % p for p in TENANT_PODS]


def chargeback(env, rig, report_dir, period_start):
    design = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
    design["chargeback"] = {"currency": "EUR", "card_hour": CARD_HOUR}
    design_file = report_dir / "design-priced.yml"
    design_file.write_text(yaml.safe_dump(design, sort_keys=False))
    out = report_dir / "chargeback"
    playbook("chargeback.yml", env, dict(
        chargeback_prometheus_url=rig.prometheus_url, chargeback_design_file=str(design_file),
        chargeback_start="%d" % period_start, chargeback_end="now", chargeback_step="5s",
        chargeback_vcenter_hostname=env["VMWARE_HOST"], chargeback_output_dir=str(out)), show=False)
    rep = json.loads((out / "gpu-usage.json").read_text())
    cur = rep["currency"]
    print("%s to %s, every %d s; reports: %s" % (rep["start"], rep["end"], rep["step_s"],
                                                 ", ".join(str((out / n).relative_to(ROOT)) for n in
                                                           ("gpu-usage.json", "gpu-usage.csv", "gpu-usage.html"))))
    print("\nGPU pods (Prometheus): GPU-hours per tenant, pool and vGPU profile")
    print("  %-12s %-10s %-18s %-15s %10s %8s %12s %10s" % ("tenant", "pool", "vGPU profile", "resource",
                                                          "GPU-hours", "engine", "price/h", "cost"))
    for r in rep["rows"]:
        print("  %-12s %-10s %-18s %-15s %10.4f %8s %12s %10s" % (
            r["namespace"], r["pool"], r["profile"], r["resource"], r["gpu_hours"],
            "" if r["engine_active"] is None else "%.0f %%" % (100 * r["engine_active"]),
            "" if r["unit_price"] is None else "%.4f %s" % (r["unit_price"], cur),
            "" if r["cost"] is None else "%.4f %s" % (r["cost"], cur)))
    print("\nvGPU VMs outside Kubernetes (vSphere): vGPU-hours per vSphere Namespace and profile")
    print("  %-12s %-18s %4s %10s %12s %10s" % ("namespace", "vGPU profile", "VMs", "vGPU-hours", "price/h", "cost"))
    for r in rep["vm_rows"]:
        print("  %-12s %-18s %4d %10.4f %12s %10s" % (
            r["namespace"], r["profile"], r["vms"], r["vgpu_hours"],
            "" if r["unit_price"] is None else "%.4f %s" % (r["unit_price"], cur),
            "" if r["cost"] is None else "%.4f %s" % (r["cost"], cur)))
    print("  left out as Kubernetes nodes (counted through their pods): %s" % ", ".join(rep["vms_left_out"]))
    print("\n>> chargeback: pods %.4f GPU-hours (%.4f %s), VMs %.4f vGPU-hours (%.4f %s), in all %.4f %s"
          % (rep["gpu_hours"], rep["cost"], cur, rep["vgpu_vm_hours"], rep["vm_cost"], cur, rep["total_cost"], cur))
    if len(rep["rows"]) < 3 or not rep["vm_rows"] or not rep["gpu_hours"]:
        raise SystemExit("demo: the chargeback counted no GPU pods or no vGPU VMs")


def observability(env, rig, report_dir):
    """playbooks/observability.yml: the rules file and the dashboards' ConfigMaps (applied to the rig);
    the rig's Prometheus loads the rules, one tenant pod's GPU loses its licence behind the collection's
    back (the DCGM double reports status 0) and GpuNodeUnlicensed goes pending, then fires. The alerts'
    windows are shortened (options interval and unlicensed_for) so the demo takes seconds."""
    out = report_dir / "observability"
    _, text = playbook("observability.yml", env, dict(
        observability_output_dir=str(out), observability_dashboard_kind="ConfigMap",
        observability_kubeconfig=str(rig.kubeconfig), observability_options={"interval": "1s", "unlicensed_for": "5s"}),
        show=False)
    for msg in re.findall(r'"msg": "((?:Prometheus rules|Grafana dashboards)[^"]*)"', text):
        print(">> %s" % msg)
    maps = client.CoreV1Api(rig.api_client()).list_namespaced_config_map("monitoring", label_selector="grafana_dashboard=1")
    print(">> in the guest cluster, for Grafana's dashboard sidecar: %s" % ", ".join(
        "monitoring/%s (%d panels)" % (m.metadata.name, len(json.loads(list(m.data.values())[0])["panels"]))
        for m in maps.items))
    rules = out / "gpupool-rules.yml"
    config_path = rig.data_dir / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    config["rule_files"] = [str(rules)]
    config_path.write_text(yaml.safe_dump(config))
    rig.procs["prometheus"].send_signal(signal.SIGHUP)  # Prometheus reloads its configuration on SIGHUP
    groups = set(g["name"] for g in yaml.safe_load(rules.read_text())["groups"])
    prom_wait(rig, "the rule groups loaded", lambda: groups <= set(g["name"] for g in prom_api(rig, "/api/v1/rules")["groups"]))
    print(">> the rig's Prometheus (%s) loaded %d rule groups from %s" % (rig.prometheus_url, len(groups), rules))
    labelled = {n.metadata.name: (n.metadata.labels or {}).get("gpupool.vcf/pool")
                for n in client.CoreV1Api(rig.api_client()).list_node().items}
    drifted = [(ns, pod, node) for ns, pod, node in TENANT_PODS if labelled.get(node)]
    if not drifted:
        raise SystemExit("demo: no tenant pod runs on a node with a pool label")
    ns, pod, node = drifted[0]
    rig.dcgm_workload.write_text(yaml.safe_dump({"default": {}, "pods": [{"namespace": ns, "pod": pod, "license_status": 0}]}))
    print(">> drift: the vGPU of %s/%s on %s (pool %s) reports license status 0 (unlicensed)" % (ns, pod, node, labelled[node]))
    seen = []

    def firing():
        alerts = [a for a in prom_api(rig, "/api/v1/alerts")["alerts"]
                  if a["labels"].get("alertname") == "GpuNodeUnlicensed" and a["labels"].get("node") == node]
        for a in alerts:
            if a["state"] not in seen:
                seen.append(a["state"])
                print(">> GpuNodeUnlicensed %s at %s" % (a["state"], time.strftime("%H:%M:%S")))
        return [a for a in alerts if a["state"] == "firing"]

    alert = prom_wait(rig, "GpuNodeUnlicensed firing for %s" % node, firing)[0]
    print(">> firing: %s {%s}\n   %s" % (alert["labels"]["alertname"], ", ".join(
        "%s=%s" % kv for kv in sorted(alert["labels"].items()) if kv[0] != "alertname"), alert["annotations"]["summary"]))
    rig.dcgm_workload.write_text("default: {}\npods: []\n")


def prom_api(rig, path):
    with urllib.request.urlopen(rig.prometheus_url + path, timeout=10) as answer:
        return json.loads(answer.read())["data"]


def prom_wait(rig, what, check, timeout=120):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise SystemExit("demo: %s did not happen within %d s (Prometheus %s)" % (what, timeout, rig.prometheus_url))


def main():
    steps = []
    t0 = time.monotonic()

    def timed(label, start):
        steps.append((label, time.monotonic() - start))

    banner(1, "simulators up")
    start = time.monotonic()
    report_dir = ROOT / ".sim" / "demo"
    report_dir.mkdir(parents=True, exist_ok=True)
    # the hosts' SSH (nvidia-smi sets MIG mode) serves the demo's own key pair
    sim = chain.vsphere_with_ssh(ROOT / "examples" / "fleet.yml", report_dir / "ssh")
    env = dict(sim.env)
    print("vSphere simulator: %s (fleet examples/fleet.yml, CA %s; host SSH for key %s, TSM-SSH services %s)"
          % (sim.url, env["VMWARE_CA_FILE"], sim.key, ", ".join(sorted(set(
              sim.ssh_service(h) for h in sim.ssh_addresses())))))
    rig = dls = bridge = plugins = None
    try:
        # the rig's kwok nodes stand for the VMs of the design's node pools
        # with metrics: Prometheus scraping kube-state-metrics and the DCGM double, for the chargeback
        rig = k8s_rig.start(nodes_file=chain.nodes_file(report_dir / "nodes.yml"), metrics=True)
        # the device plugin of the time-sliced nodes (tests/sim/device_plugin_double.py), as the chain runs it:
        # the gpu_operator role restarts it node by node after its ConfigMap
        plugins = chain.device_plugins(rig.kubeconfig, report_dir / "device-plugin-double.log")
        plugins.__enter__()
        period_start = time.time()
        print("Prometheus, kube-state-metrics and the DCGM double up in %.1f s: %s"
              % (rig.timings.get("metrics_s", 0), rig.prometheus_url))
        print("vSphere Namespaces' resource pools, as a Supervisor keeps them: %s" % namespace_pools(sim))
        print("Kubernetes rig: %s (the Supervisor API and the guest cluster; %s)" % (rig.server, rig.kubeconfig))
        made = chain.platform_clusters(rig.api_client())
        chain.kueue_as_released(rig.api_client(), rig.data_dir / "kueue.yml")
        print("VKS cluster(s) %s created as the platform team's existing cluster: a control plane, "
              "no GPU node pools yet" % ", ".join(made))
        dls = dls_double.start()
        print("DLS appliance double: https://%s:%s" % (dls.host, dls.port))
        site = chain.site_vars(rig.kubeconfig, dls, report_dir / "tokens")
        site.update(chain.ssh_vars(sim))
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

        banner(0, "first contact: preflight and discover on the example platform, before any converge")
        start = time.monotonic()
        first_contact(env, site, kube, report_dir / "discovered-before.yml")
        timed("preflight + discover", start)

        banner(2, "site.yml on examples/design.yml")
        start = time.monotonic()
        changed, _ = playbook("site.yml", env, site)
        total = sum(changed.values())
        print("\n>> first converge: %d change(s)" % total)
        if total == 0:
            raise SystemExit("demo: the first converge changed nothing; the example fleet should start drifted")
        pods = tenant_pods(rig)
        print(">> GPU pods of the tenants, running from now on: %s" % ", ".join(pods))
        timed("site.yml (converge)", start)

        banner(3, "site.yml again: nothing left to change")
        start = time.monotonic()
        changed, _ = playbook("site.yml", env, site)
        print("\n>> second run: changed=%d" % sum(changed.values()))
        if sum(changed.values()):
            raise SystemExit("demo: the second run changed %s" % changed)
        print("\n>> per-card MIG geometry (gpu_host_info):")
        off = geometry(env)
        if off:
            raise SystemExit("demo: MIG mode off the design after the converge on %s" % json.dumps(off))
        print("\n>> the converged platform discovered (playbooks/discover.yml, the guest read too):")
        if first_contact(env, site, kube, report_dir / "discovered-after.yml") is None:
            raise SystemExit("demo: discovery of the converged platform found no GPU pool")
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

        banner("7b", "MIG drift: GPU %d of %s put in MIG mode behind the collection's back" % (DRIFT_GPU, DRIFT_HOST))
        start = time.monotonic()
        sim.set_gpu(DRIFT_HOST, DRIFT_GPU, mig=True)
        print(">> MIG mode off the design on: %s" % json.dumps(geometry(env)))
        seen = len(bridge.changes)
        changed, text = playbook("site.yml", env, site)
        print("\n>> MIG repair: %d change(s)" % sum(changed.values()))
        sets = re.findall(r'to roll: [^"]*?(%s \(MIG mode [^:]*)' % re.escape(DRIFT_HOST), text)
        print(">> the roll: %s)" % sets[0] if sets else ">> no MIG change of %s was reported" % DRIFT_HOST)
        print(">> SSH service of %s after the repair: %s" % (DRIFT_HOST, sim.ssh_service(DRIFT_HOST)))
        print(">> node VMs of %s during the repair: %s" % (DRIFT_HOST, ", ".join(
            "%s %s" % c for c in bridge.changes[seen:]) or "none went down"))
        print("\n>> per-card MIG geometry after the repair:")
        off = geometry(env)
        if off or sim.ssh_service(DRIFT_HOST) != "stopped" or not sum(changed.values()):
            raise SystemExit("demo: the MIG repair did not set GPU %d of %s back (or left its SSH service running)"
                             % (DRIFT_GPU, DRIFT_HOST))
        timed("site.yml (MIG repair)", start)

        banner(8, "capacity: vGPU slots per profile and the spare rule on the live fleet")
        start = time.monotonic()
        playbook("capacity.yml", env, dict(capacity_kubeconfig=str(rig.kubeconfig),
                                           capacity_output_dir=str(report_dir / "capacity")), show=False)
        summary = (report_dir / "capacity" / "gpu-capacity.md").read_text()
        print(summary)
        report = json.loads((report_dir / "capacity" / "gpu-capacity.json").read_text())
        vcenter_figures(env, report)
        timed("capacity summary", start)

        banner("8b", "HA restart order: the spare rule's host fails, vSphere HA restarts by pool priority")
        start = time.monotonic()
        ha_restart_order(env, sim, report_dir, report.get("spare") or {})
        timed("HA restart order", start)

        banner(9, "chargeback: GPU-hours per tenant and profile, vGPU VM-hours, priced per profile-hour")
        start = time.monotonic()
        chargeback(env, rig, report_dir, period_start)
        timed("chargeback", start)

        banner(10, "observability: rules and dashboards from the design, one alert firing on a drift")
        start = time.monotonic()
        observability(env, rig, report_dir)
        timed("observability", start)
    finally:
        if plugins:
            plugins.__exit__(None, None, None)
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
