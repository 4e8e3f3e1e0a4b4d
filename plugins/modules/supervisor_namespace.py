#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: supervisor_namespace
short_description: vSphere Namespace with its VM classes, storage, limits and access list
version_added: 0.1.0
description:
  - Creates, updates or deletes a vSphere Namespace on a Supervisor through the vSphere
    Automation API (C(/api/vcenter/namespaces/instances)), the tenancy boundary of the GPU
    pools, with the VM classes and content libraries its users may use, storage policies with
    limits, CPU, memory and storage limits, and who may use it.
  - The API replaces list fields on update, so the module reads the namespace, merges, and
    writes whole lists. Entries given in O(vm_classes), O(content_libraries) and
    O(storage_policies) are added to those already there (a policy's limit is updated);
    with O(purge_lists) the lists are exactly what is given. Options left out are not touched.
  - Access entries are added or get their role changed through the per-entry access
    endpoints; entries not listed are removed only with O(purge_access).
  - Storage policies and content libraries are given by name or id; an unknown one fails
    before anything changes, listing what exists. A cluster that is not a Supervisor fails.
  - With O(vm_reservations) the namespace's vSphere zones (vSphere API 9.0 and later) hold reserved VM
    classes for it; on an older vCenter the module fails before any change, saying so.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  name:
    description: Namespace name (a DNS label, at most 63 characters).
    type: str
    required: true
  state:
    description: Whether the namespace exists.
    type: str
    choices: [present, absent]
    default: present
  cluster:
    description:
      - Name of the Supervisor cluster (vSphere cluster with the Supervisor enabled). Required
        to create unless O(supervisor) is given.
    type: str
  supervisor:
    description:
      - Id of the Supervisor (vSphere 8.0 U3 and later); the namespace is created with the
        C(/api/vcenter/namespaces/instances/v2) call.
    type: str
  description:
    description: Free text.
    type: str
  vm_classes:
    description: VM classes (ids) the namespace may use.
    type: list
    elements: str
  content_libraries:
    description: Content libraries (names or ids) for the VM Service.
    type: list
    elements: str
  storage_policies:
    description: Storage policies (name or id) with an optional limit in MiB.
    type: list
    elements: dict
    suboptions:
      policy:
        description: Storage policy name or id.
        type: str
        required: true
      limit_mib:
        description: Storage limit of this policy in MiB; unset is unlimited.
        type: int
  limits:
    description: Resource limits of the namespace; a key left out is not touched.
    type: dict
    suboptions:
      cpu_mhz:
        description: CPU limit in MHz.
        type: int
      memory_mib:
        description: Memory limit in MiB.
        type: int
      storage_mib:
        description: Total storage request limit in MiB.
        type: int
  access:
    description: Who may use the namespace.
    type: list
    elements: dict
    suboptions:
      subject:
        description: User or group name.
        type: str
        required: true
      domain:
        description: Identity source domain (for example V(vsphere.local)).
        type: str
        required: true
      type:
        description: Subject type.
        type: str
        choices: [USER, GROUP]
        default: USER
      role:
        description: Role on the namespace.
        type: str
        required: true
        choices: [OWNER, EDIT, VIEW]
  purge_access:
    description: Remove access entries not listed in O(access).
    type: bool
    default: false
  purge_lists:
    description: Make O(vm_classes), O(content_libraries) and O(storage_policies) exact instead of adding to them.
    type: bool
    default: false
  purge_gpu_vm_classes:
    description:
      - Remove from the namespace the VM classes that carry a vGPU profile and are not in O(vm_classes),
        so the namespace offers exactly the GPU shapes asked for; classes without a vGPU (the control
        plane's, for example) are kept. Reads the VM class list once.
      - The C(supervisor_gpu_tenancy) role sets it for the namespaces the pool design derives.
    type: bool
    default: false
  vm_reservations:
    description:
      - Reserved VM classes of the namespace, vSphere API 9.0 and later - VMs of a VM class kept for it in a
        vSphere zone its Supervisor binds (the Supervisor's own reservations come first, see
        M(gpupool.vcf.supervisor_zone_binding)). Each zone named becomes a zone of the namespace
        (C(Instances.ZoneSpec)) with exactly the reservations listed for it; a count of 0 lists the zone
        without that class. Zones not named are left as they are.
      - vCenter does not return a namespace zone's reservations (C(InfoV2.zones) holds the zone, its type and
        whether it is marked for removal), so a zone the namespace already has is taken to hold what is asked
        and is not written again unless O(rewrite_zones) is set. A zone the namespace lacks is added (on the
        v2 create of a new namespace, else in one update). A named zone that vCenter marks for removal (it is
        being drained) is refused before any change.
      - Unset - the namespace's zones are not read or touched.
    type: list
    elements: dict
    suboptions:
      zone:
        description: vSphere zone id.
        type: str
        required: true
      vm_class:
        description: VM class id.
        type: str
        required: true
      count:
        description: VMs of the class reserved for the namespace in the zone.
        type: int
        required: true
  disallow_unreserved_direct_path_usage:
    description:
      - The zones named in O(vm_reservations) refuse a VM with a DirectPath device (a vGPU) that does not use a
        reserved VM class instance (C(ZoneSpec.disallow_unreserved_direct_path_usage)).
    type: bool
    default: false
  rewrite_zones:
    description:
      - Write every zone named in O(vm_reservations) whether or not the namespace has it, since vCenter gives no
        read of the reservations to compare with (the task then always reports a change). Use it once after
        changing a count in a zone the namespace already has.
    type: bool
    default: false
  adopt:
    description:
      - A namespace is the collection's own when its description starts with C(gpupool ) (vCenter keeps
        the description; a namespace has no custom attribute). A namespace made by hand keeps its
        description, and so its owner, unless O(adopt) is set; then it gets O(description) (with the
        mark, added when O(description) lacks it) and is the collection's from then on.
      - A namespace the module creates, or one already marked, gets O(description) as given.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: A tenant namespace for inference on the H100 Supervisor
  gpupool.vcf.supervisor_namespace:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    name: team-a-inference
    cluster: gpu-h100
    description: Team A, inference pool
    vm_classes: [gpu-h100-1g10, best-effort-small]
    content_libraries: [vm-images]
    storage_policies:
      - policy: vSAN Default Storage Policy
        limit_mib: 512000
    limits:
      memory_mib: 262144
    access:
      - subject: team-a
        domain: example.com
        type: GROUP
        role: EDIT

