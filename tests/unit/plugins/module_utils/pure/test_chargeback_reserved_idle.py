"""Chargeback's reserved-but-idle VM class slots per tenant: the design's reservations against the powered-on
vGPU VMs of each tenant's vSphere Namespace, priced at the profile's hour; through gpu_usage with a design and
a vCenter read, and unknown (null) when vCenter is not read."""
import copy
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import normalize
from ansible_collections.gpupool.vcf.plugins.modules import gpu_usage
from tests.lib.module_main import run_main
from tests.unit.plugins.modules import test_gpu_usage as usage_fakes

ROOT = pathlib.Path(__file__).resolve().parents[5]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())
PRICE = 1.5   # per hour of one nvidia_h100-3-40c


def design():
    d = copy.deepcopy(EXAMPLE)
    tenants = dict((t["name"], t) for t in d["tenants"])
    tenants["team-search"]["vm_reservations"] = [{"pool": "inference", "zone": "zone-1", "count": 2},
                                                 {"pool": "inference", "zone": "zone-2", "count": 1}]
    tenants["team-vision"]["vm_reservations"] = [{"pool": "training", "zone": "zone-1", "count": 1}]
    d["chargeback"] = {"currency": "EUR", "profile_hour": {"nvidia_h100-3-40c": PRICE}}
    return d


def vm(name, namespace, profiles, on=True):
    return dict(name=name, namespace=namespace, profiles=sorted(profiles), on_hours=1.0, powered_on=on)


def test_idle_slots_per_tenant_class_and_zone():
    d, _findings = normalize(design())
    reservations = _chargeback.design_reservations(d)
    assert [(r["tenant"], r["vm_class"], r["zone"], r["count"], r["profiles"]) for r in reservations] == [
        ("team-search", "gpu-inference", "zone-1", 2, ["nvidia_h100-3-40c"]),
        ("team-search", "gpu-inference", "zone-2", 1, ["nvidia_h100-3-40c"]),
        ("team-vision", "gpu-training", "zone-1", 1, ["nvidia_h100-80c"] * 4)]
    records = [vm("search-1", "team-search", ["nvidia_h100-3-40c"]),
               vm("search-off", "team-search", ["nvidia_h100-3-40c"], on=False),   # off: uses no slot
               vm("vision-small", "team-vision", ["nvidia_h100-3-40c"]),           # not the training class
               vm("vision-2", "team-vision", ["nvidia_h100-80c"] * 2)]             # 2 of the class's 4 vGPUs
    rows = _chargeback.reserved_idle(reservations, records, _chargeback.price_table(d))
    assert [(r["tenant"], r["vm_class"], r["zone"], r["reserved"], r["used"], r["idle"], r["idle_hour_cost"])
            for r in rows] == [
        ("team-search", "gpu-inference", "zone-1", 2, 1, 1, PRICE),        # the one VM: the first zone with room
        ("team-search", "gpu-inference", "zone-2", 1, 0, 1, PRICE),
        ("team-vision", "gpu-training", "zone-1", 1, 0, 1, None)]          # no price of nvidia_h100-80c


def test_without_vcenter_the_use_is_unknown():
    d, _findings = normalize(design())
    rows = _chargeback.reserved_idle(_chargeback.design_reservations(d), None, None)
    assert [(r["reserved"], r["used"], r["idle"], r["idle_hour_cost"]) for r in rows] == [
        (2, None, None, None), (1, None, None, None), (1, None, None, None)]
    assert _chargeback.reserved_idle([], [], None) == []


@pytest.fixture
def fakes(monkeypatch):
    usage_fakes.FakeProm.made, usage_fakes.FakeProm.calls, usage_fakes.FakeProm.fail = [], [], None
    usage_fakes.FakeVcenter.made, usage_fakes.FakeVcenter.closed = [], 0
    usage_fakes.fake_vgpu_vms.fail = None
    monkeypatch.setattr(usage_fakes._prom, "PromClient", usage_fakes.FakeProm)
    monkeypatch.setattr(usage_fakes._vcenter_session, "VsphereClient", usage_fakes.FakeVcenter)

    def vms(client, start):
        pools = {"rp-root": ("Resources", None), "rp-ns": ("Namespaces", "rp-root"),
                 "rp-s": ("team-search", "rp-ns")}
        return [dict(moid="vm-1", name="search-1", resource_pool="rp-s", powered_on=True, boot_time=0.0,
                     profiles=["nvidia_h100-3-40c"])], pools, {}
    monkeypatch.setattr(gpu_usage, "read_vgpu_vms", vms)


def test_gpu_usage_reports_the_idle_slots(fakes):
    result = run_main(gpu_usage, usage_fakes.args(design=design(), vcenter_hostname="vcenter.example.com",
                                                  vcenter_password=usage_fakes.VC_PASSWORD))
    assert not result.get("failed"), result.get("msg")
    assert [(r["tenant"], r["zone"], r["used"], r["idle"]) for r in result["reserved_idle"]] == [
        ("team-search", "zone-1", 1, 1), ("team-search", "zone-2", 0, 1), ("team-vision", "zone-1", 0, 1)]
    # without reservations in the design: nothing
    plain = run_main(gpu_usage, usage_fakes.args())
    assert plain["reserved_idle"] == []
