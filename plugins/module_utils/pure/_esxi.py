# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure ESXi host logic for gpupool.vcf: no I/O, no Ansible imports.

* NVIDIA host driver versions: :func:`parse_driver_version`, :func:`compare_versions`,
  :func:`driver_plan` (nothing / install / upgrade / downgrade, refusing a downgrade unless
  allowed), :func:`version_from_bundle`, :func:`bundle_location`.
* Fleet decisions: :func:`design_version` (the version a cluster runs: the design's, else
  the majority of its GPU hosts, never a tie), :func:`version_gate`, :func:`roll_capacity`.
* Graphics: :func:`graphics_plan` (host default, assignment policy, every GPU's type, the vGPU mode
  of every NVIDIA GPU not in MIG mode).
* Scheduler: :func:`scheduler_plan` (the ``nvidia`` module option string to write, merged
  with what is there, and the fixed-share check against the vGPUs each GPU carries).
* Which hosts need their turn: :func:`host_changes`, :func:`hosts_to_roll` (from one
  ``gpu_host_info`` read of the cluster, without a call per host); how a turn goes through
  maintenance mode: :func:`needs_maintenance`, :func:`gpus_to_empty`, :func:`turn_window`.
* Host MIG mode over SSH: :func:`mig_mode_commands` (the commands, quoted), :func:`mig_plan`.

Every error is an :class:`EsxiError` (a ``ValueError``) whose message says what is wrong
and what would be valid.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import shlex

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _nvidia
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Change


class EsxiError(ValueError):
    """Bad input or a state the collection refuses to act on."""


# ---------------------------------------------------------------------------------------
# the plan of one host: what the per-host roll would do, item by item
# ---------------------------------------------------------------------------------------

# field -> the actions the roll takes on it (each has an audit rule in _audit_esxi.ESXI_RULE_BY_FIELD)
HOST_PLAN = (
    ("connection", ("unreachable",)),
    ("read", ("unreadable",)),
    ("driver", ("install", "upgrade", "downgrade", "refused")),
    ("vgpu_profiles", ("reboot",)),
    ("graphics", ("unread",)),
    ("graphics.default_type", ("set",)),
    ("graphics.device_type", ("set",)),
    ("graphics.assignment_policy", ("set",)),
    ("graphics.vgpu_mode", ("set",)),
    ("nvidia_module_options", ("set", "unread", "refused")),
    ("scheduler", ("refused",)),
    ("reboot", ("reboot",)),
    ("maintenance_mode", ("exit",)),
    ("vms_powered_off", ("power_on",)),
    ("mig_mode", ("set",)),
    ("plan", ("refused",)),
)


def host_object(name):
    """The ``object`` of every change of a host's plan: ``host <name>`` (the audit's finding object too)."""
    return "host %s" % name


def as_changes(items):
    """A host's plan as :class:`Change` objects: Changes are kept, their ``to_dict`` form (what a filter
    returned to Jinja and the role hands back) is read back."""
    return [Change.from_dict(i) for i in items or []]


# A host's plan is a list of _plan.Change: ``object`` "host <name>", ``field`` and ``action`` one of
# HOST_PLAN's, ``before`` (live) -> ``after`` (wanted), ``reason`` in words, and the part as a detail
# (``gpu``: a PCI address; ``vms``: the VMs on that GPU, for a vGPU mode change).


# ---------------------------------------------------------------------------------------
# driver versions
# ---------------------------------------------------------------------------------------

# 550.90.05 or 550.90.05-1OEM.800.1.0.20613240 (branch.minor[.patch][-<build suffix>])
_VERSION_RE = re.compile(r"^([0-9]{2,4})\.([0-9]{1,4})(?:\.([0-9]{1,4}))?(?:-([0-9A-Za-z][0-9A-Za-z.]*))?$")
VERSION_FORM = "<branch>.<minor>[.<patch>][-<build>] such as 550.90.05 or 550.90.05-1OEM.800.1.0.20613240"


class DriverVersion:
    """A parsed NVIDIA host driver version; ordered by its numbers, the build suffix aside."""

    __slots__ = ("text", "numbers", "suffix")

    def __init__(self, text, numbers, suffix):
        self.text = text
        self.numbers = numbers
        self.suffix = suffix

    @property
    def short(self):
        return self.text.split("-", 1)[0]

    def __repr__(self):
        return "DriverVersion(%r)" % self.text


def parse_driver_version(text):
    """Parse a driver version, short (550.90.05) or full (550.90.05-1OEM.800...)."""
    if isinstance(text, DriverVersion):
        return text
    if not isinstance(text, str) or not _VERSION_RE.match(text.strip()):
        raise EsxiError("Invalid NVIDIA driver version %r: the form is %s" % (text, VERSION_FORM))
    text = text.strip()
    m = _VERSION_RE.match(text)
    numbers = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return DriverVersion(text, numbers, m.group(4))


def compare_versions(a, b):
    """-1, 0 or 1 as NVIDIA driver versions; the build suffix only breaks ties when both have one."""
    va, vb = parse_driver_version(a), parse_driver_version(b)
    if va.numbers != vb.numbers:
        return -1 if va.numbers < vb.numbers else 1
    if va.suffix and vb.suffix and va.suffix != vb.suffix:
        # same driver, other build: compare the dotted numbers of the suffix where they are numbers
        return -1 if _suffix_key(va.suffix) < _suffix_key(vb.suffix) else 1
    return 0


def _suffix_key(suffix):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.]", suffix)]


def same_version(installed, target):
    """Whether the installed driver is the target (a short target matches any build of it)."""
    if installed is None:
        return False
    return compare_versions(installed, target) == 0


def driver_plan(installed, target, allow_downgrade=False):
    """What to do to get from ``installed`` (None: no driver) to ``target``.

    Returns ``none``, ``install``, ``upgrade`` or ``downgrade``; a downgrade without
    ``allow_downgrade`` is an error, so is a malformed version.
    """
    tv = parse_driver_version(target)
    if installed is None:
        return "install"
    iv = parse_driver_version(installed)
    order = compare_versions(iv, tv)
    if order == 0:
        return "none"
    if order < 0:
        return "upgrade"
    if not allow_downgrade:
        raise EsxiError("the host runs NVIDIA driver %s, newer than the target %s: a downgrade needs "
                        "allow_downgrade=true" % (iv.text, tv.text))
    return "downgrade"


# NVD-AIE-800_550.90.05-1OEM.800.1.0.20613240_23912345.zip,
# NVD-AIE_ESXi_8.0.0_Driver_550.90.05-1OEM.800.1.0.20613240.vib
_BUNDLE_NAME_RES = (
    re.compile(r"^NVD-AIE-[0-9]+_(.+)_[0-9]+\.zip$", re.I),
    re.compile(r"^NVD-AIE_ESXi_[0-9.]+_Driver_(.+)\.vib$", re.I),
    re.compile(r"^NVD[-_]AIE.*?_([0-9]{3}\.[0-9]+(?:\.[0-9]+)?(?:-[0-9A-Za-z.]+)?)(?:_[0-9]+)?\.(?:zip|vib)$", re.I),
)
_DATASTORE_PATH_RE = re.compile(r"^\[([^\]]+)\]\s*(.+)$")


def version_from_bundle(bundle):
    """The driver version an NVIDIA bundle or VIB file name carries, or None for another name."""
    if not bundle:
        return None
    name = re.split(r"[/\\\]\s]", bundle.strip())[-1].split("?", 1)[0]
    for regex in _BUNDLE_NAME_RES:
        m = regex.match(name)
        if m:
            try:
                return parse_driver_version(m.group(1)).text
            except EsxiError:
                return None
    return None


def bundle_location(bundle):
    """(kind, location) for InstallHostPatchV2: kind ``bundle`` (.zip) or ``vib`` (.vib).

    A URL (http, https, ftp, file) is passed on; a datastore path ``[ds] dir/file.zip``
    becomes the absolute ``/vmfs/volumes/ds/dir/file.zip`` ESXi needs; an absolute path under
    ``/vmfs/volumes/`` is kept.
    """
    if not bundle or not isinstance(bundle, str) or not bundle.strip():
        raise EsxiError("no driver bundle given: option bundle (a URL or a datastore path such as "
                        "'[datastore1] drivers/NVD-AIE-800_<version>_<build>.zip') is required to install")
    text = bundle.strip()
    m = _DATASTORE_PATH_RE.match(text)
    if m:
        location = "/vmfs/volumes/%s/%s" % (m.group(1).strip(), m.group(2).strip().lstrip("/"))
    elif re.match(r"^(https?|ftp|file)://[^\s]+$", text, re.I) or text.startswith("/vmfs/volumes/"):
        location = text
    else:
        raise EsxiError("Invalid bundle %r: a URL (https://depot.example.com/NVD-AIE-800_....zip), a "
                        "datastore path ('[datastore1] drivers/NVD-AIE-800_....zip') or an absolute "
                        "/vmfs/volumes/... path is required" % bundle)
    lower = location.lower().split("?", 1)[0]
    if lower.endswith(".zip"):
        return "bundle", location
    if lower.endswith(".vib"):
        return "vib", location
    raise EsxiError("Invalid bundle %r: an offline bundle (.zip) or a VIB (.vib) is required" % bundle)


