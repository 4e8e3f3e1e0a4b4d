# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU inventory of ESXi hosts, read with a fixed number of PropertyCollector retrievals.

:func:`read_gpu_inventory` is the I/O part (used by ``gpu_host_info``, the host roles and
the audit); :func:`host_record` and :func:`cluster_summary` are pure and unit-tested.

Requests made for one call:

* one retrieval of cluster names (plus one ContainerView create/destroy), with whether vLCM
  manages each cluster with a single image (``lifecycleManaged``);
* one retrieval of hosts and VMs under the chosen scope (with each host's ``config.graphicsInfo``: per
  GPU its current vGPU mode and the VMs vSphere placed on it; its SSH service and lockdown mode); with
  ``namespaces`` the same retrieval also takes each VM's resource pool and the resource pools' names and
  parents, so a vGPU VM carries its vSphere Namespace (the pool under ``Namespaces``, as a Supervisor keeps it);
* one retrieval of the hosts' graphics managers (``graphicsConfig``);
* with the driver asked for and a REST session offered, for each image-managed cluster with
  connected GPU hosts in scope: one read of the cluster's image compliance (plus the REST
  login and logout, once). A host that runs the image (``_vlcm.image_driver``: compliant, no
  reboot owed, scanned since its last boot) has the image's NVIDIA component as its driver;
* for each connected host that has an NVIDIA GPU, and only when asked for, one
  ``FetchSoftwarePackages`` (driver version; not for the hosts the image answered for) and one
  ``QueryConfiguredModuleOptionString`` (scheduler). The vSphere API offers these two only as
  per-host methods, with no property and no batched form, so they run concurrently.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from concurrent.futures import ThreadPoolExecutor

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback, _esxi, _nvidia, _vlcm
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vlcm_api import VlcmApi
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import (
    VsphereError,
    VsphereFault,
    VsphereNotFound,
    vim,
)

NVIDIA_VENDOR_ID = 0x10DE
NVIDIA_MODULE = "nvidia"
GATHER_CHOICES = ("driver", "scheduler", "vms")

# what every read of a host takes: its place, state, boot and the collection's record on it
HOST_STATE_PROPERTIES = [
    "name",
    "parent",
    "runtime.inMaintenanceMode",
    "runtime.connectionState",
    "runtime.bootTime",
    "summary.rebootRequired",
    "customValue",
]
HOST_PROPERTIES = HOST_STATE_PROPERTIES + [
    "hardware.pciDevice",
    "config.graphicsInfo",
    "config.sharedGpuCapabilities",
    "config.sharedPassthruGpuTypes",
    "configManager.graphicsManager",
    "configManager.imageConfigManager",
    "configManager.kernelModuleSystem",
    # the per-GPU view (graphicsInfo: vgpuMode, the VMs on each GPU) comes with config.graphicsInfo above;
    # the SSH service and lockdown mode come in the same retrieval
    "config.service",
    "config.lockdownMode",
]
VM_PROPERTIES = ["name", "runtime.host", "runtime.powerState", "config.hardware.device", "config.uuid"]
CLUSTER_PROPERTIES = ["name", "host", "lifecycleManaged"]
SSH_SERVICE = "TSM-SSH"
# HostGraphicsInfoVgpuMode_enum (API 8.0.3: none, sameSize, mixedSize, multiInstanceGpu): a GPU whose MIG
# mode is on reads multiInstanceGpu
VGPU_MODE_MIG = "multiInstanceGpu"
DRIVER_FROM_HOST = "host"
DRIVER_FROM_IMAGE = "image"


def _u16(value):
    """PCI ids come back as signed shorts from the SOAP layer."""
    return int(value) & 0xFFFF


def is_nvidia_gpu(pci):
    # class 0x03xx = display controller; NVIDIA's switches and audio functions are not GPUs
    class_id = _u16(getattr(pci, "classId", 0x0300) or 0x0300)
    return _u16(pci.vendorId) == NVIDIA_VENDOR_ID and (class_id >> 8) == 0x03


def gpu_model_name(device_id, device_name):
    """The catalog name of a GPU (H100-80GB), or the PCI device name for a model we do not know."""
    try:
        return _nvidia.gpu_model(device_id).name
    except _nvidia.NvidiaError:
        return device_name


