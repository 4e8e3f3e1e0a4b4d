"""A reference to a section of a guide names a heading the guide has.

The project's files point readers to a guide's section in three ways: ``docs/x.md, "Section"``,
``"Section" in docs/x.md`` (or ``of``), and ``see docs/x.md``. Each must name a guide that exists and, where a
section is named, a heading of that guide (any level), so a renamed heading cannot leave a dead pointer.
"""
import re

import pytest

from tests.lib.paths import ROOT

GUIDE = r"docs/(?P<guide>[a-z0-9-]+)\.md"
SECTION = r'"(?P<section>[^"\n]{3,80})"'
PATTERNS = (re.compile(GUIDE + r",? (?:section )?" + SECTION),
            re.compile(SECTION + r" (?:in|of) " + GUIDE),
            re.compile(r"section " + SECTION + r" of " + GUIDE))
BARE = re.compile(r"\b" + GUIDE + r"\b")
SOURCES = ("docs", "plugins", "roles", "playbooks", "README.md")
SUFFIXES = (".md", ".py", ".yml", ".yaml", ".j2")


def sources():
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES)
        for file in files:
            yield file, file.read_text(encoding="utf-8")


def headings(guide):
    text = (ROOT / "docs" / ("%s.md" % guide)).read_text(encoding="utf-8")
    return set(m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", text, re.M))


def references():
    found = []
    for file, text in sources():
        flat = re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)  # a reference may wrap across lines (and comment lines)
        for pattern in PATTERNS:
            for match in pattern.finditer(flat):
                found.append((file.relative_to(ROOT).as_posix(), match.group("guide"), match.group("section")))
    return found


def test_there_are_section_references_to_check():
    # the patterns find the project's references (a pattern that matched nothing would check nothing)
    assert len(references()) >= 5


@pytest.mark.parametrize("where, guide, section", references())
def test_a_section_reference_names_a_heading_of_its_guide(where, guide, section):
    assert (ROOT / "docs" / ("%s.md" % guide)).exists(), "%s points to docs/%s.md, which does not exist" % (where, guide)
    assert section in headings(guide), "%s points to section %r of docs/%s.md, which has no such heading" % (
        where, section, guide)


def test_every_guide_named_exists():
    missing = sorted(set((file.relative_to(ROOT).as_posix(), m.group("guide"))
                         for file, text in sources() for m in BARE.finditer(text)
                         if not (ROOT / "docs" / ("%s.md" % m.group("guide"))).exists()))
    assert not missing, missing