def check_bundle_matches(bundle, target):
    """Refuse a bundle whose file name names another driver version than the target."""
    named = version_from_bundle(bundle)
    if named is not None and parse_driver_version(named).numbers != parse_driver_version(target).numbers:
        raise EsxiError("bundle %s holds NVIDIA driver %s, not the target %s"
                        % (bundle, named, parse_driver_version(target).text))
    return named


# ---------------------------------------------------------------------------------------
# fleet decisions
# ---------------------------------------------------------------------------------------


def design_version(versions_by_host, target=None, exclude=()):
    """The driver version a cluster runs.

    ``versions_by_host`` maps host names to their short version (None: no driver). With a
    ``target`` (the design's version) that is the answer. Otherwise the version most of the
    other GPU hosts (``exclude`` left out) run; a tie or no host is an error that lists the
    hosts on each version.
    """
    if target:
        return parse_driver_version(target).text
    groups = {}
    for host, version in sorted(versions_by_host.items()):
        if host in exclude or version is None:
            continue
        groups.setdefault(parse_driver_version(version).short, []).append(host)
    if not groups:
        raise EsxiError("no other GPU host with an NVIDIA driver to take the version from; give the target version")
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    if len(ranked) > 1 and len(ranked[0][1]) == len(ranked[1][1]):
        raise EsxiError("no majority driver version: %s; give the target version" % describe_versions(groups))
    return ranked[0][0]


def describe_versions(groups):
    return "; ".join("%s on %s" % (v, ", ".join(sorted(hosts)))
                     for v, hosts in sorted(groups.items(), key=lambda kv: parse_driver_version(kv[0]).numbers))


def version_gate(versions_by_host, target=None):
    """Fail when a cluster's GPU hosts disagree and no target is given; return the target.

    ``versions_by_host``: {host: short version or None}. With one version on every host,
    that is the target (nothing to roll).
    """
    if target:
        return parse_driver_version(target).text
    groups = {}
    for host, version in versions_by_host.items():
        groups.setdefault(parse_driver_version(version).short if version else "none", []).append(host)
    if len(groups) > 1:
        raise EsxiError("the GPU hosts run different NVIDIA drivers (%s) and no target version is given: "
                        "set the cluster's driver version" % describe_versions_any(groups))
    if not groups:
        raise EsxiError("no GPU hosts to take the driver version from and no target version given")
    if "none" in groups:
        raise EsxiError("no NVIDIA driver on %s and no target version given" % ", ".join(sorted(groups["none"])))
    return next(iter(groups))


def describe_versions_any(groups):
    def key(kv):
        try:
            return (0, parse_driver_version(kv[0]).numbers)
        except EsxiError:
            return (1, ())
    return "; ".join("%s on %s" % (v, ", ".join(sorted(h))) for v, h in sorted(groups.items(), key=key))


def roll_capacity(gpus_by_host, min_gpus, force=False, unavailable=()):
    """Can one host at a time leave the cluster? Returns (allowed, message).

    Taking out the host with the most GPUs must leave at least ``min_gpus`` GPUs on the
    hosts that remain available (``unavailable``: hosts already in maintenance or down).
    """
    available = dict((h, n) for h, n in gpus_by_host.items() if h not in unavailable)
    total = sum(available.values())
    if not available:
        return False, "no GPU host available in the cluster"
    biggest = max(available.items(), key=lambda kv: (kv[1], kv[0]))
    left = total - biggest[1]
    if min_gpus and left < min_gpus:
        msg = ("taking %s (%d GPUs) out would leave %d of %d GPUs, fewer than the %d its protected (non-preemptible) pools need"
               % (biggest[0], biggest[1], left, total, min_gpus))
        if force:
            return True, msg + " (forced)"
        return False, msg
    return True, "%d of %d GPUs stay available while one host is out" % (left, total)


# ---------------------------------------------------------------------------------------
# graphics
# ---------------------------------------------------------------------------------------

# The one graphics map: the collection's words (options, results, the design) and the VIM API's.
GRAPHICS_API_BY_WORD = {"shared_direct": "sharedDirect", "shared": "shared"}
GRAPHICS_WORD_BY_API = dict((api, word) for word, api in GRAPHICS_API_BY_WORD.items())
GRAPHICS_WORDS = tuple(GRAPHICS_API_BY_WORD)
ASSIGNMENT_POLICIES = ("performance", "consolidation")

# The vGPU mode of a GPU (HostGraphicsConfig.deviceType[].vgpuMode, HostGraphicsInfo.vgpuMode, API 8.0.3):
# the collection's words and the VIM API's. A GPU in MIG mode reads multiInstanceGpu and is never set.
VGPU_MODE_API_BY_WORD = {"same_size": "sameSize", "mixed_size": "mixedSize"}
VGPU_MODE_WORDS = tuple(sorted(VGPU_MODE_API_BY_WORD))
VGPU_MODE_MIG = "multi_instance_gpu"
VGPU_MODE_WORD_BY_API = dict((api, word) for word, api in VGPU_MODE_API_BY_WORD.items())
VGPU_MODE_WORD_BY_API.update(multiInstanceGpu=VGPU_MODE_MIG, none="none")


def vgpu_mode_word(api_mode):
    """sameSize -> same_size, mixedSize -> mixed_size, multiInstanceGpu -> multi_instance_gpu; None stays
    None (not reported: before API 8.0.3); an unknown API value is passed on."""
    if api_mode is None:
        return None
    return VGPU_MODE_WORD_BY_API.get(str(api_mode), str(api_mode))


def vim_vgpu_mode(word):
    """same_size -> sameSize (the VIM API's word); None for a mode that is never written (MIG, unknown)."""
    return VGPU_MODE_API_BY_WORD.get(word)


def vgpu_modes_of(gpus):
    """{pci: vGPU mode word} of gpu_host_info's ``gpus`` (their current ``vgpu_mode``, API words); GPUs
    whose mode is not reported are left out."""
    return dict((g["pci_id"], vgpu_mode_word(g.get("vgpu_mode"))) for g in gpus or []
                if g.get("vgpu_mode") is not None)


def vgpu_mode_changes(current_modes, gpu_pci_ids, vgpu_mode, obj=None):
    """(desired {pci: mode word}, [Change] of ``obj``): the vGPU mode ``vgpu_mode`` (same_size / mixed_size) on
    every NVIDIA GPU of ``gpu_pci_ids`` that is not in MIG mode.

    ``current_modes``: {pci: mode word} as the host reads it now (:func:`vgpu_mode_word`). A GPU in MIG
    mode (multi_instance_gpu) is left alone, so is one whose mode is not reported (absent: the API is older
    than 8.0.3). ``vgpu_mode`` None: nothing is managed, nothing changes.
    """
    desired = dict(current_modes or {})
    items = []
    if vgpu_mode is None:
        return desired, items
    if vgpu_mode not in VGPU_MODE_WORDS:
        raise EsxiError("Invalid vgpu_mode %r: one of %s" % (vgpu_mode, ", ".join(VGPU_MODE_WORDS)))
    for pci in gpu_pci_ids:
        live = desired.get(pci)
        if live is None or live == VGPU_MODE_MIG or live == vgpu_mode:
            continue
        items.append(Change(obj, "graphics.vgpu_mode", live, vgpu_mode, "set",
                            "GPU %s vGPU mode %s -> %s" % (pci, live, vgpu_mode), gpu=pci))
        desired[pci] = vgpu_mode
    return desired, items


