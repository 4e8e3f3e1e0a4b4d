"""The controller configuration of docs/awx.md as code (examples/awx/configure_controller.yml),
checked without a controller: every task of the controller collection's modules, each loop item
rendered by Ansible's own templating, is validated against that module's argument spec as the
module itself declares it (read from awx.awx in the environment, which the `ansible` package of
requirements-dev.txt carries); the credential types, credentials and surveys as the controller
checks them on save (tests/lib/awx_injection.py); and the variables the credentials inject and the
surveys ask are ones the playbooks read. ansible-lint lints the playbook with the rest (`make lint`).
Never run here: the playbook against a controller (there is none).
"""
import importlib
import importlib.util
import inspect
import json
import pathlib
import re
import subprocess
from unittest import mock

import pytest
from ansible import template as ansible_template
from ansible.module_utils import basic
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from tests.lib import awx_injection
from tests.lib.ansible_run import VENV_BIN, ansible_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = awx_injection.AWX_DIR / "configure_controller.yml"
AWX_PREFIX = "awx.awx."
# what a vault-encrypted secrets file gives the playbook
SECRETS = {"gpupool_awx_secrets": {"vcenter_password": "vc-pass", "dls_password": "dls-pass",
                                   "esxi_ssh_key": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
                                   "supervisor_kubeconfig": "apiVersion: v1\nkind: Config\n",
                                   "guest_kubeconfig": "apiVersion: v1\nkind: Config\n"}}


def awx_collection():
    spec = importlib.util.find_spec("ansible_collections.awx.awx")
    assert spec is not None, "awx.awx is not installed (the `ansible` package of requirements-dev.txt carries it)"
    path = pathlib.Path(list(spec.submodule_search_locations)[0])
    return path, json.loads((path / "MANIFEST.json").read_text())["collection_info"]["version"]


class _Spec(Exception):
    pass


def _capture(self, *args, **kwargs):
    raise _Spec(kwargs)


def module_spec(name):
    """The keyword arguments the module gives AnsibleModule (argument_spec, mutually_exclusive, ...),
    read by starting its main() up to the point where it builds its AnsibleModule."""
    module = importlib.import_module("ansible_collections.awx.awx.plugins.modules." + name)
    with mock.patch.object(basic.AnsibleModule, "__init__", _capture):
        try:
            module.main()
        except _Spec as spec:
            return spec.args[0]
    raise AssertionError("awx.awx.%s built no AnsibleModule" % name)


def plain(value):
    """Templated data as plain Python (strings, numbers, lists, dicts)."""
    return json.loads(json.dumps(value))


def load_trusted(loader, path):
    """A playbook or vars file as the playbook parser reads it: its strings are templates (ansible-core
    2.19 trusts them explicitly; earlier versions template every string not marked `!unsafe`)."""
    if "trusted_as_template" in inspect.signature(loader.load_from_file).parameters:
        return loader.load_from_file(str(path), trusted_as_template=True)
    return loader.load_from_file(str(path))


def trusted_text(text):
    """A string as a template the playbook holds (ansible-core 2.19 templates only trusted strings)."""
    trust = getattr(ansible_template, "trust_as_template", None)
    if trust is None:
        return text
    return trust(text)


def rendered_tasks():
    """[(task name, module, args)] for every controller module task, once per loop item, rendered
    with the play's variables and vars files (and the secrets a vault file would give)."""
    loader = DataLoader()
    loader.set_basedir(str(PLAYBOOK.parent))
    [play] = load_trusted(loader, PLAYBOOK)
    variables = {}
    for vars_file in play["vars_files"]:
        variables.update(load_trusted(loader, PLAYBOOK.parent / vars_file))
    variables.update(play["vars"])
    variables.update(SECRETS)
    out = []
    for task in play["tasks"]:
        modules = [k for k in task if k.startswith(AWX_PREFIX)]
        if not modules:
            continue
        [module] = modules
        items = [None]
        if "loop" in task:
            # the items as the loop hands them to the task: as templated, so a `!unsafe` string stays
            # one (ansible-core before 2.19 templates every plain string of a variable it reads)
            items = Templar(loader=loader, variables=variables).template(task["loop"])
        for item in items:
            templar = Templar(loader=loader, variables=dict(variables, item=item))
            out.append((task["name"], module[len(AWX_PREFIX):], plain(templar.template(task[module])), task))
    return out


