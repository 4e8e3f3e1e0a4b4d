# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plans and resources: what a changing module is about to do, as data (pure: no I/O, no Ansible).

A resource is *read -> plan -> apply*::

    class VmClass(Resource):
        def read(self):               # live state, through the client layer only
        def plan(self, live):         # -> Plan: the changes, compared by pure code
        def apply(self, plan):        # makes exactly the changes of the plan
        def result(self, live, plan): # the module's own result keys (what check mode predicts)

The runner (``_runner.py``) calls them, sets ``changed`` from the plan, returns ``diff``
(``plan.before`` / ``plan.after`` unless the resource says otherwise), applies only outside
check mode and turns every error into one failure with the partial state.

A :class:`Change` is one field of one object: ``object``, ``field``, ``before``, ``after``
and ``action`` (``create``, ``update``, ``delete`` or a verb of the link, such as
``import`` or ``remediate``), optionally in words (``reason``) and with details that name the
part of the object it is about (for a host: ``gpu``, a PCI address; ``vms``, the VMs on it).
The audit reports the same changes as findings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib

CREATE = "create"
UPDATE = "update"
DELETE = "delete"


class Change:
    """One field of one object that differs from what is wanted, and what is done about it.

    ``reason``: the change in words, for messages (None: the module words it itself); ``details``:
    keyword values that name the part of the object (``gpu="0000:3b:00.0"``) or what goes with the change
    (``vms``). Two changes are equal when every one of these is; the hash is of ``object``, ``field``,
    ``action`` and the details' names, so equal changes hash alike whatever values they carry.
    :meth:`to_dict` is the form that crosses into Jinja and module results (``reason`` and each detail a
    key only where set); :meth:`from_dict` reads it back.
    """

    __slots__ = ("object", "field", "before", "after", "action", "reason", "details")
    KEYS = ("object", "field", "before", "after", "action", "reason")

    def __init__(self, obj, field, before, after, action=UPDATE, reason=None, **details):
        self.object = obj
        self.field = field
        self.before = before
        self.after = after
        self.action = action
        self.reason = reason
        self.details = details

    def detail(self, name, default=None):
        """One of the details (``gpu``, ``vms`` ...), ``default`` when the change has none of that name."""
        return self.details.get(name, default)

    def but(self, reason=None, **details):
        """A copy with ``details`` added or replaced (and ``reason`` when given)."""
        merged = dict(self.details)
        merged.update(details)
        return Change(self.object, self.field, self.before, self.after, self.action,
                      self.reason if reason is None else reason, **merged)

    def to_dict(self):
        out = dict(object=self.object, field=self.field, before=self.before, after=self.after, action=self.action)
        if self.reason is not None:
            out["reason"] = self.reason
        for key, value in self.details.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_dict(cls, data):
        """A change from its :meth:`to_dict` form (a Change is returned as it is)."""
        if isinstance(data, Change):
            return data
        if not isinstance(data, dict) or "field" not in data:
            raise ValueError("a change is a mapping with at least a field, not %r" % (data,))
        details = dict((k, v) for k, v in data.items() if k not in cls.KEYS)
        return cls(data.get("object"), data["field"], data.get("before"), data.get("after"),
                   data.get("action") or UPDATE, data.get("reason"), **details)

    def __eq__(self, other):
        return isinstance(other, Change) and self.to_dict() == other.to_dict()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.object, self.field, self.action, tuple(sorted(self.details))))

    def __repr__(self):
        return "Change(%r, %r, %r -> %r, %s%s)" % (self.object, self.field, self.before, self.after, self.action,
                                                   "".join(", %s=%r" % kv for kv in sorted(self.details.items())))