def graphics_changes(current, gpu_pci_ids, graphics_type=None, assignment_policy=None, vgpu_mode=None, obj=None):
    """The graphics configuration to write and the changes (of ``obj``, a host) that get there.

    ``current``: dict(default_type, assignment_policy, device_types {pci: type}) in the
    collection's words (shared_direct / shared), as ``gpu_host_info`` returns it (None: unread),
    with ``vgpu_modes`` {pci: mode word} (:func:`vgpu_mode_changes`) where ``vgpu_mode`` is asked.
    Returns (desired dict in the same words, [:class:`Change`]); only the
    NVIDIA GPUs in ``gpu_pci_ids`` and the options given are compared. With ``vgpu_mode`` the
    desired dict has ``vgpu_modes`` too: the mode of every GPU after the change.
    """
    current = current or {}
    cur_types = dict(current.get("device_types") or {})
    desired = dict(default_type=current.get("default_type"),
                   assignment_policy=current.get("assignment_policy"),
                   device_types=dict((pci, cur_types.get(pci, current.get("default_type"))) for pci in gpu_pci_ids))
    items = []
    if graphics_type is not None:
        if graphics_type not in GRAPHICS_WORDS:
            raise EsxiError("Invalid graphics_type %r: one of %s" % (graphics_type, ", ".join(GRAPHICS_WORDS)))
        if desired["default_type"] != graphics_type:
            items.append(Change(obj, "graphics.default_type", desired["default_type"], graphics_type, "set",
                                "host default graphics type %s -> %s" % (desired["default_type"], graphics_type)))
            desired["default_type"] = graphics_type
        for pci in gpu_pci_ids:
            if desired["device_types"].get(pci) != graphics_type:
                items.append(Change(obj, "graphics.device_type", desired["device_types"].get(pci), graphics_type, "set",
                                    "GPU %s graphics type %s -> %s" % (pci, desired["device_types"].get(pci),
                                                                       graphics_type), gpu=pci))
                desired["device_types"][pci] = graphics_type
    if assignment_policy is not None:
        if assignment_policy not in ASSIGNMENT_POLICIES:
            raise EsxiError("Invalid assignment_policy %r: one of %s"
                            % (assignment_policy, ", ".join(ASSIGNMENT_POLICIES)))
        if desired["assignment_policy"] != assignment_policy:
            items.append(Change(obj, "graphics.assignment_policy", desired["assignment_policy"], assignment_policy,
                                "set", "assignment policy %s -> %s"
                                % (desired["assignment_policy"], assignment_policy)))
            desired["assignment_policy"] = assignment_policy
    if vgpu_mode is not None:
        desired["vgpu_modes"], mode_items = vgpu_mode_changes(current.get("vgpu_modes"), gpu_pci_ids, vgpu_mode, obj)
        items.extend(mode_items)
    return desired, items


def graphics_plan(current, gpu_pci_ids, graphics_type=None, assignment_policy=None, vgpu_mode=None):
    """(desired graphics dict, list of change descriptions): :func:`graphics_changes` in words."""
    desired, items = graphics_changes(current, gpu_pci_ids, graphics_type, assignment_policy, vgpu_mode)
    return desired, reasons(items)


def vim_graphics_type(word):
    """shared_direct -> sharedDirect (the VIM API's word); an unknown word is passed on."""
    return GRAPHICS_API_BY_WORD.get(word, word)


def graphics_word(api_type):
    """sharedDirect -> shared_direct (the collection's word); an unknown API value is passed on."""
    return GRAPHICS_WORD_BY_API.get(api_type, api_type)


# ---------------------------------------------------------------------------------------
# scheduler
# ---------------------------------------------------------------------------------------


def _scheduler_value(policy, time_slice_ms, where):
    if policy is None:
        raise EsxiError("%s: a scheduler policy is required (one of %s)" % (where, ", ".join(_nvidia.SCHEDULER_POLICIES)))
    if policy not in _nvidia.SCHEDULER_POLICIES:
        raise EsxiError("%s: unknown scheduler policy %r; one of %s" % (where, policy, ", ".join(_nvidia.SCHEDULER_POLICIES)))
    if time_slice_ms is not None:
        if policy == "best_effort":
            raise EsxiError("%s: best_effort takes no time_slice_ms; use equal_share or fixed_share" % where)
        if isinstance(time_slice_ms, bool) or not isinstance(time_slice_ms, int) or not 1 <= time_slice_ms <= 30:
            raise EsxiError("%s: time_slice_ms %r is outside 1-30 ms" % (where, time_slice_ms))
    try:
        return _nvidia.encode_scheduler(policy, time_slice_ms)
    except _nvidia.NvidiaError as exc:
        raise EsxiError("%s: %s" % (where, exc))


def validate_scheduler(scheduler, gpu_pci_ids=None):
    """Check a scheduler option dict; returns (value for all GPUs, {pci: value})."""
    if not scheduler:
        return None, {}
    everywhere = None
    if scheduler.get("policy") is not None or scheduler.get("time_slice_ms") is not None:
        everywhere = _scheduler_value(scheduler.get("policy"), scheduler.get("time_slice_ms"), "scheduler")
    per_gpu = {}
    known = None if gpu_pci_ids is None else set(_nvidia.normalize_pci_address(p) for p in gpu_pci_ids)
    for entry in scheduler.get("per_gpu") or []:
        pci = entry.get("pci_id")
        if not pci:
            raise EsxiError("scheduler.per_gpu: every entry needs pci_id")
        try:
            address = _nvidia.normalize_pci_address(pci)
        except _nvidia.NvidiaError as exc:
            raise EsxiError("scheduler.per_gpu: %s" % exc)
        if known is not None and address not in known:
            raise EsxiError("scheduler.per_gpu: no NVIDIA GPU at PCI address %s; GPUs: %s"
                            % (pci, ", ".join(sorted(known)) or "none"))
        if address in per_gpu:
            raise EsxiError("scheduler.per_gpu: PCI address %s is given twice" % address)
        per_gpu[address] = _scheduler_value(entry.get("policy"), entry.get("time_slice_ms"),
                                            "scheduler.per_gpu[%s]" % pci)
    return everywhere, per_gpu


def fixed_share_conflicts(everywhere, per_gpu, profiles_by_gpu):
    """Reasons fixed share cannot be used: {pci: reason} for every GPU whose vGPUs forbid it.

    ``profiles_by_gpu``: {pci: [vGPU profile names of the VMs on that GPU]}.
    """
    out = {}
    for pci, profiles in sorted(profiles_by_gpu.items()):
        address = _nvidia.normalize_pci_address(pci)
        value = per_gpu.get(address, everywhere)
        if value is None or _nvidia.decode_scheduler(value).policy != "fixed_share" or not profiles:
            continue
        try:
            verdict = _nvidia.vgpu_fixed_share_allowed(profiles)
        except _nvidia.NvidiaError:
            continue  # a profile name we cannot read: leave the decision to the host
        if not verdict:
            out[pci] = verdict.reason
    return out


def scheduler_plan(current_options, scheduler, gpu_pci_ids=None, profiles_by_gpu=None):
    """(new option string, changed) for the scheduler settings asked for.

    Only what the user set is compared: without ``policy`` the all-GPU value is left
    alone; GPUs not named in ``per_gpu`` are left alone. Everything else in the option
    string is kept.
    """
    everywhere, per_gpu = validate_scheduler(scheduler, gpu_pci_ids)
    conflicts = fixed_share_conflicts(everywhere, per_gpu, profiles_by_gpu or {})
    if conflicts:
        raise EsxiError("fixed share refused: " + "; ".join("GPU %s: %s" % kv for kv in sorted(conflicts.items())))
    if everywhere is None and not per_gpu:
        return current_options, False
    try:
        current = _nvidia.get_scheduler(current_options)
        keep_all = current["all"].canonical_value if current["all"] is not None else None
        value = everywhere if (scheduler or {}).get("policy") is not None else keep_all
        new = _nvidia.set_scheduler(current_options, value, per_device=per_gpu or None)
    except _nvidia.NvidiaError as exc:
        raise EsxiError("the nvidia module options %r cannot be merged: %s" % (current_options, exc))
    return new, new != (current_options or "")


# ---------------------------------------------------------------------------------------
# which hosts of a cluster need their turn
# ---------------------------------------------------------------------------------------


def _normalized_scheduler(scheduler):
    """The scheduler option as esxi_gpu_config reads it: None when nothing is asked."""
    if not scheduler:
        return None
    if scheduler.get("policy") is None and not scheduler.get("per_gpu") and scheduler.get("time_slice_ms") is None:
        return None
    return scheduler


