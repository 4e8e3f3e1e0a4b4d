# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The pool design: normalization, validation rules and derivation (pure, standard library only).

One YAML design (schema in ``_design_schema``, guide in docs/design.md) describes the GPU
clusters, the pools per workload shape and the tenants. Everything the links need is
derived from it, after it has been validated.

Entry points

* ``normalize(design) -> (normalized, findings)``: defaults filled in, schema findings
  (rule ``schema``) for unknown keys, wrong types, missing required fields, bad choices.
* ``validate(design) -> [Finding]``: every violation at once, schema and design rules, in a
  stable order (rule order of ``RULES``, then object).
* ``derive(design) -> dict``: the per-link inputs; raises ``DesignError`` when the design
  has errors.
* ``Finding``: ``rule`` (stable snake_case name), ``severity`` (``error`` | ``warning``),
  ``object`` (``clusters.gpu-h100``, ``pools.inference``, ``tenants.research``),
  ``message`` and ``fix``; ``to_dict()``; ``str()`` is ``rule: object: message (fix: fix)``.

Rules (``RULES`` maps each name to its severity and one line of documentation)

``schema``, ``design_name_safe``, ``dns_label``, ``label_syntax``, ``unique_names``, ``unknown_reference``, ``gpu_model_known``,
``profile_offered``, ``sharing_matches_profile``, ``mig_mix_fits``,
``inference_not_time_sliced``, ``training_multi_gpu``, ``notebook_preemptible``,
``node_pool_gpu_taint``, ``node_pool_profile_label``, ``tenant_gpu_quota``,
``quota_exceeds_pool`` (warning), ``driver_version_pinned``, ``driver_source``,
``driver_versions_mixed`` (warning), ``graphics_shared_direct``, ``scheduler_valid``,
``cluster_capacity``, ``spare_capacity``, ``model_fits_framebuffer``.

Capacity model (``cluster_capacity``, ``spare_capacity``, ``min_gpus``)
    Every host of a cluster has ``gpu.per_host`` cards. A node VM of a pool holds
    ``gpus_per_node`` vGPUs, each on a different card of one host; a card carries vGPUs of
    one profile only, up to ``per_card`` of them (default: as many as fit - one for a full
    card, memory / framebuffer for a time-sliced profile, the most instances of the MIG
    profile that can be placed on one card). Node VMs are packed first-fit, biggest first.
    vGPU VMs keep their cards whatever the pods' priority, so the spare rule packs every
    pool of a cluster that carries an inference pool into all hosts but one, inference last,
    and reports the inference pools left short. ``cluster_capacity`` failing skips the spare
    rule for that cluster.

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

import copy
import difflib
import json
import re
from collections import OrderedDict

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_schema import (
    DEFAULT_PRIORITIES,
    DESIGN_SCHEMA,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._esxi import (
    EsxiError,
    parse_driver_version,
    version_from_bundle,
)
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia import (
    NvidiaError,
    encode_scheduler,
    format_rmpvmrl,
    gpu_model,
    gpu_models,
    mig_placement,
    parse_profile,
    vgpu_mig_profile,
)


class DesignError(ValueError):
    """The design has errors; ``findings`` lists them."""

    def __init__(self, findings):
        self.findings = list(findings)
        super(DesignError, self).__init__(
            "The design has %d error(s):\n%s" % (len(self.findings), "\n".join(str(f) for f in self.findings)))


class Finding:
    """One rule violation."""

    __slots__ = ("rule", "severity", "object", "message", "fix")

    def __init__(self, rule, obj, message, fix, severity=None):
        self.rule = rule
        self.severity = severity or RULES[rule][0]
        self.object = obj
        self.message = message
        self.fix = fix

    def to_dict(self):
        return OrderedDict((k, getattr(self, k)) for k in self.__slots__)

    def __eq__(self, other):
        return isinstance(other, Finding) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(tuple(self.to_dict().values()))

    def __repr__(self):
        return "Finding(%r, %r, %r)" % (self.rule, self.severity, self.object)

    def __str__(self):
        return "%s: %s: %s (fix: %s)" % (self.rule, self.object, self.message, self.fix)


ERROR = "error"
WARNING = "warning"

RULES = OrderedDict([
    ("schema", (ERROR, "The design matches the schema: known keys, types, choices, required fields.")),
    ("design_name_safe", (ERROR, "The design name is a safe file name and label value (it names the token file).")),
    ("dns_label", (ERROR, "Every name the design gives or derives for a vCenter or Kubernetes object is an RFC 1123 "
                          "label (lower-case letters, digits, '-', at most 63 characters).")),
    ("label_syntax", (ERROR, "Node label and taint keys and values are valid Kubernetes label keys and values.")),
    ("unique_names", (ERROR, "Cluster, pool, tenant, namespace, VM class and node pool names are unique.")),
    ("unknown_reference", (ERROR, "Every cluster, VKS cluster, priority and pool a field names exists.")),
    ("gpu_model_known", (ERROR, "A cluster's GPU model is in the NVIDIA catalog.")),
    ("profile_offered", (ERROR, "A pool's vGPU profile is offered by its cluster's GPU model.")),
    ("sharing_matches_profile", (ERROR, "The sharing mode matches the profile: MIG-backed, full card or a "
                                        "fraction of a card time-sliced.")),
    ("mig_mix_fits", (ERROR, "The MIG instances asked of one card can be placed on it.")),
    ("inference_not_time_sliced", (ERROR, "Inference is not on time-sliced sharing.")),
    ("training_multi_gpu", (ERROR, "Multi-GPU training uses full cards and gang scheduling.")),
    ("notebook_preemptible", (ERROR, "Notebooks run on a priority that inference and training preempt.")),
    ("node_pool_gpu_taint", (ERROR, "A GPU node pool carries the nvidia.com/gpu NoSchedule taint.")),
    ("node_pool_profile_label", (ERROR, "A GPU node pool carries the nvidia.com/vgpu.profile label of its "
                                        "profile.")),
    ("tenant_gpu_quota", (ERROR, "Every tenant namespace has a GPU quota.")),
    ("quota_exceeds_pool", (WARNING, "A tenant's quota on a pool is not larger than the pool.")),
    ("driver_version_pinned", (ERROR, "Every GPU cluster pins one full NVIDIA driver version.")),
    ("driver_source", (ERROR, "The driver lifecycle has its source: a bundle (direct) or a depot (vlcm).")),
    ("driver_versions_mixed", (WARNING, "The GPU clusters run the same driver branch.")),
    ("graphics_shared_direct", (ERROR, "vGPU hosts use the Shared Direct graphics type.")),
    ("scheduler_valid", (ERROR, "The vGPU scheduler settings form a valid RmPVMRL value.")),
    ("cluster_capacity", (ERROR, "The node VMs of every pool fit on the cluster's cards.")),
    ("spare_capacity", (ERROR, "Losing the largest host leaves every inference pool its node VMs.")),
    ("model_fits_framebuffer", (ERROR, "The declared model plus KV cache fits the profile's framebuffer.")),
])

GPU_TAINT_KEY = "nvidia.com/gpu"
PROFILE_LABEL = "nvidia.com/vgpu.profile"
POOL_LABEL = "gpupool.vcf/pool"
SHAPE_LABEL = "gpupool.vcf/shape"
SHARING_LABEL = "gpupool.vcf/sharing"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
DEFAULT_PRIORITY = {"inference": "gpu-inference", "training": "gpu-training", "notebooks": "gpu-notebook"}
SYSTEM_PRIORITY_MIN = 1000000000

# Time-sliced C-series framebuffer sizes (GB) per model, as the vGPU type lists give them;
# other models: the whole divisors of the memory from 4 GB up. Q series only on the
# graphics models (no MIG): every whole divisor of the memory.
_TIME_SLICED_C = {
    "A100-80GB": (80, 40, 20, 16, 10, 8, 5, 4),
    "H100-80GB": (80, 40, 20, 16, 10, 8, 5, 4),
    "H200-141GB": (141, 70, 47, 35, 28, 23, 17, 14),
    "L40S": (48, 24, 16, 12, 8, 6, 4),
}


def _driver_version(version):
    """The design's driver version read as the ESXi link reads it (_esxi), or None when it is not one."""
    if not isinstance(version, str):
        return None
    try:
        return parse_driver_version(version)
    except EsxiError:
        return None


# ---------------------------------------------------------------------------------------
# normalization (schema)
# ---------------------------------------------------------------------------------------

_TYPE_WORDS = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false",
               "dict": "a mapping", "list": "a list", "map": "a mapping"}


def _schema_error(findings, path, message, fix):
    findings.append(Finding("schema", path or "design", message, fix))


def _item_path(path, index, item):
    if isinstance(item, dict) and isinstance(item.get("name"), str) and item.get("name"):
        return "%s.%s" % (path, item["name"])
    return "%s[%d]" % (path, index)


