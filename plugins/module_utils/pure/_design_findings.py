# -*- coding: utf-8 -*-
# Copyright (c) gpupool.vcf developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the design rules report (pure, standard library only): ``Finding`` (one rule
violation), ``DesignError`` (a design with errors) and ``RULES``, the catalog of rules
with the severity and one line of documentation of each; ``errors``, ``warnings`` and
``summarize`` sort findings. The rules themselves are in ``_design_rules``.
"""

from __future__ import (absolute_import, division, print_function)

__metaclass__ = type

from collections import OrderedDict


class DesignError(ValueError):
    """The design has errors; ``findings`` lists them."""

    def __init__(self, findings):
        self.findings = list(findings)
        super(DesignError, self).__init__(
            "The design has %d error(s):\n%s" % (len(self.findings), "\n".join(str(f) for f in self.findings)))


# the longest text a finding carries (its values are shown shorter still, _design_names.shown): a
# design of any size cannot make a message of megabytes
TEXT_MAX = 2000


def _bounded(text, limit=TEXT_MAX):
    if isinstance(text, str) and len(text) > limit:
        return text[:limit - 3] + "..."
    return text


class Finding:
    """One rule violation."""

    __slots__ = ("rule", "severity", "object", "message", "fix")

    def __init__(self, rule, obj, message, fix, severity=None):
        self.rule = rule
        self.severity = severity or RULES[rule][0]
        self.object = _bounded(obj)
        self.message = _bounded(message)
        self.fix = _bounded(fix)

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
    ("reserved_name", (ERROR, "No tenant or VKS cluster is on a system namespace (default, kube-*, vmware-system-*) "
                              "and no PriorityClass name starts with system- (Kubernetes keeps those names).")),
    ("unique_names", (ERROR, "Cluster, pool, tenant, namespace, VM class and node pool names are unique.")),
    ("unknown_reference", (ERROR, "Every cluster, VKS cluster, priority and pool a field names exists.")),
    ("gpu_model_known", (ERROR, "A cluster's GPU model is in the NVIDIA catalog.")),
    ("profile_offered", (ERROR, "A pool's vGPU profile is offered by its cluster's GPU model.")),
    ("sharing_matches_profile", (ERROR, "The sharing mode matches the profile: MIG-backed, full card or a "
                                        "fraction of a card time-sliced.")),
    ("profiling_supported", (ERROR, "A pool asks for profiling counters only where its sharing has them (mig or "
                                    "full_card, not time_sliced).")),
    ("mig_mix_fits", (ERROR, "The MIG instances asked of one card can be placed on it.")),
    ("mig_geometry_valid", (ERROR, "A cluster's explicit MIG geometry has at most one entry per host, GPU indexes "
                                   "of its hosts, and MIG only on a GPU model that has MIG.")),
    ("inference_not_time_sliced", (ERROR, "Inference is not on time-sliced sharing.")),
    ("training_multi_gpu", (ERROR, "Multi-GPU training uses full cards and gang scheduling.")),
    ("notebook_preemptible", (ERROR, "Notebooks run on a priority that inference and training preempt.")),
    ("inference_above_preemptible", (ERROR, "Every inference pool's PriorityClass ranks above every "
                                            "preemptible pool's, so the scheduler and Kueue evict those for it.")),
    ("checkpoint_declared", (ERROR, "Every preemptible training pool declares how its jobs checkpoint and how "
                                    "a resume is checked (pools[].checkpoint: one volume, one resume check), or "
                                    "says why not (pools[].waivers.checkpoint_declared).")),
    ("multi_gpu_gang_scheduled", (ERROR, "Every pool whose jobs take more than one GPU is Kueue gang-scheduled "
                                         "and its gangs can be admitted (fit the pool, a tenant has a LocalQueue).")),
    ("notebooks_best_effort", (WARNING, "A time-sliced notebook pool's cluster runs the best effort vGPU "
                                        "scheduler, or the design says why not (waivers.notebooks_best_effort).")),
    ("node_pool_gpu_taint", (ERROR, "A GPU node pool carries the nvidia.com/gpu NoSchedule taint.")),
    ("node_pool_profile_label", (ERROR, "A GPU node pool carries the nvidia.com/vgpu.profile label of its "
                                        "profile.")),
    ("tenant_gpu_quota", (ERROR, "Every tenant namespace has a GPU quota.")),
    ("quota_exceeds_pool", (WARNING, "A tenant's quota on a pool is not larger than the pool.")),
    ("driver_version_pinned", (ERROR, "Every GPU cluster pins one full NVIDIA driver version.")),
    ("driver_source", (ERROR, "The driver lifecycle has its source: a bundle (direct) or a depot (vlcm).")),
    ("driver_versions_mixed", (WARNING, "The GPU clusters run the same driver branch.")),
    ("guest_driver_set", (WARNING, "The design names the vGPU guest driver the GPU Operator deploys (without one "
                                   "the guest link refuses to install the operator).")),
    ("guest_driver_matches_host", (ERROR, "The guest driver belongs to the vGPU software release of every cluster's "
                                          "host driver (the Virtual GPU Manager), or to one NVIDIA supports with it.")),
    ("driver_upgrade_keeps_pools", (WARNING, "A guest driver upgrade leaves a node of every multi-node pool "
                                             "serving: the upgrade policy takes fewer nodes at a time than a pool "
                                             "has.")),
    ("mig_strategy_vgpu", (ERROR, "The GPU Operator's mig.strategy is not mixed: inside a vGPU VM every vGPU, "
                                  "fractional or MIG-backed, is a plain nvidia.com/gpu.")),
    ("graphics_shared_direct", (ERROR, "vGPU hosts use the Shared Direct graphics type.")),
    ("scheduler_valid", (ERROR, "The vGPU scheduler settings form a valid RmPVMRL value.")),
    ("mixed_size_fixed_share", (ERROR, "A cluster whose GPUs run mixed-size vGPUs (graphics.vgpu_mode mixed_size) "
                                       "does not use the fixed_share scheduler, which NVIDIA does not support "
                                       "there.")),
    ("gpu_vms_pinned", (ERROR, "The vGPU VMs of every GPU cluster are DRS-pinned, or the design waives it "
                               "with a reason (waivers.gpu_vms_pinned).")),
    ("cluster_capacity", (ERROR, "The node VMs of every pool fit on the cluster's cards.")),
    ("mig_geometry_fits", (ERROR, "The node VMs fit on cards of their mode under the cluster's MIG geometry: "
                                  "MIG-backed vGPUs on GPUs in MIG mode, every other vGPU on GPUs with MIG off.")),
    ("spare_capacity", (ERROR, "Losing any one host leaves every protected (inference or non-preemptible) pool "
                               "its node VMs on cards of their MIG mode, so the ESXi role can roll the cluster "
                               "one host at a time.")),
    ("vm_reservations_fit", (ERROR, "Every tenant's reserved VM classes are classes its namespace offers and fit "
                                    "the cluster's GPUs after the node VMs, with one host kept spare.")),
    ("model_fits_framebuffer", (ERROR, "The declared model plus KV cache fits the profile's framebuffer.")),
    ("slo_knee", (WARNING, "A pool's planned utilization is below its queueing knee: the utilization at which "
                           "the M/M/c wait at the SLO percentile reaches the SLO target (design numbers).")),
])


def errors(findings):
    return [f for f in findings if f.severity == ERROR]


def warnings(findings):
    return [f for f in findings if f.severity == WARNING]


# the errors a failure message spells out; the others are counted (every one is in the result's findings)
SUMMARY_ERRORS = 20


def summarize(findings):
    """One message for a failed run: the count and each error (at most ``SUMMARY_ERRORS``, the rest
    counted) as ``rule: object: message (fix: ...)``."""
    errs = errors(findings)
    more = len(errs) - SUMMARY_ERRORS
    return "The pool design has %d error(s): %s%s" % (len(errs), "; ".join(str(f) for f in errs[:SUMMARY_ERRORS]),
                                                      "; and %d more (see errors)" % more if more > 0 else "")
