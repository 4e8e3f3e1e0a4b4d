"""docs/audit-rules.md's Rules table names every rule of RULES (every link's table, assembled by
_audit_report) with its link and severity, and no rule that does not exist; a rule whose table row gives
its fix (FIXES) has that fix as its repair in the docs (every rule of the five links gives one)."""
import pathlib
import re

import yaml

from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _audit_guest, _audit_report

ROOT = pathlib.Path(__file__).resolve().parents[5]


def rows(text=None):
    """The cells of each row of the Rules table (``\\|`` inside a cell kept as ``|``) of docs/audit-rules.md, or of
    ``text``."""
    text = (ROOT / "docs" / "audit-rules.md").read_text() if text is None else text
    table = text.split("\n## Rules\n", 1)[1].split("\n## ", 1)[0]
    for line in table.splitlines():
        cells = [c.strip().replace("\0", "|") for c in line.strip().replace("\\|", "\0").strip("|").split("|")]
        yield cells


def documented(text=None):
    """{rule: (link, severities)} from the rows of the Rules table (a row may name several rules)."""
    out = {}
    for cells in rows(text):
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        rules = re.findall(r"`([a-z0-9_]+)`", cells[0])
        severities = [s.strip() for s in cells[2].split(",")]
        for i, rule in enumerate(rules):
            out[rule] = (cells[1], severities[min(i, len(severities) - 1)])
    return out


def test_every_rule_is_in_the_table_with_its_link_and_severity():
    docs = documented()
    wrong = []
    for name, (severity, link, _doc) in _audit_report.RULES.items():  # the catalogue: (severity, link, line)
        want = (link or "any", severity)
        if docs.get(name) != want:
            wrong.append("%s: table says %s, RULES says %s" % (name, docs.get(name), want))
    assert wrong == []


def test_the_table_names_no_rule_that_does_not_exist():
    assert sorted(set(documented()) - set(_audit_report.RULES)) == []


def test_the_table_parser_reads_combined_rows():
    text = ("\n## Rules\n\n| rule | link | severity | what it checks | repaired by |\n|---|---|---|---|---|\n"
            "| `a_missing`, `a_changed` | guest | error, warning | a | b |\n| `c_missing`, `c_changed` | vks | error | c | d |\n")
    assert documented(text) == {"a_missing": ("guest", "error"), "a_changed": ("guest", "warning"),
                                "c_missing": ("vks", "error"), "c_changed": ("vks", "error")}


def test_the_repair_of_a_rule_with_a_table_fix_is_that_fix():
    repairs = dict((re.findall(r"`([a-z0-9_]+)`", cells[0])[0], cells[4]) for cells in rows()
                   if len(cells) == 5 and cells[0].startswith("`") and len(re.findall(r"`([a-z0-9_]+)`", cells[0])) == 1)
    wrong = ["%s: docs say %r, the table %r" % (rule, repairs.get(rule), fix) for rule, fix in _audit_report.FIXES.items()
             if repairs.get(rule) != fix]
    assert wrong == []
    # every rule of the esxi, vsphere, vks, guest and licensing links gives its fix in its table
    assert [r for r, (_s, link, _d) in _audit_report.RULES.items()
            if link in ("esxi", "vsphere", "vks", "guest", "licensing") and r not in _audit_report.FIXES] == []
    guest = [cells[0] for cells in rows() if len(cells) == 5 and cells[1] == "guest"]
    assert guest == ["`%s`" % r for r in _audit_guest.RULES]  # one row per guest rule, in the table's order


def role_task_names():
    """The name of every task of the roles (blocks' tasks included)."""
    out = []

    def walk(tasks):
        for task in tasks or []:
            if isinstance(task, dict):
                if task.get("name"):
                    out.append(str(task["name"]))
                for key in ("block", "rescue", "always"):
                    walk(task.get(key))
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        walk(yaml.safe_load(path.read_text()))
    return out


def names_the_task(named, task):
    """Whether ``named`` (a task name the docs cite, ``...`` at its end: the name's beginning) is ``task``'s name,
    each Jinja expression in it standing for some text."""
    atoms = [a for part in re.split(r"(\{\{.*?\}\})", task) if part
             for a in ([".+"] if part.startswith("{{") else [re.escape(c) for c in part])]
    if named.endswith(" ..."):
        return any(re.fullmatch("".join(atoms[:k]), named[:-len(" ...")]) for k in range(1, len(atoms) + 1))
    return re.fullmatch("".join(atoms), named) is not None


def catalogue_tasks(text=None):
    """The task names each row of the drift catalogue cites as changed by ``--check`` (``; `` between several,
    a parenthesis at the end a note)."""
    text = (ROOT / "docs" / "audit-rules.md").read_text() if text is None else text
    table = text.split("\n## The drift catalogue\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] not in ("esxi", "vsphere", "vks", "guest"):
            continue
        out += [re.sub(r"\s*\((?:[^()]|\([^()]*\))*\)$", "", part.strip()) for part in cells[3].split("; ")]
    return out


def test_the_drift_catalogue_names_the_roles_tasks():
    tasks = role_task_names()
    cited = catalogue_tasks()
    assert len(cited) >= 26
    assert [name for name in cited if not any(names_the_task(name, task) for task in tasks)] == []


def test_the_task_name_check_can_fail():
    assert names_the_task("NVIDIA driver on esx-01", "NVIDIA driver on {{ __esxi_gpu_host_name }}")
    assert names_the_task("Node pools of VKS cluster ...", "Node pools of VKS cluster {{ ns ~ '/' ~ name }}")
    assert not names_the_task("NVIDIA driver", "NVIDIA driver on {{ __esxi_gpu_host_name }}")
    assert not names_the_task("Time-slicing configurations for the device plugin",
                              "Time-slicing configurations for the device plugin and DCGM exporter metrics")
    text = ("\n## The drift catalogue\n\n| link | drift | rule | task | repaired |\n|---|---|---|---|---|\n"
            "| guest | x | `a` b | First task (`role`); Second ... (its item) | yes |\n")
    assert catalogue_tasks(text) == ["First task", "Second ..."]
