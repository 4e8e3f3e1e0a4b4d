"""esxi_gpu_config's MIG step with its client layer and shell replaced by fakes: the SSH service started
before the first command and stopped after, whatever happens in between; what a failure to start or stop
it says and leaves."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.runner._runner import Runner
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _gpu_config_reader
from ansible_collections.gpupool.vcf.plugins.modules import esxi_gpu_config
from tests.lib.fake_module import Exited
from tests.lib.fake_module import FakeModule as Module
from tests.unit.plugins.modules.test_runner_pinning_pools_gpu import FakeGpuApi, defaults

PCIS = ["0000:3b:00.0", "0000:5e:00.0"]


class MigApi(FakeGpuApi):
    """FakeGpuApi's host esx-01 with two GPUs, their MIG mode, and the host's SSH service."""

    mig = {}
    running = False
    fail = None

    def mig_rows(self, host):
        return [dict(index=i, pci_id=pci, current=MigApi.mig.get(i, False), pending=MigApi.mig.get(i, False),
                     supported=True) for i, pci in enumerate(PCIS)]

    def gpu_host_names(self, host):
        return ["esx-01"]

    def ssh_running(self, host):
        return MigApi.running

    def start_ssh(self, host):
        self.calls.append(("start_ssh", host["name"]))
        if MigApi.fail == "start":
            raise VsphereError("StartService: NoPermission")
        MigApi.running = True

    def stop_ssh(self, host):
        self.calls.append(("stop_ssh", host["name"]))
        if MigApi.fail == "stop":
            raise VsphereError("StopService: HostConfigFault")
        MigApi.running = False


class Shell:
    """nvidia-smi on the fake host: answers only while the SSH service runs (as the host's listener)."""

    def __init__(self, options):
        self.options = options

    @staticmethod
    def mig_modes(host):
        if not MigApi.running:
            raise esxi_gpu_config.ShellError("host %s: SSH failed: Connection refused" % host)
        # nvidia-smi's own numbering and PCI form, in the other order
        return [dict(index=1 - i, pci_id="00000000:%s" % pci[5:].upper(), current=MigApi.mig.get(i, False),
                     pending=MigApi.mig.get(i, False), supported=True) for i, pci in enumerate(PCIS)]

    @staticmethod
    def set_mig(host, on, indexes):
        if MigApi.fail == "nvidia-smi":
            raise esxi_gpu_config.ShellError("host %s: nvidia-smi: exit 1: Unknown Error" % host)
        FakeGpuApi.calls.append(("nvidia-smi", indexes, on))
        for smi in indexes:
            MigApi.mig[1 - smi] = on


@pytest.fixture
def api(monkeypatch):
    FakeGpuApi.options, FakeGpuApi.records, FakeGpuApi.graphics, FakeGpuApi.vms = "", {}, None, []
    FakeGpuApi.calls, FakeGpuApi.fail, FakeGpuApi.boot = [], None, 1
    MigApi.mig, MigApi.running, MigApi.fail = {}, False, None
    monkeypatch.setattr(esxi_gpu_config, "GpuConfigApi", MigApi)
    monkeypatch.setattr(esxi_gpu_config, "EsxiShell", Shell)
    monkeypatch.setattr(_gpu_config_reader, "gpu_pci_ids", lambda devices: list(devices or []))
    monkeypatch.setattr(_gpu_config_reader, "ssh_running", lambda host: MigApi.running)
    monkeypatch.setattr(esxi_gpu_config._esxi, "boot_stamp", str)  # pylint: disable=protected-access
    return MigApi


WARNINGS = []


def set_geometry(check_mode=False, diff=False):
    """One run on esx-01 asking MIG mode on GPU 1 only; the result (the run's warnings in WARNINGS)."""
    module = Module(dict(defaults(esxi_gpu_config.ARGUMENT_SPEC), host="esx-01", mig_geometry=[[1]], reboot=True),
                    partial={}, check_mode=check_mode, diff=diff)
    with pytest.raises(Exited) as exc:
        Runner(module, esxi_gpu_config.GpuConfig(module)).run()
    WARNINGS[:] = module.warnings
    return exc.value.result


def test_the_service_is_started_for_the_step_and_stopped_after_and_gpus_matched_by_pci(api):
    check = set_geometry(check_mode=True, diff=True)
    assert check["hosts"]["esx-01"]["ssh_service"] == "started and stopped" and api.calls == []
    assert check["diff"]["before"]["esx-01"]["mig"] == {"0": "disabled", "1": "disabled"}
    assert check["diff"]["after"]["esx-01"]["mig"] == {"0": "disabled", "1": "enabled"}
    res = set_geometry()
    assert res["changed"] and res["hosts"]["esx-01"]["ssh_service"] == "started and stopped", res
    # GPU 1 in PCI order is nvidia-smi's 0 here
    assert api.calls == [("enter", "esx-01"), ("start_ssh", "esx-01"), ("nvidia-smi", [0], True),
                         ("stop_ssh", "esx-01"), ("exit", "esx-01")]
    assert api.mig == {1: True} and api.running is False
    assert res["hosts"]["esx-01"]["mig"]["set"] == [1] and res["hosts"]["esx-01"]["mig"]["after"] == {
        "0": "disabled", "1": "enabled"}


def test_a_running_service_is_left_running(api):
    api.running = True
    res = set_geometry()
    assert res["hosts"]["esx-01"]["ssh_service"] == "already running", res
    assert ("start_ssh", "esx-01") not in api.calls and ("stop_ssh", "esx-01") not in api.calls and api.running


def test_nvidia_smi_failing_stops_the_service_and_says_what_was_left(api):
    api.fail = "nvidia-smi"
    res = set_geometry()
    assert res.get("failed") and "set MIG mode with nvidia-smi" in res["msg"], res
    assert "SSH service TSM-SSH: started and stopped; MIG mode set so far: none (a plain rerun resumes)" in res["msg"]
    assert res["ssh_service"] == "started and stopped" and res["mig_set"] == {} and api.running is False
    assert res["hosts_in_maintenance"] == ["esx-01"]


def test_a_service_that_does_not_start_fails_before_any_command(api):
    api.fail = "start"
    res = set_geometry()
    assert res.get("failed") and "start the SSH service TSM-SSH: StartService: NoPermission" in res["msg"], res
    assert [c for c in api.calls if c[0] == "nvidia-smi"] == [] and ("stop_ssh", "esx-01") not in api.calls
    assert res["ssh_service"] == "not used", res


def test_a_service_that_does_not_stop_is_a_warning_and_the_result_says_so(api):
    api.fail = "stop"
    res = set_geometry()
    assert res["changed"] and not res.get("failed"), res
    assert res["hosts"]["esx-01"]["ssh_service"] == "started and left running", res
    assert any("could not be stopped" in w and "TSM-SSH" in w for w in WARNINGS), WARNINGS
    assert api.mig == {1: True}


def test_a_host_already_at_the_geometry_never_opens_a_shell(api):
    api.mig = {1: True}
    res = set_geometry()
    assert not res["changed"] and res["hosts"]["esx-01"]["ssh_service"] == "not used", res
    assert api.calls == []
