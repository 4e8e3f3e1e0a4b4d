# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The latency probe's guest objects (ConfigMap, Deployment, Service, ServiceMonitor), for playbooks/observability.yml.

Documented in latency_probe_manifests.yml next to this file; the logic is pure/_latency_probe.py. The
ConfigMap carries pure/_first_token.py as the collection holds it (the first-chunk definition
pool_ready uses), read here from the module's own file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io

from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters


def first_token_source():
    """The text of pure/_first_token.py (its source file, not a compiled one)."""
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _first_token

    path = _first_token.__file__
    if path.endswith((".pyc", ".pyo")):
        path = path[:-1]
    with io.open(path, encoding="utf-8") as handle:
        return handle.read()


def latency_probe_manifests(design, endpoints, program, namespace="monitoring", image="python:3.12-slim",
                            interval_seconds=30, timeout_seconds=30, scrape="annotations"):
    """The probe's objects for ``design`` and ``endpoints`` (pool -> URL or {url, model}); ``program`` the probe's text."""
    # imported here, not with the plugin (see prometheus_rules.py)
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._latency_probe import LatencyProbeError, manifests

    try:
        return manifests(design, endpoints, program, first_token_source(), namespace=namespace, image=image,
                         interval_seconds=interval_seconds, timeout_seconds=timeout_seconds, scrape=scrape)
    except (DesignError, LatencyProbeError) as exc:
        raise AnsibleFilterError("Unable to make the latency probe of the design: %s" % exc)


class FilterModule(object):
    def filters(self):
        return plain_filters({"latency_probe_manifests": latency_probe_manifests})
