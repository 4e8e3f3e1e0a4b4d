"""What AWX / Automation Controller does with a job before ansible-runner starts it, for the tests.

The controller turns a job template, its credentials and the launch's answers into a private data
folder that ansible-runner reads:

    project/            a copy of the project (the job's working folder)
    inventory/hosts.json the inventory
    env/envvars         environment: the controller's own variables and every credential's `env` injectors
    env/extravars       extra vars: the template's (templates allowed) and the survey's (marked unsafe)
    env/passwords       answers to password prompts (no machine credential here: empty answers)
    env/settings        runner settings
    env/cmdline         further arguments: `-e @<file>` for each credential's `extra_vars` injectors
    env/tmp*            files of `file` injectors (0600) and credential extra vars files (0400)

A custom credential type's injectors are Jinja templates, rendered in a sandbox against the
credential's inputs: a missing input renders empty, a missing boolean as false; `tower.filename`
names the file of a single `template` injector, `tower.filename.<name>` the one of `template.<name>`.
Each env value is rendered twice: with the secrets (for the job) and with every secret field
replaced by `**********` (what the controller stores as the job's environment). Credential extra
vars are written with every string marked `!unsafe`, so Ansible never templates them.

This is a model of the controller's documented behaviour, kept here in the tests (the collection
itself never renders credentials; nothing of this ships in it). The credential types it renders
are examples/awx/credential_types.yml, the one definition the documentation and the controller
configuration playbook also use. Paths are those of this machine (the controller maps them to
/runner/... inside the execution environment's container).
"""
import json
import os
import pathlib
import re
import stat
import tempfile

import yaml
from jinja2 import StrictUndefined
from jinja2.meta import find_undeclared_variables
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
AWX_DIR = ROOT / "examples" / "awx"
MASK = "**********"
FIELD_TYPES = ("string", "boolean")
SURVEY_TYPES = ("text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect")
# environment variables an injector may not set (the controller refuses these and every ANSIBLE_*)
PROHIBITED_ENV = frozenset(("PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "JOB_ID", "INVENTORY_ID",
                            "PROJECT_REVISION", "AWX_HOST", "CALLBACK_QUEUE", "CALLBACK_CONNECTION"))
# the password prompts the controller answers for a playbook job; without a machine credential
# or vault password every answer is empty
PASSWORD_PROMPTS = (r"Enter passphrase for .*:\s*?$", r"Bad passphrase, try again for .*:\s*?$",
                    r"BECOME password.*:\s*?$", r"SUDO password.*:\s*?$", r"sudo password.*:\s*?$",
                    r"SSH password:\s*?$", r"Password:\s*?$", r"Vault password:\s*?$")


class InjectionError(ValueError):
    """A credential type, a credential or a survey answer the controller would refuse."""


