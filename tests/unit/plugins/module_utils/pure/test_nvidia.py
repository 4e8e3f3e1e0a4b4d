# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import (absolute_import, division, print_function)
from __future__ import annotations

__metaclass__ = type

import itertools

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    GpuModel,
    MigProfile,
    NvidiaError,
    SchedulerPolicy,
    VgpuProfile,
    decode_scheduler,
    encode_scheduler,
    format_module_options,
    format_profile,
    format_rmpvmrl,
    get_scheduler,
    gpu_model,
    gpu_model_for_stem,
    gpu_models,
    mig_fits,
    mig_placement,
    mig_profiles,
    normalize_pci_address,
    parse_module_options,
    parse_profile,
    set_scheduler,
    vgpu_fixed_share_allowed,
    vgpu_mig_profile,
)

MIG_MODELS = ("A100-40GB", "A100-80GB", "H100-80GB", "H100-94GB", "H200-141GB", "GH200-144GB", "B200")
# per model: small 1g, large 1g, 2g, 3g, 4g, 7g, +me
SIZES = {
    "A100-40GB": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.5gb+me"),
    "A100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me"),
    "H100-80GB": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me"),
    "H100-94GB": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb", "1g.12gb+me"),
    "H200-141GB": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb", "1g.18gb+me"),
    "GH200-144GB": ("1g.18gb", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb", "1g.18gb+me"),
    "B200": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb", "1g.23gb+me"),
}


def names(model):
    small, large, two, three, four, seven, me = SIZES[model]
    return {"1s": small, "1l": large, "2g": two, "3g": three, "4g": four, "7g": seven, "me": me}


# ---------------------------------------------------------------------------------------
# profile names
# ---------------------------------------------------------------------------------------

VALID_PROFILES = [
    # name, prefix, gpu, slices, fb, series, me
    ("grid_a100-4c", "grid", "A100", None, 4, "C", False),
    ("grid_t4-16q", "grid", "T4", None, 16, "Q", False),
    ("grid_a100d-40c", "grid", "A100D", None, 40, "C", False),
    ("grid_a100dx-1-10c", "grid", "A100DX", 1, 10, "C", False),
    ("grid_a100d-7-80c", "grid", "A100D", 7, 80, "C", False),
    ("grid_a100d-1-10cme", "grid", "A100D", 1, 10, "C", True),
    ("grid_v100dx-32q", "grid", "V100DX", None, 32, "Q", False),
    ("grid_a16-2b", "grid", "A16", None, 2, "B", False),
    ("grid_a40-8a", "grid", "A40", None, 8, "A", False),
    ("nvidia_h100-10c", "nvidia", "H100", None, 10, "C", False),
    ("nvidia_h100xm-80c", "nvidia", "H100XM", None, 80, "C", False),
    ("nvidia_h100xm-1-10c", "nvidia", "H100XM", 1, 10, "C", False),
    ("nvidia_h100xm-1-20c", "nvidia", "H100XM", 1, 20, "C", False),
    ("nvidia_h100xm-2-20c", "nvidia", "H100XM", 2, 20, "C", False),
    ("nvidia_h100xm-3-40c", "nvidia", "H100XM", 3, 40, "C", False),
    ("nvidia_h100xm-4-40c", "nvidia", "H100XM", 4, 40, "C", False),
    ("nvidia_h100xm-7-80c", "nvidia", "H100XM", 7, 80, "C", False),
    ("nvidia_h100xm-1-10cme", "nvidia", "H100XM", 1, 10, "C", True),
    ("nvidia_h200x-1-18c", "nvidia", "H200X", 1, 18, "C", False),
    ("nvidia_h200x-141c", "nvidia", "H200X", None, 141, "C", False),
    ("nvidia_l40s-48q", "nvidia", "L40S", None, 48, "Q", False),
    ("nvidia_l40s-4b", "nvidia", "L40S", None, 4, "B", False),
    ("nvidia_l40s-12a", "nvidia", "L40S", None, 12, "A", False),
    ("nvidia_l4-24c", "nvidia", "L4", None, 24, "C", False),
    ("nvidia_h100xm-1-10qme", "nvidia", "H100XM", 1, 10, "Q", True),
]


@pytest.mark.parametrize("name, prefix, gpu, slices, fb, series, me", VALID_PROFILES)
def test_parse_profile_valid(name, prefix, gpu, slices, fb, series, me):
    profile = parse_profile(name)
    assert profile == VgpuProfile(name=name, prefix=prefix, gpu=gpu, mig_slices=slices,
                                  framebuffer_gb=fb, series=series, media_extension=me)
    assert profile.mig_backed is (slices is not None)
    assert profile.time_sliced is (slices is None)
    assert profile.vsphere_name == name
    assert format_profile(profile) == name
    assert format_profile(gpu, fb, series, mig_slices=slices, media_extension=me, prefix=prefix) == name


@pytest.mark.parametrize("name, prefix, gpu, slices, fb, series, me", VALID_PROFILES)
def test_parse_profile_uppercase(name, prefix, gpu, slices, fb, series, me):
    upper = name.upper()
    profile = parse_profile(upper)
    assert profile.name == upper
    assert (profile.prefix, profile.gpu, profile.mig_slices, profile.framebuffer_gb, profile.series,
            profile.media_extension) == (prefix, gpu, slices, fb, series, me)
    assert profile.vsphere_name == name


def test_parse_profile_mixed_case():
    profile = parse_profile("Nvidia_H100xm-1-10cMe")
    assert profile.nvidia_type == "H100XM-1-10CME"
    assert profile.mig_profile == "1g.10gb+me"


@pytest.mark.parametrize("name, nvidia_type, mig", [
    ("nvidia_h100xm-1-10c", "H100XM-1-10C", "1g.10gb"),
    ("nvidia_h100xm-1-10cme", "H100XM-1-10CME", "1g.10gb+me"),
    ("nvidia_h100xm-7-80c", "H100XM-7-80C", "7g.80gb"),
    ("nvidia_h100-10c", "H100-10C", None),
    ("grid_a100-4c", "A100-4C", None),
    ("grid_a100-3-20c", "A100-3-20C", "3g.20gb"),
])
def test_profile_properties(name, nvidia_type, mig):
    profile = parse_profile(name)
    assert profile.nvidia_type == nvidia_type
    assert profile.mig_profile == mig


def test_parse_profile_accepts_parsed():
    profile = parse_profile("nvidia_h100xm-80c")
    assert parse_profile(profile) is profile


