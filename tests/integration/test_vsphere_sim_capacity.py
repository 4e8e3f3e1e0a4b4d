"""vCenter's own vGPU capacity in the vSphere simulator (tests/sim/vsphere/README.md, "vCenter's vGPU
capacity"): DirectPathProfileManagerQueryCapacity on a 9.1 presentation, a fleet of mixed MIG and
time-sliced cards with VMs on, every figure computed by hand; a reservation the test sets takes from
remaining; an 8.0.3 presentation names no directPathProfileManager. pyvmomi talks to it directly.
"""
import pathlib
import ssl
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sim"))
import vsphere_sim  # noqa: E402

pyVim = pytest.importorskip("pyVim.connect")
from pyVmomi import vim, vmodl  # noqa: E402

DRIVER = "550.90.05-1OEM.800.1.0.20613240"
FLEET = {
    "clusters": [{"name": "cap", "hosts": [
        # GPU 0 time-sliced (sameSize), GPU 1 in MIG mode
        {"name": "cap-h100", "gpu": {"model": "H100-80GB", "count": 2}, "driver_version": DRIVER, "mig": [1]},
        {"name": "cap-l40s", "gpu": {"model": "L40S", "count": 2}, "driver_version": DRIVER},
        # in maintenance mode: counts nothing
        {"name": "cap-h100-maint", "gpu": {"model": "H100-80GB", "count": 1}, "driver_version": DRIVER,
         "maintenance": True},
    ]}],
    "vms": [
        {"name": "ts-40", "host": "cap-h100", "vgpu": ["nvidia_h100-40c"]},
        {"name": "mig-3g", "host": "cap-h100", "vgpu": ["nvidia_h100-3-40c"]},
        {"name": "nb-8", "host": "cap-l40s", "vgpu": ["nvidia_l40s-8c"]},
        {"name": "parked", "host": "cap-l40s", "vgpu": ["nvidia_l40s-8c"], "power": "off"},
    ],
}
D = getattr(vim, "DirectPathProfileManager", None)


def connect(sim):
    env = sim.env
    ctx = ssl.create_default_context(cafile=env["VMWARE_CA_FILE"])
    si = pyVim.SmartConnect(host=env["VMWARE_HOST"], port=int(env["VMWARE_PORT"]), user=env["VMWARE_USER"],
                            pwd=env["VMWARE_PASSWORD"], sslContext=ctx)
    return si.RetrieveContent()


def find(content, kind, name):
    view = content.viewManager.CreateContainerView(content.rootFolder, [kind], True)
    try:
        return [o for o in view.view if o.name == name][0]
    finally:
        view.Destroy()


def query(content, target, profiles):
    specs = [D.CapacityQueryByDeviceConfig(deviceConfig=D.VmiopDirectPathConfig(vgpuProfile=p)) for p in profiles]
    out = []
    for r in content.directPathProfileManager.QueryDirectPathProfileCapacity(target=target, querySpec=specs):
        if isinstance(r, D.CapacityInfo):
            out.append((r.profile.name, r.max, r.consumed, r.remaining, r.unusedReservation))
        else:
            out.append(("unknown", r.querySpec.deviceConfig.vgpuProfile, [f.msg for f in r.faultList]))
    return out


@pytest.fixture(scope="module")
def sim91():
    sim = vsphere_sim.start(FLEET, api_version="9.1")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.mark.skipif(D is None, reason="pyvmomi without the vSphere 9.0 types")
def test_cluster_figures_by_hand(sim91):
    content = connect(sim91)
    assert content.about.apiVersion == "9.1.0.0" and content.directPathProfileManager is not None
    cluster = D.TargetCluster(cluster=find(content, vim.ClusterComputeResource, "cap"))
    got = query(content, cluster, ["nvidia_h100-40c", "nvidia_h100-3-40c", "nvidia_h100-1-10c", "nvidia_l40s-8c",
                                   "nvidia_a100d-80c"])
    assert got[:4] == [
        # 40c: only GPU 0 of cap-h100 (GPU 1 runs MIG; the maintenance host counts nothing): 80 // 40 = 2,
        # ts-40 holds one
        ("nvidia_h100-40c", 2, 1, 1, 0),
        # 3g.40gb: two per MIG GPU, mig-3g holds one
        ("nvidia_h100-3-40c", 2, 1, 1, 0),
        # 1g.10gb: seven on an empty MIG GPU; beside a 3g.40gb the other four memory slices hold four
        ("nvidia_h100-1-10c", 7, 0, 4, 0),
        # L40S 8c: 48 // 8 = 6 per card, 12; nb-8 holds one (parked is off): 5 + 6 remain
        ("nvidia_l40s-8c", 12, 1, 11, 0),
    ]
    unknown = got[4]
    assert unknown[:2] == ("unknown", "nvidia_a100d-80c") and "not offered" in unknown[2][0]


@pytest.mark.skipif(D is None, reason="pyvmomi without the vSphere 9.0 types")
def test_host_target_a_reservation_and_a_bad_target(sim91):
    content = connect(sim91)
    l40s = D.TargetHost(host=find(content, vim.HostSystem, "cap-l40s"))
    assert query(content, l40s, ["nvidia_l40s-8c", "nvidia_h100-40c"]) == [
        ("nvidia_l40s-8c", 12, 1, 11, 0),
        ("unknown", "nvidia_h100-40c", ["vGPU profile nvidia_h100-40c is not offered by the hosts of the target"])]
    # a reservation of 3 units: remaining drops by 3, unusedReservation shows them; max and consumed stay
    sim91._call("POST", "/_sim/capacity/reservations", {"cluster": "cap", "profile": "nvidia_l40s-8c", "count": 3})
    try:
        cluster = D.TargetCluster(cluster=find(content, vim.ClusterComputeResource, "cap"))
        assert query(content, cluster, ["nvidia_l40s-8c"]) == [("nvidia_l40s-8c", 12, 1, 8, 3)]
    finally:
        sim91._call("POST", "/_sim/capacity/reservations", {"cluster": "cap", "profile": "nvidia_l40s-8c", "count": 0})
    with pytest.raises(vmodl.fault.InvalidArgument):
        content.directPathProfileManager.QueryDirectPathProfileCapacity(
            target=D.TargetCluster(cluster=vim.ClusterComputeResource("domain-c999", content.rootFolder._stub)),
            querySpec=[])


def test_8_0_3_has_no_manager():
    sim = vsphere_sim.start(FLEET, api_version="8.0.3")
    try:
        content = connect(sim)
        assert content.about.apiVersion == "8.0.3.0"
        assert getattr(content, "directPathProfileManager", None) is None
    finally:
        sim.stop()
