# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vGPU VMs of a vCenter with their resource pools and power history, for chargeback.

Requests for one read, whatever the number of VMs:

* one PropertyCollector retrieval over a ContainerView of every VirtualMachine and
  ResourcePool (VM: name, resource pool, power state, boot time, devices; pool: name, parent),
  plus the view's create and destroy;
* the power events since the start of the period from the EventManager: one
  CreateCollectorForEvents filtered by event type and time, one ReadNextEvents per
  ``page`` events, one DestroyCollector.

The pure part (``pure/_chargeback.vm_usage``) turns them into VM-hours.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import datetime

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _chargeback
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._gpu_inventory import vgpu_profiles_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, vim

VM_PROPERTIES = ["name", "resourcePool", "runtime.powerState", "runtime.bootTime", "config.hardware.device"]
POOL_PROPERTIES = ["name", "parent"]
EVENT_PAGE = 1000


def _unix(value):
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return calendar.timegm(value.utctimetuple()) + value.microsecond / 1e6


def _moid(ref):
    return getattr(ref, "_moId", None) if ref is not None else None


def read_vgpu_vms(client, start, page=EVENT_PAGE):
    """(vms, pools, transitions) as ``_chargeback.vm_usage`` takes them; ``start`` in Unix seconds."""
    vms, pools = [], {}
    for obj in client.retrieve({vim.VirtualMachine: VM_PROPERTIES, vim.ResourcePool: POOL_PROPERTIES}):
        if isinstance(obj.obj, vim.ResourcePool):
            parent = obj.get("parent")
            pools[obj.moid] = (obj.get("name"), _moid(parent) if isinstance(parent, vim.ResourcePool) else None)
            continue
        profiles = vgpu_profiles_of(obj.get("config.hardware.device"))
        if not profiles:
            continue
        vms.append(dict(moid=obj.moid, name=obj.get("name"), resource_pool=_moid(obj.get("resourcePool")),
                        powered_on=str(obj.get("runtime.powerState")) == "poweredOn",
                        boot_time=_unix(obj.get("runtime.bootTime")), profiles=profiles))
    transitions = power_transitions(client, start, set(v["moid"] for v in vms), page) if vms else {}
    return vms, pools, transitions


def power_transitions(client, start, moids, page=EVENT_PAGE):
    """VM moid -> [(unix time, on)] of the power events since ``start``, for the VMs named."""
    spec = vim.event.EventFilterSpec(
        time=vim.event.EventFilterSpec.ByTime(
            beginTime=datetime.datetime.fromtimestamp(start, datetime.timezone.utc)),
        eventTypeId=list(_chargeback.VM_ON_EVENTS + _chargeback.VM_OFF_EVENTS))
    collector = client.content.eventManager.CreateCollectorForEvents(filter=spec)
    out = {}
    try:
        while True:
            events = collector.ReadNextEvents(maxCount=page) or []
            for ev in events:
                kind = type(ev).__name__.split(".")[-1]
                moid = _moid(getattr(getattr(ev, "vm", None), "vm", None))
                if moid not in moids:
                    continue
                on = kind in _chargeback.VM_ON_EVENTS
                if not on and kind not in _chargeback.VM_OFF_EVENTS:
                    continue
                out.setdefault(moid, []).append((_unix(ev.createdTime), on))
            if len(events) < page:
                break
    finally:
        try:
            collector.DestroyCollector()
        except VsphereError:  # the collector dies with the session anyway
            pass
    return out