class _Loader(yaml.SafeLoader):
    """YAML with Ansible's `!unsafe` tag read as a plain string."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load(name):
    """examples/awx/<name> as data."""
    return yaml.load((AWX_DIR / name).read_text(), Loader=_Loader)  # noqa: S506 (a SafeLoader)


def credential_types():
    """{name: credential type} of examples/awx/credential_types.yml."""
    return {t["name"]: t for t in load("credential_types.yml")["gpupool_awx_credential_types"]}


def job_templates():
    """{name: job template} of examples/awx/job_templates.yml."""
    return {t["name"]: t for t in load("job_templates.yml")["gpupool_awx_job_templates"]}


# --- credential types and credentials ---------------------------------------------------------

def _fields(ctype):
    return ctype.get("inputs", {}).get("fields", [])


def _templates(injectors):
    """(where, template) of every injector template."""
    out = []
    for key, tmpl in injectors.get("file", {}).items():
        out.append(("file %s" % key, tmpl))
    for key, tmpl in injectors.get("env", {}).items():
        out.append(("env %s" % key, tmpl))

    def walk(where, node):
        if isinstance(node, dict):
            for k, v in node.items():
                walk("%s.%s" % (where, k), v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk("%s[%d]" % (where, i), v)
        else:
            out.append((where, node))
    walk("extra_vars", injectors.get("extra_vars", {}))
    return out


def check_type(ctype):
    """Raise InjectionError for what the controller refuses when the credential type is saved."""
    name = ctype.get("name", "?")
    if ctype.get("kind") not in ("cloud", "net"):
        raise InjectionError("%s: kind must be cloud or net, not %r" % (name, ctype.get("kind")))
    ids = [f.get("id") for f in _fields(ctype)]
    if len(set(ids)) != len(ids) or not all(ids):
        raise InjectionError("%s: every field needs an id of its own: %s" % (name, ids))
    for field in _fields(ctype):
        if field.get("type", "string") not in FIELD_TYPES:
            raise InjectionError("%s: field %s has type %r" % (name, field["id"], field.get("type")))
        if field.get("format", "ssh_private_key") != "ssh_private_key":
            raise InjectionError("%s: field %s has format %r" % (name, field["id"], field.get("format")))
        if "label" not in field:
            raise InjectionError("%s: field %s has no label" % (name, field["id"]))
    missing = sorted(set(ctype.get("inputs", {}).get("required", [])) - set(ids))
    if missing:
        raise InjectionError("%s: required names no field: %s" % (name, ", ".join(missing)))
    injectors = ctype.get("injectors", {})
    unknown = sorted(set(injectors) - {"env", "extra_vars", "file"})
    if unknown:
        raise InjectionError("%s: unknown injector kind %s" % (name, ", ".join(unknown)))
    files = list(injectors.get("file", {}))
    if any(not re.fullmatch(r"template(\.[A-Za-z_][A-Za-z0-9_]*)?", f) for f in files) or (
            "template" in files and len(files) > 1):
        raise InjectionError("%s: file injectors are `template` alone or `template.<name>`: %s" % (name, files))
    for var in injectors.get("env", {}):
        if var.startswith("ANSIBLE_") or var in PROHIBITED_ENV:
            raise InjectionError("%s: an injector may not set %s" % (name, var))
    # every template renders with every field set: no name outside the fields and `tower`
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined)
    namespace = dict((i, "x" if f.get("type", "string") == "string" else True) for i, f in zip(ids, _fields(ctype)))
    namespace["tower"] = _tower_namespace(files, lambda label: "/path/of/%s" % label)
    for where, tmpl in _templates(injectors):
        if not isinstance(tmpl, str):
            raise InjectionError("%s: %s is not a string" % (name, where))
        undeclared = find_undeclared_variables(env.parse(tmpl)) - set(namespace)
        if undeclared:
            raise InjectionError("%s: %s names %s, which is no field" % (name, where, ", ".join(sorted(undeclared))))
        try:
            env.from_string(tmpl).render(**namespace)
        except Exception as exc:  # the controller refuses a template that does not render
            raise InjectionError("%s: %s does not render: %s" % (name, where, exc)) from exc


def check_inputs(ctype, inputs):
    """Raise InjectionError for a credential the controller would not save."""
    fields = dict((f["id"], f) for f in _fields(ctype))
    unknown = sorted(set(inputs) - set(fields))
    if unknown:
        raise InjectionError("%s: no such field: %s" % (ctype["name"], ", ".join(unknown)))
    for key in ctype.get("inputs", {}).get("required", []):
        if inputs.get(key) in (None, ""):
            raise InjectionError("%s: %s is required" % (ctype["name"], key))
    for key, value in inputs.items():
        wanted = bool if fields[key].get("type", "string") == "boolean" else str
        if not isinstance(value, wanted):
            raise InjectionError("%s: %s must be a %s" % (ctype["name"], key, wanted.__name__))


class _Namespace:
    """`tower` and `tower.filename` in the templates."""


def _tower_namespace(file_labels, path_of):
    tower = _Namespace()
    for label in file_labels:
        if "." not in label:
            tower.filename = path_of(label)
        else:
            if not hasattr(tower, "filename"):
                tower.filename = _Namespace()
            setattr(tower.filename, label.split(".", 1)[1], path_of(label))
    return tower


class Injection:
    """What one credential gave the job."""

    def __init__(self):
        self.env = {}          # for the job
        self.safe_env = {}     # as the controller stores it (secret fields masked)
        self.files = {}        # injector label -> path (0600)
        self.extra_vars = {}   # credential extra vars (in the file below)
        self.extra_vars_file = None
        self.args = []         # -e @file


def inject(ctype, inputs, private_data_dir):
    """Render one credential of ``ctype`` into ``private_data_dir`` as the controller does."""
    check_type(ctype)
    check_inputs(ctype, inputs)
    env_dir = pathlib.Path(private_data_dir) / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    secret = set(f["id"] for f in _fields(ctype) if f.get("secret"))
    namespace, safe_namespace = {}, {}
    for key, value in inputs.items():
        if isinstance(value, bool):
            namespace[key] = safe_namespace[key] = value
            continue
        if key in secret:
            safe_namespace[key] = MASK
        elif value:
            safe_namespace[key] = value
        if value:
            namespace[key] = value
    for field in _fields(ctype):
        if field.get("type") == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = safe_namespace[field["id"]] = False
        # a private key always ends with a newline (ssh refuses one without)
        if field.get("format") == "ssh_private_key" and field["id"] in namespace \
                and not namespace[field["id"]].endswith("\n"):
            namespace[field["id"]] += "\n"

    sandbox = ImmutableSandboxedEnvironment()
    out = Injection()
    injectors = ctype.get("injectors", {})

    def write(label):
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as f:
            f.write(sandbox.from_string(injectors["file"][label]).render(**namespace))
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        out.files[label] = path
        return path

    tower = _tower_namespace(list(injectors.get("file", {})), write)
    namespace["tower"] = safe_namespace["tower"] = tower
    for var, tmpl in injectors.get("env", {}).items():
        out.env[var] = sandbox.from_string(tmpl).render(**namespace)
        out.safe_env[var] = sandbox.from_string(tmpl).render(**safe_namespace)

    def render(node):
        if isinstance(node, dict):
            return dict((render(k), render(v)) for k, v in node.items())
        if isinstance(node, list):
            return [render(v) for v in node]
        return sandbox.from_string(node).render(**namespace)
    out.extra_vars = render(injectors.get("extra_vars", {}))
    if out.extra_vars:
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as f:
            f.write(unsafe_dump(out.extra_vars))
        os.chmod(path, stat.S_IRUSR)
        out.extra_vars_file = path
        out.args = ["-e", "@%s" % path]
    return out


# --- extra vars -----------------------------------------------------------------------------

class _Unsafe(str):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data)))


def _mark(node):
    if isinstance(node, dict):
        return dict((k, _mark(v)) for k, v in node.items())
    if isinstance(node, list):
        return [_mark(v) for v in node]
    if isinstance(node, str):
        return _Unsafe(node)
    return node


def unsafe_dump(data, safe=None):
    """YAML of ``data`` with every string marked `!unsafe`, except the top-level entries that
    equal those of ``safe`` (the job template's own extra vars, where templates are allowed)."""
    safe = safe or {}
    marked = dict((k, v if k in safe and safe[k] == v else _mark(v)) for k, v in data.items())
    return yaml.dump(marked, Dumper=_Dumper, default_flow_style=False, sort_keys=True)


def survey_answers(survey, answers):
    """The extra vars a survey gives: each answer checked as the controller checks it at launch,
    defaults for the questions not answered."""
    out = {}
    answers = dict(answers)
    for question in survey["spec"]:
        var, kind = question["variable"], question["type"]
        if kind not in SURVEY_TYPES:
            raise InjectionError("survey %s: %s has type %r" % (survey["name"], var, kind))
        value = answers.pop(var, question.get("default", ""))
        if value in ("", None, []):
            if question.get("required"):
                raise InjectionError("survey %s: %s is required" % (survey["name"], var))
            continue
        if kind in ("text", "textarea", "password"):
            if not isinstance(value, str):
                raise InjectionError("survey %s: %s must be text" % (survey["name"], var))
            low, high = question.get("min"), question.get("max")
            if (low is not None and len(value) < low) or (high is not None and len(value) > high):
                raise InjectionError("survey %s: %s must be %s to %s characters" % (survey["name"], var, low, high))
        elif kind in ("integer", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float) if kind == "float" else int):
                raise InjectionError("survey %s: %s must be a%s %s" % (survey["name"], var, "n" if kind == "integer" else "", kind))
        else:
            choices = question.get("choices", [])
            if isinstance(choices, str):
                choices = choices.split("\n")
            picked = value if kind == "multiselect" else [value]
            bad = [v for v in picked if v not in choices]
            if bad:
                raise InjectionError("survey %s: %s must be one of %s, not %s" % (survey["name"], var, choices, bad))
        out[var] = value
    if answers:
        raise InjectionError("survey %s asks no %s" % (survey["name"], ", ".join(sorted(answers))))
    return out


