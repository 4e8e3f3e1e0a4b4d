# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Names and labels of the pool design (pure, standard library only): what makes a valid
RFC 1123 label, file name, Kubernetes label key and value, and the labels and taints each
pool's node pool carries.

Derived names
    VM class ``gpu-<pool>``; node pool ``<pool>``; labels ``nvidia.com/vgpu.profile``,
    ``gpupool.vcf/pool``, ``gpupool.vcf/shape``, ``gpupool.vcf/sharing`` (and
    ``nvidia.com/device-plugin.config`` for guest time-slicing); taints
    ``nvidia.com/gpu=present:NoSchedule`` and ``gpupool.vcf/pool=<pool>:NoSchedule``;
    ResourceQuotas ``gpupool-gpus`` (all GPU requests) and ``gpupool-<priority class>``
    (scoped by PriorityClass); Kueue ResourceFlavor / ClusterQueue ``gpupool-<pool>``,
    LocalQueue ``<pool>`` in each tenant namespace with quota on the pool.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

import re
from collections import OrderedDict


GPU_TAINT_KEY = "nvidia.com/gpu"


PROFILE_LABEL = "nvidia.com/vgpu.profile"


POOL_LABEL = "gpupool.vcf/pool"


SHAPE_LABEL = "gpupool.vcf/shape"


SHARING_LABEL = "gpupool.vcf/sharing"


DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


DNS_LABEL_MAX = 63


LICENSING_HASH_SUFFIX = 11      # the nls_licensing role names the Secret <secret_name>-<10 hex characters>


_DNS_LABEL_CHARS = re.compile(r"[a-z0-9-]")


_FILE_NAME_CHARS = re.compile(r"[A-Za-z0-9._-]")


_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


DNS_LABEL_FORM = ("lower-case letters, digits and '-', starting and ending with a letter or digit, at most %d "
                  "characters")


def _chars(chars):
    return ", ".join(repr(c) for c in sorted(set(chars)))


def dns_label_problem(name, limit=DNS_LABEL_MAX):
    """None when ``name`` is an RFC 1123 label of at most ``limit`` characters, else why not."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    reasons = []
    upper = [c for c in name if c.isupper()]
    other = [c for c in name if not c.isupper() and not _DNS_LABEL_CHARS.match(c)]
    if upper:
        reasons.append("upper-case letters")
    if other:
        reasons.append("characters %s" % _chars(other))
    if name[0] == "-" or name[-1] == "-":
        reasons.append("it %s with '-'" % ("starts" if name[0] == "-" else "ends"))
    if len(name) > limit:
        reasons.append("%d characters, over %d" % (len(name), limit))
    return "; ".join(reasons) or None


def dns_label_suggestion(name, limit=DNS_LABEL_MAX):
    """The closest RFC 1123 label of at most ``limit`` characters (``GPU_Inference`` -> ``gpu-inference``)."""
    text = re.sub(r"[^a-z0-9]+", "-", str(name or "").lower()).strip("-")
    return text[:limit].rstrip("-") or "gpupool"[:limit]


def file_name_problem(name, limit=DNS_LABEL_MAX):
    """None when ``name`` is a safe file name (and a label value), else why not."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    reasons = []
    if "/" in name or "\\" in name:
        reasons.append("a path separator")
    if "\0" in name:
        reasons.append("a NUL character")
    if any(c.isspace() for c in name):
        reasons.append("white space")
    other = [c for c in name if not _FILE_NAME_CHARS.match(c) and c not in "/\\\0" and not c.isspace()]
    if other:
        reasons.append("characters %s" % _chars(other))
    if name[0] in ".-":
        reasons.append("it starts with %r" % name[0])
    elif name[-1] in ".-":
        reasons.append("it ends with %r" % name[-1])
    if len(name) > limit:
        reasons.append("%d characters, over %d" % (len(name), limit))
    return "; ".join(reasons) or None


def file_name_suggestion(name, limit=DNS_LABEL_MAX):
    """The closest safe file name (``../../x`` -> ``x``)."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name or "")).strip(".-")
    return text[:limit].rstrip(".-") or "gpupool"


def label_value_problem(value):
    """None when ``value`` is a valid Kubernetes label value (empty allowed), else why not."""
    if not isinstance(value, str):
        return "it is not a string"
    if value == "":
        return None
    if len(value) > DNS_LABEL_MAX:
        return "%d characters, over %d" % (len(value), DNS_LABEL_MAX)
    if not _LABEL_NAME_RE.match(value):
        return "not alphanumerics, '-', '_' and '.' starting and ending with an alphanumeric"
    return None


def label_key_problem(key):
    """None when ``key`` is a valid Kubernetes label (or taint) key: ``[prefix/]name``, else why not."""
    if not isinstance(key, str) or not key:
        return "it is empty"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        return "the prefix %r is not a DNS subdomain" % prefix
    if not name or len(name) > DNS_LABEL_MAX or not _LABEL_NAME_RE.match(name):
        return ("the name %r is not at most %d alphanumerics, '-', '_' and '.' starting and ending with an "
                "alphanumeric" % (name, DNS_LABEL_MAX))
    return None


def node_pool_labels(pool, design=None):
    """The labels of a pool's nodes: derived ones with the node pool's labels merged over them."""
    labels = OrderedDict([
        (PROFILE_LABEL, pool["vgpu_profile"]),
        (POOL_LABEL, pool["name"]),
        (SHAPE_LABEL, pool["shape"]),
        (SHARING_LABEL, pool["sharing"]),
    ])
    if (pool.get("guest_time_slicing") or {}).get("replicas"):
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = pool["name"]
    for key, value in ((pool.get("node_pool") or {}).get("labels") or {}).items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return labels


def node_pool_taints(pool):
    """The taints of a pool's nodes (``node_pool.taints`` or the derived pair)."""
    taints = (pool.get("node_pool") or {}).get("taints")
    if taints is not None:
        return [OrderedDict((k, t[k]) for k in ("key", "value", "effect")) for t in taints]
    return [OrderedDict([("key", GPU_TAINT_KEY), ("value", "present"), ("effect", "NoSchedule")]),
            OrderedDict([("key", POOL_LABEL), ("value", pool["name"]), ("effect", "NoSchedule")])]