def host_changes(host, target, graphics_type=None, assignment_policy=None, scheduler=None, allow_downgrade=False,
                 driver=True, vgpu_mode=None):
    """What the per-host roll would change on one GPU host, from ``gpu_host_info`` data alone.

    ``host`` is one entry of gpu_host_info's ``hosts`` read with ``driver`` and
    ``scheduler`` gathered (``vms`` too when fixed share is asked). Returns the host's plan, a
    list of :class:`Change` of ``host <name>``; empty means the host is at the design and its turn would
    change nothing. Anything this cannot judge from the data (a host not connected, a read
    error, no nvidia module, a downgrade, fixed share next to running vGPUs, a driver
    installed but not loaded) is an item too, so the per-host modules decide and report it.
    ``driver=False`` leaves the driver out (vLCM's remediation owns it).
    """
    items, obj = [], host_object(host.get("name"))
    if host.get("connection_state") != "connected":
        return [Change(obj, "connection", host.get("connection_state"), "connected", "unreachable",
                       "host is %s" % host.get("connection_state"))]
    if host.get("errors"):
        return [Change(obj, "read", list(host["errors"]), None, "unreadable",
                       "read errors: %s" % "; ".join(str(e) for e in host["errors"]))]
    if driver:
        info = host.get("driver") or {}
        installed = info.get("full_version") or info.get("version")
        try:
            plan = driver_plan(installed, target, allow_downgrade)
        except EsxiError as exc:
            return [Change(obj, "driver", installed, target, "refused", "driver: %s" % exc)]
        if plan != "none":
            items.append(Change(obj, "driver", installed, parse_driver_version(target).text, plan,
                                "driver %s -> %s (%s)" % (info.get("version"), parse_driver_version(target).short,
                                                          plan)))
    if not host.get("vgpu_profiles"):
        items.append(Change(obj, "vgpu_profiles", [], "offered", "reboot",
                            "no vGPU profiles offered (driver not loaded)"))
    pcis = sorted(g["pci_id"] for g in host.get("gpus") or [])
    if graphics_type is not None or assignment_policy is not None or vgpu_mode is not None:
        if host.get("graphics") is None:
            items.append(Change(obj, "graphics", None, graphics_type, "unread", "graphics configuration not read"))
        else:
            current = dict(host["graphics"], vgpu_modes=vgpu_modes_of(host.get("gpus")))
            changes = graphics_changes(current, pcis, graphics_type, assignment_policy, vgpu_mode, obj)[1]
            items.extend(with_gpu_vms(changes, host.get("gpus")))
    items.extend(_scheduler_items(host, _normalized_scheduler(scheduler), pcis, obj))
    for reason in host.get("reboot_pending") or []:
        items.append(Change(obj, "reboot", "pending", "done", "reboot", reason))
    if host.get("maintenance_by_collection") and host.get("maintenance_mode"):
        items.append(Change(obj, "maintenance_mode", True, False, "exit",
                            "left in maintenance mode by an earlier run (%s)" % host["maintenance_by_collection"]))
    left_off = vms_left_off(host)
    if left_off:
        items.append(Change(obj, "vms_powered_off", left_off, [], "power_on",
                            "VMs an earlier run powered off and did not power on: %s" % ", ".join(left_off)))
    return items


# the plan items whose step takes the host into maintenance mode: a driver change reboots it, a
# host MIG mode change needs it; a reboot the host owes, a driver not loaded and new nvidia module
# options reboot it when the roll reboots (``reboot``); a vGPU mode change of a GPU in use needs the
# GPU empty (:func:`gpus_to_empty`)
_MAINTENANCE_ALWAYS = {("driver", "install"), ("driver", "upgrade"), ("driver", "downgrade"), ("mig_mode", "set")}
_MAINTENANCE_IF_REBOOT = {("vgpu_profiles", "reboot"), ("reboot", "reboot"), ("nvidia_module_options", "set")}
# the plan items for which esxi_gpu_config (reboot=true) takes the host through its own reboot path, and so
# out of the maintenance mode the roll opened for a vGPU mode change
_CONFIG_REBOOTS = {("nvidia_module_options", "set"), ("reboot", "reboot"), ("mig_mode", "set")}


def with_gpu_vms(items, gpus):
    """The vGPU mode items of a host's plan with ``vms``: the names of the powered-on VMs vSphere placed on
    the GPU (gpu_host_info's ``gpus[].vms``), None where the read did not list them (``vms`` not gathered:
    the GPU may be in use). A GPU that carries VMs says so in the item's reason. Other items are kept."""
    by_pci = dict((g.get("pci_id"), g) for g in gpus or [])
    out = []
    for item in as_changes(items):
        if item.field == "graphics.vgpu_mode" and item.detail("gpu") is not None:
            vms = (by_pci.get(item.detail("gpu")) or {}).get("vms")
            names = None if vms is None else [v.get("name") if isinstance(v, dict) else v for v in vms]
            reason = "%s (carries VMs %s)" % (item.reason, ", ".join(str(n) for n in names)) if names else None
            item = item.but(reason, vms=names)
        out.append(item)
    return out


def gpus_to_empty(items):
    """The GPUs (PCI addresses) of a host's plan whose vGPU mode changes while powered-on VMs may sit on
    them (``vms`` listed, or not read): the host refuses that change under a powered-on vGPU VM, so the
    roll empties them first (guest nodes drained, maintenance mode, the node VMs powered off or moved). A
    GPU read as empty changes in place; so does every GPU of an item without ``vms`` (not judged per GPU)."""
    return sorted(set(i.detail("gpu") for i in as_changes(items) if i.field == "graphics.vgpu_mode"
                      and i.action == "set" and "vms" in i.details and (i.detail("vms") is None or i.detail("vms"))))


def needs_maintenance(items, reboot=True):
    """Whether a host's turn (its :func:`host_plan` items) takes it into maintenance mode, so that the
    powered-on vGPU VMs vCenter cannot migrate go down with it: the test for draining their guest nodes.
    Graphics changes alone do not (they apply to VMs powered on later), except a vGPU mode change of a GPU
    in use (:func:`gpus_to_empty`)."""
    for item in as_changes(items):
        key = (item.field, item.action)
        if key in _MAINTENANCE_ALWAYS or (reboot and key in _MAINTENANCE_IF_REBOOT):
            return True
    return bool(gpus_to_empty(items))


def turn_window(items, reboot=True):
    """How a host's turn goes through maintenance mode, from its :func:`host_plan` items.

    Returns dict(``maintenance``: :func:`needs_maintenance`; ``empty_gpus``: :func:`gpus_to_empty`, the GPUs
    for which the roll itself takes the host into maintenance mode before its graphics step and out again
    after its last step; ``vgpu_modes``: the reasons of those GPUs' changes (check mode predicts them, as
    the host cannot be asked while its VMs still run); ``config_reboots``: whether the graphics step takes
    the host through its own reboot path when the roll reboots (new nvidia module options, a reboot owed,
    a MIG mode change), which ends that maintenance mode itself).
    """
    items = as_changes(items)
    empty = gpus_to_empty(items)
    return dict(maintenance=needs_maintenance(items, reboot), empty_gpus=empty,
                vgpu_modes=[i.reason for i in items if i.field == "graphics.vgpu_mode" and i.detail("gpu") in empty],
                config_reboots=bool(reboot) and any((i.field, i.action) in _CONFIG_REBOOTS for i in items))


def vms_going_down(host, hotmigrate):
    """The VMs of ``host`` (a gpu_host_info record with ``vgpu_vms``) that its maintenance takes down:
    the powered-on vGPU VMs, unless vCenter migrates them (``hotmigrate``). Each as {"name", "uuid"}."""
    if hotmigrate:
        return []
    return [dict(name=v.get("name"), uuid=v.get("uuid")) for v in host.get("vgpu_vms") or []
            if v.get("power_state") == "poweredOn"]


POWER_OFF_OPTION = "power_off_vgpu_vms=true (esxi_gpu_host_power_off_vgpu_vms in the esxi_gpu_host role)"


def vms_to_power_off(powered_on, hotmigrate, power_off):
    """The VMs a host's reboot must power off first: one rule for every path that reboots a host.

    ``powered_on``: the host's powered-on VMs holding vGPUs (names, or dicts with ``name``);
    ``hotmigrate``: whether vCenter migrates them (``vgpu.hotmigrate.enabled``: then none).
    When some cannot move and ``power_off`` is false, this refuses (an :class:`EsxiError`
    naming them and the option), so the caller stops before any change.
    """
    stuck = [] if hotmigrate else list(powered_on or [])
    if stuck and not power_off:
        names = [v["name"] if isinstance(v, dict) else v for v in stuck]
        raise EsxiError("%d powered-on VMs hold vGPUs and cannot be migrated (%s): power them off or move them "
                        "first, or set %s" % (len(names), ", ".join(names), POWER_OFF_OPTION))
    return stuck