def test_profile_is_frozen():
    profile = parse_profile("nvidia_h100xm-80c")
    with pytest.raises(Exception):
        profile.gpu = "X"


@pytest.mark.parametrize("name, fragment", [
    ("h100xm-80c", "prefix"),
    ("vgpu_h100xm-80c", "prefix"),
    ("nvidia-h100xm-80c", "prefix"),
    ("nvidia_h100xm-80x", "unknown series"),
    ("nvidia_h100xm-80", "unknown series"),
    ("nvidia_h100xm-80d", "unknown series"),
    ("nvidia_h100xm-0c", "framebuffer"),
    ("nvidia_h100xm-1-0c", "framebuffer"),
    ("nvidia_h100xm-010c", "framebuffer"),
    ("nvidia_h100xm-5-40c", "slice count"),
    ("nvidia_h100xm-0-10c", "slice count"),
    ("nvidia_h100xm-8-80c", "slice count"),
    ("nvidia_h100xm-01-10c", "slice count"),
    ("nvidia_h100xm-x-10c", "slice count"),
    ("nvidia_h100xm-80cme", "media extension"),
    ("nvidia_h100xm-2-20cme", "media extension"),
    ("nvidia_h100xm-7-80cme", "media extension"),
    ("nvidia_h100xm-1-10cmx", "suffix"),
    ("nvidia_h100xm-1-10ccme", "suffix"),
    ("nvidia_h100xm-1-10ce", "suffix"),
    ("nvidia_h100xm", "fields"),
    ("nvidia_h100xm-1-2-10c", "fields"),
    ("nvidia_-80c", "GPU name"),
    ("nvidia_100-80c", "GPU name"),
    ("nvidia_h100_xm-80c", "GPU name"),
    ("nvidia_h100xm-c", "framebuffer"),
    ("nvidia_h100xm-80c ", "whitespace"),
    (" nvidia_h100xm-80c", "whitespace"),
    ("nvidia_h100 xm-80c", "whitespace"),
    ("grid_t4-1b4", "is not <framebuffer GB><series>"),
    ("", "non-empty string"),
    (None, "non-empty string"),
    (42, "non-empty string"),
])
def test_parse_profile_invalid(name, fragment):
    with pytest.raises(NvidiaError) as err:
        parse_profile(name)
    assert fragment in str(err.value)
    assert "expected" in str(err.value)


def test_nvidia_error_is_value_error():
    with pytest.raises(ValueError):
        parse_profile("bogus")


def test_format_profile_default_prefix_from_catalog():
    assert format_profile("H100XM", 80, "C") == "nvidia_h100xm-80c"
    assert format_profile("A100D", 10, "C", mig_slices=1, media_extension=True) == "grid_a100d-1-10cme"
    assert format_profile("l40s", 48, "q") == "nvidia_l40s-48q"


@pytest.mark.parametrize("args, kwargs, fragment", [
    (("X9", 8, "C"), {}, "pass prefix"),
    (("H100XM", 80, "C"), {"prefix": "vgpu"}, "prefix"),
    (("H100XM", 80, "Z"), {}, "series"),
    (("H100XM", 80, None), {}, "series"),
    (("H100XM", None, "C"), {}, "framebuffer_gb is required"),
    (("H100XM", "80", "C"), {}, "whole number"),
    (("H100XM", 10, "C"), {"mig_slices": True}, "whole number"),
    (("H100XM", 0, "C"), {}, "framebuffer"),
    (("H100XM", 10, "C"), {"mig_slices": 5}, "slice count"),
    (("H100XM", 80, "C"), {"media_extension": True}, "media extension"),
    (("H100-XM", 80, "C"), {}, "GPU stem"),
    ((None, 80, "C"), {}, "GPU stem"),
])
def test_format_profile_invalid(args, kwargs, fragment):
    with pytest.raises(NvidiaError) as err:
        format_profile(*args, **kwargs)
    assert fragment in str(err.value)


# ---------------------------------------------------------------------------------------
# MIG catalog
# ---------------------------------------------------------------------------------------

def test_catalog_models():
    assert [m.name for m in gpu_models()] == list(MIG_MODELS) + ["L40S", "L4", "A40", "A16", "T4"]
    for model in gpu_models():
        assert isinstance(model, GpuModel)
        assert model.vgpu_prefix in ("grid", "nvidia")