TASKS = rendered_tasks()
# whether a template that gives an integer renders it as text (ansible-core before 2.19, without jinja2_native)
TEXT_TEMPLATES = isinstance(Templar(loader=DataLoader()).template(trusted_text("{{ 1 }}")), str)


def test_the_collection_is_there():
    path, version = awx_collection()
    assert (path / "plugins" / "modules" / "job_template.py").exists()
    # the `ansible` package of requirements-dev.txt carries 24.6.1; `ansible` 9, the package of the oldest
    # ansible-core the collection supports (2.16, `make matrix`), carries 23.9.0
    assert int(version.split(".")[0]) >= 23, version


def test_every_controller_object_is_configured():
    modules = [module for _name, module, _args, _task in TASKS]
    for module in ("credential_type", "credential", "execution_environment", "project", "inventory", "host",
                   "job_template", "schedule"):
        assert module in modules
    assert modules.count("credential_type") == len(awx_injection.credential_types())
    assert modules.count("job_template") == len(awx_injection.job_templates())


@pytest.mark.parametrize("index", range(len(TASKS)), ids=["%s-%d" % (t[1], i) for i, t in enumerate(TASKS)])
def test_task_options_against_the_module_argument_spec(index):
    name, module, args, _task = TASKS[index]
    spec = module_spec(module)
    known = set(spec["argument_spec"])
    for option in spec["argument_spec"].values():
        known.update(option.get("aliases", []))
    unknown = sorted(set(args) - known)
    assert not unknown, "%s: awx.awx.%s has no option %s" % (name, module, ", ".join(unknown))
    checks = dict((k, spec[k]) for k in ("mutually_exclusive", "required_together", "required_one_of",
                                         "required_if", "required_by") if spec.get(k))
    result = ArgumentSpecValidator(spec["argument_spec"], **checks).validate(args)
    assert not result.error_messages, "%s (awx.awx.%s): %s" % (name, module, result.error_messages)
    # a value the module would have to convert is one the playbook did not mean
    for key, value in args.items():
        wanted = spec["argument_spec"][key].get("type", "str")
        kinds = {"str": str, "bool": bool, "int": int, "dict": dict, "list": list}
        if wanted == "int" and TEXT_TEMPLATES and isinstance(value, str):
            # before ansible-core 2.19 a template renders an integer as its digits, which the module converts
            assert re.fullmatch(r"-?[0-9]+", value), "%s: %s is %r, the module wants int" % (name, key, value)
            value = int(value)
        if wanted in kinds:
            assert isinstance(value, kinds[wanted]), "%s: %s is %r, the module wants %s" % (name, key, value, wanted)


def test_secrets_are_not_logged():
    for name, module, args, task in TASKS:
        if module == "credential":
            assert task.get("no_log") is True, name
    spec = module_spec("credential")["argument_spec"]
    assert spec["inputs"].get("no_log") is True  # the module hides them too


def test_credential_types_and_credentials_as_the_controller_checks_them():
    types = dict((args["name"], args) for _n, module, args, _t in TASKS if module == "credential_type")
    assert types == dict((n, dict((k, t[k]) for k in ("name", "description", "kind", "inputs", "injectors")) | {
        "state": "present"}) for n, t in awx_injection.credential_types().items())
    for ctype in types.values():
        awx_injection.check_type(ctype)  # the injector templates arrive unrendered
        assert any("{{" in tmpl for _w, tmpl in awx_injection._templates(ctype["injectors"]))
    for _n, module, args, _t in TASKS:
        if module == "credential":
            awx_injection.check_inputs(types[args["credential_type"]], args["inputs"])


