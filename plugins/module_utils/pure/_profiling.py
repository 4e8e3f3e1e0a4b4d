# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Profiling counters in the guest (pure): whether a pool's node VMs get NVIDIA's per-VM profiling setting.

A vGPU guest exports DCGM's profiling fields (``DCGM_FI_PROF_*``) and serves CUDA profilers only when
the VM sets ``pciPassthru<n>.cfg.enable_profiling`` for its vGPU ``n`` (docs/gpu-metrics.md). The
collection sets it where the pool's sharing can give the guest the counters: a MIG-backed vGPU or a
full card. A time-sliced fraction of a card shares the engines with other VMs and exports no
profiling counters, so ``profiling: true`` there is refused.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

SUPPORTED_SHARING = ("mig", "full_card")


def supported(pool):
    """Whether the pool's sharing lets a guest read profiling counters."""
    return pool.get("sharing") in SUPPORTED_SHARING


def pool_profiling(pool):
    """The profiling flag of the pool's VM class: the design's ``profiling``, or on where supported."""
    asked = pool.get("profiling")
    if asked is None:
        return supported(pool)
    return bool(asked) and supported(pool)


def problem(pool):
    """Why the pool's ``profiling`` cannot be had, or None."""
    if pool.get("profiling") and not supported(pool):
        return ("profiling is true but sharing is %s: a time-sliced vGPU guest exports no profiling counters "
                "(supported with sharing %s)" % (pool.get("sharing"), " or ".join(SUPPORTED_SHARING)))
    return None


__all__ = ["SUPPORTED_SHARING", "pool_profiling", "problem", "supported"]
