#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vlcm_component
short_description: The NVIDIA host driver component in a cluster's vLCM desired image
version_added: 0.1.0
description:
  - Puts a component (the NVIDIA vGPU host driver, C(NVD-AIE-800), by default) at a version in
    the desired image of a cluster managed by a single vSphere Lifecycle Manager image, through
    the vSphere Automation API (C(/api/esx/settings)).
  - When O(depot_url) is given and no offline depot has that location yet, the depot is
    imported first. The component at the version must be offered by an imported depot;
    otherwise the module fails, and a depot it imported for this run is removed again.
  - A draft of the cluster's software is created, the component set in it and the draft
    committed. When the desired image already holds the component at the version, nothing
    is done. Check mode predicts the result; C(--diff) shows the desired version before and after.
  - Reports the compliance of every host of the cluster with the desired image (current and
    desired component version, C(COMPLIANT) or C(NON_COMPLIANT)).
  - With O(remediate), non-compliant hosts are remediated (vLCM takes them through maintenance
    mode, install and reboot, one at a time) and the module waits for the end.
author:
  - gpupool.vcf developers (@gpupool)
notes:
  - Remediation calls C(POST /api/esx/settings/clusters/{cluster}/software?action=apply&vmw-task=true),
    the software C(apply) operation PowerCLI's remediation (C(Set-Cluster -Remediate)) uses.
    Its exact request body and behaviour must be verified on the target vCenter release before
    relying on it in production; the collection's tests run it against a simulator only.
  - A cluster still managed with baselines is refused; converting it to an image is a decision
    for an administrator, not for this module.
extends_documentation_fragment:
  - gpupool.vcf.vsphere
  - gpupool.vcf.attributes
