"""gpu_host_info through main(): the arguments parsed by AnsibleModule, the inventory reader (GpuInventory) and the
host operations (HostOps) replaced by fakes over two host records. An info module: check mode returns what the
real run returns and changes nothing, a rerun returns the same, bad input is refused before any read, a read that
fails names the inventory it was reading."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import gpu_host_info
from tests.lib.module_main import VSPHERE, run_main


def record(name, cluster, version, gpus=2, maintenance=False, vms=()):
    return dict(name=name, cluster=cluster, connection_state="connected", maintenance_mode=maintenance,
                gpu_count=gpus, gpu_model="H100-80GB" if gpus else None,
                driver=dict(version=version, full_version=None, packages=[], source="host") if version else None,
                vgpu_vms=[dict(name=v, moid="vm-" + v, power_state="poweredOn") for v in vms], errors=[])


RECORDS = [record("esx-01", "gpu-h100", "550.90.05", vms=["llm-01"]),
           record("esx-02", "gpu-h100", "550.54.10", maintenance=True),
           record("mgmt-01", "mgmt", None, gpus=0)]


class FakeInventory:
    """GpuInventory over RECORDS: filters by cluster or host names as the reader does."""

    reads = []
    fail = None

    def __init__(self, client, workers=16, rest=None):
        assert client == "soap session" and callable(rest)

    def read(self, cluster=None, hosts=None, gather=None):
        FakeInventory.reads.append(dict(cluster=cluster, hosts=hosts, gather=list(gather)))
        if FakeInventory.fail:
            raise VsphereError(FakeInventory.fail)
        out = [copy.deepcopy(r) for r in RECORDS if (cluster is None or r["cluster"] == cluster)
               and (not hosts or r["name"] in hosts)]
        if "driver" not in gather:
            for r in out:
                r.pop("driver")
        return out


class FakeHostOps:
    def __init__(self, client):
        assert client == "soap session"

    def vgpu_hotmigrate_enabled(self):
        FakeInventory.reads.append("hotmigrate")
        return False


@pytest.fixture
def inventory(monkeypatch):
    FakeInventory.reads, FakeInventory.fail = [], None
    monkeypatch.setattr(gpu_host_info, "GpuInventory", FakeInventory)
    monkeypatch.setattr(gpu_host_info, "HostOps", FakeHostOps)
    return FakeInventory


def run(check_mode=False, diff=False, **params):
    return run_main(gpu_host_info, dict(VSPHERE, **params), check_mode=check_mode, diff=diff)


def test_check_mode_reads_what_the_real_run_reads_and_a_rerun_returns_the_same(inventory):
    check = run(check_mode=True, diff=True, cluster="gpu-h100")
    real = run(diff=True, cluster="gpu-h100")
    again = run(cluster="gpu-h100")
    assert check == real == again and real["changed"] is False and "diff" not in real
    assert [h["name"] for h in real["hosts"]] == ["esx-01", "esx-02"] and real["vgpu_hotmigrate"] is False
    summary = real["clusters"]["gpu-h100"]
    assert summary["gpu_hosts"] == 2 and summary["gpus"] == 4 and summary["vgpu_vms"] == 1
    assert summary["driver_versions"] == {"550.90.05": ["esx-01"], "550.54.10": ["esx-02"]}
    assert summary["driver_consistent"] is False and summary["hosts_in_maintenance"] == ["esx-02"]
    assert inventory.reads[0] == dict(cluster="gpu-h100", hosts=None, gather=list(gpu_host_info.GATHER_CHOICES))


def test_gather_limits_the_read(inventory):
    res = run(hosts=["esx-01", "mgmt-01"], gather=["scheduler"])
    assert [h["name"] for h in res["hosts"]] == ["esx-01", "mgmt-01"] and "vgpu_hotmigrate" not in res
    assert "driver" not in res["hosts"][0] and res["clusters"]["gpu-h100"]["driver_versions"] == {}
    assert inventory.reads == [dict(cluster=None, hosts=["esx-01", "mgmt-01"], gather=["scheduler"])]


def test_bad_input_is_refused_before_any_read(inventory):
    res = run(cluster="gpu-h100", hosts=["esx-01"])
    assert res["failed"] is True and "mutually exclusive: cluster|hosts" in res["msg"]
    res = run(gather=["everything"])
    assert res["failed"] is True and "value of gather must be one or more of" in res["msg"]
    res = run(cluster="")
    assert res["failed"] is True and "cluster" in res["msg"]
    res = run(hosts=["esx-01", ""])
    assert res["failed"] is True and "hosts" in res["msg"]
    assert inventory.reads == []


def test_a_failed_read_names_the_inventory(inventory):
    inventory.fail = "cluster gpu-a100 not found (clusters: gpu-h100, mgmt)"
    res = run(cluster="gpu-a100")
    assert res["failed"] is True and "changed" not in res and "hosts" not in res
    assert res["msg"] == ("Unable to read the GPU inventory of cluster gpu-a100: cluster gpu-a100 not found "
                          "(clusters: gpu-h100, mgmt)")
