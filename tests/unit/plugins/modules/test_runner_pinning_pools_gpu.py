"""drs_gpu_pinning, vks_node_pool and esxi_gpu_config on the resource runner, with their client layer
replaced by fakes: what each plans, what check mode predicts, the calls a real run makes, and what a
failure says and leaves."""
import copy

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.k8s._k8s import K8sError
from ansible_collections.gpupool.vcf.plugins.module_utils.pure import _ownership
from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _gpu_config_reader
from ansible_collections.gpupool.vcf.plugins.modules import drs_gpu_pinning, esxi_gpu_config, vks_node_pool
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module


def defaults(spec):
    return dict((k, v.get("default")) for k, v in spec.items())


def run(resource_class, spec, params, **flags):
    module = Module(dict(defaults(spec), **params), partial={}, **flags)
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
    module = Module(dict(defaults(drs_gpu_pinning.ARGUMENT_SPEC), cluster="gpu-h100"), partial={}, check_mode=True)
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


# -- vks_node_pool -------------------------------------------------------------------------

CLASS = {"spec": {"workers": {"machineDeployments": [{"class": "node-pool"}]},
                  "variables": [{"name": "vmClass", "schema": {"openAPIV3Schema": {"type": "string"}}}]}}


class FakeCluster:
    """VksClusterApi over one stored Cluster; ``errors`` are raised by the next PUTs, in order."""

    obj = None
    puts = []
    errors = []

    def __init__(self, params, namespace, name):
        assert (namespace, name) == ("gpu-platform", "gpu-workloads")

    def read_cluster(self):
        if FakeCluster.obj is None:
            raise K8sError("not found", status=404)
        return "v1beta2", copy.deepcopy(FakeCluster.obj), {"name": "builtin", "namespace": "vmware-system-vks-public"}

    def read_class(self, version, ref):
        return CLASS

    def replace(self, version, body, dry_run=False):
        FakeCluster.puts.append(dry_run)
        if FakeCluster.errors:
            exc = FakeCluster.errors.pop(0)
            if exc.status == 409 and getattr(exc, "stored", False):
                FakeCluster.obj = body
            raise exc
        if not dry_run:
            FakeCluster.obj = body


def cluster(*pools, **annotations):
    return {"metadata": {"name": "gpu-workloads", "annotations": annotations or {}},
            "spec": {"topology": {"workers": {"machineDeployments": [dict(p) for p in pools]}}}}


CPU = {"class": "node-pool", "name": "cpu", "replicas": 2}


@pytest.fixture
def vks(monkeypatch):
    FakeCluster.obj, FakeCluster.puts, FakeCluster.errors = cluster(CPU), [], []
    monkeypatch.setattr(vks_node_pool, "VksClusterApi", FakeCluster)
    return FakeCluster