- name: Add one VM class, nothing else changes (connection from module_defaults)
  module_defaults:
    group/gpupool.vcf.vsphere:
      hostname: vcenter.example.com
      username: administrator@vsphere.local
      password: "{{ vcenter_password }}"
  gpupool.vcf.supervisor_namespace:
    name: team-a-inference
    vm_classes: [gpu-h100-2g20]
"""

RETURN = r"""
namespace:
  description: The namespace after the run in normal form (ids for policies and libraries); null when absent.
  returned: always
  type: dict
  sample:
    name: team-a-inference
    cluster: domain-c9
    description: Team A
    vm_classes: [gpu-h100-1g10]
    content_libraries: [6a4c0b5e-0d0b-4a1e-9c59-5b0e3f0c1a11]
    storage_policies: {aa6d5a82-1c88-45da-85d3-3d74b91a5bad: 512000}
    limits: {cpu_mhz: null, memory_mib: 262144, storage_mib: null}
    access: [{type: GROUP, domain: example.com, subject: team-a, role: EDIT}]
zones:
  description:
    - With O(vm_reservations), the named zones after the run (what check mode predicts) -
      C(name), C(vm_reservations) (C(reserved_vm_class), C(count)), C(disallow_unreserved_direct_path_usage).
  returned: when O(vm_reservations) is given
  type: list
  elements: dict
zones_unverified:
  description: Zones the namespace already had, whose reservations vCenter does not return (taken as asked).
  returned: when O(vm_reservations) is given
  type: list
  elements: str
changed_fields:
  description: Fields that differ (all on create); V(zone), V(vm_reservations) and V(disallow_unreserved_direct_path_usage) for the zones.
  returned: always
  type: list
  elements: str
diff:
  description: The namespace before and after.
  returned: with --diff
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace as nsu
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_class as vcu
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import description_after
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import supervisor_namespace_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._namespace_api import NamespaceApi
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, DELETE, UPDATE, Change, Plan, Resource, compare
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vm_class_api import VmClassApi
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
    cluster=dict(type="str"),
    supervisor=dict(type="str"),
    description=dict(type="str"),
    vm_classes=dict(type="list", elements="str"),
    content_libraries=dict(type="list", elements="str"),
    storage_policies=dict(type="list", elements="dict", options=dict(
        policy=dict(type="str", required=True),
        limit_mib=dict(type="int"),
    )),
    limits=dict(type="dict", options=dict(
        cpu_mhz=dict(type="int"),
        memory_mib=dict(type="int"),
        storage_mib=dict(type="int"),
    )),
    access=dict(type="list", elements="dict", options=dict(
        subject=dict(type="str", required=True),
        domain=dict(type="str", required=True),
        type=dict(type="str", choices=["USER", "GROUP"], default="USER"),
        role=dict(type="str", required=True, choices=list(nsu.ROLES)),
    )),
    purge_access=dict(type="bool", default=False),
    purge_lists=dict(type="bool", default=False),
    purge_gpu_vm_classes=dict(type="bool", default=False),
    adopt=dict(type="bool", default=False),
    vm_reservations=dict(type="list", elements="dict", options=dict(
        zone=dict(type="str", required=True),
        vm_class=dict(type="str", required=True),
        count=dict(type="int", required=True),
    )),
    disallow_unreserved_direct_path_usage=dict(type="bool", default=False),
    rewrite_zones=dict(type="bool", default=False),
)


