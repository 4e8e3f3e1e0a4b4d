# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vsphere link of the drift audit: VM classes and Supervisor namespaces, judged against the derived design (pure).

Live state, as the module reads it: ``vm_classes``: ``{id: normal form of _vm_class.normalize}``; ``namespaces``: ``{name:
normal form of _namespace.normalize}`` (a name absent from the dict does not exist).

:data:`RULES` is this link's rule table (severity, link, one line, fix); ``_audit_report`` assembles
every link's table into one. A finding takes its rule's fix (``object_not_owned``'s with the design key that adopts
in its format field), except where the table's does not repair it: a VM class or namespace the design cannot plan
and a VM class whose revision is due name their own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _namespace, _ownership, _vm_class
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _vm_reservations as _vr
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE


_CLASS_FIX = "set it back (vm_class, or the supervisor_gpu_tenancy role)"
_NAMESPACE_FIX = "set it back (supervisor_namespace, or the supervisor_gpu_tenancy role)"
_BINDING_FIX = "set it back (supervisor_zone_binding, or the supervisor_gpu_tenancy role)"
RULES = OrderedDict([
    ("vm_class_missing", ("error", "vsphere", "Every pool's VM class exists.",
                          "create it (vm_class, or the supervisor_gpu_tenancy role)")),
    ("vm_class_profile_changed", ("error", "vsphere", "A VM class carries the vGPU profiles of its pool.",
                                  "set its profiles back (vm_class, or the supervisor_gpu_tenancy role); node VMs "
                                  "created since run the wrong profile and must be recreated")),
    ("vm_class_size_changed", ("warning", "vsphere", "A VM class has the design's vCPUs, memory and 100% memory "
                                                     "reservation.",
                               "set the VM class back to the design (vm_class, or the supervisor_gpu_tenancy role)")),
    ("vm_class_description_changed", ("warning", "vsphere", "A VM class has the design's description.", _CLASS_FIX)),
    ("vm_class_profiling_missing", ("warning", "vsphere", "A VM class sets pciPassthru<n>.cfg.enable_profiling on "
                                                          "each vGPU where its pool's design turns profiling on (and "
                                                          "not where it turns it off).",
                                    "set it back (vm_class profiling, or the supervisor_gpu_tenancy role); node VMs "
                                    "powered on before read no profiling counters until recreated")),
    ("namespace_missing", ("error", "vsphere", "Every platform and tenant namespace exists.",
                           "create it (supervisor_namespace, or the supervisor_gpu_tenancy role)")),
    ("namespace_class_missing", ("error", "vsphere", "A namespace offers every VM class of its pools.",
                                 "add them to the namespace (supervisor_namespace vm_classes, or the "
                                 "supervisor_gpu_tenancy role)")),
    ("namespace_class_extra", ("error", "vsphere", "A namespace offers no GPU VM class the design does not give "
                                                   "it (where the role purges them).",
                               "remove them from the namespace (the supervisor_gpu_tenancy role)")),
    ("namespace_storage_changed", ("error", "vsphere", "A namespace has the design's storage policies and their "
                                                       "limits.", _NAMESPACE_FIX)),
    ("namespace_limits_changed", ("warning", "vsphere", "A namespace has the design's CPU, memory and storage "
                                                        "limits.", _NAMESPACE_FIX)),
    ("namespace_access_changed", ("error", "vsphere", "A namespace grants the design's access entries (and only "
                                                      "them where the role purges access).", _NAMESPACE_FIX)),
    ("namespace_description_changed", ("warning", "vsphere", "A namespace has the design's description.",
                                       _NAMESPACE_FIX)),
    ("namespace_libraries_changed", ("warning", "vsphere", "A namespace has the content libraries the role "
                                                           "gives it.", _NAMESPACE_FIX)),
    ("zone_binding_missing", ("error", "vsphere", "The Supervisor binds every vSphere zone in which the design's "
                                                  "tenants reserve VM classes.", _BINDING_FIX)),
    ("zone_binding_reservations_changed", ("error", "vsphere", "A Supervisor zone binding reserves the design's "
                                                               "count of each pool's VM class (reservations of "
                                                               "other classes are not judged).", _BINDING_FIX)),
    # information: the object serves the design, but no purge, retirement or revision of the collection touches it
    ("object_not_owned", ("info", "vsphere", "A VM class or namespace in scope is the collection's own (its "
                                             "description carries the gpupool mark); so are a VKS node pool and a "
                                             "GPU VM's DRS override as designed (their record names them: vks and "
                                             "esxi links).",
                          "run site.yml: the design sets adopt: true ({key}), which records it as the collection's")),
])


