"""Run collection modules and playbooks through ansible-playbook, as users do, and read the results.

The JSON stdout callback gives every task result; tests assert on those, not on screen text.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / ".build" / "collections"
VENV_BIN = pathlib.Path(sys.executable).parent


def failures(res):
    """The failed tasks' messages of a PlaybookResult, a loop's failed items included."""
    # imported here: the benchmarks import this module before the collection is on their path
    from ansible_collections.gpupool.vcf.plugins.filter.failure import failure_message  # pylint: disable=import-outside-toplevel
    return " | ".join(failure_message(r, {"name": name}) for name, r in res.tasks if r.get("failed"))


class PlaybookResult:
    def __init__(self, proc, data):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.data = data

    @property
    def tasks(self):
        """[(task name, result on localhost)] in play order."""
        out = []
        for play in (self.data or {}).get("plays", []):
            for task in play.get("tasks", []):
                for host, res in task.get("hosts", {}).items():
                    out.append((task["task"]["name"], res))
        return out

    def result(self, name=None):
        """The result of the named task, or of the last task."""
        tasks = self.tasks
        if name is None:
            return tasks[-1][1]
        for task_name, res in tasks:
            if task_name == name:
                return res
        raise KeyError("no task %r in %s" % (name, [t for t, _ in tasks]))

    @property
    def stats(self):
        return (self.data or {}).get("stats", {}).get("localhost", {})


def ensure_collection_tree():
    link = COLLECTIONS / "ansible_collections" / "gpupool" / "vcf"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(ROOT)
        except FileExistsError:  # another test process made it first
            pass


def ansible_env(extra=None):
    ensure_collection_tree()
    env = dict(os.environ)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        PATH="%s:%s:%s" % (VENV_BIN, ROOT / ".sim" / "bin", env.get("PATH", "")),
    )
    env.update(extra or {})
    return env


def run_playbook(playbook, env=None, check=False, diff=False, extra_vars=None, timeout=900, cwd=None):
    """Run a playbook file (path) or a list of plays (data) against localhost."""
    with tempfile.TemporaryDirectory() as tmp:
        if not isinstance(playbook, (str, pathlib.Path)):
            path = pathlib.Path(tmp) / "play.yml"
            path.write_text(yaml.safe_dump(playbook, sort_keys=False))
            playbook = path
        cmd = [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if extra_vars:
            cmd += ["-e", json.dumps(extra_vars)]
        proc = subprocess.run(cmd, env=ansible_env(env), capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or ROOT)
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        data = None
    return PlaybookResult(proc, data)


def run_module(module, args, env=None, check=False, diff=False):
    """One task, one module; returns (result dict, PlaybookResult)."""
    play = [{
        "name": "module under test",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [{"name": "run", module: args, "ignore_errors": True}],
    }]
    res = run_playbook(play, env=env, check=check, diff=diff)
    if res.data is None:
        raise AssertionError("ansible-playbook gave no JSON (rc %s):\n%s\n%s" % (res.rc, res.stdout[-3000:], res.stderr[-3000:]))
    return res.result("run"), res
