"""docs/gpu-metrics.md names every rule and alert the example design gets, with its expression as generated."""
import re

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _prom_rules
from tests.lib.paths import ROOT


def test_docs_list_every_rule_with_its_expression():
    text = (ROOT / "docs" / "gpu-metrics.md").read_text()
    section = text.split("### The example design's rules", 1)[1]
    rules = _prom_rules.rule_file(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
    for group in rules["groups"]:
        assert "**Group `%s`**" % group["name"] in section
        body = section.split("**Group `%s`**" % group["name"], 1)[1].split("**Group", 1)[0]
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            assert "- `%s`" % name in body, name
            assert "  %s\n" % rule["expr"] in body, name
    table = text.split("## Recording rules and alerts", 1)[1].split("### The example design's rules", 1)[0]
    for _group, name in _prom_rules.rule_names(rules):
        # the wait percentiles are the design's (slo.percentile); the latency probe's p99 is fixed
        fixed = name in _prom_rules.LATENCY_P99.values()
        assert "`%s`" % (name if fixed else re.sub(r":p[0-9_]+$", ":p<percentile>", name)) in table, name
    assert "client token expiring" in table