def finding(rule, obj, message, fix=None, severity=None, **fields):
    """A finding of a rule of this link's table: ``fix`` None takes the table's, with ``fields`` in its format fields
    (the design key that adopts)."""
    if fix is None:
        fix = RULES[rule][3].format(**fields)
    return _audit.finding(rule, obj, message, fix, RULES[rule], severity=severity)


# Each field the vm_class and supervisor_namespace modules compare, and the rule that reports it:
# the audit plans each object with the modules' comparators (_vm_class / _namespace merge and differs)
# and the supervisor_gpu_tenancy role's inputs.
VM_CLASS_RULE_BY_FIELD = OrderedDict([
    ("cpu_count", "vm_class_size_changed"),
    ("memory_mb", "vm_class_size_changed"),
    ("cpu_reservation", "vm_class_size_changed"),
    ("memory_reservation", "vm_class_size_changed"),
    ("description", "vm_class_description_changed"),
    ("vgpu_profiles", "vm_class_profile_changed"),
    ("profiling", "vm_class_profiling_missing"),
])
NAMESPACE_RULE_BY_FIELD = OrderedDict([
    ("description", "namespace_description_changed"),
    ("vm_classes", "namespace_class_missing"),  # namespace_class_extra for the classes the plan removes
    ("content_libraries", "namespace_libraries_changed"),
    ("storage_policies", "namespace_storage_changed"),
    ("limits", "namespace_limits_changed"),
    ("access", "namespace_access_changed"),
])
_VM_CLASS_LABELS = dict(cpu_count="vCPUs", memory_mb="memory MB", cpu_reservation="CPU reservation %",
                        memory_reservation="memory reservation %")
# the role's options that are no fields of the object
_VM_CLASS_OPTIONS = ("name", "cluster", "api_form", "state")
_NAMESPACE_PURGES = ("purge_lists", "purge_access", "purge_gpu_vm_classes")


def _desired_class(want):
    """One class entry of the supervisor_gpu_tenancy role's inputs as vm_class takes it (_vm_class.desired)."""
    params = dict((k, v) for k, v in want.items() if k in _vm_class.FIELDS)
    params["name"] = want["name"]
    return _vm_class.desired(params)


def _owned_description(want, have):
    """The description the module writes (None: left alone): a foreign object keeps its own unless adopted."""
    return _ownership.description_after((have or {}).get("description"), want.get("description"), have is not None,
                                        bool(want.get("adopt")))


def vm_class_plan(want, have):
    """(after, changed fields) of one VM class of derive()'s ``vsphere.vm_classes``, as
    vm_class plans it with the options supervisor_gpu_tenancy passes (None: missing)."""
    desired = _desired_class(want)
    desired["description"] = _owned_description(want, have)
    after = _vm_class.merge(have, desired)
    return after, _vm_class.differs(have, after)


def namespace_plan(want, have, storage_policies=None, gpu_classes=()):
    """(after, changed fields) of one namespace of derive()'s ``vsphere.namespaces``, as
    supervisor_namespace plans it with the options supervisor_gpu_tenancy passes (purge options
    included). ``storage_policies``: {id: name} (None: storage policies not judged);
    ``gpu_classes``: ids of the VM classes with a vGPU (purged with ``purge_gpu_vm_classes``)."""
    options = dict((k, v) for k, v in want.items() if k not in _NAMESPACE_PURGES)
    options["description"] = _owned_description(want, have)
    after = _namespace.merge(have, _namespace.wanted(options, storage_policies), purge_lists=bool(want.get("purge_lists")),
                             purge_access=bool(want.get("purge_access")),
                             purge_vm_classes=gpu_classes if want.get("purge_gpu_vm_classes") else None)
    return after, _namespace.differs(have, after)


