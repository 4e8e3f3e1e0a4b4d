# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere Namespaces (the tenancy boundary): validation, normal form, merge, plan (pure).

A namespace is compared in one normal form::

    {"cluster": "domain-c9", "description": "...",
     "vm_classes": ["gpu-small"], "content_libraries": ["<library id>"],
     "storage_policies": {"<policy id>": 102400 or None},
     "limits": {"cpu_mhz": None, "memory_mib": 65536, "storage_mib": None},
     "access": [{"type": "USER", "domain": "vsphere.local", "subject": "alice", "role": "EDIT"}]}

The API replaces list fields on update (``vm_service_spec``, ``storage_specs``), so an
update sends the merged lists. Lists given by the user are added to what exists (a
storage policy's limit is updated); with ``purge_lists`` they are exact. Access entries
are added or have their role changed; others are removed only with ``purge_access``.
Access changes go through the per-entry access endpoints.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ROLES = ("OWNER", "EDIT", "VIEW")
SUBJECT_TYPES = ("USER", "GROUP")
LIMITS = (("cpu_mhz", "cpu_limit"), ("memory_mib", "memory_limit"), ("storage_mib", "storage_request_limit"))
LIMIT_KEYS = tuple(k for k, api in LIMITS)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


# the fields of the normal form that a plan compares (differs); the Supervisor a namespace is on cannot change
FIELDS = ("description", "vm_classes", "content_libraries", "storage_policies", "limits", "access")


class NamespaceError(ValueError):
    """Bad input for a namespace; nothing was changed."""


def check_name(name):
    if not isinstance(name, str) or not DNS_LABEL.match(name):
        raise NamespaceError("namespace name %r is not a DNS label (lower-case letters, digits and '-', at most "
                             "63, starting and ending with a letter or digit)" % (name,))
    return name


def access_key(entry):
    return (entry["type"], entry["domain"].lower(), entry["subject"].lower())


def check_access(entries):
    """Access entries with type defaulting to USER; role and type checked; no duplicates."""
    if entries is None:
        return None
    out = []
    seen = set()
    for e in entries:
        subject, domain = e.get("subject"), e.get("domain")
        if not subject or not domain:
            raise NamespaceError("access entry %r needs subject and domain" % (e,))
        kind = (e.get("type") or "USER").upper()
        role = (e.get("role") or "").upper()
        if kind not in SUBJECT_TYPES:
            raise NamespaceError("access entry %s@%s: type %r is not USER or GROUP" % (subject, domain, e.get("type")))
        if role not in ROLES:
            raise NamespaceError("access entry %s@%s: role %r is not one of OWNER, EDIT, VIEW"
                                 % (subject, domain, e.get("role")))
        entry = dict(type=kind, domain=domain, subject=subject, role=role)
        if access_key(entry) in seen:
            raise NamespaceError("access entry %s %s@%s given twice" % (kind, subject, domain))
        seen.add(access_key(entry))
        out.append(entry)
    return out


def check_limits(limits):
    if limits is None:
        return None
    out = {}
    for key in LIMIT_KEYS:
        value = limits.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise NamespaceError("limits.%s must be a non-negative number, not %r" % (key, value))
        out[key] = value
    unknown = set(limits) - set(LIMIT_KEYS)
    if unknown:
        raise NamespaceError("unknown limits %s; known: cpu_mhz, memory_mib, storage_mib" % ", ".join(sorted(unknown)))
    return out


def resolve(values, known, what, where):
    """Names or ids to ids. ``known`` maps id -> name. Unknown ones fail, listing what exists."""
    if values is None:
        return None
    by_name = {}
    for ident, name in known.items():
        by_name.setdefault(name, []).append(ident)
    out = []
    missing = []
    for v in values:
        if v in known:
            out.append(v)
        elif len(by_name.get(v, [])) == 1:
            out.append(by_name[v][0])
        elif by_name.get(v):
            raise NamespaceError("%s name %s is not unique; give its id (%s)" % (what, v, ", ".join(sorted(by_name[v]))))
        else:
            missing.append(v)
    if missing:
        names = ", ".join(sorted(set(known.values()))) or "none"
        raise NamespaceError("unknown %s %s; %s: %s" % (what, ", ".join(missing), where, names))
    return out


def normalize(info):
    """The API's namespace Info in normal form; None for None."""
    if info is None:
        return None
    vm_service = info.get("vm_service_spec") or {}
    resource = info.get("resource_spec") or {}
    access = []
    for a in info.get("access_list") or []:
        access.append(dict(type=a.get("subject_type"), domain=a.get("domain"), subject=a.get("subject"),
                           role=a.get("role")))
    return dict(
        cluster=info.get("cluster") or info.get("supervisor"),
        description=info.get("description") or "",
        vm_classes=sorted(vm_service.get("vm_classes") or []),
        content_libraries=sorted(vm_service.get("content_libraries") or []),
        storage_policies=dict((s.get("policy"), s.get("limit")) for s in info.get("storage_specs") or []),
        limits=dict((k, resource.get(api)) for k, api in LIMITS),
        access=sorted(access, key=access_key),
    )


def empty(cluster):
    return dict(cluster=cluster, description="", vm_classes=[], content_libraries=[], storage_policies={},
                limits=dict((k, None) for k in LIMIT_KEYS), access=[])


def merge(current, want, purge_lists=False, purge_access=False, purge_vm_classes=None):
    """The namespace after this run. ``want`` holds resolved ids; None means leave alone.

    ``purge_vm_classes``: VM class ids removed from the namespace unless ``want`` lists them,
    without ``purge_lists`` (for example the classes with a vGPU, so a namespace offers only
    the GPU classes of the design and keeps its other classes).
    """
    after = dict(current)
    if want.get("description") is not None:
        after["description"] = want["description"]
    for key in ("vm_classes", "content_libraries"):
        if want.get(key) is not None:
            base = [] if purge_lists else list(current[key])
            if key == "vm_classes" and purge_vm_classes:
                base = [c for c in base if c not in set(purge_vm_classes)]
            after[key] = sorted(set(base) | set(want[key]))
    if want.get("storage_policies") is not None:
        merged = {} if purge_lists else dict(current["storage_policies"])
        for s in want["storage_policies"]:
            merged[s["policy"]] = s.get("limit_mib")
        after["storage_policies"] = merged
    if want.get("limits") is not None:
        limits = dict(current["limits"])
        for k, v in want["limits"].items():
            if v is not None:
                limits[k] = v
        after["limits"] = limits
    if want.get("access") is not None or purge_access:
        by_key = {} if purge_access else dict((access_key(a), a) for a in current["access"])
        for a in want.get("access") or []:
            by_key[access_key(a)] = a
        after["access"] = sorted(by_key.values(), key=access_key)
    return after


def wanted(options, policies=None, libraries=None):
    """supervisor_namespace's options (name aside) as ``merge`` takes them: checked, storage
    policies and content libraries resolved to ids (``policies`` / ``libraries``: {id: name}).
    A list whose names cannot be resolved without its map (None) is left alone."""
    want = dict(description=options.get("description"), vm_classes=options.get("vm_classes"),
                limits=check_limits(options.get("limits")), access=check_access(options.get("access")))
    storage = options.get("storage_policies")
    if storage is not None and policies is not None:
        ids = resolve([s["policy"] for s in storage], policies, "storage policy", "storage policies")
        want["storage_policies"] = [dict(policy=i, limit_mib=s.get("limit_mib")) for i, s in zip(ids, storage)]
    if options.get("content_libraries") is not None and libraries is not None:
        want["content_libraries"] = resolve(options["content_libraries"], libraries, "content library",
                                            "content libraries")
    return want


def differs(current, after):
    if current is None:
        return sorted(k for k in after if k != "cluster")
    return sorted(k for k in after if k != "cluster" and after[k] != current[k])


def storage_specs(policies):
    out = []
    for policy, limit in sorted(policies.items()):
        spec = dict(policy=policy)
        if limit is not None:
            spec["limit"] = limit
        out.append(spec)
    return out


def resource_spec(limits):
    return dict((api, limits[k]) for k, api in LIMITS if limits.get(k) is not None)


def vm_service_spec(ns):
    return dict(vm_classes=list(ns["vm_classes"]), content_libraries=list(ns["content_libraries"]))


def access_list(entries):
    return [dict(subject_type=a["type"], domain=a["domain"], subject=a["subject"], role=a["role"]) for a in entries]


def create_body(name, after, cluster_field="cluster"):
    body = {cluster_field: after["cluster"], "namespace": name, "description": after["description"],
            "vm_service_spec": vm_service_spec(after), "storage_specs": storage_specs(after["storage_policies"]),
            "access_list": access_list(after["access"])}
    resource = resource_spec(after["limits"])
    if resource:
        body["resource_spec"] = resource
    return body


def update_body(current, after):
    """UpdateSpec (PATCH) of the fields that change, lists sent whole; None when nothing to patch."""
    body = {}
    if after["description"] != current["description"]:
        body["description"] = after["description"]
    if after["vm_classes"] != current["vm_classes"] or after["content_libraries"] != current["content_libraries"]:
        body["vm_service_spec"] = vm_service_spec(after)
    if after["storage_policies"] != current["storage_policies"]:
        body["storage_specs"] = storage_specs(after["storage_policies"])
    if after["limits"] != current["limits"]:
        body["resource_spec"] = resource_spec(after["limits"])
    return body or None


def access_changes(current, after):
    """[(method, entry)]: POST new entries, PUT a changed role, DELETE removed ones."""
    have = dict((access_key(a), a) for a in current["access"])
    want = dict((access_key(a), a) for a in after["access"])
    out = []
    for key in sorted(want):
        if key not in have:
            out.append(("POST", want[key]))
        elif have[key]["role"] != want[key]["role"]:
            out.append(("PUT", want[key]))
    for key in sorted(have):
        if key not in want:
            out.append(("DELETE", have[key]))
    return out


__all__ = ["FIELDS", "NamespaceError", "ROLES", "access_changes", "check_access", "check_limits", "check_name",
           "create_body", "differs", "empty", "merge", "normalize", "resolve", "update_body", "wanted"]
