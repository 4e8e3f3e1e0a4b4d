"""The direct-path-devices reader/writer over the REST client: one GET per host unless a page comes back
full, and one configure task per device whose answer gives the impacts."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._direct_path import DirectPathError
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere import _direct_path_api
from ansible_collections.gpupool.vcf.plugins.module_utils.vsphere._direct_path_api import DirectPathApi


class FakeRest:
    def __init__(self, pages=(), result=None):
        self.pages = list(pages)
        self.result = result
        self.calls = []

    def get(self, path, params=None):
        self.calls.append(("GET", path, params))
        return self.pages.pop(0)

    def post(self, path, body=None, params=None):
        self.calls.append(("POST", path, body, params))
        return "7:com.vmware.vcenter.host.hardware.direct_path_devices"

    def wait_for_task(self, task_id, timeout=600, what="task"):
        self.calls.append(("WAIT", task_id, timeout, what))
        return self.result


def item(device, mode="VGPU_SAME_SIZE"):
    return {"device": device, "info": {"current_mode": mode}}


def test_devices_one_get_for_a_host():
    rest = FakeRest([{"items": [item("0000:3b:00.0"), item("0000:5e:00.0", "VGPU_MIXED_SIZE")]}])
    devices = DirectPathApi(rest).devices("host-18")
    assert devices == {"0000:3b:00.0": {"current_mode": "VGPU_SAME_SIZE"}, "0000:5e:00.0": {"current_mode": "VGPU_MIXED_SIZE"}}
    assert rest.calls == [("GET", "/api/vcenter/host/host-18/hardware/direct-path-devices", None)]


def test_devices_next_page_only_after_a_full_one(monkeypatch):
    monkeypatch.setattr(_direct_path_api, "DEFAULT_PAGE", 2)
    rest = FakeRest([{"items": [item("a"), item("b")]}, {"items": [item("c")]}])
    assert sorted(DirectPathApi(rest).devices("host-1")) == ["a", "b", "c"]
    assert [c[2] for c in rest.calls] == [None, {"marker": "b"}]


def test_configure_sends_the_spec_as_a_task_and_returns_the_answered_impacts():
    rest = FakeRest(result={"configure_impacts": ["NONE", "HOST_REBOOT_REQUIRED"]})
    impacts = DirectPathApi(rest, task_timeout=30).configure("host-18", "0000:3b:00.0", "mixed_size")
    assert impacts == ["HOST_REBOOT_REQUIRED"]
    assert rest.calls[0] == ("POST", "/api/vcenter/host/host-18/hardware/direct-path-devices",
                             {"device": "0000:3b:00.0", "new_mode": "VGPU_MIXED_SIZE"},
                             {"action": "configure", "vmw-task": "true"})
    assert rest.calls[1][:3] == ("WAIT", "7:com.vmware.vcenter.host.hardware.direct_path_devices", 30)


def test_configure_refuses_a_word_without_a_mode_before_any_request():
    rest = FakeRest()
    with pytest.raises(DirectPathError):
        DirectPathApi(rest).configure("host-18", "0000:3b:00.0", "multi_instance_gpu")
    assert rest.calls == []