def _words(value):
    if isinstance(value, (list, tuple)):
        return "[%s]" % ", ".join(_words(v) for v in value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _words(v)) for k, v in sorted(value.items()))
    return "none" if value is None else str(value)


def _access_words(entries):
    return ", ".join("%s %s@%s %s" % (a["type"], a["subject"], a["domain"], a["role"]) for a in entries) or "none"


def _vm_class_findings(want, have, name, pool=None):
    obj = "vm_class %s" % name
    try:
        after, fields = vm_class_plan(want, have)
    except _vm_class.VmClassError as exc:
        return [finding("vm_class_profile_changed", obj, "VM class %s cannot be planned: %s" % (name, exc),
                        "fix the pool's VM class in the design")]
    out = []
    if "vgpu_profiles" in fields:
        out.append(finding(
            "vm_class_profile_changed", obj,
            "VM class %s has vGPU profiles [%s], pool %s needs [%s]" % (
                name, ", ".join(sorted(have.get("vgpu_profiles") or [])), pool,
                ", ".join(after["vgpu_profiles"]))))
    size = ["%s %s (design %s)" % (_VM_CLASS_LABELS[k], have.get(k), after[k]) for k in fields if k in _VM_CLASS_LABELS]
    if size:
        out.append(finding("vm_class_size_changed", obj, "VM class %s: %s" % (name, ", ".join(size))))
    if "description" in fields:
        out.append(finding("vm_class_description_changed", obj, "VM class %s is described %r, the design says %r" % (
            name, have.get("description"), after["description"])))
    if "profiling" in fields:
        out.append(finding("vm_class_profiling_missing", obj, "VM class %s has profiling %s (pciPassthru<n>.cfg."
                           "enable_profiling), the design says %s" % (
                               name, "on" if have.get("profiling") else "off", "on" if after["profiling"] else "off")))
    return out


def _namespace_findings(want, have, storage_policies, gpu_classes):
    name = want["name"]
    obj = "namespace %s" % name
    try:
        after, fields = namespace_plan(want, have, storage_policies, gpu_classes)
    except _namespace.NamespaceError as exc:
        return [finding("namespace_storage_changed" if "storage policy" in str(exc) else "namespace_access_changed",
                        obj, "namespace %s cannot be planned: %s" % (name, exc),
                        "fix the namespace in the design or create what it names in vCenter")]
    names = storage_policies or {}
    out = []
    for field in fields:
        live, wanted = have.get(field), after[field]
        if field == "vm_classes":
            missing = [c for c in wanted if c not in live]
            extra = [c for c in live if c not in wanted]
            if missing:
                out.append(finding("namespace_class_missing", obj, "namespace %s does not offer VM class(es) %s" % (
                    name, ", ".join(missing))))
            if extra:
                out.append(finding("namespace_class_extra", obj, "namespace %s offers GPU VM class(es) %s that the "
                                   "design does not give it" % (name, ", ".join(extra))))
        elif field == "storage_policies":
            out.append(finding("namespace_storage_changed", obj, "namespace %s has storage policies %s, the design "
                               "says %s (limit MiB)" % (name, _words(dict((names.get(k, k), v) for k, v in live.items())),
                                                        _words(dict((names.get(k, k), v) for k, v in wanted.items())))))
        elif field == "access":
            out.append(finding("namespace_access_changed", obj, "namespace %s grants %s; after the role: %s" % (
                name, _access_words(live), _access_words(wanted))))
        else:
            out.append(finding(NAMESPACE_RULE_BY_FIELD[field], obj, "namespace %s %s is %s, the design says %s" % (
                name, field.replace("_", " "), _words(live), _words(wanted))))
    return out


