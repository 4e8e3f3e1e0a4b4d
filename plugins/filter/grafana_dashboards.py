# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Grafana dashboards of a pool design, for playbooks/observability.yml.

Documented in grafana_dashboards.yml next to this file. What the dashboards hold is pure data
(pure/_dashboards.py); this filter builds Grafana's dashboard JSON from it with the Grafana
Foundation SDK (grafana-foundation-sdk), a controller-side library: filters run on the
controller, so the SDK is never needed on a managed node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from types import SimpleNamespace

from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.plugin_utils._plain import plain_filters

DATASOURCE = "datasource"
WIDTH = {"timeseries": 12, "stat": 6}
HEIGHT = {"timeseries": 8, "stat": 5}


def _sdk():
    """The Grafana Foundation SDK's builders and models, imported on first use, not with the plugin: every task that
    uses any of the collection's filters loads every filter file (see prometheus_rules.py)."""
    from grafana_foundation_sdk.builders import common as gcommon
    from grafana_foundation_sdk.builders import dashboard as gdash
    from grafana_foundation_sdk.builders import prometheus as gprom
    from grafana_foundation_sdk.builders import stat as gstat
    from grafana_foundation_sdk.builders import timeseries as gts
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common as mcommon
    from grafana_foundation_sdk.models import dashboard as mdash
    return SimpleNamespace(gcommon=gcommon, gdash=gdash, gprom=gprom, gstat=gstat, gts=gts, JSONEncoder=JSONEncoder,
                           mcommon=mcommon, mdash=mdash)


def _thresholds(sdk, panel):
    steps = [sdk.mdash.Threshold(value=None, color=panel["base"])]
    steps.extend(sdk.mdash.Threshold(value=value, color=colour) for value, colour in panel["thresholds"])
    return sdk.gdash.ThresholdsConfig().mode(sdk.mdash.ThresholdsMode.ABSOLUTE).steps(steps)


def _panel(sdk, panel, ref):
    kind = panel["kind"]
    builder = sdk.gts.Panel() if kind == "timeseries" else sdk.gstat.Panel()
    builder = (builder.title(panel["title"]).description(panel["description"]).unit(panel["unit"])
               .datasource(sdk.mdash.DataSourceRef(type_val="prometheus", uid="${%s}" % DATASOURCE))
               .thresholds(_thresholds(sdk, panel)).span(WIDTH[kind]).height(HEIGHT[kind]))
    if panel["max"] is not None:
        builder = builder.min(0).max(panel["max"])
    if kind == "timeseries":
        builder = builder.line_width(1).fill_opacity(10)
    if kind == "timeseries" and panel["thresholds"]:
        style = sdk.gcommon.GraphThresholdsStyleConfig().mode(sdk.mcommon.GraphThresholdsStyleMode.LINE)
        builder = builder.thresholds_style(style)
    for index, target in enumerate(panel["targets"]):
        builder = builder.with_target(sdk.gprom.Dataquery().expr(target["expr"]).legend_format(target["legend"])
                                      .ref_id("%s%d" % (ref, index)))
    return builder


def dashboard_json(board):
    """Grafana's JSON model (a dict) of one dashboard of ``pure/_dashboards.dashboards``."""
    try:
        sdk = _sdk()
    except ImportError as exc:  # pragma: no cover - the message says what to install
        raise AnsibleFilterError("grafana_dashboards needs the Python library grafana-foundation-sdk on the controller "
                                 "(pip install -r requirements.txt): %s" % exc)
    builder = (sdk.gdash.Dashboard(board["title"]).uid(board["uid"]).tags(board["tags"]).editable()
               .time("now-6h", "now")
               .refresh("1m").timezone("browser")
               .with_variable(sdk.gdash.DatasourceVariable(DATASOURCE).label("Prometheus").type("prometheus")))
    for index, panel in enumerate(board["panels"]):
        builder = builder.with_panel(_panel(sdk, panel, "P%dT" % index))
    return json.loads(json.dumps(builder.build(), cls=sdk.JSONEncoder))


def grafana_dashboards(design, kind="json", namespace="monitoring", label="grafana_dashboard", label_value="1",
                       options=None):
    """The design's dashboards: Grafana JSON models (``kind=json``) or the sidecar's ConfigMaps (``kind=ConfigMap``)."""
    # imported here, not with the plugin (see _sdk)
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._dashboards import config_map, dashboards
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._design_findings import DesignError
    from ansible_collections.gpupool.vcf.plugins.module_utils.pure._prom_rules import RulesError

    if kind not in ("json", "ConfigMap"):
        raise AnsibleFilterError("kind %r is neither json nor ConfigMap" % (kind,))
    try:
        boards = dashboards(design, options)
        models = [dashboard_json(b) for b in boards]
        if kind == "json":
            return models
        return [config_map(b, json.dumps(m, indent=2, sort_keys=True), namespace=namespace, label=label,
                           label_value=label_value) for b, m in zip(boards, models)]
    except (DesignError, RulesError) as exc:
        raise AnsibleFilterError("Unable to make the Grafana dashboards of the design: %s" % exc)


class FilterModule(object):
    def filters(self):
        return plain_filters({"grafana_dashboards": grafana_dashboards})