def vms_left_off(host):
    """The VMs the collection's record says it powered off that are still off on the host now.

    Judged from the live VM list (``vgpu_vms`` with power states) when it was read, so a VM
    powered on by someone else, or moved away, is not owed anything.
    """
    recorded = list(host.get("vms_powered_off_by_collection") or [])
    vms = host.get("vgpu_vms")
    if vms is None:
        return recorded
    off = dict((v.get("moid"), v.get("name")) for v in vms if v.get("power_state") != "poweredOn")
    return [off[m] or m for m in recorded if m in off]


def _scheduler_items(host, scheduler, pcis, obj):
    if scheduler is None:
        return []
    if "nvidia_module_options" not in host:
        return [Change(obj, "nvidia_module_options", None, None, "unread", "nvidia module options not available")]
    policies = [scheduler.get("policy")] + [e.get("policy") for e in scheduler.get("per_gpu") or []]
    running_vgpus = [v for v in host.get("vgpu_vms") or [] if v.get("power_state") == "poweredOn"]
    if "fixed_share" in policies and running_vgpus:
        return [Change(obj, "scheduler", len(running_vgpus), "fixed_share", "refused",
                       "fixed share asked with %d powered-on vGPU VMs (checked per GPU by esxi_gpu_config)"
                       % len(running_vgpus))]
    options = host.get("nvidia_module_options")
    try:
        new, changed = scheduler_plan(options, scheduler, pcis)
    except EsxiError as exc:
        return [Change(obj, "nvidia_module_options", options, None, "refused", str(exc))]
    if not changed:
        return []
    return [Change(obj, "nvidia_module_options", options, new, "set",
                   "nvidia module options %r -> %r" % (options, new))]


def host_plan(host, target, graphics_type=None, assignment_policy=None, scheduler=None, allow_downgrade=False,
              driver=True, vgpu_mode=None):
    """:func:`host_changes`, with a refusal (settings that cannot be applied to this host) as a change."""
    try:
        return host_changes(host, target, graphics_type, assignment_policy, scheduler, allow_downgrade, driver,
                            vgpu_mode=vgpu_mode)
    except EsxiError as exc:
        return [refusal_change(host.get("name"), str(exc))]


def refusal_change(name, reason):
    """The change that says a host's plan cannot be made (field ``plan``, action ``refused``)."""
    return Change(host_object(name), "plan", None, None, "refused", reason)


def mig_change(name, before, after, reason):
    """The host MIG mode change of a host's plan (field ``mig_mode``, action ``set``)."""
    return Change(host_object(name), "mig_mode", before, after, "set", reason)


def reasons(items):
    """The changes of a plan in words (one line each), for messages."""
    return [i.reason for i in as_changes(items)]


def hosts_to_roll(hosts, target, graphics_type=None, assignment_policy=None, scheduler=None,
                  allow_downgrade=False, only=None, always=False, driver=True, mig=None, vgpu_mode=None):
    """{host name: [Change]} for the GPU hosts whose turn would change something.

    ``only`` limits the hosts (names); ``always`` (host MIG mode to set without a read of it)
    makes every selected GPU host take its turn. ``mig``: {host name: {"before": ..., "after": ...,
    "reason": ...}} for the hosts whose MIG mode differs (read over SSH by esxi_gpu_config in check
    mode): those take their turn for it.
    """
    out = {}
    for host in hosts or []:
        if not host.get("gpu_count") or (only and host["name"] not in only):
            continue
        items = host_plan(host, target, graphics_type, assignment_policy, scheduler, allow_downgrade, driver,
                          vgpu_mode=vgpu_mode)
        if (mig or {}).get(host["name"]):
            change = mig[host["name"]]
            items.append(mig_change(host["name"], change.get("before"), change.get("after"), change.get("reason")))
        elif always:
            items.append(mig_change(host["name"], None, None,
                                    "host MIG mode cannot be read: every host takes its turn"))
        if items:
            out[host["name"]] = items
    return out


# ---------------------------------------------------------------------------------------
# the esxi_gpu_host role's inputs and each host's turn, planned once
# ---------------------------------------------------------------------------------------

_TRUE_WORDS = ("true", "yes", "on", "1")


def _flag(value):
    """A role variable read as a boolean (YAML gives a bool; ``-e`` on the command line gives text)."""
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_WORDS
    return bool(value)


def host_inputs(role_vars, target=None):
    """The keyword arguments of :func:`host_plan` and :func:`hosts_to_roll` from the esxi_gpu_host role's
    variables (``role_vars``: ``esxi_gpu_host_*`` names, as the role gets them or derive() gives them for
    one cluster). An empty setting is None (left alone). ``target`` is the driver version the role's
    version gate settled on; without it, ``esxi_gpu_host_driver_version``. The one mapping from the role's
    variables to the host plan: the role's turns (:func:`host_turns`) and the audit both use it."""
    role_vars = role_vars or {}
    return dict(target=target or role_vars.get("esxi_gpu_host_driver_version") or None,
                graphics_type=role_vars.get("esxi_gpu_host_graphics_type") or None,
                assignment_policy=role_vars.get("esxi_gpu_host_assignment_policy") or None,
                scheduler=role_vars.get("esxi_gpu_host_scheduler") or None,
                allow_downgrade=_flag(role_vars.get("esxi_gpu_host_allow_downgrade", False)),
                vgpu_mode=role_vars.get("esxi_gpu_host_vgpu_mode") or None)


# the plan's parts, by item field (the turn's ``plan``)
_PLAN_PARTS = (
    ("driver", ("driver", "vgpu_profiles", "reboot")),
    ("graphics", ("graphics", "graphics.default_type", "graphics.device_type", "graphics.assignment_policy")),
    ("vgpu_mode", ("graphics.vgpu_mode",)),
    ("scheduler", ("nvidia_module_options", "scheduler")),
    ("mig", ("mig_mode",)),
    ("host", ("connection", "read", "maintenance_mode", "vms_powered_off", "plan")),
)
_DRIVER_INSTALLS = ("install", "upgrade", "downgrade")


def plan_parts(items):
    """A host's plan items grouped by part: driver, graphics, vgpu_mode, scheduler, mig (one item per GPU
    for the MIG mode and vGPU mode parts where the plan names GPUs), host (reachability, what an earlier run
    left). Every part is listed, empty when it changes nothing."""
    by_field = dict((field, part) for part, fields in _PLAN_PARTS for field in fields)
    out = dict((part, []) for part, _fields in _PLAN_PARTS)
    for item in as_changes(items):
        out[by_field.get(item.field, "host")].append(item)
    return out


def driver_step(host, items, target, direct=True, hotmigrate=False, bundle=None):
    """What the esxi_host_driver step of a host's turn does, judged from the cluster's one read (the
    module reads and plans again before it changes anything): ``action`` as the module names its plan
    (install, upgrade, downgrade; refused for a driver it refuses or a host it cannot read; else reboot for
    a reboot the host owes, exit_maintenance_mode for a host an earlier run left there, power_on_vms for
    VMs it left off; none), ``previous_version``
    (the driver installed now, None when none is: the graphics step then waits for the install) and
    ``maintenance_mode`` (where the host ends: as found, except a host an earlier run left there) and
    ``stuck_vms`` (the powered-on vGPU VMs its reboot must power off, names: :func:`vms_to_power_off`'s rule;
    without power_off_vgpu_vms the module refuses them); ``refusal``: why the module would refuse the step
    (a driver it refuses, a host it cannot read, an install without a usable ``bundle``), else None.
    ``direct=False`` (vLCM owns the driver): no driver step, the version is the image's."""
    in_mm = bool(host.get("maintenance_mode"))
    end_mm = in_mm and not host.get("maintenance_by_collection")
    if not direct:
        return dict(action="none", previous_version=target, maintenance_mode=in_mm, stuck_vms=[], refusal=None)
    installed = (host.get("driver") or {}).get("version")
    action, refusal = "none", None
    items = as_changes(items)
    fields = dict((i.field, i.action) for i in items)
    if "connection" in fields or "read" in fields or fields.get("driver") == "refused":
        # the module reads the host first and stops there, or refuses the version
        action = "refused"
        refusal = "; ".join(i.reason for i in items if i.field in ("connection", "read", "driver"))
    elif fields.get("driver") in _DRIVER_INSTALLS:
        action = fields["driver"]
        try:
            bundle_location(bundle)
            check_bundle_matches(bundle, target)
        except EsxiError as exc:
            action, refusal = "refused", str(exc)
    elif fields.get("reboot") == "reboot":
        action = "reboot"
    elif fields.get("maintenance_mode") == "exit":
        action = "exit_maintenance_mode"
    elif fields.get("vms_powered_off") == "power_on":
        action = "power_on_vms"
    stuck = [] if in_mm or action not in _DRIVER_INSTALLS + ("reboot",) else vms_going_down(host, hotmigrate)
    return dict(action=action, previous_version=installed, maintenance_mode=end_mm,
                stuck_vms=[v["name"] for v in stuck], refusal=refusal)


