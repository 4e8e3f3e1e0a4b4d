# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Supervisor's vSphere Zone bindings in the vSphere Automation API (client layer: knows nothing of
Ansible), added in vSphere API 9.0.0.0 (``namespace_management.supervisors.zones.Bindings``):

- ``list``: GET .../supervisors/{supervisor}/zones/bindings, a ListResult ``{zones: [Info]}``;
- ``create``: POST .../supervisors/{supervisor}/zones/bindings with a CreateSpec ``{specs: [ZoneSpec]}``;
- ``update``: PATCH .../supervisors/{supervisor}/zones/{zone}/bindings with an UpdateSpec
  ``{resource_allocation}``.

``api_version`` is the vCenter's (About.apiVersion, one SOAP read) unless the caller gives it.
Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

BINDINGS_PATH = "/api/vcenter/namespace-management/supervisors/%s/zones/bindings"
ZONE_BINDINGS_PATH = "/api/vcenter/namespace-management/supervisors/%s/zones/%s/bindings"


class ZoneBindingApi:
    """One REST session; ``api_version``: the vCenter's, or a function that reads it when first needed (a
    module's ``api_version``, which needs no login), else read from the SOAP session ``soap()`` returns."""

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

    def list(self, supervisor):
        """The Supervisor's bindings: Bindings.Info rows ``{zone, type, namespaces, resource_allocation ...}``."""
        return (self.rest.get(BINDINGS_PATH % supervisor) or {}).get("zones") or []

    def create(self, supervisor, specs):
        """Binds zones: ``specs`` ``[{zone, type, resource_allocation{vm_reservations}}]``."""
        self.rest.post(BINDINGS_PATH % supervisor, dict(specs=specs))

    def update(self, supervisor, zone, vm_reservations):
        """Sets the reservations of one bound zone (the list is replaced whole)."""
        self.rest.patch(ZONE_BINDINGS_PATH % (supervisor, zone),
                        dict(resource_allocation=dict(vm_reservations=vm_reservations)))
