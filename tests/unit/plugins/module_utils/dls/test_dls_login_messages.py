"""The DLS client's login failures name the appliance and the cause, never the password: what the
licensing link of site.yml shows the user (its task no longer hides the module's output)."""
import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.dls._nls import DlsClient, DlsError

PASSWORD = "s3cret-Passw0rd"


class OneAnswer(DlsClient):
    """Every request answers with ``error``."""

    def __init__(self, error):
        super().__init__("dls.example.com", 8443, "dls_admin", PASSWORD, timeout=2, sleep=lambda s: None)
        self.error = error

    def _once(self, method, path, body=None, auth=True):
        raise self.error


@pytest.mark.parametrize("error, want", [
    (DlsError("answered 401 Invalid username or password", status=401),
     "login refused for user dls_admin at DLS appliance dls.example.com:8443 (POST /auth/v1/login: answered 401 "
     "Invalid username or password): check the user name and password"),
    (DlsError("cannot reach dls.example.com:8443: connection refused", kind="refused"),
     "DLS appliance unreachable at dls.example.com:8443 (POST /auth/v1/login: cannot reach dls.example.com:8443: "
     "connection refused (3 attempts))"),
    (DlsError("dls.example.com:8443 did not answer within 2 s", kind="timeout"),
     "DLS appliance unreachable at dls.example.com:8443 (POST /auth/v1/login: dls.example.com:8443 did not answer "
     "within 2 s (3 attempts))"),
    (DlsError("answered 500 boom", status=500),
     "login to DLS appliance dls.example.com:8443 failed (POST /auth/v1/login: answered 500 boom (three times))"),
])
def test_login_failure_names_appliance_and_cause(error, want):
    client = OneAnswer(error)
    with pytest.raises(DlsError) as err:
        client.login()
    assert str(err.value) == want
    assert PASSWORD not in str(err.value)
    assert err.value.status == error.status and err.value.kind == error.kind
