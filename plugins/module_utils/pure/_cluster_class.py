# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a ClusterClass lets a node pool carry its VM class, node labels and node taints (pure).

VKS releases name these differently: the v3.1-era classes (``tanzukubernetescluster``,
``builtin-generic-v3.1.0``) have ``nodePoolLabels`` (a list of key/value items) and
``nodePoolTaints`` (a list of taints); v3.2 and later have one ``node`` object variable whose
``labels`` (a map) and ``taints`` (a list) hold them. Nothing here knows a release: the places
are read from the class's variable schema - ``spec.variables``, and ``status.variables`` where
Cluster API lists every definition (those a runtime extension contributes included) - so a class
that moves them again is read the same way, and a class with no place for what a pool asks
fails with the class's name and what it lacks, before anything is written.

``vks_node_pool`` writes through ``apply_pool`` and the audit reads through ``read_pool``, its
inverse, with the same ``variable_plan``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FIELDS = ("labels", "taints")
# what a field is called in messages
WORDS = {"labels": "node labels", "taints": "node taints"}


class PlanError(ValueError):
    """What a node pool asks for does not fit the ClusterClass (raised before any change)."""


# --- the class's variable definitions --------------------------------------------------------

def class_name(cluster_class):
    """``namespace/name`` of a ClusterClass object (``name`` without a namespace)."""
    meta = (cluster_class or {}).get("metadata") or {}
    if meta.get("namespace"):
        return "%s/%s" % (meta["namespace"], meta.get("name"))
    return meta.get("name") or "(unnamed)"


def class_variables(cluster_class):
    """[{name, required, schema}] the ClusterClass defines.

    ``spec.variables`` first (inline definitions), then the ``status.variables`` Cluster API
    reports for names the spec does not define (definitions a runtime extension discovers). A
    status variable with several definitions takes the inline one, else the first.
    """
    out = []
    seen = set()
    for var in ((cluster_class or {}).get("spec") or {}).get("variables") or []:
        if var.get("name") and var["name"] not in seen:
            seen.add(var["name"])
            out.append({"name": var["name"], "required": bool(var.get("required")), "schema": var.get("schema") or {}})
    for var in ((cluster_class or {}).get("status") or {}).get("variables") or []:
        defs = var.get("definitions") or []
        if not var.get("name") or var["name"] in seen or not defs:
            continue
        inline = [d for d in defs if d.get("from") == "inline"]
        first = (inline or defs)[0]
        seen.add(var["name"])
        out.append({"name": var["name"], "required": bool(first.get("required")), "schema": first.get("schema") or {}})
    return out


def _schema(var):
    return ((var.get("schema") or {}).get("openAPIV3Schema")) or {}


def _labels_form(name, schema):
    """'map' for {key: value}, 'kv_list' for [{key, value}], None when the schema is neither."""
    if "label" not in name.lower():
        return None
    if schema.get("type") == "object" and (isinstance(schema.get("additionalProperties"), dict)
                                           or schema.get("additionalProperties") is True
                                           or schema.get("x-kubernetes-preserve-unknown-fields")):
        return "map"
    if schema.get("type") == "array":
        props = (schema.get("items") or {}).get("properties") or {}
        if "key" in props and "value" in props:
            return "kv_list"
    return None


def _is_taints(name, schema):
    if "taint" not in name.lower() or schema.get("type") != "array":
        return False
    props = (schema.get("items") or {}).get("properties") or {}
    return "key" in props and "effect" in props


def _taint_rules(schema):
    """What the schema asks of each taint: {"required": [property], "effects": [allowed] or None}."""
    items = schema.get("items") or {}
    effect = (items.get("properties") or {}).get("effect") or {}
    return {"required": sorted(items.get("required") or []),
            "effects": list(effect["enum"]) if isinstance(effect.get("enum"), list) else None}


def _node_pool_variable(name):
    """Control-plane variables are not a node pool's."""
    return not name.lower().startswith("controlplane")


