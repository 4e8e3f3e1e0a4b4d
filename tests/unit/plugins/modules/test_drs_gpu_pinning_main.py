"""drs_gpu_pinning through main(): the arguments parsed by AnsibleModule (the behavior's choices, the
vm_host_rule suboptions), the cluster's DRS reader and writer replaced by a fake. Check mode predicts the
real run, a rerun is idempotent, --diff shows the overrides and the record before and after, bad input is
refused before the cluster is opened, a failed write names the cluster and says what was changed."""
import pytest

from ansible_collections.gpupool.vcf.plugins.modules import drs_gpu_pinning
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main
from tests.unit.plugins.modules.test_runner_pinning_pools_gpu import FakePinning

PASSWORD = "vc-pw-never-shown"


class Pinning(FakePinning):
    """The fake cluster; ``opened`` counts the clusters the module opened (each one a read)."""

    opened = 0

    def __init__(self, client, cluster):
        Pinning.opened += 1
        FakePinning.__init__(self, client, cluster)


@pytest.fixture
def pinning(monkeypatch):
    FakePinning.overrides, FakePinning.owned, FakePinning.calls, FakePinning.fail = [], set(), [], None
    Pinning.opened = 0
    monkeypatch.setattr(drs_gpu_pinning, "ClusterPinning", Pinning)
    return FakePinning


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, password=PASSWORD, cluster="gpu-h100")
    args.update(params)
    return run_main(drs_gpu_pinning, args, check_mode=check_mode, diff=diff)


def test_check_mode_predicts_the_overrides_and_the_rerun_changes_nothing(pinning):
    check = run(check_mode=True, diff=True)
    assert pinning.calls == [] and pinning.overrides == [] and Pinning.opened == 1
    real = run(diff=True)
    assert real == check and real["changed"] is True
    assert real["added"] == ["llm-01", "llm-02"] and real["pinned"] == ["llm-01", "llm-02"]
    assert real["owned"] == ["llm-01", "llm-02"] and real["removed"] == [] and real["kept_foreign"] == []
    assert real["diff"] == dict(before=dict(overrides={"llm-01": None, "llm-02": None}, owned=[]),
                                after=dict(overrides={"llm-01": "partiallyAutomated", "llm-02": "partiallyAutomated"},
                                           owned=["llm-01", "llm-02"]))
    assert pinning.calls == [("record", ["vm-1", "vm-2"]), ("reconfigure", ["vm-1", "vm-2"], [], [], False)]
    assert missing_keys(real, drs_gpu_pinning, "always", "with --diff") == []
    again = run(diff=True)
    assert again["changed"] is False and again["added"] == [] and again["pinned"] == ["llm-01", "llm-02"]
    assert again["diff"]["before"] == again["diff"]["after"] and len(pinning.calls) == 2
    assert shows([check, real, again], PASSWORD) == []


def test_a_behavior_change_updates_both_overrides(pinning):
    run()
    check = run(check_mode=True, diff=True, behavior="manual")
    assert len(pinning.calls) == 2
    real = run(diff=True, behavior="manual")
    assert real == check and real["updated"] == ["llm-01", "llm-02"] and real["added"] == []
    assert real["diff"]["after"]["overrides"] == {"llm-01": "manual", "llm-02": "manual"}
    assert pinning.calls[2:] == [("reconfigure", [], ["vm-1", "vm-2"], [], False)]  # the record holds them already
    assert run(behavior="manual")["changed"] is False


def test_a_vm_host_rule_is_returned_and_in_the_diff(pinning):
    rule = dict(name="gpu-on-gpu")
    check = run(check_mode=True, diff=True, vm_host_rule=rule)
    real = run(diff=True, vm_host_rule=rule)
    assert real == check and missing_keys(real, drs_gpu_pinning, "when O(vm_host_rule) is given") == []
    assert real["vm_host_rule"] == dict(name="gpu-on-gpu", vm_group=["llm-01", "llm-02"], host_group=["esx-01"],
                                        mandatory=False, enabled=True)
    assert real["diff"]["before"]["vm_host_rule"] is None and real["diff"]["after"]["vm_host_rule"] == real["vm_host_rule"]
    assert pinning.calls[-1] == ("reconfigure", ["vm-1", "vm-2"], [], [], True)


def test_bad_input_is_refused_before_the_cluster_is_opened(pinning):
    res = run(cluster="", vms=["llm-01", ""])
    assert res["failed"] is True
    assert res["invalid_input"] == ["cluster must not be empty", "vms must not hold empty names (item 1)"]
    assert res["msg"].startswith("Invalid input for drs_gpu_pinning: cluster must not be empty")
    res = run(behavior="always")
    assert res["failed"] is True and "value of behavior must be one of: " in res["msg"] and "got: always" in res["msg"]
    res = run(vm_host_rule=dict(vm_group="gpu-vms"))
    assert res["failed"] is True and "missing required arguments: name" in res["msg"]
    assert Pinning.opened == 0 and pinning.calls == []
    # a VM the cluster lacks is known only from the read: refused then, before any write
    res = run(vms=["no-such-vm"])
    assert res["msg"] == "Unable to pin GPU VMs of cluster gpu-h100: vms: VM(s) not in the cluster: no-such-vm"
    assert pinning.calls == [] and shows(res, PASSWORD) == []


def test_a_failed_write_names_the_cluster_and_says_what_was_changed(pinning):
    pinning.fail = "record"
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == "Unable to record the DRS overrides of cluster gpu-h100: NoPermission"
    assert res["added"] == ["llm-01", "llm-02"] and pinning.overrides == []
    pinning.fail, pinning.calls = "reconfigure", []
    res = run()
    assert res["failed"] is True and res["changed"] is True  # the record was claimed before the reconfigure
    assert res["msg"] == "Unable to set DRS overrides on cluster gpu-h100: NoPermission"
    assert pinning.calls[0] == ("record", ["vm-1", "vm-2"]) and pinning.overrides == []
    res = run(cluster="nope")
    assert res["msg"] == "Unable to read DRS overrides of cluster nope: cluster nope not found"
    assert shows(res, PASSWORD) == []
