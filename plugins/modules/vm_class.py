#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vm_class
short_description: vSphere VM class with vGPU profiles for the Supervisor (VM Service, VKS)
version_added: 0.1.0
description:
  - Creates, updates or deletes a VM class of the Supervisor through the vSphere Automation
    API (C(/api/vcenter/namespace-management/virtual-machine-classes)).
  - A class with vGPU profiles reserves all its memory; O(memory_reservation) is set to 100
    when left unset, and a lower value fails.
  - Each profile must be a valid NVIDIA vGPU profile name; with O(cluster) it must also be
    offered by a host of that cluster (read in one retrieval).
  - On vSphere API 8.0.2 and later the vGPU devices are written in the C(config_spec) form (a
    vim C(VirtualMachineConfigSpec)); before, in the legacy C(devices.vgpu_devices) form.
    Both forms are read, as are both spellings of the memory field (C(memory_MB), C(memory_mb)).
  - Only the options that are set are compared; an option left out keeps its value.
  - With O(revisions), a class is never edited to another shape (vCPUs, memory, vGPU profiles) in
    place - node VMs keep the vGPU they were powered on with, so the pool would silently run two
    profiles. O(name) is then the base name; the class used is the one of the family (O(name) or
    C(<name>-r<5 hex>)) that has the shape, else O(name) when the family is empty, else a new class
    C(<name>-r<revision>) whose revision is the start of a SHA-256 of the shape (the same rule the
    audit uses). The classes of the family with another shape are returned in RV(superseded).
  - With O(revisions) and O(retire), the superseded classes that the collection created (their
    description starts with C(gpupool )) and that are not in O(in_use) are deleted; remove them from
    the namespaces first (the supervisor_gpu_tenancy role orders this).
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  name:
    description: Id of the VM class (a DNS label, at most 63 characters).
    type: str
    required: true
  state:
    description: Whether the class exists.
    type: str
    choices: [present, absent]
    default: present
  cpu_count:
    description: Number of vCPUs. Required to create a class.
    type: int
  memory_mb:
    description: Memory in MiB. Required to create a class.
    type: int
  cpu_reservation:
    description: CPU reservation in percent (0-100).
    type: int
  memory_reservation:
    description:
      - Memory reservation in percent (0-100).
      - With vGPU profiles it must be 100; unset means 100.
    type: int
  vgpu_profiles:
    description:
      - vGPU profiles, one per vGPU device (for example V(nvidia_h100-1-10c) or V(grid_a100-4c)).
      - An empty list removes the vGPU devices.
    type: list
    elements: str
  profiling:
    description:
      - Let the guest read its vGPUs' profiling counters (C(DCGM_FI_PROF_*)) by setting NVIDIA's per-VM parameter
        C(pciPassthru<n>.cfg.enable_profiling) for each vGPU in the class's config_spec.
      - Needs the config_spec form (O(api_form=config_spec), vSphere 8.0.2 or later).
      - Unset keeps what the class has (off for a new class).
    type: bool
  description:
    description: Free text shown in vCenter.
    type: str
  cluster:
    description:
      - Cluster whose hosts must offer each profile in O(vgpu_profiles).
    type: str
  api_form:
    description:
      - How the vGPU devices are written. V(auto) decides from the vCenter API version
        (C(config_spec) on 8.0.2 and later, C(devices) before).
    type: str
    choices: [auto, config_spec, devices]
    default: auto
  revisions:
    description:
      - A changed shape gets a new class C(<name>-r<revision>) instead of an in-place edit (see above).
      - Needs O(cpu_count), O(memory_mb) and O(vgpu_profiles) with O(state=present).
    type: bool
    default: false
  in_use:
    description:
      - With O(revisions), the VM classes that a node pool names or a node runs on (for example
        RV(gpupool.vcf.vks_node_pool#module:classes_in_use)). Unset means unknown, and nothing is retired.
    type: list
    elements: str
  retire:
    description:
      - With O(revisions) and O(in_use), delete the superseded classes the collection created that
        are not in use (RV(retirable)).
    type: bool
    default: false
  adopt:
    description:
      - A class is the collection's own when its description starts with C(gpupool ) (vCenter keeps
        the description; a VM class has no custom attribute); only such a class is ever retired. A
        class made by hand keeps its description, and so its owner, unless O(adopt) is set; then it
        gets O(description) (with the mark, added when O(description) lacks it), once the run has
        made its shape as asked.
      - A class the module creates, or one already marked, gets O(description) as given.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: A VM class with one MIG-backed H100 vGPU
  gpupool.vcf.vm_class:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    vgpu_profiles: [nvidia_h100-1-10c]
    cluster: gpu-h100
    description: Inference, one 1g.10gb MIG slice

- name: Change only the description (connection from module_defaults)
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    description: Inference pool

- name: A pool's class by revision (a changed profile gets gpu-h100-1g10-r<hex>, the old class stays)
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    vgpu_profiles: [nvidia_h100-2-20c]
    description: "gpupool inference: 1 x nvidia_h100-2-20c"
    revisions: true
  register: inference_class

- name: Once the node pool runs on the new class, delete the superseded one
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    vgpu_profiles: [nvidia_h100-2-20c]
    description: "gpupool inference: 1 x nvidia_h100-2-20c"
    revisions: true
    in_use: "{{ node_pools.classes_in_use }}"
    retire: true

- name: Remove the class
  gpupool.vcf.vm_class:
    name: gpu-h100-1g10
    state: absent
"""

RETURN = r"""
vm_class:
  description: The class after the run, in normal form (null when absent).
  returned: always
  type: dict
  sample:
    name: gpu-h100-1g10
    cpu_count: 8
    memory_mb: 65536
    cpu_reservation: 0
    memory_reservation: 100
    description: Inference
    vgpu_profiles: [nvidia_h100-1-10c]
changed_fields:
  description: Fields that differ (all of them on create).
  returned: always
  type: list
  elements: str
api_form:
  description: The form the vGPU devices were (or would be) written in.
  returned: when state is present
  type: str
superseded:
  description: With O(revisions), the other classes of the family (another shape), which the pool leaves.
  returned: with revisions
  type: list
  elements: str
retirable:
  description: With O(revisions) and O(in_use), the superseded classes that can be deleted (ours, unused); deleted with O(retire).
  returned: with revisions
  type: list
  elements: str
kept:
  description: With O(revisions) and O(in_use), the superseded classes that stay, each with why.
  returned: with revisions
  type: list
  elements: dict
revision_steps:
  description: With O(revisions) and superseded classes, the ordered steps of moving the pool to the new class.
  returned: with revisions
  type: list
  elements: str
diff:
  description: The class before and after.
  returned: with --diff
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vmc
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import description_after
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import vm_class_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, DELETE, UPDATE, Change, Plan, Resource, compare
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vm_class_api import VmClassApi, api_version, offered_profiles
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    cpu_count=dict(type="int"),
    memory_mb=dict(type="int"),
    cpu_reservation=dict(type="int"),
    memory_reservation=dict(type="int"),
    vgpu_profiles=dict(type="list", elements="str"),
    profiling=dict(type="bool"),
    description=dict(type="str"),
    cluster=dict(type="str"),
    api_form=dict(type="str", choices=list(vmc.API_FORMS), default="auto"),
    revisions=dict(type="bool", default=False),
    in_use=dict(type="list", elements="str"),
    retire=dict(type="bool", default=False),
    adopt=dict(type="bool", default=False),
)


