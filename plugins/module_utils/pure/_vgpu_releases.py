# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA vGPU software releases: which Linux guest driver goes with which Virtual GPU Manager
(the ESXi host driver), as NVIDIA's release notes list them (pure, standard library only).

Every release of NVIDIA vGPU software ships one Virtual GPU Manager (host) version and one
Linux guest driver version; a release branch (R535, R550, ...) is one major vGPU release (16,
17, ...). NVIDIA's release notes ("Compatibility Requirements for the NVIDIA vGPU Manager and
Guest VM Driver") name the supported combinations:

* a vGPU Manager with guest drivers of the same release;
* a vGPU Manager with guest drivers of other releases of the same major release branch
  (R525 release notes; the branch is the first number of the driver version);
* a vGPU Manager of a later major release branch with guest drivers of the previous branch;
* a vGPU Manager of a later long-term support branch with guest drivers of the previous
  long-term support branch (R580 release notes).

Anything else - a guest driver newer than the host's branch, or two or more branches older -
fails to load the vGPU in the VM. Only versions read in a named source are in the tables
below; a branch or version that is not there is reported as unknown, never guessed.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import re
from collections import namedtuple

# where each entry was read
SOURCES = {
    "vsphere-r580": "NVIDIA Virtual GPU Software R580 for VMware vSphere Release Notes (vGPU 19.0), "
                    "'NVIDIA vGPU Software Driver Versions' and 'Compatible NVIDIA vGPU Manager and Guest VM "
                    "Driver Releases'",
    "kvm-r525": "NVIDIA Virtual GPU Software R525 for Linux with KVM Release Notes (vGPU 15.0, 15.1), "
                "'NVIDIA vGPU Software Driver Versions' and 'Compatible NVIDIA vGPU Manager and Guest VM "
                "Driver Releases'",
    "gcp-grid-table": "Google Cloud Compute Engine documentation, 'NVIDIA RTX Virtual Workstation drivers' "
                      "table (Linux guest driver per NVIDIA vGPU software version)",
    "lifecycle": "NVIDIA vGPU software lifecycle table ('NVIDIA vGPU 17 R550 Production', "
                 "'NVIDIA vGPU 16 R535 Long-Term Support')",
    "azure-aks-gpu": "Azure aks-gpu driver update (vGPU 18.6 = 570.211.01 GRID guest driver)",
}

Branch = namedtuple("Branch", "driver_branch major lts source")
Release = namedtuple("Release", "version host guest source")

# driver branch (first number of a driver version) -> the vGPU major release it ships;
# lts: True for a long-term support branch, None where no source says
BRANCHES = {
    525: Branch(525, 15, None, "kvm-r525"),
    535: Branch(535, 16, True, "lifecycle"),
    550: Branch(550, 17, False, "lifecycle"),
    570: Branch(570, 18, None, "azure-aks-gpu"),
    580: Branch(580, 19, None, "vsphere-r580"),
}

# releases whose versions a source lists; host None: the source gives only the guest driver
RELEASES = (
    Release("15.0", "525.60.12", "525.60.13", "kvm-r525"),
    Release("15.1", "525.85.07", "525.85.05", "kvm-r525"),
    Release("19.0", "580.65.05", "580.65.06", "vsphere-r580"),
    Release("19.1", None, "580.82.07", "gcp-grid-table"),
)

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")


def version_numbers(text):
    """(branch, minor, patch) of a driver version (550.90.05, 550.90.05-1OEM.800..., 580.65.06),
    None when ``text`` is not one."""
    m = _VERSION.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _short(text):
    return _VERSION.match(text).group(0).strip()


def _same(text, numbers):
    return text is not None and version_numbers(text) == numbers


def release_of(version, side):
    """The Release whose ``side`` ("host" or "guest") version is ``version``; None if no source lists it."""
    numbers = version_numbers(version)
    if numbers is None:
        return None
    for release in RELEASES:
        if _same(getattr(release, side), numbers):
            return release
    return None


def branch_of(version):
    """The Branch of a driver version; None when the version is not one or the branch is not in BRANCHES."""
    numbers = version_numbers(version)
    return BRANCHES.get(numbers[0]) if numbers else None


def _name(version, side):
    release = release_of(version, side)
    branch = branch_of(version)
    where = ("vGPU %s" % release.version) if release else ("vGPU %d" % branch.major if branch else None)
    return "%s (R%d%s)" % (_short(version), version_numbers(version)[0], ", " + where if where else "")


def guest_supported(host_version, guest_version):
    """Whether NVIDIA supports the Linux guest driver ``guest_version`` on the Virtual GPU Manager
    ``host_version``: ``(verdict, reason)`` with verdict True (supported), False (not supported) or
    None (a branch is not in the tables: nothing to judge by). ``reason`` says which combination
    NVIDIA names, or why none applies."""
    host, guest = version_numbers(host_version), version_numbers(guest_version)
    if host is None or guest is None:
        return None, "%r is not a driver version" % (host_version if host is None else guest_version)
    hb, gb = BRANCHES.get(host[0]), BRANCHES.get(guest[0])
    host_text, guest_text = _name(host_version, "host"), _name(guest_version, "guest")
    if hb is None or gb is None:
        missing = sorted(set(n for n, b in ((host[0], hb), (guest[0], gb)) if b is None))
        return None, ("driver branch %s is not in the release table (known: %s)"
                      % (", ".join("R%d" % n for n in missing), ", ".join("R%d" % n for n in sorted(BRANCHES))))
    host_release, guest_release = release_of(host_version, "host"), release_of(guest_version, "guest")
    if host_release is not None and guest_release is not None and host_release == guest_release:
        return True, "guest driver %s and vGPU Manager %s are the same release" % (guest_text, host_text)
    if hb.major == gb.major:
        return True, ("guest driver %s and vGPU Manager %s are of the same release branch" % (guest_text, host_text))
    if hb.major == gb.major + 1:
        return True, ("vGPU Manager %s is of the branch after the guest driver's %s, which NVIDIA supports"
                      % (host_text, guest_text))
    if hb.major > gb.major and hb.lts and gb.lts and not any(
            b.lts for b in BRANCHES.values() if gb.major < b.major < hb.major):
        return True, ("vGPU Manager %s is of the long-term support branch after the guest driver's %s"
                      % (host_text, guest_text))
    if gb.major > hb.major:
        return False, ("guest driver %s is newer than the vGPU Manager %s: a guest driver must not be of a later "
                       "release branch than the host's" % (guest_text, host_text))
    older = hb.major - gb.major
    return False, ("guest driver %s is %d release branches older than the vGPU Manager %s: NVIDIA supports "
                   "guest drivers of the host's branch or the one before it" % (guest_text, older, host_text))


def matching_guest(host_version):
    """The Linux guest driver of the host version's release where a source lists it, else None."""
    release = release_of(host_version, "host")
    return release.guest if release is not None else None
