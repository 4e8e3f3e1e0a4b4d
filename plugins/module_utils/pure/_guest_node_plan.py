# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The labels and taints of each pool's nodes, planned (pure: no I/O): what the gpu_scheduling_policy role keeps
on the Node objects of a cluster whose nodes are not VKS node pools, what guest_objects converges and what the
audit's node rules report.

Wanted: per pool ``{"pool", "labels": {key: value}, "taints": [{"key", "value", "effect"}]}`` (the role's
``gpu_scheduling_policy_node_pools``). Live: the Node objects in the API's own form (camelCase, as
``sanitize_for_serialization`` gives them), those whose pool label (``gpu_scheduling_policy_pool_label``) names a
pool. A node's plan is one ``update`` per label to set or correct (``metadata.labels.<key>``) and per taint to add
or correct (``spec.taints.<key>:<effect>``: a taint is known by its key and effect; its value is compared where the
wanted taint gives one). Labels and taints of others are left alone. Nodes are never created, adopted, labelled as
the collection's or deleted: a pool without nodes plans nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import UPDATE, Change

POOL_LABEL = "gpupool.vcf/pool"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
LABEL_FIELD = "metadata.labels."
TAINT_FIELD = "spec.taints."
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY = re.compile(r"^(%s/)?%s$" % (_PREFIX, _NAME))
_VALUE = re.compile(r"^(%s)?$" % _NAME)


def _key_error(what, key):
    if not isinstance(key, str) or not _KEY.match(key) or ("/" in key and len(key.split("/")[0]) > 253):
        return "%s %r is not a Kubernetes label key ([prefix/]name, the name 63 characters at most of letters, " \
               "digits, '-', '_' and '.')" % (what, key)
    return None


def _value_error(what, value):
    if not isinstance(value, str) or not _VALUE.match(value):
        return "%s %r is not a Kubernetes label value (text, 63 characters at most of letters, digits, '-', '_' " \
               "and '.', beginning and ending with a letter or digit)" % (what, value)
    return None


def pools_errors(pools, pool_label=POOL_LABEL):
    """The errors of the wanted pools (a list of sentences; [] when they are good)."""
    errors = [e for e in (_key_error("pool_label", pool_label),) if e]
    if not isinstance(pools, list):
        return errors + ["node_pools must be a list of pools, not %r" % (pools,)]
    seen = set()
    for index, pool in enumerate(pools):
        where = "node_pools[%d]" % index
        if not isinstance(pool, dict) or not pool.get("pool"):
            errors.append("%s must be a mapping with a pool (the value of the pool label), not %r" % (where, pool))
            continue
        errors += [e for e in (_value_error("%s.pool" % where, pool["pool"]),) if e]
        if pool["pool"] in seen:
            errors.append("%s: pool %s is given twice (each pool once)" % (where, pool["pool"]))
        seen.add(pool["pool"])
        unknown = sorted(str(k) for k in pool if k not in ("pool", "labels", "taints"))
        if unknown:
            errors.append("%s takes pool, labels and taints, not %s" % (where, ", ".join(unknown)))
        labels = pool.get("labels") or {}
        if not isinstance(labels, dict):
            errors.append("%s.labels must be a mapping of label keys to values, not %r" % (where, labels))
            labels = {}
        for key, value in sorted(labels.items(), key=lambda kv: str(kv[0])):
            errors += [e for e in (_key_error("%s.labels key" % where, key),
                                   _value_error("%s.labels[%s]" % (where, key), value)) if e]
        if labels.get(pool_label, pool["pool"]) != pool["pool"]:
            errors.append("%s.labels sets %s=%s, which would take the nodes out of pool %s" % (
                where, pool_label, labels[pool_label], pool["pool"]))
        taints = pool.get("taints") or []
        if not isinstance(taints, list):
            errors.append("%s.taints must be a list of taints, not %r" % (where, taints))
            taints = []
        known = set()
        for number, taint in enumerate(taints):
            at = "%s.taints[%d]" % (where, number)
            if not isinstance(taint, dict) or "key" not in taint:
                errors.append("%s must be a mapping with a key and an effect, not %r" % (at, taint))
                continue
            unknown = sorted(str(k) for k in taint if k not in ("key", "value", "effect"))
            if unknown:
                errors.append("%s takes key, value and effect, not %s" % (at, ", ".join(unknown)))
            errors += [e for e in (_key_error("%s.key" % at, taint["key"]),) if e]
            if taint.get("value") is not None:
                errors += [e for e in (_value_error("%s.value" % at, taint["value"]),) if e]
            if taint.get("effect") not in TAINT_EFFECTS:
                errors.append("%s.effect must be one of %s, not %r" % (at, ", ".join(TAINT_EFFECTS), taint.get("effect")))
            elif (taint["key"], taint["effect"]) in known:
                errors.append("%s: taint %s:%s is given twice (a taint is known by its key and effect)" % (
                    at, taint["key"], taint["effect"]))
            known.add((taint.get("key"), taint.get("effect")))
    return errors