# --- the private data folder -------------------------------------------------------------------

class Job:
    """A job of a template, laid out as a private data folder for ansible-runner."""

    def __init__(self, private_data_dir, template, credentials, answers, extra_vars=None, base_env=None,
                 job_id=1, job_type="run", diff_mode=False):
        """``credentials``: {credential type name: inputs}, one for each type the template names;
        ``extra_vars``: the template's own extra vars (on top of examples/awx/job_templates.yml's);
        ``base_env``: the execution environment's variables (PATH, ANSIBLE_COLLECTIONS_PATH);
        ``job_type`` (run or check) and ``diff_mode``: as asked on launch, where the template allows."""
        self.dir = pathlib.Path(private_data_dir)
        self.template = template
        self.job_id = job_id
        if job_type not in ("run", "check"):
            raise InjectionError("job type %r" % job_type)
        if job_type != "run" and not template.get("ask_job_type_on_launch"):
            raise InjectionError("template %s does not ask the job type on launch" % template["name"])
        if diff_mode and not template.get("ask_diff_mode_on_launch"):
            raise InjectionError("template %s does not ask Show changes on launch" % template["name"])
        self.job_type, self.diff_mode = job_type, diff_mode
        types = credential_types()
        missing = sorted(set(template["credential_types"]) - set(credentials))
        extra = sorted(set(credentials) - set(template["credential_types"]))
        if missing or extra:
            raise InjectionError("template %s takes credentials of %s; missing %s, not taken %s"
                                 % (template["name"], template["credential_types"], missing, extra))
        env_dir = self.dir / "env"
        env_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(env_dir, stat.S_IRWXU)
        self.injections = dict((name, inject(types[name], inputs, self.dir)) for name, inputs in credentials.items())
        self.template_vars = dict(template.get("extra_vars") or {}, **(extra_vars or {}))
        self.survey_vars = survey_answers(template["survey"], answers)
        awx_vars = {"awx_job_id": job_id, "awx_job_template_name": template["name"], "awx_job_launch_type": "manual",
                    "awx_project_revision": "", "tower_job_id": job_id, "tower_job_template_name": template["name"]}
        self.extra_vars = dict(awx_vars, **self.template_vars)
        self.extra_vars.update(self.survey_vars)
        self.env = dict(base_env or {})
        self.env.update({"JOB_ID": str(job_id), "INVENTORY_ID": "1", "PROJECT_REVISION": "",
                         "ANSIBLE_RETRY_FILES_ENABLED": "False", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
                         "ANSIBLE_PARAMIKO_RECORD_HOST_KEYS": "False"})
        self.safe_env = dict(self.env)
        self.args = []
        for injection in self.injections.values():
            self.env.update(injection.env)
            self.safe_env.update(injection.safe_env)
            self.args += injection.args
        self._write()

    def _write_file(self, name, text, mode):
        path = self.dir / "env" / name
        path.write_text(text)
        os.chmod(path, mode)

    def _write(self):
        safe = dict((k, v) for k, v in self.extra_vars.items() if k not in self.survey_vars)
        self._write_file("extravars", unsafe_dump(self.extra_vars, safe), stat.S_IRUSR)
        self._write_file("envvars", yaml.safe_dump(self.env, default_flow_style=False), stat.S_IRUSR | stat.S_IWUSR)
        self._write_file("passwords", yaml.safe_dump(dict((p, "") for p in PASSWORD_PROMPTS)),
                         stat.S_IRUSR | stat.S_IWUSR)
        self._write_file("settings", yaml.safe_dump({"suppress_ansible_output": True, "job_timeout": 0}),
                         stat.S_IRUSR | stat.S_IWUSR)
        args = list(self.args)
        if self.job_type == "check":
            args.append("--check")
        if self.diff_mode:
            args.append("--diff")
        if self.template.get("forks"):
            args += ["--forks", str(self.template["forks"])]
        self._write_file("cmdline", " ".join(args), stat.S_IRUSR | stat.S_IWUSR)
        inventory = self.dir / "inventory"
        inventory.mkdir(exist_ok=True)
        (inventory / "hosts.json").write_text(json.dumps({"all": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))

    def run(self, **kwargs):
        """ansible-runner on the folder, as the controller's worker runs it."""
        import ansible_runner
        return ansible_runner.run(private_data_dir=str(self.dir), playbook=self.template["playbook"],
                                  ident=str(self.job_id), quiet=True, **kwargs)
