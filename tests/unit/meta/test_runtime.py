"""meta/runtime.yml must list every vSphere module in the action group, and nothing else."""
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def vsphere_modules():
    found = set()
    for path in (ROOT / "plugins" / "modules").glob("*.py"):
        text = path.read_text()
        if re.search(r"^\s*-\s*gpupool\.vcf\.vsphere\s*$", text, re.M):
            found.add(path.stem)
    return found


def test_vsphere_action_group_matches_modules():
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    group = set(runtime["action_groups"]["vsphere"])
    modules = vsphere_modules()
    assert modules, "no vSphere module found: the doc fragment detection is broken"
    assert group - modules == set(), "action group lists modules that do not exist or are not vSphere modules"
    assert modules - group == set(), "vSphere modules missing from action_groups.vsphere in meta/runtime.yml"


def test_every_module_file_is_documented():
    for path in (ROOT / "plugins" / "modules").glob("*.py"):
        text = path.read_text()
        for block in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
            assert re.search(r"^%s = r?\"\"\"" % block, text, re.M), "%s lacks %s" % (path.name, block)


def test_requires_ansible_is_set():
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"].startswith(">=")
