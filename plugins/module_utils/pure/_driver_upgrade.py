# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest driver's node-by-node upgrade: the ClusterPolicy's ``driver.upgradePolicy`` the design
gives, and the progress of the GPU Operator's upgrade controller read from the nodes' upgrade-state
labels over time (pure: the caller reads the nodes and keeps the clock).

NVIDIA's upgrade controller (GPU Operator, "GPU Driver Upgrades"; the states are those of NVIDIA's
k8s-operator-libs ``pkg/upgrade``) moves each node through the label ``nvidia.com/gpu-driver-upgrade-state``:
upgrade-required, cordon-required, wait-for-jobs-required, pod-deletion-required, drain-required,
pod-restart-required, validation-required, uncordon-required, then upgrade-done (or upgrade-failed),
at most ``maxParallelUpgrades`` nodes at a time (0: no limit). The field names below are those of the
ClusterPolicy CRD of the chart (``spec.driver.upgradePolicy``); the chart's values call ``podDeletion``
``gpuPodDeletion``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import OrderedDict

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
DONE = "upgrade-done"
FAILED = "upgrade-failed"
# in the controller's order; a node without the label has not been looked at by the controller yet
STATES = ("upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required",
          "drain-required", "pod-restart-required", "validation-required", "uncordon-required", DONE, FAILED)
IN_PROGRESS = STATES[1:8]

# the design's guest.driver_upgrade defaults: one node at a time, PDBs honoured (drain without force)
DEFAULT_POLICY = OrderedDict([("max_parallel", 1), ("drain_timeout_s", 300), ("honour_pdbs", True),
                              ("step_timeout_s", 900)])


def policy(given):
    """The upgrade policy with the defaults for what `given` leaves out."""
    out = OrderedDict(DEFAULT_POLICY)
    out.update((k, v) for k, v in (given or {}).items() if k in DEFAULT_POLICY and v is not None)
    return out


def _max_unavailable(p):
    # as many nodes unavailable as upgrade at once; 0 (no limit on parallel upgrades): every node
    return int(p["max_parallel"]) if int(p["max_parallel"]) > 0 else "100%"


def cluster_policy_fields(given):
    """[(path, value)] of the ClusterPolicy's ``driver.upgradePolicy`` the gpu_operator role sets: the
    controller on, ``maxParallelUpgrades``, ``maxUnavailable``, the drain on with its timeout (every pod
    of the node evicted, not only the GPU pods), force on neither the drain nor the GPU pod deletion
    when PDBs are honoured (an eviction a PDB refuses is retried until the timeout, then the node is
    upgrade-failed)."""
    p = policy(given)
    force = not p["honour_pdbs"]
    timeout = int(p["drain_timeout_s"])
    base = ("driver", "upgradePolicy")
    return [(base + ("autoUpgrade",), True),
            (base + ("maxParallelUpgrades",), int(p["max_parallel"])),
            (base + ("maxUnavailable",), _max_unavailable(p)),
            (base + ("podDeletion", "force"), force),
            (base + ("podDeletion", "timeoutSeconds"), timeout),
            (base + ("drain", "enable"), True),
            (base + ("drain", "force"), force),
            (base + ("drain", "timeoutSeconds"), timeout)]


def chart_values(given):
    """The chart's ``driver.upgradePolicy`` values for the same policy (the chart's template writes
    ``gpuPodDeletion`` as the ClusterPolicy's ``podDeletion`` and needs ``waitForCompletion``)."""
    out = OrderedDict()
    for path, value in cluster_policy_fields(given):
        keys = ["gpuPodDeletion" if k == "podDeletion" else k for k in path[2:]]
        here = out
        for key in keys[:-1]:
            here = here.setdefault(key, OrderedDict())
        here[keys[-1]] = value
    out["gpuPodDeletion"]["deleteEmptyDir"] = False
    out["drain"]["deleteEmptyDir"] = False
    out["waitForCompletion"] = OrderedDict([("timeoutSeconds", 0)])
    return out


def driver_version_change(live_spec, version):
    """(live version, wanted version) when a live ClusterPolicy runs another guest driver version than
    `version`; None when there is no live ClusterPolicy, no version is wanted, or they are the same."""
    live = (((live_spec or {}).get("driver") or {}).get("version"))
    if not version or not live or str(live) == str(version):
        return None
    return (str(live), str(version))


