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

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _capacity_live, _chargeback, _esxi, _lease, _nvidia, _pool_ready
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _design_schema
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_LABEL_FORM,
    DNS_LABEL_MAX,
    dns_label_problem,
    dns_label_suggestion,
    dns_subdomain_problem,
    label_key_problem,
    label_value_problem,
    oci_path_problem,
    oci_repository_problem,
    oci_tag_problem,
    priority_name_problem,
    priority_value_problem,
    shown,
    system_namespace_problem,
    text_problem,
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


def gpu_pool_preflight_errors(params):
    out = empty_errors(params, ("design_file", "supervisor_kubeconfig", "dls_host"))
    out += range_errors(params, "dls_port", 1, 65535)
    url = params.get("prometheus_url")
    if url and not (url.startswith("http://") or url.startswith("https://")):
        out.append("prometheus_url must be an http:// or https:// URL, not %r" % (url,))
    return out


def gpu_pool_discover_errors(params):
    return empty_errors(params, ("dest", "name", "supervisor_kubeconfig")) + list_item_errors(params, "clusters")


def gpu_pool_lease_errors(params):
    out = list_item_errors(params, "clusters")
    if params.get("clusters") == []:
        out.append("clusters must name at least one cluster")
    out += range_errors(params, "wait", 0, what=" seconds")
    if params.get("state", _lease.ACQUIRED) == _lease.ACQUIRED:
        out += range_errors(params, "ttl", _lease.MIN_TTL, what=" seconds")
    if params.get("holder") is not None:
        try:
            _lease.validate_holder(params["holder"])
        except _lease.LeaseError as exc:
            out.append("holder: %s" % exc)
    return out


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
    "gpu_pool_discover": gpu_pool_discover_errors,
    "gpu_pool_lease": gpu_pool_lease_errors,
    "gpu_pool_preflight": gpu_pool_preflight_errors,
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


# ---------------------------------------------------------------------------------------
# roles used alone: their inputs, checked as the design checks the same values
# ---------------------------------------------------------------------------------------
#
# ``role_errors(role, variables)`` takes a role's variables (the role's own names) and returns
# sentences as ``check`` does; the roles call it through the ``role_input_errors`` filter in their
# first task, before any request. Each rule shared with the design is the same function or bound:
# PriorityClass values and names (_design_names), namespace names and system namespaces, the
# time-slicing replicas, the VM class ranges and the OCI image syntax (_design_schema's bounds).


def _as_int(value):
    """A whole number (also one templated as a string), or None."""
    if _is_int(value):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _number_errors(where, value, low, high, what=""):
    number = _as_int(value)
    if number is not None and low <= number <= high:
        return []
    return ["%s must be a whole number from %d to %d%s, not %s" % (where, low, high, what, shown(value))]


def _name_errors(where, value, what, subdomain=False):
    if value is None:
        return ["%s is not set (the %s)" % (where, what)]
    problem = dns_subdomain_problem(value) if subdomain else dns_label_problem(value)
    if problem is None:
        return []
    form = "a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)" if subdomain else \
        DNS_LABEL_FORM % DNS_LABEL_MAX
    return ["%s %s is not a %s Kubernetes accepts: %s; use %s" % (where, shown(value), what, problem, form)]


def _namespace_errors(where, value, tenant=True):
    out = _name_errors(where, value, "namespace name")
    problem = system_namespace_problem(value) if tenant and not out else None
    if problem:
        out.append("%s %s is not a tenant's namespace: %s" % (where, shown(value), problem))
    return out


def _text_errors(where, value, limit=_design_schema.TEXT_MAX):
    problem = text_problem(value, limit)
    return ["%s is too long: %s" % (where, problem)] if problem else []


def _priority_errors(where, name, value):
    out = _name_errors("%s name" % where, name, "PriorityClass name", subdomain=True)
    problem = priority_name_problem(name)
    if problem:
        out.append("%s name %s: %s" % (where, shown(name), problem))
    number = _as_int(value)
    problem = priority_value_problem(number if number is not None else value)
    if problem:
        out.append("%s value: %s" % (where, problem))
    return out