def turn_steps(items, window, driver_action, reboot=True, vlcm_per_host=False):
    """How the steps of a host's turn fit together, from its plan: ``mig`` (its MIG mode is rolled),
    ``vlcm_host`` (vLCM remediates this host alone in its turn: per-host remediation asked and its driver
    is off the image), ``config_reboot`` (the graphics step reboots the host itself: the roll reboots, no
    driver step or vLCM remediation reboots it after, or the driver step is only a reboot owed and MIG mode
    changes too, so one maintenance window takes the node VMs off once; in the window the roll opens for a
    vGPU mode change, only for what needs a reboot), ``mig_with_config`` (MIG mode is set in that reboot's
    window), ``window_ends_here`` (the maintenance window the roll opens for a vGPU mode change ends
    with the graphics step: no later step ends it) and ``config`` (the graphics step before the driver has
    something to do: the plan changes the graphics, the vGPU mode or the scheduler, could not read the
    graphics, or sets MIG mode in the step's reboot; or the host owes a reboot, which the step reports; where
    none of these holds, the role does not call it)."""
    items = as_changes(items)
    parts = plan_parts(items)
    mig = any(i.field == "mig_mode" for i in items)
    vlcm_host = bool(vlcm_per_host) and any(i.field == "driver" for i in items)
    empty = bool(window["empty_gpus"])
    config_reboot = (bool(reboot) and not vlcm_host and (driver_action == "none" or (driver_action == "reboot" and mig))
                     and (not empty or window["config_reboots"]))
    window_ends_here = empty and not window["config_reboots"] and driver_action == "none" and not vlcm_host and not mig
    # a reboot owed: the step reports the options it owes for (reboot_required)
    owed = any(i.field == "reboot" for i in items)
    config = bool(parts["graphics"] or parts["vgpu_mode"] or parts["scheduler"] or owed) or (config_reboot and mig)
    return dict(mig=mig, vlcm_host=vlcm_host, config_reboot=config_reboot, mig_with_config=config_reboot and mig,
                window_ends_here=window_ends_here, config=config)


def host_turns(info, spec):
    """Each GPU host's turn in a roll of one cluster, planned once from one ``gpu_host_info`` read.

    ``info``: gpu_host_info's result (``hosts`` read with driver, scheduler and vms gathered, and
    ``vgpu_hotmigrate``). ``spec`` (one mapping): ``vars``, the esxi_gpu_host role's variables
    (:func:`host_inputs`); ``target``, the driver version of the version gate; ``hosts``, the names to
    consider (empty: every GPU host); ``mig``, {host: its MIG mode change (before, after, reason)} for the
    hosts whose MIG mode is rolled; ``driver``, whether the driver is compared (false when vLCM remediates
    the whole cluster); ``direct``, whether esxi_host_driver installs it (lifecycle direct); ``reboot``,
    whether the roll reboots (``esxi_gpu_host_reboot``); ``vlcm_per_host``, whether vLCM remediates one
    host at a time in its turn.

    Returns {host name: turn} for the hosts whose turn changes something, each turn a dict of ``changes``
    (the :func:`host_plan` items, the MIG item last; not ``items``, which Jinja reads as the dict method),
    ``reasons``, ``plan`` (:func:`plan_parts`),
    ``turn_window`` (:func:`turn_window`), ``needs_maintenance``, ``gpus_to_empty``, ``drain_vms`` (the
    node VMs whose guest nodes are drained first: :func:`vms_going_down` when the turn takes the host into
    maintenance mode), ``driver`` (:func:`driver_step`), ``steps`` (:func:`turn_steps`), ``stranded``
    (:func:`mig_strands`: the VMs its MIG mode change leaves nowhere to run) and ``refusal`` (why the turn may
    not start, None when it may; also a ``plan`` ``refused`` change of ``changes``). The role decides order,
    drain, maintenance, reboot and verify from these; it recomputes none of them.
    """
    spec = spec or {}
    role_vars = spec.get("vars") or {}
    inputs = host_inputs(role_vars, spec.get("target"))
    reboot = _flag(spec.get("reboot", role_vars.get("esxi_gpu_host_reboot", True)))
    direct = _flag(spec.get("direct", role_vars.get("esxi_gpu_host_lifecycle", "direct") == "direct"))
    hotmigrate = bool((info or {}).get("vgpu_hotmigrate"))
    hosts = (info or {}).get("hosts") or []
    plans = hosts_to_roll(hosts, only=spec.get("hosts") or None, driver=_flag(spec.get("driver", True)),
                          mig=spec.get("mig") or None, **inputs)
    out = {}
    for host in hosts:
        if host.get("name") not in plans:
            continue
        items = plans[host["name"]]
        change = (spec.get("mig") or {}).get(host["name"])
        stranded = mig_strands(host, change, hosts, hotmigrate, inputs["vgpu_mode"]) if change else []
        refusal = mig_strand_refusal(host, change, stranded, hotmigrate) if stranded else None
        if refusal:
            items = items + [refusal_change(host["name"], refusal)]
        window = turn_window(items, reboot)
        step = driver_step(host, items, inputs["target"], direct, hotmigrate,
                           role_vars.get("esxi_gpu_host_driver_bundle") or None)
        out[host["name"]] = dict(
            changes=items, reasons=reasons(items), plan=plan_parts(items), turn_window=window,
            needs_maintenance=window["maintenance"], gpus_to_empty=window["empty_gpus"],
            drain_vms=vms_going_down(host, hotmigrate) if window["maintenance"] else [],
            driver=step, steps=turn_steps(items, window, step["action"], reboot, _flag(spec.get("vlcm_per_host"))),
            stranded=stranded, refusal=refusal)
    return out


# ---------------------------------------------------------------------------------------
# a MIG mode change under the VMs of a GPU: where they go when they run again
# ---------------------------------------------------------------------------------------

# the design key (clusters[]) and the role variable that pin a cluster's MIG GPUs by host name
MIG_PIN_KEY = ("mig_geometry of the cluster in the design (esxi_gpu_host_mig_geometry), as a mapping of host name "
               "to the GPU indexes in MIG mode")


def _profile_kind(profile):
    """True for a MIG-backed vGPU profile, False for a time-sliced one, None for a name that does not parse."""
    try:
        return _nvidia.parse_profile(profile).mig_backed
    except _nvidia.NvidiaError:
        return None


def _card(gpu, mig, mixed):
    """One GPU as a power-on finds it: its model (None where the catalog lacks it), MIG mode on or off, several
    time-sliced sizes at once (mixedSize) or one, nothing placed yet."""
    try:
        model = _nvidia.gpu_model(gpu.get("model"))
    except _nvidia.NvidiaError:
        model = None
    memory = model.memory_gb if model is not None else (gpu.get("memory_mb") or 0) // 1024
    return dict(index=gpu.get("index"), model=model, memory_gb=memory, mig=bool(mig), mixed=bool(mixed),
                mix=[], profiles=[])


def _card_takes(card, profile):
    """Whether one more vGPU of ``profile`` fits ``card`` next to what it holds, by the vGPU manager's rules: a
    MIG-backed vGPU only on a GPU in MIG mode, as a GPU instance its mix has room for; a time-sliced one only
    on a GPU out of it, one size per GPU in sameSize mode, within its frame buffer. A model the catalog lacks
    is judged by the mode alone."""
    kind = _profile_kind(profile)
    if kind is None or kind != card["mig"]:
        return False
    model = card["model"]
    if model is None:
        return True
    try:
        if kind:
            instance = _nvidia.vgpu_mig_profile(profile, model).name
            return _nvidia.mig_fits(model, card["mix"] + [instance])
        parsed = _nvidia.parse_profile(profile)
    except _nvidia.NvidiaError:
        return False
    if model.vgpu_stems and parsed.gpu not in model.vgpu_stems:
        return False
    if not card["mixed"] and any(p != profile.lower() for p in card["profiles"]):
        return False
    used = sum(_nvidia.parse_profile(p).framebuffer_gb for p in card["profiles"])
    return used + parsed.framebuffer_gb <= card["memory_gb"]


