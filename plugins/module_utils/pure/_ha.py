# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""vSphere HA as the GPU pools' spare: pure planning, no I/O.

``ha_gpu_restart`` reads a cluster once (its HA settings, its per-VM HA overrides, the record of
what the collection set, every VM with its devices), then :func:`plan` decides:

* the cluster's admission control: HA on, admission control on, the policy that reserves the
  failover capacity the design's spare rule keeps (:func:`admission_policy`: a percentage of the
  cluster's CPU and memory equal to ``failover_hosts`` of its ``hosts``, see docs/capacity.md);
* the HA restart priority of each node VM of a pool (a VM holding a vGPU, mapped to its pool as
  the live spare rule maps it: the pool of the cluster with the VM's profile; of several, the one
  whose node pool or VM class name is part of the VM's name).

Values are plain data so the planner is unit-tested without pyvmomi:

* a VM is ``{"moid": "vm-42", "name": "llm-01", "vgpu_profiles": ["nvidia_h100-1-10c"]}``;
* ``overrides`` is ``{vm moid: restart priority}`` (``clusterRestartPriority`` for an entry that
  keeps the cluster's default);
* ``das`` is ``{"enabled", "admission_control_enabled", "policy"}``, the policy
  ``{"kind": "resources", "failover_level", "cpu_percent", "memory_percent", "auto"}`` (or another
  ``kind``: ``slots``, ``hosts``; None when the cluster has none).

Ownership: what the collection set is recorded on the cluster, in the custom attribute
:data:`RECORD_FIELD` (the VM moids, and :data:`CLUSTER_TOKEN` for the admission control). An
override of a pool's VM that the record lacks and that differs from the design was set by someone
else: it is reported (``kept_foreign``) and left, unless ``adopt``; so is an admission control
someone configured on a cluster with HA on. An override the record holds on a VM that is no
longer a pool's node VM is removed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drs import format_record, parse_record
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._ownership import record_after
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import CREATE, DELETE, UPDATE, Change

# vSphere's restart priorities (ClusterDasVmSettingsRestartPriority), lowest first
PRIORITIES = ("disabled", "lowest", "low", "medium", "high", "highest")
# an override entry that keeps the cluster's default
CLUSTER_DEFAULT = "clusterRestartPriority"
# custom attribute of the cluster: the VMs whose HA override the collection set, and the cluster's
# admission control when the collection set it
RECORD_FIELD = "gpupool.vcf.ha-restart"
CLUSTER_TOKEN = "cluster"
POLICY_KEYS = ("failover_level", "cpu_percent", "memory_percent")


class HaPlanError(ValueError):
    """The request cannot be planned (a bad priority or policy); nothing is changed."""


def admission_policy(hosts, failover_hosts=1):
    """The admission control that keeps ``failover_hosts`` of ``hosts`` equal hosts spare: HA's
    percentage-based policy with that share of CPU and memory (rounded up) and that failover level."""
    if not isinstance(hosts, int) or not isinstance(failover_hosts, int) or hosts < 2 or not 1 <= failover_hosts < hosts:
        raise HaPlanError("the spare rule needs at least one host more than the %s it keeps spare; the cluster has %s"
                          % (failover_hosts, hosts))
    percent = -(-100 * failover_hosts // hosts)
    return dict(failover_level=failover_hosts, cpu_percent=percent, memory_percent=percent)


def policy_errors(policy):
    """What is wrong with a wanted admission policy (a list of sentences)."""
    out = []
    if not isinstance(policy, dict):
        return ["admission_control must be a mapping with %s" % ", ".join(POLICY_KEYS)]
    level = policy.get("failover_level")
    if not isinstance(level, int) or isinstance(level, bool) or level < 1:
        out.append("admission_control.failover_level must be a whole number of 1 or more, not %r" % (level,))
    for key in ("cpu_percent", "memory_percent"):
        value = policy.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100:
            out.append("admission_control.%s must be from 1 to 100, not %r" % (key, value))
    return out


def pool_of(pools, vm):
    """The pool (an entry of ``pools``: ``name``, ``vgpu_profile``, ``node_pool``, ``vm_class``) a VM
    belongs to, or None: the pool with the VM's one profile; of several, the one whose node pool or VM
    class name is part of the VM's name."""
    profiles = sorted(set(str(p).lower() for p in vm.get("vgpu_profiles") or []))
    if len(profiles) != 1:
        return None
    found = [p for p in pools if str(p.get("vgpu_profile") or "").lower() == profiles[0]]
    if len(found) > 1:
        name = vm.get("name") or ""
        found = [p for p in found if (p.get("node_pool") or p["name"]) in name
                 or (p.get("vm_class") and p["vm_class"] in name)]
    return found[0] if len(found) == 1 else None


def _policy_view(das):
    """The cluster's HA settings as the plan compares them."""
    das = das or {}
    policy = das.get("policy") or {}
    view = dict(ha_enabled=bool(das.get("enabled")), admission_control=bool(das.get("admission_control_enabled")),
                policy=policy.get("kind"))
    view.update((k, policy.get(k)) for k in POLICY_KEYS)
    if policy.get("kind") == "resources" and policy.get("auto"):
        view["policy"] = "resources (computed)"
    return view


def _wanted_view(policy):
    view = dict(ha_enabled=True, admission_control=True, policy="resources")
    view.update((k, policy[k]) for k in POLICY_KEYS)
    return view


class HaPlan:
    """What to change on one cluster, and the views of its diff."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.add = []       # [{"moid", "name", "pool", "priority"}]
        self.edit = []      # [{"moid", "name", "pool", "priority", "was"}]
        self.remove = []    # [{"moid", "name", "was"}]
        self.admission = None  # the wanted admission view when the cluster's settings are written, else None
        self.admission_before = None
        self.kept_foreign = []  # sentences: overrides and settings someone else set that differ, left as they are
        self.unmatched = []     # names of vGPU VMs no pool claims (left alone)
        self.priorities = {}    # {vm name: wanted priority} of every pool VM
        self.before = {}
        self.after = {}
        self.owned_before = set()
        self.owned_after = set()
        self.names = {}

    @property
    def reconfigure(self):
        """Whether the cluster is reconfigured (one ReconfigureComputeResource_Task)."""
        return bool(self.add or self.edit or self.remove or self.admission is not None)

    @property
    def record_changed(self):
        return self.owned_after != self.owned_before

    def owned_names(self, owned):
        return sorted(CLUSTER_TOKEN if m == CLUSTER_TOKEN else self.names.get(m, m) for m in owned)

    def changes(self):
        """The plan as ``_plan.Change``s: the admission control, one per override, the record."""
        out = []
        if self.admission is not None:
            out.append(Change("cluster %s" % self.cluster, "ha_admission_control", self.admission_before, self.admission))
        out.extend(Change("VM %s" % e["name"], "ha_restart_priority", None, e["priority"], CREATE, pool=e["pool"])
                   for e in self.add)
        out.extend(Change("VM %s" % e["name"], "ha_restart_priority", e["was"], e["priority"], UPDATE, pool=e["pool"])
                   for e in self.edit)
        out.extend(Change("VM %s" % e["name"], "ha_restart_priority", e["was"], None, DELETE) for e in self.remove)
        if self.record_changed:
            out.append(Change("cluster %s" % self.cluster, "ha_owned", self.owned_names(self.owned_before),
                              self.owned_names(self.owned_after)))
        return out

    def summary(self):
        return dict(added=sorted(e["name"] for e in self.add), updated=sorted(e["name"] for e in self.edit),
                    removed=sorted(e["name"] for e in self.remove), priorities=dict(self.priorities),
                    admission_control=self.admission if self.admission is not None else self.admission_before,
                    owned=self.owned_names(self.owned_after), kept_foreign=list(self.kept_foreign),
                    unmatched=sorted(self.unmatched))


def _check_wanted(wanted):
    for pool in wanted.get("pools") or []:
        if pool.get("restart_priority") not in PRIORITIES:
            raise HaPlanError("pool %s: restart_priority %r is not one of %s"
                              % (pool.get("name"), pool.get("restart_priority"), ", ".join(PRIORITIES)))
    if wanted.get("admission_control") is not None:
        errs = policy_errors(wanted["admission_control"])
        if errs:
            raise HaPlanError("; ".join(errs))


def plan(live, wanted):
    """Plan one cluster's HA settings and its pool VMs' restart priorities.

    ``live``: ``{"vms", "overrides", "das", "owned"}`` (module docstring). ``wanted``: ``{"cluster",
    "pools": [{"name", "vgpu_profile", "node_pool", "vm_class", "restart_priority"}], "admission_control":
    {"failover_level", "cpu_percent", "memory_percent"} or None (leave the cluster's settings alone),
    "adopt": bool, "exclude": [VM names or moids]}``. Returns a :class:`HaPlan`.
    """
    _check_wanted(wanted)
    out = HaPlan(wanted.get("cluster"))
    adopt = bool(wanted.get("adopt"))
    owned = set(live.get("owned") or ())
    overrides = dict(live.get("overrides") or {})
    vms = [vm for vm in live.get("vms") or [] if vm.get("vgpu_profiles")]
    out.names = dict((vm["moid"], vm["name"]) for vm in live.get("vms") or [])
    excluded = set(wanted.get("exclude") or ())
    pools = list(wanted.get("pools") or [])
    claimed, in_scope = set(), set()
    for vm in sorted(vms, key=lambda v: (v["name"], v["moid"])):
        if vm["moid"] in excluded or vm["name"] in excluded:
            continue
        pool = pool_of(pools, vm)
        if pool is None:
            out.unmatched.append(vm["name"])
            continue
        want, have = pool["restart_priority"], overrides.get(vm["moid"])
        in_scope.add(vm["moid"])
        out.priorities[vm["name"]] = want
        out.before[vm["name"]], out.after[vm["name"]] = have, want
        entry = dict(moid=vm["moid"], name=vm["name"], pool=pool["name"], priority=want)
        if have is None:
            out.add.append(entry)
            claimed.add(vm["moid"])
        elif have != want:
            if vm["moid"] in owned or adopt:
                entry["was"] = have
                out.edit.append(entry)
                claimed.add(vm["moid"])
            else:
                out.after[vm["name"]] = have
                out.kept_foreign.append("VM %s: restart priority %s set outside the collection (the design says %s)"
                                        % (vm["name"], have, want))
    for moid in sorted(owned & set(overrides) - in_scope - {CLUSTER_TOKEN}):
        if moid in excluded or out.names.get(moid) in excluded:
            continue
        name = out.names.get(moid, moid)
        out.remove.append(dict(moid=moid, name=name, was=overrides[moid]))
        out.before[name], out.after[name] = overrides[moid], None
    present = (set(overrides) | claimed) - set(e["moid"] for e in out.remove)
    _plan_admission(out, live.get("das"), wanted.get("admission_control"), owned, adopt)
    as_wanted = set(m for m in in_scope if out.after.get(out.names[m]) == out.priorities[out.names[m]])
    policy = wanted.get("admission_control")
    if out.admission is not None:
        claimed.add(CLUSTER_TOKEN)
    if policy is None or out.admission is not None or out.admission_before == _wanted_view(policy):
        # the record keeps the cluster while its settings are (or are made) as designed, or not managed
        present.add(CLUSTER_TOKEN)
        if policy is not None:
            as_wanted.add(CLUSTER_TOKEN)
    out.owned_before = owned
    out.owned_after = record_after(owned, present, claimed, as_wanted, adopt)
    return out


def _plan_admission(out, das, policy, owned, adopt):
    """The cluster's HA settings: written when they differ and the collection owns them, adopts them, or
    HA is off (no admission control anyone relies on); else reported."""
    out.admission_before = _policy_view(das)
    if policy is None:
        return
    want = _wanted_view(policy)
    if out.admission_before == want:
        return
    if CLUSTER_TOKEN in owned or adopt or not out.admission_before["ha_enabled"]:
        out.admission = want
        return
    have = out.admission_before
    out.kept_foreign.append(
        "cluster %s: HA admission control %s (policy %s, failover level %s, CPU %s %%, memory %s %%) set outside the "
        "collection; the design's spare rule keeps failover level %s, CPU %s %%, memory %s %%"
        % (out.cluster, "on" if have["admission_control"] else "off", have["policy"], have["failover_level"],
           have["cpu_percent"], have["memory_percent"], want["failover_level"], want["cpu_percent"],
           want["memory_percent"]))


__all__ = ["CLUSTER_DEFAULT", "CLUSTER_TOKEN", "PRIORITIES", "RECORD_FIELD", "HaPlan", "HaPlanError",
           "admission_policy", "format_record", "parse_record", "plan", "policy_errors", "pool_of"]