def pools(*pool_list, **params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    full = [dict(dict((k, None) for k in vks_node_pool.POOL_SPEC), **p) for p in pool_list]
    args = dict(dict(cluster_name="gpu-workloads", namespace="gpu-platform", node_pools=full), **params)
    return run(vks_node_pool.NodePools, vks_node_pool.ARGUMENT_SPEC, args, **flags)


GPU = dict(name="inference", replicas=1, vm_class="vmclass-h100-80c")


def test_node_pool_check_mode_is_a_dry_run_then_created_recorded_and_kept(vks):
    check = pools(GPU, check_mode=True, diff=True)
    assert vks.puts == [True] and [m["name"] for m in vks.obj["spec"]["topology"]["workers"]["machineDeployments"]] == ["cpu"]
    real = pools(GPU, diff=True)
    assert check == real and real["changed"] and real["owned"] == ["inference"]
    assert real["diff"]["before"] == {"machineDeployments": [CPU], "owned": []}
    assert vks.obj["metadata"]["annotations"] == {_ownership.NODE_POOLS_ANNOTATION: "inference"}
    assert pools(GPU)["changed"] is False and vks.puts == [True, False]
    res = pools(GPU, purge=True)
    assert res["changed"] is False and res["kept_foreign"] == ["cpu"]


def test_node_pool_conflict_rereads_and_a_lost_answer_counts_as_changed(vks):
    vks.errors = [K8sError("conflict", status=409)]
    assert pools(GPU)["changed"] is True and vks.puts == [False, False]
    vks.obj, vks.puts = cluster(CPU), []
    lost = K8sError("conflict", status=409, attempts=2)
    lost.stored = True
    vks.errors = [lost]
    res = pools(GPU)
    assert res["changed"] is True and res["owned"] == ["inference"] and vks.puts == [False]


def test_node_pool_failures_name_the_step_and_what_was_left(vks):
    vks.errors = [K8sError("the API server answered 500 three times", status=500, attempts=3)]
    res = pools(GPU)
    assert res["msg"] == ("Unable to update the node pools of Cluster gpu-platform/gpu-workloads: the API server answered "
                          "500 three times; the Cluster was not changed (its node pools are as before); a rerun converges")
    assert res["machine_deployments"] == [CPU] and res["api_version"] == "cluster.x-k8s.io/v1beta2"
    vks.errors = [K8sError("timed out", kind="timeout", attempts=3)]
    assert "its answer was lost" in pools(GPU)["msg"]
    vks.obj = None
    assert pools(GPU)["msg"] == "Unable to read Cluster gpu-platform/gpu-workloads: not found"


def test_node_pool_refusals_before_any_request(vks):
    assert pools(GPU, GPU)["msg"] == "node_pools names must be unique: inference, inference"
    assert pools(dict(GPU, replicas=-1))["msg"] == "node pool inference: replicas must be 0 or more"
    assert "request_timeout must be more than 0" in pools(GPU, request_timeout=0)["msg"]
    res = pools(dict(GPU, **{"class": "gpu-pool"}))
    assert res["msg"].startswith("Unable to update the node pools of Cluster gpu-platform/gpu-workloads: node pool "
                                 "inference: class gpu-pool is not a machineDeployment class")
    assert vks.puts == []


# -- esxi_gpu_config -----------------------------------------------------------------------

class Ref:
    def __init__(self, moid):
        self._moId = moid  # pylint: disable=invalid-name


class Graphics:
    def __init__(self, default="shared", device="shared"):
        self.hostDefaultGraphicsType = default  # pylint: disable=invalid-name
        self.sharedPassthruAssignmentPolicy = "performance"  # pylint: disable=invalid-name
        self.deviceType = [type("DeviceType", (), dict(deviceId="0000:3b:00.0", graphicsType=device))()]  # pylint: disable=invalid-name


class FakeHostProps(dict):
    """ObjectProps of a host: a dict with get and [] (the props are the dict itself)."""

    @property
    def props(self):
        return self


class FakeOps:
    def __init__(self, api):
        self.api = api

    def state(self, host):
        return dict(FakeGpuApi.records.get(host["name"], {}))

    def enter_maintenance(self, host, timeout, by):
        self.api.calls.append(("enter", host["name"]))
        return True

    def refresh(self, host, properties=None):
        return host

    def vms_to_power_off(self, host, power_off):
        running = [dict(name=name, obj=name) for name in FakeGpuApi.vms]
        return esxi_gpu_config._esxi.vms_to_power_off(running, False, power_off)  # pylint: disable=protected-access

    def recorded_powered_off(self, host):
        return []

    def power_off_recorded(self, host, vms, off, step):
        for vm in vms:
            step("power_off %s" % vm["name"], "power off VM %s on" % vm["name"], self.api.calls.append, ("off", vm["name"]))
            off.append(vm)

    def power_on_recorded(self, host, off, step):
        for vm in list(off):
            step("power_on %s" % vm["name"], "power on VM %s on" % vm["name"], self.api.calls.append, ("on", vm["name"]))
            off.remove(vm)
        return []

    def reboot_and_wait(self, host, timeout):
        self.api.calls.append(("reboot", host["name"]))
        if FakeGpuApi.fail == "reboot":
            raise VsphereError("the host did not come back within 1800s of the reboot")
        FakeGpuApi.boot += 1
        host["runtime.bootTime"] = FakeGpuApi.boot
        return host

    def exit_maintenance(self, back):
        self.api.calls.append(("exit", back["name"]))


class FakeGpuApi:
    """GpuConfigApi over two hosts of a cluster: esx-01 (one GPU), esx-02 (no GPU)."""

    options = ""
    records = {}
    graphics = None
    vms = []
    calls = []
    fail = None
    boot = 1

    def __init__(self, client):
        assert client == "soap session"
        self.ops = FakeOps(self)

    def hosts(self, host=None, cluster=None):
        gpu = FakeHostProps({"name": "esx-01", "runtime.connectionState": "connected", "runtime.bootTime": FakeGpuApi.boot,
                             "hardware.pciDevice": ["0000:3b:00.0"], "configManager.graphicsManager": Ref("gm-1"),
                             "runtime.inMaintenanceMode": False})
        plain = FakeHostProps({"name": "esx-02", "runtime.connectionState": "connected", "hardware.pciDevice": [],
                               "configManager.graphicsManager": Ref("gm-2")})
        return [h for h in (gpu, plain) if host in (None, h["name"])]

    def graphics_configs(self, hosts):
        return {"gm-1": FakeGpuApi.graphics or Graphics()}

    def nvidia_module_options(self, host):
        return FakeGpuApi.options

    def profiles_by_gpu_of(self, hosts):
        return dict((h["name"], {"0000:3b:00.0": ["nvidia_h100-10c", "nvidia_h100-20c"]}) for h in hosts)

    def update_graphics(self, host, desired):
        self.calls.append(("graphics", host["name"], desired["default_type"]))
        if FakeGpuApi.fail == "graphics":
            raise VsphereError("UpdateGraphicsConfig: NoPermission")
        FakeGpuApi.graphics = Graphics("sharedDirect", "sharedDirect")

    def update_module_options(self, host, options):
        self.calls.append(("options", host["name"], options))
        FakeGpuApi.records[host["name"]] = dict(options_boot=str(host.get("runtime.bootTime")))
        FakeGpuApi.options = options


@pytest.fixture
def gpu(monkeypatch):
    FakeGpuApi.options, FakeGpuApi.records, FakeGpuApi.graphics, FakeGpuApi.vms = "", {}, None, []
    FakeGpuApi.calls, FakeGpuApi.fail, FakeGpuApi.boot = [], None, 1
    monkeypatch.setattr(esxi_gpu_config, "GpuConfigApi", FakeGpuApi)
    monkeypatch.setattr(_gpu_config_reader, "gpu_pci_ids", lambda devices: list(devices or []))
    monkeypatch.setattr(esxi_gpu_config._esxi, "boot_stamp", str)  # pylint: disable=protected-access
    return FakeGpuApi


def configure(**params):
    flags = dict((k, params.pop(k)) for k in ("check_mode", "diff") if k in params)
    return run(esxi_gpu_config.GpuConfig, esxi_gpu_config.ARGUMENT_SPEC, params, **flags)


EQUAL = dict(policy="equal_share", time_slice_ms=None, per_gpu=None)


def test_gpu_config_cluster_check_then_real_then_reboot_owed_until_a_host_run_reboots(gpu):
    check = configure(cluster="gpu-h100", graphics_type="shared_direct", scheduler=EQUAL, check_mode=True, diff=True)
    assert gpu.calls == [] and check["changed"] and check["skipped_hosts"] == ["esx-02"]
    assert check["diff"]["before"]["esx-01"]["graphics"]["default_type"] == "shared"
    real = configure(cluster="gpu-h100", graphics_type="shared_direct", scheduler=EQUAL, diff=True)
    assert real == check and real["reboot_required"] is True
    assert [c[0] for c in gpu.calls] == ["graphics", "options"]
    gpu.calls = []
    again = configure(cluster="gpu-h100", graphics_type="shared_direct", scheduler=EQUAL)
    assert again["changed"] is False and again["reboot_required"] is True and gpu.calls == []
    assert again["hosts"]["esx-01"]["pending"]
    done = configure(host="esx-01", scheduler=EQUAL, reboot=True)
    assert done["changed"] and done["hosts"]["esx-01"]["rebooted"] and done["reboot_required"] is False
    assert gpu.calls == [("enter", "esx-01"), ("reboot", "esx-01"), ("exit", "esx-01")]
    assert configure(host="esx-01", scheduler=EQUAL, reboot=True)["changed"] is False


def test_gpu_config_checks_before_the_first_change(gpu):
    res = configure(host="esx-02", graphics_type="shared_direct")
    assert res["msg"] == "Unable to configure the GPUs of host esx-02: host esx-02 has no NVIDIA GPU. Nothing was changed."
    res = configure(cluster="gpu-h100", scheduler=dict(EQUAL, policy="fixed_share"))
    assert res["msg"].startswith("Unable to configure the GPUs of cluster gpu-h100: host esx-01: fixed share refused")
    assert configure(cluster="gpu-h100", graphics_type="shared", reboot=True)["msg"].startswith("reboot is only allowed with host")
    assert configure(host="esx-01", scheduler=dict(EQUAL, policy=None, time_slice_ms=5))["msg"] == \
        "scheduler.time_slice_ms needs scheduler.policy"
    gpu.vms = ["llm-01"]
    res = configure(host="esx-01", scheduler=EQUAL, reboot=True)
    assert res["msg"] == ("Unable to reboot host esx-01 for the new scheduler: 1 powered-on VMs hold vGPUs and cannot be "
                          "migrated (llm-01): power them off or move them first, or set power_off_vgpu_vms=true "
                          "(esxi_gpu_host_power_off_vgpu_vms in the esxi_gpu_host role). Nothing was changed.")
    assert gpu.calls == []
    check = configure(host="esx-01", scheduler=EQUAL, reboot=True, power_off_vgpu_vms=True, check_mode=True)
    assert check["hosts"]["esx-01"]["powered_off_vms"] == ["llm-01"] and gpu.calls == []
    real = configure(host="esx-01", scheduler=EQUAL, reboot=True, power_off_vgpu_vms=True)
    assert real == check
    assert gpu.calls[1:] == [("off", "llm-01"), ("enter", "esx-01"), ("reboot", "esx-01"), ("exit", "esx-01"),
                             ("on", "llm-01")]


def test_gpu_config_failures_carry_what_was_changed_and_the_next_step(gpu):
    gpu.fail = "graphics"
    res = configure(cluster="gpu-h100", graphics_type="shared_direct")
    assert res["msg"].startswith("Unable to configure the GPUs of host esx-01: UpdateGraphicsConfig: NoPermission "
                                 "(hosts already changed: none); fix the cause and rerun")
    assert res["hosts_changed"] == [] and res["hosts_in_maintenance"] == [] and res["next_step"] == "fix the cause and rerun"
    assert "changed" not in res
    gpu.fail, gpu.calls = "reboot", []
    res = configure(host="esx-01", scheduler=EQUAL, reboot=True)
    assert res["msg"] == ("Unable to reboot host esx-01 for the new scheduler: the host did not come back within 1800s of "
                          "the reboot; the host is left in maintenance mode; fix the cause and rerun with reboot=true: "
                          "the owed reboot and the VMs powered off are remembered on the host")
    assert res["changed"] is True and res["hosts_changed"] == ["esx-01"] and res["hosts_in_maintenance"] == ["esx-01"]
    assert gpu.records["esx-01"]["options_boot"] == "1"