@pytest.mark.parametrize("model", MIG_MODELS)
def test_mig_catalog_geometry(model):
    n = names(model)
    profiles = {p.name: p for p in mig_profiles(model)}
    assert set(profiles) == set(n.values())
    expected = {
        "1s": (1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
        "me": (1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        "1l": (1, 2, 4, (0, 2, 4, 6)),
        "2g": (2, 2, 3, (0, 2, 4)),
        "3g": (3, 4, 2, (0, 4)),
        "4g": (4, 4, 1, (0,)),
        "7g": (7, 8, 1, (0,)),
    }
    for key, (compute, memory, max_instances, starts) in expected.items():
        profile = profiles[n[key]]
        assert isinstance(profile, MigProfile)
        assert (profile.compute_slices, profile.memory_slices, profile.max_instances, profile.starts) == (
            compute, memory, max_instances, starts), profile
        assert profile.size == memory
        assert profile.media_extension is (key == "me")
        assert profile.framebuffer_gb == int(profile.name.split(".")[1].split("gb")[0])
    assert gpu_model(model).mig_capable
    assert profiles[n["7g"]].framebuffer_gb == gpu_model(model).memory_gb


@pytest.mark.parametrize("model, memory, prefix, stems, ids", [
    ("A100-40GB", 40, "grid", ("A100",), (0x20B0, 0x20B1, 0x20F1, 0x20F6)),
    ("A100-80GB", 80, "grid", ("A100D", "A100DX"), (0x20B2, 0x20B5, 0x20F3, 0x20F5)),
    ("H100-80GB", 80, "nvidia", ("H100", "H100XM"), (0x2330, 0x2331, 0x2322, 0x2324)),
    ("H100-94GB", 94, "nvidia", ("H100L", "H100XL"), ()),
    ("H200-141GB", 141, "nvidia", ("H200X", "H200NVL"), (0x2335, 0x233B)),
    ("GH200-144GB", 144, "nvidia", (), ()),
    ("B200", 180, "nvidia", ("B200X",), ()),
    ("L40S", 48, "nvidia", ("L40S",), (0x26B9,)),
    ("L4", 24, "nvidia", ("L4",), (0x27B8,)),
    ("A40", 48, "grid", ("A40",), (0x2235,)),
    ("A16", 16, "grid", ("A16",), (0x25B6,)),
    ("T4", 16, "grid", ("T4",), (0x1EB8,)),
])
def test_model_attributes(model, memory, prefix, stems, ids):
    found = gpu_model(model)
    assert (found.name, found.memory_gb, found.vgpu_prefix, found.vgpu_stems, found.pci_device_ids) == (
        model, memory, prefix, stems, ids)
    for device_id in ids:
        assert gpu_model(device_id) is found
        assert gpu_model("0x%04x" % device_id) is found
        assert gpu_model("%04X" % device_id) is found
        assert gpu_model("10de:%04x" % device_id) is found
    for stem in stems:
        assert gpu_model_for_stem(stem) is found
        assert gpu_model_for_stem(stem.lower()) is found


@pytest.mark.parametrize("model", ["L40S", "L4", "A40", "A16", "T4"])
def test_non_mig_models(model):
    assert mig_profiles(model) == ()
    assert not gpu_model(model).mig_capable
    with pytest.raises(NvidiaError, match="does not support MIG"):
        mig_placement(model, {"1g.10gb": 1})
    with pytest.raises(NvidiaError, match="does not support MIG"):
        gpu_model(model).mig_profile("1g.10gb")
    assert mig_fits(model, {"1g.10gb": 1}) is False


def test_gpu_model_lookup_forms():
    assert gpu_model("h100-80gb").name == "H100-80GB"
    assert gpu_model(" B200 ").name == "B200"
    model = gpu_model("A100-80GB")
    assert gpu_model(model) is model
    assert gpu_model_for_stem("NOPE") is None
    assert gpu_model_for_stem(None) is None


@pytest.mark.parametrize("key, fragment", [
    ("H100", "Unknown GPU model 'H100'"),
    ("A100", "Unknown GPU model or PCI device id 'A100'"),
    ("Z100-80GB", "Unknown GPU model"),
    (0x1234, "Unknown NVIDIA PCI device id 0x1234"),
    ("0x1234", "Unknown GPU model or PCI device id '0x1234'"),
    (-1, "Unknown NVIDIA PCI device id -1"),
    ("8086:2330", "Unknown GPU model"),
    (None, "Invalid GPU model"),
    (True, "Invalid GPU model"),
    (2.5, "Invalid GPU model"),
])
def test_gpu_model_unknown(key, fragment):
    with pytest.raises(NvidiaError) as err:
        gpu_model(key)
    assert fragment in str(err.value)


def test_mig_profile_unknown_lists_valid():
    with pytest.raises(NvidiaError) as err:
        gpu_model("H100-80GB").mig_profile("1g.5gb")
    assert "1g.10gb" in str(err.value) and "7g.80gb" in str(err.value)
    with pytest.raises(NvidiaError):
        gpu_model("H100-80GB").mig_profile(None)


def mix_of(model, **counts):
    n = names(model)
    return {n[key]: count for key, count in counts.items()}


# (mix in shape keys, fits?, error fragment)
MIXES = [
    ({"7g": 1}, True, None),
    ({"4g": 1}, True, None),
    ({"3g": 2}, True, None),
    ({"4g": 1, "3g": 1}, True, None),
    ({"1s": 7}, True, None),
    ({"1l": 4}, True, None),
    ({"2g": 3}, True, None),
    ({"2g": 3, "1s": 1}, True, None),
    # 2g at 0, 2, 4 and the large 1g at 6 (slots 6-7): fits
    ({"2g": 3, "1l": 1}, True, None),
    ({"3g": 1, "2g": 1, "1s": 2}, True, None),
    ({"3g": 1, "1s": 4}, True, None),
    ({"4g": 1, "2g": 1, "1l": 1}, True, None),
    ({"4g": 1, "1l": 1, "1s": 2}, True, None),
    ({"1l": 2, "2g": 2}, True, None),
    ({"1l": 3, "1s": 2}, True, None),
    ({"me": 1, "1s": 6}, True, None),
    ({"me": 1, "3g": 1, "2g": 1, "1s": 1}, True, None),
    ({"2g": 1, "1s": 2, "3g": 1}, True, None),
    ({"4g": 2}, False, "at most 1 instance"),
    ({"7g": 1, "1s": 1}, False, "compute slices"),
    ({"7g": 2}, False, "at most 1 instance"),
    ({"1s": 8}, False, "at most 7 instance"),
    ({"1l": 5}, False, "at most 4 instance"),
    ({"2g": 4}, False, "at most 3 instance"),
    ({"3g": 3}, False, "at most 2 instance"),
    ({"me": 2}, False, "at most 1 instance"),
    ({"me": 1, "1s": 7}, False, "together allow at most 7"),
    ({"4g": 1, "3g": 1, "1s": 1}, False, "compute slices"),
    ({"2g": 3, "1l": 1, "1s": 1}, False, "compute slices"),
    ({"3g": 2, "1s": 1}, False, "memory slices"),
    ({"2g": 3, "1s": 2}, False, "needs 8 compute slices"),
    ({"3g": 1, "1l": 2, "1s": 1}, False, "memory slices"),
    ({"1l": 4, "1s": 1}, False, "memory slices"),
    ({"4g": 1, "1l": 2, "1s": 1}, False, "memory slices"),
    ({"3g": 1, "2g": 2, "1s": 1}, False, "compute slices"),
]


@pytest.mark.parametrize("model", MIG_MODELS)
@pytest.mark.parametrize("shape, fits, fragment", MIXES)
def test_mig_mix_per_model(model, shape, fits, fragment):
    mix = mix_of(model, **shape)
    assert mig_fits(model, mix) is fits
    if fits:
        placement = mig_placement(model, mix)
        check_placement(model, mix, placement)
    else:
        with pytest.raises(NvidiaError) as err:
            mig_placement(model, mix)
        assert fragment in str(err.value)
        assert model in str(err.value)


def check_placement(model, mix, placement):
    """Independent check: starts allowed, runs within 8 slots and disjoint, counts match."""
    profiles = {p.name: p for p in mig_profiles(model)}
    used = set()
    counts = {}
    for name, start in placement:
        profile = profiles[name]
        assert start in profile.starts
        run = set(range(start, start + profile.memory_slices))
        assert max(run) < 8
        assert not used & run
        used |= run
        counts[name] = counts.get(name, 0) + 1
    assert counts == {k: v for k, v in mix.items() if v}
    assert sum(profiles[name].compute_slices for name, _start in placement) <= 7
    assert placement == sorted(placement, key=lambda item: (item[1], item[0]))


def test_mig_placement_exact_positions():
    assert mig_placement("A100-80GB", {"2g.20gb": 3, "1g.20gb": 1}) == [
        ("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.20gb", 6)]
    assert mig_placement("H100-80GB", {"4g.40gb": 1, "3g.40gb": 1}) == [("4g.40gb", 0), ("3g.40gb", 4)]
    assert mig_placement("H200-141GB", ["1g.18gb"] * 7) == [("1g.18gb", s) for s in range(7)]
    # 3g must go to slot 4 so that four 1g instances fit at 0..3
    assert mig_placement("A100-40GB", {"3g.20gb": 1, "1g.5gb": 4}) == [
        ("1g.5gb", 0), ("1g.5gb", 1), ("1g.5gb", 2), ("1g.5gb", 3), ("3g.20gb", 4)]


def test_mig_all_balanced_examples():
    assert mig_fits("A100-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    assert mig_fits("H100-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    assert mig_fits("H200-141GB", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})


@pytest.mark.parametrize("model", MIG_MODELS)
def test_mig_exhaustive_consistency(model):
    """Every mix within the instance limits fits exactly when its slices add up."""
    profiles = mig_profiles(model)
    ranges = [range(p.max_instances + 1) for p in profiles]
    seen = 0
    for combo in itertools.product(*ranges):
        mix = {p.name: c for p, c in zip(profiles, combo) if c}
        compute = sum(p.compute_slices * c for p, c in zip(profiles, combo))
        memory = sum(p.memory_slices * c for p, c in zip(profiles, combo))
        small = sum(c for p, c in zip(profiles, combo) if p.memory_slices == 1)
        expected = compute <= 7 and memory <= 8 and small <= 7
        assert mig_fits(model, mix) is expected, mix
        if expected:
            check_placement(model, mix, mig_placement(model, mix))
            seen += 1
    assert seen > 100


def test_mig_mix_forms():
    assert mig_fits("H100-80GB", ["3g.40gb", "3G.40GB"])
    assert mig_fits("H100-80GB", {"3g.40gb": 1, " 3G.40GB ": 1})
    assert mig_fits("H100-80GB", (name for name in ["7g.80gb"]))
    assert mig_placement("H100-80GB", {}) == []
    assert mig_placement("H100-80GB", {"7g.80gb": 0}) == []


def test_mig_mix_duplicates_add_up():
    with pytest.raises(NvidiaError, match="at most 7"):
        mig_placement("H100-80GB", {"1g.10gb": 4, "1G.10GB": 4})


@pytest.mark.parametrize("mix, fragment", [
    ("3g.40gb", "Invalid MIG mix"),
    (42, "Invalid MIG mix"),
    ({"3g.40gb": -1}, "Invalid count"),
    ({"3g.40gb": 1.5}, "Invalid count"),
    ({"3g.40gb": True}, "Invalid count"),
    ({"1g.5gb": 1}, "does not exist on H100-80GB"),
    ([None], "Invalid MIG profile"),
])
def test_mig_mix_invalid(mix, fragment):
    with pytest.raises(NvidiaError) as err:
        mig_placement("H100-80GB", mix)
    assert fragment in str(err.value)
    assert mig_fits("H100-80GB", mix) is False


def test_mig_fits_unknown_model_raises():
    with pytest.raises(NvidiaError, match="Unknown GPU model"):
        mig_fits("X100-1GB", {"1g.10gb": 1})


def test_mig_placement_impossible_although_slices_add_up():
    # The real catalogs never reach this branch (see the exhaustive test); a synthetic model does.
    odd = MigProfile("2g.odd", 2, 2, 2, 20, (1, 3))
    one = MigProfile("1g.odd", 1, 1, 2, 10, (0, 4))
    model = GpuModel("SYNTH", 80, "nvidia", (), (), (odd, one))
    assert mig_placement(model, {"2g.odd": 2, "1g.odd": 1}) == [("1g.odd", 0), ("2g.odd", 1), ("2g.odd", 3)]
    with pytest.raises(NvidiaError) as err:
        mig_placement(model, {"2g.odd": 2, "1g.odd": 2})
    assert "no placement exists" in str(err.value)
    model2 = GpuModel("SYNTH2", 80, "nvidia", (), (), (MigProfile("2g.x", 2, 2, 2, 20, (0, 1)),))
    with pytest.raises(NvidiaError) as err:
        mig_placement(model2, {"2g.x": 2})
    assert "no placement exists" in str(err.value)
    assert "2g.x at 0,1" in str(err.value)
    assert mig_fits(model2, {"2g.x": 2}) is False


# ---------------------------------------------------------------------------------------
# vGPU profile -> MIG profile
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("profile, model, mig", [
    ("nvidia_h100xm-1-10c", "H100-80GB", "1g.10gb"),
    ("nvidia_h100-1-20c", "H100-80GB", "1g.20gb"),
    ("nvidia_h100xm-1-10cme", "H100-80GB", "1g.10gb+me"),
    ("nvidia_h100xm-7-80c", None, "7g.80gb"),
    ("grid_a100d-3-40c", "A100-80GB", "3g.40gb"),
    ("grid_a100dx-2-20c", None, "2g.20gb"),
    ("grid_a100-1-5c", "A100-40GB", "1g.5gb"),
    ("grid_a100-4-20c", None, "4g.20gb"),
    ("nvidia_h200x-1-18c", "H200-141GB", "1g.18gb"),
    ("nvidia_h200x-3-71c", None, "3g.71gb"),
    ("nvidia_h200nvl-1-35c", None, "1g.35gb"),
    ("nvidia_h100l-1-12c", "H100-94GB", "1g.12gb"),
    ("nvidia_b200x-7-180c", None, "7g.180gb"),
    ("NVIDIA_H100XM-2-20C", "0x2330", "2g.20gb"),
    # GH200 has no vGPU stem: any stem is accepted when the model is given
    ("nvidia_gh200-1-36c", "GH200-144GB", "1g.36gb"),
])
def test_vgpu_mig_profile(profile, model, mig):
    result = vgpu_mig_profile(profile, model)
    assert isinstance(result, MigProfile)
    assert result.name == mig


@pytest.mark.parametrize("profile, model, fragment", [
    ("nvidia_h100xm-80c", "H100-80GB", "time-sliced"),
    ("nvidia_h100xm-1-5c", "H100-80GB", "does not exist on H100-80GB"),
    ("nvidia_h100xm-1-12c", "H100-80GB", "does not exist"),
    ("nvidia_h100xm-1-10c", "A100-80GB", "not for A100-80GB"),
    ("grid_a100d-1-10c", "H200-141GB", "not for H200-141GB"),
    ("nvidia_l40s-1-12c", "L40S", "does not support MIG"),
    ("nvidia_x9-1-10c", None, "not in the catalog"),
    ("nvidia_h100xm-1-20cme", "H100-80GB", "does not exist"),
    ("bogus", "H100-80GB", "Invalid vGPU profile"),
])
def test_vgpu_mig_profile_invalid(profile, model, fragment):
    with pytest.raises(NvidiaError) as err:
        vgpu_mig_profile(profile, model)
    assert fragment in str(err.value)


# ---------------------------------------------------------------------------------------
# scheduler codec
# ---------------------------------------------------------------------------------------

GUIDE_CODES = [
    # value, policy, slice, strict, averaging, frequency, canonical
    (0x00, "best_effort", None, False, None, None, True),
    (0x01, "equal_share", None, False, None, None, True),
    (0x11, "fixed_share", None, False, None, None, True),
    (0x00180011, "fixed_share", 24, False, None, None, True),
    (0x00180001, "equal_share", 24, False, None, None, True),
    (0x00030001, "equal_share", 3, False, None, None, True),
    (0x00030011, "fixed_share", 3, False, None, None, True),
    (0x00030003, "equal_share", 3, False, None, None, False),
    (0x001E0001, "equal_share", 30, False, None, None, True),
    (0x00010011, "fixed_share", 1, False, None, None, True),
    (0x3C3C0001, "equal_share", None, True, 60, 0x3C0, True),
    (0x3C3C0011, "fixed_share", None, True, 60, 960, True),
    (0x0103F001, "equal_share", None, True, 1, 63, True),
    (0x211E0011, "fixed_share", None, True, 33, 480, True),
    (0x0003F001, "equal_share", None, True, None, 63, False),
    (0x00181011, "fixed_share", None, True, None, 0x181, False),
]


@pytest.mark.parametrize("value, policy, slice_ms, strict, averaging, frequency, canonical", GUIDE_CODES)
def test_decode_guide_codes(value, policy, slice_ms, strict, averaging, frequency, canonical):
    for given in (value, format_rmpvmrl(value), "0x%x" % value, "0X%X" % value, str(value)):
        decoded = decode_scheduler(given)
        assert isinstance(decoded, SchedulerPolicy)
        assert (decoded.policy, decoded.time_slice_ms, decoded.strict_round_robin, decoded.averaging_factor,
                decoded.frequency_hz) == (policy, slice_ms, strict, averaging, frequency)
        assert decoded.value == value
        assert decoded.canonical is canonical
    decoded = decode_scheduler(value)
    if canonical:
        assert decoded.canonical_value == value
        if policy != "best_effort":
            assert encode_scheduler(policy, slice_ms, averaging, frequency) == value
    # the canonical form decodes to the same meaning and is itself canonical
    again = decode_scheduler(decoded.hex)
    assert again.canonical
    assert (again.policy, again.time_slice_ms, again.strict_round_robin, again.frequency_hz) == (
        policy, slice_ms, strict, frequency)


def test_decode_noncanonical_suggestions():
    assert decode_scheduler("0x00030003").hex == "0x00030001"
    assert decode_scheduler(0x0003F001).hex == "0x2103f001"
    assert decode_scheduler(0x0003F001).canonical_value == encode_scheduler("equal_share", None, 33, 63)


def test_decode_unset_is_best_effort():
    decoded = decode_scheduler(None)
    assert decoded.policy == "best_effort"
    assert decoded.canonical and decoded.hex == "0x00000000"
    assert decode_scheduler(decoded) is decoded


def test_ambiguous_time_slice_form_wins():
    # 0x00180011 could be read as AA=0, FFF=0x180 (384 Hz); the time-slice form wins
    decoded = decode_scheduler(0x00180011)
    assert decoded.time_slice_ms == 24 and not decoded.strict_round_robin


@pytest.mark.parametrize("policy, bits", [("equal_share", 0x01), ("fixed_share", 0x11)])
@pytest.mark.parametrize("slice_ms", range(1, 31))
def test_time_slice_round_trip(policy, bits, slice_ms):
    value = encode_scheduler(policy, time_slice_ms=slice_ms)
    assert value == (slice_ms << 16) | bits
    decoded = decode_scheduler(value)
    assert (decoded.policy, decoded.time_slice_ms, decoded.strict_round_robin, decoded.canonical) == (
        policy, slice_ms, False, True)
    assert decode_scheduler(format_rmpvmrl(value)) == decoded


@pytest.mark.parametrize("policy, bits", [("equal_share", 0x01), ("fixed_share", 0x11)])
def test_strict_round_robin_round_trip(policy, bits):
    for averaging in range(1, 61):
        for frequency in (63, 64, 100, 480, 959, 960):
            value = encode_scheduler(policy, averaging_factor=averaging, frequency_hz=frequency)
            assert value == (averaging << 24) | (frequency << 12) | bits
            decoded = decode_scheduler(value)
            assert (decoded.policy, decoded.strict_round_robin, decoded.averaging_factor,
                    decoded.frequency_hz, decoded.time_slice_ms, decoded.canonical) == (
                policy, True, averaging, frequency, None, True)


def test_encode_defaults_and_names():
    assert encode_scheduler("best_effort") == 0x00
    assert encode_scheduler("equal_share") == 0x01
    assert encode_scheduler("fixed_share") == 0x11
    assert encode_scheduler("fixed_share", 24) == 0x00180011
    assert encode_scheduler("equal_share", 3) == 0x00030001
    assert encode_scheduler("equal_share", averaging_factor=0x3C, frequency_hz=0x3C0) == 0x3C3C0001
    assert encode_scheduler("fixed_share", averaging_factor=0x3C, frequency_hz=0x3C0) == 0x3C3C0011


@pytest.mark.parametrize("args, kwargs, fragment", [
    (("round_robin",), {}, "Unknown vGPU scheduler policy"),
    (("EQUAL_SHARE",), {}, "Unknown vGPU scheduler policy"),
    ((None,), {}, "Unknown vGPU scheduler policy"),
    (("best_effort", 3), {}, "best_effort takes no"),
    (("best_effort",), {"averaging_factor": 1, "frequency_hz": 100}, "best_effort takes no"),
    (("equal_share", 0), {}, "time slice 0"),
    (("equal_share", 31), {}, "time slice 31"),
    (("fixed_share", -1), {}, "time slice -1"),
    (("fixed_share", "3"), {}, "time slice '3'"),
    (("fixed_share", True), {}, "time slice True"),
    (("fixed_share", 2.0), {}, "time slice 2.0"),
    (("equal_share",), {"averaging_factor": 0, "frequency_hz": 480}, "averaging factor 0"),
    (("equal_share",), {"averaging_factor": 61, "frequency_hz": 480}, "averaging factor 61"),
    (("equal_share",), {"averaging_factor": 33, "frequency_hz": 62}, "frequency 62"),
    (("equal_share",), {"averaging_factor": 33, "frequency_hz": 961}, "frequency 961"),
    (("equal_share",), {"averaging_factor": 33}, "needs both"),
    (("fixed_share",), {"frequency_hz": 480}, "needs both"),
    (("fixed_share", 3), {"averaging_factor": 33, "frequency_hz": 480}, "exclude each other"),
])
def test_encode_invalid(args, kwargs, fragment):
    with pytest.raises(NvidiaError) as err:
        encode_scheduler(*args, **kwargs)
    assert fragment in str(err.value)


@pytest.mark.parametrize("value, fragment", [
    (0x02, "low byte"),
    (0x10, "low byte"),
    (0x03, "0x00TT0003"),
    (0x001F0003, "0x00TT0003"),
    (0x00000100, "low byte"),
    (0x00000111, "bits 8-11"),
    (0x001F0001, "time slice 31 ms"),
    (0x00FF0011, "time slice 255 ms"),
    (0x3C3C0003, "low byte"),
    (0x3D3C0001, "averaging factor 61"),
    (0xFF3C0011, "averaging factor 255"),
    (0x3C3C1001, "frequency 961"),
    (0x3C03E001, "frequency 62"),
    (0x3C000001, "frequency 0"),
    (0x3C3C0101, "bits 8-11"),
    (0x00010000, "low byte"),
    (-1, "32 bits"),
    (0x100000000, "32 bits"),
    ("0x", "hex"),
    ("0xZZ", "hex"),
    ("eleven", "hex"),
    ("-1", "hex"),
    ("", "hex"),
    (True, "number"),
    (1.0, "number"),
    ([1], "number"),
])
def test_decode_invalid(value, fragment):
    with pytest.raises(NvidiaError) as err:
        decode_scheduler(value)
    assert fragment in str(err.value)


def test_format_rmpvmrl():
    assert format_rmpvmrl(0x00180011) == "0x00180011"
    assert format_rmpvmrl(0x11) == "0x00000011"
    assert format_rmpvmrl(0) == "0x00000000"
    assert format_rmpvmrl(0x3C3C0011) == "0x3c3c0011"
    for bad in (-1, 0x100000000, "0x11", None, True):
        with pytest.raises(NvidiaError):
            format_rmpvmrl(bad)


# ---------------------------------------------------------------------------------------
# module option string
# ---------------------------------------------------------------------------------------

EXAMPLE = ("NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x11;RmFoo=3 "
           "NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x01")


def test_parse_module_options_example():
    options = parse_module_options(EXAMPLE)
    assert list(options.items()) == [
        ("NVreg_EnableMSI", "1"),
        ("NVreg_RegistryDwords", "RmPVMRL=0x11;RmFoo=3"),
        ("NVreg_RegistryDwordsPerDevice", "pci=0000:3b:00.0;RmPVMRL=0x01"),
    ]
    assert format_module_options(options) == EXAMPLE


@pytest.mark.parametrize("text", [
    "",
    "NVreg_EnableMSI=1",
    "a=1 b= c=x=y;z",
    "NVreg_RegistryDwords=",
    EXAMPLE,
])
def test_module_options_round_trip(text):
    assert format_module_options(parse_module_options(text)) == text


def test_parse_module_options_whitespace_and_none():
    assert parse_module_options(None) == {}
    assert parse_module_options("   ") == {}
    assert list(parse_module_options("  a=1\tb=2\n").items()) == [("a", "1"), ("b", "2")]


@pytest.mark.parametrize("text, fragment", [
    ("NVreg_EnableMSI", "key=value"),
    ("=1", "key=value"),
    ("1a=1", "key=value"),
    ("a-b=1", "key=value"),
    ("a=1 a=2", "appears twice"),
    ('a="1 2"', "quotes"),
    ("a='x'", "quotes"),
    (5, "a string is required"),
])
def test_parse_module_options_invalid(text, fragment):
    with pytest.raises(NvidiaError) as err:
        parse_module_options(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize("options, fragment", [
    ({"a b": "1"}, "key"),
    ({1: "1"}, "key"),
    ({"a": "1 2"}, "whitespace"),
    ({"a": '"x"'}, "quotes"),
    ({"a": None}, "string or number"),
    ({"a": True}, "string or number"),
    ([("a", "1")], "mapping"),
])
def test_format_module_options_invalid(options, fragment):
    with pytest.raises(NvidiaError) as err:
        format_module_options(options)
    assert fragment in str(err.value)


def test_format_module_options_numbers():
    assert format_module_options({"a": 1, "b": "x"}) == "a=1 b=x"


def test_get_scheduler_example():
    result = get_scheduler(EXAMPLE)
    assert result["all"].policy == "fixed_share"
    assert list(result["per_device"]) == ["0000:3b:00.0"]
    assert result["per_device"]["0000:3b:00.0"].policy == "equal_share"


@pytest.mark.parametrize("text", [None, "", "NVreg_EnableMSI=1", "NVreg_RegistryDwords=RmFoo=1",
                                  "NVreg_RegistryDwords="])
def test_get_scheduler_unset(text):
    assert get_scheduler(text) == {"all": None, "per_device": {}}


def test_get_scheduler_per_device_many():
    text = ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x00180011;"
            "pci=AF:00.0;RmFoo=1;pci=0000:d8:00.0;RmFoo=2;RmPVMRL=0x3c3c0001")
    result = get_scheduler(text)
    assert result["all"] is None
    assert list(result["per_device"]) == ["0000:3b:00.0", "0000:d8:00.0"]
    assert result["per_device"]["0000:3b:00.0"].time_slice_ms == 24
    assert result["per_device"]["0000:d8:00.0"].strict_round_robin


def test_get_scheduler_noncanonical_guide_example():
    result = get_scheduler("NVreg_RegistryDwords=RmPVMRL=0x00030003")
    assert result["all"].policy == "equal_share"
    assert result["all"].time_slice_ms == 3
    assert not result["all"].canonical
    assert result["all"].hex == "0x00030001"


@pytest.mark.parametrize("text, fragment", [
    ("NVreg_RegistryDwords=RmPVMRL=0x11;RmPVMRL=0x01", "appears 2 times"),
    ("NVreg_RegistryDwords=RmPVMRL", "Name=value"),
    ("NVreg_RegistryDwords=RmPVMRL=", "Name=value"),
    ("NVreg_RegistryDwords==1", "Name=value"),
    ("NVreg_RegistryDwords=RmPVMRL=0x02", "low byte"),
    ("NVreg_RegistryDwordsPerDevice=RmPVMRL=0x11", "must start with pci="),
    ("NVreg_RegistryDwordsPerDevice=pci=3b:00;RmPVMRL=0x11", "Invalid PCI address"),
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:20.0;RmPVMRL=0x11", "Invalid PCI address"),
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.8;RmPVMRL=0x11", "Invalid PCI address"),
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x11;RmPVMRL=0x01", "appears 2 times"),
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x11;pci=3b:00.0;RmPVMRL=0x01", "appears twice"),
])
def test_get_scheduler_invalid(text, fragment):
    with pytest.raises(NvidiaError) as err:
        get_scheduler(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize("address, expected", [
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("3B:00.0", "0000:3b:00.0"),
    ("0001:AF:1f.7", "0001:af:1f.7"),
])
def test_normalize_pci_address(address, expected):
    assert normalize_pci_address(address) == expected


@pytest.mark.parametrize("address", ["3b:00", "0000:3b:00:0", "00000:3b:00.0", "3b:20.0", "zz:00.0", None, ""])
def test_normalize_pci_address_invalid(address):
    with pytest.raises(NvidiaError, match="Invalid PCI address"):
        normalize_pci_address(address)


@pytest.mark.parametrize("text, value, expected", [
    ("", 0x11, "NVreg_RegistryDwords=RmPVMRL=0x00000011"),
    (None, 0x11, "NVreg_RegistryDwords=RmPVMRL=0x00000011"),
    ("", None, ""),
    ("", 0, ""),
    ("NVreg_EnableMSI=1", 0x00180011, "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00180011"),
    ("NVreg_RegistryDwords=RmPVMRL=0x11;RmFoo=3 NVreg_EnableMSI=1", "0x00030001",
     "NVreg_RegistryDwords=RmPVMRL=0x00030001;RmFoo=3 NVreg_EnableMSI=1"),
    ("NVreg_RegistryDwords=RmFoo=3;RmPVMRL=0x11;RmBar=x=y", 0x01,
     "NVreg_RegistryDwords=RmFoo=3;RmPVMRL=0x00000001;RmBar=x=y"),
    ("NVreg_RegistryDwords=RmFoo=3", 0x01, "NVreg_RegistryDwords=RmFoo=3;RmPVMRL=0x00000001"),
    ("NVreg_RegistryDwords=RmPVMRL=0x11;RmFoo=3", None, "NVreg_RegistryDwords=RmFoo=3"),
    ("NVreg_RegistryDwords=RmFoo=3;RmPVMRL=0x11", 0, "NVreg_RegistryDwords=RmFoo=3"),
    ("NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x11", None, "NVreg_EnableMSI=1"),
    ("NVreg_RegistryDwords=RmPVMRL=0x11 NVreg_EnableMSI=1", None, "NVreg_EnableMSI=1"),
    # the guide's non-canonical value is replaced by the canonical spelling
    ("NVreg_RegistryDwords=RmPVMRL=0x00030003", 0x00030003, "NVreg_RegistryDwords=RmPVMRL=0x00030001"),
    # duplicates are repaired
    ("NVreg_RegistryDwords=RmPVMRL=0x11;RmPVMRL=0x01", 0x11, "NVreg_RegistryDwords=RmPVMRL=0x11"),
    # semantically unchanged: the string is returned as is, spacing and spelling included
    ("NVreg_EnableMSI=1  NVreg_RegistryDwords=RmPVMRL=0x11", 0x11,
     "NVreg_EnableMSI=1  NVreg_RegistryDwords=RmPVMRL=0x11"),
    ("NVreg_RegistryDwords=RmPVMRL=17", "0x11", "NVreg_RegistryDwords=RmPVMRL=17"),
    ("NVreg_EnableMSI=1", None, "NVreg_EnableMSI=1"),
    ("NVreg_RegistryDwords=RmFoo=1;", None, "NVreg_RegistryDwords=RmFoo=1;"),
    # a change elsewhere normalises the spacing
    ("NVreg_EnableMSI=1  NVreg_RegistryDwords=RmPVMRL=0x11", 0x01,
     "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00000001"),
])
def test_set_scheduler_all(text, value, expected):
    result = set_scheduler(text, value)
    assert result == expected
    assert set_scheduler(result, value) == result
    decoded = get_scheduler(result)["all"]
    wanted = decode_scheduler(value)
    if wanted.policy == "best_effort":
        assert decoded is None
    else:
        assert decoded.canonical_value == wanted.canonical_value


def test_set_scheduler_accepts_policy_objects():
    policy = decode_scheduler(0x00180011)
    assert set_scheduler("", policy) == "NVreg_RegistryDwords=RmPVMRL=0x00180011"
    assert set_scheduler("NVreg_RegistryDwords=RmPVMRL=0x11", decode_scheduler(0)) == ""
    current = get_scheduler(EXAMPLE)
    assert set_scheduler(EXAMPLE, current["all"], dict(current["per_device"])) == EXAMPLE


def test_set_scheduler_example_everything():
    result = set_scheduler(EXAMPLE, 0x00180011, {"af:00.0": 0x11, "0000:3b:00.0": None})
    assert result == ("NVreg_EnableMSI=1 NVreg_RegistryDwords=RmPVMRL=0x00180011;RmFoo=3 "
                      "NVreg_RegistryDwordsPerDevice=pci=0000:af:00.0;RmPVMRL=0x00000011")
    assert set_scheduler(result, 0x00180011, {"af:00.0": 0x11, "0000:3b:00.0": None}) == result


@pytest.mark.parametrize("text, per_device, expected_per_device", [
    # add to empty
    ("", {"0000:3b:00.0": 0x01}, "pci=0000:3b:00.0;RmPVMRL=0x00000001"),
    # add several: new devices sorted by address
    ("", {"d8:00.0": 0x11, "3b:00.0": "0x00180011"},
     "pci=0000:3b:00.0;RmPVMRL=0x00180011;pci=0000:d8:00.0;RmPVMRL=0x00000011"),
    # replace, keep other device and other entries
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmFoo=1;RmPVMRL=0x01;pci=0000:af:00.0;RmPVMRL=0x11",
     {"3b:00.0": 0x11},
     "pci=0000:3b:00.0;RmFoo=1;RmPVMRL=0x00000011;pci=0000:af:00.0;RmPVMRL=0x11"),
    # add to an existing device group that lacks RmPVMRL
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmFoo=1", {"0000:3b:00.0": 0x01},
     "pci=0000:3b:00.0;RmFoo=1;RmPVMRL=0x00000001"),
    # append a new device after existing ones
    ("NVreg_RegistryDwordsPerDevice=pci=0000:d8:00.0;RmPVMRL=0x01", {"3b:00.0": 0x11},
     "pci=0000:d8:00.0;RmPVMRL=0x01;pci=0000:3b:00.0;RmPVMRL=0x00000011"),
    # remove: device group kept when it has other entries
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmFoo=1;RmPVMRL=0x01", {"3b:00.0": None},
     "pci=0000:3b:00.0;RmFoo=1"),
    # remove: device group dropped when empty, other device kept
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x01;pci=0000:af:00.0;RmPVMRL=0x11",
     {"0000:3b:00.0": 0},
     "pci=0000:af:00.0;RmPVMRL=0x11"),
    # remove the last one: the option disappears
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x01", {"0000:3b:00.0": None}, None),
    # removing a device that is not there changes nothing
    ("", {"0000:3b:00.0": None}, None),
    # the same value in another spelling is kept
    ("NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=1", {"3B:00.0": "0x00000001"},
     "pci=0000:3b:00.0;RmPVMRL=1"),
])
def test_set_scheduler_per_device(text, per_device, expected_per_device):
    result = set_scheduler(text, None, per_device)
    options = parse_module_options(result)
    assert options.get("NVreg_RegistryDwordsPerDevice") == expected_per_device
    assert "NVreg_RegistryDwords" not in options
    assert set_scheduler(result, None, per_device) == result
    decoded = get_scheduler(result)["per_device"]
    for address, value in per_device.items():
        wanted = decode_scheduler(value)
        key = normalize_pci_address(address)
        if wanted.policy == "best_effort":
            assert key not in decoded
        else:
            assert decoded[key].canonical_value == wanted.canonical_value


