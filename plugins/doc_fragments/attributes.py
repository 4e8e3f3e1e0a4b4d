# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes every module declares, in three forms: a module that changes something and
    # returns before/after (DOCUMENTATION), one that only reads (INFO_MODULE) and one that changes
    # something without a diff (NO_DIFF). A module gives its own description of an attribute where it
    # says more than these; the support level comes from here.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Predicts the change without making it.
    support: full
  diff_mode:
    description: Returns the state before and after.
    support: full
"""

    INFO_MODULE = r"""
attributes:
  check_mode:
    description: Runs as usual; it changes nothing.
    support: full
  diff_mode:
    description: Nothing to compare; it changes nothing.
    support: none
"""

    NO_DIFF = r"""
attributes:
  check_mode:
    description: Predicts what would be done without doing it.
    support: full
  diff_mode:
    description: Not supported.
    support: none
"""
