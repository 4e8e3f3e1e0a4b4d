# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of module options that need no system: bad input fails before any read or change.

Pure (standard library and the collection's pure name rules). This file holds the shared
machinery; each module's own checks sit beside the logic of its link (``_esxi_inputs``,
``_vsphere_inputs``, ``_guest_inputs``, ``_licensing_inputs``, ``_design_inputs``,
``_capacity_inputs``, ``_chargeback_inputs``, ``_lease_inputs``, ``_pool_ready_inputs``,
``_game_day.input_errors``), so a module ships only the checks it runs. The roles' input
checks are in ``_role_inputs``.

Each ``*_errors`` function takes the module's params and returns a list of sentences, each
naming the option, what it holds and what is accepted; ``check(module_name, params, own)`` runs
the shared ones (every ``timeout`` / ``*_timeout`` at least 1 second, every ``retries`` /
``*_retries`` 0 or more, ``port`` 1-65535) and the module's own, and
``enforce(module, module_name, own)`` fails the module with one message listing them all,
ending with "Nothing was changed.":

    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi_inputs import esxi_host_driver_errors

    module = VsphereModule(argument_spec=...)
    enforce(module, "esxi_host_driver", esxi_host_driver_errors)

Ansible's argument spec already refuses unknown options, wrong types and values outside
``choices``; these checks cover what it cannot say: ranges, empty strings, names vCenter or
Kubernetes refuse, versions that do not parse, combinations that would remove everything.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_LABEL_FORM,
    DNS_LABEL_MAX,
    dns_label_problem,
    dns_label_suggestion,
    label_key_problem,
    label_value_problem,
)

NOTHING_CHANGED = "Nothing was changed."


def is_int(value):
    """A whole number, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------
# shared checks
# ---------------------------------------------------------------------------------------


def timeout_errors(params):
    """Every ``timeout`` / ``*_timeout`` option that is set: a whole number of seconds, 1 or more."""
    out = []
    for key in sorted(params):
        value = params[key]
        if (key == "timeout" or key.endswith("_timeout")) and value is not None and not (is_int(value) and value > 0):
            out.append("%s must be a whole number of seconds, 1 or more, not %r" % (key, value))
    return out


def retries_errors(params):
    """Every ``retries`` / ``*_retries`` option that is set: 0 or more."""
    out = []
    for key in sorted(params):
        value = params[key]
        if (key == "retries" or key.endswith("_retries")) and value is not None and not (is_int(value) and value >= 0):
            out.append("%s must be 0 or more, not %r" % (key, value))
    return out


def port_errors(params, keys=("port",)):
    out = []
    for key in keys:
        value = params.get(key)
        if value is not None and not (is_int(value) and 1 <= value <= 65535):
            out.append("%s must be a TCP port from 1 to 65535, not %r" % (key, value))
    return out


def empty_errors(params, keys):
    """Options that are set but empty (or only white space): ``required`` lets ``""`` through."""
    out = []
    for key in keys:
        value = params.get(key)
        if isinstance(value, str) and not value.strip():
            out.append("%s must not be empty" % key)
    return out


def list_item_errors(params, key):
    """Items of a list of strings that are empty."""
    values = params.get(key)
    if not values:
        return []
    bad = [i for i, v in enumerate(values) if v is None or not str(v).strip()]
    if bad:
        items = ", ".join(str(i) for i in bad)
        return ["%s must not hold empty names (item%s %s)" % (key, "s" if len(bad) > 1 else "", items)]
    return []


def url_errors(params, keys):
    """``<key> must be an http:// or https:// URL`` for each of ``keys`` given (not None) that is not one."""
    out = []
    for key in keys:
        url = params.get(key)
        if url is not None and not (url.startswith("http://") or url.startswith("https://")):
            out.append("%s must be an http:// or https:// URL, not %r" % (key, url))
    return out


def range_errors(params, key, low, high=None, what=""):
    value = params.get(key)
    if value is None:
        return []
    if is_int(value) and value >= low and (high is None or value <= high):
        return []
    accepted = "from %d to %d" % (low, high) if high is not None else "%d or more" % low
    return ["%s must be %s%s, not %r" % (key, accepted, what, value)]


def dns_label_errors(value, option, what):
    """``option`` (holding ``value``) must be an RFC 1123 label: the name vCenter and Kubernetes accept."""
    if value is None:
        return []
    problem = dns_label_problem(value)
    if problem is None:
        return []
    return ["%s %r is not a DNS label (the %s vCenter and Kubernetes accept): %s; use %s, e.g. %r" % (
        option, value, what, problem, DNS_LABEL_FORM % DNS_LABEL_MAX, dns_label_suggestion(value))]


def percent_errors(params, key):
    value = params.get(key)
    if value is None or (is_int(value) and 0 <= value <= 100):
        return []
    return ["%s must be a percentage from 0 to 100, not %r" % (key, value)]


def labels_errors(labels, where):
    out = []
    for key, value in (labels or {}).items():
        problem = label_key_problem(key)
        if problem:
            out.append("%s key %r is not a Kubernetes label key: %s" % (where, key, problem))
        problem = None if value is None else label_value_problem(str(value))
        if problem:
            out.append("%s %s value %r is not a Kubernetes label value: %s" % (where, key, value, problem))
    return out


def items(values, key, out, kind=list, what=None):
    """The value of ``key`` when it is a ``kind`` (a list unless told); ``kind()`` when it is unset or
    empty text. Anything else appends "<key> must be <what>" (a list, a mapping) to ``out`` and gives
    ``kind()``, so the checks of the items can go on."""
    value = values.get(key)
    if value is None or value == "":
        return kind()
    if isinstance(value, kind):
        return value
    out.append("%s must be %s" % (key, what or ("a list" if kind is list else "a mapping")))
    return kind()


# ---------------------------------------------------------------------------------------
# the run of one module's checks
# ---------------------------------------------------------------------------------------


def check(module_name, params, own=None):
    """Every input error of one module's params (shared checks first, then ``own(params)``), as sentences."""
    errors = timeout_errors(params) + retries_errors(params) + port_errors(params)
    if own is not None:
        errors += own(params)
    return errors


def message(module_name, errors):
    """The failure message for ``errors`` (None when there are none)."""
    if not errors:
        return None
    return "Invalid input for %s: %s. %s" % (module_name, "; ".join(errors), NOTHING_CHANGED)


def enforce(module, module_name, own=None):
    """Fail ``module`` (anything with ``params`` and ``fail_json``) when its params have input errors:
    the shared checks and ``own``, the module's checks (``<module>_errors`` of its link's inputs file).

    An option's aliases are in ``params`` too; they are left out, so each bad option is named once.
    """
    spec = getattr(module, "argument_spec", None) or {}
    aliases = set(alias for option in spec.values() for alias in (option.get("aliases") or ()))
    errors = check(module_name, dict((k, v) for k, v in module.params.items() if k not in aliases), own)
    if errors:
        module.fail_json(msg=message(module_name, errors), invalid_input=errors)
