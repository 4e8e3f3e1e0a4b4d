# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A cluster's vLCM desired image in the vSphere API (client layer: knows nothing of Ansible).

The ESX settings REST resources vlcm_component uses (``/api/esx/settings``): image
enablement, the desired software, offline depots and their content, compliance, drafts and
remediation, through a ``VsphereRestClient``; tasks (``?vmw-task=true``) are waited for with
the client's waiter. The cluster and its host names are read over SOAP. Errors are
``VsphereError``; the answers are turned into the collection's views by ``_vlcm`` (pure).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vlcm
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError, VsphereSessionLost

SETTINGS = "/api/esx/settings"
TASK = {"vmw-task": "true"}
DEPOT_DESCRIPTION = "NVIDIA host driver (gpupool.vcf.vlcm_component)"


def cluster_hosts(client, name):
    """(cluster moid, {host moid: host name}, every cluster name); the moid is None without such a cluster."""
    clusters = client.clusters_by_name()
    if name not in clusters:
        return None, {}, sorted(clusters)
    cluster = clusters[name]
    refs = list(cluster.get("host") or [])
    names = dict((h.moid, h["name"]) for h in client.retrieve_objects(refs, ["name"])) if refs else {}
    return cluster.moid, names, sorted(clusters)


class VlcmApi:
    """The desired image of one cluster (by moid) through one REST session."""

    def __init__(self, rest, cluster_moid, timeout=7200):
        self.rest = rest
        self.base = SETTINGS + "/clusters/%s/software" % cluster_moid
        self.enablement = SETTINGS + "/clusters/%s/enablement/software" % cluster_moid
        self.timeout = timeout

    def image_managed(self):
        """Whether the cluster is managed by a single image (not by baselines)."""
        return bool((self.rest.get(self.enablement) or {}).get("enabled"))

    def component_version(self, component):
        """The version of ``component`` in the desired image, or None."""
        software = self.rest.get(self.base) or {}
        return ((software.get("components") or {}).get(component) or {}).get("version")

    def depots(self, component):
        """({depot id: info}, {depot id: versions of ``component`` it offers}) of the offline depots."""
        depots = self.rest.get(SETTINGS + "/depots/offline") or {}
        offered = {}
        for depot_id in sorted(depots):
            content = self.rest.get(SETTINGS + "/depots/offline/%s/content" % depot_id)
            offered[depot_id] = _vlcm.depot_versions(content, component)
        return depots, offered

    def compliance_answer(self):
        """The cluster's compliance with its image as vCenter answers it (one request)."""
        return self.rest.get(self.base + "/compliance") or {}

    def compliance(self, host_names, component):
        """{host name: {status, current_version, desired_version}} of the cluster."""
        return _vlcm.compliance_view(self.compliance_answer(), host_names, component)

    def import_depot(self, location):
        """Import an offline depot (PULL from ``location``) and wait for the task."""
        task = self.rest.post(SETTINGS + "/depots/offline", params=TASK,
                              body=dict(source_type="PULL", location=location, description=DEPOT_DESCRIPTION))
        self.rest.wait_for_task(task, timeout=self.timeout, what="import of depot %s" % location)

    def remove_depot(self, depot_id):
        """Remove an offline depot; best effort (a failure leaves it, and is not an error)."""
        try:
            task = self.rest.delete(SETTINGS + "/depots/offline/%s" % depot_id, params=TASK)
            if task:
                self.rest.wait_for_task(task, timeout=self.timeout, what="removal of the depot")
        except VsphereError:
            pass

    def set_component(self, component, version):
        """Draft, set the component, commit and wait; a draft left by a failure is deleted again."""
        draft = None
        try:
            draft = self.rest.post(self.base + "/drafts")
            self.rest.patch(self.base + "/drafts/%s/software/components" % draft,
                            body=dict(components_to_set={component: version}))
            task = self.rest.post(self.base + "/drafts/%s" % draft, params=dict(action="commit", **TASK),
                                  body=dict(message="gpupool.vcf: %s %s" % (component, version)))
            draft = None  # a commit consumes the draft
            self.rest.wait_for_task(task, timeout=self.timeout, what="commit of the draft")
        except VsphereError:
            if draft is not None:
                try:
                    self.rest.delete(self.base + "/drafts/%s" % draft)
                except VsphereError:
                    pass
            raise

    def remediate(self, hosts=None):
        """Apply the desired image to the cluster's hosts (or to the host moids `hosts`: the apply
        specification's ``hosts``) and wait."""
        body = dict(accept_eula=True)
        if hosts:
            body["hosts"] = sorted(hosts)
        task = self.rest.post(self.base, params=dict(action="apply", **TASK), body=body)
        try:
            self.rest.wait_for_task(task, timeout=self.timeout, what="remediation")
        except VsphereSessionLost as exc:
            # the task goes on in vCenter: it is not applied again, a rerun reads the compliance
            raise VsphereSessionLost("%s; remediation task %s was not repeated and may still be rebooting hosts"
                                     % (exc, task))


__all__ = ["SETTINGS", "VlcmApi", "cluster_hosts"]
