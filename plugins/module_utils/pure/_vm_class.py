# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""VM classes with vGPU profiles: validation, normal form, diff and request bodies (pure).

A VM class is compared in one normal form, whatever the API returned::

    {"cpu_count": 8, "memory_mb": 65536, "cpu_reservation": 0, "memory_reservation": 100,
     "description": "...", "vgpu_profiles": ["nvidia_h100-1-10c"]}

It is written in one of two forms: ``config_spec`` (a vim ``VirtualMachineConfigSpec`` in
JSON, vSphere API 8.0.2 and later) or the legacy ``devices.vgpu_devices`` (deprecated
since 8.0.2). On read both are understood, and both ``memory_MB`` and ``memory_mb``.

Revisions: a VM class is never edited to another shape in place (node VMs keep the vGPU they
were powered on with, so the pool would run two profiles). With revisions on, a pool's class
whose shape (vCPUs, memory, vGPU profiles) changes gets a new class ``<base>-r<5 hex>``, the
hex digits the start of a SHA-256 of the shape; ``resolve`` picks the name from the design's
base name and the live classes alone, so the converge and the audit compute the same one. The
classes it supersedes are retired (removed from namespaces, deleted) once no VM uses them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nvidia

FORMS = ("config_spec", "devices")
API_FORMS = ("auto",) + FORMS
CONFIG_SPEC_SINCE = (8, 0, 2)
FIELDS = ("cpu_count", "memory_mb", "cpu_reservation", "memory_reservation", "description", "vgpu_profiles", "profiling")
# NVIDIA's per-VM setting that lets the guest read the vGPU's profiling counters (DCGM_FI_PROF_*, CUDA profilers):
# pciPassthru<n>.cfg.enable_profiling = 1 for the vGPU at device index n (docs/gpu-metrics.md, "Profiling counters in the guest").
PROFILING_KEY = "pciPassthru%d.cfg.enable_profiling"
PROFILING_KEY_RE = re.compile(r"^pciPassthru(\d+)\.cfg\.enable_profiling$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class VmClassError(ValueError):
    """Bad input for a VM class; nothing was changed."""


def check_dns_label(name, what="name"):
    if not isinstance(name, str) or not DNS_LABEL.match(name):
        raise VmClassError("%s %r is not a DNS label (lower-case letters, digits and '-', at most 63, "
                           "starting and ending with a letter or digit)" % (what, name))
    return name


def api_version_tuple(version):
    """'8.0.3.0' -> (8, 0, 3, 0); unparseable parts count as 0."""
    out = []
    for part in str(version or "").split("."):
        m = re.match(r"^(\d+)", part)
        out.append(int(m.group(1)) if m else 0)
    return tuple(out)


def choose_form(api_form, api_version=None):
    """The form to write: the one asked for, or by API version (config_spec since 8.0.2)."""
    if api_form not in API_FORMS:
        raise VmClassError("api_form %r is not one of %s" % (api_form, ", ".join(API_FORMS)))
    if api_form != "auto":
        return api_form
    return "config_spec" if api_version_tuple(api_version) >= CONFIG_SPEC_SINCE else "devices"


def _reservation(value, what):
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
        raise VmClassError("%s must be a percentage from 0 to 100, not %r" % (what, value))
    return value


def check_profiles(profiles, offered=None, cluster=None):
    """Parse every profile; with ``offered`` (a set), each must be in it."""
    if profiles is None:
        return None
    out = []
    for name in profiles:
        try:
            _nvidia.parse_profile(name)
        except _nvidia.NvidiaError as exc:
            raise VmClassError("vGPU profile %s: %s" % (name, exc))
        out.append(name.lower())
    if offered is not None:
        unknown = [p for p in out if p not in offered]
        if unknown:
            raise VmClassError("vGPU profile(s) %s not offered by the hosts of cluster %s; offered: %s"
                               % (", ".join(unknown), cluster, ", ".join(sorted(offered)) or "none"))
    return out


def desired(params):
    """The user's options in normal form (None = leave alone), validated without I/O."""
    check_dns_label(params.get("name"), "VM class name")
    out = dict((k, params.get(k)) for k in FIELDS)
    for k in ("cpu_count", "memory_mb"):
        if out[k] is not None and (not isinstance(out[k], int) or out[k] < 1):
            raise VmClassError("%s must be a positive number, not %r" % (k, out[k]))
    out["cpu_reservation"] = _reservation(out["cpu_reservation"], "cpu_reservation")
    out["memory_reservation"] = _reservation(out["memory_reservation"], "memory_reservation")
    out["vgpu_profiles"] = check_profiles(out["vgpu_profiles"])
    if out["profiling"] is not None and not isinstance(out["profiling"], bool):
        raise VmClassError("profiling must be true or false, not %r" % (out["profiling"],))
    return out


def _profiling_of_config_spec(config_spec):
    """Whether every vGPU of the spec has profiling on (pciPassthru<n>.cfg.enable_profiling = 1)."""
    count = len(_profiles_of_config_spec(config_spec))
    on = set()
    for opt in (config_spec or {}).get("extraConfig") or []:
        match = PROFILING_KEY_RE.match(str((opt or {}).get("key") or ""))
        if match and str(opt.get("value")).strip().lower() in ("1", "true"):
            on.add(int(match.group(1)))
    return count > 0 and all(i in on for i in range(count))


def _profiles_of_config_spec(config_spec):
    out = []
    for change in (config_spec or {}).get("deviceChange") or []:
        if (change or {}).get("operation", "add") != "add":
            continue
        backing = ((change.get("device") or {}).get("backing") or {})
        if backing.get("vgpu"):
            out.append(backing["vgpu"])
    return out


def normalize(info):
    """The API's Info (either form, either memory spelling) in normal form; None for None."""
    if info is None:
        return None
    memory = info.get("memory_mb", info.get("memory_MB"))
    profiles = [d.get("profile_name") for d in ((info.get("devices") or {}).get("vgpu_devices") or [])]
    config_spec = info.get("config_spec")
    profiling = False
    if isinstance(config_spec, dict):
        profiles += _profiles_of_config_spec(config_spec)
        profiling = _profiling_of_config_spec(config_spec)
    return dict(
        cpu_count=info.get("cpu_count"),
        memory_mb=memory,
        cpu_reservation=info.get("cpu_reservation") or 0,
        memory_reservation=info.get("memory_reservation") or 0,
        description=info.get("description") or "",
        vgpu_profiles=[p.lower() for p in profiles if p],
        profiling=profiling,
    )


def merge(current, want):
    """The class after this run: current values, overridden by the options the user set.

    With a vGPU the memory reservation is 100: an explicit lower value fails, an unset one
    becomes 100.
    """
    after = dict(current or {})
    for k in FIELDS:
        if want.get(k) is not None:
            after[k] = list(want[k]) if k == "vgpu_profiles" else want[k]
    after.setdefault("cpu_reservation", 0)
    after.setdefault("description", "")
    after.setdefault("vgpu_profiles", [])
    if not after["vgpu_profiles"] or after.get("profiling") is None:
        after["profiling"] = bool(after["vgpu_profiles"]) and bool(after.get("profiling"))
    if current is None:
        missing = [k for k in ("cpu_count", "memory_mb") if after.get(k) is None]
        if missing:
            raise VmClassError("%s required to create a VM class" % " and ".join(missing))
    if after["vgpu_profiles"]:
        if want.get("memory_reservation") is not None and want["memory_reservation"] < 100:
            raise VmClassError("memory_reservation %d%% with a vGPU: a vGPU VM needs all its memory reserved "
                               "(100), leave memory_reservation unset or set it to 100"
                               % want["memory_reservation"])
        after["memory_reservation"] = 100
    else:
        after.setdefault("memory_reservation", 0)
        if after.get("memory_reservation") is None:
            after["memory_reservation"] = 0
    return after


def differs(current, after):
    """Fields whose value changes (vGPU profiles compared as a multiset)."""
    if current is None:
        return list(FIELDS)
    out = []
    for k in FIELDS:
        a, b = current.get(k), after.get(k)
        if k == "vgpu_profiles":
            a, b = sorted(a or []), sorted(b or [])
        elif k == "profiling":
            a, b = bool(a), bool(b)
        if a != b:
            out.append(k)
    return out


def with_vgpu(classes):
    """The ids of the classes (``{id: normal form}``) that carry a vGPU profile."""
    return sorted(i for i, c in (classes or {}).items() if (c or {}).get("vgpu_profiles"))


def vgpu_config_spec(after):
    """The vim VirtualMachineConfigSpec (JSON with _typeName) of a class."""
    spec = {
        "_typeName": "VirtualMachineConfigSpec",
        "numCPUs": after["cpu_count"],
        "memoryMB": after["memory_mb"],
    }
    changes = []
    for i, profile in enumerate(after["vgpu_profiles"]):
        changes.append({
            "_typeName": "VirtualDeviceConfigSpec",
            "operation": "add",
            "device": {
                "_typeName": "VirtualPCIPassthrough",
                "key": -100 - i,
                "backing": {"_typeName": "VirtualPCIPassthroughVmiopBackingInfo", "vgpu": profile},
            },
        })
    if changes:
        spec["deviceChange"] = changes
        spec["memoryReservationLockedToMax"] = True
        if after.get("profiling"):
            spec["extraConfig"] = [{"_typeName": "OptionValue", "key": PROFILING_KEY % i, "value": "1"}
                                   for i in range(len(changes))]
    return spec


def request_body(name, after, form, create, clear_devices=False):
    """CreateSpec (with ``id``) or UpdateSpec of the whole class in the chosen form.

    ``clear_devices``: an update to the config_spec form of a class that still has legacy
    ``devices.vgpu_devices`` empties them, so the profiles are not counted twice.
    """
    body = {}
    if create:
        body["id"] = name
    body.update(
        cpu_count=after["cpu_count"],
        memory_MB=after["memory_mb"],
        cpu_reservation=after["cpu_reservation"],
        memory_reservation=after["memory_reservation"],
        description=after["description"],
    )
    if form == "config_spec":
        body["config_spec"] = vgpu_config_spec(after)
        if clear_devices and not create:
            body["devices"] = {}
    elif after.get("profiling"):
        raise VmClassError("profiling needs the config_spec form of a VM class (vSphere 8.0.2 or later): the devices "
                           "form has no place for pciPassthru<n>.cfg.enable_profiling; set profiling false (pools[].profiling: "
                           "false in the design)")
    else:
        body["devices"] = {"vgpu_devices": [{"profile_name": p} for p in after["vgpu_profiles"]]}
    return body


# --- revisions: a changed shape gets a new class, the old one is retired once unused ---

REVISION_SUFFIX = re.compile(r"-r[0-9a-f]{5}$")
REVISION_LEN = len("-r00000")
# the description of a class the collection created starts with this (derive() writes "gpupool <pool>: ...");
# only such a class is ever retired
OWNER_MARK = "gpupool "


def shape(cls):
    """What decides a node VM's hardware: vCPUs, memory and the vGPU profiles (a sorted tuple)."""
    cls = cls or {}
    return (cls.get("cpu_count"), cls.get("memory_mb"), tuple(sorted(p.lower() for p in cls.get("vgpu_profiles") or [])))


def revision(cls):
    """The revision of a shape: 5 hex digits of a SHA-256 of ``cpu=..;memory_mb=..;vgpu=a,b``."""
    cpu, memory, profiles = shape(cls)
    text = "cpu=%s;memory_mb=%s;vgpu=%s" % (cpu, memory, ",".join(profiles))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:5]


