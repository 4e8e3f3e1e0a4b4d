"""The esxi_gpu_host role keeps orchestration only: each host is planned once per run (the esxi_host_turns
filter, one mapping of inputs), and the changing modules are called to change, not to plan again."""
import pathlib

import yaml

ROLE = pathlib.Path(__file__).resolve().parents[3] / "roles" / "esxi_gpu_host"


def tasks(name):
    out = []

    def walk(items):
        for task in items or []:
            out.append(task)
            for key in ("block", "rescue", "always"):
                walk(task.get(key))

    walk(yaml.safe_load((ROLE / "tasks" / name).read_text()))
    return out


def text_of(task):
    return yaml.safe_dump(task, width=1000)


def test_one_plan_of_every_host_one_mapping_of_inputs():
    every = tasks("main.yml") + tasks("host.yml")
    planned = [t for t in every if "esxi_host_turns" in text_of(t)]
    assert len(planned) == 1, [t["name"] for t in planned]
    # no positional call of the plan, no second plan per host, no Jinja that recomputes its window or drain
    for old in ("esxi_hosts_to_roll", "esxi_turn_window", "esxi_host_drain_vms"):
        assert not [t["name"] for t in every if old in text_of(t)], old


def test_the_driver_module_is_called_once_per_turn_to_change():
    driver = [t for t in tasks("host.yml") if "gpupool.vcf.esxi_host_driver" in t]
    assert len(driver) == 1, [t["name"] for t in driver]
    assert "check_mode" not in driver[0]
    assert driver[0]["when"] == "__esxi_gpu_host_plan.action != 'none'"


def test_every_role_variable_is_declared():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert set(defaults) <= set(spec)


def test_the_graphics_step_before_the_driver_runs_only_where_the_plan_needs_it():
    config = [t for t in tasks("host.yml") if "gpupool.vcf.esxi_gpu_config" in t and "before the driver" in t["name"]]
    assert len(config) == 1 and "check_mode" not in config[0]
    assert config[0]["when"] == "__esxi_gpu_host_plan.previous_version is not none and __esxi_gpu_host_turn.steps.config"