def class_names(tenancy, vm_classes):
    """({design name: the class it is used under}, {design name: [superseded classes]}) of the
    supervisor_gpu_tenancy role's inputs ``tenancy`` against the live classes ``vm_classes`` ({id:
    normal form}). Without class revisions every class is used under its design name; with them the
    name is resolved as vm_class resolves it (the base name or ``<base>-r<hex>`` of the design's
    shape, _vm_class.resolve) and the other classes of the family are superseded."""
    names, superseded = {}, {}
    revisions = bool(tenancy.get("supervisor_gpu_tenancy_class_revisions"))
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        if not revisions:
            names[base], superseded[base] = base, []
            continue
        try:
            names[base], superseded[base] = _vm_class.resolve(base, _desired_class(want), vm_classes or {})
        except _vm_class.VmClassError:  # reported by the class's own findings
            names[base], superseded[base] = base, []
    return names, superseded


def designed_class_names(tenancy):
    """{design name: the names a node pool may use for it} when the live classes are not read: with
    class revisions the base name and the revision of the design's shape, else the design name."""
    out = {}
    revisions = bool(tenancy.get("supervisor_gpu_tenancy_class_revisions"))
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        try:
            out[base] = [base, _vm_class.revision_name(base, _desired_class(want))] if revisions else [base]
        except _vm_class.VmClassError:
            out[base] = [base]
    return out


def _superseded_finding(want, name, old, vm_classes, pool):
    """The pool's class family has no class of the design's shape: the rollout to ``name`` is due."""
    have = vm_classes[old[0]]
    cpu, memory, profiles = _vm_class.shape(have)
    rule = "vm_class_profile_changed" if profiles != _vm_class.shape(want)[2] else "vm_class_size_changed"
    return finding(rule, "vm_class %s" % want["name"],
                   "VM class %s of pool %s has %s vCPUs, %s MB, vGPU [%s]; the design's shape is the class %s, "
                   "which does not exist yet (supervisor.vm_class_revisions)" % (
                       ", ".join(old), pool, cpu, memory, ", ".join(profiles), name),
                   "run site.yml: it creates %s, the namespaces get it, the node pools roll to it, and %s is "
                   "deleted once no node uses it" % (name, ", ".join(old)))


def audit_vsphere(derived, vm_classes, namespaces, storage_policies=None, zone_bindings=None):
    """Findings of the vSphere link: VM classes, namespaces and the Supervisor's zone bindings, each
    planned by its module's comparator with the supervisor_gpu_tenancy role's inputs.

    ``storage_policies``: {policy id: name} (None: the namespaces' storage policies are not judged).
    ``zone_bindings``: {Supervisor cluster: its Bindings.Info rows} (None or a cluster left out: not
    read, as before API 9.0, and not judged). With class revisions each class is judged under the
    name vm_class resolves (class_names).
    """
    out = []
    tenancy = _audit.role_inputs(derived, "supervisor_gpu_tenancy")
    # the vSphere link's summary names each object's pool and kind, for the messages
    vs = derived.get("vsphere") or {}
    pool_of = dict((c["name"], c.get("pool")) for c in vs.get("vm_classes") or [])
    kind_of = dict((n["name"], n.get("kind")) for n in vs.get("namespaces") or [])
    vm_classes = vm_classes or {}
    namespaces = namespaces or {}
    names, superseded = class_names(tenancy, vm_classes)
    for want in tenancy.get("supervisor_gpu_tenancy_vm_classes") or []:
        base = want["name"]
        name = names.get(base, base)
        have = vm_classes.get(name)
        old = [n for n in superseded.get(base) or [] if n in vm_classes]
        if have is None and old:
            out.append(_superseded_finding(want, name, old, vm_classes, pool_of.get(base)))
            continue
        if have is None:
            out.append(finding("vm_class_missing", "vm_class %s" % name,
                               "VM class %s of pool %s does not exist" % (name, pool_of.get(base))))
            continue
        out.extend(_vm_class_findings(dict(want, name=name), have, name, pool_of.get(base)))
        out.extend(not_owned_findings("vm_class", name, have, "pools[].adopt", want.get("adopt")))
    # a superseded class stays in the namespaces while nodes use it: not a class the design lacks
    kept = set(n for olds in superseded.values() for n in olds)
    gpu_classes = [c for c in _vm_class.with_vgpu(vm_classes) if c not in kept]
    for want in tenancy.get("supervisor_gpu_tenancy_namespaces") or []:
        have = namespaces.get(want["name"])
        if have is None:
            out.append(finding("namespace_missing", "namespace %s" % want["name"],
                               "%s namespace %s does not exist" % (kind_of.get(want["name"]) or "", want["name"])))
            continue
        if want.get("vm_classes") is not None:
            want = dict(want, vm_classes=[names.get(c, c) for c in want["vm_classes"]])
        out.extend(_namespace_findings(want, have, storage_policies, gpu_classes))
        out.extend(not_owned_findings("namespace", want["name"], have,
                                      "tenants[].adopt" if kind_of.get(want["name"]) == "tenant" else "vks_clusters[].adopt",
                                      want.get("adopt")))
    out.extend(zone_binding_findings(tenancy, names, zone_bindings))
    return out