def check_pools(pools, pool_label=POOL_LABEL):
    """ValueError with every error of the wanted pools (before anything is read or written)."""
    errors = pools_errors(pools, pool_label)
    if errors:
        raise ValueError("; ".join(errors))


def taint(given):
    """A taint as the API writes it: key, value (only where given), effect."""
    out = {"key": given["key"]}
    if given.get("value") is not None:
        out["value"] = str(given["value"])
    out["effect"] = given["effect"]
    return out


def taint_id(given):
    """``<key>:<effect>``: what a taint is known by."""
    return "%s:%s" % (given.get("key"), given.get("effect"))


def taint_text(given):
    """A taint as ``key=value:effect`` (``key:effect`` without a value)."""
    if given.get("value") in (None, ""):
        return taint_id(given)
    return "%s=%s:%s" % (given["key"], given["value"], given["effect"])


def node_name(node):
    """``node <name>``, the name plans and findings carry."""
    return "node %s" % node["metadata"]["name"]


def api_node(record):
    """A node record ``{name, labels, taints, capacity}`` (the audit's reader) in the API's form."""
    return {"kind": "Node", "metadata": {"name": record["name"], "labels": dict(record.get("labels") or {})},
            "spec": {"taints": [taint(t) for t in record.get("taints") or []]}}


def _live_taints(node):
    return list((node.get("spec") or {}).get("taints") or [])


def plan_node(live, labels=None, taints=(), **details):
    """The changes of one live node (API form) to carry `labels` and `taints` (``details``, such as ``pool``, go
    with each change). A label differs when its text does; a taint is missing when no live taint has its key and
    effect, and differs when the wanted taint gives a value the live one does not have."""
    obj = node_name(live)
    have = (live.get("metadata") or {}).get("labels") or {}
    out = [Change(obj, LABEL_FIELD + key, have.get(key), value, UPDATE, **details)
           for key, value in sorted((labels or {}).items()) if have.get(key) != value]
    present = _live_taints(live)
    for given in taints:
        want = taint(given)
        same = [t for t in present if taint_id(t) == taint_id(want)]
        if not same:
            out.append(Change(obj, TAINT_FIELD + taint_id(want), None, want, UPDATE, **details))
        elif "value" in want and not any((t.get("value") or "") == want["value"] for t in same):
            out.append(Change(obj, TAINT_FIELD + taint_id(want), taint(same[0]), want, UPDATE, **details))
    return out


def pool_nodes(live_nodes, pool, pool_label=POOL_LABEL):
    """The live nodes of `pool` (by the pool label), by name."""
    return sorted((n for n in live_nodes if ((n.get("metadata") or {}).get("labels") or {}).get(pool_label) == pool),
                  key=lambda n: n["metadata"]["name"])


