# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks of module options that need no system: bad input fails before any read or change.

Pure (standard library and the collection's pure helpers). Each ``*_errors`` function takes
the module's params and returns a list of sentences, each naming the option, what it holds and
what is accepted; ``check(module_name, params)`` runs the checks of one module (the shared
ones - every ``timeout`` / ``*_timeout`` at least 1 second, every ``retries`` / ``*_retries`` 0
or more, ``port`` 1-65535 - and the module's own), and ``enforce(module, module_name)`` fails
the module with one message listing them all, ending with "Nothing was changed.":

    module = VsphereModule(argument_spec=...)
    enforce(module, "esxi_host_driver")

Ansible's argument spec already refuses unknown options, wrong types and values outside
``choices``; these checks cover what it cannot say: ranges, empty strings, names vCenter or
Kubernetes refuse, versions that do not parse, combinations that would remove everything.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live, _chargeback, _esxi, _nvidia, _pool_ready
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_LABEL_FORM,
    DNS_LABEL_MAX,
    dns_label_problem,
    dns_label_suggestion,
    label_key_problem,
    label_value_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._game_day import input_errors as gpu_game_day_errors

NOTHING_CHANGED = "Nothing was changed."


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------
# shared checks
# ---------------------------------------------------------------------------------------


def timeout_errors(params):
    """Every ``timeout`` / ``*_timeout`` option that is set: a whole number of seconds, 1 or more."""
    out = []
    for key in sorted(params):
        value = params[key]
        if (key == "timeout" or key.endswith("_timeout")) and value is not None and not (_is_int(value) and value > 0):
            out.append("%s must be a whole number of seconds, 1 or more, not %r" % (key, value))
    return out


def retries_errors(params):
    """Every ``retries`` / ``*_retries`` option that is set: 0 or more."""
    out = []
    for key in sorted(params):
        value = params[key]
        if (key == "retries" or key.endswith("_retries")) and value is not None and not (_is_int(value) and value >= 0):
            out.append("%s must be 0 or more, not %r" % (key, value))
    return out


def port_errors(params, keys=("port",)):
    out = []
    for key in keys:
        value = params.get(key)
        if value is not None and not (_is_int(value) and 1 <= value <= 65535):
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


def range_errors(params, key, low, high=None, what=""):
    value = params.get(key)
    if value is None:
        return []
    if _is_int(value) and value >= low and (high is None or value <= high):
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


def driver_version_errors(params, key="version", form="%(key)s: %(reason)s"):
    value = params.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    try:
        _esxi.parse_driver_version(value)
    except _esxi.EsxiError as exc:
        return [form % dict(key=key, reason=exc, params=params)]
    return []


def percent_errors(params, key):
    value = params.get(key)
    if value is None or (_is_int(value) and 0 <= value <= 100):
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


# ---------------------------------------------------------------------------------------
# per module
# ---------------------------------------------------------------------------------------


def esxi_host_driver_errors(params):
    return empty_errors(params, ("host", "version", "bundle", "component")) + driver_version_errors(params)


def esxi_gpu_config_errors(params):
    out = empty_errors(params, ("host", "cluster"))
    sched = params.get("scheduler")
    if sched:
        if sched.get("time_slice_ms") is not None and sched.get("policy") is None:
            out.append("scheduler.time_slice_ms needs scheduler.policy (equal_share or fixed_share)")
        else:
            try:
                _esxi.validate_scheduler(sched)
            except _esxi.EsxiError as exc:
                out.append(str(exc))
    if params.get("reboot") and not params.get("host"):
        out.append("reboot is only allowed with host (the hosts of a cluster are rebooted one at a time by the "
                   "esxi_gpu_host role)")
    geometry = params.get("mig_geometry")
    if geometry is not None and not isinstance(geometry, (list, tuple, dict)):
        out.append("mig_geometry must be a list per host position or a mapping of host names, each to a list of GPU "
                   "indexes, not %r" % (geometry,))
    indexes = params.get("mig_gpu_indexes") or []
    if indexes and not params.get("mig_mode"):
        out.append("mig_gpu_indexes needs mig_mode")
    out.extend("mig_gpu_indexes: %r is not a GPU index from 0 to 63" % (i,) for i in indexes if not 0 <= i < 64)
    ssh = params.get("ssh") or {}
    if ssh.get("port") is not None and not 1 <= ssh["port"] <= 65535:
        out.append("ssh.port must be from 1 to 65535, not %s" % ssh["port"])
    if ssh.get("timeout") is not None and ssh["timeout"] < 1:
        out.append("ssh.timeout must be 1 or more seconds, not %s" % ssh["timeout"])
    return out


def esxi_maintenance_mode_errors(params):
    return empty_errors(params, ("host",))


def gpu_host_info_errors(params):
    return empty_errors(params, ("cluster",)) + list_item_errors(params, "hosts")


def gpu_pool_design_errors(params):
    return empty_errors(params, ("design_file",))


def gpu_pool_audit_errors(params):
    return empty_errors(params, ("design_file",))


def gpu_usage_errors(params):
    out = empty_errors(params, ("prometheus_url", "bearer_token", "username", "design_file"))
    url = params.get("prometheus_url")
    if url and not (url.startswith("http://") or url.startswith("https://")):
        out.append("prometheus_url must be an http:// or https:// URL, not %r" % (url,))
    now = 0
    for key in ("start", "end"):
        if params.get(key) is not None:
            try:
                _chargeback.parse_time(params[key], now)
            except _chargeback.ChargebackError as exc:
                out.append("%s: %s" % (key, exc))
    if params.get("step") is not None:
        try:
            step = _chargeback.parse_duration(params["step"])
            if step < 1 or step != int(step):
                out.append("step must be a whole number of seconds, 1 or more, not %r" % (params["step"],))
        except _chargeback.ChargebackError as exc:
            out.append("step: %s" % exc)
    return out


def gpu_capacity_errors(params):
    out = empty_errors(params, ("cluster", "design_file", "kubeconfig", "context")) + list_item_errors(params, "profiles")
    for name in params.get("profiles") or []:
        if name and str(name).strip():
            try:
                _nvidia.parse_profile(name)
            except _nvidia.NvidiaError as exc:
                out.append("profiles: %s" % exc)
    return out + empty_errors(params, ("prometheus_url", "prometheus_token")) + _capacity_live.knee_input_errors(params)


def nvidia_license_info_errors(params):
    return empty_errors(params, ("nvidia_smi", "chroot"))


def vlcm_component_errors(params):
    form = "Invalid version for component %s (option %%(key)s): %%(reason)s" % params.get("component")
    return empty_errors(params, ("cluster", "component", "version", "depot_url")) + driver_version_errors(params, form=form)


def drs_gpu_pinning_errors(params):
    out = empty_errors(params, ("cluster",)) + list_item_errors(params, "vms") + list_item_errors(params, "exclude")
    rule = params.get("vm_host_rule")
    if rule:
        out += ["vm_host_rule.%s" % e for e in empty_errors(rule, ("name", "vm_group", "host_group"))]
    return out


def vm_class_errors(params):
    out = dns_label_errors(params.get("name"), "name", "VM class name")
    out += range_errors(params, "cpu_count", 1) + range_errors(params, "memory_mb", 1, what=" MiB")
    out += percent_errors(params, "cpu_reservation") + percent_errors(params, "memory_reservation")
    out += list_item_errors(params, "vgpu_profiles") + empty_errors(params, ("cluster",))
    return out


def supervisor_namespace_errors(params):
    out = dns_label_errors(params.get("name"), "name", "vSphere namespace name")
    out += empty_errors(params, ("cluster", "supervisor"))
    for name in params.get("vm_classes") or []:
        out += dns_label_errors(name, "vm_classes item", "VM class name")
    out += list_item_errors(params, "content_libraries")
    for index, policy in enumerate(params.get("storage_policies") or []):
        out += ["storage_policies[%d].%s" % (index, e) for e in empty_errors(policy, ("policy",))]
        out += ["storage_policies[%d].%s" % (index, e) for e in range_errors(policy, "limit_mib", 0, what=" MiB")]
    limits = params.get("limits") or {}
    for key in ("cpu_mhz", "memory_mib", "storage_mib"):
        out += ["limits.%s" % e for e in range_errors(limits, key, 0)]
    for index, entry in enumerate(params.get("access") or []):
        out += ["access[%d].%s" % (index, e) for e in empty_errors(entry, ("subject", "domain"))]
    return out


def vks_node_pool_errors(params):
    out = dns_label_errors(params.get("cluster_name"), "cluster_name", "VKS cluster name")
    out += dns_label_errors(params.get("namespace"), "namespace", "vSphere namespace name")
    pools = params.get("node_pools")
    if pools == [] and params.get("purge"):
        out.append("node_pools is empty and purge is true, which would remove every node pool of the Cluster; "
                   "list the node pools to keep, or set purge false")
    names = []
    for index, pool in enumerate(pools or []):
        where = "node_pools[%d]" % index
        name = pool.get("name")
        out += dns_label_errors(name, "%s.name" % where, "node pool name")
        if name in names:
            out.append("%s.name %r is given twice; node pool names must be unique" % (where, name))
        names.append(name)
        out += ["%s.%s" % (where, e) for e in range_errors(pool, "replicas", 0, what=" nodes")]
        out += dns_label_errors(pool.get("vm_class"), "%s.vm_class" % where, "VM class name")
        out += ["%s.%s" % (where, e) for e in empty_errors(pool, ("class",))]
        out += labels_errors(pool.get("labels"), "%s.labels" % where)
        for taint_index, taint in enumerate(pool.get("taints") or []):
            key = taint.get("key")
            problem = label_key_problem(key)
            if problem:
                out.append("%s.taints[%d].key %r is not a valid taint key: %s" % (where, taint_index, key, problem))
            value = taint.get("value")
            problem = None if value is None else label_value_problem(str(value))
            if problem:
                out.append("%s.taints[%d].value %r is not a valid taint value: %s"
                           % (where, taint_index, value, problem))
    return out


def guest_node_drain_errors(params):
    out = empty_errors(params, ("owner",))
    for index, vm in enumerate(params.get("vms") or []):
        out += ["vms[%d].%s" % (index, e) for e in empty_errors(vm, ("name",))]
    for index, owner in enumerate(params.get("owners") or []):
        if not str(owner or "").strip():
            out.append("owners[%d] is empty; give the cordoned-by values whose nodes may be uncordoned" % index)
    for index, name in enumerate(params.get("protected_priority_classes") or []):
        if not str(name or "").strip():
            out.append("protected_priority_classes[%d] is empty; give PriorityClass names" % index)
    return out


def pool_ready_errors(params):
    out = list_item_errors(params, "nodes") + empty_errors(params, (
        "gpu_resource", "validator_selector", "validator_namespace", "probe_namespace", "probe_image", "license_metric",
        "inference_model"))
    for index, vm in enumerate(params.get("vms") or []):
        out += ["vms[%d].%s" % (index, e) for e in empty_errors(vm, ("name",))]
    out += labels_errors(params.get("node_selector"), "node_selector") + range_errors(params, "min_nodes", 1, what=" nodes")
    for key in ("prometheus_url", "inference_url"):
        url = params.get(key)
        if url is not None and not (url.startswith("http://") or url.startswith("https://")):
            out.append("%s must be an http:// or https:// URL, not %r" % (key, url))
    poll = params.get("poll_interval")
    if poll is not None and not poll > 0:
        out.append("poll_interval must be more than 0 seconds, not %r" % (poll,))
    for step, value in sorted((params.get("step_timeouts") or {}).items()):
        if step not in _pool_ready.STEPS:
            out.append("step_timeouts names %r, not a step (%s)" % (step, ", ".join(_pool_ready.STEPS)))
        elif not (_is_int(value) and value > 0):
            out.append("step_timeouts.%s must be a whole number of seconds, 1 or more, not %r" % (step, value))
    return out


def dls_client_token_errors(params):
    out = empty_errors(params, ("dls_host", "username", "password", "dest"))
    out += range_errors(params, "expiry_days", 1, what=" days")
    expiry = params.get("expiry_days")
    high = expiry - 1 if _is_int(expiry) and expiry >= 1 else None
    out += range_errors(params, "renew_before_days", 0, high, " days (below expiry_days)")
    return out


def nls_appliance_deploy_errors(params):
    out = empty_errors(params, ("ovf", "cluster", "datastore", "network", "datacenter", "anti_affinity_rule"))
    nodes = params.get("nodes")
    if nodes is not None and not 1 <= len(nodes) <= 2:
        out.append("nodes must list 1 node or 2 (the HA pair), not %d" % len(nodes))
    names = []
    for index, node in enumerate(nodes or []):
        out += ["nodes[%d].%s" % (index, e) for e in empty_errors(node, ("name",))]
        if node.get("name") in names:
            out.append("nodes[%d].name %r is given twice; the nodes need two names" % (index, node.get("name")))
        names.append(node.get("name"))
        for key in sorted(node.get("ovf_properties") or {}):
            if not str(key).strip():
                out.append("nodes[%d].ovf_properties has an empty key" % index)
    return out


def nls_appliance_info_errors(params):
    out = empty_errors(params, ("dls_host", "username", "password", "token_path"))
    out += range_errors(params, "wait_seconds", 0, what=" seconds") + range_errors(params, "expect_nodes", 1, 2)
    out += range_errors(params, "renew_before_days", 0, what=" days") + list_item_errors(params, "gpu_nodes")
    return out


CHECKS = {
    "dls_client_token": dls_client_token_errors,
    "drs_gpu_pinning": drs_gpu_pinning_errors,
    "esxi_gpu_config": esxi_gpu_config_errors,
    "esxi_host_driver": esxi_host_driver_errors,
    "esxi_maintenance_mode": esxi_maintenance_mode_errors,
    "gpu_capacity": gpu_capacity_errors,
    "gpu_game_day": gpu_game_day_errors,
    "gpu_host_info": gpu_host_info_errors,
    "guest_node_drain": guest_node_drain_errors,
    "gpu_pool_audit": gpu_pool_audit_errors,
    "gpu_pool_design": gpu_pool_design_errors,
    "gpu_usage": gpu_usage_errors,
    "nls_appliance_deploy": nls_appliance_deploy_errors,
    "nls_appliance_info": nls_appliance_info_errors,
    "nvidia_license_info": nvidia_license_info_errors,
    "pool_ready": pool_ready_errors,
    "supervisor_namespace": supervisor_namespace_errors,
    "vks_node_pool": vks_node_pool_errors,
    "vlcm_component": vlcm_component_errors,
    "vm_class": vm_class_errors,
}


def check(module_name, params):
    """Every input error of one module's params (shared checks first), as sentences."""
    errors = timeout_errors(params) + retries_errors(params) + port_errors(params)
    func = CHECKS.get(module_name)
    if func is not None:
        errors += func(params)
    return errors


def message(module_name, errors):
    """The failure message for ``errors`` (None when there are none)."""
    if not errors:
        return None
    return "Invalid input for %s: %s. %s" % (module_name, "; ".join(errors), NOTHING_CHANGED)


def enforce(module, module_name):
    """Fail ``module`` (anything with ``params`` and ``fail_json``) when its params have input errors.

    An option's aliases are in ``params`` too; they are left out, so each bad option is named once.
    """
    spec = getattr(module, "argument_spec", None) or {}
    aliases = set(alias for option in spec.values() for alias in (option.get("aliases") or ()))
    errors = check(module_name, dict((k, v) for k, v in module.params.items() if k not in aliases))
    if errors:
        module.fail_json(msg=message(module_name, errors), invalid_input=errors)
