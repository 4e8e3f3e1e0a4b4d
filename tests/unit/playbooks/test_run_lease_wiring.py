"""Where site.yml and host_rebuild.yml take, renew and release the run lease (gpupool.vcf.gpu_pool_lease):
taken before the first change, released at the end and in every rescue, and never reported as a change."""
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
LEASE = "gpupool.vcf.gpu_pool_lease"
SHARED = "tasks/run_lease.yml"


def plays(name):
    return yaml.safe_load((ROOT / "playbooks" / name).read_text())


def walk(tasks, section="block"):
    """(section, task) of every task, blocks walked; section is where the task sits (block, rescue, always)."""
    for task in tasks or []:
        yield section, task
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from walk(task[key], key if key != "block" else section)


def lease_state(task):
    """'acquired' / 'released' for a lease task (direct, or the shared task file), else None."""
    if LEASE in task:
        return task[LEASE].get("state", "acquired")
    if (task.get("ansible.builtin.import_tasks") or task.get("ansible.builtin.include_tasks")) == SHARED:
        return task["vars"]["gpupool__lease_state"]
    return None


def test_shared_lease_task_reports_no_change_and_names_the_run():
    tasks = yaml.safe_load((ROOT / "playbooks" / SHARED).read_text())
    assert len(tasks) == 1 and tasks[0]["changed_when"] is False
    assert tasks[0][LEASE]["holder"] == "{{ hostvars['localhost'].gpupool_run_id }}"


def test_site_takes_before_link_1_renews_at_the_roll_and_releases_everywhere():
    site = plays("site.yml")
    names = [p["name"] for p in site]
    first_link = [i for i, n in enumerate(names) if n.startswith("Link 1 of 5")][0]
    taken = [i for i, p in enumerate(site) for s, t in walk(p.get("tasks")) if lease_state(t) == "acquired" and s == "block"]
    assert taken and taken[0] < first_link, "the lease is taken before link 1"
    roll = site[first_link]["tasks"][0]["block"]
    assert lease_state(roll[0]) == "acquired" and "include_role" in str(roll[1]), "renewed just before the roll"
    for play in site:
        for task in play.get("tasks") or []:
            if "rescue" in task and any(t.get("name", "").startswith("Stop at the ") for t in task["rescue"]):
                states = [lease_state(t) for t in task["rescue"]]
                stop = [i for i, t in enumerate(task["rescue"]) if t.get("name", "").startswith("Stop at the ")][0]
                assert "released" in states[:stop], "%s: the rescue releases the lease before it stops" % play["name"]
    assert [lease_state(t) for t in site[-1]["tasks"]] == ["released"], "the last play releases the lease"


def test_every_lease_task_is_bookkeeping():
    for name in ("site.yml", "host_rebuild.yml"):
        for play in plays(name):
            for _section, task in walk(play.get("tasks")):
                if LEASE in task:
                    assert task.get("changed_when") is False, (name, task.get("name"))


def test_host_rebuild_takes_before_the_turn_and_releases_at_its_end_and_in_its_rescue():
    tasks = plays("host_rebuild.yml")[0]["tasks"]
    names = [t.get("name") for t in tasks]
    turn = [i for i, n in enumerate(names) if n.startswith("Bring the host back")][0]
    assert lease_state(tasks[turn - 1]) == "acquired" and tasks[turn - 1]["register"] == "host_rebuild__lease"
    block = tasks[turn]
    assert lease_state(block["block"][-1]) == "released" and lease_state(block["rescue"][0]) == "released"
    assert block["block"][-1][LEASE]["holder"] == "{{ host_rebuild__lease.holder }}"