def revision_name(base, cls):
    """``<base>-r<revision>``; the base leaves room for the suffix in a DNS label."""
    check_dns_label(base, "VM class name")
    if len(base) > 63 - REVISION_LEN:
        raise VmClassError("VM class name %s is longer than %d characters: with revisions on, a changed shape is "
                           "named %s-r<5 hex>, which must stay a DNS label; shorten the name"
                           % (base, 63 - REVISION_LEN, base))
    return "%s-r%s" % (base, revision(cls))


def family(base, names):
    """The names that are ``base`` or a revision of it (sorted, base first)."""

    def revision_of(n):
        rest = n[len(base):]
        return n.startswith(base) and len(rest) == REVISION_LEN and bool(REVISION_SUFFIX.match(rest))
    out = [n for n in names if n == base or revision_of(n)]
    return sorted(out, key=lambda n: (n != base, n))


def resolve(base, want, live):
    """(name, superseded) of the class a pool wants, from the base name and the live classes alone.

    ``want``: the class after this run in normal form (its shape counts); ``live``: ``{id: normal
    form}`` of every class. A class of the family (base or base-r<hex>) with the wanted shape is the
    one (the base first); without any class of the family, the base name (a new pool keeps the
    design's name); otherwise ``<base>-r<revision of the shape>``. ``superseded``: the other
    classes of the family, which the pool leaves and which are retired once no VM uses them.
    """
    names = family(base, list(live or {}))
    wanted = shape(want)
    same = [n for n in names if shape(live[n]) == wanted]
    if same:
        name = same[0]
    elif not names:
        name = base
    else:
        name = revision_name(base, want)
    return name, [n for n in names if n != name]