def plan_pools(live_nodes, pools, pool_label=POOL_LABEL):
    """The changes of every node of every pool of `pools` (each change with its ``pool``), node by node in the
    order of the pools, then of the nodes' names. A node is planned once, by the pool its label names."""
    out = []
    for pool in pools:
        for node in pool_nodes(live_nodes, pool["pool"], pool_label):
            out += plan_node(node, pool.get("labels") or {}, pool.get("taints") or [], pool=pool["pool"])
    return out


def selector(pools, pool_label=POOL_LABEL):
    """The label selector of the nodes of `pools`, for one list of the nodes (None: no pool)."""
    names = sorted(set(str(p["pool"]) for p in pools))
    if not names:
        return None
    return "%s in (%s)" % (pool_label, ",".join(names))


def patch_body(live, changes):
    """The patch of one node's changes: the labels set (others stay, a merge of ``metadata.labels``) and, where a
    taint changes, the whole taint list - the live taints kept in their order, a corrected one in its place, an
    added one at the end - since a patch of ``spec.taints`` replaces the list."""
    body = {}
    labels = dict((c.field[len(LABEL_FIELD):], c.after) for c in changes if c.field.startswith(LABEL_FIELD))
    if labels:
        body["metadata"] = {"labels": labels}
    corrected = [c.after for c in changes if c.field.startswith(TAINT_FIELD)]
    if corrected:
        taints = [dict(t) for t in _live_taints(live)]
        for want in corrected:
            at = [i for i, t in enumerate(taints) if taint_id(t) == taint_id(want)]
            if at:
                taints[at[0]] = dict(want)
            else:
                taints.append(dict(want))
        body["spec"] = {"taints": taints}
    return body


def patched(live, changes):
    """The node as `changes` leave it (what check mode and --diff show as after)."""
    body = patch_body(live, changes)
    meta = dict(live.get("metadata") or {})
    meta["labels"] = dict(meta.get("labels") or {}, **(body.get("metadata") or {}).get("labels", {}))
    spec = dict(live.get("spec") or {})
    if "spec" in body:
        spec["taints"] = body["spec"]["taints"]
    return dict(live, metadata=meta, spec=spec)


def diff_of(live, changes):
    """(before, after) of one node for --diff: its labels and taints as they are and as they will be."""
    after = patched(live, changes)
    return ({"labels": dict((live.get("metadata") or {}).get("labels") or {}), "taints": _live_taints(live)},
            {"labels": after["metadata"]["labels"], "taints": _live_taints(after)})


def live_nodes(live):
    """The Node objects of a read (``{(kind, namespace, name): object}``), by name."""
    return [obj for key, obj in sorted(live.items()) if key[0] == "Node"]


def _by_node(nodes, changes):
    """[(live node, its changes)] of the nodes `changes` touch, in the order of the changes."""
    named = dict((node_name(n), n) for n in nodes)
    out = []
    for change in changes:
        if change.object in named and change.object not in [node_name(n) for n, _c in out]:
            out.append((named[change.object], [c for c in changes if c.object == change.object]))
    return out


def diffs(nodes, changes):
    """({object: before}, {object: after}) of the nodes `changes` touch (their labels and taints), for --diff."""
    before, after = {}, {}
    for live, mine in _by_node(nodes, changes):
        before[node_name(live)], after[node_name(live)] = diff_of(live, mine)
    return before, after


def patches(nodes, changes):
    """[(object, node name, resourceVersion planned from, patch body)] of the nodes `changes` touch, in order."""
    return [(node_name(live), live["metadata"]["name"], live["metadata"].get("resourceVersion"), patch_body(live, mine))
            for live, mine in _by_node(nodes, changes)]


__all__ = ["POOL_LABEL", "TAINT_EFFECTS", "api_node", "check_pools", "diff_of", "diffs", "live_nodes", "node_name",
           "patch_body", "patched", "patches", "plan_node", "plan_pools", "pool_nodes", "pools_errors", "selector", "taint",
           "taint_id", "taint_text"]
