"""The helpers of tests/lib/helpers.py (``rest``, ``prom``, ``wait``) live there alone: no test file, benchmark or
tool holds a function whose body is the same as one of them (compared as syntax trees, docstrings and names
aside), so a fix to a helper reaches every caller."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "lib" / "helpers.py"


def bodies(source):
    """{function name: its body as a syntax tree dump (docstring left out)} of every function in ``source``."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            out.setdefault(node.name, ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=False))
    return out


def copies(source, shared):
    """The functions of ``source`` whose body is one of ``shared`` ({name: body}), as ``name (copy of helper)``."""
    by_body = dict((body, name) for name, body in shared.items())
    return sorted("%s (copy of %s)" % (name, by_body[body]) for name, body in bodies(source).items() if body in by_body)


def test_no_test_file_holds_a_copy_of_a_shared_helper():
    shared = bodies(HELPERS.read_text())
    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == HELPERS or "sim" in path.relative_to(ROOT).parts[:2]:
            continue
        bad = copies(path.read_text(encoding="utf-8"), shared)
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    assert found == {}, "use tests/lib/helpers.py instead of a copy: %s" % found


def test_the_rule_can_fail():
    shared = bodies(HELPERS.read_text())
    copied = HELPERS.read_text().split("def rest(sim):", 1)[1].split("\n\n\n", 1)[0]
    source = "import sys\n\n\ndef vsphere_rest(sim):\n    '''another docstring'''" + copied.split('"""', 2)[2] + "\n"
    assert copies(source, shared) == ["vsphere_rest (copy of rest)"]
    assert copies("def rest(sim):\n    return sim.client()\n", shared) == []
