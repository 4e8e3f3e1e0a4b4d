# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon, drain and restore guest nodes (client layer: knows nothing of Ansible).

Every call goes through the fault boundary of ``_k8s.K8sClient`` (request timeout, bounded
retries, one error type). A node the collection cordons carries the annotation
``gpupool.vcf/cordoned-by``: a rerun finds it and resumes, and ``uncordon`` leaves alone a node
an administrator cordoned. Pods leave through the Eviction API (policy/v1), so
PodDisruptionBudgets are respected; a budget that refuses is asked again until the drain's one
deadline (shared by every pod and node of a call, evictions and the wait for the pods gone), and
then named with every pod still in the way. Every failure is a ``DrainError`` that says what was
left (nodes left cordoned, pods evicted so far) and that a plain rerun resumes. What to evict is
decided by ``pure._drain``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import STRATEGIC_MERGE_PATCH, K8sClient, K8sError, api_path
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._drain import KUEUE_DEACTIVATED_BY, in_the_way, pdbs_of_pod
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._retry import seconds
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._rfc3339 import instant

CORDONED_BY = "gpupool.vcf/cordoned-by"
# the node's boot and Ready condition when the collection cordoned it ({"boot_id", "ready_since"}):
# after its VM restarts, a node is back only with a new boot or a new Ready (not a stale one)
CORDONED_BOOT = "gpupool.vcf/cordoned-boot"
OWNER = "gpupool.vcf"
BUDGET_TIMEOUT = 120
POLL = 1.0
_BUDGET_CAUSE = re.compile(r"disruption budget (\S+)", re.IGNORECASE)


class DrainError(K8sError):
    """A drain step failed; the message ends with what was left and that a rerun resumes."""


class _Refused(K8sError):
    """An eviction the API refused with 429 (a PodDisruptionBudget, or throttling): asked again by
    DrainApi.evict_all until the drain's deadline, not by the boundary."""


