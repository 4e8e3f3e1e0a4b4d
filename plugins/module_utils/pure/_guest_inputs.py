# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The option checks of the Kubernetes-side modules (vks_node_pool, guest_node_drain, guest_objects): pure, each
``<module>_errors(params)`` returns sentences naming the option, what it holds and what is accepted; the
module passes its function to ``_inputs.enforce`` (the shared checks and the failure message are there).
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_names import (
    dns_subdomain_problem,
    label_key_problem,
    label_value_problem,
    priority_name_problem,
    priority_value_problem,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import (
    dns_label_errors,
    empty_errors,
    labels_errors,
    list_item_errors,
    range_errors,
)


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


def guest_objects_errors(params):
    out = empty_errors(params, ("quota_name", "gpu_resource")) + list_item_errors(params, "mig_resources")
    names = []
    for index, entry in enumerate(params.get("priority_classes") or []):
        where = "priority_classes[%d]" % index
        name = entry.get("name")
        problem = dns_subdomain_problem(name) or priority_name_problem(name)
        if problem:
            out.append("%s.name %r is not a PriorityClass name Kubernetes accepts: %s" % (where, name, problem))
        elif name in names:
            out.append("%s.name %r is given twice; PriorityClass names must be unique" % (where, name))
        names.append(name)
        problem = priority_value_problem(entry.get("value"))
        if problem:
            out.append("%s.value: %s" % (where, problem))
    namespaces = []
    for index, tenant in enumerate(params.get("tenants") or []):
        where = "tenants[%d]" % index
        if not isinstance(tenant, dict) or tenant.get("namespace") is None:
            out.append("%s needs a namespace (the tenant's namespace name)" % where)
            continue
        namespace = tenant["namespace"]
        out += dns_label_errors(namespace, "%s.namespace" % where, "namespace name")
        if namespace in namespaces:
            out.append("%s.namespace %r is given twice; each tenant needs its own" % (where, namespace))
        namespaces.append(namespace)
        out += labels_errors(tenant.get("labels"), "%s.labels" % where)
    return out


def device_plugin_restart_errors(params):
    out = empty_errors(params, ("namespace", "owner"))
    for name, config in sorted((params.get("time_slicing") or {}).items()):
        replicas = (config or {}).get("replicas") if isinstance(config, dict) else None
        whole = not isinstance(replicas, bool) and str(replicas).strip().isdigit()
        if not whole or int(str(replicas).strip()) < 1:
            out.append("time_slicing.%s.replicas must be a whole number of at least 1, not %r" % (name, replicas))
    for index, name in enumerate(params.get("protected_priority_classes") or []):
        if not str(name or "").strip():
            out.append("protected_priority_classes[%d] is empty; give PriorityClass names" % index)
    return out


def driver_upgrade_wait_errors(params):
    """step_timeout and timeout are checked as every timeout is; settle 0 or more, a poll interval above 0."""
    out = range_errors(params, "settle", 0) if "settle" in params else []
    poll = params.get("poll_interval")
    if poll is not None and (isinstance(poll, bool) or not isinstance(poll, (int, float)) or poll <= 0):
        out.append("poll_interval must be a number of seconds above 0, not %r" % (poll,))
    return out