def _items(variables, key, kind=list):
    value = variables.get(key)
    if value is None or value == "":
        return kind()
    return value if isinstance(value, kind) else None


def _duplicates(where, names, what):
    seen, out = set(), []
    for name in names:
        if name in seen:
            out.append("%s: %s %s is given twice; each needs its own" % (where, what, shown(name)))
        seen.add(name)
    return out


def gpu_scheduling_policy_role_errors(v):
    out = []
    classes = _items(v, "gpu_scheduling_policy_priority_classes")
    if classes is None:
        out.append("gpu_scheduling_policy_priority_classes must be a list")
        classes = []
    for index, entry in enumerate(classes):
        entry = entry if isinstance(entry, dict) else {}
        out += _priority_errors("gpu_scheduling_policy_priority_classes[%d]" % index, entry.get("name"),
                                entry.get("value"))
        out += _text_errors("gpu_scheduling_policy_priority_classes[%d].description" % index, entry.get("description"))
    names = [c.get("name") for c in classes if isinstance(c, dict)]
    out += _duplicates("gpu_scheduling_policy_priority_classes", names, "PriorityClass")
    if not classes:
        for shape in ("inference", "training", "notebook"):
            out += _priority_errors("gpu_scheduling_policy_%s_priority_class" % shape,
                                    v.get("gpu_scheduling_policy_%s_priority_class" % shape),
                                    v.get("gpu_scheduling_policy_%s_priority" % shape))
    tenants = _items(v, "gpu_scheduling_policy_tenants")
    if tenants is None:
        out.append("gpu_scheduling_policy_tenants must be a list")
        tenants = []
    for index, tenant in enumerate(tenants):
        tenant = tenant if isinstance(tenant, dict) else {}
        where = "gpu_scheduling_policy_tenants[%d]" % index
        out += _namespace_errors("%s.namespace" % where, tenant.get("namespace"))
        if tenant.get("gpus") is not None:
            out += _number_errors("%s.gpus" % where, tenant["gpus"], 0, _design_schema.GPUS_MAX, " GPUs")
        for quota_index, quota in enumerate(tenant.get("quotas") or []):
            quota = quota if isinstance(quota, dict) else {}
            out += _name_errors("%s.quotas[%d].name" % (where, quota_index), quota.get("name"), "ResourceQuota name",
                                subdomain=True)
            for resource, amount in sorted((quota.get("hard") or {}).items()):
                if _as_int(amount) is not None and _as_int(amount) < 0:
                    out.append("%s.quotas[%d].hard.%s must be 0 or more, not %s" % (where, quota_index, resource,
                                                                                    shown(amount)))
        out += labels_errors(tenant.get("labels"), "%s.labels" % where)
    out += _duplicates("gpu_scheduling_policy_tenants", [t.get("namespace") for t in tenants if isinstance(t, dict)],
                       "namespace")
    if v.get("gpu_scheduling_policy_quota_name") is not None:
        out += _name_errors("gpu_scheduling_policy_quota_name", v["gpu_scheduling_policy_quota_name"],
                            "ResourceQuota name", subdomain=True)
    return out


