"""Reading a DLS appliance as a whole: the bounded wait until it answers, the staged read."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._appliance import lease_list, read_appliance, wait_answering
from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsError
from tests.lib.clock import Clock


class Client:
    """Logins fail with the given errors first; calls answer from a table."""

    def __init__(self, login_errors=(), answers=None):
        self.login_errors = list(login_errors)
        self.answers = answers or {}
        self.logins = 0

    def login(self):
        self.logins += 1
        if self.login_errors:
            raise self.login_errors.pop(0)

    def call(self, method, path):
        answer = self.answers[path]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_wait_answering_waits_out_a_booting_appliance():
    clock = Clock()
    client = Client([DlsError("refused", kind="refused")] * 3)
    waited = wait_answering(client, 120, sleep=clock.sleep, clock=clock)
    assert client.logins == 4 and waited == pytest.approx(sum(clock.slept)) and len(clock.slept) == 3


def test_wait_answering_is_bounded():
    clock = Clock()
    client = Client([DlsError("cannot reach dls:443: connection refused", kind="refused")] * 1000)
    with pytest.raises(DlsError, match="still not answering after 3[0-9] s"):
        wait_answering(client, 30, sleep=clock.sleep, clock=clock)
    assert 30 <= clock.now <= 31


def test_wait_answering_does_not_wait_out_wrong_credentials_or_zero():
    clock = Clock()
    with pytest.raises(DlsError, match="Invalid"):
        wait_answering(Client([DlsError("answered 401 Invalid username", status=401)]), 600, sleep=clock.sleep,
                       clock=clock)
    with pytest.raises(DlsError, match="^refused$"):
        wait_answering(Client([DlsError("refused", kind="refused")]), 0, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


ME = {"name": "dls_admin", "orgName": "org", "userScope": {"virtualGroupId": 3, "licenseServerId": "ls"}}
SI = {"high_availability_config": {"config": {"nodeList": [{"node_id": "n1"}]}}}
ANSWERS = {"/auth/v1/user/me": ME, "/service_instance_manager/v1/service-instance": SI,
           "/admin/v1/org/org/virtual-groups/3/license-servers/ls": {"licenseServer": {"scopeReference": "s"}},
           "/admin/v1/org/org/virtual-groups/3/leases/all?license_server_ids=ls": {"leases": [{"id": 1}]}}


def test_read_appliance_every_step():
    out = read_appliance(Client(answers=dict(ANSWERS)), "dls:443")
    assert out == dict(where="dls:443", error=None, stage=None, transient=False, user="dls_admin",
                       service_instance=SI, license_server="ls", leases=[{"id": 1}])


def test_read_appliance_names_the_failing_step():
    answers = dict(ANSWERS)
    missing = DlsError("answered 404 License server not found", status=404)
    answers["/admin/v1/org/org/virtual-groups/3/license-servers/ls"] = missing
    out = read_appliance(Client(answers=answers), "dls:443")
    assert out["stage"] == "license_server" and out["license_server"] is None and out["service_instance"] == SI
    assert out["error"] == "answered 404 License server not found" and out["transient"] is False
    answers["/service_instance_manager/v1/service-instance"] = DlsError("answered 503", status=503)
    out = read_appliance(Client(answers=answers), "dls:443")
    assert out["stage"] == "service_instance" and out["transient"] is True


def test_lease_list():
    assert lease_list([1]) == [1] and lease_list({"leases": []}) == []
    with pytest.raises(DlsError):
        lease_list({"items": []})