def scheduler_dict(policy):
    """A decoded RmPVMRL value as plain data for module results."""
    return dict(
        policy=policy.policy,
        time_slice_ms=policy.time_slice_ms,
        strict_round_robin=policy.strict_round_robin,
        averaging_factor=policy.averaging_factor,
        frequency_hz=policy.frequency_hz,
        rmpvmrl=_nvidia.format_rmpvmrl(policy.value),
        canonical_rmpvmrl=policy.hex,
    )


def driver_from_packages(packages):
    """(short version, full version, packages) of the NVIDIA host driver, or Nones.

    The version is read as an NVIDIA driver version (``_esxi.parse_driver_version``): a
    package whose version is not one (a tool or a plugin of the vendor) is not the driver.
    """
    nvidia = [p for p in packages or [] if "nvidia" in (getattr(p, "vendor", "") or "").lower()]
    listing = [dict(name=p.name, version=p.version, vendor=p.vendor) for p in nvidia]
    for pkg in nvidia:
        if not (pkg.name.upper().startswith("NVD") or "driver" in pkg.name.lower()):
            continue
        try:
            version = _esxi.parse_driver_version(pkg.version)
        except _esxi.EsxiError:
            continue
        return version.short, version.text, listing
    return None, None, listing


def driver_from_image(component, version):
    """The driver triple of :func:`driver_from_packages` for a host that runs the cluster's image:
    the image's NVIDIA component stands in the package listing."""
    return version.short, version.text, [dict(name=component, version=version.text, vendor="NVIDIA")]


def vgpu_profiles_of(devices):
    profiles = []
    for dev in devices or []:
        backing = getattr(dev, "backing", None)
        vgpu = getattr(backing, "vgpu", None)
        if vgpu:
            profiles.append(vgpu)
    return profiles


def vgpu_mode_of(ginfo):
    """The GPU's current vGPU mode (``graphicsInfo.vgpuMode``), or None where the API does not report it
    (before vSphere API 8.0.3, or no graphics info for the GPU)."""
    mode = getattr(ginfo, "vgpuMode", None) if ginfo is not None else None
    return str(mode) if mode else None


def mig_of(vgpu_mode):
    """``enabled`` / ``disabled`` (the GPU's current MIG mode, read from its vGPU mode), None when unknown."""
    if vgpu_mode is None:
        return None
    return _esxi.mig_word(vgpu_mode == VGPU_MODE_MIG)


def ssh_service_of(service_info):
    """``running`` / ``stopped`` of the host's SSH service (``TSM-SSH`` in ``config.service``), ``unknown``
    when the host does not list it (not read, or a host without the service)."""
    for svc in getattr(service_info, "service", None) or []:
        if getattr(svc, "key", None) == SSH_SERVICE:
            return "running" if getattr(svc, "running", False) else "stopped"
    return "unknown"


def lockdown_word(mode):
    """The host's lockdown mode (``lockdownDisabled``, ``lockdownNormal``, ``lockdownStrict``), None unknown."""
    return str(mode) if mode else None


def gpu_vms(nvidia, info_by_pci, vms):
    """Per GPU (in ``nvidia``'s order) the VMs ``graphicsInfo[].vm`` places on it, each ``{name, moid,
    profiles}``; None for every GPU when ``vms`` (the host's vGPU VMs) was not read.

    vSphere names the VMs of each GPU but not which of a VM's vGPU devices is there: a VM listed on k
    GPUs has its vGPU profiles (in device order) given to them in turn, one each (a VM on one GPU has
    all of them there). A VM the host's VM list lacks is named by its managed object id.
    """
    if vms is None:
        return [None] * len(nvidia)
    by_moid = dict((vm["moid"], vm) for vm in vms)
    listed = []
    for pci in nvidia:
        ginfo = info_by_pci.get(pci.id)
        listed.append([getattr(ref, "_moId", None) for ref in (getattr(ginfo, "vm", None) or [])])
    cards_of = {}
    for index, moids in enumerate(listed):
        for moid in moids:
            if index not in cards_of.setdefault(moid, []):
                cards_of[moid].append(index)
    out = []
    for index, moids in enumerate(listed):
        entries = []
        for moid in sorted(set(moids), key=lambda m: ((by_moid.get(m) or {}).get("name") or m or "", m or "")):
            vm = by_moid.get(moid)
            profiles = list((vm or {}).get("vgpu_profiles") or [])
            cards = cards_of[moid]
            position = cards.index(index)
            mine = [p for j, p in enumerate(profiles) if j % len(cards) == position]
            entries.append(dict(name=(vm or {}).get("name") or moid, moid=moid, profiles=mine))
        out.append(entries)
    return out


