# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restart a guest node's device plugin and wait for the count it advertises (client layer: knows nothing of Ansible).

The GPU Operator runs the device plugin as the DaemonSet ``nvidia-device-plugin-daemonset``: its pod on a
node is the one with the label ``app=nvidia-device-plugin-daemonset`` bound to that node. Deleting it makes
the DaemonSet start a new one, which reads the sharing configuration again. Which nodes to restart, and in
which order, is decided by ``pure._device_plugin_restart``. Every call goes through the fault boundary of
``_k8s.K8sClient``; every failure is a ``DevicePluginError`` naming the node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sClient, K8sError, api_path
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._device_plugin_restart import RESOURCE, advertised, wait_failure

POD_SELECTOR = "app=nvidia-device-plugin-daemonset"
WAIT_TIMEOUT = 300
POLL = 2.0


class DevicePluginError(K8sError):
    """A restart or its wait failed; the message names the node."""


class DevicePluginApi(object):
    """The device plugin pods of the GPU Operator's namespace and the nodes they advertise on."""

    def __init__(self, namespace, params=None, k8s=None, sleep=time.sleep, clock=time.monotonic, poll=POLL):
        self.namespace = namespace
        self.k8s = k8s if k8s is not None else K8sClient(params)
        self.sleep = sleep
        self.clock = clock
        self.poll = poll

    def plugin_pods(self, node):
        """Names of the device plugin pods bound to `node`."""
        try:
            got = self.k8s.items(api_path("v1", "pods", self.namespace), label_selector=POD_SELECTOR,
                                 field_selector="spec.nodeName=%s" % node)
        except K8sError as exc:
            raise DevicePluginError("%s: cannot list its device plugin pods in %s: %s" % (node, self.namespace, exc))
        return [((p.get("metadata") or {}).get("name")) for p in got]

    def restart(self, node):
        """Delete the node's device plugin pod(s) (the DaemonSet starts new ones); the names deleted.

        A node without one fails: nothing would read the new configuration there.
        """
        names = self.plugin_pods(node)
        if not names:
            raise DevicePluginError("%s: no device plugin pod (%s) in namespace %s on this node"
                                    % (node, POD_SELECTOR, self.namespace))
        for name in names:
            try:
                self.k8s.request("DELETE", api_path("v1", "pods", self.namespace, name))
            except K8sError as exc:
                if exc.status != 404:
                    raise DevicePluginError("%s: cannot delete its device plugin pod %s: %s" % (node, name, exc))
        return names

    def read_node(self, node):
        try:
            return self.k8s.request("GET", api_path("v1", "nodes", name=node))
        except K8sError as exc:
            raise DevicePluginError("%s: cannot read the node: %s" % (node, exc))

    def wait_advertised(self, node, want, resource=RESOURCE, timeout=WAIT_TIMEOUT):
        """Poll the node until its allocatable `resource` is `want`; the seconds it took.

        Past `timeout` seconds: DevicePluginError naming the node and what it advertises.
        """
        start = self.clock()
        end = start + timeout
        while True:
            obj = self.read_node(node)
            if advertised(obj, resource) == want:
                return self.clock() - start
            if self.clock() >= end:
                raise DevicePluginError("%s (waited %d s)" % (wait_failure(node, obj, want, resource), timeout))
            self.sleep(max(0, min(self.poll, end - self.clock())))
