# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure NVIDIA logic for gpupool.vcf: no I/O, no Ansible imports, standard library only.

Contents

* vGPU profile names: ``parse_profile`` / ``format_profile``.
* MIG catalog per GPU model and MIG placement: ``gpu_model``, ``mig_profiles``,
  ``mig_fits``, ``mig_placement``, ``vgpu_mig_profile``.
* vGPU scheduler registry value (RmPVMRL): ``encode_scheduler``, ``decode_scheduler``,
  ``format_rmpvmrl``.
* ESXi ``nvidia`` kernel module option string: ``parse_module_options``,
  ``format_module_options``, ``get_scheduler``, ``set_scheduler``.
* ``vgpu_fixed_share_allowed``.

Every error is an ``NvidiaError`` (a ``ValueError``) whose message says what is wrong and
what would be valid.

vGPU profile names
    vSphere shows ``grid_<type>`` (older GPUs) or ``nvidia_<type>`` (newer GPUs), the NVIDIA
    type in lower case. NVIDIA type = ``<stem>-[<slices>-]<FB GB><series>[ME]``. Rules
    enforced here:

    * the prefix is ``grid_`` or ``nvidia_``; input is accepted in any case;
    * the stem is letters and digits and starts with a letter (``A100D``, ``H100XM``, ``L40S``);
    * MIG slices, when present, are 1, 2, 3, 4 or 7;
    * the framebuffer is a positive whole number of GB without leading zeros (legacy
      sub-GB types such as ``-0B`` and the ``B4`` display variants are not supported);
    * series is C (compute), Q (vWS), B (vPC) or A (vApps);
    * the media extension ``ME`` is only valid on a MIG-backed profile of exactly one slice
      (``H100XM-1-10CME``); it is accepted for any series.

