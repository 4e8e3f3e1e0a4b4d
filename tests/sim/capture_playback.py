"""Playback of a capture (docs/capture.md): the vSphere simulator's fleet built from a capture's vSphere
section, so what a user sends starts a simulator in the shape of their platform.

The fleet is the one fleet.go loads from examples/fleet.yml (tests/sim/vsphere/README.md has its schema):
the clusters (Supervisor where the capture names one, vLCM where the driver came from the cluster's image),
each host with its GPUs (model and count), driver version, graphics default and policy, nvidia module options,
the GPUs in MIG mode, the vGPU mode, maintenance mode, SSH service and lockdown mode, and the vGPU VMs with
their profiles and power state. What the fleet schema cannot say (hosts of mixed GPU models, per-GPU graphics
types, VM classes, namespaces) is not played back here; :func:`unplayed` names what a capture holds that the
fleet leaves out, so a test can say so instead of passing on a narrower platform.
"""
import json
import os

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi

SUPPORTED_FORMATS = (1,)


def load(path: str | os.PathLike) -> dict:
    """The capture at ``path``; ValueError for a format this loader does not know."""
    with open(path, encoding="utf-8") as fh:
        record = json.load(fh)
    if record.get("format_version") not in SUPPORTED_FORMATS:
        raise ValueError("capture %s has format_version %r; this loader reads %s"
                         % (path, record.get("format_version"), list(SUPPORTED_FORMATS)))
    return record


def _host(rec: dict) -> dict:
    host = {"name": rec["name"]}
    gpus = rec.get("gpus") or []
    if gpus:
        host["gpu"] = {"model": gpus[0]["model"], "count": len(gpus)}
    driver = rec.get("driver") or {}
    if driver.get("full_version") and driver.get("source") != "image":
        host["driver_version"] = driver["full_version"]
    graphics = rec.get("graphics") or {}
    if graphics.get("default_type"):
        host["graphics"] = {"default": _esxi.GRAPHICS_API_BY_WORD.get(graphics["default_type"], graphics["default_type"]),
                            "policy": graphics.get("assignment_policy")}
    if isinstance(rec.get("nvidia_module_options"), str) and rec["nvidia_module_options"]:
        host["nvidia_options"] = rec["nvidia_module_options"]
    mig = [g["index"] for g in gpus if g.get("mig") == "enabled"]
    if mig:
        host["mig"] = mig
    if any(g.get("configured_vgpu_mode") == "mixedSize" for g in gpus):
        host["vgpu_mode"] = "mixed_size"
    if rec.get("maintenance_mode"):
        host["maintenance"] = True
    if rec.get("ssh_service") == "running":
        host["ssh"] = "running"
    if rec.get("lockdown_mode") in ("normal", "strict"):
        host["lockdown"] = rec["lockdown_mode"]
    return host


def fleet_from_capture(record: dict, datacenter: str = "DC0") -> dict:
    """The simulator fleet (a dict for vsphere_sim.start) of a capture's vSphere section."""
    vs = record["vsphere"]
    supervisors = set((vs.get("cluster_names") or {}).values())
    clusters, order, vms = {}, [], []
    for rec in vs["hosts"]:
        name = rec.get("cluster")
        if name not in clusters:
            order.append(name)
            clusters[name] = {"name": name, "supervisor": name in supervisors, "hosts": []}
        if (rec.get("driver") or {}).get("source") == "image":
            clusters[name]["lifecycle"] = "vlcm"
        clusters[name]["hosts"].append(_host(rec))
        # the VMs in turns over the GPUs that hold them (the simulator places each VM of the fleet, in order,
        # on the least loaded GPU that fits): the first VM of each GPU, then the second...; the others after
        rank = {}
        for gpu in rec.get("gpus") or []:
            for position, held in enumerate(gpu.get("vms") or []):
                key = (position, gpu["index"])
                rank[held.get("name")] = min(rank.get(held.get("name"), key), key)
        last = (len(rank) + 1, 0)
        for vm in sorted(rec.get("vgpu_vms") or [], key=lambda v: (rank.get(v["name"], last), v["name"])):
            entry = {"name": vm["name"], "host": rec["name"], "vgpu": list(vm.get("vgpu_profiles") or [])}
            if vm.get("power_state") != "poweredOn":
                entry["power"] = "off"
            vms.append(entry)
    return {"datacenter": datacenter, "clusters": [clusters[n] for n in order], "vms": vms}


def unplayed(record: dict) -> list[str]:
    """What the capture's vSphere section holds that the fleet does not play back, one line each."""
    out = []
    vs = record["vsphere"]
    for rec in vs["hosts"]:
        if len(set(g["model"] for g in rec.get("gpus") or [])) > 1:
            out.append("host %s: GPUs of more than one model" % rec["name"])
    if vs.get("vm_classes"):
        out.append("%d VM classes (REST objects, made after the start)" % len(vs["vm_classes"]))
    if vs.get("namespaces"):
        out.append("%d Supervisor namespaces (REST objects, made after the start)" % len(vs["namespaces"]))
    return out