def _norm(value, spec, path, findings):
    """Normalize ``value`` (not None) against ``spec``; None when it is invalid."""
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec["type"]
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "dict": isinstance(value, dict),
        "map": isinstance(value, dict),
        "list": isinstance(value, list),
    }[kind]
    if not ok:
        _schema_error(findings, path, "%r is not %s" % (value, _TYPE_WORDS[kind]),
                      "give %s" % _TYPE_WORDS[kind])
        return None
    if kind == "float":
        value = float(value)
    if spec.get("choices") is not None and value not in spec["choices"]:
        _schema_error(findings, path, "%r is not one of %s" % (value, ", ".join(str(c) for c in spec["choices"])),
                      "use one of %s" % ", ".join(str(c) for c in spec["choices"]))
        return None
    low = spec.get("min")
    if low is not None:
        size = len(value) if kind == "list" else value
        if size < low:
            what = "items" if kind == "list" else "value"
            _schema_error(findings, path, "%s %s is below the minimum %s" % (what, size, low),
                          "give at least %s" % low)
            return None
    if kind == "dict":
        return _norm_dict(value, spec.get("options", {}), path, findings)
    if kind == "list":
        elements = spec.get("elements", "str")
        element_spec = {"type": "dict", "options": spec.get("options", {})} if elements == "dict" else elements
        out = []
        for index, item in enumerate(value):
            item_path = _item_path(path, index, item)
            if item is None:
                _schema_error(findings, item_path, "empty list item", "remove it or fill it in")
                continue
            normalized = _norm(item, element_spec, item_path, findings)
            if normalized is not None:
                out.append(normalized)
        return out
    if kind == "map":
        out = OrderedDict()
        for key, item in value.items():
            item_path = "%s.%s" % (path, key)
            if not isinstance(key, str):
                _schema_error(findings, item_path, "key %r is not a string" % (key,), "quote the key")
                continue
            if item is None:
                if spec.get("nullable_values"):
                    out[key] = None
                else:
                    _schema_error(findings, item_path, "no value", "give a value or remove the key")
                continue
            normalized = _norm(item, spec.get("values", "str"), item_path, findings)
            if normalized is not None:
                out[key] = normalized
        return out
    return value


def _norm_dict(value, options, path, findings):
    out = OrderedDict()
    for key in value:
        if key not in options:
            close = difflib.get_close_matches(str(key), list(options), n=1)
            _schema_error(findings, "%s.%s" % (path, key) if path else str(key), "unknown key %r" % (key,),
                          "did you mean %r?" % close[0] if close else
                          "remove it; valid keys: %s" % ", ".join(options))
    for key, sub in options.items():
        sub_path = "%s.%s" % (path, key) if path else key
        item = value.get(key)
        if item is None:
            if sub.get("required"):
                _schema_error(findings, sub_path, "required field is missing",
                              "add %s (%s)" % (key, sub.get("description", sub["type"])))
                out[key] = None
                continue
            default = copy.deepcopy(sub.get("default"))
            if default is not None and sub["type"] == "dict":
                default = _norm_dict(default, sub.get("options", {}), sub_path, findings)
            out[key] = default
            continue
        out[key] = _norm(item, sub, sub_path, findings)
    return out


def normalize(design):
    """Apply the schema and the derived defaults; return ``(normalized design, schema findings)``."""
    findings = []
    if not isinstance(design, dict):
        _schema_error(findings, "design", "the design is %r, not a mapping" % (type(design).__name__,),
                      "give the design as a YAML mapping (see docs/design.md)")
        design = {}
    d = _norm_dict(design, DESIGN_SCHEMA["options"], "", findings)
    for key in ("vks_clusters", "clusters", "pools", "tenants"):
        d[key] = [item for item in (d.get(key) or []) if isinstance(item, dict)]
    priorities = OrderedDict((k, copy.deepcopy(v)) for k, v in DEFAULT_PRIORITIES.items())
    for name, value in (d.get("priorities") or {}).items():
        if isinstance(value, dict):
            priorities[name] = value
    d["priorities"] = priorities
    supervisor = d.get("supervisor") or {}
    only_vks = d["vks_clusters"][0]["name"] if len(d["vks_clusters"]) == 1 else None
    for pool in d["pools"]:
        if pool.get("priority") is None and pool.get("shape"):
            pool["priority"] = DEFAULT_PRIORITY[pool["shape"]]
        if isinstance(pool.get("vm_class"), dict) and pool["vm_class"].get("name") is None and pool.get("name"):
            pool["vm_class"]["name"] = "gpu-%s" % pool["name"]
        node_pool = pool.get("node_pool")
        if isinstance(node_pool, dict):
            if node_pool.get("name") is None:
                node_pool["name"] = pool.get("name")
            if node_pool.get("vks_cluster") is None:
                node_pool["vks_cluster"] = only_vks
    for tenant in d["tenants"]:
        if tenant.get("namespace") is None:
            tenant["namespace"] = tenant.get("name")
        if tenant.get("storage_policy") is None:
            tenant["storage_policy"] = supervisor.get("storage_policy")
    return d, findings


# ---------------------------------------------------------------------------------------
# catalog helpers
# ---------------------------------------------------------------------------------------


def _model(name):
    try:
        return gpu_model(name)
    except NvidiaError:
        return None


def offered_profiles(model):
    """vGPU profiles (vSphere names) a GPU model offers: time-sliced C (and Q on graphics
    models), then MIG-backed. Names use the model's first vGPU stem."""
    model = gpu_model(model)
    if not model.vgpu_stems:
        return []
    stem = model.vgpu_stems[0].lower()
    sizes = _TIME_SLICED_C.get(model.name) or tuple(
        s for s in range(model.memory_gb, 3, -1) if model.memory_gb % s == 0)
    names = ["%s_%s-%dc" % (model.vgpu_prefix, stem, s) for s in sizes]
    if not model.mig:
        names += ["%s_%s-%dq" % (model.vgpu_prefix, stem, s)
                  for s in range(model.memory_gb, 0, -1) if model.memory_gb % s == 0]
    for mig in model.mig:
        names.append("%s_%s-%d-%dc%s" % (model.vgpu_prefix, stem, mig.compute_slices, mig.framebuffer_gb,
                                         "me" if mig.media_extension else ""))
    return names


def profile_problem(profile_name, model):
    """None when ``model`` offers the profile, else the reason (a sentence)."""
    try:
        profile = parse_profile(profile_name)
    except NvidiaError as exc:
        return str(exc)
    model = gpu_model(model)
    if profile.gpu not in model.vgpu_stems or profile.prefix != model.vgpu_prefix:
        return ("%s is a profile for GPU %s; %s profiles are named %s"
                % (profile_name, profile.gpu,
                   model.name, " or ".join("%s_%s-..." % (model.vgpu_prefix, s.lower()) for s in model.vgpu_stems)
                   or "(none: not a vSphere vGPU model)"))
    if profile.mig_backed:
        try:
            vgpu_mig_profile(profile, model)
        except NvidiaError as exc:
            return str(exc)
        return None
    sizes = _TIME_SLICED_C.get(model.name) or tuple(
        s for s in range(model.memory_gb, 3, -1) if model.memory_gb % s == 0)
    if profile.series == "C":
        if profile.framebuffer_gb not in sizes:
            return "%s offers no %d GB time-sliced C profile (sizes: %s GB)" % (
                model.name, profile.framebuffer_gb, ", ".join(str(s) for s in sizes))
        return None
    if profile.series == "Q" and not model.mig:
        if model.memory_gb % profile.framebuffer_gb:
            return "%s offers no %d GB Q profile" % (model.name, profile.framebuffer_gb)
        return None
    return "%s offers no %s-series profiles here (compute C%s)" % (
        model.name, profile.series, "" if model.mig else " and workstation Q")


def _suggest(model, sharing):
    """Profiles of the model that suit a sharing mode, for fix messages."""
    names = []
    for name in offered_profiles(model):
        profile = parse_profile(name)
        if profile.series != "C" or profile.media_extension:
            continue
        full = not profile.mig_backed and profile.framebuffer_gb >= model.memory_gb
        kind = "mig" if profile.mig_backed else "full_card" if full else "time_sliced"
        if kind == sharing:
            names.append(name)
    return ", ".join(names) or "none on %s" % model.name


