"""vm_class through main(): the arguments parsed by AnsibleModule, the VM class API replaced by a fake
store. Check mode predicts the real run, a rerun is idempotent, --diff shows the class before and after,
bad input is refused before any request, a failed request names the class and what was attempted."""
import pytest

from ansible_collections.gpupool.vcf.plugins.modules import vm_class
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.modules.test_runner_modules import SMALL, FakeClasses

PASSWORD = "vc-pw-never-shown"
WRITES = ("create", "update", "delete")


class FakeFamily(FakeClasses):
    """The fake store with the list the revisions read (every class, with its id)."""

    def list(self):
        self._call("list")
        return [dict(info, id=name) for name, info in FakeClasses.store.items()]


@pytest.fixture
def classes(monkeypatch):
    FakeClasses.store, FakeClasses.calls, FakeClasses.fail = {}, [], None
    monkeypatch.setattr(vm_class, "VmClassApi", FakeFamily)
    monkeypatch.setattr(vm_class, "offered_profiles", lambda client, cluster: {"nvidia_h100-1-10c", "nvidia_h100-2-20c"})
    monkeypatch.setattr(vm_class, "api_version", lambda client: "8.0.3.0")
    return FakeClasses


def run(check_mode=False, diff=False, **params):
    return run_main(vm_class, dict(VSPHERE, password=PASSWORD, **params), check_mode=check_mode, diff=diff)


def writes(classes):
    return [c for c in classes.calls if c[0] in WRITES]


def test_check_mode_predicts_the_create_and_the_rerun_changes_nothing(classes):
    check = run(check_mode=True, diff=True, **SMALL)
    assert writes(classes) == [] and classes.store == {}
    real = run(diff=True, **SMALL)
    assert real == check and real["changed"] is True
    assert [c[0] for c in writes(classes)] == ["create"] and classes.calls[-1][1]["id"] == "gpu-small"
    assert real["diff"] == dict(before=None, after=real["vm_class"])
    assert real["vm_class"]["memory_reservation"] == 100 and real["api_form"] == "config_spec"
    assert missing_keys(real, vm_class, "always", "when state is present", "with --diff") == []
    classes.calls = []
    again = run(diff=True, **SMALL)
    assert again["changed"] is False and again["changed_fields"] == [] and writes(classes) == []
    assert again["vm_class"] == real["vm_class"] and again["diff"]["before"] == again["diff"]["after"]
    assert shows([check, real, again], PASSWORD) == []


def test_update_diff_names_only_the_field_that_changes(classes):
    run(**SMALL)
    classes.calls = []
    check = run(check_mode=True, diff=True, **dict(SMALL, cpu_count=8))
    assert writes(classes) == [] and classes.store["gpu-small"]["cpu_count"] == 4
    real = run(diff=True, **dict(SMALL, cpu_count=8))
    assert real == check and real["changed_fields"] == ["cpu_count"]
    before, after = real["diff"]["before"], real["diff"]["after"]
    assert (before["cpu_count"], after["cpu_count"]) == (4, 8)
    assert dict(before, cpu_count=8) == after
    assert writes(classes) == [("update", "gpu-small", classes.calls[-1][2])] and classes.store["gpu-small"]["cpu_count"] == 8


def test_delete_is_predicted_then_idempotent(classes):
    run(**SMALL)
    check = run(check_mode=True, diff=True, name="gpu-small", state="absent")
    assert "gpu-small" in classes.store
    real = run(diff=True, name="gpu-small", state="absent")
    assert real == check and real["changed"] is True and real["vm_class"] is None and real["diff"]["after"] is None
    assert classes.calls[-1] == ("delete", "gpu-small") and classes.store == {}
    assert missing_keys(real, vm_class, "always") == []
    again = run(name="gpu-small", state="absent")
    assert again == dict(changed=False, changed_fields=[], vm_class=None)


def test_bad_input_is_refused_before_any_request(classes):
    res = run(name="gpu-x", memory_reservation=150)
    assert res["failed"] is True and res["invalid_input"] == ["memory_reservation must be a percentage from 0 to 100, not 150"]
    assert res["msg"].startswith("Invalid input for vm_class: memory_reservation must be a percentage")
    res = run(name="gpu-x", state="gone")
    assert res["failed"] is True and "value of state must be one of: present, absent, got: gone" in res["msg"]
    res = run(**dict(SMALL, vgpu_profiles=["nvidia_l40s-48q"]))
    assert res["failed"] is True and "not offered by the hosts of cluster gpu-h100" in res["msg"]
    assert classes.calls == [] and classes.store == {}
    # whether memory_mb is needed depends on whether the class exists: read, then refused without a write
    res = run(name="gpu-x", cpu_count=2)
    assert res["msg"] == "Unable to manage VM class gpu-x: memory_mb required to create a VM class"
    assert classes.calls == [("get", "gpu-x")] and classes.store == {}
    assert shows(res, PASSWORD) == []


def test_a_failed_update_names_the_class_and_what_was_attempted(classes):
    run(**SMALL)
    classes.fail = "update"
    res = run(**dict(SMALL, cpu_count=8, description="bigger"))
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == "Unable to update VM class gpu-small: HTTP 500 internal error"
    assert res["changed_fields"] == ["cpu_count", "description"] and res["vm_class"]["cpu_count"] == 8
    assert classes.store["gpu-small"]["cpu_count"] == 4
    classes.fail = "get"
    res = run(**SMALL)
    assert res["failed"] is True and res["msg"] == "Unable to read VM class gpu-small: HTTP 500 internal error"
    assert shows(res, PASSWORD) == []


def test_revisions_make_a_new_class_for_a_new_shape_and_keep_the_old_one(classes):
    family = dict(SMALL, revisions=True, in_use=["gpu-small"])
    run(**dict(family, description="gpupool inference"))
    bigger = dict(family, vgpu_profiles=["nvidia_h100-2-20c"], description="gpupool inference")
    check = run(check_mode=True, diff=True, **bigger)
    assert [c[0] for c in writes(classes)] == ["create"]  # the first run's only
    real = run(diff=True, **bigger)
    assert real == check and real["changed"] is True
    new = real["vm_class"]["name"]
    assert new.startswith("gpu-small-r") and real["superseded"] == ["gpu-small"] and real["retirable"] == []
    assert [k["name"] for k in real["kept"]] == ["gpu-small"] and real["revision_steps"]
    assert missing_keys(real, vm_class, "always", "with revisions", "when state is present", "with --diff") == []
    assert sorted(classes.store) == ["gpu-small", new]
    again = run(**bigger)
    assert again["changed"] is False and again["vm_class"]["name"] == new