def gpu_operator_role_errors(v):
    out = []
    for key in ("gpu_operator_namespace", "gpu_operator_release_name"):
        if key in v:
            out += _name_errors(key, v[key], "namespace name" if key.endswith("namespace") else "Helm release name")
    for key in ("gpu_operator_device_plugin_config_name", "gpu_operator_dcgm_metrics_config_name"):
        if v.get(key):
            out += _name_errors(key, v[key], "ConfigMap name", subdomain=True)
    if v.get("gpu_operator_licensing_secret_name"):
        out += _name_errors("gpu_operator_licensing_secret_name", v["gpu_operator_licensing_secret_name"],
                            "Secret name", subdomain=True)
    checks = (("gpu_operator_driver_repository", oci_repository_problem, "an OCI image repository"),
              ("gpu_operator_driver_image", oci_path_problem, "an OCI repository path"),
              ("gpu_operator_driver_version", oci_tag_problem, "an OCI image tag"))
    for key, check_one, words in checks:
        if v.get(key):
            problem = check_one(v[key])
            if problem:
                out.append("%s %s is not %s: %s" % (key, shown(v[key]), words, problem))
    slicing = _items(v, "gpu_operator_time_slicing", dict)
    if slicing is None:
        out.append("gpu_operator_time_slicing must be a mapping of configuration name -> {replicas, ...}")
        slicing = {}
    low, high = _design_schema.TIME_SLICING_REPLICAS
    for name in sorted(slicing, key=str):
        where = "gpu_operator_time_slicing.%s" % shown(name, 40).strip("'")
        problem = label_value_problem(name) if isinstance(name, str) else "it is not a string"
        if problem or name == "":
            out.append("%s: the name is the value of the node label nvidia.com/device-plugin.config and must be a "
                       "label value: %s" % (where, problem or "it is empty"))
        entry = slicing[name] if isinstance(slicing[name], dict) else {}
        out += _number_errors("%s.replicas" % where, entry.get("replicas"), low, high, " pods per GPU")
    return out


def supervisor_gpu_tenancy_role_errors(v):
    out = []
    classes = _items(v, "supervisor_gpu_tenancy_vm_classes")
    if classes is None:
        out.append("supervisor_gpu_tenancy_vm_classes must be a list")
        classes = []
    for index, entry in enumerate(classes):
        entry = entry if isinstance(entry, dict) else {}
        where = "supervisor_gpu_tenancy_vm_classes[%d]" % index
        out += dns_label_errors(entry.get("name"), "%s.name" % where, "VM class name")
        if entry.get("cpu_count") is not None:
            out += _number_errors("%s.cpu_count" % where, entry["cpu_count"], 1, _design_schema.VM_CPU_MAX, " vCPUs")
        if entry.get("memory_mb") is not None:
            out += _number_errors("%s.memory_mb" % where, entry["memory_mb"], 1,
                                  _design_schema.VM_MEMORY_GB_MAX * 1024, " MiB")
        for key in ("cpu_reservation", "memory_reservation"):
            if entry.get(key) is not None:
                out += _number_errors("%s.%s" % (where, key), entry[key], 0, 100, " percent")
        out += _text_errors("%s.description" % where, entry.get("description"))
    out += _duplicates("supervisor_gpu_tenancy_vm_classes", [c.get("name") for c in classes if isinstance(c, dict)],
                       "VM class")
    namespaces = _items(v, "supervisor_gpu_tenancy_namespaces")
    if namespaces is None:
        out.append("supervisor_gpu_tenancy_namespaces must be a list")
        namespaces = []
    for index, entry in enumerate(namespaces):
        entry = entry if isinstance(entry, dict) else {}
        where = "supervisor_gpu_tenancy_namespaces[%d]" % index
        out += _namespace_errors("%s.name" % where, entry.get("name"))
        for name in entry.get("vm_classes") or []:
            out += dns_label_errors(name, "%s.vm_classes item" % where, "VM class name")
        limits = entry.get("limits") if isinstance(entry.get("limits"), dict) else {}
        for key in ("cpu_mhz", "memory_mib", "storage_mib"):
            if limits.get(key) is not None:
                out += _number_errors("%s.limits.%s" % (where, key), limits[key], 0, _design_schema.LIMIT_MAX)
        for policy_index, policy in enumerate(entry.get("storage_policies") or []):
            policy = policy if isinstance(policy, dict) else {}
            if policy.get("limit_mib") is not None:
                out += _number_errors("%s.storage_policies[%d].limit_mib" % (where, policy_index), policy["limit_mib"],
                                      0, _design_schema.LIMIT_MAX)
        out += _text_errors("%s.description" % where, entry.get("description"))
    out += _duplicates("supervisor_gpu_tenancy_namespaces", [n.get("name") for n in namespaces if isinstance(n, dict)],
                       "namespace")
    return out