def test_set_scheduler_per_device_keeps_other_options():
    text = "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmFoo=3 NVreg_RegistryDwordsPerDevice=pci=0000:3b:00.0;RmPVMRL=0x01"
    result = set_scheduler(text, None, {"0000:3b:00.0": None})
    assert result == "NVreg_EnableMSI=1 NVreg_RegistryDwords=RmFoo=3"


def test_set_scheduler_leaves_per_device_alone_without_argument():
    text = "NVreg_RegistryDwordsPerDevice=pci=3B:00.0;RmPVMRL=0x01"
    assert set_scheduler(text, 0x11) == (
        "NVreg_RegistryDwordsPerDevice=pci=3B:00.0;RmPVMRL=0x01 NVreg_RegistryDwords=RmPVMRL=0x00000011")


@pytest.mark.parametrize("text, value, per_device, fragment", [
    ("NVreg_EnableMSI", 0x11, None, "key=value"),
    ("", 0x02, None, "low byte"),
    ("", "fast", None, "hex"),
    ("", None, {"3b:00": 0x11}, "Invalid PCI address"),
    ("", None, {"3b:00.0": 0x02}, "low byte"),
    ("", None, {"3b:00.0": 0x11, "0000:3b:00.0": 0x01}, "given twice"),
    ("", None, [("3b:00.0", 0x11)], "mapping"),
    ("NVreg_RegistryDwords=RmPVMRL", 0x11, None, "Name=value"),
    ("NVreg_RegistryDwordsPerDevice=RmPVMRL=1", None, {"3b:00.0": 0x11}, "must start with pci="),
])
def test_set_scheduler_invalid(text, value, per_device, fragment):
    with pytest.raises(NvidiaError) as err:
        set_scheduler(text, value, per_device)
    assert fragment in str(err.value)


