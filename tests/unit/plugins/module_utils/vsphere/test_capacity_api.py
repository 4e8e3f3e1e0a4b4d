"""VcenterCapacity: no call before API 9.0 (the reason instead), one QueryCapacity per cluster with every
profile asked, one more per host only when asked, CapacityUnknown kept as its reason."""
import types

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._capacity_api import VcenterCapacity

vim = pytest.importorskip("pyVmomi").vim
D = getattr(vim, "DirectPathProfileManager", None)
pytestmark = pytest.mark.skipif(D is None, reason="pyvmomi without the vSphere 9.0 types")


class Manager:
    def __init__(self, answers):
        self.answers = answers   # profile -> (max, consumed, remaining, unused) or a reason
        self.calls = []

    def QueryDirectPathProfileCapacity(self, target, querySpec):  # noqa: N802 - pyvmomi's name
        names = [s.deviceConfig.vgpuProfile for s in querySpec]
        kind = "cluster" if isinstance(target, D.TargetCluster) else "host"
        ref = target.cluster if kind == "cluster" else target.host
        self.calls.append((kind, ref._moId, names))
        out = []
        for spec, name in zip(querySpec, names):
            got = self.answers[name]
            if isinstance(got, str):
                # as pyVmomi reads the wire: each LocalizedMethodFault of the list is the fault itself
                fault = vim.fault.NotFound(msg=got)
                out.append(D.CapacityUnknown(querySpec=spec, faultList=[fault]))
            else:
                out.append(D.CapacityInfo(profile=vim.DirectPathProfileInfo(id="vmiop:" + name, name=name),
                                          max=got[0], consumed=got[1], remaining=got[2], unusedReservation=got[3]))
        return out


class Client:
    def __init__(self, version, manager):
        self.content = types.SimpleNamespace(about=types.SimpleNamespace(apiVersion=version),
                                             directPathProfileManager=manager)
        self.si = types.SimpleNamespace(_stub=None)
        self.retrievals = 0

    def clusters_by_name(self):
        self.retrievals += 1
        return {"gpu-a": types.SimpleNamespace(obj=vim.ClusterComputeResource("domain-c7"))}


ANSWERS = {"nvidia_l40s-8c": (12, 1, 8, 3), "nvidia_a100d-80c": "vGPU profile nvidia_a100d-80c is not offered"}


def test_8x_makes_no_call_and_says_why():
    manager = Manager(ANSWERS)
    client = Client("8.0.3.0", manager)
    got = VcenterCapacity(client).read({"gpu-a": ["nvidia_l40s-8c"]}, {"esx-1": ("host-1", ["nvidia_l40s-8c"])})
    assert got["read"] is False and got["calls"] == 0 and manager.calls == [] and client.retrievals == 0
    assert "8.0.3.0" in got["reason"] and "9.0" in got["reason"]


def test_9x_without_the_manager_says_why():
    got = VcenterCapacity(Client("9.0.0.0", None)).read({"gpu-a": ["nvidia_l40s-8c"]})
    assert got["read"] is False and "DirectPathProfileManager" in got["reason"]


def test_one_call_per_cluster_and_per_host_only_when_asked():
    manager = Manager(ANSWERS)
    got = VcenterCapacity(Client("9.1.0.0", manager)).read(
        {"gpu-a": ["nvidia_l40s-8c", "nvidia_a100d-80c", "nvidia_l40s-8c"], "unknown-cluster": ["nvidia_l40s-8c"]})
    # one call for gpu-a with both profiles once; a cluster vCenter does not hold is not asked
    assert manager.calls == [("cluster", "domain-c7", ["nvidia_a100d-80c", "nvidia_l40s-8c"])]
    assert got["read"] is True and got["reason"] is None and got["calls"] == 1 and got["hosts"] is None
    assert dict(got["clusters"]["gpu-a"]["nvidia_l40s-8c"]) == dict(max=12, consumed=1, remaining=8, unused_reservation=3)
    assert dict(got["clusters"]["gpu-a"]["nvidia_a100d-80c"]) == {"unknown": "vGPU profile nvidia_a100d-80c is not offered"}

    manager = Manager(ANSWERS)
    got = VcenterCapacity(Client("9.1.0.0", manager)).read(
        {"gpu-a": ["nvidia_l40s-8c"]}, {"esx-2": ("host-12", ["nvidia_l40s-8c"]), "esx-1": ("host-11", ["nvidia_l40s-8c"])})
    assert manager.calls == [("cluster", "domain-c7", ["nvidia_l40s-8c"]), ("host", "host-11", ["nvidia_l40s-8c"]),
                             ("host", "host-12", ["nvidia_l40s-8c"])]
    assert got["calls"] == 3 and list(got["hosts"]) == ["esx-1", "esx-2"]