def variable_plan(class_or_variables, name=None):
    """Where the class lets a node pool set its VM class, node labels and node taints.

    ``class_or_variables``: a ClusterClass object (its name and its spec and status variables are
    read) or a list of variable definitions. Returns {"class": name, "vm_class": variable or None,
    "labels": {"variable", "property", "form"} or None, "taints": {"variable", "property"} or None,
    "taint_rules": {"required", "effects"}, "ambiguous": {field: [places]}, "names": [every
    variable]}. ``property`` is None when the variable itself holds the value, else the property of
    an object variable (``node.labels``). Two places that both fit a field make it ambiguous: the
    field is then None and a pool that sets it is refused, naming both.
    """
    if isinstance(class_or_variables, dict):
        name = name or class_name(class_or_variables)
        variables = class_variables(class_or_variables)
    else:
        variables = list(class_or_variables or [])
    found = {"labels": [], "taints": []}
    rules = {"required": [], "effects": None}
    vm_class = None
    for var in variables:
        vname, schema = var.get("name") or "", _schema(var)
        if not _node_pool_variable(vname):
            continue
        if vname.lower() == "vmclass" and schema.get("type") in (None, "string"):
            vm_class = vm_class or vname
            continue
        places = [(None, schema)]
        if schema.get("type") == "object":
            places += sorted((schema.get("properties") or {}).items())
        for prop, sub in places:
            sub = sub or {}
            key = vname if prop is None else prop
            form = _labels_form(key, sub)
            if form:
                found["labels"].append({"variable": vname, "property": prop, "form": form})
            elif _is_taints(key, sub):
                found["taints"].append({"variable": vname, "property": prop})
                rules = _taint_rules(sub)
    plan = {"class": name, "vm_class": vm_class, "labels": None, "taints": None, "taint_rules": rules,
            "ambiguous": {}, "names": [v.get("name") for v in variables]}
    for field in FIELDS:
        if len(found[field]) == 1:
            plan[field] = found[field][0]
        elif found[field]:
            plan["ambiguous"][field] = [place(x) for x in found[field]]
    return plan


def place(where):
    """``node.labels`` or ``nodePoolLabels``: where a field lives, for messages."""
    return where["variable"] if where["property"] is None else "%s.%s" % (where["variable"], where["property"])


def public_plan(plan):
    """The plan as a module returns it: the class and the three places."""
    return dict((k, plan.get(k)) for k in ("class", "vm_class", "labels", "taints"))


def _class_words(plan):
    return "ClusterClass %s" % plan["class"] if plan.get("class") else "the ClusterClass"


def lacks(plan, field):
    """The message for a field the class has no single place for, or None when it has one."""
    if plan.get(field):
        return None
    if field in plan.get("ambiguous", {}):
        return "%s has several variables that look like %s (%s): it is not clear which one the nodes get" % (
            _class_words(plan), WORDS[field], ", ".join(plan["ambiguous"][field]))
    return "%s has no variable for %s (its variables: %s)" % (
        _class_words(plan), WORDS[field], ", ".join(str(n) for n in plan.get("names") or []) or "none")


def check_pool(pool, plan):
    """Refuse (PlanError) what the class cannot express, before anything is written.

    A pool that sets labels or taints on a class without a place for them is refused; an empty
    set asks for nothing the class could not hold, so it passes. Taints are checked against the
    schema's item rules (required properties, allowed effects).
    """
    if pool.get("vm_class") is not None and not plan.get("vm_class"):
        raise PlanError("node pool %s: %s has no vmClass variable, so the pool's VM class cannot be set (its variables: %s)"
                        % (pool["name"], _class_words(plan), ", ".join(str(n) for n in plan.get("names") or [])))
    for field in FIELDS:
        if pool.get(field) and lacks(plan, field):
            raise PlanError("node pool %s cannot set %s: %s" % (pool["name"], WORDS[field], lacks(plan, field)))
    rules = plan.get("taint_rules") or {}
    for taint in pool.get("taints") or []:
        missing = [p for p in rules.get("required") or [] if taint.get(p) in (None, "")]
        if missing:
            raise PlanError("node pool %s: taint %s lacks %s, which %s requires of each taint in %s" % (
                pool["name"], taint.get("key"), ", ".join(missing), _class_words(plan), place(plan["taints"])))
        if rules.get("effects") is not None and taint.get("effect") not in rules["effects"]:
            raise PlanError("node pool %s: taint %s has effect %s; %s allows %s" % (
                pool["name"], taint.get("key"), taint.get("effect"), _class_words(plan), ", ".join(rules["effects"])))


# --- writing a pool --------------------------------------------------------------------------

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


def _set_override(overrides, name, prop, value, top_vars):
    """Set variable ``name`` (or its property ``prop``) in a machineDeployment's overrides.

    An override replaces the Cluster's value of the variable as a whole, so a new override of an
    object variable starts from the Cluster's value: its other properties keep what the pool had.
    """
    for ov in overrides:
        if ov.get("name") == name:
            if prop is None:
                ov["value"] = value
            else:
                cur = dict(ov.get("value")) if isinstance(ov.get("value"), dict) else {}
                cur[prop] = value
                ov["value"] = cur
            return
    if prop is None:
        overrides.append({"name": name, "value": value})
        return
    base = (top_vars or {}).get(name)
    cur = copy.deepcopy(base) if isinstance(base, dict) else {}
    cur[prop] = value
    overrides.append({"name": name, "value": cur})


