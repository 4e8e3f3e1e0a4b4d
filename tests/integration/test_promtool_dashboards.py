"""Every PromQL expression of the generated Grafana dashboards parses in Prometheus's own promtool
(built from the rig's pinned Prometheus module into .sim/bin/promtool): the expressions of the
example design's and a second design's dashboards become recording rules of one file that
`promtool check rules` reads; the same file with one expression broken is refused."""
import json

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _dashboards
from tests.integration.test_promtool_rules import DESIGNS, promtool


def write_panel_rules(tmp_path, design, broken=False):
    exprs = _dashboards.expressions(_dashboards.dashboards(yaml.safe_load(DESIGNS[design].read_text())))
    rules = [{"record": "gpupool_dashboard_panel:expr_%d" % i, "expr": expr,
              "labels": {"dashboard": uid, "panel": title}} for i, (uid, title, expr) in enumerate(exprs)]
    if broken:
        rules[0]["expr"] += " by"
    path = tmp_path / ("%s-panels.yml" % design)
    path.write_text(yaml.safe_dump(json.loads(json.dumps({"groups": [{"name": "panels", "rules": rules}]})),
                                   sort_keys=False, width=100000))
    return rules, path


def test_promtool_parses_every_panel_expression(tmp_path):
    for design in DESIGNS:
        rules, path = write_panel_rules(tmp_path, design)
        out = promtool("check", "rules", str(path))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "SUCCESS: %d rules found" % len(rules) in out.stdout, out.stdout
        assert len(rules) >= 9 + 8 * 2, len(rules)


def test_promtool_refuses_a_broken_panel_expression(tmp_path):
    _rules, path = write_panel_rules(tmp_path, "example", broken=True)
    out = promtool("check", "rules", str(path))
    assert out.returncode != 0 and "parse error" in (out.stdout + out.stderr).lower(), out.stdout + out.stderr
