# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which objects are the collection's own, and what adoption makes of that: pure, no I/O.

Every kind of object keeps its mark on the platform itself, so a run from another machine
knows it too:

* DRS overrides: the cluster's custom attribute ``gpupool.vcf.drs-pinned`` (VM moids);
* node pools: the VKS Cluster's annotation ``gpupool.vcf/node-pools`` (pool names);
* VM classes and Supervisor namespaces: a description that starts with :data:`OWNER_MARK`
  (both the create and the update spec of the vSphere Automation API carry ``description``,
  vCenter keeps it and shows it, and neither object has a custom attribute);
* Kubernetes objects: a label.

A record (a set of identifiers) becomes, after a run: what it held that is still there, what the
run created or changed, and, only with ``adopt``, the objects in scope that exist and match what
is wanted after the converge. Without ``adopt`` an object made by hand never changes owner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the start of the description of a VM class or namespace the collection owns
OWNER_MARK = "gpupool "
# annotation of a VKS Cluster: the node pools the collection made or adopted (names, sorted, comma-separated)
NODE_POOLS_ANNOTATION = "gpupool.vcf/node-pools"


def record_after(owned, present, claimed=(), wanted=(), adopt=False):
    """The record after a run (a set).

    ``owned``: the record as read; ``present``: the identifiers of the objects there after the
    run; ``claimed``: those the run creates or changes (always the collection's); ``wanted``: those
    in scope that the run makes (or finds) as designed, recorded only with ``adopt``.
    """
    out = set(owned or ()) | set(claimed or ())
    if adopt:
        out |= set(wanted or ())
    return out & set(present or ())


def adopted(owned, present, wanted, adopt):
    """The objects a run adopts: in scope, there, not yet recorded (sorted; empty without adopt)."""
    if not adopt:
        return []
    return sorted((set(wanted or ()) & set(present or ())) - set(owned or ()))


def not_owned(in_scope, owned):
    """The objects in scope that the record does not hold (sorted): made by hand or before the record."""
    return sorted(set(in_scope or ()) - set(owned or ()))


def marked(description):
    """Whether a description carries the owner's mark."""
    return str(description or "").startswith(OWNER_MARK)


def with_mark(description):
    """A description that carries the mark (unchanged when it already does)."""
    text = str(description or "")
    return text if marked(text) else OWNER_MARK + (text or "adopted")


def description_after(current, wanted, exists, adopt=False):
    """The description to write on a VM class or namespace, the mark being its record (None: leave it).

    ``current``: the live description; ``wanted``: the one asked for (None: not asked);
    ``exists``: whether the object is there before the run. A new object gets what is asked; one
    the collection owns too (with ``adopt`` the mark is kept, so a rerun is unchanged). One made by
    hand keeps its description (and so its owner) unless ``adopt``, which gives it what is asked
    with the mark.
    """
    if not exists:
        return wanted
    if marked(current):
        return with_mark(wanted) if adopt and wanted is not None else wanted
    if adopt:
        return with_mark(wanted if wanted is not None else current)
    if wanted is not None and marked(wanted):
        return None  # writing it would change the owner
    return wanted


def finding_rows(kind, names, where, fix):
    """One row per object in scope that is not the collection's own, for the audit.

    Returns [{"kind", "object", "where", "fix"}], sorted by object.
    """
    return [dict(kind=kind, object=name, where=where, fix=fix) for name in sorted(names or ())]


__all__ = ["OWNER_MARK", "adopted", "description_after", "finding_rows", "marked", "not_owned", "record_after", "with_mark"]


def owned_node_pools(annotations):
    """The node pool names a VKS Cluster's annotations record as the collection's (an empty set without one)."""
    value = (annotations or {}).get(NODE_POOLS_ANNOTATION) or ""
    return set(x.strip() for x in value.split(",") if x.strip())
