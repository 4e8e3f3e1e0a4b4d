# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vGPU software license state in the output of ``nvidia-smi -q`` (pure: text in, facts out), as
nvidia_license_info reads it from a guest or host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

NO_DRIVER = ("couldn't communicate with the nvidia driver", "no devices were found",
             "nvidia-smi has failed")
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*)$")
_EXPIRY = re.compile(r"Expiry:\s*(\d{4})-(\d{1,2})-(\d{1,2})\s+(\d{1,2}):(\d{1,2}):(\d{1,2})\s*(GMT|UTC)?", re.I)


def _timestamp(text):
    try:
        return datetime.datetime.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None


def parse_expiry(status):
    """The expiry in a License Status value ("Licensed (Expiry: 2027-11-29 23:59:59 GMT)") as a naive UTC datetime."""
    m = _EXPIRY.search(status or "")
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    return datetime.datetime(y, mo, d, h, mi, s)


def parse(text, now=None):
    """License facts from `nvidia-smi -q` output.

    `now` (naive UTC) decides expiry; default the report's own Timestamp, else the current time.
    """
    low = (text or "").lower()
    out = {"driver_present": True, "driver_version": None, "gpus": [], "licensed": False, "message": ""}
    if not text or not text.strip() or any(s in low for s in NO_DRIVER):
        out.update(driver_present=False, message=(text or "").strip().splitlines()[0] if (text or "").strip() else "no output")
        return out
    gpu = None
    section = []
    report_time = None
    for line in text.splitlines():
        if not line.strip():
            continue
        m_gpu = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", line)
        if m_gpu:
            gpu = {"pci_bus_id": m_gpu.group(1), "product_name": None, "licensed_product": None,
                   "license_status": None, "licensed": False, "expiry": None, "expired": False}
            out["gpus"].append(gpu)
            section = []
            continue
        indent = len(line) - len(line.lstrip())
        m = _KV.match(line)
        if not m or not m.group(3).strip() and ":" not in line:
            # a section title ("    vGPU Software Licensed Product")
            level = indent // 4
            section = section[:max(level - 1, 0)] + [line.strip()]
            continue
        key, value = m.group(2).strip(), m.group(3).strip()
        level = indent // 4
        section = section[:max(level - 1, 0)]
        if gpu is None:
            if key == "Driver Version":
                out["driver_version"] = value
            elif key == "Timestamp":
                report_time = _timestamp(value)
            continue
        in_license = any("Licensed Product" in s for s in section)
        if key == "Product Name":
            if in_license:
                gpu["licensed_product"] = value
            elif level == 1:
                gpu["product_name"] = value
        elif key == "License Status":
            gpu["license_status"] = value
    now = now or report_time or datetime.datetime.utcnow()
    for g in out["gpus"]:
        status = g["license_status"] or ""
        exp = parse_expiry(status)
        g["expiry"] = exp.strftime("%Y-%m-%dT%H:%M:%SZ") if exp else None
        g["expired"] = bool(exp and exp <= now)
        g["licensed"] = status.lower().startswith("licensed") and not g["expired"]
    out["licensed"] = bool(out["gpus"]) and all(g["licensed"] for g in out["gpus"])
    return out


__all__ = ["NO_DRIVER", "parse", "parse_expiry"]