class Plan:
    """The changes of one run, plus what the resource needs to apply and report them.

    ``before`` / ``after``: the object(s) as they are and as they will be (the diff);
    ``facts``: anything else ``apply`` and ``result`` need (a chosen API form, an id).
    A plan is true when it holds a change.
    """

    def __init__(self, changes=None, before=None, after=None, **facts):
        self.changes = list(changes or [])
        self.before = before
        self.after = after
        self.facts = facts

    def add(self, obj, field, before, after, action=UPDATE):
        change = Change(obj, field, before, after, action)
        self.changes.append(change)
        return change

    def __bool__(self):
        return bool(self.changes)

    def __len__(self):
        return len(self.changes)

    def __iter__(self):
        return iter(self.changes)

    def fields(self, obj=None):
        """The changed fields in plan order, each once (of ``obj`` only when given)."""
        out = []
        for change in self.changes:
            if (obj is None or change.object == obj) and change.field not in out:
                out.append(change.field)
        return out

    def actions(self):
        """The actions of the plan in order, each once."""
        out = []
        for change in self.changes:
            if change.action not in out:
                out.append(change.action)
        return out

    def verb(self):
        """The one action of the plan (``create`` ...), or None when it mixes actions or is empty."""
        actions = self.actions()
        return actions[0] if len(actions) == 1 else None

    def to_list(self):
        return [c.to_dict() for c in self.changes]


def compare(obj, before, after, fields, action=None, equal=None):
    """Changes of the ``fields`` whose values differ between two dicts (``before`` None: a create).

    ``action`` defaults to ``create`` when ``before`` is None, ``delete`` when ``after`` is
    None, else ``update``; ``equal(field, a, b)`` overrides the comparison of a field.
    """
    if action is None:
        action = CREATE if before is None else DELETE if after is None else UPDATE
    out = []
    for field in fields:
        old = None if before is None else before.get(field)
        new = None if after is None else after.get(field)
        same = equal(field, old, new) if equal is not None else old == new
        if before is None or after is None or not same:
            out.append(Change(obj, field, old, new, action))
    return out


class Failure(Exception):
    """The run stops here: ``msg`` is the whole message, ``result`` goes with the failure."""

    def __init__(self, msg, **result):
        super(Failure, self).__init__(msg)
        self.msg = msg
        self.result = result


class Resource:
    """Base of a resource the runner drives; override ``read``, ``plan``, ``apply`` and ``result``.

    ``name``: the object in messages ("VM class gpu-small"); ``verb``: what the module does
    to it ("manage"), used for refused input; ``refusals``: the exception types of the
    resource's pure checks (bad input, a state it will not act on), reported as
    "Unable to <verb> <name>: <reason>"; ``partial``: what the run has done so far, returned
    with any failure; ``warnings``: sentences the runner passes to the user.
    """

    verb = "manage"
    refusals = ()
    errors = ()  # more client error types than the runner's (for example OSError of a file the resource writes)

    def __init__(self, name):
        self.name = name
        self.step = None
        self.partial = {}
        self.warnings = []

    @contextlib.contextmanager
    def doing(self, verb, obj=None):
        """Name what the code inside is doing, for the failure message: "Unable to <verb> <obj>".

        The name stays when the block fails (that is the point), and is restored when it ends.
        """
        saved = self.step
        self.step = (verb, self.name if obj is None else obj)
        yield
        self.step = saved

    def read(self):
        """The live state (the only reads of the run)."""
        return None

    def plan(self, live):
        """The changes from ``live`` to what is wanted; an empty plan for info modules."""
        return Plan()

    def apply(self, plan):
        """Make the changes of ``plan``; return result keys that only the real run knows, or None."""
        raise NotImplementedError("%s has changes to apply but no apply()" % type(self).__name__)

    def result(self, live, plan):
        """The module's own result keys, as predicted by the plan."""
        return {}

    def diff(self, live, plan):
        """before/after for --diff."""
        return dict(before=plan.before, after=plan.after)

    def next_step(self, exc):
        """What the user does after a failure (appended to the message), or None."""
        return None


class Info(Resource):
    """A read-only resource (an info module): ``read`` and ``result``; never a change, no diff."""

    verb = "read"

    def diff(self, live, plan):
        return None


__all__ = ["CREATE", "DELETE", "UPDATE", "Change", "Failure", "Info", "Plan", "Resource", "compare"]
