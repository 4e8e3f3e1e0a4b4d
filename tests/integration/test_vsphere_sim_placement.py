"""What the vSphere simulator refuses, as ESXi and the NVIDIA vGPU manager do (tests/sim/vsphere/README.md,
"What ESXi and the vGPU manager refuse"): each refusal once, and what it places where.

One simulator for the module; every test uses hosts and VMs of its own (all VMs start powered off), so
the tests do not depend on each other's order. pyvmomi talks to it directly; SSH through the ssh client.
"""
import pathlib
import shutil
import ssl
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

pyVim = pytest.importorskip("pyVim.connect")
from pyVmomi import vim, vmodl  # noqa: E402

from tests.lib.vim_objects import find_object as obj, wait_task as wait  # noqa: E402

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
H100 = {"model": "H100-80GB", "count": 1}
H100x4 = {"model": "H100-80GB", "count": 4}


def host(name, gpu=None, **extra):
    return dict({"name": name, "gpu": H100 if gpu is None else gpu, "driver_version": DRIVER,
                 "graphics": {"default": "sharedDirect", "policy": extra.pop("policy", "performance")}}, **extra)


def vm(name, on, *profiles):
    return {"name": name, "host": on, "vgpu": list(profiles), "power": "off"}


FLEET = {
    "clusters": [{"name": "place", "hosts": [
        host("ts-01"),                                    # MIG off, sameSize
        host("mixed-01", vgpu_mode="mixed_size"),         # MIG off, mixedSize
        host("mig-01", mig="all"),                        # one GPU in MIG mode
        host("migc-01", mig="all"),
        host("migm-01", mig="all"),
        host("migme-01", mig="all"),
        host("perf-01", gpu=H100x4, mig=[0, 1]),                           # performance
        host("pack-01", gpu=H100x4, mig=[0, 1], policy="consolidation"),   # consolidation
        host("drift-01", gpu={"model": "H100-80GB", "count": 2}),
        host("ssh-01"),                                   # TSM-SSH stopped (the default)
        host("lock-01", ssh="running", lockdown="normal", lockdown_exceptions=["svc-gpupool"]),
    ]}],
    "vms": [
        vm("ts-mig", "ts-01", "nvidia_h100-3-40c"),
        vm("mig-ts", "mig-01", "nvidia_h100-20c"),
        vm("migc-4g", "migc-01", "nvidia_h100-4-40c"), vm("migc-3g", "migc-01", "nvidia_h100-3-40c"),
        vm("migc-1g", "migc-01", "nvidia_h100-1-10c"),
        vm("migm-a", "migm-01", "nvidia_h100-1-20c", "nvidia_h100-1-20c"),
        vm("migm-b", "migm-01", "nvidia_h100-1-20c", "nvidia_h100-1-20c"),
        vm("migm-c", "migm-01", "nvidia_h100-1-10c"),
        vm("migme-a", "migme-01", "nvidia_h100-1-10cme"), vm("migme-b", "migme-01", "nvidia_h100-1-10cme"),
        vm("ts-20", "ts-01", "nvidia_h100-20c"), vm("ts-40", "ts-01", "nvidia_h100-40c"),
        vm("ts-20b", "ts-01", "nvidia_h100-20c"), vm("ts-20c", "ts-01", "nvidia_h100-20c"),
        vm("ts-20d", "ts-01", "nvidia_h100-20c"), vm("ts-20e", "ts-01", "nvidia_h100-20c"),
        vm("mixed-20", "mixed-01", "nvidia_h100-20c"), vm("mixed-40", "mixed-01", "nvidia_h100-40c"),
        vm("mixed-40b", "mixed-01", "nvidia_h100-40c"),
        vm("perf-a", "perf-01", "nvidia_h100-1-10c"), vm("perf-b", "perf-01", "nvidia_h100-1-10c"),
        vm("perf-c", "perf-01", "nvidia_h100-1-10c"), vm("perf-full", "perf-01", "nvidia_h100-80c"),
        vm("perf-half", "perf-01", "nvidia_h100-40c"),
        vm("pack-a", "pack-01", "nvidia_h100-1-10c"), vm("pack-b", "pack-01", "nvidia_h100-1-10c"),
        vm("pack-c", "pack-01", "nvidia_h100-1-10c"), vm("pack-d", "pack-01", "nvidia_h100-20c"),
        vm("pack-e", "pack-01", "nvidia_h100-20c"),
        vm("drift-vm", "drift-01", "nvidia_h100-40c"),
    ],
}


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("no ssh client")
    d = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "id")], check=True)
    return d / "id"