def view(name, cls):
    if cls is None:
        return None
    out = dict(name=name)
    out.update(cls)
    return out


class VmClass(Resource):
    """One VM class: read through the client layer, compared in the normal form of ``_vm_class``."""

    refusals = (vmc.VmClassError,)

    def __init__(self, module):
        Resource.__init__(self, "VM class %s" % module.params["name"])
        self.module = module
        self.p = module.params
        self.present = self.p["state"] == "present"
        self.want = None

    def read(self):
        """The class as the API answers it (and the API version); the options are checked first, without I/O."""
        p = self.p
        if self.present:
            self.want = vmc.desired(p)
        else:
            vmc.check_dns_label(p["name"], "VM class name")
        if self.want is not None and self.want["vgpu_profiles"] and p["cluster"]:
            with self.doing("read the vGPU profiles of", "cluster %s" % p["cluster"]):
                offered = offered_profiles(self.module.client(), p["cluster"])
            vmc.check_profiles(self.want["vgpu_profiles"], offered, p["cluster"])
        if p["revisions"]:
            return self.read_family()
        info = VmClassApi(self.module.rest_client()).get(p["name"])
        version = api_version(self.module.client()) if self.present and p["api_form"] == "auto" else None
        return dict(info=info, api_version=version)

    def read_family(self):
        """With revisions: every class in one list, the name resolved from the base name and the shape."""
        p = self.p
        if not self.present:
            raise vmc.VmClassError("revisions manage a pool's class by its shape: use state present "
                                   "(with retire to delete superseded classes)")
        missing = [k for k in ("cpu_count", "memory_mb", "vgpu_profiles") if p[k] is None]
        if missing:
            raise vmc.VmClassError("revisions need the whole shape: set %s" % ", ".join(missing))
        infos = dict((c.get("id"), c) for c in VmClassApi(self.module.rest_client()).list() or [])
        classes = dict((k, vmc.normalize(v)) for k, v in infos.items())
        name, superseded = vmc.resolve(p["name"], self.want, classes)
        self.name = "VM class %s" % name
        retire, keep = ([], []) if p["in_use"] is None else vmc.retirable(superseded, classes, p["in_use"])
        version = api_version(self.module.client()) if p["api_form"] == "auto" else None
        return dict(info=infos.get(name), api_version=version, resolved=name, superseded=superseded,
                    retirable=retire, kept=keep, classes=classes)

    def plan(self, live):
        name, info = live.get("resolved", self.p["name"]), live["info"]
        current = vmc.normalize(info)
        if not self.present:
            changes = compare(self.name, current, None, vmc.FIELDS) if current is not None else []
            return Plan(changes, before=view(name, current), after=None)
        want = dict(self.want)
        # the description's mark is the class's owner record: a class made by hand changes owner only with adopt
        want["description"] = description_after((current or {}).get("description"), want["description"], current is not None,
                                                self.p["adopt"])
        after = vmc.merge(current, want)
        action = CREATE if current is None else UPDATE
        changes = [Change(self.name, field, (current or {}).get(field), after[field], action)
                   for field in vmc.differs(current, after)]
        retire = live.get("retirable") or [] if self.p["retire"] else []
        for old in retire:
            changes.append(Change("VM class %s" % old, "retired", vmc.shape(live["classes"][old])[2], None, DELETE))
        legacy = bool(((info or {}).get("devices") or {}).get("vgpu_devices"))
        return Plan(changes, before=view(name, current), after=view(name, after), state=after, name=name,
                    form=vmc.choose_form(self.p["api_form"], live["api_version"]), legacy=legacy, retire=retire)

    def result(self, live, plan):
        if not self.present:
            return dict(changed_fields=plan.fields(), vm_class=None)
        out = dict(changed_fields=plan.fields(self.name), api_form=plan.facts["form"], vm_class=plan.after)
        if self.p["revisions"]:
            out.update(superseded=live["superseded"], retirable=live["retirable"], kept=live["kept"],
                       revision_steps=vmc.revision_steps(live["resolved"], live["superseded"]))
        return out

    def apply(self, plan):
        api, name = VmClassApi(self.module.rest_client()), plan.facts.get("name", self.p["name"])
        if not self.present:
            api.delete(name)
            return
        if plan.fields(self.name):
            self.write(api, name, plan)
        for old in plan.facts["retire"]:
            with self.doing("delete the superseded", "VM class %s" % old):
                api.delete(old)

    def write(self, api, name, plan):
        create = plan.facts["state"] is not None and plan.before is None
        body = vmc.request_body(name, plan.facts["state"], plan.facts["form"], create=create,
                                clear_devices=plan.facts["legacy"])
        if create:
            api.create(body)
        else:
            api.update(name, body)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "vm_class", vm_class_errors)
    Runner(module, VmClass(module)).run()


if __name__ == "__main__":
    main()