def binding_key(tenancy, binding):
    """What a zone binding input of the role names its Supervisor by: its id, else its cluster (the role's
    cluster when the input names none), as the role passes them to supervisor_zone_binding."""
    return binding.get("supervisor") or binding.get("cluster") or tenancy.get("supervisor_gpu_tenancy_cluster")


def _reservation_words(items):
    return ", ".join("%s x%s" % (i["reserved_vm_class"], i["count"]) for i in items or []) or "none"


def zone_binding_findings(tenancy, names, zone_bindings):
    """Findings of the Supervisor's zone bindings: each binding input of the role planned by
    supervisor_zone_binding's own plan (``_vm_reservations.plan_bindings``) against ``zone_bindings``
    ({cluster: Bindings.Info rows}; a cluster absent: not read, not judged), the design's class names
    as they are used (``names``, a revision's class)."""
    out = []
    for binding in tenancy.get("supervisor_gpu_tenancy_zone_bindings") or []:
        cluster = binding_key(tenancy, binding)
        if cluster not in (zone_bindings or {}):
            continue
        reservations = [dict(r, vm_class=names.get(r["vm_class"], r["vm_class"])) for r in binding["reservations"]]
        managed = binding.get("managed_classes")
        managed = [r["vm_class"] for r in reservations] if managed is None else [names.get(c, c) for c in managed]
        wanted = _vr.supervisor_bindings([dict(vm_reservations=reservations)])
        for change in _vr.plan_bindings(cluster, zone_bindings[cluster], wanted, managed):
            zone = change.object.rsplit(" zone ", 1)[1]
            obj = "zone binding %s/%s" % (cluster, zone)
            if change.action == CREATE:
                out.append(finding("zone_binding_missing", obj, "the Supervisor of %s does not bind zone %s, where "
                                   "the design reserves %s" % (cluster, zone, _reservation_words(change.after))))
            else:
                out.append(finding("zone_binding_reservations_changed", obj, "zone %s of the Supervisor of %s reserves "
                                   "%s; after the role: %s" % (zone, cluster, _reservation_words(change.before),
                                                               _reservation_words(change.after))))
    return out


def not_owned_findings(kind, name, have, key, adopting):
    """``object_not_owned`` for a VM class or namespace whose description lacks the mark (made by hand),
    where the design adopts it: what site.yml will record as the collection's."""
    if not adopting or _ownership.marked((have or {}).get("description")):
        return []
    return [finding("object_not_owned", "%s %s" % (kind, name),
                    "%s %s was made by hand (its description %r lacks the mark %r): until it is adopted no purge, "
                    "retirement or revision touches it" % (kind.replace("_", " "), name, (have or {}).get("description") or "",
                                                           _ownership.OWNER_MARK), key=key)]
