# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere Namespaces in the vSphere API (client layer: knows nothing of Ansible).

The REST resources supervisor_namespace reads and writes: namespaces and their access
entries, the Supervisor clusters, storage policies and content libraries, through a
``VsphereRestClient``; whether a cluster exists at all over SOAP (one retrieval, only to
word the error for a cluster that is not a Supervisor). Errors are ``VsphereError``.

The Supervisors are read by the vCenter's API version, as ``pure._api_capabilities`` says: on 8.x
``namespace_management_client.Clusters.list`` (GET .../namespace-management/clusters); on 9.x, where
the bindings deprecate it (API 9.1.0.0), ``supervisors_client.Summary.list`` (GET
.../supervisors/summaries) and ``supervisors_client.Topology.get`` (GET .../supervisors/{supervisor}/topology)
per Supervisor, with the cluster names from one SOAP retrieval. Both give the same rows.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _api_capabilities as caps
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereNotFound

NS_PATH = "/api/vcenter/namespaces/instances"
CLUSTERS_PATH = "/api/vcenter/namespace-management/clusters"
SUMMARIES_PATH = "/api/vcenter/namespace-management/supervisors/summaries"
TOPOLOGY_PATH = "/api/vcenter/namespace-management/supervisors/%s/topology"
POLICIES_PATH = "/api/vcenter/storage/policies"
LIBRARY_PATH = "/api/content/library"


def supervisor_of(rows, cluster):
    """The Supervisor id of ``cluster`` (its name or id) among the rows of ``NamespaceApi.supervisors``; None
    when it has no Supervisor (or, on 8.x, when the rows carry no Supervisor ids)."""
    return next((r["supervisor"] for r in rows
                 if cluster in (r.get("cluster_name"), r.get("cluster")) and r.get("supervisor")), None)


class NamespaceApi:
    """One REST session (and, when needed, the SOAP session ``soap()`` returns); ``api_version``: the
    vCenter's (About.apiVersion), or a function that reads it when first needed (a module's
    ``api_version``, which needs no login), else read from the SOAP session when there is one (none: the
    8.x calls, which 9.x still serves)."""

    def __init__(self, rest, soap=None, api_version=None):
        self.rest = rest
        self.soap = soap
        self._api_version = api_version

    def api_version(self):
        if callable(self._api_version):
            self._api_version = self._api_version()
        if self._api_version is None and self.soap is not None:
            self._api_version = self.soap().content.about.apiVersion
        return self._api_version

    def get(self, name):
        """The namespace's Info, or None when there is no such namespace."""
        try:
            return self.rest.get("%s/%s" % (NS_PATH, name))
        except VsphereNotFound:
            return None

    def supervisors(self):
        """One row per cluster with a Supervisor enabled: {cluster, cluster_name, config_status,
        kubernetes_status, stats, supervisor (the Supervisor's id; None on 8.x), supervisor_name}."""
        if not caps.supports(self.api_version(), "supervisor_summaries"):
            return [dict(row, supervisor=None, supervisor_name=None) for row in self.rest.get(CLUSTERS_PATH) or []]
        items = (self.rest.get(SUMMARIES_PATH) or {}).get("items") or []
        topologies = dict((item["supervisor"], self.rest.get(TOPOLOGY_PATH % item["supervisor"]) or []) for item in items)
        names = {}
        if self.soap is not None and any(zone.get("clusters") for zones in topologies.values() for zone in zones):
            names = dict((c.moid, name) for name, c in self.soap().clusters_by_name().items())
        return caps.supervisor_rows(items, topologies, names)

    def cluster_exists(self, name):
        """Whether vCenter has a cluster of that name, Supervisor or not (SOAP)."""
        return name in self.soap().clusters_by_name()

    def policy_names(self):
        """{storage policy id: name}."""
        return dict((p["policy"], p.get("name") or p["policy"]) for p in self.rest.get(POLICIES_PATH) or [])

    def library_names(self, wanted):
        """{content library id: name}; the names are read only when ``wanted`` is not all ids."""
        ids = self.rest.get(LIBRARY_PATH) or []
        if all(w in ids for w in wanted):
            return dict((i, i) for i in ids)
        return dict((i, (self.rest.get("%s/%s" % (LIBRARY_PATH, i)) or {}).get("name") or i) for i in ids)

    def zones(self, name):
        """The namespace's vSphere zones (vSphere API 9.0 and later): InfoV2.zones ``[{zone, type,
        marked_for_removal}]`` of GET .../instances/v2/{namespace} (Instances.get_v2); no reservations."""
        return (self.rest.get("%s/v2/%s" % (NS_PATH, name)) or {}).get("zones") or []

    def create(self, body, by_supervisor=False):
        """Create a namespace; ``by_supervisor``: the body names a Supervisor id (the v2 API)."""
        self.rest.post(NS_PATH + "/v2" if by_supervisor else NS_PATH, body)

    def update(self, name, body):
        self.rest.patch("%s/%s" % (NS_PATH, name), body)

    def delete(self, name):
        self.rest.delete("%s/%s" % (NS_PATH, name))

    def set_access(self, name, method, entry):
        """POST (add), PUT (change the role) or DELETE one access entry of a namespace."""
        path = "%s/%s/access/%s/%s" % (NS_PATH, name, entry["domain"], entry["subject"])
        params = {"type": entry["type"]}
        if method == "DELETE":
            self.rest.delete(path, params=params)
        elif method == "POST":
            self.rest.post(path, {"role": entry["role"]}, params=params)
        else:
            self.rest.put(path, {"role": entry["role"]}, params=params)


__all__ = ["NamespaceApi"]
