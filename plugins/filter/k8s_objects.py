# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes objects of the guest roles (vks_gpu_node_pools, gpu_operator,
gpu_scheduling_policy), built by the same code (_k8s_objects.py) the drift audit expects them
from, so a role and the audit cannot render one object two ways.

Each filter takes the role's inputs as a mapping of its variables (the role's defaults fill in
what the mapping leaves out) and is documented in the <filter name>.yml file next to this one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import yaml
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import to_nice_yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _driver_upgrade, _k8s_objects
from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters


def _inputs(role, inputs):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("the inputs of role %s must be a mapping of its variables, not %r" % (role, inputs))
    return _k8s_objects.role_inputs(role, inputs)


def _built(what, build, *args):
    try:
        return build(*args)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AnsibleFilterError("%s: invalid input (%s: %s)" % (what, type(exc).__name__, exc))


def vks_node_pools(inputs):
    return _built("vks_node_pools", _k8s_objects.node_pools, _inputs("vks_gpu_node_pools", inputs))


def device_plugin_config_map(inputs):
    return _built("device_plugin_config_map", _k8s_objects.device_plugin_config_map,
                  _inputs("gpu_operator", inputs), lambda config: to_nice_yaml(config, indent=2))


def cluster_policy_spec(inputs):
    return _built("cluster_policy_spec", _k8s_objects.cluster_policy_spec, _inputs("gpu_operator", inputs))


def dcgm_metrics_config_map(inputs):
    return _built("dcgm_metrics_config_map", _k8s_objects.dcgm_metrics_config_map, _inputs("gpu_operator", inputs))


def driver_upgrade_values(inputs):
    op = _inputs("gpu_operator", inputs)
    return _built("driver_upgrade_values", _driver_upgrade.chart_values, op.get("gpu_operator_driver_upgrade"))


def guest_driver_refusal(inputs):
    return _built("guest_driver_refusal", _k8s_objects.missing_guest_driver, _inputs("gpu_operator", inputs)) or ""


def mig_strategy_change(inputs, live_spec):
    if live_spec is not None and not isinstance(live_spec, dict):
        raise AnsibleFilterError("mig_strategy_change: the live ClusterPolicy spec must be a mapping or None, not %r"
                                 % (live_spec,))
    return list(_built("mig_strategy_change", _k8s_objects.mig_strategy_change, _inputs("gpu_operator", inputs),
                       live_spec) or [])


def gpu_workloads(objects):
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise AnsibleFilterError("gpu_workloads: give a list of Kubernetes objects, not %r" % (objects,))
    return _built("gpu_workloads", _k8s_objects.gpu_workloads, objects)


def tenant_namespace(tenant, created=False):
    if not isinstance(tenant, dict) or "namespace" not in tenant:
        raise AnsibleFilterError("tenant_namespace: a tenant must be a mapping with a namespace, not %r" % (tenant,))
    return _built("tenant_namespace", _k8s_objects.tenant_namespace, tenant, _k8s_objects.flag(created))


def kueue_manifests(inputs):
    return _built("kueue_manifests", _k8s_objects.kueue_manifests, _inputs("gpu_scheduling_policy", inputs))


def kueue_wait_for_pods_ready(inputs):
    return _built("kueue_wait_for_pods_ready", _k8s_objects.kueue_wait_for_pods_ready,
                  _inputs("gpu_scheduling_policy", inputs))


def kueue_manager_config(inputs, text):
    policy = _inputs("gpu_scheduling_policy", inputs)
    if not isinstance(text, str):
        raise AnsibleFilterError("kueue_manager_config: Kueue's configuration must be the text of its ConfigMap key, "
                                 "not %r" % (text,))
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AnsibleFilterError("kueue_manager_config: Kueue's configuration is not YAML: %s" % exc)
    diffs = _built("kueue_manager_config", _k8s_objects.kueue_config_differences, policy, config)
    if not diffs:
        return {"text": text, "differences": []}
    new = _built("kueue_manager_config", _k8s_objects.kueue_configuration, policy, config)
    return {"text": to_nice_yaml(new, indent=2, sort_keys=False),
            "differences": ["%s: %s (wanted %s)" % (path, "unset" if have is None else have, want)
                            for path, have, want in diffs]}


def notebook_culler_manifests(inputs, script):
    return _built("notebook_culler_manifests", _k8s_objects.culling_manifests,
                  _inputs("gpu_scheduling_policy", inputs), script)


class FilterModule(object):
    def filters(self):
        return plain_filters({
            "vks_node_pools": vks_node_pools,
            "device_plugin_config_map": device_plugin_config_map,
            "cluster_policy_spec": cluster_policy_spec,
            "dcgm_metrics_config_map": dcgm_metrics_config_map,
            "guest_driver_refusal": guest_driver_refusal,
            "driver_upgrade_values": driver_upgrade_values,
            "mig_strategy_change": mig_strategy_change,
            "gpu_workloads": gpu_workloads,
            "tenant_namespace": tenant_namespace,
            "kueue_manifests": kueue_manifests,
            "kueue_wait_for_pods_ready": kueue_wait_for_pods_ready,
            "kueue_manager_config": kueue_manager_config,
            "notebook_culler_manifests": notebook_culler_manifests,
        })
