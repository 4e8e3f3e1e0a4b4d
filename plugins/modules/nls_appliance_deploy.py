#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nls_appliance_deploy
short_description: Deploy the NVIDIA DLS appliance (one node or an HA pair) from its OVA on vSphere
version_added: 0.2.0
description:
  - Imports the NVIDIA Delegated License Service appliance from its OVF or OVA through the vSphere API
    (C(OvfManager.CreateImportSpec), C(ResourcePool.ImportVApp), an HTTP PUT of every disk to the import
    lease, C(HttpNfcLeaseComplete)) with the OVF properties given per node (its network settings), and
    powers it on.
  - Idempotent - a node whose VM the collection deployed (custom attribute C(gpupool.vcf.nls-appliance)
    with C(state=deployed)) is never redeployed; OVF properties that differ from the variables are reported
    as a warning, not applied (the appliance keeps its settings in its own configuration). A VM of that
    name the collection did not deploy is left alone and the module fails before any change. A node whose
    import failed half-way (marked C(state=importing)) is removed and imported again.
  - With two nodes (the DLS HA pair) the cluster gets a VM anti-affinity rule for the two; for every node
    the HA restart priority and a per-VM DRS override are set. All cluster settings go in one reconfigure.
  - The OVF properties are checked against the properties the image declares before anything is read from
    or changed in vSphere.
  - Check mode reads vCenter and the image and reports exactly what a run would do.
author:
  - gpupool.vcf developers (@gpupool)
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  ovf:
    description: Path of the appliance image on the controller - an C(.ova), or an C(.ovf) with its files beside it.
    type: path
    required: true
  nodes:
    description:
      - The appliance nodes, one or two (the second makes the HA pair). The first is the primary.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: VM name.
        type: str
        required: true
      ovf_properties:
        description:
          - OVF properties of this node (network settings such as address, prefix, gateway, DNS, host name),
            keyed by the qualified keys the image declares (see RV(ovf)).
        type: dict
        default: {}
  cluster:
    description: Cluster the appliance runs in (its root resource pool receives the VMs).
    type: str
    required: true
  datastore:
    description: Datastore for the VMs' disks.
    type: str
    required: true
  network:
    description: vSphere network every OVF network of the image is mapped to (default - vCenter's choice).
    type: str
  datacenter:
    description: Datacenter whose VM folder receives the VMs; needed only when vCenter has more than one.
    type: str
  disk_provisioning:
    description: Disk provisioning of the import.
    type: str
    choices: [thin, thick, eagerZeroedThick]
    default: thin
  power_on:
    description: Power the nodes on (a deployed node that is off is powered on).
    type: bool
    default: true
  cluster_settings:
    description: Set the HA restart priority and the DRS override of every node, and the anti-affinity rule of a pair.
    type: bool
    default: true
  anti_affinity_rule:
    description: Name of the VM anti-affinity rule of the HA pair (default C(<first node>-ha-pair)).
    type: str
  restart_priority:
    description: vSphere HA restart priority of the nodes.
    type: str
    choices: [lowest, low, medium, high, highest]
    default: high
  drs_behavior:
    description: Per-VM DRS automation level of the nodes (pinned - DRS does not move them on its own).
    type: str
    choices: [manual, partiallyAutomated]
    default: partiallyAutomated
  upload_timeout:
    description: Seconds the upload of one node's disks may take.
    type: int
    default: 3600
attributes:
  check_mode:
    description: Reads vCenter and the image; imports, powers on and reconfigures nothing; reports what would be done.
  diff_mode:
    description: Returns each node's state and the cluster settings before and after.
notes:
  - The appliance's OVF property keys are those of its image; read them from RV(ovf) of a check-mode
    run, or from the image's descriptor.
  - A failure names what was done - for example a node imported but the cluster not reconfigured - and a rerun
    resumes from there.
"""

EXAMPLES = r"""
- name: DLS HA pair from its OVA
  gpupool.vcf.nls_appliance_deploy:
    ovf: /srv/images/nls-3.5.0-bios.ova
    cluster: mgmt
    datastore: vsanDatastore
    network: mgmt-pg
    nodes:
      - name: dls-1
        ovf_properties: {"<ip property of the image>": 10.0.10.21}
      - name: dls-2
        ovf_properties: {"<ip property of the image>": 10.0.10.22}
"""

RETURN = r"""
nodes:
  description: Per node - its role, the action of the run (import, redeploy, power_on, keep) and its VM id.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "dls-1", "role": "primary", "action": "import", "moid": "vm-42"}]
cluster_changes:
  description: The cluster settings changed (object, field, before, after).
  returned: success
  type: list
  elements: dict
