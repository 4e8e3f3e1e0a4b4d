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


# ---------------------------------------------------------------------------------------
# bounds shared by the design schema and the roles' input checks (one rule, one place)
# ---------------------------------------------------------------------------------------

# how much of a value a message shows: enough to recognise it, never a whole file
SHOWN_MAX = 80


DNS_SUBDOMAIN_MAX = 253


# Kubernetes: a user PriorityClass value is a 32-bit integer of at most one billion; the
# values above are reserved for the system classes (system-cluster-critical, system-node-critical)
PRIORITY_VALUE_MIN = -2147483648


PRIORITY_VALUE_MAX = 1000000000


# Kubernetes reserves PriorityClass names that start with system- for its own classes
RESERVED_PRIORITY_PREFIX = "system-"


# namespaces a tenant cannot own: Kubernetes' own and the Supervisor's vmware-system-* namespaces
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


SYSTEM_NAMESPACE_PREFIXES = ("kube-", "vmware-system-")


# OCI distribution spec: a tag is at most 128 characters of [A-Za-z0-9_.-], not starting with '.' or '-'
OCI_TAG_MAX = 128


_OCI_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


# OCI distribution spec: a repository name is path components of lower-case alphanumerics joined
# by one '.', one or two '_' or any number of '-', separated by '/'
_OCI_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"


_OCI_PATH_RE = re.compile(r"^%s(?:/%s)*$" % (_OCI_COMPONENT, _OCI_COMPONENT))


# a registry host: DNS labels (any case) joined by '.', or localhost, with an optional port
_REGISTRY_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                          r"(?::[0-9]{1,5})?$")


_DIGEST_RE = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$")


# many registries refuse a registry host, '/' and repository name longer than this
OCI_NAME_MAX = 255


def shown(value, limit=SHOWN_MAX):
    """``repr(value)`` of at most ``limit`` characters (the rest as '...'): what a message echoes."""
    try:
        text = repr(value)
    except Exception:  # pylint: disable=broad-except
        text = "<%s>" % type(value).__name__
    if len(text) <= limit:
        return text
    return text[:max(limit - 3, 1)] + "..."


def dns_subdomain_problem(name):
    """None when ``name`` is an RFC 1123 subdomain (Kubernetes object names such as storage classes), else why not."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    if len(name) > DNS_SUBDOMAIN_MAX:
        return "%d characters, over %d" % (len(name), DNS_SUBDOMAIN_MAX)
    if not _DNS_SUBDOMAIN_RE.match(name):
        return ("not lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a "
                "letter or digit")
    return None


def system_namespace_problem(name):
    """None when a tenant may own the namespace ``name``, else why not (a Kubernetes or Supervisor namespace)."""
    if not isinstance(name, str):
        return None
    if name in SYSTEM_NAMESPACES:
        return "%s is a Kubernetes system namespace" % name
    for prefix in SYSTEM_NAMESPACE_PREFIXES:
        if name.startswith(prefix):
            return "names starting with %s are reserved for %s namespaces" % (
                prefix, "Kubernetes" if prefix == "kube-" else "the Supervisor's own")
    return None


def priority_value_problem(value):
    """None when ``value`` is a user PriorityClass value, else why not."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "%s is not a whole number" % shown(value)
    if value > PRIORITY_VALUE_MAX:
        return ("%d is above %d: Kubernetes keeps the higher values for its system PriorityClasses"
                % (value, PRIORITY_VALUE_MAX))
    if value < PRIORITY_VALUE_MIN:
        return "%d is below %d, the smallest 32-bit integer" % (value, PRIORITY_VALUE_MIN)
    return None


def priority_name_problem(name):
    """None when ``name`` is a PriorityClass name a user may create (not system-*), else why not."""
    if isinstance(name, str) and name.startswith(RESERVED_PRIORITY_PREFIX):
        return "names starting with %s are reserved for Kubernetes' own PriorityClasses" % RESERVED_PRIORITY_PREFIX
    return None


def http_url_problem(url):
    """None when ``url`` is an absolute http:// or https:// URL with a host, else why not."""
    if not isinstance(url, str) or not url:
        return "it is empty"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return "the scheme is not http or https"
    host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    if not host or host.startswith(":"):
        return "it names no host"
    if any(c.isspace() for c in url):
        return "it holds white space"
    return None


def oci_tag_problem(tag):
    """None when ``tag`` is an OCI image tag, else why not."""
    if not isinstance(tag, str) or not tag:
        return "it is empty"
    if len(tag) > OCI_TAG_MAX:
        return "%d characters, over %d" % (len(tag), OCI_TAG_MAX)
    if not _OCI_TAG_RE.match(tag):
        return ("a tag is letters, digits, '_', '.' and '-', starting with a letter, digit or '_', at most %d "
                "characters" % OCI_TAG_MAX)
    return None


def oci_path_problem(path):
    """None when ``path`` is an OCI repository path (no registry host), else why not."""
    if not isinstance(path, str) or not path:
        return "it is empty"
    if len(path) > OCI_NAME_MAX:
        return "%d characters, over %d" % (len(path), OCI_NAME_MAX)
    if not _OCI_PATH_RE.match(path):
        return ("a repository path is '/'-separated parts of lower-case letters and digits, joined within a part "
                "by '.', '_', '__' or dashes")
    return None


def oci_repository_problem(ref):
    """None when ``ref`` is ``[registry[:port]/]path`` (an image repository without tag or digest), else why not."""
    if not isinstance(ref, str) or not ref:
        return "it is empty"
    if len(ref) > OCI_NAME_MAX:
        return "%d characters, over %d" % (len(ref), OCI_NAME_MAX)
    first, slash, rest = ref.partition("/")
    # the first part is a registry host when it has a '.' or a ':' or is localhost (as container tools read it)
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _REGISTRY_RE.match(first):
            return "the registry %s is not a host name with an optional port" % shown(first)
        port = first.rpartition(":")[2] if ":" in first else None
        if port is not None and not 1 <= int(port) <= 65535:
            return "the registry port %s is not from 1 to 65535" % port
        return oci_path_problem(rest)
    return oci_path_problem(ref)


def oci_reference_problem(ref):
    """None when ``ref`` is an image reference ``[registry[:port]/]path[:tag][@digest]``, else why not."""
    if not isinstance(ref, str) or not ref:
        return "it is empty"
    name, at, digest = ref.partition("@")
    if at and not _DIGEST_RE.match(digest):
        return "the digest %s is not <algorithm>:<hex>" % shown(digest)
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        problem = oci_tag_problem(tag)
        if problem:
            return "the tag %s: %s" % (shown(tag), problem)
    return oci_repository_problem(name)


def text_problem(value, limit):
    """None when ``value`` is a text of at most ``limit`` characters, else why not."""
    if isinstance(value, str) and len(value) > limit:
        return "%d characters, over %d" % (len(value), limit)
    return None