def view(name, ns):
    if ns is None:
        return None
    out = dict(name=name)
    out.update(ns)
    return out


class Namespace(Resource):
    """One vSphere Namespace: read through the client layer, compared in the normal form of ``_namespace``."""

    refusals = (nsu.NamespaceError, vr.ReservationError)

    def __init__(self, module):
        Resource.__init__(self, "namespace %s" % module.params["name"])
        self.module = module
        self.p = module.params
        self.present = self.p["state"] == "present"
        self.access = self.limits = None

    def api(self):
        return NamespaceApi(self.module.rest_client(), self.module.client, api_version=self.module.api_version)

    def supervisor_id(self, api, cluster):
        """The id of a Supervisor cluster by name; clear errors for a missing or non-Supervisor cluster."""
        summaries = api.supervisors()
        for summary in summaries:
            if cluster in (summary.get("cluster_name"), summary.get("cluster")):
                return summary["cluster"]
        if api.cluster_exists(cluster):
            names = sorted(s.get("cluster_name") or s["cluster"] for s in summaries)
            raise nsu.NamespaceError("cluster %s is not a Supervisor (no Supervisor is enabled on it); Supervisor "
                                     "clusters: %s" % (cluster, ", ".join(names) or "none"))
        raise nsu.NamespaceError("cluster %s not found" % cluster)

    def read(self):
        """The namespace, the Supervisor it goes on and the ids the options name; options checked first."""
        p, name = self.p, self.p["name"]
        nsu.check_name(name)
        self.access = nsu.check_access(p["access"])
        self.limits = nsu.check_limits(p["limits"])
        api = self.api()
        zoned = self.present and p["vm_reservations"] is not None
        if zoned:
            # reserved VM classes: checked, and refused on a vCenter before API 9.0, before any other read
            vr.check_reservations(p["vm_reservations"])
            words = vr.refusal(api.api_version())
            if words is not None:
                raise vr.ReservationError(words)
        live = dict(info=api.get(name), cluster_id=p["supervisor"], policies=None, libraries=None, zones=None)
        if not self.present:
            return live
        if zoned and live["info"] is not None:
            zones = api.zones(name)
            draining = sorted(set(z["zone"] for z in zones if z.get("marked_for_removal")) &
                              set(r["zone"] for r in p["vm_reservations"]))
            if draining:
                # vCenter removes such a zone once its workloads are gone: writing it now is not ours to decide
                raise vr.ReservationError("zone %s of namespace %s is marked for removal (vCenter drains it of workloads "
                                          "first); rerun once it is gone, or keep it out of vm_reservations: nothing "
                                          "was changed" % (", ".join(draining), name))
            live["zones"] = [z["zone"] for z in zones]
        current = nsu.normalize(live["info"])
        if p["cluster"]:
            live["cluster_id"] = self.supervisor_id(api, p["cluster"])
            if current is not None and current["cluster"] and current["cluster"] != live["cluster_id"]:
                raise nsu.NamespaceError("namespace %s exists on cluster %s, not on %s; a namespace cannot move"
                                         % (name, current["cluster"], p["cluster"]))
        elif not p["supervisor"] and current is None:
            raise nsu.NamespaceError("cluster or supervisor is required to create namespace %s" % name)
        if p["storage_policies"] is not None:
            live["policies"] = api.policy_names()
        if p["content_libraries"] is not None:
            live["libraries"] = api.library_names(p["content_libraries"])
        if p["purge_gpu_vm_classes"]:
            classes = VmClassApi(self.module.rest_client()).list()
            live["gpu_classes"] = vcu.with_vgpu(dict((c.get("id"), vcu.normalize(c)) for c in classes))
        return live

    def wanted(self, live):
        """The options with names resolved to ids (None: leave alone)."""
        p = self.p
        current = nsu.normalize(live["info"])
        # the description's mark is the namespace's owner record: one made by hand changes owner only with adopt
        description = description_after((current or {}).get("description"), p["description"], current is not None, p["adopt"])
        want = dict(description=description, vm_classes=p["vm_classes"], limits=self.limits, access=self.access)
        if p["storage_policies"] is not None:
            ids = nsu.resolve([s["policy"] for s in p["storage_policies"]], live["policies"], "storage policy",
                              "storage policies")
            want["storage_policies"] = [dict(policy=i, limit_mib=s.get("limit_mib")) for i, s in zip(ids, p["storage_policies"])]
        if p["content_libraries"] is not None:
            want["content_libraries"] = nsu.resolve(p["content_libraries"], live["libraries"], "content library",
                                                    "content libraries")
        return want

    def zones_plan(self, live):
        """The plan of the namespace's zones (``_vm_reservations.plan_namespace_zones``): a zone the
        namespace has is taken to hold what is asked (vCenter returns no reservations), unless
        rewrite_zones; None without vm_reservations."""
        p = self.p
        if p["vm_reservations"] is None:
            return None
        wanted = vr.namespace_zones(p["vm_reservations"], p["disallow_unreserved_direct_path_usage"])
        have = set(live.get("zones") or [])
        if p["rewrite_zones"]:
            assumed = [dict(name=z["name"], vm_reservations=None, disallow_unreserved_direct_path_usage=None)
                       for z in wanted if z["name"] in have]
        else:
            assumed = [z for z in wanted if z["name"] in have]
        plan = vr.plan_namespace_zones(p["name"], assumed, wanted, [r["vm_class"] for r in p["vm_reservations"]])
        if p["rewrite_zones"]:
            for z in wanted:   # written whatever they hold: each one a change
                if z["name"] in have and not [c for c in plan if c.object.endswith(" zone %s" % z["name"])]:
                    plan.add("namespace %s zone %s" % (p["name"], z["name"]), "vm_reservations", None,
                             z["vm_reservations"], UPDATE)
        return plan

    def plan(self, live):
        name = self.p["name"]
        current = nsu.normalize(live["info"])
        if not self.present:
            changes = compare(self.name, current, None, nsu.differs(None, current)) if current is not None else []
            return Plan(changes, before=view(name, current), after=None, verb=DELETE if changes else None)
        base = current if current is not None else nsu.empty(live["cluster_id"])
        after = nsu.merge(base, self.wanted(live), purge_lists=self.p["purge_lists"], purge_access=self.p["purge_access"],
                          purge_vm_classes=live.get("gpu_classes"))
        action = CREATE if current is None else UPDATE
        changes = [Change(self.name, field, (current or {}).get(field), after[field], action)
                   for field in nsu.differs(current, after)]
        before_view, after_view = view(name, current), view(name, after)
        zones = self.zones_plan(live)
        if zones is not None:
            changes += zones.changes
            after_view["zones"] = zones.after
            if before_view is not None:
                before_view["zones"] = sorted(live.get("zones") or [])
        return Plan(changes, before=before_view, after=after_view, current=current, state=after, zones=zones,
                    verb=action if (changes and current is None) else UPDATE)

    def result(self, live, plan):
        out = dict(changed_fields=plan.fields(), namespace=plan.after)
        zones = plan.facts.get("zones")
        if zones is not None:
            out["zones"] = zones.after
            out["zones_unverified"] = sorted(set(live.get("zones") or []) & set(z["name"] for z in zones.after))
        return out

    def zone_specs(self, plan):
        """The ZoneSpecs to write: the named zones with a change, whole."""
        zones = plan.facts.get("zones")
        if zones is None:
            return []
        changed = set(c.object for c in zones)
        return [dict(z, vm_reservations=[dict(r) for r in z["vm_reservations"]]) for z in zones.after
                if "namespace %s zone %s" % (self.p["name"], z["name"]) in changed]

    def apply(self, plan):
        api, name = self.api(), self.p["name"]
        current, after = plan.facts.get("current"), plan.facts.get("state")
        specs = self.zone_specs(plan)
        if plan.facts.get("verb") == DELETE:
            api.delete(name)
        elif plan.facts.get("verb") == CREATE:
            by_supervisor = bool(self.p["supervisor"] and not self.p["cluster"])
            body = nsu.create_body(name, after, cluster_field="supervisor" if by_supervisor else "cluster")
            if specs and by_supervisor:
                body["zones"] = specs   # CreateSpecV2.zones
                specs = []
            api.create(body, by_supervisor)
            if specs:
                api.update(name, dict(zones=specs))
        else:
            body = nsu.update_body(current, after)
            if body:
                api.update(name, body)
            for method, entry in nsu.access_changes(current, after):
                api.set_access(name, method, entry)
            if specs:
                api.update(name, dict(zones=specs))   # UpdateSpec.zones: the listed zones are added or set


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, mutually_exclusive=[("cluster", "supervisor")], supports_check_mode=True)
    enforce(module, "supervisor_namespace", supervisor_namespace_errors)
    Runner(module, Namespace(module)).run()


if __name__ == "__main__":
    main()