def apply_pool(md, pool, plan, class_ref, top_vars=None):
    """The machineDeployment ``md`` (None: a new one) with the pool's options applied.

    Options that are None are left as they are; an empty labels map or taints list on a class
    without a place for them writes nothing. ``top_vars``: the Cluster's variables {name: value}.
    Raises PlanError (check_pool) when the class cannot express what the pool asks for.
    """
    check_pool(pool, plan)
    new = copy.deepcopy(md) if md else {"class": pool.get("class") or class_ref, "name": pool["name"]}
    if not new.get("class"):
        raise PlanError("node pool %s is new and %s has several machineDeployment classes: set its class"
                        % (pool["name"], _class_words(plan)))
    if pool.get("replicas") is not None:
        new["replicas"] = pool["replicas"]
    overrides = copy.deepcopy(((new.get("variables") or {}).get("overrides")) or [])
    if pool.get("vm_class") is not None:
        _set_override(overrides, plan["vm_class"], None, pool["vm_class"], top_vars)
    if pool.get("labels") is not None and plan.get("labels"):
        where = plan["labels"]
        _set_override(overrides, where["variable"], where["property"], _labels_value(pool["labels"], where["form"]), top_vars)
    if pool.get("taints") is not None and plan.get("taints"):
        where = plan["taints"]
        _set_override(overrides, where["variable"], where["property"], _taints_value(pool["taints"]), top_vars)
    if overrides:
        new["variables"] = dict(new.get("variables") or {}, overrides=overrides)
    return new


def plan_machine_deployments(current, pools, plan, class_ref, purge=False, top_vars=None):
    """The new machineDeployments list: pools given are created or updated in place, others kept
    (or removed with purge). Order is kept; new pools are appended. Every pool is checked against
    the class first, so a refusal leaves nothing half-planned."""
    for pool in pools:
        check_pool(pool, plan)
    wanted = dict((p["name"], p) for p in pools)
    out = []
    for md in current or []:
        if md.get("name") in wanted:
            out.append(apply_pool(md, wanted.pop(md["name"]), plan, class_ref, top_vars))
        elif not purge:
            out.append(copy.deepcopy(md))
    for p in pools:
        if p["name"] in wanted:
            out.append(apply_pool(None, p, plan, class_ref, top_vars))
    return out


# --- reading a pool --------------------------------------------------------------------------

def class_ref(cluster, version, namespace):
    """{"name", "namespace"} of the Cluster's ClusterClass in the Cluster API version it was read
    in (v1beta2 ``classRef``, v1beta1 ``class``/``classNamespace``), or None without a managed topology."""
    topo = (cluster.get("spec") or {}).get("topology") or {}
    if version == "v1beta2" and (topo.get("classRef") or {}).get("name"):
        ref = topo["classRef"]
        return {"name": ref["name"], "namespace": ref.get("namespace") or namespace}
    if version == "v1beta1" and topo.get("class"):
        return {"name": topo["class"], "namespace": topo.get("classNamespace") or namespace}
    return None


def top_variables(cluster):
    """The Cluster's topology variables {name: value}."""
    topo = (cluster.get("spec") or {}).get("topology") or {}
    return dict((v.get("name"), v.get("value")) for v in topo.get("variables") or [])


def _override(overrides, top_vars, name, prop):
    """The value a machineDeployment gets for variable ``name`` (its override, else the Cluster's)."""
    if name is None:
        return None
    value = overrides[name] if name in overrides else top_vars.get(name)
    if prop is not None:
        value = value.get(prop) if isinstance(value, dict) else None
    return value


def read_pool(md, top_vars, plan):
    """A machineDeployment as node pool options - {"replicas", "vm_class", "labels", "taints",
    "class", "lacks"} - read through the places ``plan`` names: the inverse of apply_pool.

    ``top_vars``: the Cluster's variables {name: value}. A field the class has no single place for
    is None and listed in ``lacks`` with the reason (lacks() of the plan)."""
    overrides = dict((v.get("name"), v.get("value")) for v in ((md.get("variables") or {}).get("overrides") or []))
    labels = taints = None
    where = plan.get("labels")
    if where:
        value = _override(overrides, top_vars, where["variable"], where["property"])
        if isinstance(value, list):
            value = dict((i.get("key"), i.get("value")) for i in value if isinstance(i, dict))
        labels = dict((k, str(v)) for k, v in (value or {}).items())
    where = plan.get("taints")
    if where:
        value = _override(overrides, top_vars, where["variable"], where["property"]) or []
        taints = _taints_value([t for t in value if isinstance(t, dict)])
    return {"replicas": md.get("replicas"), "vm_class": _override(overrides, top_vars, plan.get("vm_class"), None),
            "labels": labels, "taints": taints, "class": plan.get("class"),
            "lacks": dict((f, lacks(plan, f)) for f in FIELDS if lacks(plan, f))}


__all__ = ["PlanError", "TAINT_EFFECTS", "apply_pool", "check_pool", "class_name", "class_ref", "class_variables",
           "lacks", "place", "plan_machine_deployments", "public_plan", "read_pool", "top_variables", "variable_plan"]
