"""The power events of the vGPU VMs (vsphere/_vgpu_vms.power_transitions): every page of the
event collector is read (the simulator never holds more than one page), only the VMs asked for
and the power events count, and the collector is destroyed even when a read fails."""
import datetime

import pytest
from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _vgpu_vms
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError

T0 = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)


def event(kind, moid, seconds):
    return kind(createdTime=T0 + datetime.timedelta(seconds=seconds), key=int(seconds), chainId=0, userName="",
                vm=vim.event.VmEventArgument(vm=vim.VirtualMachine(moid), name=moid))


class Collector(object):
    def __init__(self, events, fail_at=None):
        self.events, self.pos, self.reads, self.destroyed, self.fail_at = events, 0, 0, False, fail_at

    def ReadNextEvents(self, maxCount):  # noqa: N802 - the vSphere method
        self.reads += 1
        if self.fail_at == self.reads:
            raise VsphereError("session lost")
        page = self.events[self.pos:self.pos + maxCount]
        self.pos += len(page)
        return page

    def DestroyCollector(self):  # noqa: N802
        self.destroyed = True


class Client(object):
    def __init__(self, collector):
        self.filters = []
        self.content = self
        self.eventManager = self
        self.collector = collector

    def CreateCollectorForEvents(self, **kwargs):  # noqa: N802 - the vSphere method
        self.filters.append(kwargs["filter"])
        return self.collector


def test_every_page_and_only_the_vms_asked_for():
    events = [event(vim.event.VmPoweredOnEvent if i % 2 else vim.event.VmPoweredOffEvent, "vm-%d" % (i % 3), i)
              for i in range(25)]
    events.append(event(vim.event.DrsVmPoweredOnEvent, "vm-1", 30))
    events.append(event(vim.event.VmSuspendedEvent, "vm-1", 31))
    client = Client(Collector(events))
    got = _vgpu_vms.power_transitions(client, T0.timestamp(), {"vm-1", "vm-2"}, page=10)
    assert client.collector.reads == 3 and client.collector.destroyed  # 27 events in pages of 10
    assert sorted(got) == ["vm-1", "vm-2"]
    t0 = T0.timestamp()
    assert got["vm-1"][:3] == [(t0 + 1, True), (t0 + 4, False), (t0 + 7, True)]
    assert got["vm-1"][-2:] == [(t0 + 30, True), (t0 + 31, False)]
    spec = client.filters[0]
    assert spec.time.beginTime == T0 and spec.time.endTime is None
    assert sorted(spec.eventTypeId) == sorted(["VmPoweredOnEvent", "DrsVmPoweredOnEvent", "VmPoweredOffEvent",
                                               "VmSuspendedEvent"])


def test_a_failed_read_still_destroys_the_collector():
    client = Client(Collector([event(vim.event.VmPoweredOnEvent, "vm-1", 1)] * 5, fail_at=2))
    with pytest.raises(VsphereError):
        _vgpu_vms.power_transitions(client, T0.timestamp(), {"vm-1"}, page=5)
    assert client.collector.destroyed