def test_job_templates_and_surveys():
    creds = dict((args["name"], args["credential_type"]) for _n, m, args, _t in TASKS if m == "credential")
    templates = awx_injection.job_templates()
    schedules = [args for _n, m, args, _t in TASKS if m == "schedule"]
    for _n, module, args, _t in TASKS:
        if module != "job_template":
            continue
        template = templates[args["name"]]
        assert (ROOT / args["playbook"]).is_file()
        # one credential of each type the template takes, none of the same type twice
        assert sorted(creds[c] for c in args["credentials"]) == sorted(template["credential_types"])
        survey = args["survey_spec"]
        assert args["survey_enabled"] and survey == template["survey"]
        assert set(survey) == {"name", "description", "spec"}
        variables = [q["variable"] for q in survey["spec"]]
        assert len(set(variables)) == len(variables)
        for question in survey["spec"]:
            assert {"question_name", "variable", "type", "required"} <= set(question), question
        # the defaults are valid answers (with one for each required question without a default);
        # an answer outside the choices, or a required question left empty, is refused
        needed = dict((q["variable"], "esx-01.example.com") for q in survey["spec"] if q["required"] and not q.get("default"))
        awx_injection.survey_answers(survey, needed)
        for question in survey["spec"]:
            if question["type"] == "multiplechoice":
                with pytest.raises(awx_injection.InjectionError):
                    awx_injection.survey_answers(survey, dict(needed, **{question["variable"]: "no-such-choice"}))
            if question["required"]:
                with pytest.raises(awx_injection.InjectionError):
                    awx_injection.survey_answers(survey, dict(needed, **{question["variable"]: ""}))
    assert [s["unified_job_template"] for s in schedules] == ["gpupool audit"]
    assert schedules[0]["rrule"].startswith("DTSTART") and "FREQ=DAILY" in schedules[0]["rrule"]


def playbook_reads(playbook):
    """The names a playbook of the collection reads: its own text and its roles' argument specs."""
    text = (ROOT / playbook).read_text()
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        text += spec.read_text()
    return text


@pytest.mark.parametrize("template", sorted(awx_injection.job_templates()))
def test_what_the_credentials_and_survey_give_is_read_by_the_playbook(template):
    """Every survey variable is read by the template's playbook (directly or through the template's
    extra vars), and every credential the template takes gives the playbook something it reads."""
    jt = awx_injection.job_templates()[template]
    text = playbook_reads(jt["playbook"])
    extra = json.dumps(jt.get("extra_vars") or {})
    for question in jt["survey"]["spec"]:
        var = question["variable"]
        assert re.search(r"\b%s\b" % var, text) or re.search(r"\b%s\b" % var, extra), (template, var)
    for var in jt.get("extra_vars") or {}:
        assert re.search(r"\b%s\b" % var, text), (template, var)
    module_utils = "".join(p.read_text() for p in (ROOT / "plugins" / "module_utils").rglob("*.py"))
    for name in jt["credential_types"]:
        injectors = awx_injection.credential_types()[name]["injectors"]
        read = [v for v in injectors.get("extra_vars", {}) if re.search(r"\b%s\b" % v, text)]
        read += [v for v in injectors.get("env", {}) if v in text or '"%s"' % v in module_utils]
        assert read, "%s: credential %s gives %s nothing it reads" % (template, name, jt["playbook"])


def test_every_injected_variable_is_read_somewhere():
    texts = "".join(playbook_reads("playbooks/%s" % p) for p in ("site.yml", "audit.yml", "host_rebuild.yml"))
    module_utils = "".join(p.read_text() for p in (ROOT / "plugins" / "module_utils").rglob("*.py"))
    for name, ctype in awx_injection.credential_types().items():
        for var in ctype["injectors"].get("extra_vars", {}):
            assert re.search(r"\b%s\b" % var, texts), (name, var)
        for var in ctype["injectors"].get("env", {}):
            assert '"%s"' % var in module_utils, (name, var)


def test_docs_describe_the_definitions():
    """docs/awx.md points at the definition file and names every type, what it injects and every
    template with its survey variables."""
    doc = (ROOT / "docs" / "awx.md").read_text()
    assert "examples/awx/credential_types.yml" in doc and "examples/awx/configure_controller.yml" in doc
    for name, ctype in awx_injection.credential_types().items():
        assert "*%s*" % name in doc, name
        for kind in ("env", "extra_vars"):
            for var in ctype["injectors"].get(kind, {}):
                assert "`%s`" % var in doc, (name, var)
    for name, jt in awx_injection.job_templates().items():
        assert name in doc
        for question in jt["survey"]["spec"]:
            assert "`%s`" % question["variable"] in doc, (name, question["variable"])


def test_syntax_check():
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "--syntax-check", str(PLAYBOOK)],
                          env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