def drs_gpu_pinning_role_errors(v):
    out = []
    clusters = _items(v, "drs_gpu_pinning_clusters")
    if clusters is None:
        return ["drs_gpu_pinning_clusters must be a list"]
    for index, entry in enumerate(clusters):
        entry = entry if isinstance(entry, dict) else {}
        where = "drs_gpu_pinning_clusters[%d]" % index
        out += ["%s.%s" % (where, e) for e in empty_errors(entry, ("name",))]
        if entry.get("name") is None:
            out.append("%s.name is not set (the vSphere cluster)" % where)
        out += ["%s.%s" % (where, e) for e in list_item_errors(entry, "vms") + list_item_errors(entry, "exclude")]
        out += _text_errors("%s.name" % where, entry.get("name"), _design_schema.NAME_MAX)
    out += _duplicates("drs_gpu_pinning_clusters", [c.get("name") for c in clusters if isinstance(c, dict)], "cluster")
    return out


# the content hash the role appends to nls_licensing_secret_prefix: '-' and 10 hex digits
_SECRET_HASH_LEN = 11


def _whole_number(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def nls_licensing_role_errors(v):
    out = []
    if "nls_licensing_operator_namespace" in v:
        out += _name_errors("nls_licensing_operator_namespace", v["nls_licensing_operator_namespace"], "namespace name")
    prefix = v.get("nls_licensing_secret_prefix")
    if prefix is not None:
        out += _name_errors("nls_licensing_secret_prefix", prefix, "Secret name prefix", subdomain=True)
        if isinstance(prefix, str) and len(prefix) + _SECRET_HASH_LEN > 253:
            out.append("nls_licensing_secret_prefix %s is too long: with the content hash the Secret name must stay "
                       "within 253 characters, so at most %d" % (shown(prefix), 253 - _SECRET_HASH_LEN))
    for key, low, what in (("nls_licensing_keep_secrets", 1, "1 or more (this run's Secret is one of those kept)"),
                           ("nls_licensing_verify_retries", 0, "0 or more"),
                           ("nls_licensing_verify_delay", 0, "0 or more seconds")):
        if key in v:
            number = _whole_number(v[key])
            if number is None or number < low:
                out.append("%s must be %s, a whole number, not %s" % (key, what, shown(v[key])))
    name = v.get("nls_licensing_token_name")
    if name is not None and (not isinstance(name, str) or not name or "/" in name or name in (".", "..")):
        out.append("nls_licensing_token_name %s must be a file name in the token folder (no '/')" % shown(name))
    options = v.get("nls_licensing_gridd_options")
    if options is not None and not isinstance(options, dict):
        out.append("nls_licensing_gridd_options must be a mapping of gridd.conf setting -> value")
    for key in sorted(options or {}, key=str) if isinstance(options, dict) else []:
        # one 'Name=value' line each in gridd.conf: a line break or '=' in a name, or a line break in
        # a value, would write settings nobody asked for
        if not isinstance(key, str) or not key or any(c in key for c in "=\r\n #"):
            out.append("nls_licensing_gridd_options: %s is not a gridd.conf setting name (letters, digits, '_')"
                       % shown(key))
        elif any(c in str(options[key]) for c in "\r\n"):
            out.append("nls_licensing_gridd_options.%s: the value %s spans lines; gridd.conf takes one line per setting"
                       % (key, shown(options[key])))
    return out


ROLE_CHECKS = {
    "drs_gpu_pinning": drs_gpu_pinning_role_errors,
    "gpu_operator": gpu_operator_role_errors,
    "gpu_scheduling_policy": gpu_scheduling_policy_role_errors,
    "nls_licensing": nls_licensing_role_errors,
    "supervisor_gpu_tenancy": supervisor_gpu_tenancy_role_errors,
}


def role_errors(role, variables):
    """Every input error of one role's variables, as sentences (a role without checks has none)."""
    func = ROLE_CHECKS.get(role)
    if func is None:
        raise ValueError("no input checks for role %s (roles with checks: %s)" % (role, ", ".join(sorted(ROLE_CHECKS))))
    return func(dict(variables or {}))
