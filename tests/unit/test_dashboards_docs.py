"""docs/gpu-metrics.md names every dashboard the example design gets, with each panel and its expressions as generated."""
import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _dashboards
from tests.lib.paths import ROOT


def test_docs_list_every_panel_with_its_expressions():
    text = (ROOT / "docs" / "gpu-metrics.md").read_text()
    section = text.split("### The example design's dashboards", 1)[1]
    boards = _dashboards.dashboards(yaml.safe_load((ROOT / "examples" / "design.yml").read_text()))
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("**Dashboard `")]
    assert listed == [b["uid"] for b in boards]
    for board in boards:
        body = section.split("**Dashboard `%s`**" % board["uid"], 1)[1].split("**Dashboard", 1)[0]
        titles = [line.split("`")[1] for line in body.splitlines() if line.startswith("- `")]
        assert titles == [p["title"] for p in board["panels"]], board["uid"]
        for panel in board["panels"]:
            block = body.split("- `%s`" % panel["title"], 1)[1].split("\n- `", 1)[0]
            assert "unit `%s`" % panel["unit"] in block.splitlines()[0], panel["title"]
            for value, colour in panel["thresholds"]:
                assert "%s from %g" % (colour, value) in block.splitlines()[0], panel["title"]
            for target in panel["targets"]:
                assert "  %s\n" % target["expr"] in block, (board["uid"], panel["title"])
