# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small reads of a guest cluster for the modules that need one list and no more (client layer: knows
nothing of Ansible): the nodes as plain data (the audit's guest and licensing links), the Pending pods and the Kueue
queues (gpu_capacity), the CustomResourceDefinitions (preflight's guest link). Each goes through the fault
boundary of ``_k8s.K8sClient``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError, api_path


def node_record(node):
    """{name, labels, taints, capacity, allocatable} of a node as the API server writes it (a taint without a
    value has value None)."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    return dict(name=meta.get("name"), labels=dict(meta.get("labels") or {}),
                taints=[dict(key=t.get("key"), value=t.get("value"), effect=t.get("effect"))
                        for t in (node.get("spec") or {}).get("taints") or []],
                capacity=dict(status.get("capacity") or {}), allocatable=dict(status.get("allocatable") or {}))


def read_nodes(k8s, read):
    """``node_record`` of every node; ``read(k8s, what, path)`` is the caller's list by path (the audit's
    ``_items`` raises its LinkError naming what could not be read)."""
    return [node_record(n) for n in read(k8s, "the nodes", api_path("v1", "nodes"))]


def read_pending(k8s, kueue_group, kueue_versions, doing=None):
    """{pods: [Pending pods as dicts], kueue: {workloads, local_queues} or None} of a guest cluster; the
    first Kueue version the API serves is read (404 on every version is no Kueue). ``doing(verb, what)`` is
    the caller's context for each step (the runner names the failing one)."""
    doing = doing or (lambda verb, what: contextlib.nullcontext())
    with doing("list", "the Pending pods of the guest cluster"):
        pods = k8s.items(api_path("v1", "pods"), field_selector="status.phase=Pending")
    kueue = None
    for version in kueue_versions:
        group_version = "%s/%s" % (kueue_group, version)
        try:
            with doing("list", "the Kueue Workloads of the guest cluster"):
                workloads = k8s.items(api_path(group_version, "workloads"))
        except K8sError as exc:
            if exc.status == 404:
                continue
            raise
        with doing("list", "the Kueue LocalQueues of the guest cluster"):
            queues = k8s.items(api_path(group_version, "localqueues"))
        kueue = dict(workloads=workloads, local_queues=queues)
        break
    return dict(pods=pods, kueue=kueue)


def read_crd_names(params):
    """{crds: [names]} of the guest cluster of ``params`` (kubeconfig, context, request_timeout), or {error}."""
    try:
        k8s = K8sClient(dict(kubeconfig=params["kubeconfig"], context=params["context"]), params["request_timeout"])
        crds = k8s.items(api_path("apiextensions.k8s.io/v1", "customresourcedefinitions"))
    except K8sError as exc:
        return dict(error=str(exc))
    return dict(crds=sorted(c["metadata"]["name"] for c in crds))


def list_nodes(k8s, label_selector=None):
    """The nodes (of `label_selector`, a label selector string) as plain dicts."""
    return k8s.items(api_path("v1", "nodes"), label_selector=label_selector or None)
