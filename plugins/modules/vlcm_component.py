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
  remediate_timeout:
    description: Seconds to wait for the remediation (and for the depot import and commit).
    type: int
    default: 7200
attributes:
  check_mode:
    description: Predicts the depot import, the image change and the remediation without making them.
    support: full
  diff_mode:
    description: Returns the desired component version before and after.
    support: full
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

from ansible_collections.gpupool.vcf.plugins.module_utils import _esxi, _vlcm
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere_module import VsphereModule
from ansible_collections.gpupool.vcf.plugins.module_utils._inputs import enforce

SETTINGS = "/api/esx/settings"
TASK = {"vmw-task": "true"}


class VlcmComponent:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.imported = None  # depot id imported by this run (removed again on a bad depot)

    def fail(self, msg, **extra):
        self.module.fail_json(msg=msg, **extra)

    def read_cluster(self):
        """(cluster moid, {host moid: host name}) through the SOAP API."""
        client = self.module.client()
        clusters = client.clusters_by_name()
        if self.p["cluster"] not in clusters:
            self.fail("Unable to find cluster %s: clusters are %s. Nothing was changed."
                      % (self.p["cluster"], ", ".join(sorted(clusters)) or "none"))
        cluster = clusters[self.p["cluster"]]
        refs = list(cluster.get("host") or [])
        names = dict((h.moid, h["name"]) for h in client.retrieve_objects(refs, ["name"])) if refs else {}
        return cluster.moid, names

    def depots(self, rest):
        """{depot id: info} and {depot id: offered versions of the component}."""
        depots = rest.get(SETTINGS + "/depots/offline") or {}
        offered = {}
        for depot_id in sorted(depots):
            content = rest.get(SETTINGS + "/depots/offline/%s/content" % depot_id)
            offered[depot_id] = _vlcm.depot_versions(content, self.p["component"])
        return depots, offered

    def run(self):
        p = self.p
        component = p["component"]
        try:
            _esxi.parse_driver_version(p["version"])
        except _esxi.EsxiError as exc:
            self.fail("Invalid version for component %s: %s" % (component, exc))
        if p["depot_url"]:
            named = _esxi.version_from_bundle(p["depot_url"])
            if named is not None and _esxi.compare_versions(named, p["version"]) != 0:
                self.fail("Depot %s holds NVIDIA driver %s, not %s. Nothing was changed."
                          % (p["depot_url"], named, p["version"]))
        scope = "cluster %s" % p["cluster"]
        try:
            moid, host_names = self.read_cluster()
        except VsphereError as exc:
            self.module.fail_vsphere("read", scope, exc)
        rest = self.module.rest_client()
        base = SETTINGS + "/clusters/%s/software" % moid
        try:
            enabled = (rest.get(SETTINGS + "/clusters/%s/enablement/software" % moid) or {}).get("enabled")
            if not enabled:
                self.fail("Cluster %s is not managed by a vLCM image (it uses baselines): convert it to a single "
                          "image in vCenter, or use the direct lifecycle. Nothing was changed." % p["cluster"])
            software = rest.get(base) or {}
            before = ((software.get("components") or {}).get(component) or {}).get("version")
            depots, offered = self.depots(rest)
            compliance = _vlcm.compliance_view(rest.get(base + "/compliance"), host_names, component)
        except VsphereError as exc:
            self.module.fail_vsphere("read the vLCM image of", scope, exc)

        depot_id = None
        for did, info in depots.items():
            if p["depot_url"] and info.get("location") == p["depot_url"]:
                depot_id = did
        import_depot = bool(p["depot_url"]) and depot_id is None
        all_offered = [v for versions in offered.values() for v in versions]

        if import_depot and not self.module.check_mode:
            try:
                task = rest.post(SETTINGS + "/depots/offline", params=TASK, body=dict(
                    source_type="PULL", location=p["depot_url"],
                    description="NVIDIA host driver (gpupool.vcf.vlcm_component)"))
                rest.wait_for_task(task, timeout=p["remediate_timeout"], what="import of depot %s" % p["depot_url"])
                depots, offered = self.depots(rest)
            except VsphereError as exc:
                self.module.fail_vsphere("import the offline depot", p["depot_url"], exc)
            depot_id = self.imported = next((d for d, i in depots.items() if i.get("location") == p["depot_url"]), None)
            all_offered = [v for versions in offered.values() for v in versions]
            if depot_id is not None and not offered.get(depot_id):
                self.remove_imported(rest)
                self.fail("Depot %s does not offer component %s; it was removed again. Nothing was changed."
                          % (p["depot_url"], component))
        elif import_depot:
            named = _esxi.version_from_bundle(p["depot_url"])
            if named is not None:
                all_offered.append(named)

        if before:
            all_offered.append(before)  # what the image holds needs no depot to stay
        try:
            target = _vlcm.resolve_version(p["version"], sorted(set(all_offered)), component)
        except (_vlcm.VlcmError, _esxi.EsxiError) as exc:
            self.remove_imported(rest)
            self.fail("Unable to set component %s in the image of %s: %s. Nothing was changed." % (component, scope, exc))

        change_image = before != target
        result = dict(changed=change_image or import_depot, desired_before=before, desired_after=target,
                      depot=depot_id, depot_imported=import_depot, remediated=False)
        if self.module._diff:
            result["diff"] = dict(before=dict(component=component, version=before),
                                  after=dict(component=component, version=target))

        if change_image and not self.module.check_mode:
            self.commit(rest, base, target)
            try:
                compliance = _vlcm.compliance_view(rest.get(base + "/compliance"), host_names, component)
            except VsphereError as exc:
                self.module.fail_vsphere("read the compliance of", scope, exc)
        elif change_image:
            compliance = _vlcm.predict_compliance(compliance, target)

        to_fix = sorted(h for h, c in compliance.items() if c.get("status") == "NON_COMPLIANT")
        if p["remediate"] and to_fix:
            result.update(changed=True, remediated=True)
            if self.module.check_mode:
                compliance = _vlcm.predict_compliance(compliance, target, remediated=True)
            else:
                try:
                    task = rest.post(base, params=dict(action="apply", **TASK), body=dict(accept_eula=True))
                    rest.wait_for_task(task, timeout=p["remediate_timeout"], what="remediation")
                except VsphereError as exc:
                    try:
                        now = _vlcm.compliance_view(rest.get(base + "/compliance"), host_names, component)
                    except VsphereError:
                        now = compliance
                    self.fail("Unable to remediate %s to %s %s: %s" % (scope, component, target, exc),
                              compliance=now, desired_before=before, desired_after=target)
                try:
                    compliance = _vlcm.compliance_view(rest.get(base + "/compliance"), host_names, component)
                except VsphereError as exc:
                    self.module.fail_vsphere("read the compliance of", scope, exc)
                left = sorted(h for h, c in compliance.items() if c.get("status") != "COMPLIANT")
                if left:
                    self.fail("Remediation of %s finished but hosts are not compliant: %s" % (scope, ", ".join(left)),
                              compliance=compliance)
        result["compliance"] = compliance
        self.module.exit_json(**result)

    def commit(self, rest, base, target):
        draft = None
        try:
            draft = rest.post(base + "/drafts")
            rest.patch(base + "/drafts/%s/software/components" % draft,
                       body=dict(components_to_set={self.p["component"]: target}))
            task = rest.post(base + "/drafts/%s" % draft, params=dict(action="commit", **TASK),
                             body=dict(message="gpupool.vcf: %s %s" % (self.p["component"], target)))
            draft = None  # a commit consumes the draft
            rest.wait_for_task(task, timeout=self.p["remediate_timeout"], what="commit of the draft")
        except VsphereError as exc:
            if draft is not None:
                try:
                    rest.delete(base + "/drafts/%s" % draft)
                except VsphereError:
                    pass
            self.remove_imported(rest)
            self.module.fail_vsphere("set component %s %s in the image of" % (self.p["component"], target),
                                     "cluster %s" % self.p["cluster"], exc)

    def remove_imported(self, rest):
        if self.imported is None:
            return
        try:
            task = rest.delete(SETTINGS + "/depots/offline/%s" % self.imported, params=TASK)
            if task:
                rest.wait_for_task(task, timeout=self.p["remediate_timeout"], what="removal of the depot")
        except VsphereError:
            pass
        self.imported = None


def main():
    module = VsphereModule(
        argument_spec=dict(
            cluster=dict(type="str", required=True),
            component=dict(type="str", default="NVD-AIE-800"),
            version=dict(type="str", required=True),
            depot_url=dict(type="str"),
            remediate=dict(type="bool", default=False),
            remediate_timeout=dict(type="int", default=7200),
        ),
        supports_check_mode=True,
    )
    enforce(module, "vlcm_component")
    VlcmComponent(module).run()


if __name__ == "__main__":
    main()