@pytest.fixture(scope="module")
def sim(keys):
    with vsphere_sim.start(FLEET, reboot_seconds=0.5, ssh_authorized_keys=keys.with_suffix(".pub")) as s:
        yield s


@pytest.fixture(scope="module")
def si(sim):
    ctx = ssl.create_default_context(cafile=sim.ca_file)
    conn = pyVim.SmartConnect(host=sim.host, port=sim.port, user=sim.user, pwd=sim.password, sslContext=ctx)
    yield conn
    pyVim.Disconnect(conn)


def power_on(si, name):
    return wait(obj(si, vim.VirtualMachine, name).PowerOnVM_Task())


def power_off(si, name):
    return wait(obj(si, vim.VirtualMachine, name).PowerOffVM_Task())


def refused(si, name):
    """Power on `name`, which must fail as vCenter's task does: the fault and its message."""
    with pytest.raises(vim.fault.InsufficientResourcesFault) as exc:
        power_on(si, name)
    assert obj(si, vim.VirtualMachine, name).runtime.powerState == "poweredOff"
    fault = exc.value
    text = " ".join([fault.msg or ""] + [m.message for m in fault.faultMessage or []])
    assert name in text, text
    return text


def on_gpus(sim, host_name):
    """{GPU index: [VM names]} of the simulator's stored placement."""
    return dict((g["index"], [v["name"] for v in g["vms"]]) for g in sim.gpus(host_name))


# --- refusals ---------------------------------------------------------------------------------------

def test_mig_backed_vgpu_refused_on_gpu_without_mig(si, sim):
    text = refused(si, "ts-mig")
    assert "nvidia_h100-3-40c" in text and "ts-01" in text and "MIG mode is disabled" in text, text
    assert on_gpus(sim, "ts-01")[0] == []


def test_time_sliced_vgpu_refused_on_mig_gpu(si, sim):
    text = refused(si, "mig-ts")
    assert "nvidia_h100-20c" in text and "MIG mode is enabled" in text, text


def test_mig_compute_slices_run_out(si, sim):
    power_on(si, "migc-4g")
    power_on(si, "migc-3g")   # 4g.40gb + 3g.40gb: 7 of 7 compute slices, 8 of 8 memory slices
    text = refused(si, "migc-1g")
    assert "nvidia_h100-1-10c" in text and "compute slices" in text, text
    assert sorted(on_gpus(sim, "migc-01")[0]) == ["migc-3g", "migc-4g"]


def test_mig_memory_slices_run_out(si, sim):
    power_on(si, "migm-a")
    power_on(si, "migm-b")    # four 1g.20gb: 4 compute slices, 8 of 8 memory slices
    text = refused(si, "migm-c")
    assert "memory slices" in text, text


def test_one_media_extension_instance_per_gpu(si):
    power_on(si, "migme-a")
    text = refused(si, "migme-b")
    assert "media-extension" in text, text


def test_same_size_gpu_refuses_another_size(si, sim):
    power_on(si, "ts-20")
    text = refused(si, "ts-40")
    assert "nvidia_h100-40c" in text and "sameSize" in text and "nvidia_h100-20c" in text, text


