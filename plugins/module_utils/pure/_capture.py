# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The redaction of a capture (pure: no I/O).

A capture is the record of what the readers got from a live platform (docs/capture.md). Before it
leaves the platform, :func:`redact` walks it and takes out what must not travel:

- values of keys that hold secrets (passwords, tokens, keys, certificates, thumbprints, kubeconfig
  data such as ``certificate-authority-data``), and every value of a Kubernetes Secret's ``data`` and
  ``stringData``;
- the ``kubectl.kubernetes.io/last-applied-configuration`` annotation (a copy of the object as it was
  applied, secrets included);
- in any text: PEM blocks, bearer tokens, IPv4 and IPv6 addresses, the host part of URLs, and the
  host names given (the vCenter's, the DLS appliance's).

The names of hosts and objects stay (they are the test data) unless a pseudonym map is given
(:func:`pseudonyms`): then each name in it is replaced, as a whole value or a mapping key, by a stable
pseudonym, the same on every capture of the same platform with the same salt.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._inputs import empty_errors, list_item_errors

FORMAT_VERSION = 1
REDACTED = "<redacted>"
REDACTED_IP = "<redacted-ip>"
REDACTED_HOST = "<redacted-host>"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# key names (lower case, "-" as "_") whose values are secrets whatever they hold
SECRET_KEYS = frozenset((
    "password", "passwd", "token", "access_token", "refresh_token", "bearer_token", "api_key", "apikey",
    "secret", "client_secret", "private_key", "client_key", "client_key_data", "client_certificate_data",
    "certificate_authority_data", "certificate", "certificates", "ca_cert", "ca_data", "tls_crt", "tls_key",
    "thumbprint", "ssl_thumbprint", "kubeconfig", "session_id", "authorization", "cookie", "license_token",
))
SECRET_SUFFIXES = ("_password", "_token", "_secret", "_key_data", "_certificate_data", "_thumbprint", "_pem")

PEM_RE = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*?-----END [A-Z0-9 ]+-----", re.S)
PEM_OPEN_RE = re.compile(r"-----BEGIN [A-Z0-9 ]+-----.*", re.S)  # a block cut short: all that follows
BEARER_RE = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
URL_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)(?:[^/@\s]*@)?(\[[0-9a-f:.]+\]|[^/:\s?#\]]+)")
IPV4_RE = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:/\d{1,2})?(?![\w.])")
IPV6_RE = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:%\w+)?(?:/\d{1,3})?(?![\w:.])")


def _norm_key(key):
    return str(key).strip().lower().replace("-", "_").replace(".", "_")


def is_secret_key(key):
    """Whether the values of a mapping key are secrets (by its name alone)."""
    k = _norm_key(key)
    return k in SECRET_KEYS or k.endswith(SECRET_SUFFIXES)


def _ipv6(match):
    text = match.group(0)
    # a time-like run (two colons, no "::") is not taken for an address
    if ("::" not in text and text.count(":") < 3) or not re.search("[0-9A-Fa-f]", text):
        return text
    return REDACTED_IP


def redact_text(text, hosts=()):
    """``text`` with PEM blocks, bearer tokens, addresses, the host part of URLs and the ``hosts`` given
    (whole words, case-insensitive) replaced."""
    text = PEM_RE.sub(REDACTED, text)
    text = PEM_OPEN_RE.sub(REDACTED, text)
    text = BEARER_RE.sub(lambda m: "%s %s" % (m.group(1), REDACTED), text)
    text = URL_RE.sub(lambda m: m.group(1) + REDACTED_HOST, text)
    for host in sorted((h for h in hosts if h), key=len, reverse=True):
        text = re.sub(r"(?i)(?<![\w.-])%s(?![\w-])" % re.escape(host), REDACTED_HOST, text)
    text = IPV4_RE.sub(REDACTED_IP, text)
    return IPV6_RE.sub(_ipv6, text)


def pseudonym(name, salt=""):
    """The stable pseudonym of one name: ``n-`` and 10 hex digits of a salted SHA-256."""
    return "n-" + hashlib.sha256(("%s\0%s" % (salt, name)).encode("utf-8")).hexdigest()[:10]


def pseudonyms(names, salt=""):
    """{name: pseudonym} for the names given (empty ones left out)."""
    return dict((n, pseudonym(n, salt)) for n in names if n)


def _is_secret_object(value):
    return isinstance(value, dict) and value.get("kind") == "Secret" and (
        "data" in value or "stringData" in value)


def redact(record, hosts=(), names=None):
    """A redacted copy of ``record`` (dicts, lists, text, numbers, booleans, None).

    ``hosts``: host names to take out of every text (the vCenter's, the DLS appliance's); ``names``:
    {name: pseudonym} applied to whole text values and mapping keys (after the other redactions)."""
    hosts = tuple(hosts or ())
    names = names or {}

    def text(value):
        value = redact_text(value, hosts)
        return names.get(value, value)

    def walk(value):
        if isinstance(value, dict):
            out = {}
            secret_object = _is_secret_object(value)
            for key, item in value.items():
                new_key = text(key) if isinstance(key, str) else key
                if is_secret_key(key) and item not in (None, "", [], {}):
                    out[new_key] = REDACTED
                elif secret_object and key in ("data", "stringData") and isinstance(item, dict):
                    out[new_key] = dict((k, REDACTED) for k in item)
                elif key == "annotations" and isinstance(item, dict):
                    out[new_key] = dict((text(k), REDACTED if k == LAST_APPLIED else walk(v)) for k, v in item.items())
                elif key == LAST_APPLIED:
                    out[new_key] = REDACTED
                else:
                    out[new_key] = walk(item)
            return out
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, str):
            return text(value)
        return value

    return walk(record)