MIG catalog and placement
    The geometry is the one ``nvidia-smi mig -lgipp`` reports: eight memory-slot positions;
    a GPU instance occupies a contiguous run of slots that must begin at one of its allowed
    starts, and the compute slices of all instances add up to at most seven. The small
    one-slice profile (``1g.10gb`` on A100-80GB) takes 1 slot at starts 0..6, the large
    one-slice profile (``1g.20gb``) 2 slots at 0, 2, 4, 6, ``2g`` 2 slots at 0, 2, 4, ``3g``
    4 slots at 0, 4, ``4g`` 4 slots at 0 and ``7g`` all 8 slots. The ``+me`` variant has the
    geometry of the small one-slice profile and at most one exists per GPU (it also counts
    against the small profile's own limit of seven). Placement is solved by backtracking,
    largest instance first.

    vGPU type stems and prefixes per model (choices; check against the driver's list of
    vGPU types before relying on the ones marked "assumed"): A100-40GB ``A100`` (grid_),
    A100-80GB ``A100D``/``A100DX`` (grid_), H100-80GB ``H100``/``H100XM`` (nvidia_),
    H100-94GB ``H100L``/``H100XL`` (nvidia_, assumed), H200-141GB ``H200X``/``H200NVL``
    (nvidia_, NVL stem assumed), B200 ``B200X`` (nvidia_, assumed); GH200 is not a vSphere
    vGPU target and has no stem. Non-MIG models: L40S, L4 (nvidia_), A40, A16, T4 (grid_).
    PCI device ids are listed only where the source facts give them.

Scheduler (RmPVMRL) decisions
    Layout of the 32-bit value: bits 0-7 policy (``0x01`` equal share, ``0x11`` fixed share,
    ``0x00`` best effort only when the whole value is zero); time-slice form
    ``0x00TT00P1`` with TT = 1..30 ms (TT = 0 means the driver default, written as plain
    ``0x01`` / ``0x11``); strict round-robin form ``0xAAFFF0P1`` with averaging factor AA
    (1..60) and frequency FFF (63..960 Hz).

    1. Equal share with a custom slice: NVIDIA's guide writes ``0x00030003`` in one place and
       ``0x00030001`` in others. The encoder always emits ``0x00TT0001``. The decoder also
       accepts ``0x00TT0003`` (TT 1..30 only) as equal share with that slice, and reports it
       as non-canonical (``canonical`` is False, ``hex`` gives ``0x00TT0001``) so an audit
       can suggest the canonical value. A bare ``0x03`` is rejected.
    2. The time-slice and strict round-robin forms overlap. A value whose AA byte (bits
       24-31) is zero and whose bits 12-15 are zero is read as the time-slice form (so
       ``0x00180011`` is fixed share 24 ms, not a 384 Hz frequency). The encoder never emits
       AA = 0 for strict round-robin: it requires both ``averaging_factor`` and
       ``frequency_hz``. A value with AA = 0 and non-zero bits 12-15 is read as strict
       round-robin with the driver's default averaging factor (``averaging_factor`` None)
       and reported non-canonical, the canonical form spelling out AA = 33 (0x21), which
       the guide gives as that default.

    ``strict_round_robin`` is True only for the ``0xAAFFF0P1`` form. ``format_rmpvmrl``
    always writes eight hex digits.

Kernel module options
    The option string is space-separated ``key=value`` tokens; values may contain ``=`` and
    ``;`` but no whitespace or quotes. ``set_scheduler`` merges ``RmPVMRL`` into
    ``NVreg_RegistryDwords`` and ``NVreg_RegistryDwordsPerDevice`` and leaves every other
    option and registry entry as it was. Best effort (None, 0 or a best-effort policy) is
    written by removing ``RmPVMRL`` (and the option when nothing else is left), since best
    effort is the driver default. When the result means the same as the input, the input
    string is returned unchanged, so a second application never reports a change.
"""

from __future__ import (absolute_import, division, print_function)
from __future__ import annotations

__metaclass__ = type

import re
from collections import OrderedDict
from dataclasses import dataclass, field


class NvidiaError(ValueError):
    """Invalid NVIDIA profile name, MIG mix, scheduler value or module option string."""


# ---------------------------------------------------------------------------------------
# vGPU profile names
# ---------------------------------------------------------------------------------------

PROFILE_PREFIXES = ("grid", "nvidia")
PROFILE_SERIES = ("C", "Q", "B", "A")
MIG_SLICE_COUNTS = (1, 2, 3, 4, 7)

_SERIES_MEANING = {
    "C": "compute (vCS / NVIDIA AI Enterprise)",
    "Q": "virtual workstation (vWS)",
    "B": "virtual PC (vPC)",
    "A": "virtual applications (vApps)",
}
_STEM_RE = re.compile(r"^[a-z][a-z0-9]*$")
_NUMBER_RE = re.compile(r"^[1-9][0-9]*$")
_FB_SERIES_RE = re.compile(r"^([0-9]+)([a-z]*)$")
_PROFILE_FORM = "<grid|nvidia>_<gpu>-[<slices>-]<framebuffer GB><C|Q|B|A>[me]"


@dataclass(frozen=True)
class VgpuProfile:
    """A parsed vGPU profile name (``nvidia_h100xm-1-10cme``)."""

    name: str
    prefix: str
    gpu: str
    mig_slices: int | None
    framebuffer_gb: int
    series: str
    media_extension: bool = False

    @property
    def mig_backed(self) -> bool:
        return self.mig_slices is not None

    @property
    def time_sliced(self) -> bool:
        return self.mig_slices is None

    @property
    def nvidia_type(self) -> str:
        """NVIDIA's type name, e.g. ``H100XM-1-10CME``."""
        slices = "%d-" % self.mig_slices if self.mig_slices is not None else ""
        me = "ME" if self.media_extension else ""
        return "%s-%s%d%s%s" % (self.gpu, slices, self.framebuffer_gb, self.series, me)

    @property
    def vsphere_name(self) -> str:
        """The canonical (lower-case) vSphere string."""
        return "%s_%s" % (self.prefix, self.nvidia_type.lower())

    @property
    def mig_profile(self) -> str | None:
        """The MIG profile behind a MIG-backed type (``1g.10gb``, ``1g.10gb+me``), else None."""
        if self.mig_slices is None:
            return None
        return "%dg.%dgb%s" % (self.mig_slices, self.framebuffer_gb, "+me" if self.media_extension else "")


def _profile_error(name, what):
    return NvidiaError("Invalid vGPU profile %r: %s; expected %s, e.g. nvidia_h100xm-80c, "
                       "nvidia_h100xm-1-10c, nvidia_h100xm-1-10cme or grid_a100d-40c"
                       % (name, what, _PROFILE_FORM))


def parse_profile(name: str) -> VgpuProfile:
    """Parse a vSphere vGPU profile name (any case) into a ``VgpuProfile``."""
    if isinstance(name, VgpuProfile):
        return name
    if not isinstance(name, str) or not name:
        raise _profile_error(name, "not a non-empty string")
    if name != name.strip() or any(c.isspace() for c in name):
        raise _profile_error(name, "contains whitespace")
    low = name.lower()
    prefix, sep, rest = low.partition("_")
    if not sep or prefix not in PROFILE_PREFIXES:
        raise _profile_error(name, "missing prefix grid_ or nvidia_")
    parts = rest.split("-")
    if len(parts) not in (2, 3):
        raise _profile_error(name, "wrong number of '-' separated fields (%d)" % len(parts))
    stem = parts[0]
    if not _STEM_RE.match(stem):
        raise _profile_error(name, "GPU name %r must be letters and digits starting with a letter" % stem)
    slices = None
    if len(parts) == 3:
        if not _NUMBER_RE.match(parts[1]) or int(parts[1]) not in MIG_SLICE_COUNTS:
            raise _profile_error(name, "MIG slice count %r is not one of %s"
                                 % (parts[1], ", ".join(str(s) for s in MIG_SLICE_COUNTS)))
        slices = int(parts[1])
    match = _FB_SERIES_RE.match(parts[-1])
    if not match:
        raise _profile_error(name, "%r is not <framebuffer GB><series>" % parts[-1])
    fb_text, suffix = match.groups()
    if not _NUMBER_RE.match(fb_text):
        raise _profile_error(name, "framebuffer %r must be a positive number of GB without leading zeros"
                             % fb_text)
    if not suffix or suffix[0].upper() not in PROFILE_SERIES:
        raise _profile_error(name, "unknown series %r; valid series are %s"
                             % (suffix[:1] or "", ", ".join("%s %s" % (s, _SERIES_MEANING[s])
                                                            for s in PROFILE_SERIES)))
    series = suffix[0].upper()
    extra = suffix[1:]
    if extra not in ("", "me"):
        raise _profile_error(name, "unknown suffix %r after the series; only 'me' (media extension) is valid"
                             % extra)
    me = extra == "me"
    if me and slices != 1:
        raise _profile_error(name, "the media extension 'me' is only valid on a MIG-backed profile of "
                                   "exactly one slice (<gpu>-1-<fb><series>me)")
    return VgpuProfile(name=name, prefix=prefix, gpu=stem.upper(), mig_slices=slices,
                       framebuffer_gb=int(fb_text), series=series, media_extension=me)


def format_profile(gpu, framebuffer_gb: int | None = None, series: str | None = None,
                   mig_slices: int | None = None, media_extension: bool = False,
                   prefix: str | None = None) -> str:
    """Build the vSphere profile name, the inverse of ``parse_profile``.

    ``gpu`` is a stem (``H100XM``) or a ``VgpuProfile`` (its fields are used). Without
    ``prefix`` the prefix of the catalog model that owns the stem is used.
    """
    if isinstance(gpu, VgpuProfile):
        return gpu.vsphere_name
    if not isinstance(gpu, str) or not _STEM_RE.match(gpu.lower()):
        raise NvidiaError("Invalid GPU stem %r: letters and digits starting with a letter, e.g. H100XM" % (gpu,))
    if prefix is None:
        model = gpu_model_for_stem(gpu)
        if model is None:
            raise NvidiaError("No prefix given and GPU stem %r is not in the catalog (known stems: %s); "
                              "pass prefix='grid' or prefix='nvidia'" % (gpu, ", ".join(known_stems())))
        prefix = model.vgpu_prefix
    if not isinstance(prefix, str) or prefix.lower() not in PROFILE_PREFIXES:
        raise NvidiaError("Invalid prefix %r: valid prefixes are grid, nvidia" % (prefix,))
    for label, value in (("framebuffer_gb", framebuffer_gb), ("mig_slices", mig_slices)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise NvidiaError("Invalid %s %r: a whole number is required" % (label, value))
    if framebuffer_gb is None:
        raise NvidiaError("framebuffer_gb is required (a positive whole number of GB)")
    if not isinstance(series, str):
        raise NvidiaError("Invalid series %r: valid series are %s" % (series, ", ".join(PROFILE_SERIES)))
    slices = "" if mig_slices is None else "%d-" % mig_slices
    name = "%s_%s-%s%d%s%s" % (prefix.lower(), gpu.lower(), slices, framebuffer_gb, series.lower(),
                               "me" if media_extension else "")
    return parse_profile(name).vsphere_name


# ---------------------------------------------------------------------------------------
# MIG catalog
# ---------------------------------------------------------------------------------------

MIG_MEMORY_SLOTS = 8
MIG_COMPUTE_SLICES = 7


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of a model, with its placement rules."""

    name: str
    compute_slices: int
    memory_slices: int
    max_instances: int
    framebuffer_gb: int
    starts: tuple
    media_extension: bool = False

    @property
    def size(self) -> int:
        """Memory slots occupied (of eight)."""
        return self.memory_slices


@dataclass(frozen=True)
class GpuModel:
    """A GPU model: memory, PCI device ids, vGPU stems and MIG profiles (empty: no MIG)."""

    name: str
    memory_gb: int
    vgpu_prefix: str
    vgpu_stems: tuple = ()
    pci_device_ids: tuple = ()
    mig: tuple = field(default=(), repr=False)

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig)

    def mig_profile(self, name: str) -> MigProfile:
        key = _mig_key(name)
        for profile in self.mig:
            if profile.name == key:
                return profile
        if not self.mig:
            raise NvidiaError("GPU model %s does not support MIG; MIG-capable models: %s"
                              % (self.name, ", ".join(m.name for m in _MODELS if m.mig)))
        raise NvidiaError("MIG profile %r does not exist on %s; valid profiles: %s"
                          % (name, self.name, ", ".join(p.name for p in self.mig)))


# (compute slices, memory slots, max instances, allowed starts) per profile shape.
_SHAPES = (
    ("1g_small", 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
    ("1g_small+me", 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
    ("1g_large", 1, 2, 4, (0, 2, 4, 6)),
    ("2g", 2, 2, 3, (0, 2, 4)),
    ("3g", 3, 4, 2, (0, 4)),
    ("4g", 4, 4, 1, (0,)),
    ("7g", 7, 8, 1, (0,)),
)


def _mig_catalog(small, large, half, full):
    """Build a model's MIG profiles from its four framebuffer sizes (GB)."""
    sizes = {"1g_small": small, "1g_small+me": small, "1g_large": large, "2g": large,
             "3g": half, "4g": half, "7g": full}
    profiles = []
    for shape, compute, memory, max_instances, starts in _SHAPES:
        me = shape.endswith("+me")
        name = "%dg.%dgb%s" % (compute, sizes[shape], "+me" if me else "")
        profiles.append(MigProfile(name=name, compute_slices=compute, memory_slices=memory,
                                   max_instances=max_instances, framebuffer_gb=sizes[shape],
                                   starts=starts, media_extension=me))
    return tuple(profiles)


_MODELS = (
    GpuModel("A100-40GB", 40, "grid", ("A100",), (0x20B0, 0x20B1, 0x20F1, 0x20F6),
             _mig_catalog(5, 10, 20, 40)),
    GpuModel("A100-80GB", 80, "grid", ("A100D", "A100DX"), (0x20B2, 0x20B5, 0x20F3, 0x20F5),
             _mig_catalog(10, 20, 40, 80)),
    GpuModel("H100-80GB", 80, "nvidia", ("H100", "H100XM"), (0x2330, 0x2331, 0x2322, 0x2324),
             _mig_catalog(10, 20, 40, 80)),
    GpuModel("H100-94GB", 94, "nvidia", ("H100L", "H100XL"), (), _mig_catalog(12, 24, 47, 94)),
    GpuModel("H200-141GB", 141, "nvidia", ("H200X", "H200NVL"), (0x2335, 0x233B),
             _mig_catalog(18, 35, 71, 141)),
    GpuModel("GH200-144GB", 144, "nvidia", (), (), _mig_catalog(18, 36, 72, 144)),
    GpuModel("B200", 180, "nvidia", ("B200X",), (), _mig_catalog(23, 45, 90, 180)),
    # PCI device ids of the non-MIG models from the PCI ID repository (vendor 10de)
    GpuModel("L40S", 48, "nvidia", ("L40S",), (0x26B9,)),
    GpuModel("L4", 24, "nvidia", ("L4",), (0x27B8,)),
    GpuModel("A40", 48, "grid", ("A40",), (0x2235,)),
    GpuModel("A16", 16, "grid", ("A16",), (0x25B6,)),
    GpuModel("T4", 16, "grid", ("T4",), (0x1EB8,)),
)

_PCI_RE = re.compile(r"^(?:(?:0x)?10de:)?(?:0x)?([0-9a-f]{4})$")


def gpu_models() -> tuple:
    """All catalog models, in catalog order."""
    return _MODELS


def known_stems() -> list:
    return [stem for model in _MODELS for stem in model.vgpu_stems]


def gpu_model_for_stem(stem: str) -> GpuModel | None:
    """The catalog model whose vGPU types use ``stem`` (``H100XM``), or None."""
    if not isinstance(stem, str):
        return None
    for model in _MODELS:
        if stem.upper() in model.vgpu_stems:
            return model
    return None


def gpu_model(name_or_pci_device_id) -> GpuModel:
    """Look a model up by name (``H100-80GB``, any case) or PCI device id.

    A device id is an int (``0x2330``) or a string ``"0x2330"``, ``"2330"`` or ``"10de:2330"``.
    A ``GpuModel`` is returned as is.
    """
    key = name_or_pci_device_id
    if isinstance(key, GpuModel):
        return key
    valid = ", ".join(m.name for m in _MODELS)
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise NvidiaError("Invalid GPU model %r: give a model name (%s) or a PCI device id" % (key, valid))
    if isinstance(key, str):
        for model in _MODELS:
            if model.name.lower() == key.strip().lower():
                return model
        match = _PCI_RE.match(key.strip().lower())
        if not match:
            raise NvidiaError("Unknown GPU model %r; valid models: %s (or a PCI device id such as 0x2330)"
                              % (key, valid))
        device_id = int(match.group(1), 16)
    else:
        device_id = key
    for model in _MODELS:
        if device_id in model.pci_device_ids:
            return model
    known = ", ".join("0x%04X" % d for m in _MODELS for d in m.pci_device_ids)
    if isinstance(key, str):
        raise NvidiaError("Unknown GPU model or PCI device id %r; valid models: %s; known PCI device ids: %s"
                          % (key, valid, known))
    raise NvidiaError("Unknown NVIDIA PCI device id %s; known ids: %s"
                      % ("0x%04X" % key if key >= 0 else repr(key), known))


def mig_profiles(model) -> tuple:
    """The MIG profiles of a model, largest last; empty for a model without MIG."""
    return gpu_model(model).mig


def _mig_key(name):
    if not isinstance(name, str):
        raise NvidiaError("Invalid MIG profile %r: a name such as 1g.10gb is required" % (name,))
    return name.strip().lower()


def _mix_counts(model, mix):
    """Normalise a mix (mapping name -> count, or iterable of names) to [(MigProfile, count)]."""
    if isinstance(mix, str):
        raise NvidiaError("Invalid MIG mix %r: give a mapping {profile: count} or a list of profile names"
                          % (mix,))
    counts = OrderedDict()
    if hasattr(mix, "items"):
        items = list(mix.items())
    else:
        try:
            items = [(name, 1) for name in mix]
        except TypeError:
            raise NvidiaError("Invalid MIG mix %r: give a mapping {profile: count} or a list of profile names"
                              % (mix,)) from None
    for name, count in items:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise NvidiaError("Invalid count %r for MIG profile %r: a whole number >= 0 is required"
                              % (count, name))
        profile = model.mig_profile(name)
        counts[profile] = counts.get(profile, 0) + count
    return [(p, c) for p, c in counts.items() if c]


def _place(slots, instances, index, occupied, result):
    if index == len(instances):
        return True
    profile = instances[index]
    run = (1 << profile.memory_slices) - 1
    for start in profile.starts:
        if start + profile.memory_slices > slots:
            continue
        mask = run << start
        if occupied & mask:
            continue
        # identical profiles are placed at increasing starts: no duplicate search
        if index and instances[index - 1] is profile and result[-1][1] > start:
            continue
        result.append((profile.name, start))
        if _place(slots, instances, index + 1, occupied | mask, result):
            return True
        result.pop()
    return False


def mig_placement(model, mix) -> list:
    """Place a MIG mix on one GPU; return ``[(profile_name, start_slot)]`` sorted by start.

    ``mix`` is ``{"3g.40gb": 1, "1g.10gb": 2}`` or ``["3g.40gb", "1g.10gb", "1g.10gb"]``.
    Raises ``NvidiaError`` saying why the mix does not fit.
    """
    model = gpu_model(model)
    if not model.mig:
        raise NvidiaError("GPU model %s does not support MIG; MIG-capable models: %s"
                          % (model.name, ", ".join(m.name for m in _MODELS if m.mig)))
    counts = _mix_counts(model, mix)
    described = ", ".join("%dx %s" % (c, p.name) for p, c in counts) or "nothing"
    for profile, count in counts:
        if count > profile.max_instances:
            raise NvidiaError("MIG mix %s does not fit %s: at most %d instance(s) of %s per GPU, %d requested"
                              % (described, model.name, profile.max_instances, profile.name, count))
    me_total = sum(c for p, c in counts if p.media_extension)
    if me_total > 1:
        raise NvidiaError("MIG mix %s does not fit %s: at most one media-extension (+me) instance per GPU"
                          % (described, model.name))
    small = [p for p in model.mig if p.memory_slices == 1 and not p.media_extension][:1]
    small_total = sum(c for p, c in counts if p.memory_slices == 1)
    if small and small_total > small[0].max_instances:
        small = small[0]
        raise NvidiaError("MIG mix %s does not fit %s: %s and its +me variant together allow at most %d "
                          "instances, %d requested" % (described, model.name, small.name,
                                                       small.max_instances, small_total))
    compute = sum(p.compute_slices * c for p, c in counts)
    if compute > MIG_COMPUTE_SLICES:
        raise NvidiaError("MIG mix %s does not fit %s: needs %d compute slices, a GPU has %d"
                          % (described, model.name, compute, MIG_COMPUTE_SLICES))
    memory = sum(p.memory_slices * c for p, c in counts)
    if memory > MIG_MEMORY_SLOTS:
        raise NvidiaError("MIG mix %s does not fit %s: needs %d memory slices, a GPU has %d"
                          % (described, model.name, memory, MIG_MEMORY_SLOTS))
    instances = []
    for profile, count in sorted(counts, key=lambda pc: (-pc[0].memory_slices, -pc[0].compute_slices,
                                                         len(pc[0].starts), pc[0].name)):
        instances.extend([profile] * count)
    result = []
    if not _place(MIG_MEMORY_SLOTS, instances, 0, 0, result):
        raise NvidiaError("MIG mix %s does not fit %s: the slices add up (%d compute, %d memory) but no "
                          "placement exists at the allowed start positions (%s)"
                          % (described, model.name, compute, memory,
                             "; ".join("%s at %s" % (p.name, ",".join(str(s) for s in p.starts))
                                       for p, c in counts)))
    return sorted(result, key=lambda item: (item[1], item[0]))


def mig_fits(model, mix) -> bool:
    """True when the mix can be placed on one GPU of the model.

    An unknown model raises ``NvidiaError``; anything about the mix that prevents it from
    fitting (a profile the model lacks, a model without MIG, bad counts) returns False.
    """
    model = gpu_model(model)
    try:
        mig_placement(model, mix)
    except NvidiaError:
        return False
    return True


def vgpu_mig_profile(profile_name, model=None) -> MigProfile:
    """The MIG profile behind a MIG-backed vGPU profile, checked against the model.

    Without ``model`` the model is found from the profile's GPU stem.
    """
    profile = parse_profile(profile_name)
    if not profile.mig_backed:
        raise NvidiaError("vGPU profile %r is time-sliced, not MIG-backed; MIG-backed names have a slice "
                          "count, e.g. nvidia_h100xm-1-10c" % (profile.name,))
    if model is None:
        found = gpu_model_for_stem(profile.gpu)
        if found is None:
            raise NvidiaError("GPU stem %s of vGPU profile %r is not in the catalog (known stems: %s); "
                              "pass the model" % (profile.gpu, profile.name, ", ".join(known_stems())))
        model = found
    model = gpu_model(model)
    if model.vgpu_stems and profile.gpu not in model.vgpu_stems:
        raise NvidiaError("vGPU profile %r is for GPU %s, not for %s (stems %s)"
                          % (profile.name, profile.gpu, model.name, ", ".join(model.vgpu_stems)))
    return model.mig_profile(profile.mig_profile)


# ---------------------------------------------------------------------------------------
# vGPU scheduler (RmPVMRL)
# ---------------------------------------------------------------------------------------

SCHEDULER_POLICIES = ("best_effort", "equal_share", "fixed_share")
_POLICY_BITS = {"equal_share": 0x01, "fixed_share": 0x11}
_BITS_POLICY = {0x01: "equal_share", 0x11: "fixed_share"}
TIME_SLICE_MS = (1, 30)
AVERAGING_FACTOR = (1, 60)
FREQUENCY_HZ = (63, 960)
DEFAULT_AVERAGING_FACTOR = 33


@dataclass(frozen=True)
class SchedulerPolicy:
    """A decoded RmPVMRL value.

    ``value`` is the value as read; ``canonical_value`` the value the encoder writes for
    the same meaning, ``hex`` its eight-digit hex form; ``canonical`` says whether they match.
    """

    policy: str
    time_slice_ms: int | None = None
    strict_round_robin: bool = False
    averaging_factor: int | None = None
    frequency_hz: int | None = None
    value: int = 0
    canonical_value: int = 0

    @property
    def hex(self) -> str:
        return format_rmpvmrl(self.canonical_value)

    @property
    def canonical(self) -> bool:
        return self.value == self.canonical_value


def _check_range(label, value, bounds, unit=""):
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise NvidiaError("Invalid %s %r: a whole number from %d to %d%s is required"
                          % (label, value, low, high, unit))


def encode_scheduler(policy: str, time_slice_ms: int | None = None, averaging_factor: int | None = None,
                     frequency_hz: int | None = None) -> int:
    """Encode a scheduler policy as an RmPVMRL value (see the module docstring for the layout)."""
    if policy not in SCHEDULER_POLICIES:
        raise NvidiaError("Unknown vGPU scheduler policy %r; valid policies: %s"
                          % (policy, ", ".join(SCHEDULER_POLICIES)))
    strict = averaging_factor is not None or frequency_hz is not None
    if policy == "best_effort":
        if time_slice_ms is not None or strict:
            raise NvidiaError("Policy best_effort takes no time slice, averaging factor or frequency; "
                              "use equal_share or fixed_share for those")
        return 0
    bits = _POLICY_BITS[policy]
    if strict:
        if time_slice_ms is not None:
            raise NvidiaError("A time slice and strict round-robin (averaging factor, frequency) exclude each "
                              "other; give time_slice_ms alone or averaging_factor with frequency_hz")
        if averaging_factor is None or frequency_hz is None:
            raise NvidiaError("Strict round-robin needs both averaging_factor (1-60) and frequency_hz (63-960)")
        _check_range("averaging factor", averaging_factor, AVERAGING_FACTOR)
        _check_range("frequency", frequency_hz, FREQUENCY_HZ, " Hz")
        return (averaging_factor << 24) | (frequency_hz << 12) | bits
    if time_slice_ms is None:
        return bits
    _check_range("time slice", time_slice_ms, TIME_SLICE_MS, " ms")
    return (time_slice_ms << 16) | bits


def format_rmpvmrl(value: int) -> str:
    """Eight-digit hex form of an RmPVMRL value: ``0x00180011``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
        raise NvidiaError("Invalid RmPVMRL value %r: a whole number from 0 to 0xFFFFFFFF is required" % (value,))
    return "0x%08x" % value


def _rmpvmrl_int(value):
    if isinstance(value, bool):
        raise NvidiaError("Invalid RmPVMRL value %r: a number such as 0x11 is required" % (value,))
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            if text.startswith("0x"):
                number = int(text[2:], 16)
            elif text.isdigit():
                number = int(text, 10)
            else:
                raise ValueError(text)
        except ValueError:
            raise NvidiaError("Invalid RmPVMRL value %r: hex (0x00180011) or decimal digits are required"
                              % (value,)) from None
    else:
        raise NvidiaError("Invalid RmPVMRL value %r: a number such as 0x11 is required" % (value,))
    if not 0 <= number <= 0xFFFFFFFF:
        raise NvidiaError("Invalid RmPVMRL value %r: it must fit in 32 bits" % (value,))
    return number


def decode_scheduler(value) -> SchedulerPolicy:
    """Decode an RmPVMRL value (int, or a hex / decimal string; None means unset = best effort)."""
    if isinstance(value, SchedulerPolicy):
        return value
    if value is None:
        return SchedulerPolicy(policy="best_effort")
    number = _rmpvmrl_int(value)
    if number == 0:
        return SchedulerPolicy(policy="best_effort")
    shown = format_rmpvmrl(number)
    low = number & 0xFF
    aa = number >> 24
    if aa == 0 and number & 0xFF00 == 0:
        # time-slice form 0x00TT00P1 (decision 2)
        slice_ms = (number >> 16) & 0xFF
        if low == 0x03:
            if not TIME_SLICE_MS[0] <= slice_ms <= TIME_SLICE_MS[1]:
                raise NvidiaError("Invalid RmPVMRL value %s: policy byte 0x03 is read only as the guide's "
                                  "equal-share form 0x00TT0003 with TT 1-30 ms" % shown)
            return SchedulerPolicy(policy="equal_share", time_slice_ms=slice_ms, value=number,
                                   canonical_value=encode_scheduler("equal_share", slice_ms))
        policy = _BITS_POLICY.get(low)
        if policy is None:
            raise NvidiaError("Invalid RmPVMRL value %s: the low byte must be 0x01 (equal share) or 0x11 "
                              "(fixed share)" % shown)
        if slice_ms == 0:
            return SchedulerPolicy(policy=policy, value=number, canonical_value=number)
        if slice_ms > TIME_SLICE_MS[1]:
            raise NvidiaError("Invalid RmPVMRL value %s: time slice %d ms is outside 1-30 ms"
                              % (shown, slice_ms))
        return SchedulerPolicy(policy=policy, time_slice_ms=slice_ms, value=number, canonical_value=number)
    # strict round-robin form 0xAAFFF0P1
    policy = _BITS_POLICY.get(low)
    if policy is None:
        raise NvidiaError("Invalid RmPVMRL value %s: the low byte must be 0x01 (equal share) or 0x11 "
                          "(fixed share)" % shown)
    if number & 0xF00:
        raise NvidiaError("Invalid RmPVMRL value %s: bits 8-11 must be zero (strict round-robin form "
                          "0xAAFFF001 / 0xAAFFF011)" % shown)
    frequency = (number >> 12) & 0xFFF
    if not FREQUENCY_HZ[0] <= frequency <= FREQUENCY_HZ[1]:
        raise NvidiaError("Invalid RmPVMRL value %s: frequency %d Hz (0x%03x) is outside 63-960 Hz "
                          "(0x03F-0x3C0)" % (shown, frequency, frequency))
    if aa > AVERAGING_FACTOR[1]:
        raise NvidiaError("Invalid RmPVMRL value %s: averaging factor %d (0x%02x) is outside 1-60 (0x01-0x3C)"
                          % (shown, aa, aa))
    averaging = aa or None
    canonical = encode_scheduler(policy, averaging_factor=aa or DEFAULT_AVERAGING_FACTOR, frequency_hz=frequency)
    return SchedulerPolicy(policy=policy, strict_round_robin=True, averaging_factor=averaging,
                           frequency_hz=frequency, value=number, canonical_value=canonical)


# ---------------------------------------------------------------------------------------
# nvidia kernel module option string
# ---------------------------------------------------------------------------------------

REGISTRY_DWORDS = "NVreg_RegistryDwords"
REGISTRY_DWORDS_PER_DEVICE = "NVreg_RegistryDwordsPerDevice"
RMPVMRL = "RmPVMRL"
_OPTION_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REGISTRY_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PCI_ADDRESS_RE = re.compile(r"^(?:([0-9a-f]{4}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")


def parse_module_options(s: str | None) -> OrderedDict:
    """Parse ``key=value key=value`` into an ordered dict (None or blank: empty)."""
    result = OrderedDict()
    if s is None:
        return result
    if not isinstance(s, str):
        raise NvidiaError("Invalid module option string %r: a string is required" % (s,))
    for token in s.split():
        key, sep, value = token.partition("=")
        if not sep or not _OPTION_KEY_RE.match(key):
            raise NvidiaError("Invalid module option %r in %r: each option must be key=value with a key of "
                              "letters, digits and underscores" % (token, s))
        if '"' in value or "'" in value:
            raise NvidiaError("Invalid module option %r: quotes are not supported in values" % token)
        if key in result:
            raise NvidiaError("Module option %s appears twice in %r; keep one" % (key, s))
        result[key] = value
    return result


def format_module_options(options) -> str:
    """Inverse of ``parse_module_options``: ``key=value`` joined by single spaces."""
    if not hasattr(options, "items"):
        raise NvidiaError("Invalid module options %r: a mapping is required" % (options,))
    tokens = []
    for key, value in options.items():
        if not isinstance(key, str) or not _OPTION_KEY_RE.match(key):
            raise NvidiaError("Invalid module option key %r: letters, digits and underscores only" % (key,))
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise NvidiaError("Invalid value %r for module option %s: a string or number is required"
                              % (value, key))
        text = str(value)
        if any(c.isspace() for c in text) or '"' in text or "'" in text:
            raise NvidiaError("Invalid value %r for module option %s: no whitespace or quotes allowed"
                              % (text, key))
        tokens.append("%s=%s" % (key, text))
    return " ".join(tokens)


def _parse_registry_entries(text, option):
    """``RmA=1;RmB=2`` -> [(key, value)]; empty segments are ignored."""
    entries = []
    for segment in text.split(";"):
        if not segment:
            continue
        key, sep, value = segment.partition("=")
        if not sep or not _REGISTRY_KEY_RE.match(key) or value == "":
            raise NvidiaError("Invalid registry entry %r in %s=%s: entries must be Name=value separated by ';'"
                              % (segment, option, text))
        entries.append((key, value))
    return entries


def _format_registry_entries(entries):
    return ";".join("%s=%s" % (k, v) for k, v in entries)


def normalize_pci_address(address: str) -> str:
    """``3B:00.0`` or ``0000:3b:00.0`` -> ``0000:3b:00.0``."""
    match = _PCI_ADDRESS_RE.match(address.strip().lower()) if isinstance(address, str) else None
    if not match or int(match.group(3), 16) > 0x1F:
        raise NvidiaError("Invalid PCI address %r: expected <domain>:<bus>:<device>.<function> such as "
                          "0000:3b:00.0 (device 00-1f, function 0-7)" % (address,))
    domain, bus, device, function = match.groups()
    return "%s:%s:%s.%s" % (domain or "0000", bus, device, function)


def _parse_per_device(text):
    """``pci=A;RmX=1;pci=B;RmY=2`` -> OrderedDict(address -> [(key, value)])."""
    devices = OrderedDict()
    current = None
    for key, value in _parse_registry_entries(text, REGISTRY_DWORDS_PER_DEVICE):
        if key == "pci":
            current = normalize_pci_address(value)
            if current in devices:
                raise NvidiaError("PCI device %s appears twice in %s=%s; keep one group per device"
                                  % (current, REGISTRY_DWORDS_PER_DEVICE, text))
            devices[current] = []
        elif current is None:
            raise NvidiaError("Invalid %s=%s: it must start with pci=<domain>:<bus>:<device>.<function>"
                              % (REGISTRY_DWORDS_PER_DEVICE, text))
        else:
            devices[current].append((key, value))
    return devices


def _format_per_device(devices):
    return ";".join(_format_registry_entries([("pci", address)] + entries)
                    for address, entries in devices.items() if entries)


def get_scheduler(s: str | None) -> dict:
    """Decode the scheduler settings in a module option string.

    Returns ``{'all': SchedulerPolicy or None (not set), 'per_device': {pci: SchedulerPolicy}}``.
    """
    options = parse_module_options(s)
    result = {"all": None, "per_device": OrderedDict()}
    if REGISTRY_DWORDS in options:
        entries = _parse_registry_entries(options[REGISTRY_DWORDS], REGISTRY_DWORDS)
        values = [v for k, v in entries if k == RMPVMRL]
        if len(values) > 1:
            raise NvidiaError("RmPVMRL appears %d times in %s; keep one" % (len(values), REGISTRY_DWORDS))
        if values:
            result["all"] = decode_scheduler(values[0])
    if REGISTRY_DWORDS_PER_DEVICE in options:
        for address, entries in _parse_per_device(options[REGISTRY_DWORDS_PER_DEVICE]).items():
            values = [v for k, v in entries if k == RMPVMRL]
            if len(values) > 1:
                raise NvidiaError("RmPVMRL appears %d times for PCI device %s; keep one" % (len(values), address))
            if values:
                result["per_device"][address] = decode_scheduler(values[0])
    return result


def _desired_value(value):
    """None for best effort (remove), else the canonical int."""
    if value is None:
        return None
    if isinstance(value, SchedulerPolicy):
        decoded = value
    else:
        decoded = decode_scheduler(value)
    if decoded.policy == "best_effort":
        return None
    return decoded.canonical_value


def _merge_rmpvmrl(entries, desired):
    """Set or remove RmPVMRL in an entry list, keeping the position and existing spelling."""
    result = []
    placed = False
    for key, value in entries:
        if key != RMPVMRL:
            result.append((key, value))
        elif desired is not None and not placed:
            keep = value if _rmpvmrl_int_or_none(value) == desired else format_rmpvmrl(desired)
            result.append((key, keep))
            placed = True
    if desired is not None and not placed:
        result.append((RMPVMRL, format_rmpvmrl(desired)))
    return result


def _rmpvmrl_int_or_none(value):
    try:
        return _rmpvmrl_int(value)
    except NvidiaError:
        return None


def set_scheduler(s: str | None, value, per_device=None) -> str:
    """Return ``s`` with the RmPVMRL scheduler setting merged in.

    ``value`` (int, hex string, ``SchedulerPolicy`` or None) applies to all GPUs through
    ``NVreg_RegistryDwords``; None or best effort removes it. ``per_device`` maps PCI
    addresses to the same kinds of value through ``NVreg_RegistryDwordsPerDevice``; devices
    not named are left alone. Everything else in the string is kept. When nothing changes in
    meaning the input string is returned unchanged.
    """
    options = parse_module_options(s)
    new = OrderedDict(options)

    entries = _parse_registry_entries(options.get(REGISTRY_DWORDS, ""), REGISTRY_DWORDS)
    merged = _merge_rmpvmrl(entries, _desired_value(value))
    if merged:
        new[REGISTRY_DWORDS] = _format_registry_entries(merged)
    else:
        new.pop(REGISTRY_DWORDS, None)

    if per_device is not None:
        if not hasattr(per_device, "items"):
            raise NvidiaError("Invalid per_device %r: a mapping {pci address: value} is required" % (per_device,))
        devices = _parse_per_device(options.get(REGISTRY_DWORDS_PER_DEVICE, ""))
        wanted = OrderedDict()
        for address, device_value in per_device.items():
            normalized = normalize_pci_address(address)
            if normalized in wanted:
                raise NvidiaError("PCI device %s is given twice in per_device" % normalized)
            wanted[normalized] = _desired_value(device_value)
        for address in sorted(wanted):
            devices[address] = _merge_rmpvmrl(devices.get(address, []), wanted[address])
        text = _format_per_device(devices)
        if text:
            new[REGISTRY_DWORDS_PER_DEVICE] = text
        else:
            new.pop(REGISTRY_DWORDS_PER_DEVICE, None)

    if _same_meaning(options, new):
        return s if s is not None else ""
    return format_module_options(new)


def _same_meaning(old, new):
    if list(old) != list(new):
        return False
    for key in old:
        if old[key] == new[key]:
            continue
        if key == REGISTRY_DWORDS:
            if _parse_registry_entries(old[key], key) != _parse_registry_entries(new[key], key):
                return False
        elif key == REGISTRY_DWORDS_PER_DEVICE:
            if _parse_per_device(old[key]) != _parse_per_device(new[key]):
                return False
        else:
            return False
    return True


# ---------------------------------------------------------------------------------------
# Fixed share and vGPU sizes
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """An answer with its reason; true when allowed, unpacks as ``(allowed, reason)``."""

    allowed: bool
    reason: str | None = None

    def __bool__(self):
        return self.allowed

    def __iter__(self):
        return iter((self.allowed, self.reason))


def vgpu_fixed_share_allowed(profiles_on_gpu) -> Verdict:
    """Can the fixed-share scheduler be used on a GPU carrying these vGPU profiles?

    Fixed share is not supported when one GPU carries time-sliced vGPUs of different
    framebuffer sizes. MIG-backed vGPUs are not time-sliced and do not count; a GPU cannot
    carry MIG-backed and time-sliced vGPUs at once.
    """
    if isinstance(profiles_on_gpu, (str, VgpuProfile)):
        profiles_on_gpu = [profiles_on_gpu]
    profiles = [parse_profile(p) for p in profiles_on_gpu]
    sliced = [p for p in profiles if p.time_sliced]
    if sliced and len(sliced) != len(profiles):
        return Verdict(False, "one GPU cannot carry MIG-backed and time-sliced vGPUs at once (%s)"
                       % ", ".join(sorted(set(p.vsphere_name for p in profiles))))
    sizes = sorted(set(p.framebuffer_gb for p in sliced))
    if len(sizes) > 1:
        return Verdict(False, "fixed share is not supported with time-sliced vGPUs of mixed sizes on one GPU "
                              "(%s GB: %s); use equal_share or best_effort, or one size per GPU"
                       % ("/".join(str(s) for s in sizes),
                          ", ".join(sorted(set(p.vsphere_name for p in sliced)))))
    return Verdict(True, None)
