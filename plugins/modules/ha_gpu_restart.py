#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ha_gpu_restart
short_description: vSphere HA as the GPU pools' spare - admission control and per-pool restart priorities
version_added: 0.1.0
description:
  - Sets the HA restart priority of every node VM of the pools in O(pools) (a VM of the cluster that
    holds a vGPU, mapped to the pool with its vGPU profile; of several pools with that profile, the one
    whose node pool or VM class name is part of the VM's name), so that after a host failure HA restarts
    inference first, then training, then notebooks, on the capacity admission control keeps free.
  - With O(admission_control), turns HA and its admission control on with the percentage-based policy
    (C(ClusterFailoverResourcesAdmissionControlPolicy)) that reserves the failover capacity the design's
    spare rule keeps (see docs/capacity.md).
  - Writes everything with one C(ReconfigureComputeResource_Task) per cluster; a rerun with nothing to
    change makes no write.
  - What it sets is recorded on vCenter, in the custom attribute C(gpupool.vcf.ha-restart) of the
    cluster (the managed object ids of the VMs, and C(cluster) for the admission control). An override
    of a pool VM that the record lacks and that differs from the pool's priority was set by someone
    else; it is reported in RV(kept_foreign) and left as it is, unless O(adopt). So is an admission
    control configured by someone else on a cluster with HA on. An override the record holds on a VM
    that is no longer a pool's node VM is removed.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  cluster:
    description: Name of the HA cluster.
    type: str
    required: true
  pools:
    description: The pools of the cluster and the restart priority of their node VMs.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Pool name.
        type: str
        required: true
      vgpu_profile:
        description: vGPU profile of the pool's node VMs.
        type: str
        required: true
      node_pool:
        description: Node pool name (VKS names node VMs after it); default the pool name.
        type: str
      vm_class:
        description: VM class name of the pool.
        type: str
      restart_priority:
        description: HA restart priority of the pool's node VMs.
        type: str
        required: true
        choices: [disabled, lowest, low, medium, high, highest]
  admission_control:
    description:
      - The admission control to keep; omitted, the cluster's HA settings are left as they are.
    type: dict
    suboptions:
      failover_level:
        description: Host failures the cluster tolerates.
        type: int
        required: true
      cpu_percent:
        description: CPU of the cluster reserved for failover (percent).
        type: int
        required: true
      memory_percent:
        description: Memory of the cluster reserved for failover (percent).
        type: int
        required: true
  exclude:
    description: VMs (names or managed object ids) whose override is never added, changed or removed.
    type: list
    elements: str
    default: []
  adopt:
    description:
      - Take over the overrides and the admission control set by someone else - change them to the design
        and record them as the collection's (one that already matches is recorded too).
    type: bool
    default: false
notes:
  - Writing the record needs the privileges C(Global.SetCustomField) and, once, C(Global.ManageCustomFields);
    the reconfigure needs C(Host.Inventory.EditCluster).
"""

EXAMPLES = r"""
- name: Inference restarts first, notebooks last, one host kept spare of four
  gpupool.vcf.ha_gpu_restart:
    cluster: gpu-h100
    pools:
      - {name: llm-inference, vgpu_profile: nvidia_h100-3-40c, restart_priority: highest}
      - {name: notebooks, vgpu_profile: nvidia_h100-1-10c, restart_priority: lowest}
    admission_control: {failover_level: 1, cpu_percent: 25, memory_percent: 25}
"""

RETURN = r"""
priorities:
  description: The restart priority the design gives each pool VM (VM name -> priority).
  returned: always
  type: dict
added:
  description: VMs that got a new HA override.
  returned: always
  type: list
  elements: str
updated:
  description: VMs whose HA override changed.
  returned: always
  type: list
  elements: str
removed:
  description: VMs whose override the collection had set and that are no longer a pool's node VMs.
  returned: always
  type: list
  elements: str
admission_control:
  description: The cluster's HA settings after the run (C(ha_enabled), C(admission_control), C(policy), C(failover_level), C(cpu_percent), C(memory_percent)).
  returned: always
  type: dict
owned:
  description: VMs (and C(cluster)) the record holds as the collection's after the run.
  returned: always
  type: list
  elements: str
kept_foreign:
  description: Overrides and settings set by someone else that differ from the design, left as they are.
  returned: always
  type: list
  elements: str
unmatched:
  description: VMs holding a vGPU that no pool of O(pools) claims (left alone).
  returned: always
  type: list
  elements: str
diff:
  description: C(overrides) the restart priority per pool VM, C(admission_control) the cluster's HA settings, C(owned) the record.
  returned: with --diff
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ha import PRIORITIES, HaPlanError, plan as plan_ha
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._vsphere_inputs import ha_gpu_restart_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._ha_api import ClusterHa

ARGUMENT_SPEC = dict(
    cluster=dict(type="str", required=True),
    pools=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True),
        vgpu_profile=dict(type="str", required=True),
        node_pool=dict(type="str"),
        vm_class=dict(type="str"),
        restart_priority=dict(type="str", required=True, choices=list(PRIORITIES)),
    )),
    admission_control=dict(type="dict", options=dict(
        failover_level=dict(type="int", required=True),
        cpu_percent=dict(type="int", required=True),
        memory_percent=dict(type="int", required=True),
    )),
    exclude=dict(type="list", elements="str", default=[]),
    adopt=dict(type="bool", default=False),
)


class HaRestart(Resource):
    """One cluster's HA admission control and its pool VMs' restart priorities."""

    verb = "set HA restart priorities of"
    refusals = (HaPlanError,)

    def __init__(self, module):
        Resource.__init__(self, "cluster %s" % module.params["cluster"])
        self.module = module
        self.p = module.params
        self.api = None

    def read(self):
        self.api = ClusterHa(self.module.client(), self.p["cluster"])
        with self.doing("read the HA settings of"):
            return self.api.read()

    def plan(self, live):
        p = self.p
        wanted = dict(cluster=p["cluster"], pools=p["pools"], admission_control=p["admission_control"],
                      adopt=p["adopt"], exclude=p["exclude"])
        ha = plan_ha(live, wanted)
        self.warnings.extend(ha.kept_foreign)
        admission_after = ha.admission if ha.admission is not None else ha.admission_before
        before = dict(overrides=dict(ha.before), admission_control=ha.admission_before,
                      owned=ha.owned_names(ha.owned_before))
        after = dict(overrides=dict(ha.after), admission_control=admission_after, owned=ha.owned_names(ha.owned_after))
        return Plan(ha.changes(), before=before, after=after, ha=ha)

    def result(self, live, plan):
        return plan.facts["ha"].summary()

    def apply(self, plan):
        """Claim the adds, edits and the cluster in the record, reconfigure once, then drop what was removed."""
        ha = plan.facts["ha"]
        claim = ha.owned_after | ha.owned_before
        if claim != ha.owned_before:
            with self.doing("record the HA overrides of"):
                self.api.write_record(claim)
            self.partial["changed"] = True
        if ha.reconfigure:
            with self.doing("set HA settings of"):
                self.api.apply(ha)
            self.partial["changed"] = True
        if ha.owned_after != claim:
            with self.doing("record the HA overrides of"):
                self.api.write_record(ha.owned_after)
            self.partial["changed"] = True


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "ha_gpu_restart", ha_gpu_restart_errors)
    Runner(module, HaRestart(module)).run()


if __name__ == "__main__":
    main()
