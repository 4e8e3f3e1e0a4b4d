"""A fast pep8 / pyflakes-style pass over plugins/ and tests/ (the everyday ``make check``; the full
pep8 and pylint run in ``make sanity``): lines of at most 160 characters, no trailing whitespace,
no tab indentation, one newline at the end of the file, and no import the file never uses."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINE = 160
FILES = sorted(p for folder in ("plugins", "tests") for p in (ROOT / folder).rglob("*.py")
               if "output" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts)


def layout_problems(text):
    """pep8-style problems of one file's text, as ``line: what``."""
    out = []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_LINE:
            out.append("%d: line of %d characters (at most %d)" % (number, len(line), MAX_LINE))
        if line != line.rstrip():
            out.append("%d: trailing whitespace" % number)
        if re.match(r" *\t", line):
            out.append("%d: tab in the indentation" % number)
    if text and not text.endswith("\n"):
        out.append("%d: no newline at the end of the file" % len(lines))
    elif text.endswith("\n\n"):
        out.append("%d: blank line at the end of the file" % (len(lines) - 1))
    return out


def unused_imports(text):
    """pyflakes-style: names a file imports and never uses (``__future__``, ``__all__`` and ``# noqa`` lines aside)."""
    tree = ast.parse(text)
    lines = text.split("\n")
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            if "noqa" in lines[node.lineno - 1] or "noqa" in lines[getattr(node, "end_lineno", node.lineno) - 1]:
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                name = alias.asname or alias.name.split(".")[0]
                imported.setdefault(name, node.lineno)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            base = node
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                used.add(base.id)
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                exported.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return ["%d: %s imported and never used" % (line, name) for name, line in sorted(imported.items(), key=lambda kv: kv[1])
            if name not in used and name not in exported]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_style(path):
    text = path.read_text(encoding="utf-8")
    problems = layout_problems(text)
    if path.name != "__init__.py":
        problems += unused_imports(text)
    assert problems == []


def test_the_checks_find_what_they_look_for():
    assert layout_problems("x = 1  \n\tpass\n" + "y" * 161 + "\nz = 2") == [
        "1: trailing whitespace", "2: tab in the indentation", "3: line of 161 characters (at most 160)",
        "4: no newline at the end of the file"]
    assert layout_problems("x = 1\n\n") == ["2: blank line at the end of the file"]
    assert unused_imports("import os\nimport sys\nfrom a import b as c\nimport d.e\nsys.exit(d.e)\n") == [
        "1: os imported and never used", "3: c imported and never used"]
    assert unused_imports("from __future__ import annotations\nimport os  # noqa: F401\n__all__ = ['x']\nfrom m import x\n") == []
