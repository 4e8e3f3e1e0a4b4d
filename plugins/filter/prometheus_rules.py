# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus rule file (or PrometheusRule) of a pool design, for playbooks/observability.yml.

Documented in prometheus_rules.yml next to this file; the logic is pure/_prom_rules.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters


def prometheus_rules(design, kind="file", name="gpupool-rules", namespace="monitoring", options=None):
    """The rules of ``design``: a rule file (``kind=file``) or a PrometheusRule (``kind=PrometheusRule``)."""
    # imported here, not with the plugin: every task that uses any of the collection's filters loads every filter
    # file, and the design's code takes a tenth of a second to import
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._prom_rules import RulesError, prometheus_rule, rule_file

    try:
        if kind == "file":
            return rule_file(design, options)
        if kind == "PrometheusRule":
            return prometheus_rule(design, name=name, namespace=namespace, options=options)
    except (DesignError, RulesError) as exc:
        raise AnsibleFilterError("Unable to make the Prometheus rules of the design: %s" % exc)
    raise AnsibleFilterError("kind %r is neither file nor PrometheusRule" % (kind,))


class FilterModule(object):
    def filters(self):
        return plain_filters({"prometheus_rules": prometheus_rules})