def _body(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        return json.loads(body) or {}
    except (TypeError, ValueError):
        return {}


def _budget_names(exc):
    """PodDisruptionBudget names in a 429 eviction answer (its causes), else []."""
    body = _body(exc)
    texts = [c.get("message") or "" for c in ((body.get("details") or {}).get("causes") or [])]
    texts.append(body.get("message") or "")
    names = []
    for text in texts:
        for name in _BUDGET_CAUSE.findall(text):
            if name not in names:
                names.append(name)
    return names


def pod_key(pod):
    return "%s/%s" % (pod["namespace"], pod["name"])


class DrainApi(object):
    """The guest cluster's nodes and pods, as a drain needs them.

    `params`: the auth options (or `k8s`, a K8sClient). `owner`: the value of the cordoned-by
    annotation this run writes. `cordoned` and `evicted` record what this object did, for the
    messages of its failures.
    """

    def __init__(self, params=None, k8s=None, owner=OWNER, sleep=time.sleep, clock=time.monotonic, poll=POLL):
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self.owner = owner
        self.sleep = sleep
        self.clock = clock
        self.poll = poll
        self.cordoned = []
        self.evicted = []
        self._workloads = None
        self.deactivated = []

    # --- what was left

    def left(self):
        """The sentence every failure ends with."""
        parts = ["nodes left cordoned: %s" % (", ".join(self.cordoned) or "none"),
                 "pods evicted so far: %s" % (", ".join(self.evicted) or "none")]
        if self.deactivated:
            parts.append("Kueue workloads deactivated (requeued by a rerun): %s" % ", ".join(self.deactivated))
        return "; ".join(parts) + "; a plain rerun resumes from there"

    def _fail(self, msg, err=None):
        kwargs = {}
        if err is not None:
            kwargs = dict(status=err.status, kind=err.kind, attempts=err.attempts, reason=err.reason)
        return DrainError("%s (left: %s)" % (msg, self.left()), **kwargs)

    # --- reads

    def read_node(self, name):
        """The Node as a dict; DrainError when it cannot be read."""
        try:
            return self.k8s.request("GET", api_path("v1", "nodes", name=name))
        except K8sError as exc:
            raise self._fail("cannot read node %s: %s" % (name, exc), exc)

    def list_nodes(self):
        try:
            return self.k8s.items(api_path("v1", "nodes"))
        except K8sError as exc:
            raise self._fail("cannot list the nodes: %s" % exc, exc)

    def pods_on(self, node):
        """Every pod bound to `node`, as dicts."""
        try:
            return self.k8s.items(api_path("v1", "pods"), field_selector="spec.nodeName=%s" % node)
        except K8sError as exc:
            raise self._fail("cannot list the pods of node %s: %s" % (node, exc), exc)

    def list_pods(self):
        """Every pod of the cluster, as dicts (one request: the drain plan and the spare rule need
        the pods of the other nodes too)."""
        try:
            return self.k8s.items(api_path("v1", "pods"))
        except K8sError as exc:
            raise self._fail("cannot list the pods: %s" % exc, exc)

    def list_pdbs(self):
        """Every PodDisruptionBudget with its status, as dicts."""
        try:
            return self.k8s.items(api_path("policy/v1", "poddisruptionbudgets"))
        except K8sError as exc:
            raise self._fail("cannot list the PodDisruptionBudgets: %s" % exc, exc)

    # --- Kueue workloads (absent Kueue: none)

    def list_workloads(self, api_version="kueue.x-k8s.io/v1beta2"):
        """Every Kueue Workload as a dict; [] when the cluster does not serve Kueue."""
        try:
            if self._workloads is None:
                self._workloads = self.k8s.resource(api_version, "Workload")
            return self.k8s.call(self._workloads.get).to_dict().get("items") or []
        except K8sError as exc:
            if exc.kind == "not_served" or exc.status == 404:
                return []
            raise self._fail("cannot list Kueue workloads: %s" % exc, exc)

    def set_workload_active(self, namespace, name, active):
        """Deactivate a Workload (Kueue evicts it whole: its Job is suspended, its pods go), recording this
        run's owner on it, or activate it again (Kueue requeues it) and drop the record."""
        body = {"metadata": {"annotations": {KUEUE_DEACTIVATED_BY: None if active else self.owner}},
                "spec": {"active": bool(active)}}
        key = "%s/%s" % (namespace, name)
        try:
            self.k8s.call(self._workloads.patch, name=name, namespace=namespace, body=body,
                          content_type="application/merge-patch+json")
        except K8sError as exc:
            raise self._fail("cannot %s Kueue workload %s: %s" % ("activate" if active else "deactivate", key, exc), exc)
        if active and key in self.deactivated:
            self.deactivated.remove(key)
        elif not active and key not in self.deactivated:
            self.deactivated.append(key)

    # --- cordon and uncordon

    def _patch_node(self, node, patch, done):
        """Patch `node`; a failed patch is judged by the node read again: ``done(node dict)`` true
        means the patch (or its repeat) was carried out and its answer lost, and is no failure."""
        # the resourceVersion read makes the patch a precondition: a repeat or a concurrent
        # change gets 409 instead of applying over someone else's cordon
        try:
            self.k8s.request("PATCH", api_path("v1", "nodes", name=node), body=patch, content_type=STRATEGIC_MERGE_PATCH)
        except K8sError as exc:
            # a patch that timed out, or whose answer a gateway replaced, may have been carried out
            # (then its repeat got 409): the node says whether it was
            try:
                now = self.k8s.request("GET", api_path("v1", "nodes", name=node))
            except K8sError as again:
                raise self._fail("cannot patch node %s: %s (and reading it again failed: %s)" % (node, exc, again), exc)
            if done(now):
                return
            raise self._fail("cannot patch node %s: %s (read again: not changed)" % (node, exc), exc)

    def cordon(self, node):
        """Mark `node` unschedulable and record that the collection did.

        Returns ``cordoned`` (done now), ``ours`` (cordoned by an earlier run: resumed) or
        ``administrator`` (cordoned by someone else: left as it is, and never uncordoned here).
        """
        obj = self.read_node(node)
        meta = obj.get("metadata") or {}
        mark = (meta.get("annotations") or {}).get(CORDONED_BY)
        if (obj.get("spec") or {}).get("unschedulable"):
            if mark:
                self._remember(node)
                return "ours"
            return "administrator"
        self._patch_node(node, {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                             "annotations": {CORDONED_BY: self.owner,
                                                             CORDONED_BOOT: json.dumps(boot_of(obj), sort_keys=True)}},
                                "spec": {"unschedulable": True}},
                         done=lambda now: bool((now.get("spec") or {}).get("unschedulable"))
                         and ((now.get("metadata") or {}).get("annotations") or {}).get(CORDONED_BY) == self.owner)
        self._remember(node)
        return "cordoned"

    def _remember(self, node):
        if node not in self.cordoned:
            self.cordoned.append(node)

    def uncordon(self, node, owners=None):
        """Make `node` schedulable again if the collection cordoned it.

        `owners`: the cordoned-by values this call may undo (None: any); a node another roll of
        the collection cordoned (another value) is left as it is.
        Returns ``uncordoned``, ``not_ours`` (cordoned by someone else: left cordoned) or
        ``schedulable`` (nothing to do; a stale mark is removed).
        """
        obj = self.read_node(node)
        meta = obj.get("metadata") or {}
        mark = (meta.get("annotations") or {}).get(CORDONED_BY)
        cordoned = bool((obj.get("spec") or {}).get("unschedulable"))
        if mark and owners is not None and mark not in owners:
            return "not_ours"
        if cordoned and not mark:
            return "not_ours"
        if mark:
            patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                  "annotations": {CORDONED_BY: None, CORDONED_BOOT: None}}}
            if cordoned:
                patch["spec"] = {"unschedulable": False}
            self._patch_node(node, patch, done=lambda now: not (now.get("spec") or {}).get("unschedulable")
                             and not ((now.get("metadata") or {}).get("annotations") or {}).get(CORDONED_BY))
        if node in self.cordoned:
            self.cordoned.remove(node)
        return "uncordoned" if cordoned else "schedulable"

    # --- evict and wait

    def _post_eviction(self, pod):
        # the pod's uid as precondition: a repeated eviction (its first answer lost) cannot evict the
        # replacement a StatefulSet made under the same name; the API server answers 409 instead
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod["name"], "namespace": pod["namespace"]}}
        if pod.get("uid"):
            body["deleteOptions"] = {"preconditions": {"uid": pod["uid"]}}
        try:
            return self.k8s.send("POST", api_path("v1", "pods", pod["namespace"], pod["name"]) + "/eviction", body=body)
        except Exception as exc:  # only a 429 is taken out of the boundary's retries
            if getattr(exc, "status", None) == 429:
                err = _Refused(str(getattr(exc, "reason", None) or "429"), kind="refused_by_budget")
                err.budgets = _budget_names(exc)
                raise err
            raise

    def _until(self, check, timeout=None, deadline=None):
        """Call ``check()`` until it returns ``(True, value)`` or the `deadline` (a clock time; else
        `timeout` seconds from now) has passed, polling every ``self.poll`` seconds; return its last
        ``(done, value)``. ``check`` runs at least once."""
        end = deadline if deadline is not None else self.clock() + timeout
        while True:
            done, value = check()
            if done or self.clock() >= end:
                return done, value
            self.sleep(max(0, min(self.poll, end - self.clock())))

    def deadline(self, timeout):
        """The clock time `timeout` seconds from now: the one deadline of a drain."""
        return self.clock() + timeout

    def _within(self, deadline):
        """Retries of the boundary wait no longer than `deadline` (restored by the returned callable)."""
        before = getattr(self.k8s, "deadline", None)
        clock = getattr(self.k8s, "clock", self.clock)
        mine = clock() + (deadline - self.clock())  # the same moment on the boundary's clock
        self.k8s.deadline = mine if before is None else min(before, mine)

        def restore():
            self.k8s.deadline = before
        return restore

    def _evict_once(self, pod):
        """One eviction of `pod`: ``(True, "evicted" | "gone")``, or ``(False, the _Refused 429)``."""
        try:
            self.k8s.call(self._post_eviction, pod)
        except _Refused as exc:
            return False, exc
        except K8sError as exc:
            if exc.status == 404:
                return True, "gone"
            if exc.status == 409 and pod.get("uid") and not self._still_there(pod):
                # the uid precondition failed: the pod meant is gone (evicted by the first try of
                # a repeated request), and one of its name is a new pod, left alone
                return True, "gone"
            raise self._fail("cannot evict pod %s: %s" % (pod_key(pod), exc), exc)
        if pod_key(pod) not in self.evicted:
            self.evicted.append(pod_key(pod))
        return True, "evicted"

    def _refusal(self, pod, exc):
        budgets = getattr(exc, "budgets", None) or self._budgets_of(pod)
        if budgets:
            return "PodDisruptionBudget %s allows no disruption" % ", ".join(budgets)
        return "the API server kept answering 429 Too Many Requests"

    def evict_all(self, pods, deadline, timeout=None):
        """Evict every pod of `pods` ({"namespace", "name", "uid", "node" optional}) through the
        Eviction API before `deadline` (a clock time: the drain's one deadline, shared by every pod
        and node; `timeout`: its length in seconds, for the message).

        In rounds: each round asks once for every pod not yet evicted, so one pod a budget holds
        does not hold up the others; a pod refused with 429 (its PodDisruptionBudget allows no
        disruption now) is asked again in the next round, every ``self.poll`` seconds. Every pod is
        asked for at least once. Returns {"ns/name": "evicted" | "gone"}. When the deadline passes,
        DrainError naming, per node, the pods still in the way and why.
        """
        outcomes, refused = {}, {}
        pending = list(pods)
        restore = self._within(deadline)
        try:
            while pending:
                still = []
                for pod in pending:
                    done, outcome = self._evict_once(pod)
                    if done:
                        outcomes[pod_key(pod)] = outcome
                        refused.pop(pod_key(pod), None)
                    else:
                        refused[pod_key(pod)] = outcome
                        still.append(pod)
                pending = still
                if not pending or self.clock() >= deadline:
                    break
                self.sleep(max(0, min(self.poll, deadline - self.clock())))
        finally:
            restore()
        if pending:
            last = refused[pod_key(pending[0])]
            still = [(p, self._refusal(p, refused[pod_key(p)])) for p in pending]
            raise self._fail("the drain's deadline (%s s) passed before every pod was evicted; still in the way: %s"
                             % (seconds(timeout), in_the_way(still)), last)
        return outcomes

    def evict(self, pod, budget_timeout=BUDGET_TIMEOUT):
        """Evict one `pod` ({"namespace", "name"}) within `budget_timeout` seconds (see evict_all).

        Returns ``evicted`` or ``gone`` (no such pod: evicted by an earlier run)."""
        return self.evict_all([pod], self.deadline(budget_timeout), budget_timeout)[pod_key(pod)]

    def _budgets_of(self, pod):
        try:
            obj = self.k8s.request("GET", api_path("v1", "pods", pod["namespace"], pod["name"]))
            pdbs = self.k8s.items(api_path("policy/v1", "poddisruptionbudgets", pod["namespace"]))
        except K8sError:
            return []
        return sorted(b["metadata"]["name"] for b in pdbs_of_pod(obj, pdbs))

    def _still_there(self, pod):
        try:
            obj = self.k8s.request("GET", api_path("v1", "pods", pod["namespace"], pod["name"]))
        except K8sError as exc:
            if exc.status == 404:
                return False
            raise self._fail("cannot read pod %s: %s" % (pod_key(pod), exc), exc)
        # a pod of the same name with another uid (a StatefulSet's replacement) is a new pod
        return not pod.get("uid") or (obj.get("metadata") or {}).get("uid") == pod["uid"]

    def wait_gone(self, pods, timeout=None, deadline=None):
        """Wait until every pod of `pods` ({"namespace", "name", "uid", "node" optional}) is gone,
        until `deadline` (a clock time: the drain's) or else `timeout` seconds from now; DrainError
        naming, per node, those still there."""
        waiting = list(pods)
        if deadline is None:
            deadline = self.deadline(timeout)

        def gone():
            waiting[:] = [p for p in waiting if self._still_there(p)]
            return not waiting, waiting

        restore = self._within(deadline)
        try:
            done = self._until(gone, deadline=deadline)[0]
        finally:
            restore()
        if not done:
            still = [(p, "evicted, not gone yet" if pod_key(p) in self.evicted else "not gone yet") for p in waiting]
            raise self._fail("the drain's deadline (%s s) passed before the evicted pods were gone; still in the way: "
                             "%s" % (seconds(timeout), in_the_way(still)))

    def wait_ready(self, node, timeout, restarted=False):
        """Wait until `node` reports Ready; DrainError with its last Ready condition after `timeout` s.

        ``restarted``: the node's VM was powered off and on since the collection cordoned it, so a
        Ready condition is trusted only when it is not the one recorded at the cordon (annotation
        ``gpupool.vcf/cordoned-boot``): a new boot id, or a Ready that went away and came back. A
        node that never went NotReady (the off time shorter than the node monitor's grace period)
        still shows its old Ready while its kubelet boots.
        """
        state = {}

        def ready():
            obj = self.read_node(node)
            cond = [c for c in ((obj.get("status") or {}).get("conditions") or []) if c.get("type") == "Ready"]
            is_ready = bool(cond) and cond[0].get("status") == "True"
            state["stale"] = bool(is_ready and restarted and stale_ready(obj))
            return is_ready and not state["stale"], cond

        done, cond = self._until(ready, timeout)
        if not done:
            if state.get("stale"):
                last = ("Ready since %s, the same Ready (and boot) it had when it was cordoned: its kubelet has not "
                        "reported since the VM restarted" % (cond[0].get("lastTransitionTime") or "an unknown time"))
            else:
                last = ("Ready %s (%s)" % (cond[0].get("status"), cond[0].get("reason") or cond[0].get("message")
                                           or "no reason")) if cond else "no Ready condition"
            raise self._fail("node %s is not Ready after %s s: %s" % (node, seconds(timeout), last))


