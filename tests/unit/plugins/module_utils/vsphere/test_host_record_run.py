"""The host record names the run that wrote it (E(GPUPOOL_RUN_ID), the run lease's holder): a change
writes it, the run alone is no change and keeps no record alive."""
import json

from pyVmomi import vim

from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _esxi_host


class _Client:
    def __init__(self):
        self.writes = []

    def custom_field_key(self, _name, _type):
        return 7

    @staticmethod
    def custom_value(values, key):
        return next((v.value for v in values or [] if v.key == key), None)

    def set_custom_field(self, _obj, name, text):
        self.writes.append((name, text))


class _Host:
    def __init__(self, record=None):
        values = [vim.CustomFieldsManager.StringValue(key=7, value=json.dumps(record))] if record else []
        self.props = {"customValue": values}
        self.obj = object()

    def get(self, name):
        return self.props.get(name)


def _ops():
    client = _Client()
    return _esxi_host.HostOps(client), client


def test_a_change_names_the_run(monkeypatch):
    monkeypatch.setenv("GPUPOOL_RUN_ID", "awx-job-42")
    ops, client = _ops()
    host = _Host()
    ops.update_state(host, maintenance="gpupool.vcf 2026-12-02T07:00:00Z")
    assert [json.loads(text) for _n, text in client.writes] == [
        {"maintenance": "gpupool.vcf 2026-12-02T07:00:00Z", "run": "awx-job-42"}]
    assert ops.state(host)["run"] == "awx-job-42"


def test_no_change_writes_nothing_even_from_another_run(monkeypatch):
    monkeypatch.setenv("GPUPOOL_RUN_ID", "awx-job-43")
    ops, client = _ops()
    host = _Host({"powered_off": ["vm-1"], "run": "awx-job-42"})
    ops.update_state(host, powered_off=["vm-1"])
    assert client.writes == []


def test_a_record_emptied_is_removed_run_and_all(monkeypatch):
    monkeypatch.setenv("GPUPOOL_RUN_ID", "awx-job-43")
    ops, client = _ops()
    host = _Host({"powered_off": ["vm-1"], "run": "awx-job-42"})
    ops.update_state(host, powered_off=None)
    assert client.writes == [("gpupool.vcf.host-state", "")]


def test_outside_a_playbook_the_last_run_is_kept(monkeypatch):
    monkeypatch.delenv("GPUPOOL_RUN_ID", raising=False)
    ops, client = _ops()
    host = _Host({"powered_off": ["vm-1"], "run": "awx-job-42"})
    ops.update_state(host, maintenance="x")
    assert json.loads(client.writes[0][1]) == {"maintenance": "x", "powered_off": ["vm-1"], "run": "awx-job-42"}
