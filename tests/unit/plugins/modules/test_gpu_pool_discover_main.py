"""gpu_pool_discover through main(), over the fakes of gpu_pool_capture's test file (tests/lib/platform_readers.py:
readers that answer what the shipped capture of the example platform holds): an existing file without force is refused before anything is
read; a Kubernetes link that cannot be read is named in the file's header and the design is written from the
rest; check mode writes nothing."""
import pathlib

import pytest
import yaml

from ansible_collections.gpupool.vcf.plugins.modules import gpu_pool_discover
from tests.lib.module_main import VSPHERE, run_main
from tests.lib.platform_readers import LINK_FAILURES, PASSWORD, fakes, replace_reader


@pytest.fixture
def discover_readers(monkeypatch):
    return fakes(monkeypatch, gpu_pool_discover)


def discover(dest, check_mode=False, **params):
    return run_main(gpu_pool_discover, dict(VSPHERE, password=PASSWORD, dest=str(dest), **params),
                    check_mode=check_mode)


def test_discover_an_existing_file_without_force_is_refused_before_anything_is_read(discover_readers, tmp_path):
    fake = discover_readers()
    dest = tmp_path / "design.yml"
    dest.write_text("kept: true\n")
    res = discover(dest, supervisor_kubeconfig=str(tmp_path / "k"))
    assert res["failed"] and "it exists; give force: true" in res["msg"] and "Nothing was written" in res["msg"]
    assert fake.calls == [] and dest.read_text() == "kept: true\n"
    forced = discover(dest, force=True)
    assert not forced.get("failed"), forced.get("msg")
    assert forced["changed"] is True and yaml.safe_load(dest.read_text()) == forced["design"]


def test_discover_a_link_that_cannot_be_read_is_named_and_the_design_written_from_the_rest(discover_readers, tmp_path):
    fake = discover_readers(broken=["guest"])
    dest = tmp_path / "design.yml"
    res = discover(dest, supervisor_kubeconfig=str(tmp_path / "sv"), kubeconfig=str(tmp_path / "g"))
    assert not res.get("failed"), res.get("msg")
    assert sorted(res["links_not_read"]) == ["guest"] and "Forbidden" in res["links_not_read"]["guest"]
    assert fake.calls == ["esxi", "platform", "vks", "guest"]
    text = dest.read_text()
    assert "Links not read" in text and "guest: could not read the PriorityClasses: Forbidden" in text
    assert yaml.safe_load(text) == res["design"] and "guest" not in res["design"]
    # the Supervisor was read: the node pools are in the design
    assert any((p.get("node_pool") or {}).get("vks_cluster") for p in res["design"]["pools"])
    assert PASSWORD not in text


def test_discover_check_mode_writes_nothing(discover_readers, tmp_path):
    fake = discover_readers()
    dest = tmp_path / "design.yml"
    res = discover(dest, check_mode=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True and res["links_not_read"] == {} and not dest.exists()
    assert fake.calls == ["esxi", "platform"] and res["design"]["clusters"]
    assert pathlib.Path(res["dest"]) == dest


@pytest.mark.parametrize("error", LINK_FAILURES)
def test_discover_a_kubernetes_client_failure_names_the_link(discover_readers, tmp_path, monkeypatch, error):
    discover_readers()
    exc = error()
    replace_reader(monkeypatch, gpu_pool_discover, "read_vks", exc)
    dest = tmp_path / "design.yml"
    res = discover(dest, supervisor_kubeconfig=str(tmp_path / "sv"))
    assert not res.get("failed"), res.get("msg")
    assert res["links_not_read"] == {"vks": "%s: %s" % (type(exc).__name__, exc)} and dest.exists()


def test_discover_a_bug_in_a_link_reader_reaches_the_runner_and_nothing_is_written(discover_readers, tmp_path,
                                                                                   monkeypatch):
    discover_readers()

    def bug():
        return None.items()  # an AttributeError of the collection's own code, not of the link
    replace_reader(monkeypatch, gpu_pool_discover, "read_vks", bug)
    dest = tmp_path / "design.yml"
    res = discover(dest, supervisor_kubeconfig=str(tmp_path / "sv"))
    assert res["failed"] and "unexpected AttributeError:" in res["msg"] and "'items'" in res["msg"], res
    assert "links_not_read" not in res and not dest.exists()