def boot_of(node):
    """{"boot_id", "ready_since"}: the node's boot id and its Ready condition's lastTransitionTime."""
    status = (node or {}).get("status") or {}
    cond = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return dict(boot_id=(status.get("nodeInfo") or {}).get("bootID") or "",
                ready_since=str(cond[0].get("lastTransitionTime") or "") if cond else "")


def stale_ready(node):
    """Whether the node's Ready is still the one recorded when the collection cordoned it: same boot
    id (when the node reports one) and the same Ready transition. False without a record."""
    raw = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(CORDONED_BOOT)
    try:
        then = json.loads(raw) if raw else None
    except ValueError:
        then = None
    if not isinstance(then, dict):
        return False
    now = boot_of(node)
    if then.get("boot_id") and now["boot_id"] and then["boot_id"] != now["boot_id"]:
        return False
    return _instant(now["ready_since"]) == _instant(then.get("ready_since"))


def _instant(text):
    """A timestamp of the API as the instant it names (``pure/_rfc3339``): a record made from the kubernetes
    client's typed models holds ``...+00:00`` where the API server writes ``...Z``; text that is no timestamp
    stays as it is, so that two records of the same junk still compare equal."""
    return instant(text) or str(text or "")


__all__ = ["CORDONED_BOOT", "CORDONED_BY", "DrainApi", "DrainError", "boot_of", "pod_key", "stale_ready"]
