# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift audit's reads: each link's live state through the reader of its room, as its judge takes it.

:func:`read_link` returns one link's state as the keywords of that link's judge
(``_audit_scope.JUDGES``): ``esxi`` over ``vsphere/_pool_reader.read_esxi``, ``vsphere`` over
``read_vsphere``, ``vks`` over ``k8s/_guest_reader.read_vks`` (and the VM classes where class
revisions resolve a pool's class), ``guest`` over ``read_guest``, ``licensing`` over the DLS reader,
the kept client token, the guest's nodes and Prometheus (:func:`read_licensing`). It sits in the runner
room because one link (licensing) reads through three client rooms. Errors are the clients' own
(``ClientError``); an error of the kubernetes library that is none is raised as a ``LinkError``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import stat

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit, _audit_licensing, _guest_license
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._errors import ClientError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._reader import read_dls
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._token import read_token
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import LINK_FAILURES, LinkError, k8s_client, read_guest
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._guest_reader import read_vks, _items
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._library import HAS_KUBERNETES
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._license_reader import list_driver_pods, read_node_licenses
from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._node_reader import read_nodes
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError, prom_client
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._pool_reader import read_esxi, read_pool_classes
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._pool_reader import read_vsphere
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._drs_records import read_pinning_records
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._ha_api import read_ha_states

K8S_LINKS = ("vks", "guest", "licensing")


def today():
    """The date the kept token is judged on (UTC)."""
    return datetime.datetime.now(datetime.timezone.utc).date()


def read_cls_token(path):
    """``_audit_licensing.cls_token_state`` of the CLS token file (its metadata only: the content is not read)."""
    try:
        st = os.stat(path)
    except OSError:
        return _audit_licensing.cls_token_state(path, False)
    return _audit_licensing.cls_token_state(path, True, stat.S_ISREG(st.st_mode), st.st_size, stat.S_IMODE(st.st_mode))


def read_licensing(p, derived):
    """The licensing link's live state: the appliance, the kept token, the license series and the GPU nodes."""
    state = dict(dls=read_dls(p) if p["dls_host"] else None, renew_before_days=p["renew_before_days"],
                 metric=p["license_metric"])
    if p.get("cls_token_file"):
        state["cls_token"] = read_cls_token(p["cls_token_file"])
    if p["token_dir"] and p["dls_host"]:
        path = os.path.join(p["token_dir"], "%s.tok" % derived["design"])
        meta, digest = read_token(path)
        token_state, detail = _audit_licensing.token_state(meta, digest, today(), p["renew_before_days"], p["dls_host"],
                                                           p["dls_port"])
        state["token"] = dict(path=path, state=token_state, detail=detail)
    if p["kubeconfig"]:
        k8s = k8s_client(p["kubeconfig"], p["context"], p["request_timeout"])
        nodes = read_nodes(k8s, _items)
        state["gpu_nodes"] = _audit_licensing.gpu_node_names(derived, nodes)
        source = p.get("license_source") or "auto"
        if source != "dcgm":
            namespace = _audit.role_inputs(derived, "gpu_operator").get("gpu_operator_namespace") or "gpu-operator"
            try:
                pods = list_driver_pods(k8s, namespace)
            except K8sError as exc:
                raise LinkError("could not read the GPU Operator driver pods in namespace %s: %s" % (namespace, exc))
            if _guest_license.use_driver_pods(source, pods):
                state["guest_licenses"] = read_node_licenses(k8s, namespace, state["gpu_nodes"], pods=pods)
    if p["prometheus_url"]:
        prom = prom_client(p, p["request_timeout"])
        try:
            state["license_series"] = prom.query(p["license_metric"])
        except PromError as exc:
            raise LinkError("could not read the license status from Prometheus %s: %s" % (p["prometheus_url"], exc))
    else:
        state["how_to_check"] = "no prometheus_url given"
    return state


def _read_link(module, link, derived):
    p = module.params
    if link == "esxi":
        hosts, drs = read_esxi(module.client(), rest=module.open_rest_session)
        ha = read_ha_states(module.client()) if _audit.role_inputs(derived, "ha_gpu_restart").get("ha_gpu_restart_clusters") else None
        return dict(hosts=hosts, drs=drs, records=read_pinning_records(module.client()), ha=ha)
    if link == "vsphere":
        return read_vsphere(module, derived)
    if link == "licensing":
        if p["kubeconfig"] and not HAS_KUBERNETES:
            raise Failure("The kubernetes Python library is required for the GPU nodes of the licensing link")
        return read_licensing(p, derived)
    if not HAS_KUBERNETES:
        raise Failure("The kubernetes Python library is required for the %s link" % link)
    if link == "vks":
        supervisor = dict(kubeconfig=p["supervisor_kubeconfig"], context=p["supervisor_context"],
                          request_timeout=p["request_timeout"])
        return dict(clusters=read_vks(supervisor, derived), vm_classes=read_pool_classes(module, derived))
    return read_guest(k8s_client(p["kubeconfig"], p["context"], p["request_timeout"]), derived)


def read_link(module, link, derived):
    """The live state of ``link`` as its judge takes it (keywords), read through ``module`` (a
    ``VsphereModule``: its sessions and options)."""
    try:
        return _read_link(module, link, derived)
    except (ClientError, Failure):
        raise
    except LINK_FAILURES as exc:  # kubeconfig, API and socket errors of the kubernetes client; a bug goes on
        if link in K8S_LINKS:
            raise LinkError("%s: %s" % (type(exc).__name__, exc))
        raise


__all__ = ["K8S_LINKS", "read_cls_token", "read_licensing", "read_link", "today"]