def owned(cls):
    """Whether the collection created the class (its description carries the mark)."""
    return str((cls or {}).get("description") or "").startswith(OWNER_MARK)


def retirable(superseded, live, in_use):
    """(retire, keep): the superseded classes to remove now (ours, no VM on them) and the others, with why.

    ``in_use``: class names that a node pool names or a node runs on.
    """
    retire, keep = [], []
    for name in superseded:
        if name not in (live or {}):
            continue
        if not owned(live[name]):
            keep.append(dict(name=name, why="not created by the collection (its description lacks %r)" % OWNER_MARK))
        elif name in (in_use or ()):
            keep.append(dict(name=name, why="still used by a node pool or a node"))
        else:
            retire.append(name)
    return retire, keep


def revision_steps(name, superseded, namespaces=(), node_pools=()):
    """The ordered steps of moving a pool from the superseded classes to ``name`` (for check mode and reports).

    Without ``namespaces`` / ``node_pools`` the steps speak of those that offer / use the old classes."""
    if not superseded:
        return []
    old = ", ".join(superseded)
    steps = ["create VM class %s (the shape changed; %s is not edited in place)" % (name, old)]
    steps += ["add %s to namespace %s, keeping %s while VMs use it" % (name, ns, old) for ns in namespaces] or [
        "add %s to the namespaces that offer %s, keeping %s while VMs use it" % (name, old, old)]
    steps += ["move node pool %s to %s; Cluster API replaces its machines" % (pool, name) for pool in node_pools] or [
        "move the node pools on %s to %s; Cluster API replaces their machines" % (old, name)]
    steps.append("wait until every node of the pool runs on %s and is Ready" % name)
    steps += ["remove %s from namespace %s" % (old, ns) for ns in namespaces] or [
        "remove %s from the namespaces" % old]
    steps.append("delete VM class %s once no VM uses it" % old)
    return steps


def namespace_classes(classes, names, keep=()):
    """A namespace's class list with each base name replaced by its resolved name (``names``: {base: name})
    and, after it, the superseded classes still to keep (``keep``: {base: [names]})."""
    out = []
    for c in classes or []:
        for n in [names.get(c, c)] + list((keep or {}).get(c) or []):
            if n not in out:
                out.append(n)
    return out


__all__ = ["API_FORMS", "OWNER_MARK", "REVISION_LEN", "family", "namespace_classes", "owned", "resolve", "retirable",
           "revision", "revision_name", "revision_steps", "shape", "FIELDS", "PROFILING_KEY",
           "VmClassError", "api_version_tuple", "check_dns_label", "check_profiles",
           "choose_form", "desired", "differs", "merge", "normalize", "request_body", "vgpu_config_spec", "with_vgpu"]
