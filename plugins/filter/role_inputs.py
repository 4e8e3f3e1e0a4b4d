# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input checks of a role used alone, for its first task (before any change).

Documented in role_input_errors.yml next to this file; the checks are
``module_utils/pure/_role_inputs.role_errors``, shared with the design schema where the rule is the same.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._role_inputs import role_errors
from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters


def role_input_errors(variables, role):
    """The input errors of ``role`` given its ``variables`` (a mapping of the role's own names): a list of sentences."""
    if not isinstance(variables, dict):
        raise AnsibleFilterError("role_input_errors takes a mapping of the role's variables, not %s"
                                 % type(variables).__name__)
    try:
        return role_errors(role, variables)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return plain_filters({"role_input_errors": role_input_errors})
