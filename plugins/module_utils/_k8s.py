# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What kubernetes.core does not offer: an API client from the shared auth options, and the
pure logic that maps node pool labels and taints onto a ClusterClass's variable schema."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

try:
    from ansible.module_utils.basic import env_fallback
except ImportError:  # pure use outside Ansible (unit tests import only the logic)
    env_fallback = None


def auth_argument_spec():
    """The connection options (names and environment variables of kubernetes.core)."""
    def env(*names):
        return dict(fallback=(env_fallback, list(names))) if env_fallback else {}
    return dict(
        kubeconfig=dict(type="path", **env("K8S_AUTH_KUBECONFIG")),
        context=dict(type="str", **env("K8S_AUTH_CONTEXT")),
        host=dict(type="str", **env("K8S_AUTH_HOST")),
        api_key=dict(type="str", no_log=True, **env("K8S_AUTH_API_KEY")),
        ca_cert=dict(type="path", aliases=["ssl_ca_cert"], **env("K8S_AUTH_SSL_CA_CERT")),
        client_cert=dict(type="path", aliases=["cert_file"], **env("K8S_AUTH_CERT_FILE")),
        client_key=dict(type="path", aliases=["key_file"], no_log=False, **env("K8S_AUTH_KEY_FILE")),
        validate_certs=dict(type="bool", aliases=["verify_ssl"], **env("K8S_AUTH_VERIFY_SSL")),
    )


class K8sError(Exception):
    """An API call failed; `status` is the HTTP status when there was one."""

    def __init__(self, msg, status=None):
        super(K8sError, self).__init__(msg)
        self.status = status


def api_client(params):
    """A kubernetes.client.ApiClient from the auth options (kubeconfig unless `host` is given)."""
    from kubernetes import client, config
    if params.get("host"):
        cfg = client.Configuration()
        cfg.host = params["host"]
        if params.get("api_key"):
            cfg.api_key = {"authorization": "Bearer " + params["api_key"]}
        if params.get("ca_cert"):
            cfg.ssl_ca_cert = params["ca_cert"]
        if params.get("client_cert"):
            cfg.cert_file = params["client_cert"]
        if params.get("client_key"):
            cfg.key_file = params["client_key"]
        if params.get("validate_certs") is not None:
            cfg.verify_ssl = params["validate_certs"]
        return client.ApiClient(cfg)
    path = params.get("kubeconfig") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    cfg = client.Configuration()
    config.load_kube_config(config_file=path, context=params.get("context"), client_configuration=cfg,
                            persist_config=False)
    if params.get("validate_certs") is False:
        cfg.verify_ssl = False
    if params.get("ca_cert"):
        cfg.ssl_ca_cert = params["ca_cert"]
    return client.ApiClient(cfg)


# --- ClusterClass variables -> how node labels and taints are expressed ------------------------

def _schema(var):
    return ((var.get("schema") or {}).get("openAPIV3Schema")) or {}


def _labels_form(name, schema):
    """'map' for {key: value}, 'kv_list' for [{key, value}], None when the schema is neither."""
    if "label" not in name.lower():
        return None
    if schema.get("type") == "object" and (isinstance(schema.get("additionalProperties"), dict)
                                           or schema.get("x-kubernetes-preserve-unknown-fields")):
        return "map"
    if schema.get("type") == "array":
        props = (schema.get("items") or {}).get("properties") or {}
        if "key" in props and "value" in props:
            return "kv_list"
    return None


def _is_taints(name, schema):
    if schema.get("type") != "array":
        return False
    props = (schema.get("items") or {}).get("properties") or {}
    return "key" in props and "effect" in props


