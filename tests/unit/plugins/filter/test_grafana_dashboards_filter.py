"""grafana_dashboards: Grafana's dashboard JSON built with the Grafana Foundation SDK, validated by the
SDK's own typed models (Grafana publishes its dashboard schema in CUE, not as a JSON schema the SDK
ships, so the check is the round trip: the JSON parses into the SDK's Dashboard, panel and
Prometheus query models and serializes back unchanged), laid out on Grafana's 24-column grid, and
as ConfigMaps for Grafana's dashboard sidecar; bad input fails the task."""
import json

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as mdash
from grafana_foundation_sdk.models import prometheus as mprom

from ansible_collections.gpupool.vcf.plugins.filter.grafana_dashboards import FilterModule, grafana_dashboards
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._dashboards import dashboards
from tests.lib.paths import ROOT

DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def encoded(model):
    return json.loads(json.dumps(model, cls=JSONEncoder))


def test_the_sdk_models_read_every_dashboard_back_unchanged():
    plugins.register_default_plugins()  # the panel and query types the models decode into
    models = grafana_dashboards(DESIGN)
    assert FilterModule().filters()["grafana_dashboards"].__wrapped__ is grafana_dashboards
    assert [m["uid"] for m in models] == [b["uid"] for b in dashboards(DESIGN)]
    for model in models:
        parsed = mdash.Dashboard.from_json(model)
        assert encoded(parsed) == model, model["uid"]
        assert model["templating"]["list"][0]["type"] == "datasource"
        for panel in parsed.panels:
            assert isinstance(panel, mdash.Panel) and panel.type_val in ("timeseries", "stat")
            assert panel.datasource.uid == "${datasource}"
            for target in panel.targets:
                assert isinstance(target, mprom.Dataquery), type(target)
                assert target.expr


def test_the_round_trip_is_a_real_check():
    """A field the model does not know is lost on the way back, so the comparison would fail."""
    model = grafana_dashboards(DESIGN)[0]
    model["panels"][0]["no_such_field"] = 1
    assert encoded(mdash.Dashboard.from_json(model)) != model


def test_panels_fill_the_grid_without_overlap():
    for model in grafana_dashboards(DESIGN):
        cells = set()
        for panel in model["panels"]:
            pos = panel["gridPos"]
            assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, (model["uid"], panel["title"])
            mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
            assert not cells & mine, (model["uid"], panel["title"])
            cells |= mine
        refs = [t["refId"] for p in model["panels"] for t in p["targets"]]
        assert len(refs) == len(set(refs))


def test_thresholds_and_units_reach_grafana():
    training = [m for m in grafana_dashboards(DESIGN) if m["uid"] == "gpupool-lab-gpupool-training"][0]
    wait = training["panels"][0]["fieldConfig"]["defaults"]
    assert wait["unit"] == "s" and wait["thresholds"]["steps"] == [{"value": None, "color": "green"},
                                                                   {"value": 3600.0, "color": "red"}]
    assert training["panels"][0]["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] == {"mode": "line"}


def test_config_maps_carry_the_same_json():
    models = grafana_dashboards(DESIGN)
    maps = grafana_dashboards(DESIGN, kind="ConfigMap", namespace="grafana", label="grafana_dashboard", label_value="1")
    assert len(maps) == len(models)
    for model, cm in zip(models, maps):
        assert cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == "grafana"
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpupool.vcf"
        assert json.loads(cm["data"]["%s.json" % model["uid"]]) == model


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "files"}, "neither json nor ConfigMap"),
    ({"options": {"knees": {"inference": 2}}}, "Unable to make the Grafana dashboards.*knees.inference"),
    ({"kind": "ConfigMap", "namespace": "Bad"}, "Unable to make the Grafana dashboards.*namespace"),
])
def test_bad_input_fails(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        grafana_dashboards(DESIGN, **kwargs)


def test_a_bad_design_fails():
    bad = dict(DESIGN, pools=[dict(DESIGN["pools"][0], priority="no-such-class")] + DESIGN["pools"][1:])
    with pytest.raises(AnsibleFilterError, match="Unable to make the Grafana dashboards of the design"):
        grafana_dashboards(bad)