drift:
  description: OVF properties of deployed nodes that differ from the variables (not applied).
  returned: success
  type: list
  elements: str
ovf:
  description: What the image declares - its name, its properties (qualified key - type, default, user_configurable) and networks.
  returned: success
  type: dict
uploaded_bytes:
  description: Bytes of disks uploaded by the run (0 when it imported nothing, for instance a run that only powers a node on).
  returned: when the run makes a change
  type: int
"""

import os

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nls_appliance as nls
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._licensing_inputs import nls_appliance_deploy_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._nls_appliance_api import ApplianceSite, OvfPackage
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import ssl_context

ARGUMENT_SPEC = dict(
    ovf=dict(type="path", required=True),
    nodes=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True), ovf_properties=dict(type="dict", default={}))),
    cluster=dict(type="str", required=True),
    datastore=dict(type="str", required=True),
    network=dict(type="str"),
    datacenter=dict(type="str"),
    disk_provisioning=dict(type="str", choices=["thin", "thick", "eagerZeroedThick"], default="thin"),
    power_on=dict(type="bool", default=True),
    cluster_settings=dict(type="bool", default=True),
    anti_affinity_rule=dict(type="str"),
    restart_priority=dict(type="str", choices=list(nls.RESTART_PRIORITIES), default="high"),
    drs_behavior=dict(type="str", choices=list(nls.DRS_BEHAVIORS), default="partiallyAutomated"),
    upload_timeout=dict(type="int", default=3600),
)


class Appliance(Resource):
    """The appliance nodes' VMs and their cluster settings."""

    verb = "deploy"
    refusals = (nls.OvfError,)

    def __init__(self, module):
        p = module.params
        names = [n["name"] for n in p["nodes"]]
        Resource.__init__(self, "the DLS appliance %s" % " + ".join(names))
        self.module, self.p = module, p
        self.nodes = nls.node_roles([dict(name=n["name"], properties=dict(
            (k, "" if v is None else str(v)) for k, v in (n["ovf_properties"] or {}).items())) for n in p["nodes"]])
        self.rule = (p["anti_affinity_rule"] or "%s-ha-pair" % names[0]) if len(names) == 2 else None
        self.package = self.site = self.ovf = None
        self.drift = []

    def read(self):
        p = self.p
        if not os.path.isfile(p["ovf"]) or not p["ovf"].lower().endswith((".ova", ".ovf")):
            raise Failure("Unable to deploy %s: ovf %s is not an .ova or .ovf file; nothing was changed" % (
                self.name, p["ovf"]))
        with self.doing("read the appliance image", p["ovf"]):
            self.package = OvfPackage(p["ovf"])
        self.ovf = nls.parse_ovf(self.package.descriptor)
        errors = []
        for node in self.nodes:
            errors += ["%s: %s" % (node["name"], e) for e in nls.property_errors(self.ovf, node["properties"])]
        if errors:
            raise Failure("Unable to deploy %s: %s; nothing was changed" % (self.name, "; ".join(errors)),
                          ovf=self._ovf_result())
        client = self.module.client()
        self.site = ApplianceSite(client, p["cluster"], p["datastore"], p["network"], p["datacenter"],
                                  ssl_context(p["validate_certs"], p["ca_file"]))
        return self.site.read([n["name"] for n in self.nodes])

    def _ovf_result(self):
        return dict(name=self.ovf["name"], networks=self.ovf["networks"], properties=self.ovf["properties"])

    def plan(self, live):
        p = self.p
        deploy = nls.deploy_plan(self.nodes, live["vms"], p["power_on"])
        if deploy["refused"]:
            raise Failure("Unable to deploy %s: %s; nothing was changed" % (self.name, "; ".join(deploy["refused"])))
        self.warnings.extend(deploy["drift"])
        self.drift = list(deploy["drift"])
        self.warnings.extend(self._cluster_warnings(live["cluster"]))
        actions = dict(deploy["actions"])
        names = [n["name"] for n in self.nodes]
        cluster = dict(rules=live["cluster"]["rules"], das=dict(live["cluster"]["das"]), drs=dict(live["cluster"]["drs"]))
        for name, action in actions.items():  # a new VM has no cluster settings yet
            if action in ("import", "redeploy"):
                cluster["das"].pop(name, None)
                cluster["drs"].pop(name, None)
        settings = nls.cluster_plan(names, cluster, self.rule, p["restart_priority"], p["drs_behavior"]) \
            if p["cluster_settings"] else dict(rule=None, das=[], drs=[], changes=[])
        plan = Plan(deploy=deploy, actions=actions, settings=settings, live=live)
        for name in names:
            if actions[name] != "keep":
                plan.add("vm %s" % name, "state", self._state(live["vms"].get(name)), self._after(actions[name]),
                         actions[name])
        for obj, field, before, after in settings["changes"]:
            plan.add(obj, field, before, after, "reconfigure")
        plan.before = dict(nodes=dict((n, self._state(live["vms"].get(n))) for n in names),
                           cluster=dict((c[0] + " " + c[1], c[2]) for c in settings["changes"]))
        plan.after = dict(nodes=dict((n, self._after(actions[n]) if actions[n] != "keep" else self._state(live["vms"][n]))
                                     for n in names),
                          cluster=dict((c[0] + " " + c[1], c[3]) for c in settings["changes"]))
        return plan

    def _cluster_warnings(self, cluster):
        p, out = self.p, []
        if not p["cluster_settings"]:
            return out
        if cluster.get("ha_enabled") is not True:
            out.append("vSphere HA is not enabled on cluster %s: the restart priority %s is set but takes effect only "
                       "once HA is on; this module does not change cluster settings" % (p["cluster"], p["restart_priority"]))
        if cluster.get("drs_enabled") is False or cluster.get("overrides_enabled") is False:
            out.append("DRS or its per-VM overrides are disabled on cluster %s: the nodes' DRS override is set but takes "
                       "effect only once both are enabled" % p["cluster"])
        return out

    @staticmethod
    def _state(vm):
        if vm is None:
            return "absent"
        return "%s, %s" % ((vm.get("owner") or {}).get("state", "not ours"), vm.get("power"))

    def _after(self, action):
        return "deployed, %s" % ("poweredOn" if self.p["power_on"] else "poweredOff")

    def result(self, live, plan):
        actions = plan.facts["actions"] if plan else dict((n["name"], "keep") for n in self.nodes)
        settings = plan.facts["settings"] if plan else dict(changes=[])
        return dict(nodes=[dict(name=n["name"], role=n["role"], action=actions[n["name"]],
                                moid=(live["vms"].get(n["name"]) or {}).get("moid")) for n in self.nodes],
                    cluster_changes=[dict(object=o, field=f, before=b, after=a) for o, f, b, a in settings["changes"]],
                    drift=list(self.drift), ovf=self._ovf_result())

    def apply(self, plan):
        p = self.p
        actions = plan.facts["actions"]
        done = self.partial.setdefault("done", [])
        out = dict(nodes=[])
        for node in self.nodes:
            name, action = node["name"], actions[node["name"]]
            moid = (plan.facts["live"]["vms"].get(name) or {}).get("moid")
            if action == "redeploy":
                with self.doing("remove the half-imported VM", name):
                    self.site.remove(name)
                done.append("%s: half-imported VM removed" % name)
            if action in ("import", "redeploy"):
                self.partial["importing"] = name
                with self.doing("import", "appliance node %s from %s" % (name, p["ovf"])):
                    moid = self.site.deploy(self.package, name, node["properties"], node["role"],
                                            networks=self.ovf["networks"], power_on=p["power_on"],
                                            disk_provisioning=p["disk_provisioning"], lease_timeout=p["upload_timeout"])
                del self.partial["importing"]
                done.append("%s: imported%s" % (name, " and powered on" if p["power_on"] else ""))
            elif action == "power_on":
                with self.doing("power on", "appliance node %s" % name):
                    self.site.power_on(name)
                done.append("%s: powered on" % name)
            out["nodes"].append(dict(name=name, role=node["role"], action=action, moid=moid))
        settings = plan.facts["settings"]
        if settings["rule"] or settings["das"] or settings["drs"]:
            with self.doing("reconfigure", "cluster %s for the appliance nodes" % p["cluster"]):
                self.site.reconfigure(settings, self.rule, p["restart_priority"], p["drs_behavior"])
            done.append("cluster %s: appliance settings set" % p["cluster"])
        out["uploaded_bytes"] = self.site.uploaded
        return out

    def next_step(self, exc):
        done = list(self.partial.get("done") or [])
        name = self.partial.get("importing")
        if name and self.site is not None and name in self.site.vm_refs:
            done.append("%s: VM created by the import, left marked state=importing" % name)
        if not done:
            return "nothing was changed"
        return "done before the failure: %s; a rerun resumes (a node left half-imported is removed and imported " \
               "again)" % "; ".join(done)


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "nls_appliance_deploy", nls_appliance_deploy_errors)
    Runner(module, Appliance(module)).run()


if __name__ == "__main__":
    main()