def test_same_size_gpu_frame_buffer(si, sim):
    for name in ("ts-20b", "ts-20c", "ts-20d"):
        power_on(si, name)    # with ts-20 (test above, or here when run alone): up to four 20 GB on 80 GB
    if obj(si, vim.VirtualMachine, "ts-20").runtime.powerState != "poweredOn":
        power_on(si, "ts-20")
    text = refused(si, "ts-20e")
    assert "80 GB" in text and "frame buffer" in text, text


def test_mixed_size_gpu_takes_sizes_up_to_its_frame_buffer(si, sim):
    power_on(si, "mixed-20")
    power_on(si, "mixed-40")  # mixedSize: 20 GB and 40 GB on one card
    assert sorted(on_gpus(sim, "mixed-01")[0]) == ["mixed-20", "mixed-40"]
    text = refused(si, "mixed-40b")
    assert "60 GB of its 80 GB" in text, text


def test_fleet_that_cannot_be_placed_stops_the_start():
    fleet = {"clusters": [{"name": "c", "hosts": [host("bad-01", gpu={"model": "H100-80GB", "count": 2}, mig=[1])]}],
             "vms": [{"name": "too-big", "host": "bad-01", "vgpu": ["nvidia_h100-80c", "nvidia_h100-80c"]}]}
    with pytest.raises(vsphere_sim.SimulatorError) as exc:
        vsphere_sim.start(fleet, timeout=20)
    text = str(exc.value)
    assert "too-big" in text and "bad-01" in text and "MIG mode is enabled" in text, text


@pytest.mark.parametrize("extra,why", [
    ({"mig": "some"}, "mig must be all or a list"),
    ({"mig": [4]}, "GPU index 4 out of range"),
    ({"vgpu_mode": "sameSize"}, "vgpu_mode must be same_size or mixed_size"),
    ({"ssh": "on"}, "ssh must be running or stopped"),
    ({"lockdown": "lockdownNormal"}, "lockdown must be disabled, normal or strict"),
])
def test_fleet_keys_are_checked(extra, why):
    fleet = {"clusters": [{"name": "c", "hosts": [host("k-01", gpu=H100x4, **extra)]}]}
    with pytest.raises(vsphere_sim.SimulatorError) as exc:
        vsphere_sim.start(fleet, timeout=20)
    assert why in str(exc.value), str(exc.value)


def test_no_mig_on_a_model_without_mig():
    fleet = {"clusters": [{"name": "c", "hosts": [host("l-01", gpu={"model": "L40S", "count": 2}, mig="all")]}]}
    with pytest.raises(vsphere_sim.SimulatorError) as exc:
        vsphere_sim.start(fleet, timeout=20)
    assert "L40S" in str(exc.value) and "no MIG mode" in str(exc.value)


# --- placement by policy, read back -----------------------------------------------------------------

def graphics(si, host_name, found=None):
    """config.graphicsInfo and config.graphicsConfig of a host in one PropertyCollector retrieval
    (`found`: the host object, already looked up)."""
    pc = si.content.propertyCollector
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=found or obj(si, vim.HostSystem, host_name))],
        propSet=[vmodl.query.PropertyCollector.PropertySpec(
            type=vim.HostSystem, pathSet=["config.graphicsInfo", "config.graphicsConfig"])])
    res = pc.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions())
    props = dict((p.name, p.val) for p in res.objects[0].propSet)
    return props["config.graphicsInfo"], props["config.graphicsConfig"]


def names(si, refs):
    return sorted(r.name for r in refs or [])


