"""gpu_usage through main(): Prometheus (and vCenter for the VMs outside Kubernetes) replaced by fakes of the
clients that its rooms build from its options; the reports written into the test's folder. Check mode
predicts the files a real run writes and writes none; a rerun over the same answers writes nothing."""
import json
import os
import stat

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus import _prom
from ansible_collections.gpupool.vcf.plugins.module_utils.prometheus._prom import PromError
from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _vcenter_session
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._vsphere import VsphereError
from ansible_collections.gpupool.vcf.plugins.modules import gpu_usage
from tests.lib.module_docs import leaked, missing_keys, secret_options
from tests.lib.module_main import run_main

PROM = "https://prometheus.example.com:9090"
TOKEN = "prom-bearer-9f3a"
VC_PASSWORD = "vc-pass-77e1"
START, END = "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"  # one day: 24 GPU-hours per GPU held all along
STEP = 300.0


def sample(value, **labels):
    return {"metric": labels, "value": [0.0, str(value)]}


class FakeProm:
    """Prometheus with one tenant holding two full GPUs of the inference pool all day: the allocation query
    sums the samples of the period (288 samples of 5 min, two GPUs each); ``fail`` raises on a query."""

    made = []
    calls = []
    fail = None

    def __init__(self, url, **kwargs):
        FakeProm.made.append(dict(kwargs, url=url))

    def query(self, expr, at=None):
        FakeProm.calls.append(("query", expr))
        if FakeProm.fail is not None:
            raise FakeProm.fail
        if "kube_node_info" in expr:
            return [sample(1, node="tkc-gpu-1")]
        if "kube_pod_container_resource_requests" in expr:
            return [sample(2 * 288, namespace="team-a", pool="inference", profile="nvidia_h100-80c",
                           resource="nvidia_com_gpu")]
        return []

    def query_range(self, expr, start, end, step):
        FakeProm.calls.append(("query_range", expr))
        return [{"metric": {"namespace": "team-a"}, "values": [[start, str(2 * 288)]]}]


class FakeVcenter:
    made = []
    closed = 0

    def __init__(self, hostname, username, password, **kwargs):
        FakeVcenter.made.append(dict(kwargs, hostname=hostname, username=username, password=password))

    def close(self):
        FakeVcenter.closed += 1


def fake_vgpu_vms(client, start):
    assert isinstance(client, FakeVcenter)
    if fake_vgpu_vms.fail is not None:
        raise fake_vgpu_vms.fail
    vms = [dict(moid="vm-1", name="notebook-vm", resource_pool="rp-a", powered_on=True, boot_time=0.0,
                profiles=["nvidia_h100-1-10c"]),
           dict(moid="vm-2", name="tkc-gpu-1", resource_pool="rp-a", powered_on=True, boot_time=0.0,
                profiles=["nvidia_h100-80c"])]
    pools = {"rp-root": ("Resources", None), "rp-ns": ("Namespaces", "rp-root"), "rp-a": ("team-a", "rp-ns")}
    return vms, pools, {}


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    FakeProm.made, FakeProm.calls, FakeProm.fail = [], [], None
    FakeVcenter.made, FakeVcenter.closed = [], 0
    fake_vgpu_vms.fail = None
    monkeypatch.setattr(_prom, "PromClient", FakeProm)  # made by the room's prom_client from the options
    monkeypatch.setattr(_vcenter_session, "VsphereClient", FakeVcenter)
    monkeypatch.setattr(gpu_usage, "read_vgpu_vms", fake_vgpu_vms)


def args(tmp_path=None, **extra):
    out = dict(prometheus_url=PROM, bearer_token=TOKEN, start=START, end=END, step="5m")
    if tmp_path is not None:
        out.update(json_path=str(tmp_path / "usage.json"), csv_path=str(tmp_path / "usage.csv"),
                   html_path=str(tmp_path / "usage.html"))
    out.update(extra)
    return out


def test_the_report_has_every_documented_key_and_the_gpu_hours(tmp_path):
    result = run_main(gpu_usage, args())
    assert not result.get("failed"), result.get("msg")
    assert missing_keys(gpu_usage, result) == []
    assert result["start"] == START and result["end"] == END and result["step_s"] == STEP
    [row] = result["rows"]
    assert (row["namespace"], row["pool"], row["profile"], row["resource"]) == (
        "team-a", "inference", "nvidia_h100-80c", "nvidia.com/gpu")
    assert row["gpu_hours"] == pytest.approx(48.0) and result["gpu_hours"] == pytest.approx(48.0)
    assert result["cost"] is None and result["vms_read"] is False and result["vm_rows"] == []
    assert result["files"] == [] and result["files_changed"] == [] and result["changed"] is False
    assert FakeProm.made == [dict(bearer_token=TOKEN, username=None, password=None, validate_certs=True,
                                  ca_path=None, allow_plain_http=False, plain_http_option="allow_plain_http",
                                  timeout=60, attempts=3, url=PROM)]


