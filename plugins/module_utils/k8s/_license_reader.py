# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU nodes' license state from the guest (client layer: knows nothing of Ansible): ``nvidia-smi -q`` run
in each node's GPU Operator driver pod through the pod exec API (``pods/exec``, a WebSocket stream), its output
judged by ``pure._guest_license.reading``. The list of driver pods goes by path through the fault boundary of
``_k8s.K8sClient``; each exec is one request of its own (a read: nvidia-smi -q changes nothing, so a failed
one is retried as a read is)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError, api_path
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _guest_license as gl


def list_driver_pods(k8s, namespace):
    """The driver pods of the operator's namespace as plain dicts (one list by path: no typed API class, which
    only the exec needs)."""
    return k8s.items(api_path("v1", "pods", namespace), label_selector=gl.DRIVER_SELECTOR)


def _exec(k8s, pod, container, command):
    """(stdout, error or None) of ``command`` in ``pod``'s ``container``; a non-zero exit is an error that carries
    what the command printed."""
    from kubernetes import client
    from kubernetes.stream import stream
    core = client.CoreV1Api(k8s.api)
    meta = pod["metadata"]
    ws = stream(core.connect_get_namespaced_pod_exec, meta["name"], meta["namespace"], command=list(command),
                container=container, stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False,
                _request_timeout=k8s.timeout)
    try:
        ws.run_forever(timeout=k8s.timeout)
        out, err = ws.read_stdout() or "", ws.read_stderr() or ""
        rc = ws.returncode
    finally:
        ws.close()
    if rc not in (0, None):
        text = (err or out).strip().splitlines()
        return out, "exit %s%s" % (rc, ": %s" % text[0][:300] if text else "")
    return out, None


def read_node_licenses(k8s, namespace, node_names, pods=None, now=None):
    """{node: reading} (``pure._guest_license.reading``) of each named node, from the driver pods of
    ``namespace`` (``pods``: already listed). An exec that fails is that node's ``unknown`` reading naming why;
    a failure to list the pods is the caller's (K8sError)."""
    if pods is None:
        pods = list_driver_pods(k8s, namespace)
    by_node = gl.driver_pods_by_node(pods)
    out = {}
    for name in node_names:
        pod = by_node.get(name)
        if pod is None:
            out[name] = gl.reading(None)
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running":
            out[name] = gl.reading(pod, error="the pod is %s, not Running" % (phase or "without a phase"))
            continue
        try:
            text, error = k8s.call(_exec, k8s, pod, gl.driver_container(pod), gl.COMMAND)
        except K8sError as exc:
            text, error = None, str(exc)
        out[name] = gl.reading(pod, output=text, error=error, now=now)
    return out


__all__ = ["list_driver_pods", "read_node_licenses"]
