"""prometheus_rules: the rule file or PrometheusRule of a design for playbooks/observability.yml; bad input fails the task."""
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpupool.vcf.plugins.filter.prometheus_rules import FilterModule, prometheus_rules
from ansible_collections.gpupool.vcf.plugins.module_utils.pure._prom_rules import rule_file
from tests.lib.paths import ROOT

DESIGN = yaml.safe_load((ROOT / "examples" / "design.yml").read_text())


def test_file_and_object():
    assert FilterModule().filters()["prometheus_rules"].__wrapped__ is prometheus_rules
    assert prometheus_rules(DESIGN) == rule_file(DESIGN)
    obj = prometheus_rules(DESIGN, kind="PrometheusRule", name="r", namespace="mon")
    assert obj["kind"] == "PrometheusRule" and obj["metadata"]["namespace"] == "mon"


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "ConfigMap"}, "neither file nor PrometheusRule"),
    ({"options": {"slo_for": "soon"}}, "Unable to make the Prometheus rules.*slo_for"),
])
def test_bad_input_fails(kwargs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        prometheus_rules(DESIGN, **kwargs)


def test_invalid_design_fails():
    with pytest.raises(AnsibleFilterError, match="Unable to make the Prometheus rules.*error"):
        prometheus_rules({"version": 1, "name": "x"})
