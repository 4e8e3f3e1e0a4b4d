"""ha_gpu_restart through main(): the arguments parsed by AnsibleModule (the priorities' choices, the pool and
admission control suboptions), the cluster's HA reader and writer replaced by a fake. Check mode predicts the
real run, everything goes in one reconfigure, a rerun writes nothing, --diff shows the overrides, the admission
control and the record, what someone else set is left and reported, bad input is refused before the cluster is
opened, a failed write names the cluster."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import ha_gpu_restart
from tests.lib.module_contract import missing_keys, shows
from tests.lib.module_main import VSPHERE, run_main

PASSWORD = "vc-pw-never-shown"
POOLS = [dict(name="inference", vgpu_profile="nvidia_h100-3-40c", restart_priority="highest"),
         dict(name="training", vgpu_profile="nvidia_h100-80c", restart_priority="medium")]
SPARE = dict(failover_level=1, cpu_percent=50, memory_percent=50)


class FakeHa:
    """ClusterHa over plain data: three VMs (two with a vGPU), the HA settings, the overrides and the record."""

    overrides, owned, das, calls, fail, opened = {}, set(), {}, [], None, 0

    def __init__(self, client, cluster):
        assert client == "soap session"
        FakeHa.opened += 1
        self.name = cluster

    def _call(self, *call):
        FakeHa.calls.append(call)
        if call[0] == FakeHa.fail:
            raise VsphereError("NoPermission")

    def read(self):
        if self.name == "nope":
            raise VsphereError("cluster nope not found")
        vms = [dict(moid="vm-1", name="inference-0", vgpu_profiles=["nvidia_h100-3-40c"]),
               dict(moid="vm-2", name="training-0", vgpu_profiles=["nvidia_h100-80c"]),
               dict(moid="vm-3", name="web-01", vgpu_profiles=[])]
        return dict(vms=vms, overrides=dict(FakeHa.overrides), das=dict(FakeHa.das), owned=set(FakeHa.owned))

    def write_record(self, owned):
        self._call("record", sorted(owned))
        FakeHa.owned = set(owned)

    def apply(self, plan):
        self._call("reconfigure", sorted(e["moid"] for e in plan.add), sorted(e["moid"] for e in plan.edit),
                   sorted(e["moid"] for e in plan.remove), plan.admission is not None)
        for e in plan.add + plan.edit:
            FakeHa.overrides[e["moid"]] = e["priority"]
        for e in plan.remove:
            del FakeHa.overrides[e["moid"]]
        if plan.admission is not None:
            FakeHa.das = dict(enabled=True, admission_control_enabled=True,
                              policy=dict(kind="resources", auto=False, failover_level=plan.admission["failover_level"],
                                          cpu_percent=plan.admission["cpu_percent"],
                                          memory_percent=plan.admission["memory_percent"]))


@pytest.fixture
def ha(monkeypatch):
    FakeHa.overrides, FakeHa.owned, FakeHa.calls, FakeHa.fail, FakeHa.opened = {}, set(), [], None, 0
    FakeHa.das = dict(enabled=False, admission_control_enabled=False, policy=None)
    monkeypatch.setattr(ha_gpu_restart, "ClusterHa", FakeHa)
    return FakeHa


def run(check_mode=False, diff=False, **params):
    args = dict(VSPHERE, password=PASSWORD, cluster="gpu-h100", pools=POOLS, admission_control=SPARE)
    args.update(params)
    return run_main(ha_gpu_restart, args, check_mode=check_mode, diff=diff)


def test_check_mode_predicts_one_reconfigure_and_the_rerun_writes_nothing(ha):
    check = run(check_mode=True, diff=True)
    assert ha.calls == [] and ha.overrides == {} and ha.opened == 1
    real = run(diff=True)
    assert real == check and real["changed"] is True
    assert real["added"] == ["inference-0", "training-0"] and real["updated"] == [] and real["removed"] == []
    assert real["priorities"] == {"inference-0": "highest", "training-0": "medium"}
    assert real["owned"] == ["cluster", "inference-0", "training-0"] and real["kept_foreign"] == []
    assert real["admission_control"] == dict(ha_enabled=True, admission_control=True, policy="resources",
                                             failover_level=1, cpu_percent=50, memory_percent=50)
    assert real["diff"]["before"]["overrides"] == {"inference-0": None, "training-0": None}
    assert real["diff"]["after"]["overrides"] == {"inference-0": "highest", "training-0": "medium"}
    assert real["diff"]["before"]["admission_control"]["ha_enabled"] is False
    assert ha.calls == [("record", ["cluster", "vm-1", "vm-2"]), ("reconfigure", ["vm-1", "vm-2"], [], [], True)]
    assert missing_keys(real, ha_gpu_restart, "always", "with --diff") == []
    again = run(diff=True)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"] and len(ha.calls) == 2
    assert shows([check, real, again], PASSWORD) == []


def test_a_priority_change_of_a_pool_edits_only_its_vms(ha):
    run()
    pools = [POOLS[0], dict(POOLS[1], restart_priority="low")]
    check = run(check_mode=True, diff=True, pools=pools)
    real = run(diff=True, pools=pools)
    assert real == check and real["updated"] == ["training-0"] and real["added"] == []
    assert ha.calls[2:] == [("reconfigure", [], ["vm-2"], [], False)]  # the record holds it already
    assert run(pools=pools)["changed"] is False


def test_what_someone_else_set_is_reported_and_left_unless_adopt(ha):
    ha.overrides = {"vm-1": "low"}
    ha.das = dict(enabled=True, admission_control_enabled=True, policy=dict(kind="hosts", failover_level=1))
    res = run()
    assert res["changed"] is True and res["added"] == ["training-0"] and res["updated"] == []
    assert [t.split(":")[0] for t in res["kept_foreign"]] == ["VM inference-0", "cluster gpu-h100"]
    assert ha.overrides["vm-1"] == "low" and ha.das["policy"]["kind"] == "hosts"
    assert ha.calls[-1] == ("reconfigure", ["vm-2"], [], [], False)
    res = run(adopt=True)
    assert res["updated"] == ["inference-0"] and res["kept_foreign"] == [] and ha.das["policy"]["kind"] == "resources"
    assert res["owned"] == ["cluster", "inference-0", "training-0"]


def test_without_admission_control_the_cluster_settings_are_left(ha):
    res = run(admission_control=None)
    assert res["changed"] is True and ha.calls[-1] == ("reconfigure", ["vm-1", "vm-2"], [], [], False)
    assert res["admission_control"]["ha_enabled"] is False and "cluster" not in res["owned"]


def test_bad_input_is_refused_before_the_cluster_is_opened(ha):
    res = run(cluster="", exclude=[""])
    assert res["failed"] is True and res["msg"].startswith("Invalid input for ha_gpu_restart: cluster must not be empty")
    res = run(pools=[dict(POOLS[0], restart_priority="urgent")])
    assert res["failed"] is True and "restart_priority must be one of" in res["msg"]
    res = run(admission_control=dict(SPARE, cpu_percent=150))
    assert res["invalid_input"] == ["admission_control.cpu_percent must be from 1 to 100, not 150"]
    res = run(pools=[POOLS[0], POOLS[0]])
    assert res["invalid_input"] == ["pools: inference named more than once"]
    assert ha.opened == 0 and ha.calls == []


def test_a_failed_write_names_the_cluster_and_says_what_was_changed(ha):
    ha.fail = "record"
    res = run()
    assert res["failed"] is True and "changed" not in res
    assert res["msg"] == "Unable to record the HA overrides of cluster gpu-h100: NoPermission" and ha.overrides == {}
    ha.fail, ha.calls = "reconfigure", []
    res = run()
    assert res["failed"] is True and res["changed"] is True  # the record was claimed before the reconfigure
    assert res["msg"] == "Unable to set HA settings of cluster gpu-h100: NoPermission"
    res = run(cluster="nope")
    assert res["msg"] == "Unable to read the HA settings of cluster nope: cluster nope not found"
    assert shows(res, PASSWORD) == []
