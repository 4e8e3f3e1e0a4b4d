# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A connection option (validate_certs) read as Ansible reads a boolean module option, for the playbooks.

Documented in option_bool.yml next to this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE


def option_bool(value, option, default=None):
    """``value`` as a boolean, the way AnsibleModule reads a ``type: bool`` option.

    True, False, and the strings (case and surrounding blanks aside) yes/no, true/false, on/off,
    y/n, t/f, 1/0 are booleans; an unset value (None or "") is ``default`` when one is given.
    Anything else ("ture", "enabled", 2) is an error naming ``option``: the ``bool`` filter would
    read it as false and turn certificate verification off without a word.
    """
    if isinstance(value, bool):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is not None:
            return bool(default)
        raise AnsibleFilterError("%s is not set; give true or false" % option)
    normalized = value.lower().strip() if isinstance(value, str) else value
    if isinstance(normalized, (int, float)) or isinstance(normalized, str):
        if normalized in BOOLEANS_TRUE:
            return True
        if normalized in BOOLEANS_FALSE:
            return False
    raise AnsibleFilterError("%s: %r is not a boolean; give true or false (also yes/no, on/off, 1/0)"
                             % (option, value))


class FilterModule(object):
    def filters(self):
        return {"option_bool": option_bool}