def leaks(record, hosts=()):
    """The texts in ``record`` that still hold an address, a PEM block, a bearer token or one of ``hosts``
    (a check before writing; [] for a clean record)."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, str) and redact_text(value, hosts) != value:
            found.append(value)

    walk(record)
    return found


def envelope(sections, redact_names):
    """The record as written: its format version, whether names were replaced, and the sections."""
    out = dict(format_version=FORMAT_VERSION, names_redacted=bool(redact_names))
    out.update(sections)
    return out


def gpu_pool_capture_errors(params):
    """The option checks of gpu_pool_capture (enforce runs them before anything is read)."""
    return (empty_errors(params, ("dest", "supervisor_kubeconfig", "kubeconfig"))
            + list_item_errors(params, "clusters") + list_item_errors(params, "redact_hosts"))


# what the API server sets on an object (its identity and history, not its content): left out of a capture, so a
# played-back object is made anew
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
                   "deletionTimestamp", "deletionGracePeriodSeconds")
GUEST_KIND_ORDER = ("Namespace", "PriorityClass", "ResourceQuota", "ResourceFlavor", "ClusterQueue", "LocalQueue")
# the items of a list of a built-in kind do not say their kind and version
CORE_VERSIONS = {"Namespace": "v1", "PriorityClass": "scheduling.k8s.io/v1", "ResourceQuota": "v1"}


def guest_objects(objects, namespaces, versions=None):
    """The guest objects a capture keeps of the guest_objects reader's answer (``{(kind, namespace, name): object}``,
    one list per kind): the tenant ``namespaces`` (with their labels), the PriorityClasses but the API server's own
    (``system-``), the ResourceQuotas and LocalQueues of the tenant namespaces, every ResourceFlavor and
    ClusterQueue; whole, labels (the collection's ownership mark) and annotations kept, without the server's
    metadata and the status. A list in the order the kinds can be made again (namespaces first). ``versions``:
    {kind: apiVersion} of the custom kinds read, for items that do not say it."""
    namespaces = set(namespaces)
    versions = dict(CORE_VERSIONS, **(versions or {}))
    out = []
    for (kind, namespace, name), obj in objects.items():
        keep = {"Namespace": name in namespaces, "PriorityClass": not name.startswith("system-"),
                "ResourceQuota": namespace in namespaces, "LocalQueue": namespace in namespaces}.get(
                    kind, kind in GUEST_KIND_ORDER)
        if not keep:
            continue
        obj = dict((k, v) for k, v in obj.items() if k != "status")
        obj["kind"] = kind
        obj["apiVersion"] = obj.get("apiVersion") or versions.get(kind)
        obj["metadata"] = dict((k, v) for k, v in (obj.get("metadata") or {}).items()
                               if k not in SERVER_METADATA and v not in (None, {}, []))
        out.append(obj)
    return sorted(out, key=lambda o: (GUEST_KIND_ORDER.index(o["kind"]), o["metadata"].get("namespace") or "",
                                      o["metadata"]["name"]))


def topology_of(version, cluster, class_ref):
    """What a capture keeps of a VKS Cluster besides its node pools (read_vks has those): the Cluster API version it
    was read in, its ClusterClass (``namespace/name``), its Kubernetes release, the control plane's replicas and the
    Cluster's topology variables; None without a managed topology."""
    if cluster is None or class_ref is None:
        return None
    topology = (cluster.get("spec") or {}).get("topology") or {}
    return dict(api_version=version, cluster_class="%s/%s" % (class_ref["namespace"], class_ref["name"]),
                version=topology.get("version"),
                control_plane_replicas=(topology.get("controlPlane") or {}).get("replicas"),
                variables=[dict(name=v.get("name"), value=v.get("value")) for v in topology.get("variables") or []])


def names_of(sections):
    """The names a capture holds (hosts, clusters, VMs, namespaces, VM classes, VKS clusters and their node
    pools): what ``redact_names`` maps to pseudonyms."""
    vs = sections.get("vsphere") or {}
    out = set()
    for host in vs.get("hosts") or []:
        out.update((host.get("name"), host.get("cluster")))
        for vm in host.get("vgpu_vms") or []:
            out.add(vm.get("name"))
    out.update(vs.get("drs") or {})
    out.update(vs.get("namespaces") or {})
    out.update(vs.get("vm_classes") or {})
    out.update((vs.get("cluster_names") or {}).values())
    for name, cluster in (sections.get("vks") or {}).items():
        out.add(name)
        out.update((cluster or {}).get("machine_deployments") or {})
    out.update(((sections.get("guest") or {}).get("resource_quotas") or {}))
    return sorted(n for n in out if isinstance(n, str) and n)


__all__ = ["FORMAT_VERSION", "GUEST_KIND_ORDER", "LAST_APPLIED", "REDACTED", "REDACTED_HOST", "REDACTED_IP",
           "SERVER_METADATA", "envelope", "gpu_pool_capture_errors", "guest_objects", "is_secret_key", "names_of",
           "topology_of",
           "leaks", "pseudonym", "pseudonyms", "redact", "redact_text"]