def test_performance_spreads_and_graphics_info_reads_it_back(si, sim):
    for name in ("perf-a", "perf-b", "perf-c", "perf-full", "perf-half"):
        power_on(si, name)
    # MIG-backed on the MIG GPUs 0 and 1, fewest vGPUs first (lowest index on ties); the full card
    # and the 40 GB one on the MIG-off GPUs 2 and 3
    assert on_gpus(sim, "perf-01") == {0: ["perf-a", "perf-c"], 1: ["perf-b"], 2: ["perf-full"], 3: ["perf-half"]}
    perf = obj(si, vim.HostSystem, "perf-01")  # looked up before the count
    sim.reset_stats()
    info, config = graphics(si, "perf-01", perf)
    assert sim.stats()["soap"]["methods"].get("RetrievePropertiesEx") == 1
    assert [names(si, g.vm) for g in info] == [["perf-a", "perf-c"], ["perf-b"], ["perf-full"], ["perf-half"]]
    assert [g.vgpuMode for g in info] == ["multiInstanceGpu", "multiInstanceGpu", "sameSize", "sameSize"]
    assert [d.vgpuMode for d in config.deviceType] == ["sameSize"] * 4
    # the graphics manager shows the same placement
    gm = obj(si, vim.HostSystem, "perf-01").configManager.graphicsManager
    assert [names(si, g.vm) for g in gm.graphicsInfo] == [["perf-a", "perf-c"], ["perf-b"], ["perf-full"], ["perf-half"]]
    # kept until power-off, not recomputed: perf-a off frees GPU 0 only
    power_off(si, "perf-a")
    assert on_gpus(sim, "perf-01") == {0: ["perf-c"], 1: ["perf-b"], 2: ["perf-full"], 3: ["perf-half"]}
    assert [names(si, g.vm) for g in graphics(si, "perf-01")[0]] == [["perf-c"], ["perf-b"], ["perf-full"], ["perf-half"]]


def test_consolidation_packs(si, sim):
    for name in ("pack-a", "pack-b", "pack-c", "pack-d", "pack-e"):
        power_on(si, name)
    assert on_gpus(sim, "pack-01") == {0: ["pack-a", "pack-b", "pack-c"], 1: [], 2: ["pack-d", "pack-e"], 3: []}
    info, _config = graphics(si, "pack-01")
    assert [names(si, g.vm) for g in info] == [["pack-a", "pack-b", "pack-c"], [], ["pack-d", "pack-e"], []]


# --- MIG and vGPU mode changes ------------------------------------------------------------------------

def update_vgpu_mode(si, host_name, index, mode):
    h = obj(si, vim.HostSystem, host_name)
    gm = h.configManager.graphicsManager
    cfg = gm.graphicsConfig
    pci = [g.pciId for g in gm.graphicsInfo][index]
    gm.UpdateGraphicsConfig(vim.host.GraphicsConfig(
        hostDefaultGraphicsType=cfg.hostDefaultGraphicsType,
        sharedPassthruAssignmentPolicy=cfg.sharedPassthruAssignmentPolicy,
        deviceType=[vim.host.GraphicsConfig.DeviceType(deviceId=pci, graphicsType="sharedDirect", vgpuMode=mode)]))


def test_unknown_vgpu_mode_refused(si, sim):
    with pytest.raises(vmodl.fault.InvalidArgument):
        update_vgpu_mode(si, "drift-01", 1, "halfSize")
    assert sim.gpus("drift-01")[1]["vgpu_mode"] == "sameSize"


def test_mig_and_vgpu_mode_change_only_without_a_powered_on_vm(si, sim):
    power_on(si, "drift-vm")
    assert on_gpus(sim, "drift-01") == {0: ["drift-vm"], 1: []}
    with pytest.raises(vsphere_sim.SimulatorError, match="409"):
        sim.set_gpu("drift-01", 0, mig=True)
    with pytest.raises(vim.fault.InvalidState):
        update_vgpu_mode(si, "drift-01", 0, "mixedSize")
    assert sim.gpus("drift-01")[0]["mig_current"] is False and sim.gpus("drift-01")[0]["vgpu_mode"] == "sameSize"
    # the idle GPU changes
    update_vgpu_mode(si, "drift-01", 1, "mixedSize")
    info, config = graphics(si, "drift-01")
    assert [g.vgpuMode for g in info] == ["sameSize", "mixedSize"]
    assert [d.vgpuMode for d in config.deviceType] == ["sameSize", "mixedSize"]
    # after the power-off, GPU 0 takes MIG mode behind the collection's back
    power_off(si, "drift-vm")
    view = sim.set_gpu("drift-01", 0, mig=True)
    assert view["gpus"][0]["mig_current"] is True and view["gpus"][0]["vgpu_mode"] == "multiInstanceGpu"
    assert [g.vgpuMode for g in graphics(si, "drift-01")[0]] == ["multiInstanceGpu", "mixedSize"]
    # and now drift-vm's time-sliced vGPU no longer fits GPU 0: it lands on GPU 1
    power_on(si, "drift-vm")
    assert on_gpus(sim, "drift-01") == {0: [], 1: ["drift-vm"]}


