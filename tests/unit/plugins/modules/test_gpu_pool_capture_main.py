"""gpu_pool_capture through main() (gpu_pool_discover's file uses the same fakes): the arguments parsed by
AnsibleModule, the readers replaced by fakes (tests/lib/platform_readers.py) that answer what the shipped
capture of the example platform holds (tests/fixtures/captures/example.json). For each: an existing file
without force is refused before anything is read; a Kubernetes link that cannot be read is named (and, for
discover, in the file's header) and the rest is written; check mode writes nothing; the file holds no password."""
import json

import pytest

from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_capture
from tests.lib.module_main import VSPHERE, run_main
from tests.lib.platform_readers import LINK_FAILURES, PASSWORD, fakes, replace_reader


@pytest.fixture
def readers(monkeypatch):
    return fakes(monkeypatch, gpu_pool_capture)


def run(dest, check_mode=False, **params):
    return run_main(gpu_pool_capture, dict(VSPHERE, password=PASSWORD, dest=str(dest), **params), check_mode=check_mode)


def test_capture_an_existing_file_without_force_is_refused_before_anything_is_read(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    dest.write_text("kept\n")
    res = run(dest)
    assert res["failed"] and "it exists; give force: true" in res["msg"] and "Nothing was written" in res["msg"]
    assert fake.calls == [] and dest.read_text() == "kept\n"
    forced = run(dest, force=True)
    assert not forced.get("failed"), forced.get("msg")
    assert forced["changed"] is True and json.loads(dest.read_text())["format_version"] == 1


def test_capture_a_link_that_cannot_be_read_is_named_and_the_rest_is_written(readers, tmp_path):
    fake = readers(broken=["vks"])
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv.kubeconfig"), kubeconfig=str(tmp_path / "g.kubeconfig"))
    assert not res.get("failed"), res.get("msg")
    assert sorted(res["links_not_read"]) == ["vks"] and "Connection refused" in res["links_not_read"]["vks"]
    assert res["sections"] == ["guest", "vsphere"]
    assert fake.calls == ["esxi", "platform", "vks", "guest", "guest objects", "guest objects"]
    record = json.loads(dest.read_text())
    assert "vks" not in record and "guest" in record
    assert record["guest"]["objects"] == fake.record["guest"]["objects"] and res["counts"]["guest_objects"] > 0
    assert oct(dest.stat().st_mode & 0o777) == "0o600" and PASSWORD not in dest.read_text()


def test_capture_records_the_vks_topology_and_the_guest_objects(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {} and res["sections"] == ["guest", "vks", "vsphere"]
    record = json.loads(dest.read_text())
    assert record["vks"] == fake.record["vks"] and record["guest"] == fake.record["guest"]


def test_capture_check_mode_writes_nothing(readers, tmp_path):
    fake = readers()
    dest = tmp_path / "capture.json"
    res = run(dest, check_mode=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["dest"] == str(dest) and res["sections"] == ["vsphere"]
    assert fake.calls == ["esxi", "platform"] and not dest.exists()
    assert res["counts"]["hosts"] == len(fake.record["vsphere"]["hosts"])


@pytest.mark.parametrize("error", LINK_FAILURES)
def test_capture_a_kubernetes_client_failure_names_the_link_and_writes_the_rest(readers, tmp_path, monkeypatch, error):
    readers()
    exc = error()
    replace_reader(monkeypatch, gpu_pool_capture, "read_guest_design", exc)
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {"guest": "%s: %s" % (type(exc).__name__, exc)}
    assert res["sections"] == ["vks", "vsphere"] and dest.exists()


def test_capture_a_bug_in_a_link_reader_reaches_the_runner_and_nothing_is_written(readers, tmp_path, monkeypatch):
    readers()
    # a KeyError of the collection's own code, not of the link
    replace_reader(monkeypatch, gpu_pool_capture, "read_guest_design", lambda: {}["priority_classes"])
    dest = tmp_path / "capture.json"
    res = run(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert res["failed"] and "unexpected KeyError: 'priority_classes'" in res["msg"], res
    assert "links_not_read" not in res and not dest.exists()
