# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest-side license truth (pure): which pod of a GPU node runs the GPU Operator's guest driver, what its
``nvidia-smi -q`` says of each vGPU's license (parsed by ``_nvidia_smi.parse``, the parser nvidia_license_info
uses), and how that compares with the DCGM exporter's ``DCGM_FI_DEV_VGPU_LICENSE_STATUS`` (the second source).

The driver pods are those of the operator's driver DaemonSet (its asset ``state-driver/0500_daemonset.yaml``
labels the pods ``app: nvidia-driver-daemonset`` and ``app.kubernetes.io/component: nvidia-driver``, the
second shared with the NVIDIADriver resource's DaemonSets; the driver runs in container ``nvidia-driver-ctr``,
the pod's ``kubectl.kubernetes.io/default-container``). In that container ``nvidia-smi`` is the driver's own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._nvidia_smi import parse

DRIVER_SELECTOR = "app.kubernetes.io/component=nvidia-driver"
DRIVER_CONTAINER = "nvidia-driver-ctr"
DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
COMMAND = ("nvidia-smi", "-q")
SOURCES = ("auto", "driver_pod", "dcgm")


def driver_pods_by_node(pods):
    """{node: pod} of the driver pods (plain dicts as the API serializes them): the Running one of a node when
    there is one, else the newest; pods not bound to a node are left out."""
    out = {}
    for pod in pods or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        running = (pod.get("status") or {}).get("phase") == "Running"
        have = out.get(node)
        if have is None or (running and (have.get("status") or {}).get("phase") != "Running"):
            out[node] = pod
    return out


def driver_container(pod):
    """The container nvidia-smi runs in: the pod's default container, else ``nvidia-driver-ctr``."""
    ann = ((pod.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CONTAINER_ANNOTATION)
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    if ann and ann in names:
        return ann
    return DRIVER_CONTAINER if DRIVER_CONTAINER in names or not names else names[0]


def reading(pod, output=None, error=None, now=None):
    """One node's reading: {pod, state, gpus, licensed_gpus, message, facts}. ``state``: ``licensed`` (every vGPU
    licensed and not expired), ``unlicensed`` (a vGPU is not), ``unknown`` (no driver pod, the exec failed, the
    driver does not answer, or no GPU is listed). ``output``: what the exec printed; ``error``: why it failed."""
    name = ((pod or {}).get("metadata") or {}).get("name")
    if pod is None:
        return dict(pod=None, state="unknown", gpus=0, licensed_gpus=0, facts=None,
                    message="no GPU Operator driver pod (%s) runs on the node" % DRIVER_SELECTOR)
    if error is not None:
        return dict(pod=name, state="unknown", gpus=0, licensed_gpus=0, facts=None,
                    message="nvidia-smi -q in driver pod %s failed: %s" % (name, error))
    facts = parse(output or "", now=now)
    gpus = facts["gpus"]
    licensed = [g for g in gpus if g["licensed"]]
    if not facts["driver_present"]:
        state, message = "unknown", "the driver in pod %s does not answer: %s" % (name, facts["message"])
    elif not gpus:
        state, message = "unknown", "nvidia-smi -q in driver pod %s lists no GPU" % name
    elif len(licensed) == len(gpus):
        state, message = "licensed", "%d of %d vGPU(s) licensed" % (len(licensed), len(gpus))
    else:
        bad = ["%s %s" % (g["pci_bus_id"], g["license_status"] or "no license status") for g in gpus if not g["licensed"]]
        state, message = "unlicensed", "%d of %d vGPU(s) not licensed (%s)" % (
            len(gpus) - len(licensed), len(gpus), "; ".join(bad))
    return dict(pod=name, state=state, gpus=len(gpus), licensed_gpus=len(licensed), facts=facts, message=message)


def dcgm_state(values):
    """What the DCGM exporter's license values of one node say: ``licensed`` (all 1), ``unlicensed``, or
    ``unknown`` (no series)."""
    if not values:
        return "unknown"
    return "licensed" if all(v == 1.0 for v in values) else "unlicensed"


def disagreement(guest, dcgm_values):
    """A sentence when the driver pod's nvidia-smi and the DCGM exporter say different things of one node
    (both known and not the same state), else None."""
    theirs = dcgm_state(dcgm_values)
    if guest["state"] == "unknown" or theirs == "unknown" or guest["state"] == theirs:
        return None
    return "nvidia-smi -q in driver pod %s says %s (%s), the DCGM exporter's license status says %s (%d series: %s)" % (
        guest["pod"], guest["state"], guest["message"], theirs, len(dcgm_values),
        ", ".join("%g" % v for v in dcgm_values))


def use_driver_pods(source, driver_pods):
    """Whether the driver pods are the license source: ``driver_pod``; ``auto`` when the operator runs any
    driver pod (a guest whose driver is baked into its node image has none: the DCGM exporter is then the
    only source); never for ``dcgm``."""
    if source == "driver_pod":
        return True
    return source == "auto" and bool(driver_pods)


def licensed_check(readings, names):
    """pool_ready's licensed step from the driver pods: (done, detail) - every named node's reading licensed."""
    waiting = ["%s: %s" % (n, readings[n]["message"]) for n in names if readings[n]["state"] != "licensed"]
    if waiting:
        return False, "not licensed yet (nvidia-smi -q in the driver pods): %s" % "; ".join(waiting)
    return True, "licensed (nvidia-smi -q in the driver pods): %s" % ", ".join(
        "%s (%d vGPUs)" % (n, readings[n]["gpus"]) for n in names)


__all__ = ["COMMAND", "DRIVER_CONTAINER", "DRIVER_SELECTOR", "SOURCES", "dcgm_state", "disagreement",
           "driver_container", "driver_pods_by_node", "licensed_check", "reading", "use_driver_pods"]