options:
  cluster:
    description: Name of the cluster.
    type: str
    required: true
  component:
    description: Component name as the depot lists it.
    type: str
    default: NVD-AIE-800
  version:
    description:
      - Component version, full (V(550.90.05-1OEM.800.1.0.20613240)) or short (V(550.90.05)); a
        short version must match exactly one version the depots offer.
    type: str
    required: true
  depot_url:
    description: URL of an offline depot (bundle) to import when no depot has this location yet.
    type: str
  remediate:
    description: Remediate the hosts that are not compliant with the desired image, and wait.
    type: bool
    default: false
  hosts:
    description:
      - With O(remediate), remediate only these hosts of the cluster (names), one apply of the image to them
        (the apply specification's C(hosts)); the other hosts are left as they are. Used by a roll that
        drains each host's workloads before its turn.
    type: list
    elements: str
  remediate_timeout:
    description: Seconds to wait for the remediation (and for the depot import and commit).
    type: int
    default: 7200
attributes:
  check_mode:
    description: Predicts the depot import, the image change and the remediation without making them.
  diff_mode:
    description: Returns the desired component version before and after.
"""

EXAMPLES = r"""
- name: NVIDIA driver 550.90.05 in the desired image of gpu-h100, hosts remediated
  gpupool.vcf.vlcm_component:
    cluster: gpu-h100
    version: 550.90.05-1OEM.800.1.0.20613240
    depot_url: https://depot.example.com/nvidia/NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip
    remediate: true
"""

RETURN = r"""
desired_before:
  description: Version of the component in the desired image before the run (null when absent).
  returned: always
  type: str
desired_after:
  description: Version of the component in the desired image after the run (or as predicted in check mode).
  returned: always
  type: str
depot:
  description: Id of the offline depot at O(depot_url) (null when not given, or not yet imported in check mode).
  returned: always
  type: str
depot_imported:
  description: Whether the depot was (or would be) imported by this run.
  returned: always
  type: bool
compliance:
  description: Per host name - C(status), C(current_version) and C(desired_version) of the component, at the end.
  returned: always
  type: dict
  sample: {esx-01: {status: COMPLIANT, current_version: 550.90.05-1OEM.800.1.0.20613240,
                    desired_version: 550.90.05-1OEM.800.1.0.20613240}}
remediated:
  description: Whether hosts were (or would be) remediated.
  returned: always
  type: bool
diff:
  description: The desired component version before and after (with C(--diff)).
  returned: when diff mode is on
  type: dict
"""

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _esxi, _vlcm
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import enforce
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_inputs import vlcm_component_errors
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure, Plan, Resource
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vlcm_api import VlcmApi, cluster_hosts
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._vsphere_module import VsphereModule

ARGUMENT_SPEC = dict(
    cluster=dict(type="str", required=True),
    component=dict(type="str", default="NVD-AIE-800"),
    version=dict(type="str", required=True),
    depot_url=dict(type="str"),
    remediate=dict(type="bool", default=False),
    hosts=dict(type="list", elements="str"),
    remediate_timeout=dict(type="int", default=7200),
)


def non_compliant(compliance):
    return sorted(h for h, c in compliance.items() if c.get("status") == "NON_COMPLIANT")


def all_versions(offered):
    return [v for versions in offered.values() for v in versions]


class VlcmComponent(Resource):
    """The NVIDIA component in one cluster's desired image: import the depot, set the component, remediate."""

    def __init__(self, module):
        Resource.__init__(self, "cluster %s" % module.params["cluster"])
        self.module = module
        self.p = module.params
        self.component = self.p["component"]
        self.api = None
        self.host_names = {}
        self.imported = None  # depot id imported by this run (removed again on a bad depot)

    def read(self):
        """The cluster's hosts, desired image, depots and compliance; the version is checked first."""
        p = self.p
        try:
            _esxi.parse_driver_version(p["version"])
        except _esxi.EsxiError as exc:
            raise Failure("Invalid version for component %s: %s" % (self.component, exc))
        named = _esxi.version_from_bundle(p["depot_url"]) if p["depot_url"] else None
        if named is not None and _esxi.compare_versions(named, p["version"]) != 0:
            raise Failure("Depot %s holds NVIDIA driver %s, not %s. Nothing was changed." % (p["depot_url"], named, p["version"]))
        moid, host_names, clusters = cluster_hosts(self.module.client(), p["cluster"])
        if moid is None:
            raise Failure("Unable to find cluster %s: clusters are %s. Nothing was changed."
                          % (p["cluster"], ", ".join(clusters) or "none"))
        self.host_names = host_names
        unknown = sorted(set(p["hosts"] or []) - set(host_names.values()))
        if unknown:
            raise Failure("Hosts %s are not in cluster %s (its hosts: %s). Nothing was changed."
                          % (", ".join(unknown), p["cluster"], ", ".join(sorted(host_names.values())) or "none"))
        self.api = VlcmApi(self.module.rest_client(), moid, timeout=p["remediate_timeout"])
        with self.doing("read the vLCM image of"):
            if not self.api.image_managed():
                raise Failure("Cluster %s is not managed by a vLCM image (it uses baselines): convert it to a single "
                              "image in vCenter, or use the direct lifecycle. Nothing was changed." % p["cluster"])
            before = self.api.component_version(self.component)
            depots, offered = self.api.depots(self.component)
            return dict(host_names=host_names, before=before, depots=depots, offered=offered, named=named,
                        compliance=self.api.compliance(host_names, self.component))

    def resolve(self, offered, before):
        """The depot's full version of what was asked (the image's own version needs no depot to stay)."""
        versions = list(offered) + ([before] if before else [])
        try:
            return _vlcm.resolve_version(self.p["version"], sorted(set(versions)), self.component)
        except (_vlcm.VlcmError, _esxi.EsxiError) as exc:
            self.remove_imported()
            raise Failure("Unable to set component %s in the image of %s: %s. Nothing was changed." % (self.component, self.name, exc))

    def plan(self, live):
        url, before = self.p["depot_url"], live["before"]
        depot_id = None
        for did, info in live["depots"].items():
            if url and info.get("location") == url:
                depot_id = did
        import_depot = bool(url) and depot_id is None
        if import_depot and not self.module.check_mode:
            target = None  # known once the depot is imported (apply)
        else:  # check mode predicts from the version the bundle's name carries
            target = self.resolve(all_versions(live["offered"]) + ([live["named"]] if import_depot and live["named"] else []), before)
        plan = Plan(before=dict(component=self.component, version=before), after=dict(component=self.component, version=target),
                    depot=depot_id, import_depot=import_depot, target=target, live_compliance=live["compliance"])
        if import_depot:
            plan.add("offline depot %s" % url, "location", None, url, "import")
        compliance = live["compliance"]
        if before != target:
            plan.add("the image of %s" % self.name, self.component, before, target, "set")
            compliance = _vlcm.predict_compliance(compliance, target)
        if self.p["remediate"] and self.to_remediate(compliance):
            plan.add(self.name, "hosts", self.to_remediate(compliance), [], "remediate")
            compliance = _vlcm.predict_compliance(compliance, target, remediated=True, hosts=self.p["hosts"])
        plan.facts["compliance"] = compliance
        return plan

    def result(self, live, plan):
        facts = plan.facts
        return dict(desired_before=live["before"], desired_after=facts["target"], depot=facts["depot"],
                    depot_imported=facts["import_depot"], remediated="remediate" in plan.actions(),
                    compliance=facts["compliance"])

    def apply(self, plan):
        before, target, depot_id = plan.before["version"], plan.facts["target"], plan.facts["depot"]
        compliance = plan.facts["live_compliance"]
        if plan.facts["import_depot"]:
            depot_id, target = self.import_depot(before)
            plan.after["version"] = target
        if before != target:
            with self.doing("set component %s %s in the image of" % (self.component, target)):
                try:
                    self.api.set_component(self.component, target)
                except VsphereError:
                    self.remove_imported()
                    raise
            with self.doing("read the compliance of"):
                compliance = self.api.compliance(self.host_names, self.component)
        remediated = bool(self.p["remediate"] and self.to_remediate(compliance))
        if remediated:
            compliance = self.remediate(compliance, before, target)
        return dict(desired_after=target, depot=depot_id, compliance=compliance, remediated=remediated)

    def import_depot(self, before):
        """Import the depot; (its id, the version to set). A depot without the component is removed again."""
        url = self.p["depot_url"]
        with self.doing("import the offline depot", url):
            self.api.import_depot(url)
            depots, offered = self.api.depots(self.component)
        depot_id = self.imported = next((d for d, i in depots.items() if i.get("location") == url), None)
        if depot_id is not None and not offered.get(depot_id):
            self.remove_imported()
            raise Failure("Depot %s does not offer component %s; it was removed again. Nothing was changed." % (url, self.component))
        return depot_id, self.resolve(all_versions(offered), before)

    def to_remediate(self, compliance):
        """The non-compliant hosts a remediation takes (of O(hosts) when given)."""
        wanted = set(self.p["hosts"] or compliance)
        return [h for h in non_compliant(compliance) if h in wanted]

    def remediate(self, compliance, before, target):
        """Apply the image to the hosts; the compliance after it (every host remediated compliant, else a failure)."""
        moids = None
        if self.p["hosts"]:
            by_name = dict((name, moid) for moid, name in self.host_names.items())
            moids = [by_name[h] for h in self.p["hosts"]]
        with self.doing("remediate", "%s to %s %s" % (self.name, self.component, target)):
            try:
                self.api.remediate(moids)
            except VsphereError:
                try:
                    compliance = self.api.compliance(self.host_names, self.component)
                except VsphereError:
                    pass
                self.partial.update(compliance=compliance, desired_before=before, desired_after=target)
                raise
        with self.doing("read the compliance of"):
            compliance = self.api.compliance(self.host_names, self.component)
        left = sorted(h for h, c in compliance.items() if c.get("status") != "COMPLIANT"
                      and (not self.p["hosts"] or h in self.p["hosts"]))
        if left:
            raise Failure("Remediation of %s finished but hosts are not compliant: %s" % (self.name, ", ".join(left)),
                          compliance=compliance)
        return compliance

    def remove_imported(self):
        if self.imported is not None:
            self.api.remove_depot(self.imported)
            self.imported = None


def main():
    module = VsphereModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    enforce(module, "vlcm_component", vlcm_component_errors)
    Runner(module, VlcmComponent(module)).run()


if __name__ == "__main__":
    main()
