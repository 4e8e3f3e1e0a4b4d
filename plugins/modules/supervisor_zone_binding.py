#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: supervisor_zone_binding
short_description: Reserved VM classes on a Supervisor's vSphere Zone bindings
version_added: 0.1.0
description:
  - Sets the reserved VM classes (C(vm_reservations)) of a Supervisor's vSphere Zone bindings through the
    vSphere Automation API (C(/api/vcenter/namespace-management/supervisors/{supervisor}/zones/bindings)),
    added in vSphere API 9.0. A zone the Supervisor does not bind yet is bound (type C(WORKLOAD)) with its
    reservations in one create call; a bound zone gets its reservation list replaced in one update call.
  - Ownership is by VM class. Only the classes in O(managed_classes) are set or removed in a zone named in
    O(reservations); reservations of other classes, and zones not named, stay as they are.
  - On a vCenter whose API is older than 9.0 the module fails before any change, saying so.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  supervisor:
    description: Id of the Supervisor. One of O(supervisor) and O(cluster) is required.
    type: str
  cluster:
    description:
      - Name of the Supervisor's cluster, instead of O(supervisor) - its Supervisor is found in the Supervisor
        summaries and topology (one more read).
    type: str
  reservations:
    description:
      - VMs of a VM class kept in a vSphere zone, summed over the tenants that reserve them. A count of 0
        removes the class's reservation from the zone.
    type: list
    elements: dict
    required: true
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
        description: VMs of the class reserved in the zone.
        type: int
        required: true
  managed_classes:
    description:
      - The VM classes the collection owns on the bindings (the pools' classes); a managed class a named zone
        reserves and O(reservations) does not is removed from it. Unset - the classes O(reservations) names.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Keep two inference VMs in zone-a and one training VM in zone-b
  gpupool.vcf.supervisor_zone_binding:
    hostname: vcenter.example.com
    username: administrator@vsphere.local
    password: "{{ vcenter_password }}"
    supervisor: supervisor-1
    managed_classes: [gpu-inference, gpu-training]
    reservations:
      - {zone: zone-a, vm_class: gpu-inference, count: 2}
      - {zone: zone-b, vm_class: gpu-training, count: 1}
"""

RETURN = r"""
supervisor:
  description: Id of the Supervisor whose bindings were read (from O(cluster) when given).
  returned: always
  type: str
  sample: domain-c9
bindings:
  description: The named zones' reservations after the run (what check mode predicts), zones sorted.
  returned: always
  type: list
  elements: dict
  sample:
    - zone: zone-a
      vm_reservations: [{reserved_vm_class: gpu-inference, count: 2}]
changes:
  description: One entry per zone that changes (C(object), C(field) V(binding) or V(vm_reservations), C(before), C(after), C(action)).
  returned: always
  type: list
  elements: dict
diff:
  description: The named zones' reservations before and after.
  returned: with --diff
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import supervisor_zone_binding_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._namespace_api import NamespaceApi, supervisor_of
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._zone_binding_api import ZoneBindingApi

ARGUMENT_SPEC = dict(
    supervisor=dict(type="str"),
    cluster=dict(type="str"),
    reservations=dict(type="list", elements="dict", required=True, options=dict(
        zone=dict(type="str", required=True),
        vm_class=dict(type="str", required=True),
        count=dict(type="int", required=True),
    )),
    managed_classes=dict(type="list", elements="str"),
)


class ZoneBindings(Resource):
    """The reserved VM classes of one Supervisor's zone bindings: the plan is ``_vm_reservations.plan_bindings``."""

    refusals = (vr.ReservationError,)

    def __init__(self, module):
        which = module.params["supervisor"] or "of cluster %s" % module.params["cluster"]
        Resource.__init__(self, "zone bindings of Supervisor %s" % which)
        self.module = module
        self.p = module.params
        self.supervisor = module.params["supervisor"]

    def supervisor_of(self, cluster):
        """The Supervisor id of a cluster by name (the Supervisor summaries); refused when it has none."""
        rows = NamespaceApi(self.module.rest_client(), self.module.client,
                            api_version=self.module.api_version).supervisors()
        supervisor = supervisor_of(rows, cluster)
        if supervisor is not None:
            return supervisor
        raise vr.ReservationError("cluster %s has no Supervisor; Supervisor clusters: %s" % (
            cluster, ", ".join(sorted(r.get("cluster_name") or r["cluster"] for r in rows)) or "none"))

    def api(self):
        return ZoneBindingApi(self.module.rest_client(), self.module.client, api_version=self.module.api_version)

    def read(self):
        vr.check_reservations(self.p["reservations"])
        api = self.api()
        words = vr.refusal(api.api_version())
        if words is not None:
            raise vr.ReservationError(words)
        if self.supervisor is None:
            self.supervisor = self.supervisor_of(self.p["cluster"])
        return api.list(self.supervisor)

    def plan(self, live):
        wanted = vr.supervisor_bindings([dict(vm_reservations=self.p["reservations"])])
        managed = self.p["managed_classes"]
        if managed is None:
            managed = [r["vm_class"] for r in self.p["reservations"]]
        return vr.plan_bindings(self.supervisor, live, wanted, managed)

    def result(self, live, plan):
        return dict(bindings=plan.after, changes=plan.to_list(), supervisor=self.supervisor)

    def apply(self, plan):
        api, supervisor = self.api(), self.supervisor
        zone_of = dict(("supervisor %s zone %s" % (supervisor, b["zone"]), b["zone"]) for b in plan.after)
        creates = [dict(zone=zone_of[c.object], type=vr.WORKLOAD, resource_allocation=dict(vm_reservations=c.after))
                   for c in plan if c.action == CREATE]
        if creates:
            api.create(supervisor, creates)
        for change in plan:
            if change.action != CREATE:
                api.update(supervisor, zone_of[change.object], change.after)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("supervisor", "cluster")], required_one_of=[("supervisor", "cluster")])
    enforce(module, "supervisor_zone_binding", supervisor_zone_binding_errors)
    Runner(module, ZoneBindings(module)).run()


if __name__ == "__main__":
    main()