def _card_add(card, profile):
    card["profiles"].append(profile.lower())
    if card["mig"] and card["model"] is not None:
        card["mix"].append(_nvidia.vgpu_mig_profile(profile, card["model"]).name)


def _place_vm(cards, profiles):
    """Put every vGPU of one VM on a distinct card of one host (partly used cards first); whether it fits (the
    cards keep it when it does)."""
    chosen = []
    for profile in sorted(profiles):
        free = [c for c in cards if c["index"] not in chosen and _card_takes(c, profile)]
        if not free:
            return False
        free.sort(key=lambda c: (not c["profiles"], c["index"]))
        chosen.append(free[0]["index"])
    by_index = dict((c["index"], c) for c in cards)
    for profile, index in zip(sorted(profiles), chosen):
        _card_add(by_index[index], profile)
    return True


def _mixed(gpu, vgpu_mode):
    """Whether a GPU out of MIG mode takes several time-sliced sizes: the design's vGPU mode where it sets one,
    else the GPU's own (configured, or as shown)."""
    if vgpu_mode:
        return vgpu_mode == "mixed_size"
    return "mixedSize" in (gpu.get("configured_vgpu_mode"), gpu.get("vgpu_mode"))


def _placed(host):
    """[(VM key, name, {GPU index: [profiles]})] of the VMs vSphere placed on the host's GPUs (gpu_host_info's
    ``gpus[].vms``: the powered-on VMs), in name order."""
    out = {}
    for gpu in host.get("gpus") or []:
        for vm in gpu.get("vms") or []:
            vm = vm if isinstance(vm, dict) else dict(name=vm)
            key = vm.get("moid") or vm.get("name")
            entry = out.setdefault(key, (key, vm.get("name") or key, {}))
            entry[2].setdefault(gpu.get("index"), []).extend(str(p) for p in vm.get("profiles") or [])
    return sorted(out.values(), key=lambda e: (str(e[1]), str(e[0])))


def _host_cards(host, mig_after=None, vgpu_mode=None):
    """The cards of a host, each GPU in its MIG mode after the turn (``mig_after``: {index: on}; a GPU it does
    not name keeps its mode) and out of MIG mode in the time-sliced mode the design gives."""
    cards = []
    for gpu in host.get("gpus") or []:
        mig = (mig_after or {}).get(gpu.get("index"))
        if mig is None:
            mig = gpu.get("vgpu_mode") == "multiInstanceGpu" or gpu.get("mig") == "enabled"
        cards.append(_card(gpu, mig, _mixed(gpu, vgpu_mode)))
    return cards


def _mig_after(mig, host=None):
    """({GPU index: MIG on after the change}, [the indexes whose mode changes: set now, or pending since an
    earlier run]) from a host's MIG change (esxi_gpu_config's report: ``before`` / ``after`` by index as text,
    enabled|disabled; ``enabled`` / ``disabled``, the indexes by direction). A GPU named by its PCI address is
    found among the ``host``'s GPUs; modes may be booleans too."""
    mig = mig or {}
    by_pci = dict((str(g.get("pci_id")).lower(), g.get("index")) for g in (host or {}).get("gpus") or [])

    def modes(part):
        out = {}
        for key, mode in (mig.get(part) or {}).items():
            index = key if isinstance(key, int) else int(key) if str(key).isdigit() else by_pci.get(str(key).lower())
            if index is not None:
                out[index] = mode is True or mode == "enabled"
        return out

    after, before = modes("after"), modes("before")
    changing = set(i for i in (mig.get("enabled") or []) + (mig.get("disabled") or []) if isinstance(i, int))
    changing |= set(i for i in after if before.get(i) != after[i])
    return after, sorted(changing)


def _vgpus(on):
    return [p for _index, profiles in sorted(on.items()) for p in profiles]


def mig_strands(host, mig, others=None, hotmigrate=False, vgpu_mode=None):
    """The powered-on VMs that a host's MIG mode change (``mig``: esxi_gpu_config's report of the host) leaves
    nowhere to run: each holds a vGPU of the other kind on a GPU whose MIG mode changes (a MIG-backed vGPU on a
    GPU leaving MIG mode, a time-sliced one on a GPU entering it), and where it runs again no GPU of the right
    kind has room for all its vGPUs. Without vGPU hot migration the turn powers the host's vGPU VMs off and on
    again on the host: they are placed on its GPUs as the turn leaves them (``vgpu_mode``: the design's
    time-sliced mode), the VMs that keep fitting their GPUs first; with it (``hotmigrate``) vCenter moves them
    to the other hosts of the cluster (``others``: gpu_host_info records; those connected and out of
    maintenance mode), as they are now.

    Returns [{"vm", "profiles", "gpus" (the changing GPUs it holds a vGPU of the other kind on),
    "pci_ids"}] in name order; [] when nothing is stranded."""
    after, changing = _mig_after(mig, host)
    if not changing:
        return []
    by_index = dict((g.get("index"), g) for g in host.get("gpus") or [])
    placed = _placed(host)
    crossing = {}
    for key, _name, on in placed:
        bad = [i for i in changing if any(_profile_kind(p) is (not after.get(i)) for p in on.get(i) or [])]
        if bad:
            crossing[key] = bad
    if not crossing:
        return []
    pools = []
    if hotmigrate:
        for other in others or []:
            if other.get("name") == host.get("name") or other.get("maintenance_mode") \
                    or other.get("connection_state", "connected") != "connected":
                continue
            cards = _host_cards(other)
            for _key, _name, on in _placed(other):
                _place_vm(cards, _vgpus(on))
            pools.append(cards)
    else:
        pools.append(_host_cards(host, after, vgpu_mode))
        for key, _name, on in placed:  # what keeps fitting its GPUs runs again first
            if key not in crossing:
                _place_vm(pools[0], _vgpus(on))
    out = []
    for key, name, on in placed:
        if key in crossing and not any(_place_vm(cards, _vgpus(on)) for cards in pools):
            out.append(dict(vm=name, profiles=_vgpus(on), gpus=crossing[key],
                            pci_ids=[by_index.get(i, {}).get("pci_id") for i in crossing[key]]))
    return out


def mig_strand_refusal(host, mig, stranded, hotmigrate=False):
    """Why a host's turn whose MIG mode change strands ``stranded`` (:func:`mig_strands`) may not start, in
    words: the host, the GPUs and their change, the VMs and their profiles, and the way out."""
    after, _changing = _mig_after(mig, host)
    gpus = sorted(set(i for s in stranded for i in s["gpus"]))
    change = ", ".join("GPU %d MIG mode %s -> %s" % (i, mig_word(not after.get(i)), mig_word(bool(after.get(i))))
                       for i in gpus)
    vms = "; ".join("%s (%s on GPU %s)" % (s["vm"], ", ".join(s["profiles"]), ", ".join(str(i) for i in s["gpus"]))
                    for s in stranded)
    if hotmigrate:
        where = ("no other host of the cluster has a GPU of their kind with room for them (vCenter moves them there "
                 "when the host enters maintenance mode)")
    else:
        where = ("the turn powers them off and on again on host %s, and no GPU of it in their mode after the turn has "
                 "room for them (a MIG-backed vGPU runs only on a GPU in MIG mode, a time-sliced one only on a GPU "
                 "out of it): vSphere would refuse their power-on" % host.get("name"))
    return ("host %s: %s would strand powered-on VMs holding vGPUs of the other kind: %s; %s. Move them to another "
            "host or power them off first, or keep the MIG mode of GPU %s of host %s in the design: pin the MIG "
            "GPUs by host name in the %s" % (host.get("name"), change, vms, where, ", ".join(str(i) for i in gpus),
                                             host.get("name"), MIG_PIN_KEY))


# ---------------------------------------------------------------------------------------
# host MIG mode over SSH (the vSphere API has none)
# ---------------------------------------------------------------------------------------