def host_record(host, cluster_name, graphics_config, vms, driver=None, module_options=None, errors=None, state=None,
                driver_source=DRIVER_FROM_HOST):
    """The per-host dict that gpu_host_info returns (pure: takes already-read values).

    ``state``: the collection's record on the host (``_esxi.HOST_STATE_FIELD``, parsed).
    ``driver_source``: where ``driver`` was read, the host's packages (``host``) or the
    cluster's image compliance (``image``).
    """
    info_by_pci = dict((g.pciId, g) for g in host.get("config.graphicsInfo") or [])
    device_types, device_modes = {}, {}
    if graphics_config is not None:
        for dt in graphics_config.deviceType or []:
            device_types[dt.deviceId] = _esxi.graphics_word(dt.graphicsType)
            device_modes[dt.deviceId] = getattr(dt, "vgpuMode", None) or None
    gpus = []
    # index: the GPU's position among the host's NVIDIA GPUs in PCI order, as nvidia-smi numbers them
    nvidia = sorted((pci for pci in host.get("hardware.pciDevice") or [] if is_nvidia_gpu(pci)),
                    key=lambda pci: str(pci.id).lower())
    on_gpu = gpu_vms(nvidia, info_by_pci, vms)
    for index, pci in enumerate(nvidia):
        ginfo = info_by_pci.get(pci.id)
        mem_kb = getattr(ginfo, "memorySizeInKB", None) if ginfo is not None else None
        mode = vgpu_mode_of(ginfo)
        gpus.append(dict(
            index=index,
            pci_id=pci.id,
            device_id="0x%04x" % _u16(pci.deviceId),
            device_name=pci.deviceName,
            model=gpu_model_name(_u16(pci.deviceId), pci.deviceName),
            memory_mb=int(mem_kb // 1024) if mem_kb else None,
            graphics_type=device_types.get(pci.id),
            active_graphics_type=_esxi.graphics_word(ginfo.graphicsType) if ginfo is not None else None,
            vgpu_mode=mode,
            configured_vgpu_mode=device_modes.get(pci.id),
            mig=mig_of(mode),
            vms=on_gpu[index],
        ))
    models = sorted(set(g["model"] for g in gpus))
    record = dict(
        name=host["name"],
        moid=host.moid,
        cluster=cluster_name,
        connection_state=str(host.get("runtime.connectionState")),
        maintenance_mode=bool(host.get("runtime.inMaintenanceMode")),
        gpu_count=len(gpus),
        gpu_model=models[0] if len(models) == 1 else (", ".join(models) or None),
        gpus=gpus,
        graphics=None,
        vgpu_profiles=sorted(c.vgpu for c in host.get("config.sharedGpuCapabilities") or []),
        vgpu_vms=vms,
        errors=errors or [],
        reboot_required=bool(host.get("summary.rebootRequired")),
        reboot_pending=_esxi.pending_reboot(host.get("summary.rebootRequired"), host.get("runtime.bootTime"), state),
        maintenance_by_collection=(state or {}).get("maintenance") if host.get("runtime.inMaintenanceMode") else None,
        vms_powered_off_by_collection=list((state or {}).get("powered_off") or []),
        ssh_service=ssh_service_of(host.get("config.service")),
        lockdown_mode=lockdown_word(host.get("config.lockdownMode")),
    )
    if graphics_config is not None:
        record["graphics"] = dict(
            default_type=_esxi.graphics_word(graphics_config.hostDefaultGraphicsType),
            assignment_policy=graphics_config.sharedPassthruAssignmentPolicy,
            device_types=device_types,
        )
    if driver is not None:
        short, full, packages = driver
        record["driver"] = dict(version=short, full_version=full, packages=packages, source=driver_source)
    if module_options is not None:
        record["nvidia_module_options"] = module_options
        record["scheduler"] = scheduler_view(module_options)
    return record


def scheduler_view(option_string):
    """The vGPU scheduler settings decoded from the nvidia module option string."""
    try:
        sched = _nvidia.get_scheduler(option_string)
    except _nvidia.NvidiaError as exc:
        return dict(policy=None, error=str(exc))
    every = sched["all"]
    out = scheduler_dict(every if every is not None else _nvidia.decode_scheduler(None))
    out["configured"] = every is not None
    out["per_device"] = dict((pci, scheduler_dict(s)) for pci, s in sched["per_device"].items())
    return out


def cluster_summary(records):
    """Per cluster: hosts, GPU hosts and GPUs, every driver version seen with its hosts,
    hosts per GPU model, whether the driver is the same on every GPU host."""
    clusters = {}
    for rec in records:
        name = rec["cluster"] or ""
        c = clusters.setdefault(name, dict(hosts=[], gpu_hosts=0, gpus=0, driver_versions={},
                                           models={}, vgpu_vms=0, hosts_in_maintenance=[]))
        c["hosts"].append(rec["name"])
        c["vgpu_vms"] += len(rec.get("vgpu_vms") or [])
        if rec["maintenance_mode"]:
            c["hosts_in_maintenance"].append(rec["name"])
        if not rec["gpu_count"]:
            continue
        c["gpu_hosts"] += 1
        c["gpus"] += rec["gpu_count"]
        c["models"].setdefault(rec["gpu_model"], []).append(rec["name"])
        if "driver" in rec:
            version = (rec["driver"] or {}).get("version") or "none"
            c["driver_versions"].setdefault(version, []).append(rec["name"])
    for c in clusters.values():
        c["driver_consistent"] = len(c["driver_versions"]) <= 1 and "none" not in c["driver_versions"]
    return clusters


class GpuInventory:
    """Reads the GPU inventory through one :class:`VsphereClient`."""

    def __init__(self, client, workers=16, rest=None):
        """``rest``: a function that opens a vSphere Automation API session (closed again at the
        end of each read), for the drivers of image-managed clusters; without it every driver is
        read from its host."""
        self.client = client
        self.workers = workers
        self.rest = rest

    def read(self, cluster=None, hosts=None, gather=GATHER_CHOICES, namespaces=False):
        gather = set(gather)
        namespaces = namespaces and "vms" in gather
        image_reads = self.rest is not None and "driver" in gather
        if image_reads:
            clusters = dict((c["name"], c) for c in self.client.retrieve({vim.ClusterComputeResource: CLUSTER_PROPERTIES}))
        else:
            clusters = self.client.clusters_by_name()
        cluster_of = {}
        managed = {}
        for name, cl in clusters.items():
            for h in cl.get("host") or []:
                cluster_of[h._moId] = name
            if image_reads and cl.get("lifecycleManaged"):
                managed[name] = cl.moid
        root = None
        if cluster:
            root = self.client.cluster_named(cluster, clusters).obj
        specs = {vim.HostSystem: HOST_PROPERTIES}
        if "vms" in gather:
            specs[vim.VirtualMachine] = VM_PROPERTIES + (["resourcePool"] if namespaces else [])
        if namespaces:
            specs[vim.ResourcePool] = ["name", "parent"]
        # the custom attribute definitions (for the collection's record on each host) in the same retrieval
        objects = self.client.retrieve(specs, root=root, fields=True)
        pools = {}
        for rp in objects if namespaces else []:
            if isinstance(rp.obj, vim.ResourcePool):
                parent = rp.get("parent")
                pools[rp.moid] = (rp.get("name"), parent._moId if isinstance(parent, vim.ResourcePool) else None)
        host_objs = [o for o in objects if isinstance(o.obj, vim.HostSystem)]
        if hosts:
            wanted = set(hosts)
            host_objs = [h for h in host_objs if h["name"] in wanted]
            missing = wanted - set(h["name"] for h in host_objs)
            if missing:
                raise VsphereNotFound("host(s) %s not found" % ", ".join(sorted(missing)))
        host_objs.sort(key=lambda h: h["name"])
        vms_by_host = {}
        for vm in objects:
            if not isinstance(vm.obj, vim.VirtualMachine):
                continue
            profiles = vgpu_profiles_of(vm.get("config.hardware.device"))
            host_ref = vm.get("runtime.host")
            if profiles and host_ref is not None:
                record = dict(name=vm["name"], moid=vm.moid, power_state=str(vm.get("runtime.powerState")),
                              uuid=vm.get("config.uuid"), vgpu_profiles=profiles)
                if namespaces:
                    pool = vm.get("resourcePool")
                    record["namespace"] = _chargeback.vsphere_namespace(getattr(pool, "_moId", None), pools)
                vms_by_host.setdefault(host_ref._moId, []).append(record)
        state_key = self.client.custom_field_key(_esxi.HOST_STATE_FIELD, vim.HostSystem)
        graphics = {}
        managers = [h.get("configManager.graphicsManager") for h in host_objs]
        managers = [m for m in managers if m is not None]
        for gm in self.client.retrieve_objects(managers, ["graphicsConfig"]):
            graphics[gm.moid] = gm.get("graphicsConfig")
        todo = self._gpu_hosts(host_objs)
        from_image = self._image_drivers(todo, cluster_of, managed) if managed and todo else {}
        per_host = self._per_host_calls(todo, gather, from_image)
        records = []
        for h in host_objs:
            gm = h.get("configManager.graphicsManager")
            driver, options, errors = per_host.get(h.moid, (None, None, []))
            source = DRIVER_FROM_HOST
            if h.moid in from_image:
                driver, source = driver_from_image(*from_image[h.moid]), DRIVER_FROM_IMAGE
            vms = sorted(vms_by_host.get(h.moid, []), key=lambda v: v["name"]) if "vms" in gather else None
            state = _esxi.parse_host_state(self.client.custom_value(h.get("customValue"), state_key))
            records.append(host_record(h, cluster_of.get(h.moid), graphics.get(gm._moId) if gm is not None else None,
                                       vms, driver=driver, module_options=options, errors=errors, state=state,
                                       driver_source=source))
        return records

    @staticmethod
    def _gpu_hosts(host_objs):
        """The hosts that get per-host reads: connected, with an NVIDIA GPU."""
        todo = []
        for h in host_objs:
            if not any(is_nvidia_gpu(p) for p in h.get("hardware.pciDevice") or []):
                continue
            if str(h.get("runtime.connectionState")) != "connected":
                continue
            todo.append(h)
        return todo

    def _image_drivers(self, todo, cluster_of, managed):
        """{host moid: (component, DriverVersion)} for the hosts that run their cluster's image:
        one compliance read per image-managed cluster. A cluster whose compliance cannot be read
        (or a REST session that cannot be opened) leaves its hosts to be read one by one."""
        wanted = {}
        for h in todo:
            name = cluster_of.get(h.moid)
            if name in managed:
                wanted.setdefault(managed[name], []).append(h)
        if not wanted:
            return {}
        try:
            rest = self.rest()
        except VsphereError:
            return {}
        out = {}
        try:
            for moid, members in sorted(wanted.items()):
                try:
                    answer = VlcmApi(rest, moid).compliance_answer()
                except VsphereError:
                    continue
                for h in members:
                    found = _vlcm.image_driver(answer, h.moid, reboot_required=bool(h.get("summary.rebootRequired")),
                                               boot_time=h.get("runtime.bootTime"))
                    if found is not None:
                        out[h.moid] = found
        finally:
            rest.close()
        return out

    def _per_host_calls(self, todo, gather, from_image=None):
        from_image = from_image or {}
        if not todo or not (gather & {"driver", "scheduler"}):
            return {}

        def one(h):
            errors = []
            driver = options = None
            if "driver" in gather and h.moid not in from_image:
                try:
                    packages = h["configManager.imageConfigManager"].FetchSoftwarePackages()
                    driver = driver_from_packages(packages)
                except VsphereError as exc:
                    errors.append("software packages: %s" % exc)
            if "scheduler" in gather:
                try:
                    options = h["configManager.kernelModuleSystem"].QueryConfiguredModuleOptionString(NVIDIA_MODULE)
                except VsphereFault as exc:
                    if exc.is_a(vim.fault.NotFound):
                        errors.append("no nvidia kernel module (host driver not installed)")
                    else:
                        errors.append("nvidia module options: %s" % exc)
                except VsphereError as exc:
                    errors.append("nvidia module options: %s" % exc)
            return h.moid, (driver, options, errors)

        if "scheduler" not in gather:
            todo = [h for h in todo if h.moid not in from_image]
            if not todo:
                return {}
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(todo)))) as pool:
            return dict(pool.map(one, todo))


__all__ = ["GpuInventory", "cluster_summary", "host_record", "VsphereError", "GATHER_CHOICES"]