# --- SSH and lockdown -----------------------------------------------------------------------------------

def ssh(sim, keys, host_name, command, user="root"):
    addr, port = sim.ssh_addresses()[host_name].rsplit(":", 1)
    return subprocess.run(
        ["ssh", "-i", str(keys), "-p", port, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5",
         "%s@%s" % (user, addr), command], capture_output=True, text=True, timeout=30, check=False)


QUERY = "nvidia-smi --query-gpu=index,pci.bus_id,mig.mode.current,mig.mode.pending --format=csv,noheader"


def ssh_service(si, host_name):
    services = obj(si, vim.HostSystem, host_name).config.service.service
    return [s for s in services if s.key == "TSM-SSH"][0]


def test_ssh_refused_while_tsm_ssh_is_stopped(si, sim, keys):
    svc = ssh_service(si, "ssh-01")
    assert (svc.label, svc.running, svc.policy) == ("SSH", False, "off")
    assert sim.ssh_service("ssh-01") == "stopped"
    res = ssh(sim, keys, "ssh-01", QUERY)
    assert res.returncode == 255 and "Disabled" not in res.stdout, res
    system = obj(si, vim.HostSystem, "ssh-01").configManager.serviceSystem
    assert [s.key for s in system.serviceInfo.service if s.key == "TSM-SSH"] == ["TSM-SSH"]
    system.StartService(id="TSM-SSH")
    assert ssh_service(si, "ssh-01").running is True and sim.ssh_service("ssh-01") == "running"
    assert [s.running for s in system.serviceInfo.service if s.key == "TSM-SSH"] == [True]
    res = ssh(sim, keys, "ssh-01", QUERY)
    assert res.returncode == 0 and res.stdout.strip() == "0, 00000000:3B:00.0, Disabled, Disabled", res
    system.UpdateServicePolicy(id="TSM-SSH", policy="on")
    assert ssh_service(si, "ssh-01").policy == "on"
    system.StopService(id="TSM-SSH")
    assert ssh_service(si, "ssh-01").running is False
    assert ssh(sim, keys, "ssh-01", QUERY).returncode == 255
    with pytest.raises(vim.fault.NotFound):
        system.StartService(id="no-such-service")


def test_lockdown_admits_only_exception_users(si, sim, keys):
    h = obj(si, vim.HostSystem, "lock-01")
    assert h.config.lockdownMode == "lockdownNormal" and sim.host_state("lock-01")["lockdown"] == "lockdownNormal"
    access = h.configManager.hostAccessManager
    assert access.lockdownMode == "lockdownNormal"
    assert list(access.QueryLockdownExceptions()) == ["svc-gpupool"]
    res = ssh(sim, keys, "lock-01", QUERY, user="root")
    assert res.returncode == 255 and "Permission denied" in res.stderr, res
    res = ssh(sim, keys, "lock-01", QUERY, user="svc-gpupool")
    assert res.returncode == 0 and "Disabled" in res.stdout, res
    # out of lockdown, root logs in again
    access.ChangeLockdownMode(mode="lockdownDisabled")
    assert h.config.lockdownMode == "lockdownDisabled"
    assert ssh(sim, keys, "lock-01", QUERY, user="root").returncode == 0