def test_check_mode_predicts_the_files_and_writes_none_then_the_real_run_writes_them_once(tmp_path):
    checked = run_main(gpu_usage, args(tmp_path), check_mode=True)
    assert not checked.get("failed"), checked.get("msg")
    assert os.listdir(str(tmp_path)) == []  # nothing written in check mode
    real = run_main(gpu_usage, args(tmp_path))
    assert checked == real
    paths = [str(tmp_path / n) for n in ("usage.json", "usage.csv", "usage.html")]
    assert real["changed"] is True and real["files"] == paths and real["files_changed"] == paths
    for path in paths:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    report = json.loads((tmp_path / "usage.json").read_text())
    assert report["gpu_hours"] == pytest.approx(48.0) and report["rows"][0]["namespace"] == "team-a"
    assert "team-a" in (tmp_path / "usage.csv").read_text() and "<svg" in (tmp_path / "usage.html").read_text()

    again = run_main(gpu_usage, args(tmp_path))
    assert again["changed"] is False and again["files_changed"] == [] and again["files"] == paths
    again_checked = run_main(gpu_usage, args(tmp_path), check_mode=True)
    assert again_checked["changed"] is False and again_checked["files_changed"] == []


def test_a_stale_report_is_replaced_and_named(tmp_path):
    run_main(gpu_usage, args(tmp_path))
    (tmp_path / "usage.csv").write_text("old\n")
    os.chmod(str(tmp_path / "usage.csv"), 0o600)
    result = run_main(gpu_usage, args(tmp_path))
    assert result["changed"] is True and result["files_changed"] == [str(tmp_path / "usage.csv")]
    assert (tmp_path / "usage.csv").read_text() != "old\n"
    # the module's atomic_move keeps the mode of the file it replaces (a report the user made private stays so)
    assert stat.S_IMODE(os.stat(str(tmp_path / "usage.csv")).st_mode) == 0o600


def test_diff_mode_gives_no_diff(tmp_path):
    result = run_main(gpu_usage, args(tmp_path), diff=True)
    assert "diff" not in result and result["changed"] is True


@pytest.mark.parametrize("bad, message", [
    (dict(prometheus_url="prometheus:9090"), "prometheus_url must be an http:// or https:// URL, not 'prometheus:9090'"),
    (dict(step="0.5s"), "step must be a whole number of seconds, 1 or more, not '0.5s'"),
    (dict(start="last month"), "start: "),
    (dict(prometheus_url=None), "Unable to report GPU usage: give prometheus_url (or PROMETHEUS_URL) for the pods, "
                                "vcenter_hostname for the vGPU VMs, or both. Nothing was read."),
])
def test_bad_input_is_refused_before_any_client_is_made(tmp_path, monkeypatch, bad, message):
    monkeypatch.delenv("PROMETHEUS_URL", raising=False)
    result = run_main(gpu_usage, args(tmp_path, **bad))
    assert result["failed"] is True and message in result["msg"], result["msg"]
    assert FakeProm.made == [] and FakeProm.calls == [] and FakeVcenter.made == []
    assert os.listdir(str(tmp_path)) == []


def test_token_and_basic_auth_together_are_refused():
    result = run_main(gpu_usage, args(username="u", password="p"))
    assert result["failed"] is True and result["msg"] == "parameters are mutually exclusive: bearer_token|username", \
        result["msg"]
    assert FakeProm.made == []


def test_a_prometheus_error_names_the_query_and_writes_no_file(tmp_path):
    FakeProm.fail = PromError("Prometheus answered 503: service unavailable", status=503)
    result = run_main(gpu_usage, args(tmp_path))
    assert result["failed"] is True
    assert result["msg"].startswith("Unable to query allocation from Prometheus: Prometheus answered 503"), result
    assert os.listdir(str(tmp_path)) == []
    assert TOKEN not in repr(result)


def test_an_unwritable_report_path_fails_naming_the_file(tmp_path):
    where = tmp_path / "no-such-dir" / "usage.json"
    result = run_main(gpu_usage, args(json_path=str(where)))
    assert result["failed"] is True and result["msg"].startswith("Unable to write report %s: " % where), result


def test_the_vgpu_vms_outside_kubernetes_are_counted_and_the_nodes_left_out():
    result = run_main(gpu_usage, args(vcenter_hostname="vcenter.example.com", vcenter_username="reader",
                                      vcenter_password=VC_PASSWORD))
    assert not result.get("failed"), result.get("msg")
    assert result["vms_read"] is True and result["vms_left_out"] == ["tkc-gpu-1"]  # a node seen in Prometheus
    [row] = result["vm_rows"]
    assert (row["namespace"], row["profile"], row["vms"]) == ("team-a", "nvidia_h100-1-10c", 1)
    assert row["vgpu_hours"] == pytest.approx(24.0)
    assert FakeVcenter.made[0]["password"] == VC_PASSWORD and FakeVcenter.closed == 1


def test_a_vcenter_error_names_the_read_and_the_session_is_closed():
    fake_vgpu_vms.fail = VsphereError("the session was logged out")
    result = run_main(gpu_usage, args(vcenter_hostname="vcenter.example.com", vcenter_password=VC_PASSWORD))
    assert result["failed"] is True
    assert result["msg"] == ("Unable to read the vGPU VMs and their power events from vCenter vcenter.example.com: "
                             "the session was logged out"), result["msg"]
    assert FakeVcenter.closed == 1


def test_no_secret_is_in_the_result(tmp_path):
    assert secret_options(gpu_usage.ARGUMENT_SPEC) == ["bearer_token", "password", "vcenter_password"]
    result = run_main(gpu_usage, args(tmp_path, vcenter_hostname="vcenter.example.com", vcenter_password=VC_PASSWORD))
    assert not result.get("failed"), result.get("msg")
    assert leaked(result, [TOKEN, VC_PASSWORD]) == []
    for name in ("usage.json", "usage.csv", "usage.html"):
        assert leaked((tmp_path / name).read_text(), [TOKEN, VC_PASSWORD]) == []