def node_states(nodes, selector=None):
    """{node name: upgrade state ('' without the label)} of the nodes (plain dicts with metadata.labels)
    that carry every label of `selector`."""
    out = OrderedDict()
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if any(labels.get(k) != v for k, v in (selector or {}).items()):
            continue
        out[meta.get("name")] = labels.get(STATE_LABEL, "")
    return out


class Progress:
    """The nodes' upgrade states looked at over time: per node the states it went through with the
    time it entered each, and the verdict (done, failed with the node and state, stuck past the bound)."""

    def __init__(self, start, step_timeout):
        self.start = float(start)
        self.step_timeout = float(step_timeout)
        self.history = OrderedDict()  # node: [[state, entered, left or None]]
        self.last = None

    def observe(self, at, states):
        """Take one look: `states` is {node: state} at time `at` (seconds on the caller's clock)."""
        at = float(at)
        self.last = at
        for node, state in states.items():
            steps = self.history.setdefault(node, [])
            if steps and steps[-1][0] == state:
                continue
            if steps:
                steps[-1][2] = at
            steps.append([state, at, None])

    def current(self):
        return OrderedDict((node, steps[-1][0]) for node, steps in self.history.items())

    def done(self):
        """True when every node looked at is upgrade-done."""
        return bool(self.history) and all(s == DONE for s in self.current().values())

    def failed(self):
        """[(node, state)] of the nodes in upgrade-failed, and of those in one state longer than the bound. A
        node waiting its turn (upgrade-required, or no label yet) while another node is being upgraded is not
        stuck: the controller takes maxParallelUpgrades nodes at a time."""
        out = []
        current = self.current()
        turn_taken = any(s in IN_PROGRESS for s in current.values())
        for node, steps in self.history.items():
            state = steps[-1][0]
            if state == FAILED:
                out.append((node, state))
            elif state in ("", STATES[0]) and turn_taken:
                continue
            elif state != DONE and self.last is not None and self.last - self._since(node) > self.step_timeout:
                out.append((node, state))
        return out

    def _since(self, node):
        """When the node's current wait began: for a node waiting its turn, when the last node ahead of it
        finished (or its own entry, if later); else when it entered its state."""
        state, entered = self.history[node][-1][0], self.history[node][-1][1]
        if state not in ("", STATES[0]):
            return entered
        finished = [steps[-1][1] for steps in self.history.values() if steps[-1][0] == DONE and len(steps) > 1]
        return max([entered] + finished)

    def step_seconds(self):
        """{node: [(state, seconds)]}: how long each node stayed in each state it left (its last state,
        upgrade-done aside, with the time so far)."""
        out = OrderedDict()
        for node, steps in self.history.items():
            rows = []
            for state, entered, left in steps:
                if left is None and state == DONE:
                    continue
                end = left if left is not None else self.last
                rows.append((state or "(no label)", round(end - entered, 3)))
            out[node] = rows
        return out

    def node_seconds(self):
        """{node: seconds from its first state other than none or upgrade-done to upgrade-done}; nodes
        not upgraded (or not yet done) are left out."""
        out = OrderedDict()
        for node, steps in self.history.items():
            begun = [entered for state, entered, _left in steps if state not in ("", DONE)]
            if begun and steps[-1][0] == DONE:
                out[node] = round(steps[-1][1] - begun[0], 3)
        return out

    def order(self):
        """The nodes in the order they first entered a state past upgrade-required."""
        started = []
        for node, steps in self.history.items():
            times = [entered for state, entered, _left in steps if state in IN_PROGRESS]
            if times:
                started.append((times[0], node))
        return [node for _t, node in sorted(started)]

    def failure(self, version):
        """The message naming the nodes that failed or are stuck, and their state."""
        parts = []
        for node, state in self.failed():
            if state == FAILED:
                parts.append("node %s is %s" % (node, state))
            else:
                parts.append("node %s has been %s for %.0f s (bound %.0f s)" % (
                    node, state or "without an upgrade state", self.last - self._since(node), self.step_timeout))
        return ("The guest driver upgrade to %s stopped: %s (label %s). The GPU Operator's upgrade controller "
                "holds the node there: see its events and the driver pod of that node; a drain a "
                "PodDisruptionBudget refuses is retried until the drain timeout." % (
                    version, "; ".join(parts), STATE_LABEL))

    def markdown(self):
        lines = ["| node | step | seconds |", "|---|---|---|"]
        for node, rows in self.step_seconds().items():
            for state, secs in rows:
                lines.append("| %s | %s | %.1f |" % (node, state, secs))
        return "\n".join(lines) + "\n"