# ---------------------------------------------------------------------------------------
# fixed share
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("profiles", [
    [],
    ["nvidia_h100xm-10c"],
    ["nvidia_h100xm-10c", "nvidia_h100xm-10c", "NVIDIA_H100XM-10C"],
    ["nvidia_h100xm-1-10c", "nvidia_h100xm-3-40c", "nvidia_h100xm-1-10cme"],
    ["grid_a100d-20c", "grid_a100d-20c"],
    "nvidia_l40s-48q",
    [parse_profile("nvidia_l40s-24q")],
])
def test_fixed_share_allowed(profiles):
    verdict = vgpu_fixed_share_allowed(profiles)
    assert verdict
    allowed, reason = verdict
    assert allowed is True and reason is None


@pytest.mark.parametrize("profiles, fragment", [
    (["nvidia_h100xm-10c", "nvidia_h100xm-20c"], "mixed sizes"),
    (["nvidia_l40s-24q", "nvidia_l40s-12q", "nvidia_l40s-24q"], "12/24 GB"),
    (["nvidia_h100xm-10c", "nvidia_h100xm-1-10c"], "MIG-backed and time-sliced"),
])
def test_fixed_share_not_allowed(profiles, fragment):
    verdict = vgpu_fixed_share_allowed(profiles)
    assert not verdict
    allowed, reason = verdict
    assert allowed is False
    assert fragment in reason


def test_fixed_share_invalid_profile():
    with pytest.raises(NvidiaError):
        vgpu_fixed_share_allowed(["nvidia_h100xm-10x"])
