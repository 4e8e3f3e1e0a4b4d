"""Every changelog fragment parses as YAML and holds only lists of strings under antsibull-changelog's sections,
so a broken fragment fails the everyday unit run instead of the sanity stage at the end of ``make test``."""
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FRAGMENTS = sorted((ROOT / "changelogs" / "fragments").glob("*.y*ml"))
CONFIG = yaml.safe_load((ROOT / "changelogs" / "config.yaml").read_text())
# the configured sections, and the trivial one antsibull-changelog accepts and leaves out of the changelog
SECTIONS = {section[0] for section in CONFIG["sections"]} | {CONFIG.get("trivial_section_name", "trivial")}


@pytest.mark.parametrize("path", FRAGMENTS, ids=[p.name for p in FRAGMENTS])
def test_fragment_is_yaml_with_known_sections_of_strings(path):
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict) and data, "%s: not a mapping of sections" % path.name
    assert set(data) <= SECTIONS | {"release_summary"}, "%s: unknown sections %s" % (path.name, set(data) - SECTIONS)
    for section, entries in data.items():
        if section == "release_summary":
            assert isinstance(entries, str)
            continue
        assert isinstance(entries, list) and all(isinstance(e, str) and e.strip() for e in entries), (path.name, section)