def per_card(pool, model):
    """vGPUs of the pool's profile one card carries (the pool's ``per_card`` or as many as fit)."""
    if pool.get("per_card"):
        return pool["per_card"]
    profile = parse_profile(pool["vgpu_profile"])
    if profile.mig_backed:
        mig = vgpu_mig_profile(profile, model)
        best = 1
        for count in range(1, mig.max_instances + 1):
            try:
                mig_placement(model, {mig.name: count})
                best = count
            except NvidiaError:
                break
        return best
    return max(1, model.memory_gb // profile.framebuffer_gb)


# ---------------------------------------------------------------------------------------
# context shared by the rules
# ---------------------------------------------------------------------------------------


class _Context:
    def __init__(self, d):
        self.d = d
        self.clusters = OrderedDict((c["name"], c) for c in d["clusters"] if c.get("name"))
        self.pools = OrderedDict((p["name"], p) for p in d["pools"] if p.get("name"))
        self.vks = OrderedDict((v["name"], v) for v in d["vks_clusters"] if v.get("name"))
        self.models = {}
        for cluster in d["clusters"]:
            gpu = cluster.get("gpu") or {}
            self.models[cluster.get("name")] = _model(gpu.get("model")) if gpu.get("model") else None
        self.profiles = {}
        for pool in d["pools"]:
            try:
                self.profiles[pool.get("name")] = parse_profile(pool.get("vgpu_profile"))
            except NvidiaError:
                self.profiles[pool.get("name")] = None

    def model_of(self, pool):
        cluster = self.clusters.get(pool.get("cluster"))
        return self.models.get(cluster["name"]) if cluster else None

    def usable(self, pool):
        """The pool's profile, when it is offered by a known model of a known cluster (else None)."""
        model = self.model_of(pool)
        profile = self.profiles.get(pool.get("name"))
        if model is None or profile is None or profile_problem(profile.name, model):
            return None
        return profile


def _pool_object(pool):
    return "pools.%s" % pool.get("name")


# ---------------------------------------------------------------------------------------
# rules
# ---------------------------------------------------------------------------------------


# names -------------------------------------------------------------------------------

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


def _name_finding(obj, what, name, where, limit=DNS_LABEL_MAX, derived=None, fix=None):
    """A dns_label finding for ``name`` (None when it is fine)."""
    problem = dns_label_problem(name, limit)
    if problem is None:
        return None
    origin = "derived from %s as %s" % (where, derived) if derived else where
    if fix is None:
        fix = "use %r (%s)" % (dns_label_suggestion(name, limit), DNS_LABEL_FORM % limit)
    return Finding("dns_label", obj, "%s %r (%s) is not a name vCenter and Kubernetes accept: %s"
                   % (what, name, origin, problem), fix)


def _design_names(ctx):
    """Every finding of the dns_label rule: the names the design gives, then those derive() makes of them."""
    d = ctx.d
    found = []

    def check(obj, what, name, where, **kwargs):
        if isinstance(name, str):
            found.append(_name_finding(obj, what, name, where, **kwargs))

    def derived_name(obj, what, template, source, where, alternative):
        """A name made of a valid ``source``: only its length can be wrong."""
        if not isinstance(source, str) or dns_label_problem(source) is not None:
            return
        name = template % source
        if len(name) > DNS_LABEL_MAX:
            room = DNS_LABEL_MAX - len(template % "")
            found.append(_name_finding(obj, what, name, where, derived=template % ("<%s>" % where),
                                       fix="shorten %s to at most %d characters (e.g. %r)%s"
                                       % (where, room, dns_label_suggestion(source, room), alternative)))

    for index, vks in enumerate(d["vks_clusters"]):
        obj = "vks_clusters.%s" % vks.get("name")
        check(obj, "VKS cluster name", vks.get("name"), "vks_clusters[%d].name" % index)
        check(obj, "vSphere namespace", vks.get("namespace"), "vks_clusters[%d].namespace" % index)
    for index, pool in enumerate(d["pools"]):
        obj, where = _pool_object(pool), "pools[%d].name" % index
        name = pool.get("name")
        check(obj, "pool name", name, where)
        vm_class = (pool.get("vm_class") or {}).get("name")
        if isinstance(name, str) and vm_class == "gpu-%s" % name:
            derived_name(obj, "VM class name", "gpu-%s", name, where, ", or set pools[%d].vm_class.name" % index)
        else:
            check(obj, "VM class name", vm_class, "pools[%d].vm_class.name" % index)
        node_pool = (pool.get("node_pool") or {}).get("name")
        if node_pool != name:
            check(obj, "VKS node pool name", node_pool, "pools[%d].node_pool.name" % index)
        if pool.get("shape") == "training" and (pool.get("training") or {}).get("gang_scheduling"):
            derived_name(obj, "Kueue ClusterQueue and ResourceFlavor name", "gpupool-%s", name, where, "")
    used = set(p.get("priority") for p in d["pools"])
    for name in d["priorities"]:
        obj = "priorities.%s" % name
        check(obj, "PriorityClass name", name, "priorities.%s" % name)
        if name in used:
            derived_name(obj, "ResourceQuota name", "gpupool-%s", name, "priorities.%s" % name, "")
    for index, tenant in enumerate(d["tenants"]):
        obj = "tenants.%s" % tenant.get("name")
        check(obj, "tenant name", tenant.get("name"), "tenants[%d].name" % index)
        if tenant.get("namespace") != tenant.get("name"):
            check(obj, "tenant namespace", tenant.get("namespace"), "tenants[%d].namespace" % index)
    guest = d.get("guest") or {}
    check("guest", "GPU Operator namespace", guest.get("operator_namespace"), "guest.operator_namespace")
    check("guest", "time-slicing ConfigMap name", guest.get("time_slicing_config"), "guest.time_slicing_config")
    check("guest", "Kueue cohort", (guest.get("kueue") or {}).get("cohort"), "guest.kueue.cohort")
    secret = (guest.get("licensing") or {}).get("secret_name")
    check("guest", "licensing Secret name", secret, "guest.licensing.secret_name",
          limit=DNS_LABEL_MAX - LICENSING_HASH_SUFFIX,
          fix="use %r (%s; the licensing role appends '-' and a 10-character content hash)"
          % (dns_label_suggestion(secret, DNS_LABEL_MAX - LICENSING_HASH_SUFFIX),
             DNS_LABEL_FORM % (DNS_LABEL_MAX - LICENSING_HASH_SUFFIX)))
    return [f for f in found if f is not None]


def _rule_design_name_safe(ctx):
    name = ctx.d.get("name")
    if not isinstance(name, str):
        return
    problem = file_name_problem(name)
    if problem:
        yield Finding("design_name_safe", "name", "design name %r is not a safe file name: %s; it names the "
                      "client token file and labels every object the design makes" % (name, problem),
                      "use %r (letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at "
                      "most %d characters)" % (file_name_suggestion(name), DNS_LABEL_MAX))


def _rule_dns_label(ctx):
    return _design_names(ctx)


def _rule_label_syntax(ctx):
    for index, pool in enumerate(ctx.d["pools"]):
        node_pool = pool.get("node_pool")
        if not isinstance(node_pool, dict):
            continue
        obj = _pool_object(pool)
        for key, value in (node_pool.get("labels") or {}).items():
            problem = label_key_problem(key)
            if problem:
                yield Finding("label_syntax", obj, "node label key %r (pools[%d].node_pool.labels) is not a "
                              "Kubernetes label key: %s" % (key, index, problem),
                              "use [<DNS subdomain>/]<name>, e.g. %r" % _label_key_suggestion(key))
            problem = None if value is None else label_value_problem(value)
            if problem:
                yield Finding("label_syntax", obj, "node label %s value %r (pools[%d].node_pool.labels) is not a "
                              "Kubernetes label value: %s" % (key, value, index, problem),
                              "use %r (at most 63 alphanumerics, '-', '_' and '.', starting and ending with an "
                              "alphanumeric)" % file_name_suggestion(value))
        for taint in node_pool.get("taints") or []:
            key, value = taint.get("key"), taint.get("value")
            problem = label_key_problem(key) if isinstance(key, str) else None
            if problem:
                yield Finding("label_syntax", obj, "taint key %r (pools[%d].node_pool.taints) is not a valid key: %s"
                              % (key, index, problem), "use [<DNS subdomain>/]<name>, e.g. %r"
                              % _label_key_suggestion(key))
            problem = None if value is None else label_value_problem(value)
            if problem:
                yield Finding("label_syntax", obj, "taint %s value %r (pools[%d].node_pool.taints) is not valid: %s"
                              % (key, value, index, problem), "use %r" % file_name_suggestion(value))


def _label_key_suggestion(key):
    prefix, slash, name = str(key).rpartition("/")
    name = file_name_suggestion(name)
    if slash:
        prefix = ".".join(dns_label_suggestion(part) for part in prefix.split(".") if dns_label_suggestion(part))
        return "%s/%s" % (prefix, name) if prefix else name
    return name


def _rule_unique_names(ctx):
    d = ctx.d
    groups = (
        ("clusters", "clusters", [c.get("name") for c in d["clusters"]]),
        ("pools", "pools", [p.get("name") for p in d["pools"]]),
        ("tenants", "tenants", [t.get("name") for t in d["tenants"]]),
        ("vks_clusters", "vks_clusters", [v.get("name") for v in d["vks_clusters"]]),
        ("tenants", "tenant namespaces", [t.get("namespace") for t in d["tenants"]]),
        ("vm_classes", "VM classes", [(p.get("vm_class") or {}).get("name") for p in d["pools"]]),
        ("node_pools", "node pools", [((p.get("node_pool") or {}).get("vks_cluster"),
                                       (p.get("node_pool") or {}).get("name")) for p in d["pools"]]),
    )
    for section, what, names in groups:
        seen = set()
        for name in names:
            if name is None or (isinstance(name, tuple) and None in name):
                continue
            if name in seen:
                shown = "/".join(name) if isinstance(name, tuple) else name
                yield Finding("unique_names", "%s.%s" % (section, shown), "%s %s appears more than once"
                              % (what, shown), "give every entry of %s its own name" % what)
            seen.add(name)
    platform = set(v.get("namespace") for v in d["vks_clusters"])
    for tenant in d["tenants"]:
        if tenant.get("namespace") in platform:
            yield Finding("unique_names", "tenants.%s" % tenant.get("name"),
                          "namespace %s is also the namespace of a VKS cluster" % tenant.get("namespace"),
                          "give the tenant its own namespace")


def _rule_unknown_reference(ctx):
    d = ctx.d
    for pool in d["pools"]:
        obj = _pool_object(pool)
        if pool.get("cluster") and pool["cluster"] not in ctx.clusters:
            yield Finding("unknown_reference", obj, "cluster %s is not in clusters" % pool["cluster"],
                          "use one of %s" % ", ".join(ctx.clusters))
        node_pool = pool.get("node_pool") or {}
        if node_pool and node_pool.get("vks_cluster") is None and len(ctx.vks) > 1:
            yield Finding("unknown_reference", obj, "node_pool.vks_cluster is not set and there are %d VKS "
                          "clusters" % len(ctx.vks), "set node_pool.vks_cluster to one of %s" % ", ".join(ctx.vks))
        elif node_pool.get("vks_cluster") and node_pool["vks_cluster"] not in ctx.vks:
            yield Finding("unknown_reference", obj, "VKS cluster %s is not in vks_clusters"
                          % node_pool["vks_cluster"], "use one of %s" % ", ".join(ctx.vks))
        if pool.get("priority") and pool["priority"] not in d["priorities"]:
            yield Finding("unknown_reference", obj, "priority %s is not a PriorityClass of the design"
                          % pool["priority"], "use one of %s or add it to priorities" % ", ".join(d["priorities"]))
    for tenant in d["tenants"]:
        for pool in (tenant.get("gpu_quota") or {}):
            if pool not in ctx.pools:
                yield Finding("unknown_reference", "tenants.%s" % tenant.get("name"),
                              "gpu_quota names pool %s, which is not in pools" % pool,
                              "use one of %s" % ", ".join(ctx.pools))
    for cluster in d["clusters"]:
        for profile in (cluster.get("mig_mix") or {}):
            if not any(p.get("cluster") == cluster.get("name") and p.get("vgpu_profile") == profile
                       for p in d["pools"]):
                yield Finding("unknown_reference", "clusters.%s" % cluster.get("name"),
                              "mig_mix names %s, which no pool of the cluster uses" % profile,
                              "remove it from mig_mix or add a pool that uses it")


def _rule_gpu_model_known(ctx):
    for cluster in ctx.d["clusters"]:
        model_name = (cluster.get("gpu") or {}).get("model")
        if model_name and ctx.models.get(cluster.get("name")) is None:
            yield Finding("gpu_model_known", "clusters.%s" % cluster.get("name"),
                          "GPU model %s is not in the NVIDIA catalog" % model_name,
                          "use one of %s" % ", ".join(m.name for m in gpu_models()))


def _rule_profile_offered(ctx):
    for pool in ctx.d["pools"]:
        model = ctx.model_of(pool)
        if model is None or not pool.get("vgpu_profile"):
            continue
        problem = profile_problem(pool["vgpu_profile"], model)
        if problem:
            yield Finding("profile_offered", _pool_object(pool),
                          "vGPU profile %s is not offered by %s on cluster %s: %s"
                          % (pool["vgpu_profile"], model.name, pool["cluster"], problem),
                          "use a profile %s offers: %s" % (model.name, ", ".join(offered_profiles(model))))


def _rule_sharing_matches_profile(ctx):
    for pool in ctx.d["pools"]:
        profile = ctx.usable(pool)
        sharing = pool.get("sharing")
        if profile is None or sharing is None:
            continue
        model = ctx.model_of(pool)
        full = not profile.mig_backed and profile.framebuffer_gb >= model.memory_gb
        obj = _pool_object(pool)
        if sharing == "mig" and not profile.mig_backed:
            yield Finding("sharing_matches_profile", obj, "sharing is mig but %s is not MIG-backed" % profile.name,
                          "use a MIG-backed profile (%s) or change sharing" % _suggest(model, "mig"))
        elif sharing == "full_card" and not full:
            yield Finding("sharing_matches_profile", obj, "sharing is full_card but %s is %s"
                          % (profile.name, "MIG-backed" if profile.mig_backed else
                             "%d GB of a %d GB card" % (profile.framebuffer_gb, model.memory_gb)),
                          "use the full-card profile %s or change sharing" % _suggest(model, "full_card"))
        elif sharing == "time_sliced" and (profile.mig_backed or full):
            yield Finding("sharing_matches_profile", obj, "sharing is time_sliced but %s is %s"
                          % (profile.name, "MIG-backed" if profile.mig_backed else "a full card"),
                          "use a time-sliced fraction of the card (%s) or change sharing"
                          % _suggest(model, "time_sliced"))
        if sharing != "mig" and pool.get("per_card") not in (None, 1) and full:
            yield Finding("sharing_matches_profile", obj, "per_card %s with a full-card profile"
                          % pool["per_card"], "remove per_card (a full card holds one vGPU)")


def _mig_mix_problem(model, mix):
    try:
        mig_placement(model, mix)
    except NvidiaError as exc:
        return str(exc)
    return None


def _rule_mig_mix_fits(ctx):
    for pool in ctx.d["pools"]:
        profile = ctx.usable(pool)
        if profile is None or not profile.mig_backed or not pool.get("per_card"):
            continue
        model = ctx.model_of(pool)
        problem = _mig_mix_problem(model, {profile.mig_profile: pool["per_card"]})
        if problem:
            yield Finding("mig_mix_fits", _pool_object(pool),
                          "%d x %s (%s) per card: %s" % (pool["per_card"], profile.name, profile.mig_profile, problem),
                          "set per_card to at most %d or use a smaller MIG profile"
                          % per_card(dict(pool, per_card=None), model))
    for cluster in ctx.d["clusters"]:
        mix = cluster.get("mig_mix")
        model = ctx.models.get(cluster.get("name"))
        if not mix or model is None:
            continue
        obj = "clusters.%s" % cluster["name"]
        counts = OrderedDict()
        bad = False
        for name, count in mix.items():
            try:
                counts[vgpu_mig_profile(name, model).name] = counts.get(vgpu_mig_profile(name, model).name, 0) + count
            except NvidiaError as exc:
                bad = True
                yield Finding("mig_mix_fits", obj, "mig_mix entry %s: %s" % (name, exc),
                              "list MIG-backed profiles of %s: %s" % (model.name, ", ".join(
                                  n for n in offered_profiles(model) if n.count("-") == 2)))
        if bad:
            continue
        problem = _mig_mix_problem(model, counts)
        if problem:
            yield Finding("mig_mix_fits", obj, "mig_mix %s: %s" % (
                ", ".join("%d x %s" % (c, n) for n, c in mix.items()), problem),
                "remove instances until the mix fits one card (7 compute slices, 8 memory slots)")


def _rule_inference_not_time_sliced(ctx):
    for pool in ctx.d["pools"]:
        if pool.get("shape") == "inference" and pool.get("sharing") == "time_sliced":
            yield Finding("inference_not_time_sliced", _pool_object(pool),
                          "inference on time-sliced vGPUs shares the card's engines with its neighbours, so "
                          "latency depends on them", "use sharing mig with a MIG-backed profile (isolated "
                          "engines and memory) or full_card")


def _rule_training_multi_gpu(ctx):
    for pool in ctx.d["pools"]:
        training = pool.get("training") or {}
        gpus = training.get("gpus_per_job") or 1
        if pool.get("shape") != "training" or gpus <= 1:
            continue
        problems, fixes = [], []
        if pool.get("sharing") != "full_card":
            problems.append("sharing is %s, not full_card" % pool.get("sharing"))
            fixes.append("set sharing full_card with the full-card profile")
        if not training.get("gang_scheduling"):
            problems.append("gang_scheduling is off")
            fixes.append("set training.gang_scheduling true (Kueue admits all pods of a job together)")
        if problems:
            yield Finding("training_multi_gpu", _pool_object(pool),
                          "%d-GPU training jobs: %s" % (gpus, "; ".join(problems)), "; ".join(fixes))


def _rule_notebook_preemptible(ctx):
    d = ctx.d
    priorities = d["priorities"]
    others = [p for p in d["pools"] if p.get("shape") in ("inference", "training")
              and p.get("priority") in priorities]
    for pool in d["pools"]:
        name = pool.get("priority")
        if pool.get("shape") != "notebooks" or name not in priorities:
            continue
        value = priorities[name]["value"]
        if others:
            blockers = sorted(set(p["priority"] for p in others
                                  if not (priorities[p["priority"]]["value"] > value and
                                          priorities[p["priority"]]["preemption_policy"] == "PreemptLowerPriority")))
            reason = "pools of priority %s cannot preempt it" % ", ".join(blockers) if blockers else None
        else:
            higher = [k for k, v in priorities.items() if v["value"] > value
                      and v["preemption_policy"] == "PreemptLowerPriority"]
            reason = None if higher else "no PriorityClass above it preempts"
        if value >= SYSTEM_PRIORITY_MIN:
            reason = "value %d is in the system range" % value
        if reason:
            yield Finding("notebook_preemptible", _pool_object(pool),
                          "notebooks run on priority %s (value %d) and are not preemptible: %s"
                          % (name, value, reason),
                          "give the notebooks a lower priority (gpu-notebook, value %d) than inference and "
                          "training, whose classes use preemption_policy PreemptLowerPriority"
                          % DEFAULT_PRIORITIES["gpu-notebook"]["value"])


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


def _rule_node_pool_gpu_taint(ctx):
    for pool in ctx.d["pools"]:
        if not pool.get("name") or not isinstance(pool.get("node_pool"), dict):
            continue
        taints = node_pool_taints(pool)
        if not any(t["key"] == GPU_TAINT_KEY and t["effect"] in ("NoSchedule", "NoExecute") for t in taints):
            yield Finding("node_pool_gpu_taint", _pool_object(pool),
                          "node pool %s has no %s NoSchedule taint, so any pod can land on its GPU nodes"
                          % (pool["node_pool"].get("name"), GPU_TAINT_KEY),
                          "add the taint {key: %s, value: present, effect: NoSchedule} to node_pool.taints "
                          "(or leave taints out for the derived ones)" % GPU_TAINT_KEY)


def _rule_node_pool_profile_label(ctx):
    for pool in ctx.d["pools"]:
        if not all(pool.get(k) for k in ("name", "vgpu_profile", "shape", "sharing")) or \
                not isinstance(pool.get("node_pool"), dict):
            continue
        value = node_pool_labels(pool).get(PROFILE_LABEL)
        if value != pool["vgpu_profile"]:
            yield Finding("node_pool_profile_label", _pool_object(pool),
                          "node pool %s is labelled %s=%s, not with its profile %s"
                          % (pool["node_pool"].get("name"), PROFILE_LABEL, value, pool["vgpu_profile"]),
                          "remove %s from node_pool.labels (it is derived from vgpu_profile)" % PROFILE_LABEL)


def _rule_tenant_gpu_quota(ctx):
    for tenant in ctx.d["tenants"]:
        quota = tenant.get("gpu_quota") or {}
        if not quota or not any(v > 0 for v in quota.values()):
            yield Finding("tenant_gpu_quota", "tenants.%s" % tenant.get("name"),
                          "namespace %s has no GPU quota, so it could take every GPU of every pool"
                          % tenant.get("namespace"),
                          "set gpu_quota: {<pool>: <GPUs>} for the pools the tenant uses (pools: %s)"
                          % ", ".join(ctx.pools))


def pool_gpus(pool):
    """GPUs a pool offers to pods: replicas x vGPUs per node x guest time-slicing replicas."""
    node_pool = pool.get("node_pool") or {}
    replicas = (pool.get("guest_time_slicing") or {}).get("replicas") or 1
    return (node_pool.get("replicas") or 0) * (pool.get("gpus_per_node") or 1) * replicas


def _rule_quota_exceeds_pool(ctx):
    for tenant in ctx.d["tenants"]:
        for name, gpus in (tenant.get("gpu_quota") or {}).items():
            pool = ctx.pools.get(name)
            if pool is None or not isinstance(pool.get("node_pool"), dict):
                continue
            size = pool_gpus(pool)
            if gpus > size:
                yield Finding("quota_exceeds_pool", "tenants.%s" % tenant.get("name"),
                              "quota of %d GPUs on pool %s, which has %d" % (gpus, name, size),
                              "lower gpu_quota.%s to %d or grow the pool's replicas" % (name, size))


def _rule_driver_version_pinned(ctx):
    for cluster in ctx.d["clusters"]:
        version = (cluster.get("driver") or {}).get("version")
        if _driver_version(version) is None:
            yield Finding("driver_version_pinned", "clusters.%s" % cluster.get("name"),
                          "no pinned NVIDIA driver version%s" % ("" if version is None else " (%r)" % version),
                          "set driver.version to the full component version every host must run, e.g. "
                          "550.90.05-1OEM.800.1.0.20613240")


def _rule_driver_source(ctx):
    for cluster in ctx.d["clusters"]:
        driver = cluster.get("driver") or {}
        obj = "clusters.%s" % cluster.get("name")
        if driver.get("lifecycle") == "direct" and not driver.get("bundle"):
            yield Finding("driver_source", obj, "lifecycle direct without driver.bundle",
                          "set driver.bundle to the offline bundle, e.g. [datastore] drivers/NVD-AIE-800_<version>"
                          "_<build>.zip, or use lifecycle vlcm with a depot")
        if driver.get("lifecycle") == "vlcm" and not driver.get("depot"):
            yield Finding("driver_source", obj, "lifecycle vlcm without driver.depot",
                          "set driver.depot to the offline depot URL holding the NVIDIA component")
        bundle, version = driver.get("bundle"), _driver_version(driver.get("version"))
        named = _driver_version(version_from_bundle(bundle)) if bundle and version else None
        # the check esxi_host_driver makes before it installs (_esxi.check_bundle_matches)
        if named is not None and named.numbers != version.numbers:
            yield Finding("driver_source", obj, "driver.bundle %s is not for version %s (it holds %s)"
                          % (bundle, version.text, named.text), "point driver.bundle at the bundle of %s" % version.text)


def _rule_driver_versions_mixed(ctx):
    branches = OrderedDict()
    for cluster in ctx.d["clusters"]:
        version = _driver_version((cluster.get("driver") or {}).get("version"))
        if version is not None:
            branches.setdefault(str(version.numbers[0]), []).append(cluster["name"])
    if len(branches) > 1:
        yield Finding("driver_versions_mixed", "clusters",
                      "GPU clusters pin different driver branches (%s); the guest driver of the GPU Operator "
                      "must match every host branch" % "; ".join("%s: %s" % (b, ", ".join(c))
                                                                 for b, c in branches.items()),
                      "pin one branch everywhere, or keep each VKS cluster's node pools on one branch")


def _rule_graphics_shared_direct(ctx):
    for cluster in ctx.d["clusters"]:
        if (cluster.get("graphics") or {}).get("type") == "shared":
            yield Finding("graphics_shared_direct", "clusters.%s" % cluster.get("name"),
                          "graphics type shared (vSGA) cannot run vGPU profiles",
                          "set graphics.type shared_direct")


def _rule_scheduler_valid(ctx):
    for cluster in ctx.d["clusters"]:
        scheduler = cluster.get("scheduler") or {}
        if not scheduler.get("policy"):
            continue
        try:
            encode_scheduler(scheduler["policy"], scheduler.get("time_slice_ms"))
        except NvidiaError as exc:
            yield Finding("scheduler_valid", "clusters.%s" % cluster.get("name"), str(exc),
                          "time_slice_ms 1-30 with equal_share or fixed_share; none with best_effort")


# capacity -----------------------------------------------------------------------------


def _nodes(ctx, cluster):
    """[(pool, vgpus per node, per card)] for every node VM of the cluster's usable pools."""
    model = ctx.models.get(cluster["name"])
    nodes = []
    for pool in ctx.d["pools"]:
        if pool.get("cluster") != cluster["name"] or ctx.usable(pool) is None:
            continue
        if not isinstance(pool.get("node_pool"), dict):
            continue
        if pool.get("per_card") and ctx.usable(pool).mig_backed and \
                _mig_mix_problem(model, {ctx.usable(pool).mig_profile: pool["per_card"]}):
            continue
        cap = per_card(pool, model)
        for _replica in range(pool["node_pool"].get("replicas") or 0):
            nodes.append((pool, pool.get("gpus_per_node") or 1, cap))
    return nodes


def pack(nodes, hosts, gpus_per_host):
    """First-fit placement of node VMs on hosts; returns (cards used, unplaced nodes).

    ``nodes`` is ``[(pool, vgpus, per_card)]`` in the order to place them; every vGPU of a
    node goes to a different card of one host; a card holds one profile (one pool's
    ``per_card`` vGPUs).
    """
    cards = [[None] * gpus_per_host for _host in range(hosts)]   # None or [pool name, used, cap]
    unplaced = []
    for pool, vgpus, cap in nodes:
        placed = False
        for host in cards:
            partial = [c for c in host if c is not None and c[0] == pool["name"] and c[1] < cap]
            free = [i for i, c in enumerate(host) if c is None]
            if len(partial) + len(free) < vgpus:
                continue
            for card in partial[:vgpus]:
                card[1] += 1
            for index in free[:max(0, vgpus - len(partial))]:
                host[index] = [pool["name"], 1, cap]
            placed = True
            break
        if not placed:
            unplaced.append(pool)
    used = sum(1 for host in cards for c in host if c is not None)
    return used, unplaced


def _sorted_nodes(nodes, inference_last=False):
    def key(node):
        pool, vgpus, cap = node
        return ((pool.get("shape") == "inference") if inference_last else 0, -vgpus, cap, pool["name"])
    return sorted(nodes, key=key)


def _capacity_ok(cluster):
    gpu = cluster.get("gpu") or {}
    return isinstance(cluster.get("hosts"), int) and isinstance(gpu.get("per_host"), int)


def _rule_cluster_capacity(ctx):
    for cluster in ctx.d["clusters"]:
        if ctx.models.get(cluster.get("name")) is None or not _capacity_ok(cluster):
            continue
        nodes = _nodes(ctx, cluster)
        _cards, unplaced = pack(_sorted_nodes(nodes), cluster["hosts"], cluster["gpu"]["per_host"])
        if unplaced:
            short = OrderedDict()
            for pool in unplaced:
                short[pool["name"]] = short.get(pool["name"], 0) + 1
            yield Finding("cluster_capacity", "clusters.%s" % cluster["name"],
                          "%d of %d node VMs do not fit on %d hosts x %d GPUs (%s)"
                          % (len(unplaced), len(nodes), cluster["hosts"], cluster["gpu"]["per_host"],
                             ", ".join("%s: %d short" % kv for kv in short.items())),
                          "lower the pools' replicas or gpus_per_node, or add hosts to the cluster")


def _rule_spare_capacity(ctx):
    for cluster in ctx.d["clusters"]:
        if ctx.models.get(cluster.get("name")) is None or not _capacity_ok(cluster):
            continue
        nodes = _nodes(ctx, cluster)
        if not any(p.get("shape") == "inference" for p, _gpus, _cap in nodes):
            continue
        _cards, unplaced = pack(_sorted_nodes(nodes), cluster["hosts"], cluster["gpu"]["per_host"])
        if unplaced:
            continue  # cluster_capacity reports it
        _cards, unplaced = pack(_sorted_nodes(nodes, inference_last=True), cluster["hosts"] - 1,
                                cluster["gpu"]["per_host"])
        short = OrderedDict()
        for pool in unplaced:
            if pool.get("shape") == "inference":
                short[pool["name"]] = short.get(pool["name"], 0) + 1
        for name, count in short.items():
            yield Finding("spare_capacity", "pools.%s" % name,
                          "losing the largest host of %s (%d GPUs) leaves %d of its %d node VMs without a GPU"
                          % (cluster["name"], cluster["gpu"]["per_host"], count,
                             ctx.pools[name]["node_pool"]["replicas"]),
                          "keep one host's worth of GPUs free on %s: add a host, or lower the replicas of this "
                          "or the cluster's other pools" % cluster["name"])


def _rule_model_fits_framebuffer(ctx):
    for pool in ctx.d["pools"]:
        model_size = pool.get("model") or {}
        profile = ctx.usable(pool)
        if profile is None or model_size.get("weights_gb") is None:
            continue
        need = model_size["weights_gb"] + (model_size.get("kv_cache_gb") or 0.0)
        if need > profile.framebuffer_gb:
            gpu = ctx.model_of(pool)
            bigger = [n for n in offered_profiles(gpu)
                      if parse_profile(n).mig_backed == profile.mig_backed and parse_profile(n).series == "C"
                      and not parse_profile(n).media_extension and parse_profile(n).framebuffer_gb >= need]
            bigger.sort(key=lambda n: parse_profile(n).framebuffer_gb)
            yield Finding("model_fits_framebuffer", _pool_object(pool),
                          "model %.1f GB + KV cache %.1f GB = %.1f GB does not fit the %d GB of %s"
                          % (model_size["weights_gb"], model_size.get("kv_cache_gb") or 0.0, need,
                             profile.framebuffer_gb, profile.name),
                          "use %s, or shrink the KV cache or quantize the model" %
                          ("the larger profile %s" % bigger[0] if bigger else "full cards with more GPUs per node"))


_RULE_FUNCS = OrderedDict([
    ("design_name_safe", _rule_design_name_safe),
    ("dns_label", _rule_dns_label),
    ("label_syntax", _rule_label_syntax),
    ("unique_names", _rule_unique_names),
    ("unknown_reference", _rule_unknown_reference),
    ("gpu_model_known", _rule_gpu_model_known),
    ("profile_offered", _rule_profile_offered),
    ("sharing_matches_profile", _rule_sharing_matches_profile),
    ("mig_mix_fits", _rule_mig_mix_fits),
    ("inference_not_time_sliced", _rule_inference_not_time_sliced),
    ("training_multi_gpu", _rule_training_multi_gpu),
    ("notebook_preemptible", _rule_notebook_preemptible),
    ("node_pool_gpu_taint", _rule_node_pool_gpu_taint),
    ("node_pool_profile_label", _rule_node_pool_profile_label),
    ("tenant_gpu_quota", _rule_tenant_gpu_quota),
    ("quota_exceeds_pool", _rule_quota_exceeds_pool),
    ("driver_version_pinned", _rule_driver_version_pinned),
    ("driver_source", _rule_driver_source),
    ("driver_versions_mixed", _rule_driver_versions_mixed),
    ("graphics_shared_direct", _rule_graphics_shared_direct),
    ("scheduler_valid", _rule_scheduler_valid),
    ("cluster_capacity", _rule_cluster_capacity),
    ("spare_capacity", _rule_spare_capacity),
    ("model_fits_framebuffer", _rule_model_fits_framebuffer),
])


def _validate_normalized(d, findings):
    ctx = _Context(d)
    for name, func in _RULE_FUNCS.items():
        findings.extend(func(ctx))
    order = dict((name, i) for i, name in enumerate(RULES))
    return sorted(findings, key=lambda f: (order[f.rule], f.object))


def validate(design):
    """Every finding of the design (schema and rules), errors and warnings, all at once."""
    d, findings = normalize(design)
    return _validate_normalized(d, findings)


def errors(findings):
    return [f for f in findings if f.severity == ERROR]


def warnings(findings):
    return [f for f in findings if f.severity == WARNING]


def summarize(findings):
    """One message for a failed run: the count and every error as ``rule: object: message (fix: ...)``."""
    errs = errors(findings)
    return "The pool design has %d error(s): %s" % (len(errs), "; ".join(str(f) for f in errs))


# ---------------------------------------------------------------------------------------
# derivation
# ---------------------------------------------------------------------------------------


def _mig_strategy(d):
    strategy = d["guest"]["mig_strategy"]
    if strategy != "auto":
        return strategy
    return "single" if any(p["sharing"] == "mig" for p in d["pools"]) else "none"


def gpu_resource(pool, mig_strategy, rename_shared=False):
    """The extended resource a pod of the pool requests."""
    if mig_strategy == "mixed" and pool["sharing"] == "mig":
        return "nvidia.com/mig-%s" % parse_profile(pool["vgpu_profile"]).mig_profile
    if rename_shared and (pool.get("guest_time_slicing") or {}).get("replicas"):
        return "nvidia.com/gpu.shared"
    return "nvidia.com/gpu"


def _derive_esxi(ctx):
    clusters = OrderedDict()
    for cluster in ctx.d["clusters"]:
        model = ctx.models[cluster["name"]]
        driver, scheduler = cluster["driver"], cluster["scheduler"]
        used, _unplaced = pack(_sorted_nodes(_nodes(ctx, cluster)), cluster["hosts"], cluster["gpu"]["per_host"])
        uses_mig = any(p["cluster"] == cluster["name"] and ctx.profiles[p["name"]].mig_backed for p in ctx.d["pools"])
        clusters[cluster["name"]] = OrderedDict([
            ("cluster", cluster["name"]),
            ("gpu_model", model.name),
            ("hosts", cluster["hosts"]),
            ("gpus_per_host", cluster["gpu"]["per_host"]),
            ("driver_version", driver["version"]),
            ("driver_bundle", driver["bundle"] or ""),
            ("lifecycle", driver["lifecycle"]),
            ("vlcm_depot_url", driver["depot"] or ""),
            ("component", driver["component"]),
            ("graphics_type", cluster["graphics"]["type"]),
            ("assignment_policy", cluster["graphics"]["assignment_policy"]),
            ("scheduler", OrderedDict([("policy", scheduler["policy"]),
                                       ("time_slice_ms", scheduler["time_slice_ms"])])),
            ("rmpvmrl", format_rmpvmrl(encode_scheduler(scheduler["policy"], scheduler["time_slice_ms"]))),
            ("mig_mode", "enabled" if uses_mig else "disabled"),
            ("min_gpus", used),
        ])
    return OrderedDict([("clusters", clusters)])


def _access(entries):
    # the option names of gpupool.vcf.supervisor_namespace's access entries
    return [OrderedDict([("subject", a["subject"]), ("type", a["type"].upper()),
                         ("domain", a["domain"]), ("role", a["role"].upper())]) for a in entries]


def _derive_vsphere(ctx):
    d = ctx.d
    vm_classes = []
    for pool in d["pools"]:
        vm_class = pool["vm_class"]
        vm_classes.append(OrderedDict([
            ("name", vm_class["name"]),
            ("cpu_count", vm_class["cpu"]),
            ("memory_mb", vm_class["memory_gb"] * 1024),
            ("vgpu_profiles", [pool["vgpu_profile"]] * pool["gpus_per_node"]),
            ("memory_reservation", 100),
            ("pool", pool["name"]),
            ("cluster", pool["cluster"]),
            ("description", "gpupool %s: %s, %d x %s" % (pool["name"], pool["shape"], pool["gpus_per_node"],
                                                         pool["vgpu_profile"])),
        ]))
    namespaces = []
    storage = d["supervisor"]["storage_policy"]
    for vks in d["vks_clusters"]:
        classes = [p["vm_class"]["name"] for p in d["pools"] if p["node_pool"]["vks_cluster"] == vks["name"]]
        existing = [n for n in namespaces if n["name"] == vks["namespace"]]
        if existing:
            existing[0]["vm_classes"].extend(c for c in classes if c not in existing[0]["vm_classes"])
            existing[0]["access"].extend(a for a in _access(vks["access"]) if a not in existing[0]["access"])
            continue
        namespaces.append(OrderedDict([
            ("name", vks["namespace"]), ("cluster", d["supervisor"]["cluster"]),
            ("supervisor", d["supervisor"]["name"]), ("kind", "platform"),
            ("description", "gpupool platform namespace of VKS cluster %s" % vks["name"]),
            ("vm_classes", classes), ("storage_policies", [OrderedDict([("policy", storage), ("limit_mib", None)])]),
            ("limits", OrderedDict([("cpu_mhz", None), ("memory_mib", None), ("storage_mib", None)])),
            ("access", _access(vks["access"])),
            # the namespace offers exactly the GPU shapes of the design (classes without a vGPU stay)
            ("purge_gpu_vm_classes", True),
        ]))
    for tenant in d["tenants"]:
        classes = [ctx.pools[p]["vm_class"]["name"] for p, n in tenant["gpu_quota"].items() if n > 0]
        namespaces.append(OrderedDict([
            ("name", tenant["namespace"]), ("cluster", d["supervisor"]["cluster"]),
            ("supervisor", d["supervisor"]["name"]), ("kind", "tenant"),
            ("description", tenant["description"] or "gpupool tenant %s" % tenant["name"]),
            ("vm_classes", classes),
            ("storage_policies", [OrderedDict([("policy", tenant["storage_policy"]),
                                               ("limit_mib", tenant["limits"]["storage_mib"])])]),
            ("limits", OrderedDict((k, tenant["limits"][k]) for k in ("cpu_mhz", "memory_mib", "storage_mib"))),
            ("access", _access(tenant["access"])),
            ("purge_gpu_vm_classes", True),
        ]))
    drs = [OrderedDict([("name", c["name"]), ("behavior", c["drs"]["behavior"])])
           for c in d["clusters"] if c["drs"]["pinning"]]
    return OrderedDict([("vm_classes", vm_classes), ("namespaces", namespaces), ("drs_pinning", drs)])


def _derive_vks(ctx):
    d = ctx.d
    clusters = OrderedDict()
    for vks in d["vks_clusters"]:
        pools = []
        for pool in d["pools"]:
            if pool["node_pool"]["vks_cluster"] != vks["name"]:
                continue
            pools.append(OrderedDict([
                ("name", pool["node_pool"]["name"]),
                ("replicas", pool["node_pool"]["replicas"]),
                ("vm_class", pool["vm_class"]["name"]),
                ("failure_domain", pool["cluster"]),
                ("labels", node_pool_labels(pool)),
                ("taints", node_pool_taints(pool)),
            ]))
        clusters[vks["name"]] = OrderedDict([
            ("name", vks["name"]), ("namespace", vks["namespace"]), ("version", vks["version"]),
            ("storage_class", vks["storage_class"]), ("node_pools", pools)])
    return OrderedDict([("clusters", clusters)])


def _meta(name, namespace=None, design=None):
    meta = OrderedDict([("name", name)])
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = OrderedDict([("app.kubernetes.io/managed-by", "gpupool.vcf")])
    if design:
        meta["labels"]["gpupool.vcf/design"] = design
    return meta


def _tolerations(pool):
    return [OrderedDict([("key", t["key"]), ("operator", "Equal" if t["value"] is not None else "Exists")]
                        + ([("value", t["value"])] if t["value"] is not None else []) + [("effect", t["effect"])])
            for t in node_pool_taints(pool)]


def _derive_guest(ctx):
    d = ctx.d
    guest = d["guest"]
    strategy = _mig_strategy(d)
    rename = guest["rename_shared"]
    priority_classes = []
    for name, p in d["priorities"].items():
        priority_classes.append(OrderedDict([
            ("apiVersion", "scheduling.k8s.io/v1"), ("kind", "PriorityClass"), ("metadata", _meta(name)),
            ("value", p["value"]), ("preemptionPolicy", p["preemption_policy"]), ("globalDefault", False),
            ("description", p["description"] or name)]))
    namespaces, quotas = [], []
    for tenant in d["tenants"]:
        ns = tenant["namespace"]
        namespaces.append(OrderedDict([("apiVersion", "v1"), ("kind", "Namespace"),
                                       ("metadata", _meta(ns, design=d["name"]))]))
        total = OrderedDict()
        by_priority = OrderedDict()
        for pool_name, gpus in tenant["gpu_quota"].items():
            pool = ctx.pools[pool_name]
            resource = "requests.%s" % gpu_resource(pool, strategy, rename)
            total[resource] = total.get(resource, 0) + gpus
            scoped = by_priority.setdefault(pool["priority"], OrderedDict())
            scoped[resource] = scoped.get(resource, 0) + gpus
        quotas.append(OrderedDict([
            ("apiVersion", "v1"), ("kind", "ResourceQuota"), ("metadata", _meta("gpupool-gpus", ns, d["name"])),
            ("spec", OrderedDict([("hard", OrderedDict((k, str(v)) for k, v in total.items()))]))]))
        for priority, hard in by_priority.items():
            quotas.append(OrderedDict([
                ("apiVersion", "v1"), ("kind", "ResourceQuota"),
                ("metadata", _meta("gpupool-%s" % priority, ns, d["name"])),
                ("spec", OrderedDict([
                    ("hard", OrderedDict((k, str(v)) for k, v in hard.items())),
                    ("scopeSelector", OrderedDict([("matchExpressions", [OrderedDict([
                        ("scopeName", "PriorityClass"), ("operator", "In"), ("values", [priority])])])])),
                ]))]))
    flavors, cluster_queues, local_queues = [], [], []
    for pool in d["pools"]:
        if pool["shape"] != "training" or not pool["training"]["gang_scheduling"]:
            continue
        name = "gpupool-%s" % pool["name"]
        resource = gpu_resource(pool, strategy, rename)
        replicas = pool["node_pool"]["replicas"]
        tenants = [t for t in d["tenants"] if t["gpu_quota"].get(pool["name"], 0) > 0]
        flavors.append(OrderedDict([
            ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "ResourceFlavor"), ("metadata", _meta(name)),
            ("spec", OrderedDict([("nodeLabels", OrderedDict([(POOL_LABEL, pool["name"])])),
                                  ("tolerations", _tolerations(pool))]))]))
        cluster_queues.append(OrderedDict([
            ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "ClusterQueue"), ("metadata", _meta(name)),
            ("spec", OrderedDict([
                ("cohort", guest["kueue"]["cohort"]),
                ("namespaceSelector", OrderedDict([("matchExpressions", [OrderedDict([
                    ("key", "kubernetes.io/metadata.name"), ("operator", "In"),
                    ("values", [t["namespace"] for t in tenants])])])])),
                ("resourceGroups", [OrderedDict([
                    ("coveredResources", ["cpu", "memory", resource]),
                    ("flavors", [OrderedDict([("name", name), ("resources", [
                        OrderedDict([("name", "cpu"), ("nominalQuota", replicas * pool["vm_class"]["cpu"])]),
                        OrderedDict([("name", "memory"),
                                     ("nominalQuota", "%dGi" % (replicas * pool["vm_class"]["memory_gb"]))]),
                        OrderedDict([("name", resource), ("nominalQuota", pool_gpus(pool))]),
                    ])])]),
                ])]),
                ("preemption", OrderedDict([("withinClusterQueue", "LowerPriority"),
                                            ("reclaimWithinCohort", "Any")])),
            ]))]))
        for tenant in tenants:
            local_queues.append(OrderedDict([
                ("apiVersion", "kueue.x-k8s.io/v1beta1"), ("kind", "LocalQueue"),
                ("metadata", _meta(pool["name"], tenant["namespace"], d["name"])),
                ("spec", OrderedDict([("clusterQueue", name)]))]))
    time_slicing = OrderedDict()
    for pool in d["pools"]:
        replicas = (pool.get("guest_time_slicing") or {}).get("replicas")
        if replicas:
            time_slicing[pool["name"]] = OrderedDict([
                ("version", "v1"),
                ("sharing", OrderedDict([("timeSlicing", OrderedDict([
                    ("renameByDefault", rename), ("failRequestsGreaterThanOne", True),
                    ("resources", [OrderedDict([("name", "nvidia.com/gpu"), ("replicas", replicas)])]),
                ]))])),
            ])
    licensing = guest["licensing"]
    return OrderedDict([
        ("priority_classes", priority_classes),
        ("namespaces", namespaces),
        ("resource_quotas", quotas),
        ("kueue", OrderedDict([
            ("enabled", bool(cluster_queues)),
            ("wait_for_pods_ready", OrderedDict([("enable", bool(cluster_queues)),
                                                 ("timeout", guest["kueue"]["wait_for_pods_ready_timeout"])])),
            ("resource_flavors", flavors), ("cluster_queues", cluster_queues), ("local_queues", local_queues)])),
        ("time_slicing", OrderedDict([
            ("config_name", guest["time_slicing_config"]),
            ("namespace", guest["operator_namespace"]),
            ("data", time_slicing),
            ("manifest", OrderedDict([
                ("apiVersion", "v1"), ("kind", "ConfigMap"),
                ("metadata", _meta(guest["time_slicing_config"], guest["operator_namespace"], d["name"])),
                # JSON is YAML: the device plugin reads each key as its config file
                ("data", OrderedDict((k, json.dumps(v)) for k, v in time_slicing.items())),
            ]) if time_slicing else None),
        ])),
        ("gpu_operator", OrderedDict([
            ("namespace", guest["operator_namespace"]),
            ("mig_strategy", strategy),
            ("mig_manager_enabled", False),
            ("device_plugin_config", OrderedDict([("name", guest["time_slicing_config"]), ("default", "")])
             if time_slicing else None),
        ])),
        ("licensing", OrderedDict([("secret_name", licensing["secret_name"]),
                                   ("feature_type", licensing["feature_type"]),
                                   ("nls_enabled", True), ("dls_host", licensing["dls_host"])])),
    ])


