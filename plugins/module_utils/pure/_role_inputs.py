# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The input checks of the roles used alone: their variables, checked as the design checks the same
values (pure).

``role_errors(role, variables)`` takes a role's variables (the role's own names) and returns
sentences as ``_inputs.check`` does; the roles call it through the ``role_input_errors`` filter in their
first task, before any request. Each rule shared with the design is the same function or bound:
PriorityClass values and names (_design_names), namespace names and system namespaces, the
time-slicing replicas, the VM class ranges and the OCI image syntax (_design_schema's bounds).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _design_schema, _ha
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    DNS_LABEL_FORM,
    DNS_LABEL_MAX,
    dns_label_problem,
    dns_subdomain_problem,
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
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    dns_label_errors,
    empty_errors,
    is_int,
    items,
    labels_errors,
    list_item_errors,
)


def _as_int(value):
    """A whole number (also one templated as a string), or None."""
    if is_int(value):
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


def _duplicates(where, names, what):
    seen, out = set(), []
    for name in names:
        if name in seen:
            out.append("%s: %s %s is given twice; each needs its own" % (where, what, shown(name)))
        seen.add(name)
    return out


def gpu_scheduling_policy_role_errors(v):
    out = []
    classes = items(v, "gpu_scheduling_policy_priority_classes", out)
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
    tenants = items(v, "gpu_scheduling_policy_tenants", out)
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
    slicing = items(v, "gpu_operator_time_slicing", out, dict, "a mapping of configuration name -> {replicas, ...}")
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
    classes = items(v, "supervisor_gpu_tenancy_vm_classes", out)
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
    namespaces = items(v, "supervisor_gpu_tenancy_namespaces", out)
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


def _cluster_entries(v, key, out):
    """Yields ``(where, entry)`` for each entry of the list ``v[key]`` of per-cluster settings, after the checks
    every such entry takes (it names its vSphere cluster: set, not empty, bounded); once the caller has checked
    the last entry, the list's own check (no cluster twice) follows in ``out``."""
    clusters = items(v, key, out)
    for index, entry in enumerate(clusters):
        entry = entry if isinstance(entry, dict) else {}
        where = "%s[%d]" % (key, index)
        out += ["%s.%s" % (where, e) for e in empty_errors(entry, ("name",))]
        if entry.get("name") is None:
            out.append("%s.name is not set (the vSphere cluster)" % where)
        out += _text_errors("%s.name" % where, entry.get("name"), _design_schema.NAME_MAX)
        yield where, entry
    out += _duplicates(key, [c.get("name") for c in clusters if isinstance(c, dict)], "cluster")


def drs_gpu_pinning_role_errors(v):
    out = []
    for where, entry in _cluster_entries(v, "drs_gpu_pinning_clusters", out):
        out += ["%s.%s" % (where, e) for e in list_item_errors(entry, "vms") + list_item_errors(entry, "exclude")]
    return out


def ha_gpu_restart_role_errors(v):
    out = []
    for where, entry in _cluster_entries(v, "ha_gpu_restart_clusters", out):
        pools = entry.get("pools") or []
        if not isinstance(pools, list):
            out.append("%s.pools must be a list of pools" % where)
            pools = []
        for pool_index, pool in enumerate(pools):
            pool = pool if isinstance(pool, dict) else {}
            at = "%s.pools[%d]" % (where, pool_index)
            for key in ("name", "vgpu_profile"):
                if not isinstance(pool.get(key), str) or not pool[key].strip():
                    out.append("%s.%s is not set" % (at, key))
            if pool.get("restart_priority") not in _ha.PRIORITIES:
                out.append("%s.restart_priority %s is not one of %s" % (at, shown(pool.get("restart_priority")),
                                                                        ", ".join(_ha.PRIORITIES)))
        if entry.get("admission_control") is not None:
            out += ["%s.%s" % (where, e) for e in _ha.policy_errors(entry["admission_control"])]
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
    "ha_gpu_restart": ha_gpu_restart_role_errors,
    "nls_licensing": nls_licensing_role_errors,
    "supervisor_gpu_tenancy": supervisor_gpu_tenancy_role_errors,
}


def role_errors(role, variables):
    """Every input error of one role's variables, as sentences (a role without checks has none)."""
    func = ROLE_CHECKS.get(role)
    if func is None:
        raise ValueError("no input checks for role %s (roles with checks: %s)" % (role, ", ".join(sorted(ROLE_CHECKS))))
    return func(dict(variables or {}))
