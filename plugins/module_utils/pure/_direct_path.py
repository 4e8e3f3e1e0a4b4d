# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vGPU mode of a GPU in vSphere 9.1's ``direct-path-devices`` API (pure: no I/O).

vSphere API 9.1.0.0 adds ``com.vmware.vcenter.host.hardware.direct_path_devices``: per host
device a ``current_mode`` and the ``configurable_modes`` (``DirectPathDeviceMode``: NONE, HOST,
DIRECTPATH, ENHANCED_DIRECTPATH, VGPU_SAME_SIZE, VGPU_MIXED_SIZE, SYSTEM_SELECT), and a configure
task whose result lists the ``configure_impacts`` of the change (NONE,
HOST_MAINTENANCE_MODE_REQUIRED, HOST_REBOOT_REQUIRED). The bindings offer no call that tells the
impacts without making the change, so check mode predicts them with :func:`predict_impacts`.

Here: the one map between the REST modes and the collection's words (``same_size``,
``mixed_size``), whether a vCenter's API version offers the service, the prediction and the
refusal of a change that needs maintenance mode on a host that is not in it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# the first vSphere API that has direct_path_devices
MIN_API = (9, 1)

REST_MODE_BY_WORD = {"same_size": "VGPU_SAME_SIZE", "mixed_size": "VGPU_MIXED_SIZE"}
WORD_BY_REST_MODE = dict((mode, word) for word, mode in REST_MODE_BY_WORD.items())

IMPACT_NONE = "NONE"
IMPACT_MAINTENANCE = "HOST_MAINTENANCE_MODE_REQUIRED"
IMPACT_REBOOT = "HOST_REBOOT_REQUIRED"
IMPACTS = (IMPACT_NONE, IMPACT_MAINTENANCE, IMPACT_REBOOT)


class DirectPathError(ValueError):
    """A mode the device cannot take, or a change that needs what the host is not in."""


def offers_direct_path(api_version):
    """Whether a vCenter of ``api_version`` (About.apiVersion, '9.1.0.0') serves direct_path_devices."""
    parts = str(api_version or "").split(".")
    try:
        numbers = tuple(int(p) for p in parts[:2])
    except ValueError:
        return False
    return len(numbers) == 2 and numbers >= MIN_API


def rest_mode(word):
    """same_size -> VGPU_SAME_SIZE, mixed_size -> VGPU_MIXED_SIZE; None for another word."""
    return REST_MODE_BY_WORD.get(word)


def mode_word(mode):
    """VGPU_SAME_SIZE -> same_size, VGPU_MIXED_SIZE -> mixed_size; another mode (HOST, DIRECTPATH, ...)
    in lower case, None stays None."""
    if mode is None:
        return None
    return WORD_BY_REST_MODE.get(str(mode), str(mode).lower())


def impact_list(impacts):
    """The impacts of a ConfigureResult, sorted, NONE left out when another one is there."""
    found = sorted(set(str(i) for i in impacts or []))
    real = [i for i in found if i != IMPACT_NONE]
    return real or found


def predict_impacts(info, word):
    """The impacts a configure of the device to ``word`` would have (the simulator documents the same
    rule): [] when the device is in that mode already (no call is made), [NONE] when no VM uses the
    device, [HOST_MAINTENANCE_MODE_REQUIRED] while VMs use it (they must leave it: maintenance mode
    empties the host). :class:`DirectPathError` when the mode is not one of the device's
    ``configurable_modes``."""
    mode = rest_mode(word)
    if mode is None:
        raise DirectPathError("vGPU mode %r has no direct-path-devices mode (%s)" % (word, ", ".join(sorted(REST_MODE_BY_WORD))))
    info = info or {}
    if info.get("current_mode") == mode:
        return []
    configurable = info.get("configurable_modes") or []
    if mode not in configurable:
        raise DirectPathError("the device cannot be configured to %s (its configurable modes: %s; current mode %s)"
                              % (mode, ", ".join(sorted(configurable)) or "none", info.get("current_mode")))
    if info.get("vms"):
        return [IMPACT_MAINTENANCE]
    return [IMPACT_NONE]


def maintenance_refusal(host, impacts_by_device, in_maintenance):
    """The message refusing, before any change, the devices whose change needs maintenance mode on a host
    that is not in it (None when nothing is refused). ``impacts_by_device``: {device: impacts}."""
    if in_maintenance:
        return None
    needing = sorted(d for d, impacts in impacts_by_device.items() if IMPACT_MAINTENANCE in (impacts or []))
    if not needing:
        return None
    return ("host %s is not in maintenance mode and the vGPU mode change of GPU %s needs it (%s): put the host in "
            "maintenance mode (or roll it through maintenance mode with the esxi_gpu_host role) and rerun"
            % (host, ", ".join(needing), IMPACT_MAINTENANCE))


__all__ = ["DirectPathError", "IMPACTS", "IMPACT_MAINTENANCE", "IMPACT_NONE", "IMPACT_REBOOT", "MIN_API",
           "REST_MODE_BY_WORD", "WORD_BY_REST_MODE", "impact_list", "maintenance_refusal", "mode_word",
           "offers_direct_path", "predict_impacts", "rest_mode"]
