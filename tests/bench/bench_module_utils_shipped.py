"""Benchmark: the module_utils files and lines that each module ships.

Ansible packs a module with every collection module_utils file it imports, directly or through
another module_utils file, found by reading the import statements (anywhere in the file, a
function body included) without running them. This script follows the same walk with ``ast``
for every file in plugins/modules and prints, per module, the module_utils files and lines it
ships (the package ``__init__.py`` files included, as Ansible packs them), largest first, then
the totals. Lines are physical lines, as ``wc -l`` counts them.

    python tests/bench/bench_module_utils_shipped.py [--files MODULE] [--root PATH]
"""
import argparse
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREFIX = ("ansible_collections", "gpupool", "vcf", "plugins", "module_utils")


def _candidates(parts):
    """The dotted names below module_utils that an import of ``parts`` may mean: the name itself and,
    for ``from a.b import c``, each parent (c may be a function of a.b)."""
    if tuple(parts[:len(PREFIX)]) != PREFIX:
        return []
    rest = list(parts[len(PREFIX):])
    return [rest[:n] for n in range(len(rest), -1, -1)]


def _resolve(utils_dir, rest):
    """The files that importing module_utils.<rest> loads: every package __init__.py on the way and the
    module itself; None when no such file exists."""
    target = utils_dir.joinpath(*rest) if rest else utils_dir
    if target.with_suffix(".py").is_file() and rest:
        leaf = target.with_suffix(".py")
    elif (target / "__init__.py").is_file():
        leaf = target / "__init__.py"
    else:
        return None
    files = [utils_dir.joinpath(*rest[:n]) / "__init__.py" for n in range(len(rest))]
    return [f for f in files if f.is_file()] + [leaf]


def imported_names(source, package=None):
    """The dotted names (lists of parts) that the import statements of ``source`` reach; ``from x import a``
    gives x.a (a module or a name in x). ``package`` (parts) resolves relative imports."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend(alias.name.split(".") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    continue
                base = list(package[:len(package) - (node.level - 1)]) if node.level > 1 else list(package)
            else:
                base = []
            base += node.module.split(".") if node.module else []
            out.append(base)
            out.extend(base + [alias.name] for alias in node.names if alias.name != "*")
    return out


def shipped(module_file, utils_dir):
    """The set of module_utils files (paths) that a module ships, found transitively."""
    seen = set()
    todo = [(pathlib.Path(module_file), None)]
    while todo:
        path, package = todo.pop()
        for parts in imported_names(path.read_text(), package):
            for rest in _candidates(parts):
                files = _resolve(utils_dir, rest)
                if files is None:
                    continue
                for f in files:
                    if f not in seen:
                        seen.add(f)
                        inner = list(PREFIX) + list(f.relative_to(utils_dir).parent.parts)
                        todo.append((f, inner))
                break
    return seen


def count_lines(path):
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def figures(root):
    """(module name, files, lines) for every module below root/plugins/modules, most lines first."""
    root = pathlib.Path(root)
    utils_dir = root / "plugins" / "module_utils"
    rows = []
    for module in sorted((root / "plugins" / "modules").glob("*.py")):
        if module.name == "__init__.py":
            continue
        files = shipped(module, utils_dir)
        rows.append((module.stem, len(files), sum(count_lines(f) for f in files), count_lines(module), files))
    rows.sort(key=lambda row: (-row[2], row[0]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT), help="the collection's root (default: this checkout)")
    parser.add_argument("--files", metavar="MODULE", help="also list the files that MODULE ships")
    opts = parser.parse_args()
    rows = figures(opts.root)
    utils_dir = pathlib.Path(opts.root) / "plugins" / "module_utils"
    print("module_utils shipped per module (transitive imports, as Ansible packs them)")
    print("%-24s %6s %7s %7s" % ("module", "files", "lines", "own"))
    for name, nfiles, nlines, own, _ in rows:
        print("%-24s %6d %7d %7d" % (name, nfiles, nlines, own))
    every = set().union(*(row[4] for row in rows)) if rows else set()
    total_files = sum(row[1] for row in rows)
    total_lines = sum(row[2] for row in rows)
    print("%-24s %6d %7d" % ("total (all modules)", total_files, total_lines))
    if rows:
        print("%-24s %6.1f %7.0f" % ("mean per module", total_files / len(rows), total_lines / len(rows)))
        print("%-24s %6d %7d" % ("largest", rows[0][1], rows[0][2]))
        print("%-24s %6d %7d" % ("smallest", rows[-1][1], rows[-1][2]))
    print("%-24s %6d %7d" % ("distinct files shipped", len(every), sum(count_lines(f) for f in every)))
    if opts.files:
        for name, _, _, _, files in rows:
            if name == opts.files:
                print("\n%s ships:" % name)
                for f in sorted(files, key=lambda f: (-count_lines(f), str(f))):
                    print("%7d  %s" % (count_lines(f), f.relative_to(utils_dir)))


if __name__ == "__main__":
    main()
