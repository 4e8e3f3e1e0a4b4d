# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The privileges of this session's account on vSphere objects (client layer: knows nothing of Ansible).

One ``AuthorizationManager.HasPrivilegeOnEntities`` call for every object and privilege asked: vCenter
answers from the account's roles and permissions (propagated down the inventory) without trying a change
(vSphere Web Services API reference, AuthorizationManager). Errors are ``VsphereError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class AuthzApi:
    """Asks vCenter which privileges the session's account holds."""

    def __init__(self, client):
        self.client = client

    def root_folder(self):
        """The vCenter's root folder (privileges of the whole vCenter are asked on it)."""
        return self.client.content.rootFolder

    def api_version(self):
        """The vCenter's API version (About.apiVersion), e.g. '8.0.3.0'."""
        return self.client.content.about.apiVersion

    def session_privileges(self, refs, wanted):
        """{object label: {privilege id: granted}} for this session.

        ``refs``: {label: managed object}; ``wanted``: {label: [privilege ids]}. Labels without an
        object are not asked; every privilege of ``wanted`` is asked on each object (one call)."""
        labels = [label for label in wanted if label in refs]
        if not labels:
            return {}
        ids = sorted(set(p for label in labels for p in wanted[label]))
        content = self.client.content
        answer = content.authorizationManager.HasPrivilegeOnEntities(
            entity=[refs[label] for label in labels], sessionId=content.sessionManager.currentSession.key, privId=ids)
        label_of = dict((refs[label]._moId, label) for label in labels)
        out = {}
        for item in answer or []:
            label = label_of.get(item.entity._moId)
            if label is not None:
                out[label] = dict((a.privId, bool(a.isGranted)) for a in item.privAvailability or [])
        return out