def variable_plan(class_variables):
    """Where a ClusterClass lets a node pool set its VM class, node labels and node taints.

    Returns {"vm_class": name or None, "labels": {"variable", "property", "form"} or None,
    "taints": {"variable", "property"} or None, "names": [every variable name]}. `property` is
    None when the variable itself holds the value, else the name of the property of an object
    variable (a `node` variable with `labels` and `taints`). Nothing is assumed about a VKS
    release: only the schema is read.
    """
    plan = {"vm_class": None, "labels": None, "taints": None,
            "names": [v.get("name") for v in class_variables or []]}
    for var in class_variables or []:
        name, schema = var.get("name") or "", _schema(var)
        if name.lower() == "vmclass" and schema.get("type") in (None, "string"):
            plan["vm_class"] = name
            continue
        form = _labels_form(name, schema)
        if form and plan["labels"] is None:
            plan["labels"] = {"variable": name, "property": None, "form": form}
            continue
        if "taint" in name.lower() and _is_taints(name, schema) and plan["taints"] is None:
            plan["taints"] = {"variable": name, "property": None}
            continue
        if schema.get("type") == "object":
            for prop, sub in sorted((schema.get("properties") or {}).items()):
                sub = sub or {}
                form = _labels_form(prop, sub)
                if form and plan["labels"] is None:
                    plan["labels"] = {"variable": name, "property": prop, "form": form}
                elif "taint" in prop.lower() and _is_taints(prop, sub) and plan["taints"] is None:
                    plan["taints"] = {"variable": name, "property": prop}
    return plan


def _labels_value(labels, form):
    if form == "kv_list":
        return [{"key": k, "value": str(v)} for k, v in sorted(labels.items())]
    return dict((k, str(v)) for k, v in labels.items())


def _taints_value(taints):
    out = []
    for t in taints:
        item = {"key": t["key"], "effect": t["effect"]}
        if t.get("value") not in (None, ""):
            item["value"] = t["value"]
        out.append(item)
    return out


def _set_override(overrides, name, prop, value):
    for ov in overrides:
        if ov.get("name") == name:
            if prop is None:
                ov["value"] = value
            else:
                cur = ov.get("value") if isinstance(ov.get("value"), dict) else {}
                cur = dict(cur)
                cur[prop] = value
                ov["value"] = cur
            return
    overrides.append({"name": name, "value": value if prop is None else {prop: value}})


class PlanError(ValueError):
    pass


def apply_pool(md, pool, plan, class_ref):
    """The machineDeployment `md` (None: a new one) with the pool's options applied.

    Options that are None are left as they are. Raises PlanError when the class cannot
    express what the pool asks for.
    """
    new = copy.deepcopy(md) if md else {"class": pool.get("class") or class_ref, "name": pool["name"]}
    if not new.get("class"):
        raise PlanError("node pool %s is new and the ClusterClass has several machineDeployment "
                        "classes: set its class" % pool["name"])
    if pool.get("replicas") is not None:
        new["replicas"] = pool["replicas"]
    overrides = copy.deepcopy(((new.get("variables") or {}).get("overrides")) or [])
    if pool.get("vm_class") is not None:
        if not plan["vm_class"]:
            raise PlanError("the ClusterClass has no vmClass variable; its variables: %s"
                            % ", ".join(plan["names"]))
        _set_override(overrides, plan["vm_class"], None, pool["vm_class"])
    if pool.get("labels") is not None:
        where = plan["labels"]
        if not where:
            raise PlanError("the ClusterClass has no variable for node labels, so node pool %s cannot "
                            "set them; its variables: %s" % (pool["name"], ", ".join(plan["names"])))
        _set_override(overrides, where["variable"], where["property"],
                      _labels_value(pool["labels"], where["form"]))
    if pool.get("taints") is not None:
        where = plan["taints"]
        if not where:
            raise PlanError("the ClusterClass has no variable for node taints, so node pool %s cannot "
                            "be tainted; its variables: %s" % (pool["name"], ", ".join(plan["names"])))
        _set_override(overrides, where["variable"], where["property"], _taints_value(pool["taints"]))
    if overrides:
        new.setdefault("variables", {})
        new["variables"] = dict(new["variables"], overrides=overrides)
    return new


def plan_machine_deployments(current, pools, plan, class_ref, purge=False):
    """The new machineDeployments list: pools given are created or updated in place, others kept
    (or removed with purge). Order is kept; new pools are appended."""
    wanted = dict((p["name"], p) for p in pools)
    out = []
    for md in current or []:
        if md.get("name") in wanted:
            out.append(apply_pool(md, wanted.pop(md["name"]), plan, class_ref))
        elif not purge:
            out.append(copy.deepcopy(md))
    for p in pools:
        if p["name"] in wanted:
            out.append(apply_pool(None, p, plan, class_ref))
    return out