def _derive_roles(ctx, vks, guest):
    """Each Kubernetes role's variables for the design, so a playbook only passes them through.

    What the roles create with these variables is what ``guest`` (the audit's expectation) lists.
    """
    d = ctx.d
    node_pools = [OrderedDict([
        ("vks_gpu_node_pools_cluster_name", cluster["name"]),
        ("vks_gpu_node_pools_namespace", cluster["namespace"]),
        ("vks_gpu_node_pools_node_pools", [OrderedDict([
            ("name", p["name"]), ("replicas", p["replicas"]), ("vm_class", p["vm_class"]),
            ("labels", p["labels"]), ("taints", p["taints"]), ("gpu", True)]) for p in cluster["node_pools"]]),
    ]) for cluster in vks["clusters"].values()]
    operator = guest["gpu_operator"]
    licensing = guest["licensing"]
    time_slicing = OrderedDict()
    for pool_name, config in guest["time_slicing"]["data"].items():
        ts = config["sharing"]["timeSlicing"]
        time_slicing[pool_name] = OrderedDict([
            ("replicas", ts["resources"][0]["replicas"]),
            ("resources", [r["name"] for r in ts["resources"]]),
            ("rename_by_default", ts["renameByDefault"]),
            ("fail_requests_greater_than_one", ts["failRequestsGreaterThanOne"])])
    gpu_operator = OrderedDict([
        ("gpu_operator_namespace", operator["namespace"]),
        ("gpu_operator_mig_strategy", operator["mig_strategy"]),
        ("gpu_operator_mig_manager_enabled", operator["mig_manager_enabled"]),
        ("gpu_operator_time_slicing", time_slicing),
        ("gpu_operator_device_plugin_config_name", guest["time_slicing"]["config_name"]),
        ("gpu_operator_licensing_secret_name", licensing["secret_name"]),
    ])
    nls_licensing = OrderedDict([
        ("nls_licensing_operator_namespace", operator["namespace"]),
        ("nls_licensing_secret_prefix", licensing["secret_name"]),
        ("nls_licensing_feature_type", licensing["feature_type"]),
    ])
    quotas = OrderedDict()
    for q in guest["resource_quotas"]:
        spec = q["spec"]
        entry = OrderedDict([("name", q["metadata"]["name"]), ("hard", OrderedDict(spec["hard"]))])
        if spec.get("scopeSelector"):
            entry["priority_class"] = spec["scopeSelector"]["matchExpressions"][0]["values"][0]
        quotas.setdefault(q["metadata"]["namespace"], []).append(entry)
    training = set(q["metadata"]["namespace"] for q in guest["kueue"]["local_queues"])
    tenants = [OrderedDict([
        ("namespace", ns["metadata"]["name"]),
        ("labels", OrderedDict(ns["metadata"]["labels"])),
        ("training", ns["metadata"]["name"] in training),
        ("quotas", quotas.get(ns["metadata"]["name"], [])),
    ]) for ns in guest["namespaces"]]
    policy = OrderedDict([
        ("gpu_scheduling_policy_priority_classes", [OrderedDict([
            ("name", pc["metadata"]["name"]), ("value", pc["value"]),
            ("preemption_policy", pc["preemptionPolicy"]), ("description", pc["description"])])
            for pc in guest["priority_classes"]]),
        ("gpu_scheduling_policy_tenants", tenants),
        ("gpu_scheduling_policy_kueue", bool(guest["kueue"]["cluster_queues"])),
    ])
    gang = [p for p in d["pools"] if p["shape"] == "training" and p["training"]["gang_scheduling"]]
    # the role keeps one training pool's queue: the first gang-scheduled one (empty values without one)
    cq = guest["kueue"]["cluster_queues"][0] if gang else None
    flavor = guest["kueue"]["resource_flavors"][0] if gang else None
    group = cq["spec"]["resourceGroups"][0]["flavors"][0] if gang else {"resources": []}
    policy.update([
        ("gpu_scheduling_policy_training_flavor", flavor["metadata"]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_cluster_queue", cq["metadata"]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_local_queue", gang[0]["name"] if gang else ""),
        ("gpu_scheduling_policy_training_node_labels", OrderedDict(flavor["spec"]["nodeLabels"]) if gang else {}),
        ("gpu_scheduling_policy_training_tolerations", list(flavor["spec"]["tolerations"]) if gang else []),
        ("gpu_scheduling_policy_training_resources",
         OrderedDict((r["name"], r["nominalQuota"]) for r in group["resources"])),
    ])
    return OrderedDict([("vks_gpu_node_pools", node_pools), ("nls_licensing", nls_licensing),
                        ("gpu_operator", gpu_operator), ("gpu_scheduling_policy", policy)])


def derive(design):
    """The per-link inputs of a valid design: ``{esxi, vsphere, vks, guest, roles}`` (see docs/design.md).

    Raises ``DesignError`` listing the errors when the design has any.
    """
    d, findings = normalize(design)
    findings = _validate_normalized(d, findings)
    errs = errors(findings)
    if errs:
        raise DesignError(errs)
    ctx = _Context(d)
    vks, guest = _derive_vks(ctx), _derive_guest(ctx)
    return OrderedDict([
        ("design", d["name"]),
        ("vcenter", OrderedDict([("hostname", d["vcenter"]["hostname"]),
                                 ("datacenter", d["vcenter"]["datacenter"])])),
        ("supervisor", OrderedDict((k, d["supervisor"][k]) for k in ("name", "endpoint", "storage_policy"))),
        ("esxi", _derive_esxi(ctx)),
        ("vsphere", _derive_vsphere(ctx)),
        ("vks", vks),
        ("guest", guest),
        ("roles", _derive_roles(ctx, vks, guest)),
    ])