def mig_mode_commands(enabled, gpu_indexes=None):
    """The nvidia-smi commands that set MIG mode, quoted for the ESXi shell.

    ``gpu_indexes``: GPU indexes as nvidia-smi numbers them (None: every GPU). MIG mode
    takes effect after a GPU reset or a host reboot.
    """
    if not isinstance(enabled, bool):
        raise EsxiError("MIG mode must be true or false, not %r" % (enabled,))
    if gpu_indexes is None:
        return ["nvidia-smi -mig %d" % int(enabled)]
    cmds = []
    for index in gpu_indexes:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 64:
            raise EsxiError("Invalid GPU index %r: a whole number from 0 to 63 is required" % (index,))
        cmds.append(" ".join(shlex.quote(a) for a in ("nvidia-smi", "-i", str(index), "-mig", str(int(enabled)))))
    return cmds


def mig_query_command():
    """Read back the current and pending MIG mode of every GPU."""
    return "nvidia-smi --query-gpu=index,pci.bus_id,mig.mode.current,mig.mode.pending --format=csv,noheader"


def parse_mig_query(text):
    """Parse :func:`mig_query_command` output into [{index, pci_id, current, pending, supported}].
    A GPU without MIG (nvidia-smi prints ``[N/A]``) is ``supported`` false."""
    out = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        out.append(dict(index=int(parts[0]), pci_id=parts[1], current=parts[2] == "Enabled",
                        pending=parts[3] == "Enabled", supported=parts[2] in ("Enabled", "Disabled")))
    return out


def mig_plan(gpus, enabled, gpu_indexes=None):
    """What a host's GPUs (:func:`parse_mig_query` rows) need for MIG mode ``enabled``.

    Returns {"set": [indexes whose pending mode differs: nvidia-smi -i <index> -mig], "reset": [indexes
    whose current mode differs: the mode runs only after a GPU reset or host reboot], "before": {index:
    current}}. ``gpu_indexes`` limits the GPUs (None: all). A GPU without MIG is left alone when MIG is to
    be disabled and refused (:class:`EsxiError`) when it is to be enabled; so is an index the host lacks.
    """
    if not isinstance(enabled, bool):
        raise EsxiError("MIG mode must be true or false, not %r" % (enabled,))
    by_index = dict((g["index"], g) for g in gpus or [])
    indexes = sorted(by_index) if gpu_indexes is None else list(gpu_indexes)
    missing = [i for i in indexes if i not in by_index]
    if missing:
        raise EsxiError("no GPU with index %s (nvidia-smi lists %s)" % (
            ", ".join(str(i) for i in missing), ", ".join(str(i) for i in sorted(by_index)) or "none"))
    unsupported = [i for i in indexes if not by_index[i].get("supported", True)]
    if enabled and unsupported:
        raise EsxiError("GPU %s cannot run MIG (nvidia-smi reads its MIG mode as N/A)"
                        % ", ".join(str(i) for i in unsupported))
    wanted = [by_index[i] for i in indexes if by_index[i].get("supported", True)]
    return dict(set=[g["index"] for g in wanted if g["pending"] != enabled],
                reset=[g["index"] for g in wanted if g["current"] != enabled],
                before=dict((g["index"], g["current"]) for g in wanted))


def mig_geometry_for(geometry, host_names):
    """Which GPUs of each host run MIG: ``{host name: [GPU indexes]}`` for every name of ``host_names``.

    ``geometry`` is what the design derives or gives (``esxi_gpu_host_mig_geometry``): a list with one
    entry per host position (the cluster's GPU hosts in name order), each a list of GPU indexes in MIG
    mode; or a mapping of host name to GPU indexes (hosts it does not name run no MIG). None or empty:
    no host runs MIG. Positions beyond the hosts are ignored; hosts beyond the positions run no MIG.
    """
    names = sorted(host_names or [])
    if not geometry:
        return dict((name, []) for name in names)
    if isinstance(geometry, dict):
        unknown = sorted(set(geometry) - set(names))
        if unknown:
            raise EsxiError("the MIG geometry names hosts the cluster does not have: %s (its hosts: %s)"
                            % (", ".join(unknown), ", ".join(names) or "none"))
        layout = dict((name, geometry.get(name) or []) for name in names)
    elif isinstance(geometry, (list, tuple)):
        layout = dict((name, (geometry[i] if i < len(geometry) else None) or []) for i, name in enumerate(names))
    else:
        raise EsxiError("the MIG geometry must be a list per host position or a mapping of host names, not %r"
                        % (geometry,))
    out = {}
    for name, indexes in layout.items():
        if not isinstance(indexes, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                             and i >= 0 for i in indexes):
            raise EsxiError("the MIG GPUs of host %s must be a list of GPU indexes 0 or more, not %r"
                            % (name, indexes))
        out[name] = sorted(set(indexes))
    return out


def mig_geometry_plan(gpus, mig_indexes):
    """What a host's GPUs (:func:`parse_mig_query` rows) need so that exactly ``mig_indexes`` run MIG.

    Returns {"enable": [indexes whose pending mode is off and must be on], "disable": [indexes whose
    pending mode is on and must be off], "reset": [indexes whose current mode differs: it runs only
    after a GPU reset or host reboot], "before": {index: current}, "after": {index: wanted}}. A GPU
    without MIG (``supported`` false) may not be asked for MIG (:class:`EsxiError`), nor may an index
    the host lacks; it is otherwise left alone.
    """
    by_index = dict((g["index"], g) for g in gpus or [])
    wanted = set(mig_indexes or [])
    missing = sorted(i for i in wanted if i not in by_index)
    if missing:
        raise EsxiError("no GPU with index %s (the host lists %s)" % (
            ", ".join(str(i) for i in missing), ", ".join(str(i) for i in sorted(by_index)) or "none"))
    unsupported = sorted(i for i in wanted if not by_index[i].get("supported", True))
    if unsupported:
        raise EsxiError("GPU %s cannot run MIG (its MIG mode reads N/A)" % ", ".join(str(i) for i in unsupported))
    rows = [g for _i, g in sorted(by_index.items()) if g.get("supported", True)]
    return dict(enable=[g["index"] for g in rows if g["index"] in wanted and not g["pending"]],
                disable=[g["index"] for g in rows if g["index"] not in wanted and g["pending"]],
                reset=[g["index"] for g in rows if g["current"] != (g["index"] in wanted)],
                before=dict((g["index"], g["current"]) for g in rows),
                after=dict((g["index"], g["index"] in wanted) for g in rows))


def mig_word(enabled):
    """MIG mode as the design and the role name it."""
    return "enabled" if enabled else "disabled"


# ---------------------------------------------------------------------------------------
# what a run leaves on a host: running vs staged, and the collection's own record
# ---------------------------------------------------------------------------------------

# custom attribute on each host the collection changed: {"maintenance": "<by> <when>",
# "options_boot": "<boot time when the nvidia module options were changed>", ..., "run": "<the run
# that last changed the record: the run lease's holder>"}
HOST_STATE_FIELD = "gpupool.vcf.host-state"


def parse_host_state(value):
    """The collection's record on a host (a JSON object; anything else reads as empty)."""
    try:
        state = json.loads(value) if value else {}
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def format_host_state(state):
    """The record as written back: compact JSON of the keys set, "" when nothing is left."""
    state = dict((k, v) for k, v in (state or {}).items() if v)
    return json.dumps(state, sort_keys=True, separators=(",", ":")) if state else ""


def boot_stamp(boot_time):
    """A host's ``runtime.bootTime`` as the text the record keeps (None when unknown)."""
    if boot_time is None:
        return None
    return boot_time.isoformat() if hasattr(boot_time, "isoformat") else str(boot_time)


def pending_reboot(reboot_required, boot_time, state, running=None, installed=None):
    """Why the host still owes a reboot: what is staged and not running. [] when nothing.

    ``reboot_required``: the host's ``summary.rebootRequired`` (set by ESXi after an install
    that takes effect at the next boot); ``state``: the collection's record, whose
    ``options_boot`` is the boot the nvidia module options were changed in (they load at the
    next boot); ``running`` / ``installed``: driver versions when known.
    """
    reasons = []
    if running and installed and compare_versions(running, installed) != 0:
        reasons.append("driver %s installed but %s running (staged, not running until a reboot)"
                       % (parse_driver_version(installed).short, parse_driver_version(running).short))
    elif reboot_required:
        reasons.append("reboot pending on the host (staged software not running)")
    stamp = (state or {}).get("options_boot")
    if stamp and stamp == boot_stamp(boot_time):
        reasons.append("nvidia module options changed since the last boot (not loaded until a reboot)")
    return reasons
