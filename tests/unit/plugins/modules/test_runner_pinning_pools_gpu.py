"""drs_gpu_pinning, vks_node_pool and esxi_gpu_config on the resource runner, with their client layer
replaced by fakes: what each plans, what check mode predicts, the calls a real run makes, and what a
failure says and leaves."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import drs_gpu_pinning


class Exited(Exception):
    def __init__(self, result):
        super(Exited, self).__init__(result)
        self.result = result


class Module:
    """What the resources and the runner use of a module (the sessions are the fakes)."""

    def __init__(self, params, check_mode=False, diff=False):
        self.params = params
        self.check_mode = check_mode
        self._diff = diff
        self.partial = {}
        self.warnings = []

    def client(self):
        return "soap session"

    def warn(self, text):
        self.warnings.append(text)

    def exit_json(self, **result):
        raise Exited(result)

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        raise Exited(result)


def defaults(spec):
    return dict((k, v.get("default")) for k, v in spec.items())


def run(resource_class, spec, params, **flags):
    module = Module(dict(defaults(spec), **params), **flags)
    with pytest.raises(Exited) as exc:
        Runner(module, resource_class(module)).run()
    return exc.value.result


# -- drs_gpu_pinning -----------------------------------------------------------------------

class FakePinning:
    """ClusterPinning over plain data: three VMs (two with a vGPU), the overrides and the record."""

    overrides = []
    owned = set()
    calls = []
    fail = None

    def __init__(self, client, cluster):
        assert client == "soap session"
        self.name = cluster
        self.groups, self.rules, self.gpu_hosts, self.warnings = {}, {}, ["host-1"], []
        self.names = {"vm-1": "llm-01", "vm-2": "llm-02", "vm-3": "web-01", "host-1": "esx-01"}

    def _call(self, *call):
        FakePinning.calls.append(call)
        if call[0] == FakePinning.fail:
            raise VsphereError("NoPermission")

    def read(self, gpu_hosts=False):
        if self.name == "nope":
            raise VsphereError("cluster nope not found")
        vms = [dict(moid="vm-1", name="llm-01", vgpu_profiles=["nvidia_h100-1-10c"]),
               dict(moid="vm-2", name="llm-02", vgpu_profiles=["nvidia_h100-1-10c"]),
               dict(moid="vm-3", name="web-01", vgpu_profiles=[])]
        return vms, [dict(o) for o in FakePinning.overrides], set(FakePinning.owned)

    def named(self, moids):
        return sorted(self.names.get(m, m) for m in moids)

    def write_record(self, moids):
        self._call("record", sorted(moids))
        FakePinning.owned = set(moids)

    def apply(self, plan, rule_plan=None, rule=None):
        self._call("reconfigure", [e["moid"] for e in plan.add], [e["moid"] for e in plan.edit],
                   [e["moid"] for e in plan.remove], bool(rule_plan and rule_plan["changed"]))
        current = dict((o["moid"], o) for o in FakePinning.overrides)
        for e in plan.add + plan.edit:
            current[e["moid"]] = dict(moid=e["moid"], behavior=e["behavior"], enabled=True)
        for e in plan.remove:
            current.pop(e["moid"])
        FakePinning.overrides = list(current.values())


@pytest.fixture
def pinning(monkeypatch):
    FakePinning.overrides, FakePinning.owned, FakePinning.calls, FakePinning.fail = [], set(), [], None
    monkeypatch.setattr(drs_gpu_pinning, "ClusterPinning", FakePinning)
    return FakePinning


def pin(**params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    return run(drs_gpu_pinning.DrsPinning, drs_gpu_pinning.ARGUMENT_SPEC, dict(dict(cluster="gpu-h100"), **params), **flags)


def test_pinning_check_mode_predicts_then_one_record_one_reconfigure_then_nothing(pinning):
    check = pin(check_mode=True, diff=True)
    assert pinning.calls == []
    real = pin(diff=True)
    assert check == real
    assert real["changed"] and real["added"] == ["llm-01", "llm-02"] and real["owned"] == ["llm-01", "llm-02"]
    assert real["diff"]["after"] == dict(overrides={"llm-01": "partiallyAutomated", "llm-02": "partiallyAutomated"},
                                         owned=["llm-01", "llm-02"])
    # the record is claimed before the reconfigure
    assert pinning.calls == [("record", ["vm-1", "vm-2"]), ("reconfigure", ["vm-1", "vm-2"], [], [], False)]
    pinning.calls = []
    again = pin()
    assert again["changed"] is False and pinning.calls == []


def test_pinning_purge_removes_only_what_the_record_holds_and_drops_it_after(pinning):
    pinning.overrides = [dict(moid="vm-3", behavior="manual", enabled=True), dict(moid="vm-9", behavior="manual", enabled=True)]
    pinning.owned = {"vm-9"}
    res = pin(purge_stale=True, vms=["llm-01"])
    assert res["removed"] == ["vm-9"] and res["kept_foreign"] == ["web-01"] and res["owned"] == ["llm-01"]
    assert pinning.calls == [("record", ["vm-1", "vm-9"]), ("reconfigure", ["vm-1"], [], ["vm-9"], False),
                             ("record", ["vm-1"])]


def test_pinning_failures_name_the_step_and_say_what_was_changed(pinning):
    pinning.fail = "record"
    res = pin()
    assert res["failed"] and res["msg"] == "Unable to record the DRS overrides of cluster gpu-h100: NoPermission"
    assert "changed" not in res and res["added"] == ["llm-01", "llm-02"]
    assert [c[0] for c in pinning.calls] == ["record"]
    pinning.fail, pinning.calls = "reconfigure", []
    res = pin()
    assert res["msg"] == "Unable to set DRS overrides on cluster gpu-h100: NoPermission" and res["changed"] is True
    res = pin(cluster="nope")
    assert res["msg"] == "Unable to read DRS overrides of cluster nope: cluster nope not found"


def test_pinning_refusal_and_warning(pinning, monkeypatch):
    res = pin(vms=["no-such-vm"])
    assert res["msg"] == "Unable to pin GPU VMs of cluster gpu-h100: vms: VM(s) not in the cluster: no-such-vm"
    assert pinning.calls == []
    module = Module(dict(defaults(drs_gpu_pinning.ARGUMENT_SPEC), cluster="gpu-h100"), check_mode=True)
    resource = drs_gpu_pinning.DrsPinning(module)
    monkeypatch.setattr(FakePinning, "read", lambda self, gpu_hosts: (self.warnings.append("DRS is off") or ([], [], set())))
    with pytest.raises(Exited):
        Runner(module, resource).run()
    assert module.warnings == ["DRS is off"]


def test_pinning_vm_host_rule_named_in_result_and_diff(pinning):
    res = pin(vm_host_rule=dict(name="gpu-on-gpu", vm_group=None, host_group=None, mandatory=False), diff=True)
    assert res["vm_host_rule"] == dict(name="gpu-on-gpu", vm_group=["llm-01", "llm-02"], host_group=["esx-01"],
                                       mandatory=False, enabled=True)
    assert res["diff"]["before"]["vm_host_rule"] is None
    assert pinning.calls[-1] == ("reconfigure", ["vm-1", "vm-2"], [], [], True)
